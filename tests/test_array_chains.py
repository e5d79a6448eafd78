"""Chains of skeletons fused into one kernel (issue 15): Map/Zip results inside ``sk.lazy()``
and pending values as the input of Reduce, against NumPy and the unfused chain, counting
kernel launches."""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skelpy as sk
from skelpy import runtime

SQUARE = sk.Map(lambda v: v * v)
SCALE = sk.Map(lambda v, k: v * k + 1)
ADD = sk.Reduce(lambda p, q: p + q, 0)
DIFF = sk.Zip(lambda p, q: p - q)


@pytest.fixture
def rt():
    return runtime.current()


def _launches(rt, fn):
    rt.finish()
    rt.stats.reset()
    out = fn()
    out = out.to_numpy() if isinstance(out, (sk.Vector, sk.Matrix)) else out
    rt.finish()
    return rt.stats.launches, out


@pytest.mark.parametrize("n", [0, 1, 7, 1009])
def test_map_then_reduce_is_one_mapreduce(rt, n, rng):
    a = rng.standard_normal(n).astype(np.float32)
    x = sk.Vector(a)
    explicit = sk.MapReduce(lambda v: v * v, lambda p, q: p + q, 0)
    explicit(x)                                           # builds
    with sk.lazy():
        ADD(SQUARE(x))
        want_launches, want = _launches(rt, lambda: explicit(x))
        got_launches, got = _launches(rt, lambda: ADD(SQUARE(x)))
    assert got_launches == want_launches                 # the Map never ran on its own
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, np.sum(a.astype(np.float64) ** 2), rtol=1e-5)
    if n:
        assert ADD.last_launch.skeleton == "mapreduce"


def test_a_chain_of_maps_and_operators_is_one_kernel_and_equals_the_eager_chain(rt, rng):
    a = rng.standard_normal(997).astype(np.float32)
    b = rng.standard_normal(997).astype(np.float32)
    x, y = sk.Vector(a), sk.Vector(b)
    eager = (SCALE(DIFF(SQUARE(x), y), 2.5) * 3).to_numpy()
    with sk.lazy():
        z = SCALE(DIFF(SQUARE(x), y), 2.5) * 3
        assert z.is_pending
        sk.evaluate(SCALE(DIFF(SQUARE(x), y), 2.5) * 3)  # builds
        launches, fused = _launches(rt, lambda: z)
    assert launches == 1
    assert fused.dtype == np.float32
    np.testing.assert_array_equal(fused, eager)           # bitwise
    text = sk.array.last_skeleton().description
    assert "<lambda>" in text


@pytest.mark.parametrize("dt, k", [(np.int8, 3), (np.float32, 2.5), (np.uint16, 7),
                                   (np.float64, np.float32(0.5)), (np.int32, True)])
def test_extras_keep_their_weak_or_strong_type(dt, k, rng):
    a = (rng.standard_normal(31) * 20).astype(dt)
    x = sk.Vector(a)
    eager = SCALE(x, k)
    with sk.lazy():
        lazy = SCALE(x, k) + 0                             # consumed: fused
        alone = SCALE(x, k)                                # not consumed: runs as the call
    assert lazy.dtype == eager.dtype == alone.dtype
    np.testing.assert_array_equal(lazy.to_numpy(), eager.to_numpy())
    np.testing.assert_array_equal(alone.to_numpy(), eager.to_numpy())
    assert SCALE.last_launch is not None


def test_reduce_of_an_expression_and_axis_folds(rt, rng):
    a = rng.integers(-50, 50, size=(13, 29)).astype(np.int16)
    m = sk.Matrix(a)
    rows = sk.Reduce(lambda p, q: p + q, 0, axis=1)
    cols = sk.Reduce(lambda p, q: max(p, q), -(2**15), axis=0)
    np.testing.assert_array_equal(rows(m * 2 - 1).to_numpy(), np.sum(a * 2 - 1, axis=1))
    assert rows.last_launch.skeleton == "mapreduce"
    with sk.lazy():
        got = cols(sk.Zip(lambda p, q: p * q)(m, m)).to_numpy()
    np.testing.assert_array_equal(got, np.max(a * a, axis=0))
    assert got.dtype == np.max(a * a, axis=0).dtype
    i8 = np.arange(6, dtype=np.int8)
    with np.errstate(over="ignore"):
        assert ADD(sk.Vector(i8) * 50) == np.sum(i8 * 50)       # wraps in int8, sums in int64


def test_deferred_calls_see_the_data_of_their_call_time():
    x = sk.Vector(np.arange(8, dtype=np.int32))
    with sk.lazy():
        y = SQUARE(x)
        z = SQUARE(y) + 1
    x[0] = 100                                             # host write: y, z computed first
    x[1:3] = sk.Vector(np.array([7, 7], np.int32))
    np.testing.assert_array_equal(y.to_numpy(), np.arange(8) ** 2)
    np.testing.assert_array_equal(z.to_numpy(), np.arange(8) ** 4 + 1)


