"""Every border mode of a reach-2 (5x5) stencil bit for bit against an np.pad reference, for
float32, int32 and uint8, at sizes smaller than the reach (1x1, 2x2, 3x7: the edge code folds
an index twice) and at sizes whose interior and edge groups both run; the edge groups' code
(kernels/stencil_border.cl, SKP_BORDER_READ) through the direct, local-tile and vector paths."""

from __future__ import annotations

import numpy as np
import pytest
from test_stencil_ref import MODES, PAD_MODES

import skelpy as sk

SIZES = [(1, 1), (2, 2), (3, 7), (7, 3), (1, 9), (5, 5), (37, 70)]
#: nine taps reaching two cells in every direction, asymmetric (orientation mistakes show)
TAPS = ((-2, -2), (-2, 1), (-1, 2), (0, -2), (0, 0), (1, -1), (2, 2), (2, -1), (-1, 0))
DR = np.array([t[0] for t in TAPS])
DC = np.array([t[1] for t in TAPS])
WEIGHTS = np.array([3, -2, 1, 2, -3, 1, -1, 2, 1], np.int64)
CVAL = 3


def taps5(dtype):
    """The weighted sum over TAPS in the input's type (float32 sums of small integers are exact;
    uint8 wraps modulo 256, as NumPy's does)."""
    w = WEIGHTS.astype(dtype)

    def corr(nb):
        acc = w[0] * nb[DR[0], DC[0]]
        for k in range(1, 9):
            acc += w[k] * nb[DR[k], DC[k]]
        return acc
    return corr


def reference(a, mode):
    kw = {"constant_values": CVAL} if mode == "constant" else {}
    p = np.pad(a.astype(np.int64), 2, mode=PAD_MODES[mode], **kw)
    rows, cols = a.shape
    out = sum(int(wk) * p[2 + dr:2 + dr + rows, 2 + dc:2 + dc + cols]
              for wk, (dr, dc) in zip(WEIGHTS, TAPS))
    return out.astype(a.dtype)


#: one extra launch point for three modes: the local tile's and the vector path's edge code
EXTRA = {"constant": {"local": 1, "wg_r": 4, "wg_c": 8, "cr": 2, "cc": 1, "vec": 1},
         "reflect": {"local": 0, "wg_r": 2, "wg_c": 4, "cr": 2, "cc": 1, "vec": 2},
         "wrap": {"local": 0, "wg_r": 2, "wg_c": 8, "cr": 1, "cc": 1, "vec": 4}}
DTYPES = (np.float32, np.int32, np.uint8)


@pytest.mark.parametrize("mode", MODES)
def test_reach2_every_mode_bitwise(mode, rng):
    for dt in DTYPES:
        st = sk.Stencil(taps5(dt), shape=2, border=mode, cval=CVAL)
        for shape in SIZES:
            a = rng.integers(0 if dt == np.uint8 else -8, 9, shape).astype(dt)
            got = st(a).to_numpy()
            assert got.dtype == dt
            assert np.array_equal(got, reference(a, mode)), (mode, dt, shape)
    point = EXTRA.get(mode)
    if point is not None:
        for shape in ((1, 1), (3, 7), (37, 70)):
            a = rng.integers(-8, 9, shape).astype(np.float32)
            got = st_f32(mode)(a, params=point).to_numpy()
            assert np.array_equal(got, reference(a, mode)), (mode, point, shape)


def st_f32(mode):
    return sk.Stencil(taps5(np.float32), shape=2, border=mode, cval=CVAL)
