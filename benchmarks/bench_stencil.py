"""Stencil benchmarks ([Cummins 2018]'s set, ch. 6.1): skelpy against hand-written OpenCL, scipy.ndimage on the
CPU and cupyx.scipy.ndimage on the GPU (when CuPy is importable).

    python benchmarks/bench_stencil.py [--quick] [--sizes 512,1024,2048,4096] [--sweep]

Cases: Game of Life (uint8 and int32, wrap; ``--cases game_of_life`` runs both), heat (5-point
float32, nearest), Gaussian 5x5 and 11x11 (float32, reflect; 11x11 also as a StencilSequence of
two 1-D stencils, the same algorithm as ``scipy.ndimage.gaussian_filter``), Canny (Gaussian 5x5
>> Sobel magnitude >> non-maximum suppression >> threshold, float32), and two synthetic stencils
of Table 6.3 ("simple" 20/10/20/10 and "complex" 1/10/30/30, north/south/east/west).

skelpy times are kernel times from OpenCL profiling events (minimum of repeats) at the
parameters skelpy chooses by itself ("skelpy"), and the best of a small sweep of launch
parameters ("skelpy best", what tuning can reach). The hand-written kernels are plain 2-D
global-memory kernels with clamped/wrapped indices at a fixed 2-D work-group. scipy/cupyx are
wall/event times of the equivalent call. Every single stencil's bandwidth (its input read and
its output written once per cell) is reported against a plain buffer copy measured in the same
run: ``skelpy %copy`` at skelpy's own choice, ``%copy`` at the sweep's best point (on GPUs the
Game of Life cases sweep more vector-path points, SWEEP_GOL_GPU).
Results: a table on stdout and ``benchmarks/results/stencil-<device>.json``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

import numpy as np
import pyopencl as cl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import skelpy as sk  # noqa: E402
from benchmarks.common import copy_bandwidth, print_table, time_events, write_json  # noqa: E402
from skelpy import runtime  # noqa: E402

try:  # the CPU reference
    import scipy.ndimage as ndi
except ImportError:  # pragma: no cover - the GPU host may lack SciPy
    ndi = None

# -- the stencils as skelpy muscles ---------------------------------------------------------------


def gauss_weights(radius: int, sigma: float) -> np.ndarray:
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    g = np.exp(-0.5 * x * x / (sigma * sigma))
    return (g / g.sum()).astype(np.float32)


G5 = gauss_weights(2, 1.0)
G11 = gauss_weights(5, 2.0)
ALPHA = np.float32(0.2)
LOW, HIGH = np.float32(0.05), np.float32(0.15)
# Table 6.3's synthetic shapes (north, south, east, west)
SIMPLE_SHAPE = sk.Shape(north=20, south=10, east=20, west=10)
COMPLEX_SHAPE = sk.Shape(north=1, south=10, east=30, west=30)
SIMPLE_TAPS = [(-20, -10), (-20, 20), (10, -10), (10, 20), (0, 0), (-10, 5), (5, -5)]
COMPLEX_TAPS = [(dr, dc) for dr in (-1, 0, 5, 10) for dc in (-30, -15, 0, 15, 30)]
S_DR = np.array([t[0] for t in SIMPLE_TAPS])
S_DC = np.array([t[1] for t in SIMPLE_TAPS])
C_DR = np.array([t[0] for t in COMPLEX_TAPS])
C_DC = np.array([t[1] for t in COMPLEX_TAPS])
N_SIMPLE, N_COMPLEX = len(SIMPLE_TAPS), len(COMPLEX_TAPS)


def life(nb):
    n = (nb[-1, -1] + nb[-1, 0] + nb[-1, 1] + nb[0, -1] + nb[0, 1]
         + nb[1, -1] + nb[1, 0] + nb[1, 1])
    return (n == 3) | ((n == 2) & (nb[0, 0] == 1))


def heat(u):
    return u[0, 0] + ALPHA * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4 * u[0, 0])


def gauss5(nb):
    acc = np.float32(0)
    for dr in range(-2, 3):
        row = np.float32(0)
        for dc in range(-2, 3):
            row += G5[dc + 2] * nb[dr, dc]
        acc += G5[dr + 2] * row
    return acc


def gauss11(nb):
    acc = np.float32(0)
    for dr in range(-5, 6):
        row = np.float32(0)
        for dc in range(-5, 6):
            row += G11[dc + 5] * nb[dr, dc]
        acc += G11[dr + 5] * row
    return acc


def gauss11_rows(nb):
    acc = np.float32(0)
    for dc in range(-5, 6):
        acc += G11[dc + 5] * nb[0, dc]
    return acc


def gauss11_cols(nb):
    acc = np.float32(0)
    for dr in range(-5, 6):
        acc += G11[dr + 5] * nb[dr, 0]
    return acc


def sobel_mag(nb):
    gi = (nb[1, -1] + 2 * nb[1, 0] + nb[1, 1]) - (nb[-1, -1] + 2 * nb[-1, 0] + nb[-1, 1])
    gj = (nb[-1, 1] + 2 * nb[0, 1] + nb[1, 1]) - (nb[-1, -1] + 2 * nb[0, -1] + nb[1, -1])
    return np.sqrt(gi * gi + gj * gj)


def nms(m):
    """Non-maximum suppression with the direction from the magnitude's own gradient (so the
    stage takes one matrix, as SkelCL's StencilSequence stages do)."""
    c = m[0, 0]
    di = m[1, 0] - m[-1, 0]
    dj = m[0, 1] - m[0, -1]
    ai = abs(di)
    aj = abs(dj)
    diag = (ai > np.float32(0.4142) * aj) & (aj > np.float32(0.4142) * ai)
    same = (di > 0) == (dj > 0)
    a1 = m[1, 1] if same else m[1, -1]
    a2 = m[-1, -1] if same else m[-1, 1]
    b1 = m[1, 0] if ai >= aj else m[0, 1]
    b2 = m[-1, 0] if ai >= aj else m[0, -1]
    n1 = a1 if diag else b1
    n2 = a2 if diag else b2
    return c if (c >= n1) & (c >= n2) else np.float32(0)


