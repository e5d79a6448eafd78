"""Lazy array expressions: one kernel per graph, views, reductions, coherence, errors
(issue 15)."""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skelpy as sk
from skelpy import runtime


@pytest.fixture
def rt():
    return runtime.current()


def test_an_expression_is_one_kernel_and_equals_the_unfused_result_bitwise(rt, rng):
    a = rng.standard_normal(10_007).astype(np.float32)
    b = rng.standard_normal(10_007).astype(np.float32)
    x, y = sk.Vector(a), sk.Vector(b)
    sk.evaluate(x * 2.5 + y)                   # builds it once
    rt.finish()
    rt.stats.reset()
    z = (x * 2.5 + y) * (x - y) / 3.0
    assert rt.stats.launches == 0 and z.is_pending
    fused = z.to_numpy()
    assert rt.stats.launches == 1
    steps = [x * 2.5]
    for f in (lambda t: t + y, lambda t: t * (x - y), lambda t: t / 3.0):
        sk.evaluate(steps[-1])                 # each step its own kernel
        steps.append(f(steps[-1]))
    np.testing.assert_array_equal(fused, steps[-1].to_numpy())
    want = (a * np.float32(2.5) + b) * (a - b) / np.float32(3.0)
    np.testing.assert_array_equal(fused, want)


def test_a_loop_of_expressions_builds_nothing_after_the_first_iteration(rt, rng):
    x = sk.Vector(rng.standard_normal(1000).astype(np.float32))
    y = sk.Vector(rng.standard_normal(1000).astype(np.float32))
    sk.evaluate(0.5 * x + y)
    builds = rt.stats.builds
    for k in range(50):
        z = float(k) * x + y                   # only the scalar changes: no recompilation
        sk.evaluate(z)
    assert rt.stats.builds == builds
    np.testing.assert_allclose(z.to_numpy(), 49.0 * x.to_numpy() + y.to_numpy(), rtol=1e-6)


def test_sum_of_an_expression_is_one_launch(rt, rng):
    a = rng.standard_normal(100_003).astype(np.float32)
    b = rng.standard_normal(100_003).astype(np.float32)
    x, y = sk.Vector(a), sk.Vector(b)
    np.sum((x - y) ** 2)
    rt.finish()
    rt.stats.reset()
    s = np.sum((x - y) ** 2)
    assert rt.stats.launches <= 2              # one kernel (a second only with stages=2)
    np.testing.assert_allclose(s, np.sum((a - b) ** 2, dtype=np.float64), rtol=1e-5)
    assert s.dtype == np.float32


# Every reduction is a Reduce program of its own per dtype (seconds of PoCL compile each): by
# default float32 runs all of them and the other dtypes a share each (every reduction on two
# dtypes or more); SKELPY_HEAVY=1 runs every pair.
HEAVY = bool(os.environ.get("SKELPY_HEAVY"))
REDUCTIONS = ("sum", "prod", "min", "max", "mean", "argmin", "argmax")
SHARE = {np.int8: ("sum", "min", "argmax", "mean"), np.bool_: ("sum", "prod", "max", "argmin"),
         np.float64: ("prod", "max", "mean", "argmin", "argmax")}


@pytest.mark.parametrize("dt", [np.float32, np.int8, np.bool_, np.float64])
@pytest.mark.parametrize("shape", [(1,), (997,), (13, 57)])
def test_reductions_match_numpy(dt, shape, rng):
    a = (rng.standard_normal(shape) * 50).astype(dt)
    c = (sk.Vector if len(shape) == 1 else sk.Matrix)(a)
    for axis in (None, 0, 1) if len(shape) == 2 else (None, 0):
        for name in REDUCTIONS if HEAVY else SHARE.get(dt, REDUCTIONS):
            if name == "prod" and dt != np.bool_ and a.size > 20:
                continue                        # overflows differ only in how they wrap
            want = getattr(np, name)(a, axis=axis)
            got = getattr(np, name)(c, axis=axis)
            got = got.to_numpy() if isinstance(got, (sk.Vector, sk.Matrix)) else got
            assert np.asarray(got).dtype == np.asarray(want).dtype, (name, axis)
            if np.asarray(want).dtype.kind == "f":
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3,
                                           err_msg=f"{name} {axis}")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{name} {axis}")


def test_argmin_finds_the_first_nan_and_the_first_of_ties():
    a = np.array([3, 1, 1, np.nan, 0, np.nan], np.float32)
    assert sk.Vector(a).argmin() == np.argmin(a) == 3
    b = np.array([[2, 5, 5], [7, 7, 1]], np.int16)
    np.testing.assert_array_equal(np.argmax(sk.Matrix(b), axis=1).to_numpy(), [1, 0])
    np.testing.assert_array_equal(np.argmin(sk.Matrix(b), axis=0).to_numpy(), [0, 0, 1])
    with pytest.raises(ValueError):
        sk.Vector(np.zeros(0, np.float32)).max()


