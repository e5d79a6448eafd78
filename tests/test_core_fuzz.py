"""Bug hunt on the core skeletons and the translator, as an outside suite would run it: muscles
a numba user writes, checked against Python/NumPy on NumPy scalars, at awkward sizes.

Each test pins a bug that was found here (the docstrings say what went wrong); few distinct
kernels, so the file stays cheap on a cold PoCL cache.
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skelpy as sk

HERE = Path(__file__).name


def python_map(f, *arrays):
    """``f`` over NumPy scalars, element by element: the reference of a Map/Zip."""
    with np.errstate(all="ignore"):
        return [f(*vals) for vals in zip(*arrays, strict=True)]


# -- `and` / `or` are Python's, not C's -------------------------------------------------------


def test_and_or_give_the_deciding_operand():
    """``a or b`` was emitted as C's ``a || b``: a bool (True) instead of ``a`` or ``b``."""
    a = np.array([0, 1, -2, 0, 5, 0, -128], np.int8)
    b = np.array([3, 0, 0, 0, 7, -9, 0], np.int8)

    def pick(x, y):
        return (x or y or 9) if x >= 0 else (x and y)

    got = sk.Zip(pick)(a, b).to_numpy()
    want = python_map(pick, a, b)
    assert got.dtype == np.int8
    assert got.tolist() == [int(v) for v in want] == [3, 1, 0, 9, 5, -9, 0]

    # float operands: NaN is true; a Python float operand promotes as NEP 50 says
    x = np.array([0.0, np.nan, -1.5, 2.0], np.float32)
    y = np.array([4.0, 5.0, 0.0, 0.0], np.float32)
    got = sk.Zip(lambda p, q: p and q or 2.5)(x, y).to_numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.array([2.5, 5.0, 2.5, 2.5], np.float32))


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from([0, 0, 0, 1, -3, 7, 100, -128]), min_size=0, max_size=600))
def test_reduce_and_scan_of_or_keep_order(values):
    """``a or b`` is associative but not commutative (the first non-zero): Reduce and Scan
    must fold in order. Before the fix it folded bools (every result was True or False)."""
    x = np.array(values, np.int8)
    first = sk.Reduce(lambda a, b: a or b, identity=0)
    scan = sk.Scan(lambda a, b: a or b, identity=0, inclusive=True)
    want = functools.reduce(lambda p, q: p or q, x, np.int8(0))
    got = first(x)
    assert got.dtype == np.int8 and int(got) == int(want)
    acc = list(itertools.accumulate(x, lambda p, q: p or q))
    out = scan(x).to_numpy()
    assert out.dtype == np.int8 and out.tolist() == [int(v) for v in acc]


# -- Python ints passed as extra arguments ----------------------------------------------------