def threshold(nb):
    v = nb[0, 0]
    return np.float32(1) if v >= HIGH else (np.float32(0.5) if v >= LOW else np.float32(0))


def synth_simple(nb):
    acc = np.float32(0)
    for k in range(N_SIMPLE):
        acc += nb[S_DR[k], S_DC[k]]
    return acc * np.float32(1.0 / N_SIMPLE)


def synth_complex(nb):
    acc = np.float32(0)
    for k in range(N_COMPLEX):
        v = nb[C_DR[k], C_DC[k]]
        acc = acc * np.float32(0.9) + v * (v - np.float32(0.5)) / (abs(v) + np.float32(1))
    return np.sqrt(abs(acc) + np.float32(1))


# -- hand-written OpenCL versions -------------------------------------------------------------------

HAND = r"""
#define IDX(r, c) ((r) * cols + (c))
inline int clampi(int x, int n) { return x < 0 ? 0 : (x >= n ? n - 1 : x); }
inline int wrapi(int x, int n) { return x < 0 ? x + n : (x >= n ? x - n : x); }
inline int refl(int x, int n) { return x < 0 ? -x - 1 : (x >= n ? 2 * n - 1 - x : x); }

#define LIFE(NAME, T)                                                                \
__kernel void NAME(__global const T* restrict in, __global T* restrict out,             \
                   const int rows, const int cols)                                      \
{                                                                                       \
    const int c = get_global_id(0), r = get_global_id(1);                               \
    if (r >= rows || c >= cols) return;                                                \
    const int rn = wrapi(r - 1, rows), rs = wrapi(r + 1, rows);                         \
    const int cw = wrapi(c - 1, cols), ce = wrapi(c + 1, cols);                         \
    const int n = in[IDX(rn, cw)] + in[IDX(rn, c)] + in[IDX(rn, ce)] + in[IDX(r, cw)]   \
                + in[IDX(r, ce)] + in[IDX(rs, cw)] + in[IDX(rs, c)] + in[IDX(rs, ce)];  \
    out[IDX(r, c)] = (n == 3) | ((n == 2) & (in[IDX(r, c)] == 1));                      \
}
LIFE(life, uchar)
LIFE(life_i32, int)

/* A tuned Game of Life, the bound skelpy's generated code is measured against: 4 x 4 cells per
 * work-item from a 6 x 6 register window (vector loads in the interior), each column's
 * three-cell sum computed once and shared by the row's cells (8 adds per cell become ~4). */
#define LIFE44(NAME, T, T4)                                                             \
__kernel void NAME(__global const T* restrict in, __global T* restrict out,             \
                   const int rows, const int cols)                                      \
{                                                                                       \
    const int c0 = 4 * (int)get_global_id(0), r0 = 4 * (int)get_global_id(1);          \
    if (r0 >= rows || c0 >= cols) return;                                              \
    const bool inner = r0 >= 1 && c0 >= 1 && r0 + 5 <= rows && c0 + 5 <= cols         \
                       && (cols & 3) == 0;                                              \
    int w[6][6];                                                                        \
    _Pragma("unroll")                                                                   \
    for (int i = 0; i < 6; ++i) {                                                       \
        const int rr = wrapi(min(r0 - 1 + i, rows), rows);                              \
        __global const T* row = in + (size_t)rr * cols;                                 \
        if (inner) {                                                                    \
            const T4 v = vload4(0, row + c0);                                           \
            w[i][0] = row[c0 - 1]; w[i][1] = v.s0; w[i][2] = v.s1;                      \
            w[i][3] = v.s2; w[i][4] = v.s3; w[i][5] = row[c0 + 4];                      \
        } else {                                                                        \
            _Pragma("unroll")                                                           \
            for (int j = 0; j < 6; ++j)                                                 \
                w[i][j] = row[wrapi(min(c0 - 1 + j, cols), cols)];                      \
        }                                                                               \
    }                                                                                   \
    _Pragma("unroll")                                                                   \
    for (int k = 0; k < 4; ++k) {                                                       \
        if (r0 + k >= rows) break;                                                     \
        int s[6];                                                                       \
        _Pragma("unroll")                                                               \
        for (int j = 0; j < 6; ++j)                                                     \
            s[j] = w[k][j] + w[k + 1][j] + w[k + 2][j];                                 \
        T res[4];                                                                       \
        _Pragma("unroll")                                                               \
        for (int m = 0; m < 4; ++m) {                                                   \
            const int ctr = w[k + 1][m + 1];                                            \
            const int n = s[m] + s[m + 1] + s[m + 2] - ctr;                             \
            res[m] = (n == 3) | ((n == 2) & (ctr == 1));                                \
        }                                                                               \
        __global T* o = out + (size_t)(r0 + k) * cols + c0;                             \
        if (inner)                                                                      \
            vstore4(vload4(0, res), 0, o);                                              \
        else                                                                            \
            for (int m = 0; m < 4 && c0 + m < cols; ++m)                                \
                o[m] = res[m];                                                          \
    }                                                                                   \
}
LIFE44(life44, uchar, uchar4)
LIFE44(life44_i32, int, int4)

/* Game of Life on uint8 by hand in SWAR form (SIMD within a register), the bound for byte
 * stencils: 4 cells per 32-bit word, the neighbour sums in 16-bit lanes (even and odd bytes,
 * at most 9 x 255 each: no carry crosses a lane; the low byte is the uint8 sum, wrapped as
 * NumPy's), the rule on byte lanes (a byte is zero iff bit 7 of ((x & 0x7f) + 0x7f) | x is
 * clear). Each work-item: 8 words (32 cells) x 4 rows, every column sum shared by its
 * neighbours. Needs cols % 32 == 0 (wrap border). */
#define SW_VW 8
#define SW_CR 4
#define SW_M7 0x7f7f7f7fu
#define SW_LO 0x00ff00ffu
inline uint sw_nz(uint x) { return ((x & SW_M7) + SW_M7) | x; }
__kernel void life_swar(__global const uint* restrict in, __global uint* restrict out,
                        const int rows, const int cols)
{
    const int wcols = cols / 4;
    const int wc0 = (int)get_global_id(0) * SW_VW, r0 = (int)get_global_id(1) * SW_CR;
    if (wc0 >= wcols || r0 >= rows) return;
    const int wl = wc0 == 0 ? wcols - 1 : wc0 - 1;
    const int wr = wc0 + SW_VW >= wcols ? wc0 + SW_VW - wcols : wc0 + SW_VW;
    uint E[SW_CR + 2][SW_VW + 2], O[SW_CR + 2][SW_VW + 2], C[SW_CR + 2][SW_VW];
    _Pragma("unroll")
    for (int i = 0; i < SW_CR + 2; ++i) {
        __global const uint* row = in + (size_t)wrapi(min(r0 - 1 + i, rows), rows) * wcols;
        _Pragma("unroll")
        for (int q = 0; q < SW_VW; q += 4) {
            const uint4 v = *(__global const uint4*)(row + wc0 + q);
            C[i][q] = v.s0; C[i][q + 1] = v.s1; C[i][q + 2] = v.s2; C[i][q + 3] = v.s3;
        }
        O[i][0] = (row[wl] >> 8) & SW_LO;
        E[i][SW_VW + 1] = row[wr] & SW_LO;
        _Pragma("unroll")
        for (int j = 0; j < SW_VW; ++j) {
            E[i][j + 1] = C[i][j] & SW_LO;
            O[i][j + 1] = (C[i][j] >> 8) & SW_LO;
        }
    }
    _Pragma("unroll")
    for (int k = 0; k < SW_CR; ++k) {
        if (r0 + k >= rows) break;
        uint PE[SW_VW + 2], PO[SW_VW + 2], CE[SW_VW + 2], CO[SW_VW + 2], res[SW_VW];
        _Pragma("unroll")
        for (int j = 0; j < SW_VW + 2; ++j) {
            PE[j] = E[k][j] + E[k + 2][j];
            PO[j] = O[k][j] + O[k + 2][j];
            CE[j] = PE[j] + E[k + 1][j];
            CO[j] = PO[j] + O[k + 1][j];
        }
        _Pragma("unroll")
        for (int j = 1; j <= SW_VW; ++j) {
            const uint ne = PE[j] + CO[j] + ((CO[j] << 16) | (CO[j - 1] >> 16));
            const uint no = CE[j] + PO[j] + ((CE[j] >> 16) | (CE[j + 1] << 16));
            const uint n = (ne & SW_LO) | ((no << 8) & ~SW_LO);
            const uint a = sw_nz(n ^ 0x03030303u), b = sw_nz(n ^ 0x02020202u),
                       c = sw_nz(C[k + 1][j - 1] ^ 0x01010101u);
            res[j - 1] = (~(a & (b | c)) >> 7) & 0x01010101u;
        }
        __global uint* o = out + (size_t)(r0 + k) * wcols + wc0;
        _Pragma("unroll")
        for (int q = 0; q < SW_VW; q += 4)
            *(__global uint4*)(o + q) = (uint4)(res[q], res[q + 1], res[q + 2], res[q + 3]);
    }
}

__kernel void heat(__global const float* restrict in, __global float* restrict out,
                   const int rows, const int cols)
{
    const int c = get_global_id(0), r = get_global_id(1);
    if (r >= rows || c >= cols) return;
    const float u = in[IDX(r, c)];
    const float s = in[IDX(clampi(r - 1, rows), c)] + in[IDX(clampi(r + 1, rows), c)]
                  + in[IDX(r, clampi(c - 1, cols))] + in[IDX(r, clampi(c + 1, cols))];
    out[IDX(r, c)] = u + 0.2f * (s - 4.0f * u);
}

__constant float G5[5] = {@G5@};
__constant float G11[11] = {@G11@};

#define GAUSS(NAME, W, R)                                                           \
__kernel void NAME(__global const float* restrict in, __global float* restrict out,  \
                   const int rows, const int cols)                                   \
{                                                                                    \
    const int c = get_global_id(0), r = get_global_id(1);                            \
    if (r >= rows || c >= cols) return;                                             \
    float acc = 0.0f;                                                                \
    _Pragma("unroll")                                                                \
    for (int dr = -R; dr <= R; ++dr) {                                               \
        const int rr = refl(r + dr, rows);                                           \
        float row = 0.0f;                                                            \
        _Pragma("unroll")                                                            \
        for (int dc = -R; dc <= R; ++dc)                                             \
            row += W[dc + R] * in[IDX(rr, refl(c + dc, cols))];                      \
        acc += W[dr + R] * row;                                                      \
    }                                                                                \
    out[IDX(r, c)] = acc;                                                            \
}
GAUSS(gauss5, G5, 2)
GAUSS(gauss11, G11, 5)

__constant int SDR[] = {@SDR@};
__constant int SDC[] = {@SDC@};
__constant int CDR[] = {@CDR@};
__constant int CDC[] = {@CDC@};

__kernel void synth_simple(__global const float* restrict in, __global float* restrict out,
                           const int rows, const int cols)
{
    const int c = get_global_id(0), r = get_global_id(1);
    if (r >= rows || c >= cols) return;
    float acc = 0.0f;
    _Pragma("unroll")
    for (int k = 0; k < NS; ++k)
        acc += in[IDX(clampi(r + SDR[k], rows), clampi(c + SDC[k], cols))];
    out[IDX(r, c)] = acc * (1.0f / NS);
}

__kernel void synth_complex(__global const float* restrict in, __global float* restrict out,
                            const int rows, const int cols)
{
    const int c = get_global_id(0), r = get_global_id(1);
    if (r >= rows || c >= cols) return;
    float acc = 0.0f;
    _Pragma("unroll")
    for (int k = 0; k < NC; ++k) {
        const float v = in[IDX(clampi(r + CDR[k], rows), clampi(c + CDC[k], cols))];
        acc = acc * 0.9f + v * (v - 0.5f) / (fabs(v) + 1.0f);
    }
    out[IDX(r, c)] = sqrt(fabs(acc) + 1.0f);
}
"""


