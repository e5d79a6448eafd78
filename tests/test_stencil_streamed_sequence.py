"""Stencil sequences streamed (``params={"fuse": 2}``: the stages as one streaming pass, each
level of its stage's dtype held as words): bit-for-bit equal to the staged run for Canny-like
sequences float32 -> int32 -> uint8, every border mode (wrap with wrap only), extra arguments,
``iterations=`` of a sequence that ends in its input dtype, and awkward sizes (1xN, Nx1, 2x2,
primes, smaller than the summed halo, several tiles and chunks); the decision's default
(staged); clean under oclgrind.

Three sequences cover the five border modes at different levels and dtypes; each builds few
programs (a PoCL build costs about a second), run at every size."""

from __future__ import annotations

import os
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
from oclgrind_support import STRICT_MARKERS, run_under_oclgrind

import skelpy as sk
from skelpy.skeletons.stencil_stream import StreamPlan

HEAVY = os.environ.get("SKELPY_HEAVY") == "1"

# 3 x 4 is smaller than the summed halo of every sequence below (4 or more rows per side)
SHAPES = [(1, 11), (11, 1), (2, 2), (3, 4), (13, 17), (29, 61)]
# small tiles and chunks: the larger sizes span several tiles (interior ones) and streams;
# own columns in registers, the walk unrolled by the rings' period (kept a loop on PoCL)
TILE = {"fuse": 2, "tb_wc": 16, "tb_wr": 2, "tb_rows": 8, "tb_vec": 1, "tb_ring": 0,
        "tb_unroll": 1, "tb_pre": 1}
# the staged reference at one point per stage (one build per stage for every size)
STAGE_POINT = {"local": 0, "wg_r": 4, "wg_c": 8, "cr": 1, "cc": 1}


def smooth(nb):
    """A 5x5 weighted sum (float32): a Gaussian-like smoothing that rounds at every step."""
    acc = np.float32(0)
    for dr in range(-2, 3):
        row = np.float32(0)
        for dc in range(-2, 3):
            row += np.float32(0.1 + 0.05 * (abs(dr) + abs(dc))) * nb[dr, dc]
        acc += np.float32(0.5) * row
    return acc


def gradient(nb):
    """float32 -> int32: Sobel's magnitude x 16 (truncated) x 4 + a direction bin."""
    gi = (nb[1, -1] + 2 * nb[1, 0] + nb[1, 1]) - (nb[-1, -1] + 2 * nb[-1, 0] + nb[-1, 1])
    gj = (nb[-1, 1] + 2 * nb[0, 1] + nb[1, 1]) - (nb[-1, -1] + 2 * nb[0, -1] + nb[1, -1])
    d = np.int32(0)
    if abs(gi) > np.float32(0.41421356) * abs(gj):
        d = np.int32(2) if abs(gj) <= np.float32(0.41421356) * abs(gi) else np.int32(1)
    return np.int32(np.sqrt(gi * gi + gj * gj) * np.float32(16)) * 4 + d