def test_python_int_extra_in_python_arithmetic_keeps_its_value():
    """``x8 + s // 4`` with ``s = 300``: Python computes 300 // 4 = 75; skelpy passed ``s`` as
    int8 (it met int8 further up the expression), so 300 wrapped to 44 and it added 11."""
    x = np.arange(-3, 4, dtype=np.int8)
    f = sk.Map(lambda a, s: a + s // 4 - (s - 290))
    got = f(x, 300).to_numpy()
    assert got.dtype == np.int8
    assert got.tolist() == [int(v) for v in python_map(lambda a: a + 300 // 4 - 10, x)]


def test_python_int_extra_out_of_range_is_an_error_as_in_numpy():
    """``x8 + 300`` raises OverflowError in NumPy (NEP 50); with 300 passed as an extra
    argument skelpy wrapped it silently (added 44). Now a DTypeError naming the muscle."""
    x = sk.Vector(np.arange(5, dtype=np.uint8))
    f = sk.Map(lambda a, s: a + s)
    assert f(x, 250).to_numpy().tolist() == [250, 251, 252, 253, 254]   # fits: wraps as NumPy
    with pytest.raises(OverflowError):
        np.arange(5, dtype=np.uint8) + 300
    for bad in (300, -1):
        with pytest.raises(sk.DTypeError, match=rf"{HERE}:\d+.*{bad} out of bounds for uint8"):
            f(x, bad)
    assert x.to_numpy().tolist() == [0, 1, 2, 3, 4]      # a failed call changes nothing


# -- the identity must be neutral --------------------------------------------------------------


def test_non_neutral_identity_is_an_error_not_a_launch_dependent_answer():
    """``Reduce(add, 10)`` returned 10 + sum + 10 per partial result (2570 over 7 elements on
    PoCL, something else elsewhere); ``Scan`` likewise. Folding something with an identity
    that ``f(id, id)`` shows is not neutral is now a DTypeError naming the muscle's line;
    folding nothing still gives the identity (documented), and an identity that is neutral
    on the data (max from 0 over non-negative values) still works."""
    x = np.arange(-3, 4, dtype=np.int32)
    for skel in (sk.Reduce(lambda a, b: a + b, 10), sk.Scan(lambda a, b: a + b, 10),
                 sk.MapReduce(lambda a: a * 2, lambda a, b: a * b, 2)):
        with pytest.raises(sk.DTypeError, match=rf"{HERE}:\d+.*not the operator's neutral"):
            skel(x)
        empty = skel(np.zeros(0, np.int32))
        if isinstance(skel, sk.Scan):
            assert empty.shape == (0,)
        else:
            assert int(empty) in (10, 2)
    mm = sk.AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b, identity=1)
    with pytest.raises(sk.DTypeError, match="not the operator's neutral"):
        mm(np.ones((2, 3), np.float32), np.ones((4, 3), np.float32))
    assert sk.Reduce(lambda a, b: max(a, b), 0)(np.array([3, 9, 1], np.int32)) == 9


# -- typing that needs no kernel ---------------------------------------------------------------


def test_math_functions_of_integers_are_float64():
    """``math.sqrt(x)`` of an int8/int16/bool is a Python float in Python (and float64 in
    numba); it was typed as NumPy's ``np.sqrt`` (float16, computed as float32), losing
    precision. ``np.sqrt`` keeps NumPy's rule."""
    import math

    for dt in (np.bool_, np.int8, np.uint8, np.int16):
        x = np.ones(3, dt)
        for f in (lambda v: math.sqrt(v), lambda v: math.exp(v) + math.fabs(v),
                  lambda v: math.atan2(v, 2)):
            assert sk.Map(f).result_dtype(x) == np.float64
        assert sk.Map(lambda v: np.sqrt(v)).result_dtype(x) == np.float32
    assert sk.Map(lambda v: math.sqrt(v)).result_dtype(np.ones(3, np.float32)) == np.float32


def test_min_max_of_constants_meet_their_context_as_constants():
    """``min(-1, True)`` is the Python int -1; next to a uint32 that is out of bounds, as in
    NumPy (it was computed apart and wrapped to 4294967295, so ``min(min(-1, True), b)``
    gave ``b``)."""
    b = np.zeros(3, np.uint32)
    with pytest.raises(sk.TranslationError, match=rf"{HERE}:\d+.*-1 out of bounds for uint32"):
        sk.Map(lambda v: min(min(-1, True), v)).result_dtype(b)
    assert sk.Map(lambda v: v + max(2, 3.5)).result_dtype(b) == np.float64


def test_conditions_are_emitted_without_doubled_parentheses():
    """``if ((i == 3L))``: clang warned "equality comparison with extraneous parentheses" on
    every build of a muscle with an ``if``/``while`` (PoCL printed "1 warning generated." on
    stderr each time; skelpy filtered it from its BuildWarning)."""
    def loop(x):
        s = 0
        k = 0
        while k < 5:
            k += 1
            if k == 3 or (k > 1) == (x > 0):
                continue
            if k == 4:
                break
            s += k
        return s

    src = sk.Map(loop).source(np.ones(4, np.int32))
    assert "while (k < 5L) {" in src and "if (k == 4L) {" in src
    assert "if ((k == 3L) || (" in src          # parentheses that group stay


@settings(max_examples=10, deadline=None, derandomize=True)
@given(st.sampled_from([np.int16, np.float32]), st.integers(0, 300), st.integers(0, 2**32 - 1))
def test_floor_division_and_modulo_follow_python_at_any_size(dtype, n, seed):
    """``//`` and ``%`` floor (Python, NumPy), where C truncates; with ``b or 7`` as divisor
    (Python's ``or``: ``b`` unless it is zero) and a chained comparison, at sizes from 0."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-50, 51, n).astype(dtype)
    b = rng.integers(-6, 7, n).astype(dtype)

    def f(x, y):
        return x // (y or 7) * 3 + x % (y or -3) - (x if -5 < y < 2 else y)

    got = sk.Zip(f)(a, b).to_numpy()
    want = np.array(python_map(f, a, b), dtype=dtype).reshape(n)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


def test_fractional_launch_parameter_is_an_error():
    """``params={"wg": 3.5}`` was accepted (work-group sizes outside the listed values are
    allowed) and launched groups of 3; now a ParameterError naming the muscle."""
    x = np.arange(10, dtype=np.float32)
    for p in ({"wg": 3.5}, {"coarsen": 1.5}):
        with pytest.raises(sk.ParameterError, match=rf"{HERE}:\d+.*must be a whole number"):
            sk.Map(lambda v: v + 1)(x, params=p)


def test_allpairs_constructor_misuse_names_the_muscles():
    """``AllPairs(f, zip=..., reduce=...)`` and ``AllPairs(zip=g)`` said what was wrong but
    not where (no file:line)."""
    with pytest.raises(sk.ShapeError, match=rf"f=\S*{HERE}:\d+.*not both"):
        sk.AllPairs(lambda a, b: a[0], zip=lambda a, b: a * b, reduce=lambda a, b: a + b)
    with pytest.raises(sk.ShapeError, match=rf"zip=\S*{HERE}:\d+.*both zip= and reduce="):
        sk.AllPairs(zip=lambda a, b: a * b)
