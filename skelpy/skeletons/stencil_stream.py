"""Streaming passes of stencil stages: several stencil applications in one kernel.

A single stencil step reads and writes every cell once, so it can at best reach the copy
bandwidth. A pass of ``kernels/stencil_stream.cl`` runs T stages while the intermediate rows
stay on the chip (registers and local memory), so global memory sees each cell once per pass
(see the .cl file for the layout, after AN5D's register streaming). ``Stencil(...)(m,
iterations=N)`` uses it in passes of t time steps (:mod:`.stencil_temporal`). The plan also
takes a cycle of different stages, which may change the dtype from stage to stage (float32 ->
int32 -> uint8): a ``StencilSequence`` streamed (``fuse=2``, :mod:`.stencil_sequence`) runs as
one pass. Levels of different dtypes are held as 32-bit (64-bit where a level has 8 bytes)
words with each level's bits, a stage's result turned into its dtype as a store turns it and
read back as that dtype; the rings are then words and a work-item owns one column.

The results equal the stages run one by one, bit for bit: the same muscle called on the same
values, each intermediate value rounded to the storage type as a store rounds it, and each
stage's border rule applied to the level it reads.

:class:`StreamPlan` is built from a cycle of :class:`Stage` s (muscle, reach, border, constant)
over one dtype and one list of extra arguments, and holds the kernel source;
:meth:`StreamPlan.geometry` gives a pass's sizes and :meth:`StreamPlan.run` does a number of
stage applications in passes, the last pass taking the remainder. What a pass's tile holds, its
limits and the tuner's parameters of a pass are :mod:`.stencil_stream_tile`'s.

Launch parameters: ``t`` (stages per pass), ``tb_wc`` (work-items per stream along columns),
``tb_vec`` (columns per work-item, loaded and stored as one vector), ``tb_rows`` (rows per
stream), ``tb_wr`` (streams per work-group), ``tb_ring`` (1: windows read from the local-memory
ring; 0: a work-item's own columns kept in registers), ``tb_unroll`` (the row walk unrolled by
the rings' period; needed by ``tb_ring=0``) and ``tb_pre`` (input rows loaded ahead).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from ..dtypes import c_type, check_dtype, storage_c_type, storage_dtype
from ..muscle import Accessor, Muscle, Scalar, TypedMuscle, global_array
from .kernel_source import SourceBuilder
from .stencil_stream_tile import StreamTile

__all__ = ["Extra", "GPU_MIN_ITEMS_PER_CU", "Geometry", "Stage", "StreamPlan", "Unsupported",
           "MODES"]

MODES = {"constant": 0, "nearest": 1, "wrap": 2, "reflect": 3, "mirror": 4}
REDIRECT = ("nearest", "reflect", "mirror")
GPU_MIN_ITEMS_PER_CU = 16 * 128   # a GPU pass's streams are shortened to reach this (geometry)
GPU_WAVE_ITEMS_PER_CU = 512       # a GPU pass's tail: this many work-items per compute unit
TAIL_SPLIT = 4                    # a tail stream outputs 1/TAIL_SPLIT of a stream's rows
FORCE_TAIL = False                # tests: the GPU's tail geometry on any device


_WINDOW = ("-DSKP_ROW_WINDOW=1",)


class Unsupported(Exception):
    """These stages cannot run as a streaming pass (the caller runs them one by one)."""


@dataclass(frozen=True)
class Extra:
    """An extra argument as the kernel sees it: ``"scalar"`` (``weak`` for Python numbers),
    ``"matrix"`` (the input's shape, read around the cell) or ``"vector"`` (read by index)."""

    kind: str
    dtype: np.dtype
    weak: bool = False


@dataclass(frozen=True)
class Stage:
    """One stencil of a pass: its muscle, reach (north, south, east, west: the stencil's
    shape), border mode, and ``cval_literal(dtype)``, the border constant as a C constant."""

    muscle: Muscle
    reach: tuple[int, int, int, int]
    border: str
    cval_literal: Callable[[np.dtype], str]
    out_dtype: np.dtype | None = None     # the dtype it was given (None: the plan's)


@dataclass(frozen=True)
class Geometry:
    """One pass's launch: sizes, the local memory it needs and the tile it computes."""

    global_size: tuple[int, int]
    local_size: tuple[int, int]
    local_bytes: int
    wout: int                 # output columns per tile
    chunk: int                # output rows per stream
    split: int = 1 << 30      # streams from this one on (the tail) output ``schunk`` rows
    schunk: int = 0


@dataclass(frozen=True)
class _StageInfo:
    """What the kernel needs of one stage: reach, rows held, overlap, rows of used cells."""

    reach: tuple[int, int, int, int]
    mode: str
    hold: tuple[int, int]
    overlap: tuple[int, int]
    rowmasks: tuple[int, ...]
    clamp: bool

    @property
    def ring(self) -> int:          # ring rows of the level this stage reads
        return self.hold[0] + self.hold[1] + 2

    @property
    def held(self) -> int:          # rows the stage reaches back
        return self.hold[0] + self.hold[1] + 1


def _read_nb(north: int, south: int, east: int, west: int, clamp: bool,
             conv: str = "") -> str:
    """The read template of a window in private memory (clamped offsets when unknown);
    ``conv``: the macro turning a word into the level's value (levels of mixed dtypes)."""
    if clamp:
        dr = f"clamp((int)({{i0}}), -{north}, {south})"
        dc = f"clamp((int)({{i1}}), -{west}, {east})"
    else:
        dr, dc = "((int)({i0}))", "((int)({i1}))"
    return f"(({{ctype}}){conv}({{name}}[{dr} * {{name}}_p + {dc}]))"


def _lookup(values: Sequence, arg: str = "k") -> str:
    """A C expression of ``arg`` giving ``values[arg]`` (a constant once ``arg`` is)."""
    expr = str(values[0])
    for k in range(len(values) - 1, 0, -1):
        if values[k] != values[0]:
            expr = f"({arg}) == {k} ? {values[k]} : {expr}"
    return f"({expr})"


def _cumulative(values: Sequence[int]) -> str:
    """A C expression of ``l``: the sum of ``values[q % K]`` over the first ``l`` levels."""
    k = len(values)
    prefix = [sum(values[:q]) for q in range(k)]
    return f"(((l) / {k}) * {sum(values)} + {_lookup(prefix, f'(l) % {k}')})"


class StreamPlan(StreamTile):
    """The streaming kernel of a cycle of stages from ``dtype`` and one list of extras.

    Stage s of a pass applies ``stages[s % K]``; each stage takes the first extras its muscle
    has parameters for and makes its ``out_dtype`` (the plan's ``out_dtype`` where None, else
    its muscle's); ``levels`` are the dtypes of a cycle (K + 1: the input, each stage's
    result). A pass runs the cycle more than once only where it ends in the dtype it starts
    in (``cycles``). ``polish(typed muscle)`` may give a muscle's source rewritten (e.g. with
    unroll hints). Raises :class:`Unsupported` when the stages cannot stream: a single stage
    changes the dtype, a stage reaches further than ``max_reach``, a border mode is unknown,
    wrap is mixed with other modes, or the stages read an extra scalar as different dtypes."""

    kernel_name = "skelpy_stencil_stream"
    # PoCL runs the walk's round as a loop (SKP_TB_KEEP_LOOP): unrolled as on GPUs, a PoCL
    # build took 3-15x longer and a pass ran 2-4x slower (heat, Gaussian 3x3, Game of Life at
    # 512^2, t = 2..8).  Tests turn it off to run the GPUs' unrolled walk on the CPU.
    pocl_keeps_loop: bool = True

    def __init__(self, stages: Sequence[Stage], dtype, extras: Sequence[Extra], *,
                 big: bool = False, out_dtype=None,
                 polish: Callable[[TypedMuscle], str] | None = None, max_reach: int = 8):
        stages = list(stages)
        if not stages:
            raise Unsupported("no stages")
        modes = [st.border for st in stages]
        for m in modes:
            if m not in MODES:
                raise Unsupported(f"border mode {m!r}")
        if "wrap" in modes and set(modes) != {"wrap"}:
            raise Unsupported("wrap mixed with other border modes")
        dtype = check_dtype(dtype)
        self.dtype = dtype
        self.extras = tuple(extras)
        self.n_stages = len(stages)
        for st in stages:
            north, south, east, west = (int(v) for v in st.reach)
            if min(north, south, east, west) < 0:
                raise Unsupported(f"reach {st.reach}")
            if max(north, south, east, west) > max_reach:
                raise Unsupported(f"reach {st.reach} beyond {max_reach}")
        # the dtype of every level of a cycle: level k is stage k's input, level K the output
        levels = [dtype]
        for k, st in enumerate(stages):
            given = st.out_dtype if st.out_dtype is not None else out_dtype
            levels.append(self._specialise(k, st, levels[k], given, "")[0].out_dtype)
        if self.n_stages == 1 and levels[1] != dtype:
            raise Unsupported(f"the muscle turns {dtype} into {levels[1]}")
        self.levels = tuple(levels)
        #: whether a pass may run the cycle more than once (it ends in the dtype it starts in)
        self.cycles = levels[-1] == levels[0]
        self.out_dtype = levels[-1]
        stores = [storage_c_type(dt) for dt in levels]
        self.mixed = len(set(stores)) > 1
        if self.mixed:
            wide = any(storage_dtype(dt).itemsize > 4 for dt in levels)
            word = "ulong" if wide else "uint"
            self.itemsize = 8 if wide else 4
        else:
            word = storage_c_type(dtype)
            self.itemsize = storage_dtype(dtype).itemsize

        typed, infos, calls = [], [], []
        cvals: dict[str, list[str]] = {}
        self.scalar_dtypes: dict[int, np.dtype] = {}
        for k, st in enumerate(stages):
            north, south, east, west = (int(v) for v in st.reach)
            given = st.out_dtype if st.out_dtype is not None else out_dtype
            tm, around, takes, clamp = self._specialise(
                k, st, levels[k], given, f"SKP_TB_OFW_{stores[k]}" if self.mixed else "")
            typed.append(tm)
            for p, dt in tm.scalar_dtypes.items():
                if self.scalar_dtypes.setdefault(p, dt) != dt:
                    raise Unsupported(f"the stages read extra {p} as different dtypes")
            mr, wc = north + south + 1, west + east + 1
            acc = None if clamp else tm.accesses.get(0)
            cells = ([(i, j) for i in range(mr) for j in range(wc)] if acc is None else
                     sorted({(int(a[0]) + north, int(a[1]) + west) for a in acc}))
            masks = [0] * mr
            for i, j in cells:
                masks[i] |= 1 << j
            if st.border in REDIRECT:     # symmetric: a redirected row or column is held
                hold = (max(north, south),) * 2
                overlap = (max(east, west),) * 2
            else:
                hold, overlap = (north, south), (west, east)
            infos.append(_StageInfo((north, south, east, west), st.border, hold, overlap,
                                    tuple(masks), clamp))
            args = []
            for q, e in enumerate(self.extras[:takes]):
                name = f"e{q}"
                if e.kind == "scalar":
                    dt = self.scalar_dtypes.get(q + 1, e.dtype)
                    args.append(f"(({c_type(dt)}){name})")
                elif e.kind == "matrix":
                    args.append(f"{name}, skp_gr, skp_gc, rows, cols" if q + 1 in around
                                else f"{name} + skp_idx, cols")
                    cvals.setdefault(storage_c_type(e.dtype), [])
                else:
                    args.append(f"{name}, {name}_n")
            call = f"{tm.c_name}(" + ", ".join(
                [f"skp_win + {north} * SKP_TB_WP + {west} + skp_m", "SKP_TB_WP", *args]) + ")"
            calls.append(f"SKP_TB_TOW_{stores[k + 1]}({call})" if self.mixed else call)
        self.infos = tuple(infos)
        self.typed = tuple(typed)
        self.uses_fp64 = bool(any(tm.uses_fp64 for tm in typed)
                              or any(dt == np.float64 for dt in levels) or any(
            e.dtype == np.float64 for e in self.extras if e.kind != "scalar"))

        decls = []
        for q, e in enumerate(self.extras):
            name = f"e{q}"
            if e.kind == "scalar":
                dt = self.scalar_dtypes.get(q + 1, e.dtype)
                decls.append(f"const {storage_c_type(dt)} {name}")
            else:
                decls.append(f"__global const {storage_c_type(e.dtype)}* restrict {name}")
                if e.kind == "vector":
                    decls.append(f"const long {name}_n")
        if self.mixed:      # each stage's constant as its level's word
            cv_own = [f"SKP_TB_TOW_{stores[k]}({st.cval_literal(levels[k])})"
                      if st.border == "constant" else "((SKP_ST)0)"
                      for k, st in enumerate(stages)]
        else:
            cv_own = [st.cval_literal(dtype) if st.border == "constant" else f"(({word})0)"
                      for st in stages]
        calls_expr = calls[0]
        for k in range(len(calls) - 1, 0, -1):
            calls_expr = f"(k) == {k} ? {calls[k]} : {calls_expr}"
        rowmask = _lookup([_lookup([f"0x{b:x}UL" for b in info.rowmasks], "r")
                           for info in infos])
        rings = [info.ring for info in infos]
        self.period = math.lcm(*rings)
        header = [f"#define SKP_ST {word}"]
        if self.mixed:
            header += ["#define SKP_TB_MIXED 1", f"#define SKP_IN_ST {stores[0]}",
                       f"#define SKP_OUT_ST {stores[-1]}",
                       f"#define SKP_TB_IN(x) SKP_TB_TOW_{stores[0]}(x)",
                       f"#define SKP_TB_OUT(w) SKP_TB_OFW_{stores[-1]}(w)"]
        header += [
            f"#define SKP_IDX_T {'long' if big else 'int'}",
            f"#define SKP_TB_K {len(stages)}",
            f"#define SKP_TB_N(k) {_lookup([i.reach[0] for i in infos])}",
            f"#define SKP_TB_S(k) {_lookup([i.reach[1] for i in infos])}",
            f"#define SKP_TB_E(k) {_lookup([i.reach[2] for i in infos])}",
            f"#define SKP_TB_W(k) {_lookup([i.reach[3] for i in infos])}",
            f"#define SKP_TB_HN(k) {_lookup([i.hold[0] for i in infos])}",
            f"#define SKP_TB_HS(k) {_lookup([i.hold[1] for i in infos])}",
            f"#define SKP_TB_GW(k) {_lookup([i.overlap[0] for i in infos])}",
            f"#define SKP_TB_GE(k) {_lookup([i.overlap[1] for i in infos])}",
            f"#define SKP_TB_MODE(k) {_lookup([MODES[i.mode] for i in infos])}",
            f"#define SKP_TB_CVAL(k) {_lookup(cv_own)}",
            f"#define SKP_TB_ROWMASK(k, r) {rowmask}",
            f"#define SKP_TB_CALL(k) ({calls_expr})",
            "#define SKP_TB_EXTRA_DECL " + "".join(", " + x for x in decls),
            f"#define SKP_TB_OFF(l) {_cumulative([i.hold[1] + 1 for i in infos])}",
            f"#define SKP_TB_PBASE(l) {_cumulative(rings)}",
            f"#define SKP_TB_HNSUM(l) {_cumulative([i.hold[0] for i in infos])}",
            f"#define SKP_TB_GWSUM(l) {_cumulative([i.overlap[0] for i in infos])}",
            f"#define SKP_TB_GESUM(l) {_cumulative([i.overlap[1] for i in infos])}",
            f"#define SKP_TB_MRMAX {max(i.reach[0] + i.reach[1] + 1 for i in infos)}",
            f"#define SKP_TB_WMAX {max(i.reach[3] for i in infos)}",
            f"#define SKP_TB_EMAX {max(i.reach[2] for i in infos)}",
            f"#define SKP_TB_PMAX {max(rings)}",
            f"#define SKP_TB_PERIOD {self.period}",
            f"#define SKP_TB_WRAPALL {int(set(modes) == {'wrap'})}",
        ]
        for k, st in enumerate(stages):       # each stage's constant as each extra's type
            for st_name in cvals:
                dt = next(e.dtype for e in self.extras if e.kind == "matrix"
                          and storage_c_type(e.dtype) == st_name)
                lit = st.cval_literal(dt) if st.border == "constant" else f"(({st_name})0)"
                header.append(f"#define SKP_TB_CV{k}_{st_name} {lit}")
        muscle_src = "\n".join(tm.source if polish is None else polish(tm) for tm in typed)
        built = (SourceBuilder("stencil_stream")
                 .header(header)
                 .file("stencil_border.cl")
                 .file("stencil_stream_common.cl")
                 .part(muscle_src, muscles=typed)
                 .file("stencil_stream.cl")
                 .data(*levels, *(e.dtype for e in self.extras if e.kind != "scalar"))
                 .build((self.kernel_name,)))
        self.program = built
        self.source, self.kernel_key = built.text, built.key
        self.features = {k: float(v) for k, v in getattr(typed[0], "features", {}).items()}
        north, south, east, west = infos[0].reach
        self.features.update({
            "north": float(north), "south": float(south), "east": float(east),
            "west": float(west), "border": float(MODES[modes[0]]),
            "n_extras": float(len(self.extras)),
            "in_dtype_size": float(storage_dtype(levels[0]).itemsize),
            "out_dtype_size": float(storage_dtype(levels[-1]).itemsize), "temporal": 1.0,
            "stages": float(len(stages))})
        # per runtime (weakly: a runtime that goes must not be mistaken for a new one at the
        # same address, which an id() key would)
        self._kernels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _specialise(self, k: int, st: Stage, dtype, out_dtype, conv: str):
        """Stage k's muscle on a private window of level ``dtype`` (``conv``: the macro reading
        a word as that level's value, for mixed levels); extra matrices it reads off the cell
        are read with the stage's border rule. Returns (typed muscle, extras read around the
        cell, extras it takes, whether offsets are clamped)."""
        mu = st.muscle
        north, south, east, west = (int(v) for v in st.reach)
        takes = max(mu.n_params - 1, 0)
        if takes > len(self.extras):
            raise Unsupported(f"the muscle takes {takes} extras, {len(self.extras)} given")
        c_name = f"skp_tb_muscle{k}"

        def kinds_for(clamp: bool, around: set) -> list:
            ptr = "__private const SKP_ST* {name}" if conv else \
                "__private const {stype}* {name}"
            kinds: list = [Accessor(dtype, 2, (ptr, "const int {name}_p"),
                                    _read_nb(north, south, east, west, clamp, conv),
                                    kind="neighbourhood")]
            for q, e in enumerate(self.extras[:takes]):
                if e.kind == "scalar":
                    kinds.append(Scalar(e.dtype, weak=e.weak))
                elif e.kind == "matrix" and q + 1 in around:
                    dr = f"clamp((int)({{i0}}), -{north}, {south})" if clamp else "({i0})"
                    dc = f"clamp((int)({{i1}}), -{west}, {east})" if clamp else "({i1})"
                    kinds.append(Accessor(
                        e.dtype, 2,
                        ("__global const {stype}* {name}", "const int {name}_r",
                         "const int {name}_c", "const int {name}_rows", "const int {name}_cols"),
                        f"(({{ctype}})SKP_TB_AROUND({MODES[st.border]}, {{name}}, {{name}}_r, "
                        f"{{name}}_c, {{name}}_rows, {{name}}_cols, SKP_TB_CV{k}_{{stype}}, "
                        f"{dr}, {dc}))", kind="neighbourhood"))
                elif e.kind == "matrix":
                    kinds.append(Accessor(e.dtype, 2, ("__global const {stype}* {name}",
                                                       "const int {name}_p"),
                                          _read_nb(0, 0, 0, 0, False), kind="neighbourhood"))
                else:
                    kinds.append(global_array(e.dtype, 1))
            return kinds

        tm = mu.specialise(kinds_for(False, set()), out_dtype=out_dtype, c_name=c_name)
        matrices = [q + 1 for q, e in enumerate(self.extras[:takes]) if e.kind == "matrix"]
        clamp = any(tm.access_bounds.get(p) is None for p in [0] + matrices)
        around = {p for p in matrices if tm.access_bounds.get(p) != ((0, 0), (0, 0))}
        if clamp or around:
            tm = mu.specialise(kinds_for(clamp, around), out_dtype=out_dtype, c_name=c_name)
        return tm, around, takes, clamp

    @property
    def hold(self) -> tuple[int, int]:
        """Rows a stage holds above and below (the most over the stages): a pass of t stages
        reads at most t x these rows beyond the rows it outputs."""
        return (max(i.hold[0] for i in self.infos), max(i.hold[1] for i in self.infos))

    # -- a pass's shape ----------------------------------------------------------------------
    def small(self, rows: int, cols: int) -> bool:
        """Whether a redirect rule may fold more than once on this matrix, or a window reach
        both of its edges (then the kernel reads every window near an edge through the rule,
        SKP_TB_SMALL)."""
        redirect = any(i.mode in REDIRECT for i in self.infos)
        reach = max(max(i.reach) for i in self.infos)
        return redirect and min(rows, cols) <= 2 * reach + 1

    def macros(self, point: Mapping, small: bool = False,
               keep_loop: bool = False) -> tuple[str, ...]:
        """The build options of a pass at ``point``; ``keep_loop``: PoCL's (see kernel)."""
        return (f"-DSKP_TB_SMALL={int(small)}", f"-DSKP_TB_KEEP_LOOP={int(keep_loop)}",
                f"-DSKP_TB_T={int(point['t'])}", f"-DSKP_TB_V={int(point['tb_vec'])}",
                f"-DSKP_TB_WC={int(point['tb_wc'])}", f"-DSKP_TB_WR={int(point['tb_wr'])}",
                f"-DSKP_TB_RING={int(point['tb_ring'])}",
                f"-DSKP_TB_UNROLL={int(point['tb_unroll'])}",
                f"-DSKP_TB_PRE={int(point['tb_pre'])}")

    def geometry(self, point: Mapping, rows: int, cols: int, dev=None) -> Geometry:
        """The pass's sizes over ``rows`` x ``cols``. On a GPU (``dev``) ``tb_rows`` is the
        most rows per stream: where the pass would have fewer than ``GPU_MIN_ITEMS_PER_CU``
        work-items per compute unit, streams are halved down to 32 rows (on an H200, heat
        4096^2 at t = 4 ran a pass in 146 us at 128 rows, 1024 work-groups of 128, and 130 us at
        64 or 32; half of it, 2048 x 4096, 105 us at 128 and 78 us at 32; 8192 x 16384 and
        16384^2 were best at 128)."""
        wc, wr = int(point["tb_wc"]), int(point["tb_wr"])
        wout = self.wout(point)
        chunk = max(1, min(int(point["tb_rows"]), rows))
        tiles = -(-cols // wout)
        if dev is not None and getattr(dev, "kind", "") == "gpu":
            want = GPU_MIN_ITEMS_PER_CU * max(int(dev.compute_units), 1)

            def items(c: int) -> int:
                groups = math.ceil(math.ceil(rows / c) / wr)
                return tiles * wc * groups * wr

            while chunk > 32 and items(chunk) < want:
                chunk = max(32, chunk // 2)
        streams = -(-rows // chunk)
        groups_r = -(-streams // wr)
        split, schunk = Geometry.split, Geometry.schunk          # no tail
        gpu = dev is not None and getattr(dev, "kind", "") == "gpu"
        tail = None
        if gpu:
            cus = max(int(getattr(dev, "compute_units", 1) or 1), 1)
            tail = self._tail(rows, chunk, wr, tiles, cus * GPU_WAVE_ITEMS_PER_CU // (wc * wr))
        elif FORCE_TAIL:                # tests: one row of work-groups, any length
            tail = self._tail(rows, chunk, wr, tiles, 1, min_short=1)
        if tail is not None:
            split, schunk, groups_r = tail
        return Geometry((tiles * wc, groups_r * wr), (wc, wr), self.local_bytes(point),
                        wout, chunk, split, schunk)

    @staticmethod
    def _tail(rows: int, chunk: int, wr: int, tiles: int, wave_groups: int,
              min_short: int = 16):
        """(split, schunk, rows of work-groups) of a pass whose last wave of work-groups
        holds streams of ``chunk / TAIL_SPLIT`` rows, or None. A GPU pass ends when its last
        streams do, its compute units idling meanwhile: on an H200 (heat, t = 4, 128 rows per
        stream) a pass over R x 16384 cells cost a fixed ~62 us beyond its cells' share at
        every R from 7424 to 16384, ~34 us at 64 rows per stream and ~128 us at 256 (the
        fixed cost follows a stream's length), while shorter streams everywhere cost more
        per cell (each walks its stages' extra rows). Short streams at the end only shorten
        the tail and keep the long streams' rate. The tail is the last rows of work-groups
        that ``wave_groups`` fill, taken only where they are at most a quarter of the pass.
        Measured on the H200 (100 steps, t = 4, 128 rows per stream, bit for bit equal to
        single steps): with the tail of 512 work-items per compute unit heat ran 1.7% faster
        at 16384^2, 3% at 8236 x 16384 (a part of 16384^2 on two devices), 6.7% at 8192^2
        and 7% at 4096^2, Game of Life (int32) 3% at 8192^2; a tail of 1024 (about one wave
        of this kernel) gained less at 4096^2-8192^2, one of 2048 nothing."""
        schunk = chunk // TAIL_SPLIT
        if schunk < min_short:
            return None
        groups_r = -(-rows // (chunk * wr))
        tail_r = -(-max(wave_groups, 1) // tiles)
        if 4 * tail_r > groups_r:
            return None
        split = (groups_r - tail_r) * wr
        rest = rows - split * chunk
        if rest <= 0:
            return None
        return split, schunk, groups_r - tail_r + -(-rest // (schunk * wr))

    # -- running -----------------------------------------------------------------------------
    def options(self, rt: _rt.Runtime, point: Mapping, small: bool = False) -> tuple[str, ...]:
        """The build options of a pass at ``point`` on ``rt``'s device."""
        return self.macros(point, small, self.pocl_keeps_loop
                           and "portable computing" in rt.device.platform.lower())

    def program_text(self, rt: _rt.Runtime, point: Mapping, rows: int, cols: int) -> str:
        """The program a pass at ``point`` over ``rows`` x ``cols`` builds on ``rt``'s device,
        its build options as ``#define`` lines in front (what ``source()`` shows)."""
        return self.program.program_text(self.options(rt, point, self.small(rows, cols)))

    def kernel(self, rt: _rt.Runtime, point: Mapping, small: bool = False,
               extra: tuple[str, ...] = ()):
        opts = self.options(rt, point, small) + extra
        kernels = self._kernels.setdefault(rt, {})
        k = kernels.get(opts)
        if k is None:
            prg = rt.build(self.source, opts)
            k = kernels[opts] = rt.kernel(prg, self.kernel_name)
        return k

    def launch_pass(self, rt: _rt.Runtime, point: Mapping, dst, src, rows: int, cols: int,
                    extra_args: Sequence, window: tuple[int, int, int] | None = None):
        """One pass of ``point['t']`` stages, buffer src -> buffer dst; returns the event.
        ``window`` (row_lo, row_hi, offset), on a device group: output rows [row_lo, row_hi)
        of the ``rows`` rows that start ``offset`` elements into the buffers."""
        kernel, geo, args = self.pass_launch(rt, point, dst, src, rows, cols, extra_args,
                                             window)
        return rt.launch(kernel, geo.global_size, geo.local_size, args, params=dict(point),
                         skeleton="stencil")

    def pass_launch(self, rt: _rt.Runtime, point: Mapping, dst, src, rows: int, cols: int,
                    extra_args: Sequence, window: tuple[int, int, int] | None = None):
        """What :meth:`launch_pass` enqueues: (kernel, geometry, argument list), for a caller
        that repeats a pass many times (a device group keeps them for the whole call)."""
        if window is None:
            geo = self.geometry(point, rows, cols, rt.device)
            extra, win = (), []
        else:
            lo, hi, offset = window
            geo = self.geometry(point, hi - lo, cols, rt.device)
            extra, win = _WINDOW, [np.int32(lo), np.int32(hi), np.int64(offset)]
        args = [dst, src, np.int32(rows), np.int32(cols), np.int32(geo.chunk),
                np.int32(geo.split), np.int32(geo.schunk), np.int32(geo.wout),
                cl.LocalMemory(max(geo.local_bytes, 1)), *win, *extra_args]
        return self.kernel(rt, point, self.small(rows, cols), extra), geo, args

    def run(self, rt: _rt.Runtime, point: Mapping, src, rows: int, cols: int,
            applications: int, extra_args: Sequence, buffers: Sequence) -> tuple:
        """``applications`` stage applications in passes of ``point['t']``, the last pass
        taking the remainder, ping-ponging between the two ``buffers`` (``src`` is never
        written). Returns (the buffer holding the result, its index in ``buffers``, events).
        With K stages, ``applications`` and t are multiples of K."""
        t = int(point["t"])
        if applications % self.n_stages or t % self.n_stages:
            raise ValueError(f"{self.n_stages} stages: {applications} applications and t={t} "
                             "must be multiples of it")
        if not self.cycles and (t != self.n_stages or applications > t):
            raise ValueError(f"stages from {self.levels[0]} to {self.levels[-1]}: one pass "
                             "of one cycle")
        events = []
        cur, k = src, -1
        left = applications
        while left > 0:
            steps = min(t, left)
            k = (k + 1) % 2
            events.append(self.launch_pass(rt, dict(point, t=steps), buffers[k], cur, rows,
                                           cols, extra_args))
            cur, left = buffers[k], left - steps
        return cur, k, events
