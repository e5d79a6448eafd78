"""Fused stencil sequences: ``(a >> b >> c)(m)`` as one kernel whose tile carries the summed
halo (Halide's ``compute_at`` at the tile), each intermediate stage in local memory.

A staged sequence writes every intermediate matrix to global memory and reads it back; the
fused kernel (``kernels/stencil_fused.cl``) reads the input and writes the output once, and
recomputes the intermediate cells of the halo around each tile instead. Each stage keeps its
own dtype (float -> uint8 stages), border rule and extra arguments; the results equal the
stages run one by one, bit for bit (the same muscle on the same values, each intermediate value
rounded to its dtype as a store rounds it, each stage's rule applied to the level it reads).

:class:`FusedPlan` is built from the stages' :class:`FusedStage` descriptions and raises
:class:`Unsupported` where fusion is not legal (offsets known only at run time, checked reads,
wrap mixed with other modes, a halo beyond ``MAX_HALO``); :meth:`FusedPlan.space` is the tuner's
space of a call, in which ``fuse = 0`` is the staged run (one point) and ``fuse = 1`` the fused
kernel with its tile: work-group ``fu_wc`` x ``fu_wr`` work-items, each computing ``fu_cr`` x
``fu_cc`` cells of the tile.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .. import runtime as _rt
from ..dtypes import c_type, storage_c_type, storage_dtype
from ..muscle import Accessor, Muscle, Scalar, TypedMuscle, global_array
from ..tuner.space import Param, ParamSpace
from .kernel_source import SourceBuilder
from .limits import first_broken

__all__ = ["FusedStage", "FusedPlan", "Unsupported", "NAMES", "STAGED"]

MODES = {"constant": 0, "nearest": 1, "wrap": 2, "reflect": 3, "mirror": 4}
REDIRECT = ("nearest", "reflect", "mirror")
NAMES = ("fuse", "fu_wc", "fu_wr", "fu_cr", "fu_cc", "fu_flat")
WC_VALUES = (8, 16, 32, 64)
WR_VALUES = (1, 2, 4, 8, 16)
CR_VALUES = (1, 2, 4, 8)
CC_VALUES = (1, 2)
FLAT_VALUES = (0, 1, 2)
MAX_HALO = 16                 # summed halo of a side beyond which a sequence runs staged
LOCAL_RESERVE = 256           # bytes of local memory left for the implementation
#: the staged point: the tile parameters do not apply
STAGED = {"fuse": 0, "fu_wc": 32, "fu_wr": 8, "fu_cr": 1, "fu_cc": 1, "fu_flat": 1}


class Unsupported(Exception):
    """These stages cannot run fused (the sequence runs them one by one)."""


@dataclass(frozen=True)
class FusedStage:
    """One stage as the fused kernel sees it: its muscle, reach (north, south, east, west),
    border rule, ``cval_literal(dtype)`` (the border constant as a C constant), input dtype,
    the ``out_dtype`` the stage was given (None: the muscle's), the dtype its staged run
    produces, and its extra arguments as ``(kind, dtype, weak, arg_dtype)`` with kind
    ``"scalar"``, ``"matrix"`` or ``"vector"`` (``arg_dtype``: the dtype the staged kernel
    passes a scalar as)."""

    muscle: Muscle
    reach: tuple[int, int, int, int]
    border: str
    cval_literal: Callable[[np.dtype], str]
    in_dtype: np.dtype
    out_dtype: np.dtype | None
    result_dtype: np.dtype
    extras: tuple[tuple[str, np.dtype, bool, np.dtype], ...]



class FusedPlan:
    """The fused kernel of a sequence of stages for one input dtype and one set of extras."""

    kernel_name = "skelpy_stencil_fused"

    def __init__(self, stages: Sequence[FusedStage], *, big: bool = False,
                 polish: Callable[[TypedMuscle], str] | None = None):
        stages = list(stages)
        if len(stages) < 2:
            raise Unsupported("one stage: nothing to fuse")
        modes = [st.border for st in stages]
        if any(m not in MODES for m in modes):
            raise Unsupported(f"border modes {modes}")
        if "wrap" in modes and set(modes) != {"wrap"}:
            raise Unsupported("wrap mixed with other border modes (the periodic continuation "
                              "is exact only when every stage wraps)")
        self.n_stages = len(stages)
        self.wraps = "wrap" in modes
        self.in_dtype = np.dtype(stages[0].in_dtype)
        self.out_dtype = np.dtype(stages[-1].result_dtype)
        self.levels = [np.dtype(st.in_dtype) for st in stages] + [self.out_dtype]
        # halos of each level (north, south, west, east); the output level has none
        halo = [(0, 0, 0, 0)]
        for st in reversed(stages):
            n, s, e, w = (int(v) for v in st.reach)
            if st.border in REDIRECT:      # the named cells of a redirected read are held
                n = s = max(n, s)
                e = w = max(e, w)
            hn, hs, gw, ge = halo[0]
            halo.insert(0, (hn + n, hs + s, gw + w, ge + e))
        if max(halo[0]) > MAX_HALO:
            raise Unsupported(f"a summed halo of {halo[0]} (north, south, west, east) is "
                              f"beyond {MAX_HALO}")
        self.halo = tuple(halo)

        muscles, decls, stage_macros = [], [], []
        for k, st in enumerate(stages):
            fast, edge, win, args = self._specialise(k, st, decls)
            muscles += [fast, edge, win]
            last = k + 1 == len(stages)
            dst = "out" if last else f"skp_lv{k + 1}"
            dst_st = "SKP_FU_OUT_ST" if last else storage_c_type(self.levels[k + 1])
            fast_call = f"({fast.c_name}(skp_lv{k} + skp_off, SKP_FU_RC({k})" + \
                "".join(", " + a for a in args) + "))"
            edge_call = f"({edge.c_name}(skp_lv{k}, skp_gr, skp_gc, rows, cols, skp_rb, " \
                "skp_cb" + "".join(", " + a for a in args) + "))"
            win_call = f"({win.c_name}(skp_wp, skp_wpitch" + \
                "".join(", " + a for a in args) + "))"
            stage_macros.append(f"SKP_FU_STAGE({k}, {k + 1}, skp_lv{k}, "
                                f"{storage_c_type(self.levels[k])}, {dst}, {dst_st}, "
                                f"{int(last)}, {fast_call}, {edge_call}, {win_call})")
        self.typed = tuple(muscles)
        header = [
            f"#define SKP_FU_K {len(stages)}",
            f"#define SKP_FU_IN_ST {storage_c_type(self.in_dtype)}",
            f"#define SKP_FU_OUT_ST {storage_c_type(self.out_dtype)}",
            f"#define SKP_IDX_T {'long' if big else 'int'}",
            f"#define SKP_FU_WRAPALL {int(self.wraps)}",
        ]
        for k, (hn, hs, gw, ge) in enumerate(self.halo):
            header += [f"#define SKP_FU_HN{k} {hn}", f"#define SKP_FU_HS{k} {hs}",
                       f"#define SKP_FU_GW{k} {gw}", f"#define SKP_FU_GE{k} {ge}"]
        header.append("#define SKP_FU_EXTRA_DECL " + "".join(", " + d for d in decls))
        header.append("#define SKP_FU_LOCALS " + " ".join(
            f"__local {storage_c_type(self.levels[k])} skp_lv{k}"
            f"[SKP_FU_RR({k}) * SKP_FU_RC({k})];" for k in range(len(stages))))
        header.append("#define SKP_FU_STAGES " + " ".join(stage_macros))
        muscle_src = "\n".join(tm.source if polish is None else polish(tm) for tm in muscles)
        built = (SourceBuilder("stencil_fused")
                 .header(header)
                 .file("stencil_border.cl")
                 .file("stencil_stream_common.cl")
                 .file("stencil_fused_common.cl")
                 .part(muscle_src, muscles=muscles)
                 .file("stencil_fused.cl")
                 .data(*self.levels, *(e[1] for st in stages for e in st.extras
                                       if e[0] != "scalar"))
                 .build((self.kernel_name,)))
        self.source = built
        self.kernel_key = built.key
        self.features = {k: float(v) for k, v in getattr(muscles[0], "features", {}).items()}
        n, s, e, w = (float(v) for v in self.halo[0])
        self.features.update({
            "north": n, "south": s, "west": e, "east": w, "border": float(MODES[modes[0]]),
            "in_dtype_size": float(self.in_dtype.itemsize),
            "out_dtype_size": float(self.out_dtype.itemsize), "stages": float(len(stages)),
            "fused": 1.0})
        self._kernels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._spaces: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _specialise(self, k: int, st: FusedStage, decls: list):
        """Stage k's muscle three times: reading its level in an interior tile (directly from
        local memory, or from a run's register window) and in an edge tile (through its
        border rule); adds its kernel parameters to ``decls``. Returns (fast, edge, window,
        the call's extra arguments)."""
        mu = st.muscle
        north, south, east, west = (int(v) for v in st.reach)
        dt = np.dtype(st.in_dtype)
        mode = MODES[st.border]
        cv = st.cval_literal(dt) if st.border == "constant" else f"(({storage_c_type(dt)})0)"
        fast_nb = Accessor(dt, 2, ("__local const {stype}* {name}", "const int {name}_p"),
                           "(({ctype}){name}[({i0}) * {name}_p + ({i1})])",
                           kind="neighbourhood")
        win_nb = Accessor(dt, 2, ("__private const {stype}* {name}", "const int {name}_p"),
                          "(({ctype}){name}[({i0}) * {name}_p + ({i1})])",
                          kind="neighbourhood")
        edge_nb = Accessor(
            dt, 2, ("__local const {stype}* {name}", "const int {name}_r", "const int {name}_c",
                    "const int {name}_rows", "const int {name}_cols", "const int {name}_rb",
                    "const int {name}_cb"),
            f"(({{ctype}})SKP_FU_READ_EDGE({mode}, {{name}}, SKP_FU_RC({k}), {{name}}_r, "
            f"{{name}}_c, {{name}}_rows, {{name}}_cols, {{name}}_rb, {{name}}_cb, {cv}, "
            "({i0}), ({i1})))", kind="neighbourhood")

        def kinds(nb, around: set) -> list:
            out = [nb]
            for q, (kind, edt, weak, _arg) in enumerate(st.extras):
                if kind == "scalar":
                    out.append(Scalar(edt, weak=weak))
                elif kind == "matrix" and q + 1 in around:
                    ecv = st.cval_literal(edt) if st.border == "constant" else \
                        f"(({storage_c_type(edt)})0)"
                    out.append(Accessor(
                        edt, 2, ("__global const {stype}* {name}", "const int {name}_r",
                                 "const int {name}_c", "const int {name}_rows",
                                 "const int {name}_cols"),
                        f"(({{ctype}})SKP_TB_AROUND({mode}, {{name}}, {{name}}_r, {{name}}_c, "
                        f"{{name}}_rows, {{name}}_cols, {ecv}, ({{i0}}), ({{i1}})))",
                        kind="neighbourhood"))
                elif kind == "matrix":
                    out.append(Accessor(edt, 2, ("__global const {stype}* {name}",
                                                 "const int {name}_p"),
                                        "(({ctype}){name}[({i0}) * {name}_p + ({i1})])",
                                        kind="neighbourhood"))
                else:
                    out.append(global_array(edt, 1))
            return out

        probe = mu.specialise(kinds(fast_nb, set()), out_dtype=st.out_dtype,
                              c_name=f"skp_fu_fast{k}")
        matrices = [q + 1 for q, e in enumerate(st.extras) if e[0] == "matrix"]
        if any(probe.access_bounds.get(p) is None for p in [0] + matrices):
            raise Unsupported(f"stage {k} reads offsets that are known only at run time")
        if getattr(probe, "checked", False):
            raise Unsupported(f"stage {k} checks its reads at run time")
        (lo_r, hi_r), (lo_c, hi_c) = probe.access_bounds.get(0)
        if -lo_r > north or hi_r > south or -lo_c > west or hi_c > east:
            raise Unsupported(f"stage {k} reads beyond its shape")
        around = {p for p in matrices if probe.access_bounds.get(p) != ((0, 0), (0, 0))}
        fast = mu.specialise(kinds(fast_nb, around), out_dtype=st.out_dtype,
                             c_name=f"skp_fu_fast{k}")
        edge = mu.specialise(kinds(edge_nb, around), out_dtype=st.out_dtype,
                             c_name=f"skp_fu_edge{k}")
        win = mu.specialise(kinds(win_nb, around), out_dtype=st.out_dtype,
                            c_name=f"skp_fu_win{k}")
        if fast.out_dtype != np.dtype(st.result_dtype):
            raise Unsupported(f"stage {k} makes {fast.out_dtype}, staged {st.result_dtype}")
        args = []
        for q, (kind, edt, _weak, arg_dt) in enumerate(st.extras):
            name = f"s{k}e{q}"
            if kind == "scalar":
                sdt = fast.scalar_dtypes.get(q + 1, edt)
                if np.dtype(sdt) != np.dtype(arg_dt):
                    raise Unsupported(f"stage {k} reads extra {q + 1} as {sdt}, staged "
                                      f"{arg_dt}")
                decls.append(f"const {storage_c_type(sdt)} {name}")
                args.append(f"(({c_type(sdt)}){name})")
            elif kind == "matrix":
                decls.append(f"__global const {storage_c_type(edt)}* restrict {name}")
                args.append(f"{name}, skp_gr, skp_gc, rows, cols" if q + 1 in around
                            else f"{name} + skp_idx, cols")
            else:
                decls.append(f"__global const {storage_c_type(edt)}* restrict {name}")
                decls.append(f"const long {name}_n")
                args.append(f"{name}, {name}_n")
        return fast, edge, win, args

    # -- a launch's shape --------------------------------------------------------------------
    @staticmethod
    def tile(point: Mapping) -> tuple[int, int]:
        return (int(point["fu_wr"]) * int(point["fu_cr"]),
                int(point["fu_wc"]) * int(point["fu_cc"]))

    def region(self, level: int, point: Mapping) -> tuple[int, int]:
        th, tw = self.tile(point)
        hn, hs, gw, ge = self.halo[level]
        return th + hn + hs, tw + gw + ge

    def local_bytes(self, point: Mapping) -> int:
        total = 0
        for k in range(self.n_stages):
            rr, rc = self.region(k, point)
            total += rr * rc * storage_dtype(self.levels[k]).itemsize
        return total

    def redundancy(self, point: Mapping) -> float:
        """Cells the stages compute per output cell, over all stages (K: no recomputation)."""
        th, tw = self.tile(point)
        return sum(self.region(k, point)[0] * self.region(k, point)[1]
                   for k in range(1, self.n_stages + 1)) / (th * tw)

    def legal(self, point: Mapping, dev) -> bool:
        return self.broken(point, dev) is None

    def broken(self, point: Mapping, dev) -> tuple[int, str] | None:
        """The first limit a fused tile at ``point`` breaks on ``dev``: (its position among
        the limits, checked in order, and the words naming it), or None where it is legal."""
        wc, wr = int(point["fu_wc"]), int(point["fu_wr"])
        items = dev.max_work_item_sizes
        hn, hs, gw, ge = self.halo[0]
        return first_broken((
            (lambda: min(wc, wr, int(point["fu_cr"]), int(point["fu_cc"])) < 1,
             lambda: "fu_wc, fu_wr, fu_cr and fu_cc must be at least 1"),
            (lambda: int(point.get("fu_flat", 1)) not in FLAT_VALUES,
             lambda: f"fu_flat is one of {list(FLAT_VALUES)}"),
            (lambda: items and (wc > items[0] or (len(items) > 1 and wr > items[1])),
             lambda: f"fu_wc={wc} x fu_wr={wr} is over the device's work-item sizes {items}"),
            (lambda: wc * wr > dev.max_work_group_size,
             lambda: f"fu_wc * fu_wr = {wc * wr} work-items is over the device's work-group "
                     f"maximum {dev.max_work_group_size}"),
            # a redirected read's named cell is in the region
            (lambda: self.tile(point)[0] < hn + hs or self.tile(point)[1] < gw + ge,
             lambda: f"the tile of {self.tile(point)[0]} x {self.tile(point)[1]} cells is "
                     f"smaller than the summed halo ({hn} + {hs} rows, {gw} + {ge} columns)"),
            (lambda: self.local_bytes(point) > dev.local_mem_size - LOCAL_RESERVE,
             lambda: f"the tile's levels need {self.local_bytes(point)} bytes of local memory, "
                     f"over the device's {dev.local_mem_size} less {LOCAL_RESERVE}"),
        ))

    def macros(self, point: Mapping) -> tuple[str, ...]:
        return (f"-DSKP_FU_WC={int(point['fu_wc'])}", f"-DSKP_FU_WR={int(point['fu_wr'])}",
                f"-DSKP_FU_CR={int(point['fu_cr'])}", f"-DSKP_FU_CC={int(point['fu_cc'])}",
                f"-DSKP_FU_FLAT={int(point.get('fu_flat', 1))}")

    def best_tile(self, dev) -> dict | None:
        """The fused point a GPU starts from: of the tiles of 256 work-items whose levels take
        at most a third of the local memory (so that several work-groups share a compute
        unit), the one that recomputes least; then the most work-items, then the longest runs
        down a column: cells are dealt out in runs (``fu_flat`` 2), and a run reads its
        window into registers once and shares it and the sums of its rows between its cells
        (a 5x5 window: 15 reads per cell in runs of 2, 10 in runs of 4). None where no tile
        is legal."""
        best, best_cost = None, None
        budget = (dev.local_mem_size - LOCAL_RESERVE) // 3
        for wc in WC_VALUES:
            for wr in WR_VALUES:
                if wc * wr > 256:
                    continue
                for cr in CR_VALUES:
                    for cc in CC_VALUES:
                        p = {"fuse": 1, "fu_wc": wc, "fu_wr": wr, "fu_cr": cr, "fu_cc": cc,
                             "fu_flat": 2}
                        if not self.legal(p, dev) or self.local_bytes(p) > budget:
                            continue
                        cost = (round(self.redundancy(p), 2), -wc * wr, -cr, cc)
                        if best_cost is None or cost < best_cost:
                            best, best_cost = p, cost
        return best

    def default(self, dev) -> dict:
        """The first guess before the tuner knows better: staged, everywhere. Measured (one
        run, profiling events): on an H200 at 4096^2 the fused Canny (5x5 Gaussian >> Sobel >>
        NMS) ran at 0.72x staged at :meth:`best_tile` and 0.75x at the best tile tried, the
        separable Canny at 0.88x (best tile 1.13x); through PoCL at 512^2 the fused Canny
        measured 0.4-1.3x staged and a Gaussian >> Laplacian 0.5-0.8x. Fusion pays only where
        the tuner has measured it (``fuse`` is in the space: online/exhaustive modes and
        ``skelpy tune`` try it); ``params={"fuse": 1}`` forces it."""
        return dict(STAGED)

    def space(self, rt: _rt.Runtime) -> ParamSpace:
        """Fused (with its tile) or staged: the tuner's space on ``rt``'s device."""
        sp = self._spaces.get(rt)
        if sp is not None:
            return sp
        dev = rt.device

        def legal(p) -> bool:
            if int(p["fuse"]) == 0:
                return all(p[k] == v for k, v in STAGED.items())
            return int(p["fuse"]) == 1 and self.legal(p, dev)

        sp = ParamSpace([
            Param("fuse", (0, 1), numeric=False, doc="1: one fused kernel, 0: staged"),
            Param("fu_wc", WC_VALUES, doc="work-group columns of the fused tile"),
            Param("fu_wr", WR_VALUES, doc="work-group rows of the fused tile"),
            Param("fu_cr", CR_VALUES, doc="tile rows per work-item"),
            Param("fu_cc", CC_VALUES, doc="tile columns per work-item"),
            Param("fu_flat", FLAT_VALUES, numeric=False,
                  doc="how a level's cells are dealt out: 0 by rows and columns, 1 one by one "
                      "row by row, 2 in runs of fu_cr rows down a column"),
        ], self.default(dev), legal, extra_values_ok=("fu_wc", "fu_wr", "fu_cr", "fu_cc"))
        self._spaces[rt] = sp
        return sp

    # -- running -----------------------------------------------------------------------------
    def kernel(self, rt: _rt.Runtime, point: Mapping):
        opts = self.macros(point)
        kernels = self._kernels.setdefault(rt, {})
        k = kernels.get(opts)
        if k is None:
            prg = rt.build(self.source.text, opts)
            k = kernels[opts] = rt.kernel(prg, self.kernel_name)
        return k

    def geometry(self, point: Mapping, rows: int, cols: int):
        th, tw = self.tile(point)
        wc, wr = int(point["fu_wc"]), int(point["fu_wr"])
        return (-(-cols // tw) * wc, -(-rows // th) * wr), (wc, wr)

    def launch(self, rt: _rt.Runtime, point: Mapping, dst, src, rows: int, cols: int,
               extra_args: Sequence):
        """One fused pass, buffer src -> buffer dst; returns the event."""
        gsize, lsize = self.geometry(point, rows, cols)
        args = [dst, src, np.int32(rows), np.int32(cols), *extra_args]
        return rt.launch(self.kernel(rt, point), gsize, lsize, args, params=dict(point),
                         skeleton="stencil")