def hand_source() -> str:
    def fl(a):
        return ", ".join(f"{float(v).hex()}f" for v in a)

    def il(a):
        return ", ".join(str(int(v)) for v in a)

    s = HAND.replace("@G5@", fl(G5)).replace("@G11@", fl(G11))
    s = s.replace("@SDR@", il(S_DR)).replace("@SDC@", il(S_DC))
    s = s.replace("@CDR@", il(C_DR)).replace("@CDC@", il(C_DC))
    return f"#define NS {N_SIMPLE}\n#define NC {N_COMPLEX}\n" + s


# -- the cases ------------------------------------------------------------------------------------


def scipy_life(g):
    n = ndi.convolve(g.astype(np.int32), np.array([[1, 1, 1], [1, 0, 1], [1, 1, 1]]), mode="wrap")
    return ((n == 3) | ((n == 2) & (g == 1))).astype(np.uint8)


def scipy_taps(a, taps, shape: sk.Shape, mode="nearest"):
    w = np.zeros((shape.north + shape.south + 1, shape.west + shape.east + 1), np.float32)
    for dr, dc in taps:
        w[dr + shape.north, dc + shape.west] += 1.0 / len(taps)
    origin = (shape.north - w.shape[0] // 2, shape.west - w.shape[1] // 2)
    return ndi.correlate(a, w, mode=mode, origin=origin)


def build_cases():
    """name -> (skelpy callable builder, input dtype, hand kernel name, scipy fn, cupy fn)."""
    g5 = np.outer(G5, G5)
    g11 = np.outer(G11, G11)
    five = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], np.float32) * ALPHA
    five[1, 1] += 1
    cases = {
        "game_of_life": dict(
            make=lambda: sk.Stencil(life, shape=1, border="wrap", out_dtype=np.uint8),
            dtype=np.uint8, binary=True, hand="life", hand_tuned="life44", hand_swar="life_swar",
            scipy=scipy_life,
            cupy=lambda x, cnd: _cupy_life(x, cnd), sweep=SWEEP_GOL_GPU),
        "game_of_life_int32": dict(
            make=lambda: sk.Stencil(life, shape=1, border="wrap", out_dtype=np.int32),
            dtype=np.int32, binary=True, hand="life_i32", hand_tuned="life44_i32",
            scipy=lambda g: scipy_life(g).astype(np.int32),
            cupy=lambda x, cnd: _cupy_life(x, cnd).astype(_cp().int32), sweep=SWEEP_GOL_GPU),
        "heat_5pt": dict(
            make=lambda: sk.Stencil(heat, shape=1, border="nearest"), dtype=np.float32,
            hand="heat", scipy=lambda a: ndi.correlate(a, five, mode="nearest"),
            cupy=lambda x, cnd: cnd.correlate(x, _cp().asarray(five), mode="nearest")),
        "gaussian_5x5": dict(
            make=lambda: sk.Stencil(gauss5, border="reflect"), dtype=np.float32,
            hand="gauss5", scipy=lambda a: ndi.correlate(a, g5, mode="reflect"),
            scipy_sep=lambda a: ndi.gaussian_filter(a, 1.0, mode="reflect", truncate=2.0),
            cupy=lambda x, cnd: cnd.correlate(x, _cp().asarray(g5), mode="reflect")),
        "gaussian_11x11": dict(
            make=lambda: sk.Stencil(gauss11, border="reflect"), dtype=np.float32,
            hand="gauss11", scipy=lambda a: ndi.correlate(a, g11, mode="reflect"),
            scipy_sep=lambda a: ndi.gaussian_filter(a, 2.0, mode="reflect", truncate=2.5),
            cupy=lambda x, cnd: cnd.correlate(x, _cp().asarray(g11), mode="reflect")),
        "gaussian_11x11_separable": dict(
            make=lambda: (sk.Stencil(gauss11_rows, border="reflect")
                          >> sk.Stencil(gauss11_cols, border="reflect")),
            dtype=np.float32, hand=None,
            scipy=lambda a: ndi.gaussian_filter(a, 2.0, mode="reflect", truncate=2.5),
            cupy=lambda x, cnd: cnd.gaussian_filter(x, 2.0, mode="reflect", truncate=2.5)),
        "canny": dict(
            make=lambda: (sk.Stencil(gauss5, border="reflect")
                          >> sk.Stencil(sobel_mag, border="reflect")
                          >> sk.Stencil(nms, border="constant", cval=0)
                          >> sk.Stencil(threshold, shape=0)),
            dtype=np.float32, hand=None, scipy=_scipy_canny, cupy=None),
        "synthetic_simple_20_10_20_10": dict(
            make=lambda: sk.Stencil(synth_simple, shape=SIMPLE_SHAPE, border="nearest"),
            dtype=np.float32, hand="synth_simple",
            scipy=lambda a: scipy_taps(a, SIMPLE_TAPS, SIMPLE_SHAPE), cupy=None),
        "synthetic_complex_1_10_30_30": dict(
            make=lambda: sk.Stencil(synth_complex, shape=COMPLEX_SHAPE, border="nearest"),
            dtype=np.float32, hand="synth_complex", scipy=None, cupy=None),
    }
    return cases