slice_parts = st.one_of(st.integers(-40, 40), st.none())
slices = st.builds(slice, slice_parts, slice_parts,
                   st.sampled_from([None, 1, 2, 3, -1, -2, 7, -13]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(r=st.integers(1, 23), c=st.integers(1, 37), k1=slices, k2=slices, on_device=st.booleans(),
       transpose=st.booleans())
def test_views_read_write_and_compute_like_numpy_views(r, c, k1, k2, on_device, transpose):
    ref = np.arange(r * c, dtype=np.float32).reshape(r, c)
    m = sk.Matrix(ref)
    if on_device:
        m = m + 0                              # the data only on the device
        ref = ref + 0
    base, rbase = (m.T, ref.T) if transpose else (m, ref)
    view, rview = base[k1, k2], rbase[k1, k2]
    assert view.shape == rview.shape
    np.testing.assert_array_equal(view.to_numpy(), rview)
    if rview.size == 0:
        return
    np.testing.assert_array_equal((view * 2 + 1).to_numpy(), rview * 2 + 1)
    np.testing.assert_array_equal(sk.Map(lambda x: x - 1)(view).to_numpy(), rview - 1)
    np.testing.assert_allclose(np.sum(view), np.sum(rview), rtol=1e-5)
    view[...] = view * 10                      # written through, on the device
    rview[...] = rview * 10
    np.testing.assert_array_equal(m.to_numpy(), ref)
    col = base[:, 0] if base.ndim == 2 else base
    col += 1
    rbase[:, 0] += 1
    np.testing.assert_array_equal(m.to_numpy(), ref)


def test_vector_views_at_awkward_steps(rng):
    a = rng.standard_normal(1009).astype(np.float64)
    v = sk.Vector(a) * 1.0
    for key in (slice(3, 900, 7), slice(None, None, -1), slice(1000, 2, -13), slice(5, 6),
                slice(0, 0)):
        np.testing.assert_array_equal(v[key].to_numpy(), a[key])
        if a[key].size:
            np.testing.assert_array_equal((v[key] + v[key]).to_numpy(), a[key] + a[key])
    w = sk.Vector(a)
    w[::2] = w[1::2] * 0 + 5 if len(a[::2]) == len(a[1::2]) else w[::2] * 0 + 5
    b = a.copy()
    b[::2] = 5
    np.testing.assert_array_equal(w.to_numpy(), b)
    np.testing.assert_array_equal(sk.Vector(a).reshape(1009, 1).T.to_numpy(),
                                  a.reshape(1009, 1).T)


def test_matmul_reads_the_transpose_view():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(20, dtype=np.float32).reshape(4, 5)
    np.testing.assert_allclose((sk.Matrix(a) @ sk.Matrix(b)).to_numpy(), a @ b)
    np.testing.assert_allclose(sk.AllPairs(zip=lambda p, q: p * q, reduce=lambda p, q: p + q)(
        sk.Matrix(a), sk.Matrix(b).T).to_numpy(), a @ b)


def test_pending_values_never_see_later_writes():
    x = sk.Vector(np.arange(8, dtype=np.int32))
    y = x * 2
    x[0] = 100                                 # a host write: y is computed first
    x[1:3] = sk.Vector(np.array([7, 7], np.int32))
    with x.host_edit() as h:
        h[5] = -1
    x += 1
    np.testing.assert_array_equal(y.to_numpy(), np.arange(8) * 2)
    np.testing.assert_array_equal(x.to_numpy(), [101, 8, 8, 4, 5, 0, 7, 8])
    z = x[2:6] + 0                             # a view is read at the time of the write too
    x[3] = 42
    np.testing.assert_array_equal(z.to_numpy(), [8, 4, 5, 0])


def test_errors_are_raised_at_the_line_that_caused_them():
    x = sk.Vector(np.arange(4, dtype=np.int8))
    f = sk.Vector(np.ones(4, np.float32))
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(sk.DTypeError, match=rf"test_array_fusion.py:{line}.*out of bounds"):
        x + 300
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(sk.DTypeError, match=rf"test_array_fusion.py:{line}"):
        ~f  # noqa: B018
    with pytest.raises(sk.ShapeError):
        x + sk.Vector(np.ones(5, np.int8))
    np.testing.assert_array_equal((x < 300).to_numpy(), [True] * 4)   # NumPy 2's exact answer


def test_depth_limit_evaluates_in_parts(rt):
    x = sk.Vector(np.zeros(100, np.float32))
    for _ in range(200):
        x = x + 1.0
    np.testing.assert_array_equal(x.to_numpy(), np.full(100, 200, np.float32))


def test_last_skeleton_shows_the_fused_expression():
    x = sk.Vector(np.ones(64, np.float32))
    z = 2 * x + x * x
    sk.evaluate(z)
    skel = sk.array.last_skeleton()
    assert skel.last_launch is not None
    text = skel.source(x, np.float32(2))
    assert "skelpy_elementwise" in text and "fused" in text
