"""Accumulator dtypes of Reduce, MapReduce and Scan against NumPy (issue 10 item 5), and folds
over nothing (issue 11 item 8): a sum or product of bool or narrow integers accumulates as
np.sum / np.cumsum do, however the muscle is spelled; other muscles keep the type of f(acc, x);
``dtype=`` chooses; an empty input or axis gives the identity."""

from __future__ import annotations

import operator
import os

import numpy as np
import pytest

import skelpy as sk
from skelpy.muscle import Muscle
from skelpy.skeletons.fold_muscle import arithmetic_kind, fold_dtype, numpy_sum_dtype

INT_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
              np.uint64]
# Each dtype is a program of its own per skeleton (seconds of PoCL compile): sums and products
# run for every dtype, the scans and axis sums for a share of them unless SKELPY_HEAVY=1.
HEAVY = bool(os.environ.get("SKELPY_HEAVY"))
SCAN_SHARE = {np.bool_, np.int8, np.uint16, np.int32, np.uint64, np.float32}


def add(a, b):
    return a + b


def add_swapped(a, b):
    return b + a


def mul(a, b):
    return a * b


def mod7_sum(a, b):
    return (a + b) % 7


def test_issue_reproducers():
    flags = np.array([True, False, True, True])
    count = sk.Reduce(add, identity=0)(flags)
    assert count == 3 and count.dtype == np.int64
    big = np.full(5000, 10**6, np.int32)
    total = sk.Reduce(add, identity=0)(big)
    assert total == 5_000_000_000 and total.dtype == np.int64
    x = np.linspace(0, 1, 1001, dtype=np.float32)
    above = sk.MapReduce(lambda a: a > 0.5, add, 0)(x)
    assert above == np.sum(x > 0.5) and above.dtype == np.int64
    ranks = sk.Scan(add, 0, inclusive=True)(flags).to_numpy()
    np.testing.assert_array_equal(ranks, np.cumsum(flags))
    assert ranks.dtype == np.int64


@pytest.mark.parametrize("f", [add, add_swapped, operator.add, np.add,
                               lambda a, b: a - (-b)], ids=["add", "swapped", "operator",
                                                            "np.add", "minus-minus"])
def test_every_spelling_of_a_sum_is_a_sum(f):
    assert arithmetic_kind(f) == "add"
    x = np.array([100, 100, 100], np.int8)
    got = sk.Reduce(f, 0)(x)
    assert got == 300 and got.dtype == np.int64


@pytest.mark.parametrize("f", [mul, operator.mul, np.multiply])
def test_every_spelling_of_a_product_is_a_product(f):
    assert arithmetic_kind(f) == "multiply"
    x = np.array([100, 100, 100], np.int16)
    got = sk.Reduce(f, 1)(x)
    assert got == 10**6 and got.dtype == np.int64 and got == np.prod(x)


@pytest.mark.parametrize("f", [max, lambda a, b: a or b, lambda a, b: a | b, mod7_sum,
                               lambda a, b: a - b, lambda a, b: b, "int f(int a, int b) "
                               "{ return a + b; }"], ids=["max", "or", "bitor", "mod7",
                                                          "minus", "last", "C"])
def test_other_muscles_are_not_sums(f):
    assert arithmetic_kind(f) is None