def _scipy_canny(a):
    s = ndi.correlate(a, np.outer(G5, G5), mode="reflect")
    gi = ndi.sobel(s, axis=0)
    gj = ndi.sobel(s, axis=1)
    m = np.hypot(gi, gj)
    keep = m >= ndi.maximum_filter(m, size=3)          # a simplified NMS of equal cost class
    m = np.where(keep, m, 0)
    return np.where(m >= HIGH, 1.0, np.where(m >= LOW, 0.5, 0.0))


def _cp():
    import cupy

    return cupy


def _cupy_life(x, cnd):
    cp = _cp()
    n = cnd.convolve(x.astype(cp.int32), cp.asarray([[1, 1, 1], [1, 0, 1], [1, 1, 1]]),
                     mode="wrap")
    return ((n == 3) | ((n == 2) & (x == 1))).astype(cp.uint8)


def sample(dtype, size, rng, binary=False):
    if binary:
        return (rng.random((size, size)) < 0.3).astype(dtype)
    return rng.random((size, size), dtype=np.float32)


# -- timing ---------------------------------------------------------------------------------------

SWEEP_GPU = [dict(wg_r=r, wg_c=c, cr=cr, cc=1, local=lo, vec=1)
             for lo in (0, 1) for (r, c) in ((4, 32), (8, 32), (16, 16), (4, 64), (2, 128),
                                              (8, 64), (1, 256))
             for cr in (1, 2, 4)] + [
    dict(wg_r=r, wg_c=c, cr=cr, cc=1, local=0, vec=4)
    for (r, c) in ((8, 32), (2, 64), (4, 64), (1, 128)) for cr in (1, 2, 4)]
