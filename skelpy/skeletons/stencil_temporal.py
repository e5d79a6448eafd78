"""Temporal blocking for iterated stencils: ``Stencil(...)(m, iterations=N)`` in passes of t steps.

A single stencil step reads and writes every cell once, so it can at best reach the copy
bandwidth. A pass of ``kernels/stencil_temporal.cl`` advances t steps while the intermediate
rows stay on the chip (registers and local memory), so global memory sees each cell once per t
steps (see the .cl file for the layout, after AN5D's register streaming). The results equal t
single steps bit for bit: the same muscle, called on the same values, each intermediate value
rounded to the storage type as a store rounds it, and each step's border rule applied to that
step's values.

:class:`TemporalPlan` is built from what a stencil call has (muscle, dtype, extras, reach,
border, constant) and holds the kernel source; :meth:`TemporalPlan.space` is the tuner space of
a pass (``t`` steps per pass and the tile: ``tb_wc`` work-items per stream along columns,
``tb_cc`` columns per work-item, ``tb_rows`` rows per stream, ``tb_wr`` streams per
work-group; ``tb_ring`` registers or a local-memory ring, ``tb_unroll`` the row walk unrolled
by the rotation period or not); :meth:`TemporalPlan.run` does all
the iterations in passes, the last pass taking the remainder.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from .. import tuner
from ..containers import Matrix, empty_like_shape
from ..dtypes import c_type, check_dtype, storage_c_type, storage_dtype
from ..errors import ParameterError
from ..muscle import Accessor, Muscle, Scalar, TypedMuscle, global_array
from ..tuner.space import Param, ParamSpace
from .kernel_source import SourceBuilder

__all__ = ["Extra", "Geometry", "TemporalPlan", "Unsupported", "T_VALUES", "NAMES", "iterate"]

T_VALUES = (1, 2, 3, 4, 6, 8)
WC_VALUES = (64, 128, 256, 512)
WR_VALUES = (1, 2)
ROWS_VALUES = (64, 128, 256, 512)
CC_VALUES = (1, 2)
RING_VALUES = (0, 1)
UNROLL_VALUES = (0, 1)
NAMES = ("t", "tb_wc", "tb_wr", "tb_rows", "tb_cc", "tb_ring", "tb_unroll")

_MAX_REACH = 4                # rows/columns a muscle may reach for this path
_MAX_REGS = 192               # most held values per work-item in the register variant
_LOCAL_RESERVE = 256          # bytes of local memory left for the implementation
_MODES = {"constant": 0, "nearest": 1, "wrap": 2, "reflect": 3, "mirror": 4}

_DIRECT_READ = "(({ctype})SKP_READ_DIRECT({name}, {name}_p, {i0}, {i1}))"


class Unsupported(Exception):
    """This stencil cannot take the temporal path (the caller runs single steps)."""


@dataclass(frozen=True)
class Extra:
    """An extra argument as the kernel sees it: ``"scalar"`` (``weak`` for Python numbers),
    ``"matrix"`` (the input's shape, read around the cell) or ``"vector"`` (read by index)."""

    kind: str
    dtype: np.dtype
    weak: bool = False


@dataclass(frozen=True)
class Geometry:
    """One pass's launch: sizes, the local memory it needs and the tile it computes."""

    global_size: tuple[int, int]
    local_size: tuple[int, int]
    local_bytes: int
    wout: int                 # output columns per tile
    chunk: int                # output rows per stream


def _nb_private(dtype) -> Accessor:
    """The input neighbourhood: a private window of the cell's neighbours (pitch ``_p``)."""
    return Accessor(dtype, 2, ("__private const {stype}* {name}", "const int {name}_p"),
                    _DIRECT_READ, kind="neighbourhood")


def _matrix_at_cell(dtype) -> Accessor:
    """An extra matrix read where it lies (pointer at the cell, pitch = the row length)."""
    return Accessor(dtype, 2, ("__global const {stype}* {name}", "const int {name}_p"),
                    _DIRECT_READ, kind="neighbourhood")


def _matrix_around(dtype) -> Accessor:
    """An extra matrix read around the cell with the border rule (any stage, any cell)."""
    return Accessor(
        dtype, 2,
        ("__global const {stype}* {name}", "const int {name}_r", "const int {name}_c",
         "const int {name}_rows", "const int {name}_cols"),
        "(({ctype})SKP_READ_EDGE({name}, {name}_r, {name}_c, {name}_rows, {name}_cols, "
        "SKP_CVAL_{stype}, {i0}, {i1}))", kind="neighbourhood")


def _bounds(tm, param: int):
    table = getattr(tm, "access_bounds", None) or {}
    try:
        return table.get(param) if isinstance(table, Mapping) else table[param]
    except (IndexError, KeyError, TypeError):
        return None


def _accesses(tm, param: int):
    table = getattr(tm, "accesses", None) or {}
    try:
        return table.get(param) if isinstance(table, Mapping) else table[param]
    except (IndexError, KeyError, TypeError):
        return None


class TemporalPlan:
    """The temporal kernel of one stencil call signature (dtype, extras) and its launches.

    ``reach`` is (north, south, east, west), the stencil's shape; reads at offsets that are
    not constants are clamped into it, as the single-step kernel does.
    ``cval_literal(dtype)`` writes the border constant as a C constant of that dtype.
    ``polish(typed muscle)`` may give its source rewritten (e.g. with unroll hints).
    Raises :class:`Unsupported` when the path does not apply: the muscle changes the dtype,
    reaches too far, or the border mode is unknown."""

    kernel_name = "skelpy_stencil_temporal"

    def __init__(self, muscle: Muscle | Sequence[Muscle], dtype, extras: Sequence[Extra],
                 reach: tuple[int, int, int, int], border: str,
                 cval_literal: Callable[[np.dtype], str], *, big: bool = False, out_dtype=None,
                 polish: Callable[[TypedMuscle], str] | None = None):
        if border not in _MODES:
            raise Unsupported(f"border mode {border!r}")
        dtype = check_dtype(dtype)
        north, south, east, west = (int(v) for v in reach)
        if max(north, south, east, west) > _MAX_REACH:
            raise Unsupported(f"reach {reach} beyond {_MAX_REACH}")
        muscles = [muscle] if isinstance(muscle, Muscle) else list(muscle)
        self.dtype = dtype
        self.extras = tuple(extras)
        self.border = border
        self.reach = (north, south, east, west)
        # Several muscles: a cycle of stages (a StencilSequence), stage s of a pass applying
        # muscle s mod K; each takes the first extras its parameters ask for.
        self.n_stages = len(muscles)
        typed, around, takes = [], set(), []
        for k, mu in enumerate(muscles):
            tm, ar = self._specialise(mu, dtype, out_dtype, f"skp_tb_muscle{k}")
            typed.append(tm)
            around |= ar
            takes.append(max(mu.n_params - 1, 0))
        self.typed = typed[0] if len(typed) == 1 else tuple(typed)
        matrices = [k + 1 for k, e in enumerate(self.extras) if e.kind == "matrix"]
        clamp = any(_bounds(tm, p) is None for tm, n in zip(typed, takes)
                    for p in [0] + [q for q in matrices if q <= n])
        self.scalar_dtypes: dict[int, np.dtype] = {}
        for tm in typed:
            for p, dt in tm.scalar_dtypes.items():
                if self.scalar_dtypes.setdefault(p, dt) != dt:
                    raise Unsupported(f"the stages read extra {p} as different dtypes")
        self.uses_fp64 = bool(any(tm.uses_fp64 for tm in typed) or dtype == np.float64 or any(
            e.dtype == np.float64 for e in self.extras if e.kind != "scalar"))

        redirect = border in ("nearest", "reflect", "mirror")
        if redirect:          # symmetric hold: a redirected row or column is always held
            hn = hs = max(north, south)
            gw = ge = max(east, west)
        else:
            hn, hs, gw, ge = north, south, west, east
        self.hold = (hn, hs)
        self.overlap = (gw, ge)
        mr, wc = north + south + 1, west + east + 1
        used = sorted({u for tm in typed for u in self._used(tm, clamp, north, west, mr, wc)})
        self.used = used
        ucols = sorted({j for _, j in used})
        self.n_ucols = len(ucols)

        decls, args = [], []
        cvals = {storage_c_type(dtype): dtype}
        for k, e in enumerate(self.extras):
            name = f"e{k}"
            if e.kind == "scalar":
                dt = self.scalar_dtypes.get(k + 1, e.dtype)
                decls.append(f"const {storage_c_type(dt)} {name}")
                args.append(f"(({c_type(dt)}){name})")
            elif e.kind == "matrix":
                decls.append(f"__global const {storage_c_type(e.dtype)}* restrict {name}")
                if k + 1 in around:
                    args.append(f"{name}, skp_gr, skp_gc, rows, cols")
                    cvals[storage_c_type(e.dtype)] = e.dtype
                else:
                    args.append(f"{name} + skp_idx, cols")
            else:
                decls.append(f"__global const {storage_c_type(e.dtype)}* restrict {name}")
                decls.append(f"const long {name}_n")
                args.append(f"{name}, {name}_n")
        win = f"skp_win + {north * wc + west}, {wc}"
        calls = [f"{tm.c_name}(" + ", ".join([win, *args[:n]]) + ")"
                 for tm, n in zip(typed, takes)]
        call = "".join(f"(s) % {len(calls)} == {k} ? {c} : " for k, c in enumerate(calls[1:], 1))
        call += calls[0]
        if clamp:
            dr = f"clamp((int)(i), -{north}, {south})"
            dc = f"clamp((int)(i), -{west}, {east})"
        else:
            dr = dc = "((int)(i))"
        rowbits = {}
        for i, j in used:
            rowbits[i] = rowbits.get(i, 0) | (1 << j)
        use = "".join(f"(i) == {i} ? 0x{b:x}UL : " for i, b in sorted(rowbits.items())) + "0UL"
        ubits = sum(1 << j for j in ucols)
        header = [
            "/* generated by skelpy.skeletons.stencil_temporal */",
            f"#define SKP_ST {storage_c_type(dtype)}",
            f"#define SKP_IN_ST {storage_c_type(dtype)}",
            f"#define SKP_OUT_ST {storage_c_type(dtype)}",
            f"#define SKP_N {north}",
            f"#define SKP_S {south}",
            f"#define SKP_E {east}",
            f"#define SKP_W {west}",
            f"#define SKP_MODE {_MODES[border]}",
            f"#define SKP_IDX_T {'long' if big else 'int'}",
            f"#define SKP_DR(i) {dr}",
            f"#define SKP_DC(i) {dc}",
            f"#define SKP_TB_HN {hn}",
            f"#define SKP_TB_HS {hs}",
            f"#define SKP_TB_GW {gw}",
            f"#define SKP_TB_GE {ge}",
            f"#define SKP_TB_USE(i, j) ((({use}) >> (j)) & 1UL)",
            f"#define SKP_TB_UCOL(j) ((0x{ubits:x}UL >> (j)) & 1UL)",
            "#define SKP_TB_EXTRA_DECL " + "".join(", " + x for x in decls),
            f"#define SKP_TB_CALL(s) ({call})",
        ]
        for st, dt in cvals.items():
            header.append(f"#define SKP_CVAL_{st} {cval_literal(dt)}")
        header.append(f"#define SKP_CVAL_IN SKP_CVAL_{storage_c_type(dtype)}")
        muscle_src = "\n".join(tm.source if polish is None else polish(tm) for tm in typed)
        built = (SourceBuilder("stencil_temporal")
                 .header(header[1:])
                 .file("stencil_common.cl")
                 .part(muscle_src, muscles=typed)
                 .file("stencil_temporal.cl")
                 .data(dtype, *(e.dtype for e in self.extras if e.kind != "scalar"))
                 .build((self.kernel_name,)))
        self.source, self.kernel_key = built.text, built.key
        self.itemsize = storage_dtype(dtype).itemsize
        self.features = {k: float(v) for k, v in getattr(typed[0], "features", {}).items()}
        self.features.update({
            "north": float(north), "south": float(south), "east": float(east),
            "west": float(west), "border": float(_MODES[border]),
            "n_extras": float(len(self.extras)), "in_dtype_size": float(self.itemsize),
            "out_dtype_size": float(self.itemsize), "temporal": 1.0})
        # per runtime (weakly: a runtime that goes must not be mistaken for a new one at the
        # same address, which an id() key would)
        self._kernels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._spaces: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _specialise(self, muscle: Muscle, dtype, out_dtype, c_name: str):
        """The muscle for the private window; extra matrices it reads off the cell are read
        with the border rule. Returns (typed muscle, parameters read around the cell)."""
        n = max(muscle.n_params - 1, 0)
        if n > len(self.extras):
            raise Unsupported(f"the muscle takes {n} extras, {len(self.extras)} given")
        kinds: list = [_nb_private(dtype)]
        for e in self.extras[:n]:
            if e.kind == "scalar":
                kinds.append(Scalar(e.dtype, weak=e.weak))
            elif e.kind == "matrix":
                kinds.append(_matrix_at_cell(e.dtype))
            else:
                kinds.append(global_array(e.dtype, 1))
        tm = muscle.specialise(kinds, out_dtype=out_dtype, c_name=c_name)
        around = {k + 1 for k, e in enumerate(self.extras[:n]) if e.kind == "matrix"
                  and _bounds(tm, k + 1) != ((0, 0), (0, 0))}
        if around:
            for p in around:
                kinds[p] = _matrix_around(self.extras[p - 1].dtype)
            tm = muscle.specialise(kinds, out_dtype=out_dtype, c_name=c_name)
        if tm.out_dtype != dtype:
            raise Unsupported(f"the muscle turns {dtype} into {tm.out_dtype}")
        return tm, around

    @staticmethod
    def _used(tm, clamp: bool, north: int, west: int, mr: int, wc: int) -> list:
        """Window cells (row, column) the muscle reads; all of them when unknown."""
        acc = None if clamp else _accesses(tm, 0)
        if acc is None:
            return [(i, j) for i in range(mr) for j in range(wc)]
        return sorted({(int(a[0]) + north, int(a[1]) + west) for a in acc})

    # -- launch parameters -------------------------------------------------------------------
    def macros(self, point: Mapping) -> tuple[str, ...]:
        return (f"-DSKP_TB_T={int(point['t'])}", f"-DSKP_TB_CC={int(point['tb_cc'])}",
                f"-DSKP_TB_RING={int(point['tb_ring'])}",
                f"-DSKP_TB_UNROLL={int(point['tb_unroll'])}")

    def registers(self, point: Mapping) -> int:
        """Values a work-item holds across steps (the register variant's cost)."""
        hn, hs = self.hold
        t, cc = int(point["t"]), int(point["tb_cc"])
        held = 0 if int(point["tb_ring"]) else t * cc * (hn + hs + 1) * self.n_ucols
        return held + (t + 2) * cc

    def wout(self, point: Mapping) -> int:
        gw, ge = self.overlap
        return int(point["tb_wc"]) * int(point["tb_cc"]) - int(point["t"]) * (gw + ge)

    def local_bytes(self, point: Mapping) -> int:
        hn, hs = self.hold
        t = int(point["t"])
        planes = t * (hn + hs + 2) if int(point["tb_ring"]) else 2 * t
        return planes * int(point["tb_wr"]) * int(point["tb_wc"]) * int(point["tb_cc"]) \
            * self.itemsize

    def geometry(self, point: Mapping, rows: int, cols: int) -> Geometry:
        wc, wr = int(point["tb_wc"]), int(point["tb_wr"])
        wout = self.wout(point)
        chunk = max(1, min(int(point["tb_rows"]), rows))
        tiles = -(-cols // wout)
        streams = -(-rows // chunk)
        groups_r = -(-streams // wr)
        return Geometry((tiles * wc, groups_r * wr), (wc, wr), self.local_bytes(point),
                        wout, chunk)

    def legal(self, point: Mapping, dev) -> bool:
        t, wc, wr = int(point["t"]), int(point["tb_wc"]), int(point["tb_wr"])
        if t < 1 or min(wc, wr, int(point["tb_rows"]), int(point["tb_cc"])) < 1:
            return False
        if point["tb_ring"] not in (0, 1) or point["tb_unroll"] not in (0, 1):
            return False
        if t % self.n_stages:             # a pass starts and ends with a whole cycle of stages
            return False
        items = dev.max_work_item_sizes
        if items and (wc > items[0] or (len(items) > 1 and wr > items[1])):
            return False
        if wc * wr > dev.max_work_group_size:
            return False
        # a tile must output at least a quarter of the columns it computes
        if 4 * self.wout(point) < wc * int(point["tb_cc"]):
            return False
        if not int(point["tb_ring"]) and self.registers(point) > _MAX_REGS:
            return False
        return self.local_bytes(point) <= dev.local_mem_size - _LOCAL_RESERVE

    def default_point(self, dev) -> dict:
        """The first guess before the tuner knows better. GPUs: 4 steps per pass, streams of
        128 work-items and 256 rows, registers (to be confirmed by benchmarks/bench_temporal.py
        on the H200). CPUs: single steps (t = 1): on PoCL the streaming kernel, a loop with a
        barrier per row, measured 20-40x slower than the single-step kernel."""
        if dev.kind == "gpu":
            return {"t": 4, "tb_wc": 128, "tb_wr": 1, "tb_rows": 256, "tb_cc": 1, "tb_ring": 0,
                    "tb_unroll": 1}
        return dict(_SINGLE)

    def space(self, rt: _rt.Runtime) -> ParamSpace:
        """The passes the tuner chooses among on this device (cached per runtime). ``t = 1``
        is one point, the single-step kernel (whose own launch parameters it tunes
        separately); on CPUs it is the only point tuned over, the others can be forced."""
        sp = self._spaces.get(rt)
        if sp is not None:
            return sp
        dev = rt.device
        gpu = dev.kind == "gpu"
        params = [
            Param("t", T_VALUES if gpu else (1,), doc="time steps per pass (1: single steps)"),
            Param("tb_wc", WC_VALUES, doc="work-items per stream along columns"),
            Param("tb_wr", WR_VALUES, doc="streams per work-group"),
            Param("tb_rows", ROWS_VALUES, doc="rows per stream (stream division)"),
            Param("tb_cc", CC_VALUES, doc="columns per work-item"),
            Param("tb_ring", RING_VALUES, numeric=False,
                  doc="1: intermediate rows in a local-memory ring, 0: in registers"),
            Param("tb_unroll", UNROLL_VALUES, numeric=False,
                  doc="1: the row walk unrolled by the rotation period"),
        ]

        def legal(p) -> bool:
            if int(p["t"]) == 1:          # single steps: the tile parameters do not apply
                return all(p[k] == v for k, v in _SINGLE.items())
            return self.legal(p, dev)

        sp = ParamSpace(params, self.default_point(dev), legal,
                        extra_values_ok=("t", "tb_wc", "tb_wr", "tb_rows"))
        if not sp.is_legal(sp.default):
            nearest = sp.nearest(sp.default)
            if nearest is not None:
                sp.default = nearest
        self._spaces[rt] = sp
        return sp

    # -- running -----------------------------------------------------------------------------
    def kernel(self, rt: _rt.Runtime, point: Mapping, extra: tuple[str, ...] = ()):
        opts = self.macros(point) + extra
        kernels = self._kernels.setdefault(rt, {})
        k = kernels.get(opts)
        if k is None:
            prg = rt.build(self.source, opts)
            k = kernels[opts] = rt.kernel(prg, self.kernel_name)
        return k

    def launch_pass(self, rt: _rt.Runtime, point: Mapping, dst, src, rows: int, cols: int,
                    extra_args: Sequence, window: tuple[int, int, int] | None = None):
        """One pass of ``point['t']`` steps, buffer src -> buffer dst; returns the event.
        ``window`` (row_lo, row_hi, offset), on a device group: output rows [row_lo, row_hi)
        of the ``rows`` rows that start ``offset`` elements into the buffers."""
        if window is None:
            geo = self.geometry(point, rows, cols)
            extra, win = (), []
        else:
            lo, hi, offset = window
            geo = self.geometry(point, hi - lo, cols)
            extra, win = _WINDOW, [np.int32(lo), np.int32(hi), np.int64(offset)]
        args = [dst, src, np.int32(rows), np.int32(cols), np.int32(geo.chunk),
                np.int32(geo.wout), cl.LocalMemory(max(geo.local_bytes, 1)), *win, *extra_args]
        return rt.launch(self.kernel(rt, point, extra), geo.global_size, geo.local_size, args,
                         params=dict(point), skeleton="stencil")

    def run(self, rt: _rt.Runtime, point: Mapping, src, rows: int, cols: int,
            iterations: int, extra_args: Sequence, buffers: Sequence) -> tuple:
        """All ``iterations`` in passes of ``point['t']`` steps, the last pass taking the
        remainder, ping-ponging between the two ``buffers`` (``src`` is never written).
        Returns (the buffer holding the result, its index in ``buffers``, events). With K
        stages, ``iterations`` counts stage applications and is a multiple of K."""
        t = int(point["t"])
        if iterations % self.n_stages or t % self.n_stages:
            raise ValueError(f"{self.n_stages} stages: iterations={iterations} and t={t} must be "
                             "multiples of it")
        events = []
        cur, k = src, -1
        left = iterations
        while left > 0:
            steps = min(t, left)
            k = (k + 1) % 2
            events.append(self.launch_pass(rt, dict(point, t=steps), buffers[k], cur, rows,
                                           cols, extra_args))
            cur, left = buffers[k], left - steps
        return cur, k, events


_WINDOW = ("-DSKP_ROW_WINDOW=1",)
_SINGLE = {"t": 1, "tb_wc": 64, "tb_wr": 1, "tb_rows": 256, "tb_cc": 1, "tb_ring": 0,
           "tb_unroll": 0}


def iterate(plan: TemporalPlan, src: Matrix, iterations: int, forced: Mapping | None,
            extra_args: Sequence, single_steps: Callable[[], tuple[Matrix, list]],
            origin: str, rt: _rt.Runtime | None = None) -> tuple[Matrix, _rt.Launch | None]:
    """``iterations`` steps of the stencil from ``src``, t per pass as the tuner (or
    ``forced``) decides; ``t = 1`` calls ``single_steps()``, which returns (result, its
    Launch records) from today's single-step path. Returns (result, the Launch describing
    the passes, or None when single steps ran). ``rt``: the runtime the call runs on
    (default: the current one; in auto mode the one the cost model chose)."""
    rt = rt or _rt.current()
    rows, cols = src.shape
    note: dict = {}
    if forced and forced.get("t") == 1:       # single steps: the tile does not apply
        forced = {"t": 1}

    def run(point):
        if int(point["t"]) == 1:
            out, launches = single_steps()
            note["single"] = launches
            return out, [e for ln in launches for e in ln.events]
        note.pop("single", None)
        bufs = [empty_like_shape(src.shape, src.dtype, rt) for _ in range(2)]
        _buf, k, events = plan.run(rt, point, src.device_buffer(rt), rows, cols, iterations,
                                   extra_args, [b.device_buffer(rt) for b in bufs])
        geo = plan.geometry(point, rows, cols)
        note["sizes"] = (geo.global_size, geo.local_size)
        out = bufs[k]
        out.mark_device_written()
        return out, events

    req = tuner.TuningRequest(
        skeleton="stencil", kernel_key=plan.kernel_key, device=rt.device,
        space=plan.space(rt), features=plan.features,
        dataset={"n": float(rows * cols), "rows": float(rows), "cols": float(cols),
                 "dtype_size": float(plan.itemsize), "iterations": float(iterations)},
        forced=dict(forced) if forced else None, run=run, origin=origin)
    try:
        outcome = tuner.execute(req)
    except ParameterError as exc:
        raise ParameterError(f"{origin}: {exc}") from None
    if "single" in note:
        return outcome.result, None
    gsize, lsize = note["sizes"]
    launch = _rt.Launch("stencil", dict(outcome.params), gsize, lsize, list(outcome.events),
                        list(outcome.refused), outcome.source)
    launch.iterations = iterations
    return outcome.result, launch
