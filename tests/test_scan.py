"""Scan against NumPy: exclusive and inclusive prefix sums and maxima over awkward sizes and four
dtypes, a non-commutative operator, both carry methods over a small launch-parameter grid, a
big input, matrices, empty input and errors."""

from __future__ import annotations

import numpy as np
import pytest

import skelpy as sk

DTYPES = [np.int32, np.int64, np.float32, np.float64]
SIZES = [1, 2, 255, 256, 257, 4099, 2**20]


def add(a, b):
    return a + b


def last_nonzero(a, b):
    return b if b != 0 else a


def exclusive(inclusive_result, x, identity):
    out = np.empty_like(inclusive_result)
    out[0:1] = identity
    out[1:] = inclusive_result[:-1]
    return out


def ref_last_nonzero(x):
    idx = np.where(x != 0, np.arange(x.size), -1)
    idx = np.maximum.accumulate(idx)
    return np.where(idx >= 0, x[np.maximum(idx, 0)], 0).astype(x.dtype)


def data(rng, dtype, n):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(n).astype(dtype)
    return rng.integers(-1000, 1001, n).astype(dtype)


def assert_scan(got, want):
    got = got.to_numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":
        # prefix sums of n values: error grows like the running magnitudes
        scale = np.maximum(np.abs(want), 1.0) * np.sqrt(np.arange(1, want.size + 1))
        tol = 64 * np.finfo(want.dtype).eps * scale
        with np.errstate(invalid="ignore"):
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        bad = (diff > tol) & ~(got == want)
        assert not bad.any(), (np.flatnonzero(bad)[:5], got[bad][:5], want[bad][:5])
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_prefix_sums_against_cumsum(dtype, inclusive, rng, has_fp64):
    if dtype == np.float64 and not has_fp64:
        pytest.skip("no fp64")
    scan = sk.Scan(add, 0, inclusive=inclusive)
    for n in SIZES:
        x = data(rng, dtype, n)
        inc = (np.cumsum(x.astype(np.float64)).astype(dtype) if x.dtype.kind == "f"
               else np.cumsum(x))        # np.cumsum's accumulator: int32 sums in int64
        assert_scan(scan(sk.Vector(x)), inc if inclusive else exclusive(inc, x, 0))


@pytest.mark.parametrize("dtype", [np.int32, np.float32], ids=lambda d: np.dtype(d).name)
def test_prefix_maxima(dtype, rng):
    lo = -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min
    inc = sk.Scan(lambda a, b: a if a > b else b, lo, inclusive=True)
    exc = sk.Scan(lambda a, b: a if a > b else b, lo)
    for n in (1, 257, 4099, 100_003):
        x = data(rng, dtype, n)
        want = np.maximum.accumulate(x)
        assert_scan(inc(x), want)
        assert_scan(exc(x), exclusive(want, x, lo))


METHODS_GRID = [  # (wg, items, method); only (wg, items) needs a build of its own
    (1, 2, "lookback"), (1, 2, "levels"), (4, 32, "lookback"), (4, 32, "levels"),
    (64, 16, "levels"), (64, 16, "lookback"), (256, 1, "lookback"), (256, 1, "levels"),
    (1024, 4, "levels"), (1024, 4, "lookback"),
]


def test_non_commutative_operator_every_grid_point(rng):
    """The last non-zero element so far: associative, not commutative, so any reordering of
    operands (across tiles, work-items or look-back windows) would show."""
    scans = {inc: sk.Scan(last_nonzero, 0, inclusive=inc) for inc in (False, True)}
    xs = []
    for n in (1, 3, 255, 257, 4099, 70_001):
        x = rng.integers(1, 100, n).astype(np.int32)
        x[rng.random(n) < 0.9] = 0
        xs.append(x)
    for wg, items, method in METHODS_GRID:
        p = {"wg": wg, "items": items, "method": method}
        for x in xs:
            want = ref_last_nonzero(x)
            assert_scan(scans[True](x, params=p), want)
            assert_scan(scans[False](x, params=p), exclusive(want, x, 0))
            assert scans[False].last_launch.params == p


def test_sum_grid_both_methods(rng):
    scan = sk.Scan(add, 0, inclusive=True)
    x = data(rng, np.int64, 300_007)
    for wg, items, method in [(64, 16, "levels"), (64, 16, "lookback")]:
        assert_scan(scan(x, params={"wg": wg, "items": items, "method": method}), np.cumsum(x))


def test_big_input(rng):
    x = data(rng, np.int32, 2**22 + 17)
    assert_scan(sk.Scan(add, 0, inclusive=True)(x), np.cumsum(x))
    assert_scan(sk.Scan(add, 0, inclusive=True, dtype=np.int32)(x), np.cumsum(x, dtype=np.int32))


def test_matrix_scans_all_elements_row_major(rng):
    m = data(rng, np.int32, 37 * 41).reshape(37, 41)
    got = sk.Scan(add, 0, inclusive=True)(sk.Matrix(m))
    assert isinstance(got, sk.Matrix) and got.shape == m.shape
    np.testing.assert_array_equal(got.to_numpy(), np.cumsum(m).reshape(m.shape))


def test_result_stays_on_the_device(rng, stats):
    x = sk.Vector(data(rng, np.int32, 10_000))
    scan = sk.Scan(add, 0)
    twice = scan(scan(x))
    assert stats.uploads == 1 and stats.downloads == 0
    inc = np.cumsum(x.to_numpy())
    first = exclusive(inc, x, 0)
    np.testing.assert_array_equal(twice.to_numpy(), exclusive(np.cumsum(first), first, 0))


def test_empty_and_out_dtype():
    e = sk.Scan(add, 0)(np.zeros(0, np.float32))
    assert e.shape == (0,) and e.dtype == np.float32
    x = np.full(1000, 100, np.int8)
    wide = sk.Scan(add, 0, inclusive=True, out_dtype=np.int64)(x)
    np.testing.assert_array_equal(wide.to_numpy(), np.cumsum(x, dtype=np.int64))


def test_errors():
    with pytest.raises(sk.DTypeError, match="identity"):
        sk.Scan(add, None)
    with pytest.raises(sk.DTypeError, match="test_scan.py"):
        sk.Scan(lambda a, b: max(a, b), -np.inf)(np.arange(4, dtype=np.int64))
    with pytest.raises(sk.ParameterError):
        sk.Scan(add, 0)(np.ones(4, np.int32), params={"method": "magic"})
    with pytest.raises(sk.DTypeError):
        sk.Scan(add, 0)(sk.IndexVector(5))