# Game of Life (integer, ALU-heavy: 8 adds and 3 compares per cell) on GPUs: the vector path's
# register window at every row coarsening and vector width, wider groups; more cells per
# work-item share more of the window's loads (cr=4, vec=4: 2.25 loads per cell against 4 at
# cr=2, vec=2; clang's NVPTX proxy: 15.6 against 19.8 integer ops per cell).
SWEEP_GOL_GPU = [dict(wg_r=r, wg_c=c, cr=cr, cc=1, local=0, vec=v)
                 for (r, c) in ((4, 32), (4, 64), (8, 32), (2, 128), (1, 256), (8, 64))
                 for cr in (1, 2, 4, 8) for v in (2, 4)]
# ``--sweep-set vector``: a short list of vector-path points, the whole sweep on GPUs where one
# run must stay short (the Game of Life acceptance run: uint8 and int32 at 8192^2 and 16384^2).
# ``vec`` counts 4-byte words (stencil_plan.vector_columns): vec=4 is a uchar16 per row for
# uint8 and an int4 for int32, vec=8 (32 bytes) only for packed one-byte plans; points whose
# window is too large or that a dtype's plan does not take are skipped.
SWEEP_VECTOR_GPU = [dict(wg_r=r, wg_c=c, cr=cr, cc=1, local=0, vec=v)
                    for (r, c), cr, v in (((16, 16), 2, 4), ((16, 16), 1, 4), ((8, 32), 2, 4),
                                          ((4, 64), 2, 4), ((16, 16), 4, 2), ((8, 32), 4, 2),
                                          ((4, 64), 2, 2), ((4, 32), 2, 2), ((4, 64), 4, 4),
                                          ((4, 32), 2, 4), ((8, 32), 1, 4), ((2, 128), 2, 4),
                                          ((4, 32), 4, 8), ((2, 32), 4, 8), ((2, 64), 4, 8))]