@pytest.mark.parametrize("dtype", INT_DTYPES + [np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_sums_products_and_prefix_sums_follow_numpy(dtype, rng, has_fp64):
    if dtype == np.float64 and not has_fp64:
        pytest.skip("no fp64")
    dt = np.dtype(dtype)
    hi = 2 if dt == np.bool_ else min(100, np.iinfo(dt).max if dt.kind in "iu" else 100)
    x = rng.integers(0, hi, 3001).astype(dt)
    s = sk.Reduce(add, 0)(x)
    assert s.dtype == np.sum(x).dtype == numpy_sum_dtype(dt)
    if dt.kind == "f":
        np.testing.assert_allclose(s, np.sum(x.astype(np.float64)), rtol=1e-6)
    else:
        assert s == np.sum(x)
    small = x[:9] if dt == np.bool_ else np.minimum(x[:9], 3).astype(dt)
    p = sk.Reduce(mul, 1)(small)
    assert p.dtype == np.prod(small).dtype and p == np.prod(small)
    if not HEAVY and dtype not in SCAN_SHARE:
        return
    c = sk.Scan(add, 0, inclusive=True)(x).to_numpy()
    assert c.dtype == np.cumsum(x).dtype
    if dt.kind != "f":
        np.testing.assert_array_equal(c, np.cumsum(x))
    e = sk.Scan(add, 0)(x).to_numpy()
    assert e.dtype == c.dtype and e[0] == 0 and (dt.kind == "f" or (e[1:] == c[:-1]).all())
    rows = x[:3000].reshape(30, 100)
    for axis in (0, 1):
        got = sk.Reduce(add, 0, axis=axis)(sk.Matrix(rows)).to_numpy()
        assert got.dtype == np.sum(rows, axis=axis).dtype
        if dt.kind != "f":
            np.testing.assert_array_equal(got, np.sum(rows, axis=axis))


def test_other_muscles_keep_the_fixed_point_type(rng):
    x = rng.integers(-100, 100, 1000).astype(np.int8)
    mx = sk.Reduce(lambda a, b: max(a, b), -128)(x)
    assert mx.dtype == np.int8 and mx == x.max()
    flags = x > 0
    anyr = sk.Reduce(lambda a, b: a or b, False)(flags)
    assert anyr.dtype == np.bool_ and anyr
    u = rng.integers(0, 120, 1000).astype(np.uint8)     # any two add up without wrapping
    m7 = sk.Reduce(mod7_sum, 0)(u)          # (a + b) % 7 is not a sum: stays uint8 like reduce()
    assert m7.dtype == np.uint8 and m7 == int(u.astype(np.int64).sum() % 7)
    c = sk.Reduce("int f(int a, int b) { return a + b; }", 0)(np.arange(10, dtype=np.int32))
    assert c.dtype == np.int32 and c == 45   # an OpenCL C muscle's declared types
    # f(acc, x) iterated: int32 -> float64 (a weak 0.5 meets int32), then float64 settles
    assert fold_dtype(Muscle(lambda a, b: a + 0.5 * b), None, np.dtype(np.int32), None,
                      "test") == np.float64
    # a sum of something that becomes a float sums in that float
    assert fold_dtype(Muscle(lambda a, b: a + b + 0.0), lambda a, b: a + b + 0.0,
                      np.dtype(np.int16), None, "test") == np.float64


def test_dtype_chooses_the_accumulator_everywhere(rng):
    x = rng.integers(0, 127, 5000).astype(np.int8)
    assert sk.Reduce(add, 0, dtype=np.int8)(x) == np.sum(x, dtype=np.int8)
    got = sk.MapReduce(lambda a: a, add, 0, dtype=np.int16)(x)
    assert got.dtype == np.int16 and got == np.sum(x, dtype=np.int16)
    c = sk.Scan(add, 0, inclusive=True, dtype=np.int8)(x).to_numpy()
    np.testing.assert_array_equal(c, np.cumsum(x, dtype=np.int8))
    f = sk.Reduce(add, 0, dtype=np.float32)(x)
    assert f.dtype == np.float32 and f == np.sum(x, dtype=np.float32)
    with pytest.raises(sk.DTypeError, match="disagree"):
        sk.Scan(add, 0, dtype=np.int8, out_dtype=np.int64)


def test_folds_over_nothing_give_the_identity():
    red = sk.Reduce(add, identity=7, axis=1)
    got = red(sk.Matrix(np.zeros((3, 0), np.int32))).to_numpy()
    np.testing.assert_array_equal(got, [7, 7, 7])
    assert got.dtype == np.int64
    cols = sk.Reduce(add, 7, axis=0)(np.zeros((0, 4), np.float32)).to_numpy()
    np.testing.assert_array_equal(cols, [7, 7, 7, 7])
    assert cols.dtype == np.float32
    assert sk.Reduce(add, 7, axis=1)(np.zeros((0, 4), np.int32)).shape == (0,)
    assert sk.Reduce(add, 7)(np.zeros((0, 4), np.int32)) == 7
    assert sk.Reduce(lambda a, b: max(a, b), -3)(np.zeros(0, np.int16)) == -3
    mr = sk.MapReduce(lambda a, b: a * b, add, 7)(np.zeros(0, np.float32), np.zeros(0, np.float32))
    assert mr == 7 and mr.dtype == np.float32
    mra = sk.MapReduce(lambda a: a > 0, add, 2, axis=1)(np.zeros((2, 0), np.float32)).to_numpy()
    np.testing.assert_array_equal(mra, [2, 2])
    for inclusive in (False, True):
        e = sk.Scan(add, 7, inclusive=inclusive)(np.zeros(0, np.int8))
        assert e.shape == (0,) and e.to_numpy().dtype == np.int64
        m = sk.Scan(add, 7, inclusive=inclusive)(sk.Matrix(np.zeros((0, 3), np.float32)))
        assert m.shape == (0, 3)
