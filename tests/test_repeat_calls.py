"""Repeated calls take a short path (no classification, plan or tuner look-up): it must give
exactly what the full path gives, and step aside whenever anything changed."""

from __future__ import annotations

import numpy as np
import pytest

import skelpy as sk
from skelpy import runtime, tuner


@pytest.fixture
def count_tuner(monkeypatch):
    calls = []
    real = tuner.execute

    def spy(req):
        calls.append(req)
        return real(req)
    monkeypatch.setattr(tuner, "execute", spy)
    return calls


def test_repeats_skip_the_tuner_and_stay_correct(count_tuner):
    x = np.arange(1000, dtype=np.float32)
    v = sk.Vector(x)
    f = sk.Map(lambda a, s: a * s + 1.0)
    for s in (2.0, 3.0, -0.5, 2.0):          # a changing scalar: only its value changes
        np.testing.assert_allclose(f(v, s).to_numpy(), x * np.float32(s) + 1, rtol=1e-6)
    assert len(count_tuner) == 1
    ln = f.last_launch
    assert ln.source == "cache" and ln.kernel_time > 0 and ln.params["wg"] >= 1


def test_repeats_see_new_host_data_and_new_inputs(count_tuner):
    x = np.arange(257, dtype=np.int32)
    v = sk.Vector(x.copy())
    w = sk.Vector(x[::-1].copy())
    z = sk.Zip(lambda a, b: a - b)
    np.testing.assert_array_equal(z(v, w).to_numpy(), x - x[::-1])
    v[3] = 1000                              # host write: the next call must upload it
    want = x.copy()
    want[3] = 1000
    np.testing.assert_array_equal(z(v, w).to_numpy(), want - x[::-1])
    np.testing.assert_array_equal(z(w, v).to_numpy(), x[::-1] - want)
    assert len(count_tuner) == 1


@pytest.mark.parametrize("change", ["shape", "dtype", "ndarray", "scalar type", "extra"])
def test_any_change_takes_the_full_path(change, count_tuner):
    f = sk.Map(lambda a, s, e: a * s + e[0])
    e = sk.Vector(np.array([5], np.float32))
    v = sk.Vector(np.ones(64, np.float32))
    f(v, 2.0, e)
    args = {"shape": (sk.Vector(np.ones(65, np.float32)), 2.0, e),
            "dtype": (sk.Vector(np.ones(64, np.float64)), 2.0, e),
            "ndarray": (np.ones(64, np.float32), 2.0, e),
            "scalar type": (v, 2, e),
            "extra": (v, 2.0, sk.Vector(np.array([7], np.int32)))}[change]
    got = f(*args).to_numpy()
    a0 = np.asarray(args[0])
    want = a0 * args[1] + np.asarray(args[2])[0]
    np.testing.assert_allclose(got, want.astype(got.dtype), rtol=1e-6)
    assert len(count_tuner) == 2


def test_mode_change_and_forced_params_take_the_full_path(count_tuner):
    v = sk.Vector(np.arange(100, dtype=np.float32))
    f = sk.Map(lambda a: a + 1)
    f(v)
    with tuner.tuning("off"):
        f(v)
    f(v, params={"wg": 32})
    assert f.last_launch.params["wg"] == 32
    assert len(count_tuner) == 3


def test_refusal_after_settling_still_gives_the_result():
    rt = runtime.current()
    v = sk.Vector(np.arange(5000, dtype=np.float32))
    f = sk.Map(lambda a: a * 2)
    f(v)
    settled = dict(f.last_launch.params)
    rt.refuse_hook = lambda skel, params, g, local: params["wg"] == settled["wg"]
    try:
        out = f(v)
    finally:
        rt.refuse_hook = None
    np.testing.assert_array_equal(out.to_numpy(), np.arange(5000, dtype=np.float32) * 2)
    assert f.last_launch.refused and f.last_launch.params["wg"] != settled["wg"]
    assert f.last_launch.source.endswith("+fallback")


def test_kernel_arguments_are_reset_between_skeletons_sharing_a_kernel():
    # two skeletons with the same muscle share one compiled kernel; arguments set by one
    # must never leak into the other's launch
    f, g = sk.Map(lambda a, s: a * s), sk.Map(lambda a, s: a * s)
    x, y = np.arange(10, dtype=np.float32), np.arange(10, 20, dtype=np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(f(x, 2.0).to_numpy(), x * 2)
        np.testing.assert_array_equal(g(y, 3.0).to_numpy(), y * 3)


# -- Stencil ---------------------------------------------------------------------------------


def _heat_ref(u, k):
    p = np.pad(u, 1, mode="edge")
    return u + k * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u)


def test_stencil_loop_of_single_steps(count_tuner):
    step = sk.Stencil(lambda nb, k: nb[0, 0] + k * (nb[-1, 0] + nb[1, 0] + nb[0, -1]
                                                   + nb[0, 1] - 4 * nb[0, 0]))
    u0 = np.random.default_rng(3).random((37, 70)).astype(np.float32)
    u, want = sk.Matrix(u0), u0.astype(np.float64)
    for t in range(12):
        k = 0.1 if t % 2 else 0.05           # a changing scalar extra
        u = step(u, k)
        want = _heat_ref(want, k)
    np.testing.assert_allclose(u.to_numpy(), want, rtol=1e-4, atol=1e-5)
    assert len(count_tuner) == 1
    assert step.last_launch.source == "cache" and step.last_launch.kernel_time > 0


@pytest.mark.parametrize("change", ["shape", "dtype", "ndarray", "extra matrix dtype"])
def test_stencil_changes_take_the_full_path(change, count_tuner):
    st = sk.Stencil(lambda nb, o: nb[0, 1] + o[0, 0])
    a = np.arange(60, dtype=np.float32).reshape(6, 10)
    st(sk.Matrix(a), sk.Matrix(np.ones_like(a)))
    b = {"shape": np.arange(77, dtype=np.float32).reshape(7, 11),
         "dtype": a.astype(np.float64), "ndarray": a, "extra matrix dtype": a}[change]
    o = np.full_like(b, 2, dtype=np.int32 if change == "extra matrix dtype" else b.dtype)
    mb = b if change == "ndarray" else sk.Matrix(b)
    got = st(mb, sk.Matrix(o)).to_numpy()
    want = np.pad(b, 1, mode="edge")[1:-1, 2:] + o
    np.testing.assert_allclose(got, want)
    assert len(count_tuner) == 2


def test_stencil_refusal_after_settling():
    rt = runtime.current()
    st = sk.Stencil(lambda nb: nb[0, -1] * 2, border="wrap")
    a = sk.Matrix(np.arange(300, dtype=np.float32).reshape(15, 20))
    st(a)
    settled = dict(st.last_launch.params)
    rt.refuse_hook = lambda skel, params, g, local: params == settled
    try:
        out = st(a)
    finally:
        rt.refuse_hook = None
    np.testing.assert_array_equal(out.to_numpy(), np.roll(a.to_numpy(), 1, axis=1) * 2)
    assert st.last_launch.refused and st.last_launch.params != settled