#: --cases names that stand for several cases
CASE_GROUPS = {"game_of_life": ("game_of_life", "game_of_life_int32")}
SWEEP_CPU = [dict(wg_r=r, wg_c=c, cr=cr, cc=cc, local=0, vec=1)
             for (r, c) in ((4, 64), (1, 64), (8, 32), (4, 16), (16, 16), (1, 256))
             for cr, cc in ((1, 1), (2, 1), (2, 2))] + [
    dict(wg_r=8, wg_c=32, cr=1, cc=1, local=1, vec=1)] + [
    dict(wg_r=r, wg_c=c, cr=cr, cc=1, local=0, vec=4)
    for (r, c) in ((8, 32), (4, 16), (4, 64)) for cr in (1, 2)]


def time_skelpy(st, m, reps, params=None):
    """Min kernel seconds of st(m) with outputs recycled through the pool (first-touch page
    faults on CPU devices are a property of fresh buffers, not of the kernel)."""
    st(m, params=params)
    best = float("inf")
    for _ in range(reps):
        st(m, params=params)          # the result is dropped at once: its buffer is reused
        best = min(best, st.last_launch.kernel_time)
    return best, dict(st.last_launch.params) if not isinstance(st, sk.StencilSequence) else \
        {k: dict(v) for k, v in st.last_launch.params.items()}


_KERNELS: dict[str, cl.Kernel] = {}


