"""Stencil against scipy.ndimage and NumPy: every border mode, symmetric and asymmetric shapes,
reach 0..10, awkward sizes, four dtypes, every launch parameter of a small grid."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.ndimage as ndi
from test_stencil_ref import (
    MODES,
    as_shape,
    assert_close,
    check,
    pad_correlate,
    sample,
    scipy_correlate,
    weighted,
    weights_for,
)

import skelpy as sk

SIZES = [(1, 1), (5, 3), (31, 17), (64, 64), (257, 129)]


# -- border modes x sizes x shapes ------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [1, (2, 0, 1, 3), 10], ids=["r1", "asym", "r10"])
def test_border_modes_every_size(mode, shape, rng):
    s = as_shape(shape)
    w = weights_for(s, rng, np.float32, density=1.0 if s.north < 5 else 0.15).astype(np.float32)
    st = weighted(w, s, mode, cval=1.5, dense=s.north < 5)
    for size in SIZES:
        a = sample(rng, np.float32, size)
        check(st, a, w, s, mode, cval=1.5)


@pytest.mark.parametrize("mode", MODES)
def test_seed_002_asymmetric_shape(mode, rng):
    """north=1, south=10, east=30, west=30 ([Cummins 2018] Table 6.3): reach beyond the matrix on
    small sizes, far beyond the tile on every size."""
    s = sk.Shape(north=1, south=10, east=30, west=30)
    w = weights_for(s, rng, np.float32, density=0.02).astype(np.float32)
    st = weighted(w, s, mode, cval=-2.0, dense=False)
    for size in [(1, 1), (5, 3), (31, 17), (64, 64)]:
        a = sample(rng, np.float32, size)
        check(st, a, w, s, mode, cval=-2.0)
        check(st, a, w, s, mode, cval=-2.0, params={"local": 1, "wg_r": 4, "wg_c": 8})


# reaches 0-4 (every border mode) and 10 by default; 5-9 (large unrolled programs, seconds of
# PoCL compile each) under SKELPY_HEAVY=1
@pytest.mark.parametrize("reach", range(11) if os.environ.get("SKELPY_HEAVY") else
                         [0, 1, 2, 3, 4, 10])
def test_reach_0_to_10(reach, rng):
    mode = MODES[reach % len(MODES)]
    w = weights_for(reach, rng, np.float32, density=1.0 if reach <= 3 else 0.2)
    w = w.astype(np.float32)
    st = weighted(w, reach, mode, dense=reach <= 3)
    for size in [(1, 1), (5, 3), (31, 17)]:
        a = sample(rng, np.float32, size)
        check(st, a, w, reach, mode)


def test_uniform_filter_every_mode(rng):
    a = sample(rng, np.float32, (33, 20))
    for mode in MODES:
        box = sk.Stencil(lambda nb: (nb[-1, -1] + nb[-1, 0] + nb[-1, 1] + nb[0, -1] + nb[0, 0]
                                     + nb[0, 1] + nb[1, -1] + nb[1, 0] + nb[1, 1]) / 9,
                         border=mode, cval=0.5)
        got = box(a).to_numpy()
        want = ndi.uniform_filter(a.astype(np.float64), size=3, mode=mode, cval=0.5)
        np.testing.assert_allclose(got, want, atol=2e-6)
        assert box.last_launch is not None


# -- dtypes ---------------------------------------------------------------------------------------


# Each dtype against two border modes (float32 meets all of them above); together they cover
# every mode, which keeps the number of programs to compile down.
DTYPE_MODES = [(np.float32, "constant"), (np.float32, "mirror"), (np.float64, "reflect"),
               (np.float64, "constant"), (np.int32, "wrap"), (np.int32, "mirror"),
               (np.uint8, "nearest"), (np.uint8, "constant")]


@pytest.mark.parametrize("dtype,mode", DTYPE_MODES,
                         ids=[f"{np.dtype(d).name}-{m}" for d, m in DTYPE_MODES])
def test_dtypes(dtype, mode, rng, has_fp64):
    if dtype == np.float64 and not has_fp64:
        pytest.skip("device has no fp64")
    s = sk.Shape(north=1, south=2, east=1, west=2)
    wdt = dtype if np.dtype(dtype).kind == "f" else np.int32
    w = weights_for(s, rng, wdt).astype(wdt)
    cval = 7 if np.dtype(dtype).kind in "iu" else 0.25
    st = weighted(w, s, mode, cval=cval)
    for size in [(1, 1), (5, 3), (64, 64)]:
        a = sample(rng, dtype, size)
        out = st(a)
        assert out.dtype == (np.dtype(dtype) if np.dtype(dtype).kind == "f" else np.int32)
        want = pad_correlate(a, w, s, mode, cval)
        assert_close(out.to_numpy(), want, w, a, out.dtype)
        np.testing.assert_allclose(want, scipy_correlate(a, w, s, mode, cval), atol=1e-9)


def test_uint8_max_filter_keeps_uint8(rng):
    a = sample(rng, np.uint8, (45, 37))
    fp = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], bool)
    for mode in ["constant", "reflect"]:
        dil = sk.Stencil(lambda nb: max(nb[-1, 0], nb[1, 0], nb[0, -1], nb[0, 1], nb[0, 0]),
                         border=mode, cval=3)
        out = dil(a)
        assert out.dtype == np.uint8
        np.testing.assert_array_equal(out.to_numpy(),
                                      ndi.maximum_filter(a, footprint=fp, mode=mode, cval=3))


def test_output_dtype_follows_promotion_and_out_dtype_overrides(rng):
    a32 = sample(rng, np.float32, (8, 9))
    i32 = sample(rng, np.int32, (8, 9))
    half = sk.Stencil(lambda nb: (nb[0, -1] + nb[0, 1]) * 0.5)
    assert half(a32).dtype == np.float32          # weak Python float keeps float32
    assert half(i32).dtype == np.float64          # int32 * Python float -> float64
    np.testing.assert_allclose(half(i32).to_numpy(),
                               ndi.correlate(i32.astype(np.float64), [[0.5, 0, 0.5]],
                                             mode="nearest"))
    as32 = sk.Stencil(lambda nb: (nb[0, -1] + nb[0, 1]) * 0.5, out_dtype=np.float32)
    assert as32(i32).dtype == np.float32
    assert half(i32, out_dtype=np.int32).dtype == np.int32


# -- extra arguments ------------------------------------------------------------------------------


def test_scalar_and_captured_extras(rng):
    k = 0.25
    a = sample(rng, np.float32, (20, 30))
    st = sk.Stencil(lambda nb, alpha: nb[0, 0] + alpha * k * (nb[-1, 0] + nb[1, 0]))
    got = st(a, 2.0).to_numpy()
    want = a + 0.5 * (ndi.correlate(a, [[1], [0], [1]], mode="nearest"))
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert st(a, 2.0).dtype == np.float32


def test_extra_matrices_at_the_cell_and_as_neighbourhoods(rng):
    a = sample(rng, np.float32, (23, 41))
    b = sample(rng, np.float32, (23, 41))
    c = sample(rng, np.int32, (23, 41))
    for mode in ["constant", "reflect", "wrap"]:
        st = sk.Stencil(lambda nb, other, lab: nb[0, 1] * other[0, 0] + other[-2, 1]
                        - other[1, -3] + lab[0, 0], border=mode, cval=0.5)
        out = st(a, b, c)
        pm = {"constant": "constant", "nearest": "edge", "wrap": "wrap", "reflect": "symmetric",
              "mirror": "reflect"}[mode]
        kw = {"constant_values": 0.5} if mode == "constant" else {}
        pa = np.pad(a.astype(np.float64), 3, mode=pm, **kw)
        pb = np.pad(b.astype(np.float64), 3, mode=pm, **kw)
        r, cc = a.shape
        want = (pa[3:3 + r, 4:4 + cc] * b + pb[1:1 + r, 4:4 + cc] - pb[4:4 + r, 0:cc] + c)
        assert out.dtype == np.float64   # float32 + int32 promotes
        for local in (0, 1):
            got = st(a, b, c, params={"local": local, "wg_r": 4, "wg_c": 8}).to_numpy()
            np.testing.assert_allclose(got, want, atol=1e-4)


def test_extra_vector_read_by_index(rng):
    a = sample(rng, np.float32, (9, 10))
    wts = np.array([0.5, 2.0], np.float32)
    st = sk.Stencil(lambda nb, w: w[0] * nb[0, -1] + w[1] * nb[0, 1])
    got = st(a, sk.Vector(wts)).to_numpy()
    np.testing.assert_allclose(got, ndi.correlate(a, [[0.5, 0, 2.0]], mode="nearest"), atol=1e-5)


def test_extra_matrix_of_another_shape_is_an_error():
    st = sk.Stencil(lambda nb, o: nb[0, 0] + o[0, 0])
    with pytest.raises(sk.ShapeError, match="shape"):
        st(np.zeros((4, 5), np.float32), np.zeros((5, 4), np.float32))


# -- iterations and sequences ---------------------------------------------------------------------


def heat_muscle(nb):
    return nb[0, 0] + 0.2 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


def numpy_heat(u, steps):
    u = u.astype(np.float64)
    for _ in range(steps):
        p = np.pad(u, 1, mode="edge")
        u = u + 0.2 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u)
    return u


def test_iterations_match_a_numpy_loop_without_host_transfers(rng, stats):
    u0 = rng.random((40, 33)).astype(np.float32)
    step = sk.Stencil(heat_muscle, shape=1, border="nearest")
    m = sk.Matrix(u0)
    for local in (0, 1):
        stats.reset()
        out = step(m, iterations=57, params={"local": local})
        assert stats.downloads == 0
        assert stats.uploads <= 1
        assert stats.launches == 57
        got = out.to_numpy()
        assert stats.downloads == 1
        np.testing.assert_allclose(got, numpy_heat(u0, 57), atol=1e-4)
        assert len(step.last_launch.events) == 57
        assert step.last_launch.params["local"] == local
    np.testing.assert_array_equal(m.to_numpy(), u0)   # the input is never overwritten
    np.testing.assert_array_equal(step(m, iterations=0).to_numpy(), u0)
    np.testing.assert_allclose(step(m, iterations=1).to_numpy(), numpy_heat(u0, 1), atol=1e-5)
    np.testing.assert_allclose(step(m, iterations=2).to_numpy(), numpy_heat(u0, 2), atol=1e-5)


def test_iterations_when_the_output_dtype_differs(rng):
    a = rng.integers(0, 10, (7, 8)).astype(np.int32)
    avg = sk.Stencil(lambda nb: (nb[0, -1] + nb[0, 1]) / 2)       # int32 -> float64
    got = avg(a, iterations=3).to_numpy()
    want = a.astype(np.float64)
    for _ in range(3):
        want = ndi.correlate(want, [[0.5, 0, 0.5]], mode="nearest")
    np.testing.assert_allclose(got, want)


def test_sequences_match_composed_scipy_calls(rng, stats):
    a = sample(rng, np.float32, (50, 61))
    blur = sk.Stencil(lambda nb: (nb[0, -1] + 2 * nb[0, 0] + nb[0, 1]) * 0.25, border="reflect")
    down = sk.Stencil(lambda nb: (nb[-1, 0] + 2 * nb[0, 0] + nb[1, 0]) * 0.25, border="reflect")
    lap = sk.Stencil(lambda nb: nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0],
                     border="wrap")
    seq = blur >> down >> lap
    assert isinstance(seq, sk.StencilSequence) and len(seq) == 3
    assert len(blur >> (down >> lap)) == 3

    def ref(x):
        x = ndi.correlate(x, np.array([[0.25, 0.5, 0.25]]), mode="reflect")
        x = ndi.correlate(x, np.array([[0.25], [0.5], [0.25]]), mode="reflect")
        return ndi.correlate(x, np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], float), mode="wrap")

    m = sk.Matrix(a)
    stats.reset()
    out = seq(m)
    assert stats.downloads == 0 and stats.launches == 3
    np.testing.assert_allclose(out.to_numpy(), ref(a.astype(np.float64)), atol=1e-4)
    out3 = seq(m, iterations=3)
    want = a.astype(np.float64)
    for _ in range(3):
        want = ref(want)
    np.testing.assert_allclose(out3.to_numpy(), want, atol=1e-3)
    assert seq.last_launch is not None and len(seq.last_launch.events) == 9
    assert set(seq.last_launch.params) == {0, 1, 2}
    assert blur.last_launch is not None


def test_sequence_params_and_extras(rng):
    a = sample(rng, np.float32, (12, 13))
    scale = sk.Stencil(lambda nb, f: nb[0, 0] * f)
    shift = sk.Stencil(lambda nb, f, g: nb[0, 1] + g)
    seq = scale >> shift
    p = [{"local": 1, "wg_r": 2, "wg_c": 4}, {"local": 0, "wg_r": 1, "wg_c": 8}]
    out = seq(a, 2.0, 1.0, params=p).to_numpy()
    want = ndi.correlate(a * 2.0, [[0, 0, 1]], mode="nearest") + 1.0
    np.testing.assert_allclose(out, want, atol=1e-5)
    for i in (0, 1):
        assert {k: seq.last_launch.params[i][k] for k in p[i]} == p[i]
    with pytest.raises(sk.ShapeError):
        seq(a, 2.0)


# -- shapes: inference and errors -----------------------------------------------------------------


def test_shape_is_inferred_from_constant_offsets():
    st = sk.Stencil(lambda nb: nb[-2, 0] + nb[0, 3] + nb[1, -1])
    a = np.arange(30, dtype=np.float32).reshape(5, 6)
    st(a)
    plan = next(iter(st._plans.values()))
    assert plan.shape == sk.Shape(north=2, south=1, east=3, west=1)
    want = pad_correlate(a, _taps({(-2, 0): 1, (0, 3): 1, (1, -1): 1}, plan.shape), plan.shape,
                         "nearest")
    np.testing.assert_allclose(st(a).to_numpy(), want)


def _taps(taps, s):
    w = np.zeros((s.north + s.south + 1, s.west + s.east + 1))
    for (dr, dc), v in taps.items():
        w[dr + s.north, dc + s.west] = v
    return w


def test_access_outside_the_given_shape_fails_at_construction():
    with pytest.raises(sk.ShapeError) as info:
        sk.Stencil(lambda nb: nb[0, 0] + nb[2, 0], shape=1)
    msg = str(info.value)
    assert "test_stencil.py" in msg and "[2, 0]" in msg
    with pytest.raises(sk.ShapeError, match="outside"):
        sk.Stencil(lambda nb: nb[-1, 0], shape=sk.Shape(south=1))


def _reads_too_far(nb):
    up = nb[-1, 0]
    down = nb[3, 0]
    return up + down


def test_shape_error_names_the_line_of_the_offending_read():
    with pytest.raises(sk.ShapeError) as info:
        sk.Stencil(_reads_too_far, shape=sk.Shape(north=1, south=1))
    line = _reads_too_far.__code__.co_firstlineno + 2
    assert f"test_stencil.py:{line}" in str(info.value)
    assert "[3, 0]" in str(info.value)


def test_access_outside_the_shape_with_extras_fails_at_the_first_call():
    st = sk.Stencil(lambda nb, o: nb[0, 0] + o[0, 2], shape=1)
    with pytest.raises(sk.ShapeError, match="extra matrix 1"):
        st(np.zeros((3, 3), np.float32), np.zeros((3, 3), np.float32))


def test_shape_that_cannot_be_inferred_is_an_error():
    def dynamic(nb, k):
        return nb[k, 0]

    st = sk.Stencil(dynamic)
    with pytest.raises(sk.ShapeError, match="shape="):
        st(np.zeros((3, 3), np.float32), 1)
    # with a shape, a run-time offset is checked against it at run time (tests/
    # test_stencil_offsets.py has more): inside, the right answer; outside, an error
    st2 = sk.Stencil(dynamic, shape=1, border="constant", cval=-1)
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(st2(a, 1).to_numpy(), np.vstack([a[1:], [[-1, -1, -1]]]))
    with pytest.raises(sk.BoundsError, match="row offset 5"):
        st2(a, 5)


def test_opencl_c_muscle_with_the_accessor_macro(rng):
    src = """
    float func(float* nb, float k) {
        return k * (SKELPY_GET2(nb, -1, 0) + SKELPY_GET2(nb, 1, 0)) - SKELPY_GET2(nb, 0, 2);
    }"""
    a = sample(rng, np.float32, (17, 19))
    st = sk.Stencil(src, border="mirror")
    got = st(a, np.float32(0.5)).to_numpy()
    want = ndi.correlate(a.astype(np.float64), [[0, 0, 0.5, 0, 0], [0, 0, 0, 0, -1],
                                                [0, 0, 0.5, 0, 0]], mode="mirror")
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert next(iter(st._plans.values())).shape == sk.Shape(north=1, south=1, east=2, west=0)
    loop = """
    float func(float* nb) {
        float s = 0.0f;
        for (int d = -2; d <= 2; ++d) s += SKELPY_GET2(nb, 0, d);
        return s;
    }"""
    with pytest.raises(sk.ShapeError, match="shape="):
        sk.Stencil(loop)(a)
    got = sk.Stencil(loop, shape=2, border="wrap")(a).to_numpy()
    np.testing.assert_allclose(got, ndi.correlate(a, np.ones((1, 5)), mode="wrap"), atol=1e-5)


def test_bad_arguments():
    with pytest.raises(sk.ParameterError, match="border"):
        sk.Stencil(lambda nb: nb[0, 0], border="periodic")
    with pytest.raises(sk.ShapeError):
        sk.Stencil(lambda nb: nb[0, 0], shape=-1)
    with pytest.raises(sk.ShapeError):
        sk.Shape(north=1.5)
    st = sk.Stencil(lambda nb: nb[0, 0], border="constant", cval=1.5)
    with pytest.raises(sk.DTypeError, match="cval"):
        st(np.zeros((3, 3), np.int32))
    st = sk.Stencil(lambda nb: nb[0, 1], shape=1)
    with pytest.raises(sk.ShapeError, match="2-D"):
        st(np.zeros(5, np.float32))
    with pytest.raises(sk.DTypeError):
        st(3.0)
    with pytest.raises(sk.ParameterError, match="iterations"):
        st(np.zeros((3, 3), np.float32), iterations=-1)
    with pytest.raises(sk.ShapeError, match="parameter"):
        st(np.zeros((3, 3), np.float32), 1.0)
    with pytest.raises(sk.ParameterError):
        sk.StencilSequence(st, "not a stencil")


def test_grid_aliases_and_repr():
    assert sk.Stencil(lambda nb: nb[0, 0], border="grid-wrap").border == "wrap"
    assert sk.Stencil(lambda nb: nb[0, 0], border="grid-mirror").border == "reflect"
    assert "Stencil" in repr(sk.Stencil(lambda nb: nb[0, 0]))
    assert str(sk.Shape(north=1)) == "Shape(north=1, south=0, east=0, west=0)"


def test_empty_matrix():
    st = sk.Stencil(lambda nb: nb[0, 1] + 1, shape=1)
    out = st(np.zeros((0, 4), np.float32))
    assert out.shape == (0, 4)
    assert st(np.zeros((3, 0), np.float32), iterations=3).to_numpy().shape == (3, 0)


def test_result_stays_on_device_until_read(stats, rng):
    st = sk.Stencil(lambda nb: nb[0, 1] - nb[0, -1])
    m = sk.Matrix(sample(rng, np.float32, (30, 30)))
    stats.reset()
    out = st(st(m))
    assert stats.downloads == 0 and stats.uploads == 1
    out.to_numpy()
    assert stats.downloads == 1
