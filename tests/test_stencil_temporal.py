"""Temporal blocking (``iterations=`` in passes of t steps): bit-for-bit equal to single steps
for every border mode, dtype, kind of extra argument, t = 1..8 and remainders, at awkward
sizes; close to scipy.ndimage's iterated correlation; clean under oclgrind.

Small tiles (``tb_wc`` 8-16 work-items, ``tb_rows`` 3-8 rows) make matrices of a few dozen
cells span several tiles and chunks, so overlaps, chunk prologues and both edges all occur.
The exhaustive sweeps (every t from 1 to 8, more shapes) run with SKELPY_HEAVY=1; by default a
sample of them (each kernel variant is a PoCL build of a second or two)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from oclgrind_support import STRICT_MARKERS, run_under_oclgrind

import skelpy as sk
from skelpy.skeletons.stencil_temporal import NAMES

ROOT = Path(__file__).resolve().parent.parent
HEAVY = os.environ.get("SKELPY_HEAVY") == "1"
heavy = pytest.mark.skipif(not HEAVY, reason="exhaustive sweep: SKELPY_HEAVY=1")
MODES = ["constant", "nearest", "wrap", "reflect", "mirror"]
SHAPES = [(1, 1), (1, 23), (23, 1), (2, 2), (7, 5), (31, 37), (47, 19)]


def heat(nb):
    return nb[0, 0] + 0.1 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


def lopsided(nb):
    """Reach 2 north, 1 east, nothing south or west: asymmetry shows any mixed-up edge."""
    return 0.5 * nb[0, 0] + 0.25 * nb[-2, 0] + 0.125 * nb[-1, 1] - 0.0625 * nb[0, 1]


def life(nb):
    n = (nb[-1, -1] + nb[-1, 0] + nb[-1, 1] + nb[0, -1] + nb[0, 1] + nb[1, -1] + nb[1, 0]
         + nb[1, 1])
    return 1 if n == 3 or (n == 2 and nb[0, 0] == 1) else 0


def stepwise(st, a, iterations, *extras):
    """The reference: one single-step call per step."""
    m = sk.Matrix(a)
    for _ in range(iterations):
        m = st(m, *extras)
    return m.to_numpy()


def temporal(st, a, iterations, t, *extras, **tile):
    p = {"t": t, "tb_wc": 16, "tb_rows": 8, **tile}
    out = st(sk.Matrix(a), *extras, iterations=iterations, params=p).to_numpy()
    launch = st.last_launch
    if t > 1 and iterations > 0:
        assert launch.params["t"] == t and launch.iterations == iterations
        assert len(launch.events) == -(-iterations // t)       # the last pass: the remainder
    return out


def assert_bitwise(got, want, what):
    assert got.dtype == want.dtype, what
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), \
        (what, np.argwhere(got != want)[:8].tolist())


# -- bit for bit ---------------------------------------------------------------------------------


SMALL_SHAPES = SHAPES[:5]            # at most 2 x the reach + 1 rows or columns
TILE_A = {"tb_ring": 0, "tb_unroll": 1}
TILE_B = {"tb_ring": 1, "tb_unroll": 0, "tb_vec": 2, "tb_wc": 8, "tb_wr": 2, "tb_rows": 3}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("muscle", [lopsided, pytest.param(heat, marks=heavy)],
                         ids=["lopsided", "heat"])
def test_every_border_mode_equals_single_steps(mode, muscle, rng):
    """Registers (tile A) and the ring with vectors and two streams (tile B), each on small
    matrices (rules folding more than once) and on matrices of several tiles and chunks;
    SKELPY_HEAVY=1 crosses them."""
    st = sk.Stencil(muscle, border=mode, cval=0.75)
    for shape in SHAPES:
        a = rng.random(shape).astype(np.float32)
        want = stepwise(st, a, 6)
        tiles = (TILE_A, TILE_B) if HEAVY else (TILE_A if shape in SMALL_SHAPES else TILE_B,)
        for tile in tiles:
            assert_bitwise(temporal(st, a, 6, 3, **tile), want, (mode, shape, tile))


def test_t_with_remainders(rng):
    st = sk.Stencil(heat, border="mirror")
    a = rng.random((29, 41)).astype(np.float32)
    want = stepwise(st, a, 11)
    for t in (4, 8):                        # 4 + 4 + 3 and 8 + 3
        assert_bitwise(temporal(st, a, 11, t), want, (11, t))
    # a pass of more steps than asked for runs just the steps asked for
    assert_bitwise(temporal(st, a, 3, 8), stepwise(st, a, 3), "t > iterations")
    np.testing.assert_array_equal(temporal(st, a, 0, 4), a)


@heavy
@pytest.mark.parametrize("mode", MODES)
def test_t_from_1_to_8_every_mode(mode, rng):
    st = sk.Stencil(lopsided, border=mode, cval=0.5)
    for shape in SHAPES:
        a = rng.random(shape).astype(np.float32)
        for iterations in (11, 16):
            want = stepwise(st, a, iterations)
            for t in range(1, 9):
                for tile in ({"tb_ring": 0, "tb_unroll": 1}, {"tb_ring": 1, "tb_vec": 4}):
                    assert_bitwise(temporal(st, a, iterations, t, **tile), want,
                                   (shape, iterations, t, tile))


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8, np.int8])
def test_dtypes(dtype, rng, has_fp64):
    if dtype == np.float64 and not has_fp64:
        pytest.skip("no fp64")
    if dtype == np.float64:
        st = sk.Stencil(heat, border="reflect")
        a = rng.random((19, 33))
    else:
        st = sk.Stencil(life, border="wrap", out_dtype=dtype)
        a = (rng.random((19, 33)) < 0.35).astype(dtype)
    want = stepwise(st, a, 9)
    wide = 16 // np.dtype(dtype).itemsize            # one 16-byte vector per work-item
    assert_bitwise(temporal(st, a, 9, 3, tb_ring=0, tb_unroll=1), want, (dtype, "regs"))
    assert_bitwise(temporal(st, a, 9, 3, tb_ring=1, tb_vec=wide, tb_wc=8), want,
                   (dtype, "ring, wide vectors"))


def test_game_of_life_matches_numpy(rng):
    def numpy_life(b, n):
        b = b.astype(np.int32)
        for _ in range(n):
            k = sum(np.roll(np.roll(b, dr, 0), dc, 1) for dr in (-1, 0, 1) for dc in (-1, 0, 1)
                    if (dr, dc) != (0, 0))
            b = ((k == 3) | ((k == 2) & (b == 1))).astype(np.int32)
        return b

    st = sk.Stencil(life, border="wrap", out_dtype=np.uint8)
    a = (rng.random((40, 27)) < 0.4).astype(np.uint8)
    got = temporal(st, a, 13, 4, tb_wc=4, tb_rows=16, tb_vec=8)
    np.testing.assert_array_equal(got, numpy_life(a, 13))


@pytest.mark.parametrize("mode", [m if m in ("constant", "mirror") else pytest.param(m, marks=heavy)
                                  for m in MODES])
def test_linear_stencil_matches_scipy(mode, rng, has_fp64):
    if not has_fp64:
        pytest.skip("no fp64")
    w = np.array([[0.0, 0.1, 0.05], [0.1, 0.5, 0.1], [0.02, 0.1, 0.03]])

    def blur(nb):
        return (0.1 * nb[-1, 0] + 0.05 * nb[-1, 1] + 0.1 * nb[0, -1] + 0.5 * nb[0, 0]
                + 0.1 * nb[0, 1] + 0.02 * nb[1, -1] + 0.1 * nb[1, 0] + 0.03 * nb[1, 1])

    st = sk.Stencil(blur, border=mode, cval=2.0)
    for shape in [(1, 9), (9, 1), (3, 3), (26, 31)] if HEAVY else [(3, 3), (26, 31)]:
        a = rng.random(shape)
        want = a.copy()
        for _ in range(10):
            want = ndi.correlate(want, w, mode=mode, cval=2.0)
        np.testing.assert_allclose(temporal(st, a, 10, 4), want, rtol=1e-12, atol=1e-12)


# -- extra arguments -------------------------------------------------------------------------


def test_extra_arguments(rng):
    rows, cols = 23, 30
    a = rng.random((rows, cols)).astype(np.float32)
    src = sk.Matrix(rng.random((rows, cols)).astype(np.float32))
    mask = sk.Matrix(rng.random((rows, cols)).astype(np.float32))
    weights = sk.Vector(np.array([0.3, 0.2, 0.1], np.float32))

    def forced(nb, q, k, s, w):
        # q, s: matrices read at the cell and around it; k: a scalar; w: a vector
        return (nb[0, 0] * w[0] + w[1] * (nb[-1, 0] + nb[1, 0]) + w[2] * nb[0, 1]
                + k * q[0, 0] + 0.01 * s[0, -1] - 0.01 * s[1, 0])

    for mode in ("constant", "reflect", "wrap"):
        st = sk.Stencil(forced, border=mode, cval=0.5)
        for k in (0.25, np.float32(-0.5)):
            want = stepwise(st, a, 6, src, k, mask, weights)
            for t in (2, 3) if HEAVY else (3,):
                got = temporal(st, a, 6, t, src, k, mask, weights)
                assert_bitwise(got, want, (mode, k, t))


def test_weak_scalar_keeps_the_dtype(rng):
    st = sk.Stencil(lambda nb, c: nb[0, 0] + c * (nb[0, -1] + nb[0, 1] - 2 * nb[0, 0]))
    a = rng.random((12, 70)).astype(np.float32)
    assert_bitwise(temporal(st, a, 5, 5, 0.2), stepwise(st, a, 5, 0.2), "weak scalar")


# -- hypothesis: shapes, tiles, chunks ---------------------------------------------------------


@settings(max_examples=40 if HEAVY else 4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rows=hs.integers(1, 40), cols=hs.integers(1, 40), iterations=hs.sampled_from([3, 6]),
       t=hs.just(3), wc=hs.sampled_from([8, 12, 16]),
       chunk=hs.integers(1, 12), wr=hs.sampled_from([1, 2]), ring=hs.sampled_from([0, 1]),
       vec=hs.sampled_from([1, 2, 4]), mode=hs.sampled_from(MODES))
def test_any_shape_tile_and_chunk(rows, cols, iterations, t, wc, chunk, wr, ring, vec, mode):
    st = _lopsided_stencils[mode]
    a = np.random.default_rng(rows * 41 + cols).random((rows, cols)).astype(np.float32)
    got = temporal(st, a, iterations, t, tb_wc=wc, tb_rows=chunk, tb_wr=wr, tb_ring=ring,
                   tb_unroll=1 - ring, tb_vec=vec)
    assert_bitwise(got, stepwise(st, a, iterations), (rows, cols, iterations, t))


_lopsided_stencils = {m: sk.Stencil(lopsided, border=m, cval=-1.0) for m in MODES}


# -- choosing t, and where the path does not apply ----------------------------------------------


def test_single_step_parameters_still_choose_single_steps(rng, stats):
    st = sk.Stencil(heat)
    a = rng.random((20, 20)).astype(np.float32)
    stats.reset()
    st(a, iterations=5, params={"local": 1})
    assert stats.launches == 5 and st.last_launch.params["local"] == 1
    st(a, iterations=5, params={"t": 1})
    assert "local" in st.last_launch.params and len(st.last_launch.events) == 5


def test_default_on_a_cpu_is_single_steps(rt, rng):
    if rt.device.kind == "gpu":
        pytest.skip("the CPU default")
    st = sk.Stencil(heat)
    a = rng.random((20, 20)).astype(np.float32)
    out = st(a, iterations=6)
    assert not set(st.last_launch.params) & set(NAMES)
    assert_bitwise(out.to_numpy(), stepwise(st, a, 6), "default")


def test_where_the_path_does_not_apply(rng):
    a = rng.integers(0, 10, (7, 8)).astype(np.int32)
    avg = sk.Stencil(lambda nb: (nb[0, -1] + nb[0, 1]) / 2)       # int32 -> float64
    want = stepwise(avg, a, 3)
    np.testing.assert_array_equal(avg(a, iterations=3).to_numpy(), want)
    np.testing.assert_array_equal(avg(a, iterations=3, params={"t": 1}).to_numpy(), want)
    with pytest.raises(sk.SkelpyError, match="several steps per pass"):
        avg(a, iterations=3, params={"t": 2})
    wide = sk.Stencil(lambda nb: nb[0, -5] + nb[0, 5], border="wrap")  # reach 5
    b = rng.random((6, 12)).astype(np.float32)
    np.testing.assert_array_equal(wide(b, iterations=2).to_numpy(), stepwise(wide, b, 2))
    with pytest.raises(sk.SkelpyError, match="several steps per pass"):
        wide(b, iterations=2, params={"t": 2})


def test_sequences_with_iterations_still_work(rng):
    blur = sk.Stencil(lambda nb: (nb[0, -1] + 2 * nb[0, 0] + nb[0, 1]) * 0.25, border="reflect")
    down = sk.Stencil(lambda nb: (nb[-1, 0] + 2 * nb[0, 0] + nb[1, 0]) * 0.25, border="reflect")
    a = rng.random((17, 21)).astype(np.float32)
    got = (blur >> down)(a, iterations=4).to_numpy()
    m = sk.Matrix(a)
    for _ in range(4):
        m = down(blur(m))
    assert_bitwise(got, m.to_numpy(), "sequence")


@pytest.mark.parametrize("mode", ["constant", "reflect", "wrap"])
def test_a_cycle_of_stages_in_one_pass(mode, rng, rt):
    """The builder's multi-stage form (what fusing ``a >> b`` with iterations needs): stage s
    of a pass applies muscle s mod K, each with its own extras."""
    from skelpy.muscle import Muscle
    from skelpy.skeletons.stencil_stream import Extra, Stage, StreamPlan

    def scaled(nb, c):
        return nb[0, 0] + c * (nb[0, -1] + nb[0, 1] - 2 * nb[0, 0])

    a_st = sk.Stencil(lopsided, border=mode, cval=-1.0)
    b_st = sk.Stencil(scaled, border=mode, cval=-1.0)
    def cval(dt):
        return "((float)(-1.0f))"

    plan = StreamPlan([Stage(Muscle(lopsided), (2, 0, 1, 0), mode, cval),
                       Stage(Muscle(scaled), (0, 0, 1, 1), mode, cval)], np.float32,
                      [Extra("scalar", np.dtype(np.float32))])
    a = rng.random((21, 26)).astype(np.float32)
    m = sk.Matrix(a)
    for _ in range(5):
        m = b_st(a_st(m), np.float32(0.25))
    want = m.to_numpy()
    bufs = [sk.Matrix(np.empty_like(a)) for _ in range(2)]
    point = {"t": 4, "tb_wc": 16, "tb_wr": 1, "tb_rows": 5, "tb_vec": 1, "tb_ring": 0,
             "tb_unroll": 1, "tb_pre": 2}
    assert not plan.legal(dict(point, t=3), rt.device)       # a pass ends on a whole cycle
    _buf, k, events = plan.run(rt, point, sk.Matrix(a).device_buffer(rt), 21, 26, 10,
                               [np.float32(0.25)], [b.device_buffer(rt) for b in bufs])
    assert len(events) == 3                                   # 4 + 4 + the remaining 2
    bufs[k].mark_device_written()
    assert_bitwise(bufs[k].to_numpy(), want, mode)


def test_input_is_untouched_and_errors_leave_it(rng):
    st = sk.Stencil(heat, border="wrap")
    a = rng.random((9, 9)).astype(np.float32)
    m = sk.Matrix(a.copy())
    st(m, iterations=4, params={"t": 2, "tb_wc": 8})
    np.testing.assert_array_equal(m.to_numpy(), a)
    with pytest.raises(sk.SkelpyError):
        st(m, iterations=4, params={"t": 2, "tb_wc": 8, "bogus": 1})
    np.testing.assert_array_equal(m.to_numpy(), a)


# -- oclgrind ------------------------------------------------------------------------------------

SCRIPT = textwrap.dedent('''
    import numpy as np
    import skelpy as sk

    assert "oclgrind" in sk.current_device().platform.lower(), sk.current_device()
    rng = np.random.default_rng(3)

    def lopsided(nb, q):
        return 0.5 * nb[0, 0] + 0.25 * nb[-2, 0] + 0.125 * nb[-1, 1] - q * nb[0, 1]

    checked = 0
    for mode in ["constant", "nearest", "wrap", "reflect", "mirror"]:
        st = sk.Stencil(lopsided, border=mode, cval=-1.0)
        for shape in [(1, 1), (2, 13), (9, 4), (11, 17)]:
            a = rng.random(shape).astype(np.float32)
            m = sk.Matrix(a)
            for _ in range(5):
                m = st(m, 0.25)
            want = m.to_numpy()
            for p in [{"t": 3, "tb_wc": 8, "tb_rows": 4, "tb_wr": 2, "tb_ring": 0,
                       "tb_unroll": 1, "tb_pre": 2},
                      {"t": 3, "tb_wc": 4, "tb_rows": 5, "tb_vec": 4, "tb_ring": 0,
                       "tb_unroll": 1},
                      {"t": 2, "tb_wc": 4, "tb_rows": 3, "tb_vec": 2, "tb_ring": 1,
                       "tb_unroll": 0, "tb_pre": 4},
                      {"t": 2, "tb_wc": 8, "tb_rows": 7, "tb_ring": 1, "tb_unroll": 1}]:
                got = st(a, 0.25, iterations=5, params=p).to_numpy()
                assert np.array_equal(got, want), (mode, shape, p)
                checked += 1
    print("TEMPORAL-OCLGRIND-OK", checked)
''')



@pytest.mark.oclgrind
@pytest.mark.slow
def test_temporal_kernel_under_oclgrind(tmp_path):
    run_under_oclgrind(tmp_path, "temporal_oclgrind.py", SCRIPT, "TEMPORAL-OCLGRIND-OK 80",
                       markers=STRICT_MARKERS)


# -- the benchmark runs here too -----------------------------------------------------------------


def test_benchmark_runs_and_checks_bitwise(tmp_path):
    sys.path.insert(0, str(ROOT))
    from benchmarks import bench_temporal

    data = bench_temporal.main(["--sizes", "40", "--iterations", "5", "--cases", "heat,life_u8",
                                "--reps", "1", "--out", str(tmp_path)])
    assert [(r["case"], r["size"]) for r in data["rows"]] == [("heat", 40), ("life_u8", 40)]
    for row, case in zip(data["rows"], data["cases"]):
        assert row["bitwise"] is True and row["single GCS/s"] > 0 and row["best GCS/s"] > 0
        measured = [p for p in case["points"] if "seconds" in p]
        assert len({p["params"]["t"] for p in measured}) >= 3
        assert all(p["bitwise"] for p in measured)
    assert list(tmp_path.glob("temporal-*.json"))
