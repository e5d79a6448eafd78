"""The tail of a GPU streaming pass: the streams of its last wave of work-groups output a
quarter of the rows (the pass ends sooner, the long streams keep their rate). The geometry
covers every row once with whole work-groups of one stream length; the kernel with the tail
forced on PoCL equals single steps bit for bit (every border mode, two tiles, int32 Life)."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
from oclgrind_support import STRICT_MARKERS, run_under_oclgrind
from test_stencil_stream_geometry import POINT, _plan, heat

import skelpy as sk
from skelpy.skeletons import stencil_stream
from skelpy.skeletons.stencil_stream import TAIL_SPLIT

MODES = ["constant", "nearest", "wrap", "reflect", "mirror"]


def life(nb):
    n = (nb[-1, -1] + nb[-1, 0] + nb[-1, 1] + nb[0, -1] + nb[0, 1] + nb[1, -1] + nb[1, 0]
         + nb[1, 1])
    return np.int32(1) if n == 3 or (n == 2 and nb[0, 0] == 1) else np.int32(0)


H200 = SimpleNamespace(kind="gpu", compute_units=132)


def _stream_rows(g):
    """Each stream's (first row, rows), as the kernel computes them."""
    out = []
    for s in range(g.global_size[1]):
        length = g.chunk if s < g.split else g.schunk
        first = s * g.chunk if s < g.split else g.split * g.chunk + (s - g.split) * g.schunk
        out.append((first, length))
    return out


@pytest.mark.parametrize("wr", [1, 2, 4])
def test_tail_geometry_covers_every_row_once_in_whole_work_groups(wr):
    plan = _plan()
    seen_tail = 0
    for rows, cols in [(16384, 16384), (8236, 16384), (8192, 8192), (4096, 4096),
                       (1031, 16384), (130, 16384), (20, 16384), (9001, 333)]:
        for tb_rows in (32, 64, 128, 256, 512):
            point = dict(POINT, tb_rows=tb_rows, tb_wr=wr)
            g = plan.geometry(point, rows, cols, H200)
            streams = _stream_rows(g)
            covered = np.zeros(rows + g.chunk * wr + 1, np.int32)
            for first, length in streams:
                covered[first:first + length] += 1
            assert (covered[:rows] == 1).all(), (rows, cols, tb_rows, wr)
            if g.split < len(streams):
                seen_tail += 1
                assert g.split % wr == 0                  # one length per work-group
                assert g.schunk == g.chunk // TAIL_SPLIT
                assert g.split * g.chunk < rows           # the tail outputs rows
                long_groups = g.split // wr
                # at most a quarter of the pass's rows of work-groups is tail
                assert 4 * (-(-rows // (g.chunk * wr)) - long_groups) <= \
                    -(-rows // (g.chunk * wr))
                # no work-group of the tail lies wholly past the last row
                assert (len(streams) - wr) < g.split or \
                    streams[len(streams) - wr][0] < rows
            # a CPU never gets a tail
            assert plan.geometry(point, rows, cols,
                                 SimpleNamespace(kind="cpu", compute_units=2)).split >= \
                -(-rows // g.chunk)
    assert seen_tail >= 5


def test_tail_is_at_most_a_wave_of_work_groups_on_the_h200():
    g = _plan().geometry(POINT, 16384, 16384, H200)
    tiles = g.global_size[0] // POINT["tb_wc"]
    long_streams = g.split
    wave = 132 * stencil_stream.GPU_WAVE_ITEMS_PER_CU // POINT["tb_wc"]
    assert long_streams * g.chunk >= 16384 - (-(-wave // tiles)) * 128
    assert g.global_size[1] - long_streams >= TAIL_SPLIT


def _temporal(st, a, iterations, point):
    return st(sk.Matrix(a), iterations=iterations, params=point).to_numpy()


def _steps(st, a, iterations):
    m = sk.Matrix(a)
    for _ in range(iterations):
        m = st(m)
    return m.to_numpy()


@pytest.mark.parametrize("tile", [
    {"tb_wc": 16, "tb_wr": 1, "tb_rows": 8, "tb_ring": 0, "tb_unroll": 1},
    {"tb_wc": 8, "tb_wr": 2, "tb_rows": 4, "tb_ring": 1, "tb_unroll": 0},
])
def test_forced_tail_equals_single_steps_bitwise(monkeypatch, tile):
    monkeypatch.setattr(stencil_stream, "FORCE_TAIL", True)
    rng = np.random.default_rng(5)
    a = rng.random((83, 29), dtype=np.float32)
    for mode in MODES:
        st = sk.Stencil(heat, border=mode)
        want = _steps(st, a, 7)
        got = _temporal(st, a, 7, dict(tile, t=3))
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), mode
    st = sk.Stencil(life, border="wrap")
    b = (rng.random((61, 23)) < 0.35).astype(np.int32)
    assert np.array_equal(_temporal(st, b, 6, dict(tile, t=2)), _steps(st, b, 6))


def test_forced_tail_geometry_is_used(monkeypatch):
    """The forced run above is not vacuous: at those sizes the pass has a tail."""
    monkeypatch.setattr(stencil_stream, "FORCE_TAIL", True)
    plan = _plan()
    for tile, rows in (({"tb_wc": 16, "tb_wr": 1, "tb_rows": 8}, 83),
                       ({"tb_wc": 8, "tb_wr": 2, "tb_rows": 4}, 83),
                       ({"tb_wc": 16, "tb_wr": 1, "tb_rows": 8}, 61),
                       ({"tb_wc": 8, "tb_wr": 2, "tb_rows": 4}, 61)):
        g = plan.geometry(dict(POINT, t=3, **tile), rows, 29,
                          SimpleNamespace(kind="cpu", compute_units=2))
        assert g.split < g.global_size[1], (tile, rows)


TAIL_SCRIPT = textwrap.dedent('''
    import numpy as np
    import skelpy as sk
    from skelpy.skeletons import stencil_stream

    assert "oclgrind" in sk.current_device().platform.lower(), sk.current_device()
    stencil_stream.FORCE_TAIL = True
    rng = np.random.default_rng(4)

    def heat(u):
        return u[0, 0] + 0.1 * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4 * u[0, 0])

    checked = 0
    for mode in ["wrap", "reflect"]:
        st = sk.Stencil(heat, border=mode)
        a = rng.random((37, 11)).astype(np.float32)
        m = sk.Matrix(a)
        for _ in range(4):
            m = st(m)
        want = m.to_numpy()
        for p in [{"t": 2, "tb_wc": 8, "tb_rows": 4, "tb_wr": 2, "tb_ring": 1, "tb_unroll": 0},
                  {"t": 4, "tb_wc": 8, "tb_rows": 8, "tb_wr": 1, "tb_ring": 0,
                   "tb_unroll": 1}]:
            got = st(a, iterations=4, params=p).to_numpy()
            assert np.array_equal(got, want), (mode, p)
            checked += 1
    print("TAIL-OCLGRIND-OK", checked)
''')


@pytest.mark.oclgrind
@pytest.mark.slow
def test_tail_kernel_under_oclgrind(tmp_path):
    run_under_oclgrind(tmp_path, "tail_oclgrind.py", TAIL_SCRIPT, "TAIL-OCLGRIND-OK 4",
                       markers=STRICT_MARKERS)
