"""A streaming pass's rows per stream on a GPU: ``tb_rows`` is the most; a pass with too few
work-items for the device gets shorter streams (down to 32 rows), a CPU's never change."""

from types import SimpleNamespace

import numpy as np

import skelpy as sk
from skelpy.skeletons.stencil_stream import GPU_MIN_ITEMS_PER_CU


def heat(u):
    return u[0, 0] + 0.1 * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4 * u[0, 0])


POINT = {"t": 4, "tb_wc": 128, "tb_wr": 1, "tb_rows": 128, "tb_vec": 1, "tb_ring": 0,
         "tb_unroll": 1, "tb_pre": 2}


def _plan():
    st = sk.Stencil(heat, border="nearest")
    m = sk.Matrix(np.zeros((8, 8), np.float32))
    return st.temporal_plan(st.bind(m, (), None), m)


def test_gpu_streams_shorten_only_where_the_pass_has_too_few_work_items():
    plan = _plan()
    h200 = SimpleNamespace(kind="gpu", compute_units=132)
    cpu = SimpleNamespace(kind="cpu", compute_units=2)
    cases = {(4096, 4096): 64, (2136, 4096): 32, (2048, 2048): 32, (8192, 8192): 128,
             (16384, 16384): 128, (8236, 16384): 128, (20, 16384): 20}
    for (rows, cols), chunk in cases.items():
        g = plan.geometry(POINT, rows, cols, h200)
        assert g.chunk == chunk, (rows, cols, g.chunk)
        # every row is covered, and the shortened pass reaches the floor or 32 rows
        assert g.global_size[1] * g.chunk >= rows
        if chunk < min(128, rows):
            items = g.global_size[0] * g.global_size[1]
            assert items >= GPU_MIN_ITEMS_PER_CU * 132 or chunk == 32
        assert plan.geometry(POINT, rows, cols, cpu).chunk == min(128, rows)
        assert plan.geometry(POINT, rows, cols).chunk == min(128, rows)