def time_hand(rt, prg, name, host, reps, lsize, per_item=(1, 1)):
    """Min kernel seconds of hand kernel ``name``; each work-item computes ``per_item``
    (columns, rows) cells."""
    rows, cols = host.shape
    cols_i, rows_i = -(-cols // per_item[0]), -(-rows // per_item[1])
    mf = cl.mem_flags
    ib = cl.Buffer(rt.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host)
    ob = cl.Buffer(rt.context, mf.READ_WRITE, host.nbytes)
    k = _KERNELS.get(name)
    if k is None:
        k = _KERNELS[name] = cl.Kernel(prg, name)
    k.set_args(ib, ob, np.int32(rows), np.int32(cols))
    g = (-(-cols_i // lsize[0]) * lsize[0], -(-rows_i // lsize[1]) * lsize[1])
    secs = time_events(lambda: cl.enqueue_nd_range_kernel(rt.queue, k, g, lsize),
                       reps=reps, warmup=2)
    out = np.empty_like(host)
    cl.enqueue_copy(rt.queue, out, ob)
    return secs, out


def time_wall(fn, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def time_cupy(fn, x, reps):
    cp = _cp()
    fn(x)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    best = float("inf")
    for _ in range(reps):
        start.record()
        fn(x)
        end.record()
        end.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(start, end) * 1e-3)
    return best


def bandwidth_sweep(rt, sizes, reps) -> list[dict]:
    """The 5-point float32 stencil over a wide grid of launch points against a buffer copy of
    the same size: how close to streaming speed the kernel gets, and where."""
    st = sk.Stencil(heat, shape=1, border="nearest")
    rng = np.random.default_rng(1)
    out = []
    for size in sizes:
        host = rng.random((size, size), dtype=np.float32)
        m = sk.Matrix(host)
        copy_bw = copy_bandwidth(rt.queue, nbytes=host.nbytes, reps=reps)
        results = []
        for lo, (r, c), cr, cc, vec in itertools.product(
                (0, 1), ((1, 64), (1, 128), (1, 256), (2, 64), (2, 128), (4, 32), (4, 64),
                         (8, 32), (16, 16), (8, 64), (4, 128), (1, 512), (2, 256), (1, 1024)),
                (1, 2, 4, 8), (1, 2, 4), (1, 2, 4)):
            if vec > 1 and (lo or cc > 1):
                continue                          # not legal: the vector path is direct
            p = dict(wg_r=r, wg_c=c, cr=cr, cc=cc, local=lo, vec=vec)
            try:
                t, _ = time_skelpy(st, m, reps, params=p)
            except sk.SkelpyError:
                continue
            results.append((t, p))
        results.sort(key=lambda x: x[0])
        t_def, p_def = time_skelpy(st, m, reps)
        for t, p in results[:5]:
            print(f"  {size}^2 {p}: {t * 1e6:.1f} us, {2 * host.nbytes / t / 1e9:.0f} GB/s = "
                  f"{100 * 2 * host.nbytes / t / copy_bw:.1f}% of copy "
                  f"({copy_bw / 1e9:.0f} GB/s)")
        print(f"  {size}^2 default {p_def}: {t_def * 1e6:.1f} us = "
              f"{100 * 2 * host.nbytes / t_def / copy_bw:.1f}% of copy")
        out.append({"size": size, "copy_GBs": copy_bw / 1e9,
                    "best": [{"us": t * 1e6, "params": p,
                              "pct_copy": 100 * 2 * host.nbytes / t / copy_bw}
                             for t, p in results[:10]],
                    "default": {"us": t_def * 1e6, "params": p_def,
                                "pct_copy": 100 * 2 * host.nbytes / t_def / copy_bw}})
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="sizes 256 and 512, few repeats")
    ap.add_argument("--sizes", default="512,1024,2048,4096")
    ap.add_argument("--cases", default="all", help="comma-separated case names")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-sweep", action="store_true", help="skip the 'skelpy best' sweep")
    ap.add_argument("--sweep-set", choices=("full", "vector"), default="full",
                    help="the 'skelpy best' sweep: every listed point (full) or a short list "
                         "of vector-path points, each printed with its %% of copy and checked "
                         "bit for bit against skelpy's own result (vector)")
    ap.add_argument("--no-hand", action="store_true", help="skip the hand-written kernels")
    ap.add_argument("--sweep-max-size", type=int, default=None,
                    help="sweep only up to this size (default: 2048 on CPUs, all on GPUs)")
    ap.add_argument("--no-scipy", action="store_true", help="skip the scipy.ndimage timings")
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    ap.add_argument("--bandwidth-sweep", action="store_true",
                    help="only sweep the 5-point stencil's launch points against a same-size copy")
    args = ap.parse_args(argv)
    sizes = [256, 512] if args.quick else [int(s) for s in args.sizes.split(",")]
    reps = 2 if args.quick else args.reps

    rt = runtime.current()
    dev = rt.device
    gpu = dev.kind == "gpu"
    try:
        import cupyx.scipy.ndimage as cnd
    except Exception:  # noqa: BLE001 - CuPy absent or without a CUDA device
        cnd = None
    if args.bandwidth_sweep:
        sweep_sizes = [int(x) for x in args.sizes.split(",")]
        res = bandwidth_sweep(rt, sweep_sizes, reps)
        path = write_json("stencil-bandwidth", dev.name, {"sweep": res},
                          directory=None if args.out is None else Path(args.out))
        print(f"results: {path}")
        return {"sweep": res}
    prg = rt.build(hand_source(), ())
    hand_local = (32, 8) if gpu else (64, 4)
    copy_bw = copy_bandwidth(rt.queue)
    print(f"device: {dev.name} ({dev.kind}, {dev.platform}); copy bandwidth "
          f"{copy_bw / 1e9:.1f} GB/s (read + write)")
    cases = build_cases()
    names = list(cases) if args.cases == "all" else list(dict.fromkeys(
        n for name in args.cases.split(",") for n in CASE_GROUPS.get(name, (name,))))
    sweep = [] if args.no_sweep else (SWEEP_GPU if gpu else SWEEP_CPU)
    vector_set = args.sweep_set == "vector" and not args.no_sweep
    if vector_set:
        sweep = SWEEP_VECTOR_GPU
    elif args.quick:
        sweep = sweep[:: max(1, len(sweep) // 6)]
    sweep_max = args.sweep_max_size or (1 << 30 if gpu else 2048)
    rng = np.random.default_rng(2016)
    rows, details = [], []
    for name in names:
        case = cases[name]
        st = case["make"]()
        for size in sizes:
            host = sample(case["dtype"], size, rng, case.get("binary", False))
            m = sk.Matrix(host)
            t_sk, p_sk = time_skelpy(st, m, reps)
            row = {"case": name, "size": size, "skelpy_ms": t_sk * 1e3}
            got = st(m).to_numpy()
            moved = float(host.nbytes + got.nbytes)
            t_best, p_best = t_sk, p_sk
            if not isinstance(st, sk.StencilSequence):
                # the space's default point (what runs where no tuning model speaks)
                p_def = st.bind(m, ()).plan.make_space(rt)[0].default
                t_def, _ = time_skelpy(st, m, reps, params=p_def)
                row["default_ms"] = t_def * 1e3
                row["default %copy"] = 100.0 * moved / t_def / copy_bw
                if t_def < t_best:
                    t_best, p_best = t_def, dict(p_def)
            if sweep and not isinstance(st, sk.StencilSequence) and size <= sweep_max:
                extra = case.get("sweep", []) if gpu and not vector_set else []
                for p in sweep + [q for q in extra if q not in sweep]:
                    try:
                        t, _ = time_skelpy(st, m, max(1, reps // 2), params=p)
                    except sk.SkelpyError:
                        continue        # illegal here (local memory, work-group limits)
                    if vector_set:
                        same = np.array_equal(st(m, params=p).to_numpy(), got)
                        row["agree"] = bool(row.get("agree", True) and same)
                        print(f"    {p}: {t * 1e6:.1f} us, {100.0 * moved / t / copy_bw:.1f}% "
                              f"of copy{'' if same else ', RESULT DIFFERS'}", flush=True)
                    if t < t_best:
                        t_best, p_best = t, dict(p)
                row["skelpy_best_ms"] = t_best * 1e3
            if case["hand"] and not args.no_hand:
                t_h, ref = time_hand(rt, prg, case["hand"], host, reps, hand_local)
                row["hand_ms"] = t_h * 1e3
                row["skelpy/hand"] = t_sk / t_h
                row["agree"] = bool(row.get("agree", True)
                                    and np.allclose(got, ref, atol=1e-3, rtol=1e-4))
            if case.get("hand_tuned") and not args.no_hand:
                t_ht, ref = time_hand(rt, prg, case["hand_tuned"], host, reps,
                                      (64, 4) if gpu else (16, 4), per_item=(4, 4))
                row["tuned_hand_ms"] = t_ht * 1e3
                row["agree"] = bool(row.get("agree", True) and np.array_equal(got, ref))
            if case.get("hand_swar") and not args.no_hand and size % 32 == 0:
                t_sw, ref = time_hand(rt, prg, case["hand_swar"], host, reps,
                                      (32, 4) if gpu else (4, 4), per_item=(32, 4))
                row["swar_hand_ms"] = t_sw * 1e3
                row["agree"] = bool(row.get("agree", True) and np.array_equal(got, ref))
            if ndi is not None and case["scipy"] is not None and not args.no_scipy and \
                    (size <= 2048 or not args.quick):
                t_sp = time_wall(lambda case=case, host=host: case["scipy"](host),
                                 1 if size >= 2048 else reps)
                row["scipy_ms"] = t_sp * 1e3
                row["scipy/skelpy"] = t_sp / t_sk
                if "scipy_sep" in case:
                    t_sep = time_wall(lambda case=case, host=host: case["scipy_sep"](host),
                                      1 if size >= 2048 else reps)
                    row["scipy_sep_ms"] = t_sep * 1e3
            if cnd is not None and case.get("cupy") is not None:
                x = _cp().asarray(host)
                t_cp = time_cupy(lambda x, case=case: case["cupy"](x, cnd), x, reps)
                row["cupy_ms"] = t_cp * 1e3
                row["cupy/skelpy"] = t_cp / t_sk
            if not isinstance(st, sk.StencilSequence):
                # one read of the input and one write of the output per cell: the copy bound
                row["GB/s"] = moved / t_sk / 1e9
                row["best GB/s"] = moved / t_best / 1e9
                row["skelpy %copy"] = 100.0 * moved / t_sk / copy_bw
                row["%copy"] = 100.0 * moved / t_best / copy_bw
                if "tuned_hand_ms" in row:
                    row["tuned hand %copy"] = 100.0 * moved / (row["tuned_hand_ms"] * 1e-3) \
                        / copy_bw
                if "swar_hand_ms" in row:
                    row["swar hand %copy"] = 100.0 * moved / (row["swar_hand_ms"] * 1e-3) \
                        / copy_bw
            rows.append(row)
            details.append({**row, "params": p_sk, "best_params": p_best})
            pct = (f" ({row['skelpy %copy']:.0f}% / {row['%copy']:.0f}% of copy)"
                   if "%copy" in row else "")
            print(f"  {name} {size}^2: skelpy {t_sk * 1e3:.3f} ms {p_sk}, best "
                  f"{t_best * 1e3:.3f} ms {p_best}{pct}", flush=True)
    cols = ["case", "size", "skelpy_ms", "skelpy_best_ms", "hand_ms", "skelpy/hand",
            "scipy_ms", "scipy_sep_ms", "scipy/skelpy", "cupy_ms", "cupy/skelpy", "GB/s",
            "best GB/s", "skelpy %copy", "default %copy", "%copy", "tuned_hand_ms", "swar_hand_ms",
            "tuned hand %copy", "swar hand %copy", "agree"]
    present = [c for c in cols if any(c in r for r in rows)]
    print_table(rows, present, title=f"Stencil benchmarks on {dev.name} (kernel times, "
                f"min of {reps})")
    data = {"copy_bandwidth_GBs": copy_bw / 1e9, "sizes": sizes, "rows": details,
            "device_kind": dev.kind, "platform": dev.platform}
    path = write_json("stencil", dev.name, data,
                      directory=None if args.out is None else Path(args.out))
    print(f"results: {path}")
    return data


if __name__ == "__main__":
    main()
