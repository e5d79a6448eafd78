"""Feature vectors for the tuning models ([Cummins 2018] Table 5.1, adapted;
see docs/references.md).

A *scenario* (device, kernel, data) is described by device queries, the kernel's static
features (skeleton kind, stencil reach, operation counts of the translated muscle, ...) and
dataset features (rows, cols, element count, dtype size). A *point* adds its launch
parameters. Names are collected at training time into a :class:`Schema`, whose fixed order
turns feature dicts into vectors; features unknown to a schema are dropped and missing ones
read as 0, so models survive new translator features.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

SKELETONS = ("map", "zip", "reduce", "scan", "allpairs", "stencil", "mapreduce")
COARSEN_NAMES = ("cr", "cc", "cf", "coarsen", "coarsening", "items")


def is_coarsening(name: str) -> bool:
    """Whether a launch parameter is a thread-coarsening factor (Map's ``coarsen``,
    Stencil's ``cr``/``cc``, Reduce's ``items``)."""
    return name in COARSEN_NAMES or "coarsen" in name


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    return None


def _log2(v: float) -> float:
    return math.log2(v) if v > 0 else -1.0


def scenario_features(skeleton: str, device_features: Mapping[str, Any],
                      kernel_features: Mapping[str, Any], dataset: Mapping[str, Any],
                      space: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The features of one scenario as a name -> value dict (no launch parameters)."""
    out: dict[str, float] = {}
    for k, v in device_features.items():
        f = _num(v)
        if f is not None:
            out[k if k.startswith("dev_") else f"dev_{k}"] = f
    for s in SKELETONS:
        out[f"sk_{s}"] = 1.0 if skeleton == s else 0.0
    for k, v in kernel_features.items():
        f = _num(v)
        if f is not None:
            out[f"k_{k}"] = f
    elements = 1.0
    for k, v in dataset.items():
        f = _num(v)
        if f is None:
            continue
        out[f"ds_{k}"] = f
        if k in ("n", "rows", "cols", "elements"):
            out[f"ds_log2_{k}"] = _log2(f)
    if "n" in dataset and _num(dataset["n"]):
        elements = float(dataset["n"])
    elif "rows" in dataset and "cols" in dataset:
        elements = float(dataset["rows"]) * float(dataset["cols"])
    out["ds_log2_elements"] = _log2(elements)
    size = _num(dataset.get("dtype_size", 4)) or 4.0
    out["ds_log2_bytes"] = _log2(elements * size)
    cache = _num(device_features.get("dev_global_cache", device_features.get("global_cache")))
    is_gpu = _num(device_features.get("dev_is_gpu", device_features.get("is_gpu", 1.0)))
    if cache and not is_gpu:
        # the data against the last-level cache: on a CPU an input that fits streams
        # from cache and the launch's overheads decide
        out["x_data_cache"] = out["ds_log2_bytes"] - _log2(cache)
    if space:
        # The legal limits of each parameter stand in for the kernel's max work-group size.
        for name, hi in (space.get("limits") or {}).items():
            out[f"lim_{name}"] = _log2(float(hi))
    return out


def point_columns(points: Sequence[Mapping[str, Any]], names: Sequence[str],
                  numeric: Mapping[str, bool] | None = None) -> dict[str, np.ndarray]:
    """Launch parameters of many points as feature columns: log2 of numeric ones (sizes,
    factors), one-hot of the rest, and the products that matter (total work-group size, total
    coarsening, elements per work-group)."""
    n = len(points)
    cols: dict[str, np.ndarray] = {}
    wg = np.zeros(n)
    cf = np.zeros(n)
    has_wg = has_cf = False
    for name in names:
        vals = [p[name] for p in points]
        arr = _float_array(vals) if (numeric or {}).get(name, True) else None
        if arr is not None:
            col = np.where(arr > 0, np.log2(np.maximum(arr, 1e-300)), -1.0)
            cols[f"p_{name}"] = col
            if name.startswith("wg"):
                wg += np.maximum(col, 0.0)
                has_wg = True
            elif is_coarsening(name):
                cf += np.maximum(col, 0.0)
                has_cf = True
        else:
            for v in dict.fromkeys(vals):
                cols[f"p_{name}={v}"] = np.fromiter((x == v for x in vals), np.float64, n)
    if has_wg:
        cols["p_wg_total"] = wg
    if has_cf:
        cols["p_coarsen_total"] = cf
    if has_wg or has_cf:
        cols["p_items_per_group"] = wg + cf
    return cols


