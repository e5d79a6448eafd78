"""The stencil kernel under the oclgrind simulator: no invalid memory access, no data race
(local-memory tile staging, barriers, edge groups, coarsening, the vector path with aligned
and unaligned rows) at awkward sizes."""

from __future__ import annotations

import textwrap

import pytest
from oclgrind_support import STRICT_MARKERS, run_under_oclgrind

SCRIPT = textwrap.dedent('''
    import numpy as np
    import skelpy as sk

    assert "oclgrind" in sk.current_device().platform.lower(), sk.current_device()
    rng = np.random.default_rng(7)
    PAD = {"constant": "constant", "nearest": "edge", "wrap": "wrap", "reflect": "symmetric",
           "mirror": "reflect"}

    def ref(a, b, mode, cval):
        kw = {"constant_values": cval} if mode == "constant" else {}
        pa = np.pad(a.astype(np.float64), 3, mode=PAD[mode], **kw)
        pb = np.pad(b.astype(np.float64), 3, mode=PAD[mode], **kw)
        r, c = a.shape
        return (pa[2:2 + r, 3:3 + c] + 2 * pa[6:6 + r, 1:1 + c] - pa[3:3 + r, 6:6 + c]
                + pb[4:4 + r, 3:3 + c] * 0.5)

    checked = 0
    for mode in ["constant", "reflect", "wrap", "mirror", "nearest"]:
        st = sk.Stencil(lambda nb, o: nb[-1, 0] + 2 * nb[3, -2] - nb[0, 3] + o[1, 0] * 0.5,
                        border=mode, cval=-1.0)
        for shape in [(1, 1), (5, 3), (13, 7), (9, 33), (10, 40)]:
            a = rng.standard_normal(shape).astype(np.float32)
            b = rng.standard_normal(shape).astype(np.float32)
            want = ref(a, b, mode, -1.0)
            for p in [{"local": 1, "wg_r": 4, "wg_c": 8, "cr": 1, "cc": 1},
                      {"local": 1, "wg_r": 3, "wg_c": 5, "cr": 2, "cc": 2},
                      {"local": 1, "wg_r": 1, "wg_c": 2, "cr": 1, "cc": 4},
                      {"local": 0, "wg_r": 2, "wg_c": 4, "cr": 2, "cc": 1},
                      {"local": 0, "wg_r": 2, "wg_c": 2, "cr": 2, "cc": 1, "vec": 4},
                      {"local": 0, "wg_r": 1, "wg_c": 4, "cr": 1, "cc": 1, "vec": 2}]:
                got = st(a, b, params=p).to_numpy()
                assert np.allclose(got, want, atol=1e-5), (mode, shape, p)
                checked += 1
    # iterations ping-pong and a sequence
    heat = sk.Stencil(lambda nb: nb[0, 0] + 0.1 * (nb[-1, 0] + nb[1, 0] - 2 * nb[0, 0]))
    u = rng.random((11, 6)).astype(np.float32)
    heat(u, iterations=3, params={"local": 1, "wg_r": 4, "wg_c": 4}).to_numpy()
    (heat >> heat)(u, params={"local": 1, "wg_r": 2, "wg_c": 4, "cr": 2}).to_numpy()
    print("STENCIL-OCLGRIND-OK", checked)
''')



@pytest.mark.oclgrind
@pytest.mark.slow
def test_stencil_kernel_under_oclgrind(tmp_path):
    run_under_oclgrind(tmp_path, "stencil_oclgrind.py", SCRIPT, "STENCIL-OCLGRIND-OK",
                       markers=STRICT_MARKERS)