def test_what_is_not_deferred_runs_at_once():
    x = sk.Vector(np.arange(5, dtype=np.float32))
    c_square = sk.Map("float func(float v) { return v * v; }")
    with sk.lazy():
        assert not c_square(x).is_pending                  # OpenCL C muscle
        assert not SQUARE(np.arange(5, dtype=np.float32)).is_pending     # an ndarray input
        assert not sk.Map(lambda i: i * 2)(sk.IndexVector(4)).is_pending
        assert not SQUARE(x, params={"wg": 1}).is_pending
        assert SQUARE(x).is_pending
    assert not SQUARE(x).is_pending                        # outside the block


def test_errors_of_a_deferred_call_are_raised_at_the_call():
    x = sk.Vector(np.ones(4, np.float32))
    with sk.lazy():
        with pytest.raises(sk.ShapeError):
            DIFF(x, sk.Vector(np.ones(5, np.float32)))
        with pytest.raises(sk.SkelpyError):
            SQUARE(x, 1.0, 2.0)                            # too many extras
        bad = sk.Map(lambda v: v.nonexistent)
        line = inspect.currentframe().f_lineno - 1
        with pytest.raises(sk.TranslationError, match=f"test_array_chains.py:{line}"):
            bad(x)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.sampled_from([1, 2, 3, 5, 64, 257, 1031]), dt=st.sampled_from(
    [np.float32, np.int32, np.uint8, np.float64]), depth=st.integers(1, 4))
def test_lazy_chains_match_numpy(n, dt, depth):
    a = (np.arange(n) % 11).astype(dt)
    want = a
    x = sk.Vector(a)
    with sk.lazy():
        for _ in range(depth):
            x = SCALE(x, 2)
            want = (want * 2 + 1).astype(dt)
        total = ADD(x)
    np.testing.assert_array_equal(x.to_numpy(), want)
    assert total == np.sum(want)


# about eight programs per dtype: three dtypes by default, all six under SKELPY_HEAVY=1
@pytest.mark.parametrize("dt", [np.float32, np.int8, np.uint32] + (
    [np.uint16, np.int32, np.bool_] if os.environ.get("SKELPY_HEAVY") else []))
def test_argmin_argmax_take_one_pass_and_match_numpy(rt, dt, rng):
    a = (rng.standard_normal(1009) * 40).astype(dt)
    a[[17, 400]] = a.max()                                 # ties: the first one wins
    v = sk.Vector(a)
    v.argmin()
    launches, got = _launches(rt, lambda: v.argmin())
    assert got == np.argmin(a) and v.argmax() == np.argmax(a)
    assert launches <= 2                                    # one kernel (a second: stages=2)
    m = sk.Matrix(a[:989].reshape(23, 43))
    for axis in (0, 1):
        for name in ("argmin", "argmax"):
            want = getattr(np, name)(a[:989].reshape(23, 43), axis=axis)
            got = getattr(np, name)(m, axis=axis).to_numpy()
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {axis}")
    for key in (slice(None, None, 3), slice(None, None, -7), slice(2, 3)):
        assert v[key].argmin() == np.argmin(a[key]) and v[key].argmax() == np.argmax(a[key])


def test_argmin_of_signed_zeros_nans_and_infinities():
    a = np.array([0.0, -0.0, np.inf, -np.inf, -0.0, np.nan, 5, np.nan], np.float32)
    for part in (a[:2], a[:5], a[2:5], a, -a[:5]):
        v = sk.Vector(part)
        assert v.argmin() == np.argmin(part) and v.argmax() == np.argmax(part), part
    m = np.array([[1, np.nan, 0], [-0.0, 0.0, -1], [np.inf, np.inf, np.nan]], np.float32)
    for axis in (None, 0, 1):
        for name in ("argmin", "argmax"):
            got = getattr(np, name)(sk.Matrix(m), axis=axis)
            got = got.to_numpy() if axis is not None else got
            np.testing.assert_array_equal(got, getattr(np, name)(m, axis=axis))


def test_an_index_matrix_next_to_data_gives_row_col_or_a_point():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    by_parts = sk.Zip(lambda x, r, c: x * 100 + r * 10 + c)(sk.Matrix(a), sk.IndexMatrix((3, 4)))
    by_point = sk.Zip(lambda x, p: x * 100 + p[0] * 10 + p[1])(sk.Matrix(a),
                                                               sk.IndexMatrix((3, 4)))
    r, c = np.indices((3, 4))
    np.testing.assert_array_equal(by_parts.to_numpy(), a * 100 + r * 10 + c)
    np.testing.assert_array_equal(by_point.to_numpy(), a * 100 + r * 10 + c)