def suppress(nb):
    """int32 -> uint8: non-maximum suppression along the bin, three output levels."""
    c = nb[0, 0]
    m = c // 4
    a = nb[0, -1]
    b = nb[0, 1]
    if c - m * 4 == 2:
        a = nb[-1, 0]
        b = nb[1, 0]
    keep = (m >= a // 4) & (m > b // 4)
    return np.uint8(200) if keep and m >= 2000 else (np.uint8(90) if keep else np.uint8(7))


def link(nb):
    """uint8 -> uint8: a weak edge next to a strong one becomes strong (hysteresis's step)."""
    c = nb[0, 0]
    if c == 90 and (nb[-1, 0] == 200 or nb[1, 0] == 200 or nb[0, -1] == 200
                    or nb[0, 1] == 200):
        c = np.uint8(255)
    return c


def canny(first="mirror", second="reflect", third="constant", fourth="nearest"):
    """smooth (float32) >> gradient (float32 -> int32) >> suppress (int32 -> uint8) >> link
    (uint8), the four border modes other than wrap by default."""
    return (sk.Stencil(smooth, border=first, cval=3.5)
            >> sk.Stencil(gradient, border=second, cval=-2.0, out_dtype=np.int32)
            >> sk.Stencil(suppress, border=third, cval=41, out_dtype=np.uint8)
            >> sk.Stencil(link, border=fourth, cval=200, out_dtype=np.uint8))


def picture(shape, rng):
    r, c = shape
    y, x = np.mgrid[0:r, 0:c]
    img = 40.0 * ((x - c / 2) ** 2 + (y - r / 3) ** 2 < (min(r, c) / 3) ** 2) + 0.7 * x
    return (img + rng.normal(0, 6, shape)).astype(np.float32)


def check(seq, a, *extras, params=TILE, **kw):
    got = seq(a, *extras, params=params, **kw).to_numpy()
    launch = seq.last_launch
    assert launch.fused is True and launch.streamed is True, launch.params
    want = seq(a, *extras, params=[STAGE_POINT] * len(seq), **kw).to_numpy()
    assert seq.last_launch.fused is False and seq.last_launch.streamed is False
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    return got, launch


def test_canny_like_mixed_dtypes_equal_staged(rng):
    seq = canny()
    seen = set()
    for shape in SHAPES:
        got, launch = check(seq, picture(shape, rng))
        assert got.dtype == np.uint8 and len(launch.events) == 1
        seen |= set(np.unique(got).tolist())
    assert seen == {7, 90, 200, 255}      # the data reach every output level somewhere


def test_gpu_default_tile_and_unrolled_walk_equal_staged(rng, monkeypatch):
    """The tile a GPU starts from (windows from the ring, the walk a loop), and (SKELPY_HEAVY=1)
    own columns in registers with the walk unrolled as a GPU builds it."""
    seq = canny()
    a = picture((37, 150), rng)
    _got, launch = check(seq, a, params={"fuse": 2})
    assert launch.params["tb_ring"] == 1 and launch.params["tb_unroll"] == 0
    if HEAVY:       # PoCL builds the unrolled walk slowly (several seconds)
        monkeypatch.setattr(StreamPlan, "pocl_keeps_loop", False)
        check(seq, a, params=dict(TILE, tb_wc=32, tb_rows=16))


def test_wrap_cycle_with_extras_and_iterations_equals_staged(rng):
    """float32 -> int32 -> float32, every stage wrap, an extra matrix read at and around the
    cell and a weak scalar; iterations=2 runs two passes of one cycle."""
    s0 = sk.Stencil(lambda nb, w, k: nb[-1, 0] * k + nb[0, 2] - nb[1, -1] * w[0, 0],
                    border="wrap")
    s1 = sk.Stencil(lambda nb, w: np.int32(nb[0, 0] * 8 + w[1, 1]) + (nb[0, -1] > 0),
                    border="wrap", out_dtype=np.int32)
    s2 = sk.Stencil(lambda nb: np.float32(nb[-1, 0] - 2 * nb[0, 1]) * np.float32(0.125),
                    border="wrap", out_dtype=np.float32)
    seq = s0 >> s1 >> s2
    for shape in [(1, 11), (11, 1), (2, 2), (13, 17), (29, 61)]:
        a = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal(shape).astype(np.float32)
        got, launch = check(seq, a, w, 0.75, iterations=2)
        assert got.dtype == np.float32 and len(launch.events) == 2
        assert launch.iterations == 2


def test_eight_byte_levels_as_64_bit_words(rng, has_fp64):
    """int16 -> float64 (mirror) -> int8 (constant) -> uint16 (nearest): 64-bit words, signed
    narrow levels sign-extended on the way back."""
    if not has_fp64:
        pytest.skip("the device has no float64")
    s0 = sk.Stencil(lambda nb: nb[0, 0] * 0.37 + nb[1, 1] - nb[-1, 0] * 0.25, border="mirror",
                    out_dtype=np.float64)
    s1 = sk.Stencil(lambda nb: np.int8(nb[0, -1] - nb[0, 1] + 0.5 * nb[0, 0]),
                    border="constant", cval=-3.0, out_dtype=np.int8)
    s2 = sk.Stencil(lambda nb: np.uint16(nb[-1, -1]) * 300 + nb[1, 1] - nb[0, 0], border="nearest",
                    out_dtype=np.uint16)
    seq = s0 >> s1 >> s2
    assert seq.decision_plans(sk.Matrix(np.zeros((3, 3), np.int16)), ()).stream.itemsize == 8
    got, _launch = check(seq, rng.integers(-300, 300, (13, 17)).astype(np.int16))
    assert got.dtype == np.uint16 and len(np.unique(got)) > 2


def test_decision_source_and_refusals(rng):
    seq = canny()
    a = picture((20, 30), rng)
    plans = seq.decision_plans(sk.Matrix(a), ())
    gpu = SimpleNamespace(kind="gpu", max_work_item_sizes=(1024, 1024, 64),
                          max_work_group_size=1024, local_mem_size=48 * 1024,
                          platform="NVIDIA CUDA")
    cpu = SimpleNamespace(**dict(vars(gpu), kind="cpu", platform="Portable Computing Language"))
    # staged by default everywhere (streamed and fused lost to staged on an H200), the
    # streamed point a GPU's measuring modes try is legal there
    assert plans.default(gpu)["fuse"] == 0 and plans.default(cpu)["fuse"] == 0
    assert plans.stream_tile(gpu)["fuse"] == 2
    assert plans.stream.mixed
    assert plans.stream.levels == (np.float32, np.float32, np.int32, np.uint8, np.uint8)
    if sk.current_device().kind != "gpu":
        assert seq.fused_decision(a)["fuse"] == 0
    text = seq.source(a, params={"fuse": 2})
    assert text.startswith("/* streamed: 4 stages in one pass")
    assert "#define SKP_TB_MIXED 1" in text and "#define SKP_TB_T 4" in text
    # a stream tile forced alone implies fuse=2
    got = seq(a, params={k: v for k, v in TILE.items() if k != "fuse"}).to_numpy()
    assert seq.last_launch.streamed is True
    np.testing.assert_array_equal(got, seq(a, params=[STAGE_POINT] * 4).to_numpy())
    with pytest.raises(sk.ParameterError, match="fuse is 0"):
        seq(a, params={"fuse": 3})
    # repeating a sequence that changes the dtype, offsets known only at run time: staged
    with pytest.raises(sk.ParameterError, match="cannot run streamed"):
        seq(a, iterations=2, params={"fuse": 2})
    shift = sk.Stencil(lambda nb, c: nb[0, c], shape=1)
    dyn = shift >> sk.Stencil(lambda nb: nb[0, 0] * 2)
    assert "run time" in dyn.stream_plan(sk.Matrix(a), (1,))
    with pytest.raises(sk.ParameterError, match="cannot run streamed"):
        dyn(a, 1, params={"fuse": 2})
    # wrap mixed with another mode cannot stream (the fused tile refuses it too)
    assert "wrap mixed" in canny("wrap").stream_plan(sk.Matrix(a), ())


SCRIPT = textwrap.dedent('''
    import os
    import sys

    import numpy as np
    import skelpy as sk
    sys.path.insert(0, os.path.join(os.environ["PYTHONPATH"].split(os.pathsep)[0], "tests"))
    from test_stencil_streamed_sequence import TILE, canny, picture

    assert "oclgrind" in sk.current_device().platform.lower(), sk.current_device()
    rng = np.random.default_rng(3)
    seq = canny()
    for shape in [(3, 4), (9, 21)]:
        a = picture(shape, rng)
        got = seq(a, params=TILE).to_numpy()
        assert np.array_equal(got, seq(a, params={"fuse": 0}).to_numpy()), shape
    print("STREAMED-SEQUENCE-OCLGRIND-OK")
''')


@pytest.mark.oclgrind
@pytest.mark.slow
def test_streamed_sequence_under_oclgrind(tmp_path):
    run_under_oclgrind(tmp_path, "streamed_sequence_oclgrind.py", SCRIPT,
                       "STREAMED-SEQUENCE-OCLGRIND-OK", markers=STRICT_MARKERS)
