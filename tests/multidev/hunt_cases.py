"""Distributions on a device group, from a bug hunt (tests/test_group_hunt.py runs this file
in a pytest session of its own with three PoCL CPU devices, "basic basic basic": a part may
hold no rows). Every result is compared with NumPy.

Not collected by the normal test run (the file name does not start with test_)."""

from __future__ import annotations

import numpy as np
import pytest
from group_cases import GROUP, group  # noqa: F401  (the group fixture, autouse)

import skelpy as sk

DISTS = ["single", "block", "copy", sk.Overlap(0), sk.Overlap(1), sk.Overlap(3)]
ADD = lambda a, b: a + b  # noqa: E731


@pytest.mark.parametrize("rows", [0, 1, 2, 4])
def test_every_redistribution_keeps_the_data_and_skeletons_see_it(rows):
    a = np.arange(rows * 3, dtype=np.int32).reshape(rows, 3) - 5
    double = sk.Map(lambda x: 2 * x)
    for first in DISTS:
        m = sk.Matrix(a, distribution=first)
        assert m.distribution == first
        for then in DISTS:
            m.redistribute(then)
            assert m.distribution == then
            np.testing.assert_array_equal(m.to_numpy(), a, err_msg=f"{first} -> {then}")
            out = double(m)                       # takes block, on the device side
            assert m.distribution == "block" and out.distribution == "block"
            np.testing.assert_array_equal(out.to_numpy(), 2 * a, err_msg=f"{first} -> {then}")
            m.redistribute(then)


def test_empty_inputs_take_the_distributions_their_skeleton_needs():
    # was: an empty input of Scan kept its distribution (a non-empty one takes block), and
    # AllPairs' empty A and its B kept theirs (a non-empty A takes block and B copy)
    e = sk.Vector(np.zeros(0, np.int32), distribution="single")
    out = sk.Scan(ADD, identity=0)(e)
    assert e.distribution == "block" and out.distribution == "block"
    assert out.to_numpy().shape == (0,)
    a = sk.Matrix(np.zeros((0, 3), np.float32), distribution="copy")
    b = sk.Matrix(np.ones((4, 3), np.float32), distribution="single")
    c = sk.AllPairs(zip=lambda x, y: x * y, reduce=ADD)(a, b)
    assert (a.distribution, b.distribution, c.distribution) == ("block", "copy", "block")
    assert c.to_numpy().shape == (0, 4)
    none = sk.Matrix(np.zeros((0, 3), np.float32), distribution="single")
    c = sk.AllPairs(zip=lambda x, y: x * y, reduce=ADD)(b, none)
    assert c.to_numpy().shape == (4, 0)
    assert (b.distribution, none.distribution) == ("block", "copy")
    # a call that fails leaves them as they were, empty or not
    bad = sk.Matrix(np.ones((2, 5), np.float32), distribution="single")
    with pytest.raises(sk.ShapeError):
        sk.AllPairs(zip=lambda x, y: x * y, reduce=ADD)(a, bad)
    assert a.distribution == "block" and bad.distribution == "single"


def test_a_max_fold_over_nan_gives_numpys_or_the_sequential_answer_on_any_split():
    f = np.array([np.nan, 0.1, 0.3, -1.0], np.float32)
    allowed = [np.max(f), np.nanmax(f)]
    mx = sk.Reduce(lambda a, b: max(a, b), identity=-np.inf)
    scan = sk.Scan(lambda a, b: max(a, b), identity=-np.inf, inclusive=True)
    try:
        for spec in (0, GROUP):               # one device, then the group
            sk.use(spec)
            r = mx(sk.Vector(f))
            assert any(np.array_equal(r, a, equal_nan=True) for a in allowed), (spec, r)
            s = scan(sk.Vector(f)).to_numpy()
            assert any(np.array_equal(s, a, equal_nan=True)
                       for a in (np.maximum.accumulate(f), np.fmax.accumulate(f))), (spec, s)
    finally:
        sk.use(GROUP)
