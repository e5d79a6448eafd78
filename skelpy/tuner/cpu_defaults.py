"""Default launch points on CPUs: what ``off`` mode runs and ``model`` mode falls back to
where no model overrides it with confidence (issue 18).

PoCL runs a work-group as a loop over its work-items and vectorises that loop along x (the
work-group's columns), so on a CPU a good point is the one whose work-item loop vectorises
cleanly: a row of work-items as wide as the SIMD unit's lanes, no coarsening that would put
the muscle's body in the loop several times, no local tile (a CPU has no faster memory to
stage into), and for Map/Zip no explicit vectors that turn the loop's loads into strided
gathers. Derived from interleaved confirmed measurements on PoCL 3.1 (AVX-512, 16 float
lanes; ``python -m benchmarks.tuner_defaults``, RESULTS.md "CPU defaults"); the rules read
the device's SIMD width and the muscle's static features, never a kernel's name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

FALLBACK_LANES = 16        # float lanes when the device does not say (AVX-512)
LIGHT_ITEMS = 128          # work-items of a light stencil's group: 4 rows of 2 x 16 lanes
LIGHT_WIDTHS = 2           # SIMD widths of columns in a light stencil's group
HEAVY_READS = 24           # distinct neighbours read per cell above which a stencil is heavy
WINDOW_LIMIT = 96          # most cells two rows' neighbourhoods span for 2 rows per work-item


def simd_lanes(device: Any) -> int:
    """Float lanes of the device's SIMD unit (``preferred_vector_width_float``), a power of
    two in [4, 64]; :data:`FALLBACK_LANES` when the device does not say."""
    feats = getattr(device, "features", None) or {}
    v = int(float(feats.get("dev_pref_vec_float", 0) or 0))
    if v < 2:
        return FALLBACK_LANES
    lanes = 1 << (v.bit_length() - 1)
    return max(4, min(64, lanes))


def span(features: Mapping[str, float], rows: int = 1, cols: int = 1) -> float:
    """Cells that the neighbourhoods of a block of ``rows`` x ``cols`` cells cover (the
    stencil's reach from its features): 1 x 1 is the neighbourhood's area, 2 x 1 the window
    of two rows per work-item, cr x vec the vector path's register window."""
    return ((features.get("north", 0.0) + features.get("south", 0.0) + rows)
            * (features.get("west", 0.0) + features.get("east", 0.0) + cols))


def distinct_reads(features: Mapping[str, float]) -> float:
    """Neighbours a cell reads, at most the neighbourhood's area: a muscle that reads
    different neighbours in different branches (Canny's non-maximum suppression: 13 reads of
    a 3x3 neighbourhood) is counted by the cells it can reach, not by its read sites."""
    reads = float(features.get("reads_dyn", features.get("reads", 0.0)))
    return min(reads, span(features))


def divergent_loop(features: Mapping[str, float]) -> bool:
    """A muscle with a loop and data-dependent branches (hysteresis: look around only when
    the cell is weak): PoCL vectorises such a work-item loop only in one-row groups (a 3x3
    hysteresis at 512^2: 0.34 ms in 1x32 groups, 2.3-2.4 ms in any group of 2 or more rows)."""
    return features.get("loops", 0.0) > 0 and features.get("branches", 0.0) > 0


def stencil_point(device: Any, features: Mapping[str, float]) -> dict:
    """The stencil default on a CPU. Light stencils: rows of two SIMD widths of columns,
    :data:`LIGHT_ITEMS` work-items (4x32 on AVX-512). One SIMD width (8x16) had been
    confirmed 1.0-1.5x faster than the former 4x64 on heat, Jacobi, Sobel, non-maximum
    suppression, Game of Life and the 5x5 LoG at 512^2-1024^2, but it has cliffs: heat with
    a ``constant`` border ran 2.9-3.3x slower than at 4x32 (512^2-1024^2), heat at 2048^2
    1.8x; 4x32 was within 0.85-1.0x of 8x16 elsewhere at 512^2 and 1.0-1.1x faster at
    1024^2-2048^2 (every border mode; 2026-11-23, interleaved, minimum of 9). Heavy ones
    (more than :data:`HEAVY_READS` distinct neighbours, covering a quarter of the
    neighbourhood: a 5x5 Gaussian reads 25): 4 rows of one SIMD width, 2 rows per work-item,
    whose reads overlap (1.0-1.3x over the light point), while the two rows' neighbourhoods
    span at most :data:`WINDOW_LIMIT` cells (an 11x11 Gaussian's 132 do not: twice its 121
    unrolled taps ran 1.03-1.2x slower than the light point); those that multiply their reads
    take the vector path (:func:`weighted_vector_point`). Divergent loops: one row of two
    SIMD widths (:func:`divergent_loop`)."""
    lanes = simd_lanes(device)
    reads = distinct_reads(features)
    if divergent_loop(features):
        return {"wg_r": 1, "wg_c": 2 * lanes, "cr": 1, "cc": 1, "local": 0, "vec": 1}
    if reads > HEAVY_READS and reads >= 0.25 * span(features) \
            and span(features, rows=2) <= WINDOW_LIMIT:
        if features.get("ops_mul", 0.0) > 0:
            vector = weighted_vector_point(lanes, features)
            if vector is not None:
                return vector
        return {"wg_r": 4, "wg_c": lanes, "cr": 2, "cc": 1, "local": 0, "vec": 1}
    cols = LIGHT_WIDTHS * lanes
    return {"wg_r": max(1, LIGHT_ITEMS // cols), "wg_c": cols, "cr": 1, "cc": 1,
            "local": 0, "vec": 1}


# Weighted heavy stencils on the vector path: (rows per work-item, columns) tried in order.
WEIGHTED_VECTOR_POINTS = ((4, 2), (2, 4))


def weighted_vector_point(lanes: int, features: Mapping[str, float]) -> dict | None:
    """A heavy stencil that multiplies its reads (a 5x5 Gaussian or weighted box: 25
    weighted taps) on the vector path: one-row groups of two SIMD widths, each work-item 4
    rows by 2 columns (or 2 by 4) from a register window, where the window fits
    :data:`WINDOW_LIMIT` cells; None where none fits (the scalar heavy point then).

    Why: PoCL's SLP vectorizer runs before the work-item loops exist and packs a row's
    adjacent weighted taps into ``<4 x float>`` multiplies; the work-item loop then holds
    vector instructions and is not vectorized at all ("instruction return type cannot be
    vectorized"): 132 scalar adds per cell in the kernel's code. On the vector path the
    cells of a work-item are the isomorphic lanes SLP packs instead. Interleaved, minimum of
    7 (PoCL 3.1, AVX-512, 2026-11-23): 5x5 Gaussian 2.1-2.6x faster than the scalar heavy
    point at 512^2-2048^2 (nearest, reflect, constant), 25 taps of one weight 2.1x; a plain
    25-read sum (no multiplies: its work-item loop vectorizes) 2.1x slower there, and light
    stencils (heat, 3x3 Gaussian, 5x5 LoG) 1.9-2x slower, so neither takes it."""
    for cr, vec in WEIGHTED_VECTOR_POINTS:
        if span(features, rows=cr, cols=vec) <= WINDOW_LIMIT:
            return {"wg_r": 1, "wg_c": 2 * lanes, "cr": cr, "cc": 1, "local": 0, "vec": vec}
    return None


# Math functions that reach a CPU as calls into the OpenCL C library (sin, exp, pow, ...),
# which PoCL's work-item loop vectoriser leaves scalar; sqrt, fabs, floor, fmin, fma and the
# like are LLVM intrinsics that vectorise with the loop.
_LIBM = re.compile(r"\b(exp|exp2|exp10|expm1|log|log2|log10|log1p|logb|sin|cos|tan|sinpi|cospi|"
                   r"tanpi|asin|acos|atan|atan2|asinh|acosh|atanh|sinh|cosh|tanh|pow|pown|powr|"
                   r"rootn|hypot|erf|erfc|cbrt|tgamma|lgamma|fmod|remainder|sincos)\s*\(")


def libm_calls(source: str) -> int:
    """Calls of scalar library math functions in a muscle's C source."""
    return len(_LIBM.findall(source))


def elementwise_vw(features: Mapping[str, float], vw_default: int) -> int:
    """Map/Zip's vector width on a CPU: a muscle without library math calls
    (``features["libm_calls"]``, :func:`libm_calls`) runs scalar work-items, which PoCL packs
    into SIMD lanes itself (arithmetic and sqrt muscles ran 1.5-3.5x faster at ``vw=1`` than
    at the 16-byte default, whose per-work-item vectors become strided loads); one that calls
    sin, exp, pow, ... keeps ``vw_default``, whose explicit vectors reach the library's
    vector functions (1.2-1.5x faster than ``vw=1``). Without the count (features from an
    older translator), any math operation counts as a library call."""
    calls = features.get("libm_calls", features.get("ops_math", 0.0))
    return vw_default if calls > 0 else 1


# PoCL splits a work-group's work-item loop at every barrier, and a fold's or scan's tree
# within the group has log2(wg) of them: on a CPU a few work-items per group win.
FOLD_WG = 4                # work-items of a flat fold's group (Reduce, MapReduce)
FOLD_ITEMS = 2             # elements per work-item per step
FOLD_GROUPS_PER_CU = 8     # work-groups per compute unit (PoCL hands whole groups to threads)
SCAN_WG = 8                # work-items of a scan's tile
SCAN_ITEMS = 64            # consecutive elements per work-item


def fold_point(device: Any, groups_values: tuple[int, ...], wmax: int) -> dict:
    """A flat fold's default on a CPU: groups of :data:`FOLD_WG` work-items folding
    :data:`FOLD_ITEMS` elements a step, about :data:`FOLD_GROUPS_PER_CU` groups per compute
    unit (float32 and float64 sums and a max over 2^18-2^20 elements: 0.85-1.0 of the best
    of 24 candidates, where 64 x 16 in 64 groups reached 0.28-0.33)."""
    cu = max(int(getattr(device, "compute_units", 1) or 1), 1)
    groups = min(groups_values, key=lambda g: abs(g - FOLD_GROUPS_PER_CU * cu))
    return {"wg": min(FOLD_WG, wmax), "items": FOLD_ITEMS, "groups": groups, "stages": 1}


def scan_point(wmax: int) -> dict:
    """A scan's default on a CPU: tiles of :data:`SCAN_WG` x :data:`SCAN_ITEMS` with the
    decoupled look-back. Interleaved, minimum of 5-7 (PoCL 3.1, AVX-512, 2026-11-23):
    inclusive sums of float32 over 2^14-2^22, float64 and int32 over 2^20 ran 1.2-2.1x
    faster at 8 x 64 than at the former 8 x 16 and within 0.95 of the best of 24 candidates
    (wg 4-16, items 16-64, look-back or levels); 64 x 16 had reached 0.40-0.79."""
    return {"wg": min(SCAN_WG, wmax), "items": SCAN_ITEMS, "method": "lookback"}