def _float_array(vals: list) -> np.ndarray | None:
    """``vals`` as finite float64s, or None if any is not a real number."""
    try:
        arr = np.asarray(vals, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if arr.ndim != 1 or not np.isfinite(arr).all():
        return None
    return arr


def cross_columns(scen: Mapping[str, float], cols: Mapping[str, np.ndarray]
                  ) -> dict[str, np.ndarray]:
    """Features of a point *in* a scenario: log2 of the number of work-groups, and for
    stencils the halo overhead of the tile a work-group covers."""
    out: dict[str, np.ndarray] = {}
    if "p_items_per_group" in cols and "ds_log2_elements" in scen:
        out["x_log2_groups"] = scen["ds_log2_elements"] - cols["p_items_per_group"]
    if all(f"k_{d}" in scen for d in ("north", "south", "east", "west")) \
            and "p_wg_r" in cols and "p_wg_c" in cols:
        tr = np.exp2(cols["p_wg_r"] + cols.get("p_cr", 0.0))
        tc = np.exp2(cols["p_wg_c"] + cols.get("p_cc", 0.0))
        hr = scen["k_north"] + scen["k_south"]
        hc = scen["k_east"] + scen["k_west"]
        out["x_log2_halo"] = np.log2((tr + hr) * (tc + hc) / (tr * tc))
        cache = scen.get("dev_global_cache", 0.0)
        if cache > 0 and not scen.get("dev_is_gpu", 1.0):
            size = scen.get("ds_dtype_size", 4.0) or 4.0
            out["x_tile_cache"] = np.log2((tr + hr) * (tc + hc) * size / cache)
    out.update(cpu_columns(scen, cols, out.get("x_log2_groups")))
    return out


def cpu_columns(scen: Mapping[str, float], cols: Mapping[str, np.ndarray],
                groups: np.ndarray | None) -> dict[str, np.ndarray]:
    """What a point means on a CPU, in units of the device (issue 16): PoCL runs a
    work-group as a loop over its work-items and vectorises that loop along x, so the
    work-items along x per SIMD width (``preferred_vector_width_float``) say whether the
    vector lanes fill; an explicit vector width (Map's ``vw``) over the SIMD width; and the
    work-groups per compute unit (PoCL hands whole groups to its threads). Relative to the
    device's own queries, a point learnt on an AVX2 CPU carries to an AVX-512 one."""
    out: dict[str, np.ndarray] = {}
    if scen.get("dev_is_gpu", 1.0):       # GPUs' models keep the features they were checked with
        return out
    vec = float(scen.get("dev_pref_vec_float", 0.0))
    if vec > 0:
        lv = math.log2(vec)
        along_x = cols.get("p_wg_c", cols.get("p_wg"))
        if along_x is not None:
            out["x_simd_fill"] = along_x - lv
        if "p_vw" in cols:
            out["x_vw_simd"] = cols["p_vw"] - lv
    cu = float(scen.get("dev_compute_units", 0.0))
    if groups is not None and cu > 0:
        out["x_groups_per_cu"] = groups - math.log2(cu)
    return out


def point_features(point: Mapping[str, Any], numeric: Mapping[str, bool] | None = None
                   ) -> dict[str, float]:
    """:func:`point_columns` of one point, as a dict."""
    return {k: float(v[0]) for k, v in point_columns([point], list(point), numeric).items()}


def space_limits(points: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per numeric parameter, the largest legal value (a proxy for kernel limits)."""
    lim: dict[str, float] = {}
    if not points:
        return lim
    for k in points[0]:
        arr = _float_array([p[k] for p in points])
        if arr is not None and len(arr):
            lim[k] = float(arr.max())
    return lim


class Schema:
    """A fixed order of feature names: turns dicts into float32 vectors."""

    def __init__(self, names: Iterable[str]):
        self.names: tuple[str, ...] = tuple(sorted(set(names)))
        self.index = {n: i for i, n in enumerate(self.names)}

    @classmethod
    def from_dicts(cls, dicts: Iterable[Mapping[str, float]]) -> Schema:
        names: set[str] = set()
        for d in dicts:
            names.update(d)
        return cls(names)

    def __len__(self) -> int:
        return len(self.names)

    def vector(self, d: Mapping[str, float]) -> np.ndarray:
        v = np.zeros(len(self.names), np.float32)
        idx = self.index
        for k, x in d.items():
            i = idx.get(k)
            if i is not None:
                v[i] = x
        return v

    def matrix(self, dicts: Sequence[Mapping[str, float]]) -> np.ndarray:
        m = np.zeros((len(dicts), len(self.names)), np.float32)
        idx = self.index
        for r, d in enumerate(dicts):
            for k, x in d.items():
                i = idx.get(k)
                if i is not None:
                    m[r, i] = x
        return m

    def from_columns(self, cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        """An (n, len(self)) matrix from named columns; absent columns are 0."""
        m = np.zeros((n, len(self.names)), np.float32)
        for k, c in cols.items():
            i = self.index.get(k)
            if i is not None:
                m[:, i] = c
        return m
