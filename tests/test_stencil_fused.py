"""Fused stencil sequences (``a >> b >> c`` as one kernel): bit-for-bit equal to the staged
run for every border mode, mixed dtypes (int16 -> float64 -> uint8 -> int32), every kind of
extra argument, ``iterations=``, and awkward sizes (1x1, 1xN, Nx1, primes, smaller than a tile
and several tiles with interior ones); staged wherever fusion is not legal; clean under
oclgrind.

Few sequences with many features each, each built once (a PoCL build costs about a second),
run at every size: a forced small tile makes the larger sizes span interior and edge tiles."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import scipy.ndimage as ndi
from oclgrind_support import STRICT_MARKERS, run_under_oclgrind

import skelpy as sk

SHAPES = [(1, 1), (1, 17), (23, 1), (2, 3), (13, 7), (37, 53), (41, 71)]
SMALL_TILE = {"fuse": 1, "fu_wc": 8, "fu_wr": 4, "fu_cr": 2, "fu_cc": 2, "fu_flat": 0}
# the other two ways of dealing out a level's cells (one by one; runs of 3 rows)
FLAT_TILE = {"fuse": 1, "fu_wc": 8, "fu_wr": 4, "fu_cr": 2, "fu_cc": 2, "fu_flat": 1}
RUN_TILE = {"fuse": 1, "fu_wc": 8, "fu_wr": 2, "fu_cr": 3, "fu_cc": 2, "fu_flat": 2}


def float_sequence():
    """constant (with cval) >> reflect >> nearest, float32, with a weak scalar, an extra
    matrix read around the cell (with each stage's rule) and at the cell, and a Vector."""
    s0 = sk.Stencil(lambda nb, w, k, v: nb[-1, 0] * k + nb[0, 1] - w[1, -1] + v[1],
                    border="constant", cval=2.5)
    s1 = sk.Stencil(lambda nb, w: nb[0, 0] * w[0, 0] + nb[1, -1] - 0.25 * nb[-1, 1],
                    border="reflect")
    s2 = sk.Stencil(lambda nb: nb[-2, 0] - nb[0, 1] * np.float32(0.5), border="nearest")
    return s0 >> s1 >> s2


def mixed_sequence():
    """mirror (int16 -> float64) >> nearest (float64 -> uint8, NMS-like) >> constant
    (uint8 -> int32)."""
    s0 = sk.Stencil(lambda nb: nb[0, 0] * 0.5 + nb[1, 1] - nb[-1, 0] * 0.25, border="mirror",
                    out_dtype=np.float64)
    s1 = sk.Stencil(lambda nb: (nb[0, -1] > nb[0, 1]) * 2 + (nb[0, 0] > 0), border="nearest",
                    out_dtype=np.uint8)
    s2 = sk.Stencil(lambda nb: nb[-1, -1] + 2 * nb[1, 1] + nb[0, 0] + 3, border="constant",
                    cval=1, out_dtype=np.int32)
    return s0 >> s1 >> s2


def both(seq, *args, **kw):
    """(fused, staged) results as arrays, and the fused call's Launch."""
    fused = seq(*args, params=kw.pop("params", SMALL_TILE), **kw).to_numpy()
    launch = seq.last_launch
    staged = seq(*args, params={"fuse": 0}, **kw).to_numpy()
    assert seq.last_launch.fused is False
    return fused, staged, launch


def test_float_sequence_with_extras_equals_staged(rng):
    seq = float_sequence()
    for shape in SHAPES:
        a = rng.standard_normal(shape).astype(np.float32)
        w = sk.Matrix(rng.standard_normal(shape).astype(np.float32))
        v = sk.Vector(np.array([1.5, -0.75, 3.0], np.float32))
        fused, staged, launch = both(seq, a, w, 0.3, v)
        assert launch.fused is True and launch.params["fu_wc"] == 8
        assert fused.dtype == staged.dtype == np.float32
        np.testing.assert_array_equal(fused.view(np.uint32), staged.view(np.uint32))
    # the fused tile a GPU would start from (one more build), on the largest size
    got = seq(a, w, 0.3, v, params={"fuse": 1}).to_numpy()
    assert seq.last_launch.fused is True
    np.testing.assert_array_equal(got.view(np.uint32), staged.view(np.uint32))


def test_mixed_dtypes_and_border_modes_equal_staged(rng):
    seq = mixed_sequence()
    for shape in SHAPES:
        a = rng.integers(-300, 300, shape).astype(np.int16)
        fused, staged, launch = both(seq, a, params=FLAT_TILE)
        assert launch.fused is True
        assert fused.dtype == staged.dtype == np.int32
        np.testing.assert_array_equal(fused, staged)


def test_wrap_sequence_with_iterations_matches_scipy_and_staged(rng):
    """Every stage wrap: the fused kernel computes the periodic continuation."""
    s0 = sk.Stencil(lambda nb: nb[-1, 0] + nb[0, 1] + nb[0, 0], border="wrap")
    s1 = sk.Stencil(lambda nb: nb[1, 1] - 2 * nb[0, -2], border="wrap")
    seq = s0 >> s1
    k0 = np.array([[0, 1, 0], [0, 1, 1], [0, 0, 0]])
    k1 = np.zeros((5, 5), int)
    k1[3, 3], k1[2, 0] = 1, -2
    for shape in [(1, 1), (1, 17), (23, 1), (3, 2), (37, 53)]:
        a = rng.integers(-50, 50, shape).astype(np.int32)
        fused, staged, launch = both(seq, a, iterations=3, params=RUN_TILE)
        assert launch.fused is True and launch.iterations == 3 and len(launch.events) == 3
        want = a.astype(np.int64)
        for _ in range(3):
            want = ndi.correlate(ndi.correlate(want, k0, mode="wrap"), k1, mode="wrap")
        np.testing.assert_array_equal(fused, staged)
        np.testing.assert_array_equal(fused, want.astype(np.int32))


def test_decision_source_and_illegal_sequences(rng):
    seq = mixed_sequence()
    a = rng.integers(-9, 9, (20, 30)).astype(np.int16)
    # the default is staged (fused only where the tuner measured it pays); equal either way
    got = seq(a).to_numpy()
    assert isinstance(seq.last_launch.fused, bool)
    np.testing.assert_array_equal(got, seq(a, params={"fuse": 0}).to_numpy())
    assert seq.fused_decision(a)["fuse"] == 0
    text = seq.source(a, params=SMALL_TILE)
    assert text.startswith("/* fused: 3 stages in one kernel")
    assert "#define SKP_FU_WC 8" in text and "__local double skp_lv1" in text
    assert seq.source(a, params={"fuse": 0}).startswith("/* stage 0")
    # per-stage parameters run staged (the points just used: no new build)
    points = [dict(seq.last_launch.params[i]) for i in range(3)]
    seq(a, params=points)
    assert seq.last_launch.fused is False and set(seq.last_launch.params) == {0, 1, 2}
    with pytest.raises(sk.ParameterError, match="mixes the fused decision"):
        seq(a, params={"fuse": 1, "local": 1})

    # offsets known only at run time: staged, and fuse=1 is refused (before any build)
    shift = sk.Stencil(lambda nb, c: nb[0, c], shape=1)
    dyn = shift >> sk.Stencil(lambda nb: nb[0, 0] * 2)
    m = np.ones((6, 7), np.float32)
    assert "run time" in dyn.fused_plan(sk.Matrix(m), (1,))
    with pytest.raises(sk.ParameterError, match="cannot run fused"):
        dyn(m, 1, params={"fuse": 1})
    # a summed halo beyond what a tile carries; wrap mixed with another mode; one stage
    far = sk.Stencil(lambda nb: nb[-9, 0] + nb[9, 0])
    assert "halo" in (far >> far).fused_plan(sk.Matrix(m), ())
    wrap = sk.Stencil(lambda nb: nb[0, 1], border="wrap")
    assert "wrap mixed" in (wrap >> far).fused_plan(sk.Matrix(m), ())
    assert isinstance(sk.StencilSequence(wrap).fused_plan(sk.Matrix(m), ()), str)
    # repeating a sequence that changes the dtype runs staged
    assert seq.fused_decision(a, iterations=2) is None


def canny_like():
    """5x5 smoothing (float32, reflect) >> a Sobel-like gradient (float32 -> int32, nearest)
    >> a 3x3 suppression (int32 -> uint8, constant): the stage reaches and dtypes of Canny."""
    g = np.array([0.054489, 0.244201, 0.40262, 0.244201, 0.054489], np.float32)

    def smooth(nb):
        acc = np.float32(0)
        for dr in range(-2, 3):
            row = np.float32(0)
            for dc in range(-2, 3):
                row += g[dc + 2] * nb[dr, dc]
            acc += g[dr + 2] * row
        return acc

    def grad(nb):
        gi = nb[1, -1] + 2 * nb[1, 0] + nb[1, 1] - nb[-1, -1] - 2 * nb[-1, 0] - nb[-1, 1]
        gj = nb[-1, 1] + 2 * nb[0, 1] + nb[1, 1] - nb[-1, -1] - 2 * nb[0, -1] - nb[1, -1]
        return np.int32(np.sqrt(gi * gi + gj * gj) * np.float32(16))

    def suppress(nb):
        c = nb[0, 0]
        keep = (c >= nb[0, -1]) & (c > nb[0, 1]) & (c >= nb[-1, 0]) & (c > nb[1, 1])
        return np.uint8(2) if keep and c >= 200 else np.uint8(0)

    return (sk.Stencil(smooth, border="reflect")
            >> sk.Stencil(grad, border="nearest", out_dtype=np.int32)
            >> sk.Stencil(suppress, border="constant", cval=7, out_dtype=np.uint8))


def test_runs_through_register_windows_equal_staged(rng):
    """fu_flat 2 in interior tiles: whole runs of cells read their window of the level before
    into registers (kernels/stencil_fused.cl, SKP_FU_WHOLE_RUN); runs cut by the region's
    last row and edge tiles go cell by cell. Bit for bit against staged, at sizes with many
    interior tiles, runs of 4 (levels of 36 and 34 rows: the second cuts its last run; runs of
    3 run under oclgrind)."""
    seq = canny_like()
    tiles = [{"fuse": 1, "fu_wc": 8, "fu_wr": 8, "fu_cr": 4, "fu_cc": 1, "fu_flat": 2}]
    for shape in [(64, 70), (61, 97), (5, 40)]:
        a = (rng.standard_normal(shape) * 40).astype(np.float32)
        staged = seq(a, params={"fuse": 0}).to_numpy()
        assert staged.dtype == np.uint8 and 0 < np.count_nonzero(staged) < staged.size
        for p in tiles:
            got = seq(a, params=p).to_numpy()
            assert seq.last_launch.fused is True
            np.testing.assert_array_equal(got, staged, err_msg=f"{shape} {p}")


OCLGRIND = textwrap.dedent('''
    import numpy as np
    import skelpy as sk

    assert "oclgrind" in sk.current_device().platform.lower(), sk.current_device()
    rng = np.random.default_rng(3)
    s0 = sk.Stencil(lambda nb, w: nb[-1, 0] * 0.5 + nb[0, 1] - w[1, -1], border="constant",
                    cval=2.5)
    s1 = sk.Stencil(lambda nb: nb[0, 0] + nb[1, -1], border="reflect")
    s2 = sk.Stencil(lambda nb: (nb[-2, 0] > nb[0, 1]) + nb[0, 0] * 0, border="mirror",
                    out_dtype=np.uint8)
    seq = s0 >> s1 >> s2
    tiles = [{"fuse": 1, "fu_wc": 4, "fu_wr": 4, "fu_cr": 2, "fu_cc": 2, "fu_flat": 1},
             {"fuse": 1, "fu_wc": 4, "fu_wr": 4, "fu_cr": 3, "fu_cc": 2, "fu_flat": 2},
             {"fuse": 1, "fu_wc": 8, "fu_wr": 2, "fu_cr": 4, "fu_cc": 1, "fu_flat": 0}]
    for shape in [(1, 5), (7, 1), (13, 19), (30, 37)]:   # 30 x 37: interior tiles too
        a = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal(shape).astype(np.float32)
        want = seq(a, w, params={"fuse": 0}).to_numpy()
        for p in tiles:
            got = seq(a, w, params=p).to_numpy()
            assert seq.last_launch.fused and np.array_equal(got, want), (shape, p)
    wrap = sk.Stencil(lambda nb: nb[-1, 1] + nb[0, 0], border="wrap")
    b = rng.integers(0, 9, (9, 11)).astype(np.int32)
    got = (wrap >> wrap)(b, iterations=2, params=tiles[0]).to_numpy()
    want = (wrap >> wrap)(b, iterations=2, params={"fuse": 0}).to_numpy()
    assert np.array_equal(got, want)
    print("FUSED-OCLGRIND-OK")
''')


@pytest.mark.oclgrind
@pytest.mark.slow
def test_fused_sequence_under_oclgrind(tmp_path):
    run_under_oclgrind(tmp_path, "fused_oclgrind.py", OCLGRIND, "FUSED-OCLGRIND-OK",
                       markers=STRICT_MARKERS)
