"""Issue 11 item 6: a refusal on any launch — the first, a later iteration, a stage of a
sequence, a repeat call — takes the same fallback as a refusal of the first launch: it is
recorded, never tried again, and the call completes at the nearest legal point.

Before: the ``decided`` path of ``iterations=`` had no fallback; ``RefusedParameters``
escaped and nothing was recorded."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

import skelpy as sk
from skelpy import runtime, tuner

LAPLACE = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], np.float64)


def heat(nb):
    return nb[0, 0] + 0.1 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


def _reference(a, iterations):
    u = a.astype(np.float64)
    for _ in range(iterations):
        u = u + 0.1 * ndi.correlate(u, LAPLACE, mode="nearest")
    return u


class RefuseOnLaunch:
    """Refuse the ``nth`` stencil launch (counting from 1) and every later launch at the
    same point; count them all."""

    def __init__(self, nth: int):
        self.nth, self.count, self.point = nth, 0, None

    def __call__(self, skel, params, g, local):
        if skel != "stencil":
            return False
        self.count += 1
        if self.count == self.nth:
            self.point = dict(params)
        return self.point is not None and dict(params) == self.point


@pytest.fixture
def hook():
    rt = runtime.current()
    yield lambda h: setattr(rt, "refuse_hook", h)
    rt.refuse_hook = None


@pytest.mark.parametrize("nth", [1, 2, 5])
def test_refusal_in_the_middle_of_iterations_falls_back(hook, nth):
    a = np.random.default_rng(nth).random((37, 53)).astype(np.float32)
    st = sk.Stencil(heat, border="nearest")
    single = {"local": 0}          # a single-step parameter: one launch per iteration
    h = RefuseOnLaunch(nth)
    hook(h)
    out = st(a, iterations=6, params=single).to_numpy()
    hook(None)
    np.testing.assert_allclose(out, _reference(a, 6), rtol=1e-4, atol=1e-5)
    assert h.point is not None
    launch = st.last_launch
    assert launch.iterations == 6
    assert h.point in [dict(r) for r in launch.refused]
    # recorded: the next call's decision avoids the refused point from the start
    st(a, iterations=3, params=single)
    assert dict(st.last_launch.params) != h.point
    assert not st.last_launch.refused


def test_refusal_in_iterations_without_forced_parameters_falls_back(hook):
    # whichever path the tuner takes (single steps, or passes of several steps)
    a = np.random.default_rng(11).random((37, 53)).astype(np.float32)
    st = sk.Stencil(heat, border="nearest")
    h = RefuseOnLaunch(2)
    hook(h)
    out = st(a, iterations=6).to_numpy()
    hook(None)
    np.testing.assert_allclose(out, _reference(a, 6), rtol=1e-4, atol=1e-5)
    assert h.point is not None and h.point in [dict(r) for r in st.last_launch.refused]


def test_refusal_of_a_forced_point_mid_iterations_falls_back(hook):
    a = np.arange(24 * 40, dtype=np.float32).reshape(24, 40) / 100
    st = sk.Stencil(heat, border="nearest")
    forced = {"wg_r": 4, "wg_c": 8, "cr": 1, "cc": 1, "local": 0, "vec": 1}
    h = RefuseOnLaunch(3)
    hook(h)
    out = st(a, iterations=4, params=forced).to_numpy()
    hook(None)
    np.testing.assert_allclose(out, _reference(a, 4), rtol=1e-4, atol=1e-5)
    assert forced in [dict(r) for r in st.last_launch.refused]


def test_refusal_inside_a_sequence_falls_back(hook):
    a = np.random.default_rng(7).random((30, 31)).astype(np.float32)
    st = sk.Stencil(heat, border="nearest")
    seq = st >> st
    h = RefuseOnLaunch(3)                  # iteration 2, stage 0
    hook(h)
    out = seq(a, iterations=2).to_numpy()
    hook(None)
    np.testing.assert_allclose(out, _reference(a, 4), rtol=1e-4, atol=1e-5)
    assert h.point in [dict(r) for r in seq.last_launch.refused]


def test_refusal_of_a_repeat_call_falls_back(hook):
    a = np.random.default_rng(3).random((33, 35)).astype(np.float32)
    m = sk.Matrix(a)
    st = sk.Stencil(heat, border="nearest")
    st(m)
    st(m)                                   # settled: the next call takes the short path
    h = RefuseOnLaunch(1)
    hook(h)
    out = st(m).to_numpy()
    hook(None)
    np.testing.assert_allclose(out, _reference(a, 1), rtol=1e-4, atol=1e-5)
    assert st.last_launch.refused and h.point in [dict(r) for r in st.last_launch.refused]


def test_refused_points_are_stored_for_the_scenario(hook):
    a = np.ones((20, 20), np.float32)
    st = sk.Stencil(heat, border="nearest")
    h = RefuseOnLaunch(2)
    hook(h)
    st(a, iterations=3)
    hook(None)
    plan = next(iter(st._plans.values()))
    rt = runtime.current()
    req = tuner.TuningRequest(
        skeleton="stencil", kernel_key=plan.kernel_key, device=rt.device,
        space=plan.space(rt), dataset={"n": 400.0, "rows": 20.0, "cols": 20.0,
                                       "dtype_size": 4.0},
        features=plan.features)
    assert plan.space(rt).key(h.point) in tuner.refused_points(req)
