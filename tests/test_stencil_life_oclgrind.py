"""Game of Life (int32, uint8 and int16, wrap) through the vector path's larger register windows
(rows coarsened by 2-8, vectors of 2 and 4 words: up to 16 uint8 columns per work-item) under
the oclgrind simulator: bit for bit against NumPy, no invalid access, at sizes smaller than a
work-item's window and not multiples of it (the interior work-items' vector loads, aligned and
unaligned rows, and the wrap of the work-items at the border, within and next to interior
ones in one group; packed edge groups' halo words in mirror and reflect)."""

from __future__ import annotations

import textwrap

import pytest
from oclgrind_support import STRICT_MARKERS, run_under_oclgrind

SCRIPT = textwrap.dedent('''
    import numpy as np
    import skelpy as sk

    assert "oclgrind" in sk.current_device().platform.lower(), sk.current_device()
    rng = np.random.default_rng(5)

    def life(nb):
        n = (nb[-1, -1] + nb[-1, 0] + nb[-1, 1] + nb[0, -1] + nb[0, 1]
             + nb[1, -1] + nb[1, 0] + nb[1, 1])
        return (n == 3) | ((n == 2) & (nb[0, 0] == 1))

    def ref(g):
        p = np.pad(g.astype(np.int64), 1, mode="wrap")
        r, c = g.shape
        n = sum(p[i:i + r, j:j + c] for i in range(3) for j in range(3)) - g
        return ((n == 3) | ((n == 2) & (g == 1))).astype(g.dtype)

    checked = 0
    # vec counts 4-byte words: 4 x 4 and 8 x 2 int32 cells, 2 x 16 and 4 x 8 uint8 cells
    points = {np.int32: [{"local": 0, "wg_r": 2, "wg_c": 4, "cr": 4, "cc": 1, "vec": 4},
                         {"local": 0, "wg_r": 1, "wg_c": 8, "cr": 8, "cc": 1, "vec": 2}],
              np.uint8: [{"local": 0, "wg_r": 2, "wg_c": 4, "cr": 2, "cc": 1, "vec": 4},
                         {"local": 0, "wg_r": 1, "wg_c": 8, "cr": 4, "cc": 1, "vec": 2}]}
    points[np.int16] = points[np.uint8]           # 2 x 8 and 4 x 4 int16 cells
    for dt in (np.int32, np.uint8, np.int16):
        st = sk.Stencil(life, shape=1, border="wrap", out_dtype=dt)
        for shape in [(1, 1), (3, 7), (21, 34), (19, 48), (21, 37), (5, 67), (9, 96)]:
            g = (rng.random(shape) < 0.4).astype(dt)
            want = ref(g)
            for p in points[dt]:
                got = st(g, params=p).to_numpy()
                assert got.dtype == dt and np.array_equal(got, want), (dt, shape, p)
                checked += 1
    # packed edge groups make halo words from a row's end words (byte reversals): mirror and
    # reflect, rows of whole vectors
    # and rows of any width from aligned words, none read past the buffer (5 x 37 bytes)
    for border, (r, c) in (("mirror", (5, 48)), ("reflect", (5, 48)), ("mirror", (5, 37)),
                           ("reflect", (3, 70))):
        st = sk.Stencil(life, shape=1, border=border, out_dtype=np.uint8)
        g = (rng.random((r, c)) < 0.4).astype(np.uint8)
        mode = "symmetric" if border == "reflect" else "reflect"
        p = np.pad(g.astype(np.int64), 1, mode=mode)
        n = sum(p[i:i + r, j:j + c] for i in range(3) for j in range(3)) - g
        want = ((n == 3) | ((n == 2) & (g == 1))).astype(np.uint8)
        for point in points[np.uint8]:
            got = st(g, params=point).to_numpy()
            assert np.array_equal(got, want), (border, r, c, point)
            checked += 1
    print("LIFE-OCLGRIND-OK", checked)
''')


@pytest.mark.oclgrind
@pytest.mark.slow
def test_life_vector_windows_under_oclgrind(tmp_path):
    run_under_oclgrind(tmp_path, "life_oclgrind.py", SCRIPT, "LIFE-OCLGRIND-OK",
                       markers=STRICT_MARKERS)
