"""A stencil's kernel for one signature: :class:`StencilPlan`, its launch space and the
accessor templates through which the muscle reads its neighbourhoods.

Launch parameters: work-group rows x cols (``wg_r``, ``wg_c``), cells per work-item along rows
and columns (``cr``, ``cc``), ``local`` (stage tile + halo in local memory) and ``vec`` (2 or 4:
a block of ``cr`` rows by ``vec`` 4-byte words per work-item from a register window; for 1- and
2-byte elements a word holds 4 or 2 of them, see :func:`vector_columns`). The legal points
respect the device's work-group and local-memory limits and :data:`~.limits.MAX_CELLS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .. import runtime as _rt
from ..muscle.params import Accessor
from ..tuner import cpu_defaults
from ..tuner.space import Param, ParamSpace
from .limits import MAX_CELLS, Legality, Rule, at_least, one_of
from .plan import Plan
from .stencil_shape import Shape

WG_R_VALUES = (1, 2, 4, 8, 16, 32, 64)
WG_C_VALUES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
CR_VALUES = (1, 2, 4, 8)
CC_VALUES = (1, 2, 4)
VEC_VALUES = (1, 2, 4)
PACKED_VEC_VALUES = (1, 2, 4, 8)  # packed plans (muscle/packed.py) also take 8 words (32 bytes)
WINDOW_LIMIT = 96             # most elements of a vector path's register window (beyond it the
                              # unrolled muscle copies make compiles slow and registers spill)
LOCAL_RESERVE = 256           # bytes of local memory left for the implementation
VECTOR_WORD = 4               # bytes of one ``vec`` unit for elements narrower than it


def vector_columns(point: Mapping, itemsize: int) -> int:
    """Columns one work-item of the vector path computes (1 off it): ``vec`` 4-byte words.

    For 4- and 8-byte elements that is ``vec`` elements; 1- and 2-byte elements (uint8, int8,
    bool, int16, float16) pack 4 or 2 to a word, so ``vec=4`` is a 16-byte uchar16 or short8.
    A uchar2 per work-item leaves a GPU's loads 2 bytes wide and each cell's muscle alone with
    its bytes: Game of Life on uint8 ran at 34% of copy bandwidth on an H200 there, and
    NVIDIA's ptxas (sm_90, through clang's NVPTX back end) needs 30 instructions per cell at
    2 rows by a uchar2 against 15.5 at 2 rows by a uchar16 (each window byte unpacked once and
    shared by its neighbours' sums, two halo bytes per row instead of two per 2 columns), and
    15.5 at 4 rows by a uchar8."""
    vec = int(point.get("vec", 1))
    if vec <= 1:
        return 1
    return vec * max(1, VECTOR_WORD // max(int(itemsize), 1))

# -- accessor templates (see stencil_common.cl) ------------------------------------------------

_DIRECT_READ = "(({ctype})SKP_READ_DIRECT({name}, {name}_p, {i0}, {i1}))"
#: The offsets a neighbourhood may be read at: the stencil's shape (checked reads).
NB_BOUNDS = (("(-SKP_N)", "(SKP_S + 1)"), ("(-SKP_W)", "(SKP_E + 1)"))


def nb_input(dtype, edge: bool) -> Accessor:
    """The input neighbourhood: in local memory or global memory, chosen by SKP_LOCAL."""
    if not edge:
        return Accessor(dtype, 2, ("SKP_SPACE_NB const {stype}* {name}",
                                   "const int {name}_p"), _DIRECT_READ, kind="neighbourhood",
                        bounds=NB_BOUNDS)
    return Accessor(
        dtype, 2,
        ("SKP_SPACE_IN const {stype}* {name}", "const int {name}_p",
         "const int {name}_r", "const int {name}_c", "const int {name}_rows",
         "const int {name}_cols"),
        "(({ctype})SKP_READ_EDGE_IN({name}, {name}_p, {name}_r, {name}_c, {name}_rows, "
        "{name}_cols, {stype}, {i0}, {i1}))", kind="neighbourhood", bounds=NB_BOUNDS)


def nb_extra(dtype, edge: bool) -> Accessor:
    """An extra matrix of the input's shape, read around the same cell from global memory."""
    if not edge:
        return Accessor(dtype, 2, ("__global const {stype}* {name}",
                                   "const int {name}_p"), _DIRECT_READ, kind="neighbourhood",
                        bounds=NB_BOUNDS)
    return Accessor(
        dtype, 2,
        ("__global const {stype}* {name}", "const int {name}_r", "const int {name}_c",
         "const int {name}_rows", "const int {name}_cols"),
        "(({ctype})SKP_READ_EDGE({name}, {name}_r, {name}_c, {name}_rows, {name}_cols, "
        "{stype}, {i0}, {i1}))", kind="neighbourhood", bounds=NB_BOUNDS)


@dataclass(frozen=True)
class MatrixExtra:
    """An extra matrix of the input's shape (read as a neighbourhood or at the cell)."""

    dtype: np.dtype


@dataclass(frozen=True)
class VectorExtra:
    """An extra 1-D container, read by index (``w[k]``) like a Map extra."""

    dtype: np.dtype

# -- the plan ------------------------------------------------------------------------------------


@dataclass(eq=False)
class StencilPlan(Plan):
    """A stencil's kernel for one signature (input dtype, extras, output dtype, index width)."""

    shape: Shape                      # the reach the kernel stages and checks
    in_dtype: np.dtype
    tile_itemsize: int                # bytes of one staged input element
    packed: bool = False              # the vector path's interior is packed (muscle/packed.py)

    @property
    def model_known(self) -> bool:
        """Packed kernels are new to the tuner's model: their default comes first."""
        return not self.packed

    def default_for(self, rt: _rt.Runtime, dataset: Mapping[str, float]) -> dict | None:
        """A packed plan's default with the widest vector that divides the rows (whole vectors
        are read as such; other rows take the slower edge path in every group): on an H200,
        Life uint8 8192 x 8100 ran in 156 us at 32 bytes per row of a work-item, 110 at 16 and
        92 at 8 (8192 x 8192: 45 us at 32), 8192 x 8190 in 584 / 246 / 135 us (per cell:
        161). Other plans: the space's default."""
        if not self.packed:
            return None
        space = self.space(rt)
        d = dict(space.default)
        vec, cols = int(d["vec"]), int(dataset.get("cols", 0))
        if vec < 2 or cols <= 0:
            return None
        align = _row_bytes_align(cols)
        while vec > 2 and vector_columns({"vec": vec}, self.tile_itemsize) > align:
            vec //= 2
        d["vec"] = vec
        return d if space.is_legal(d) else None

    def tuning_dataset(self, dataset: dict) -> dict:
        """Packed plans: how many bytes (up to 32) divide the rows, so that 8192 x 8192 and
        8192 x 8190, one log2 bucket, are different scenarios (see :meth:`default_for`)."""
        if not self.packed:
            return dataset
        return dict(dataset, col_align=float(_row_bytes_align(int(dataset.get("cols", 0)))))

    def macros(self, point: Mapping) -> tuple[str, ...]:
        return (f"-DSKP_LOCAL={int(point['local'])}", f"-DSKP_CR={int(point['cr'])}",
                f"-DSKP_CC={int(point['cc'])}",
                f"-DSKP_VEC={vector_columns(point, self.tile_itemsize)}")

    def local_bytes(self, point: Mapping) -> int:
        return tile_bytes(self.shape, self.tile_itemsize, point) if int(point["local"]) else 0

    def make_space(self, rt: _rt.Runtime) -> tuple[ParamSpace, Legality]:
        """The legal launch points of this stencil kernel on ``rt``'s device."""
        dev = rt.device
        kmax_cache: dict[int, int] = {}

        def kmax(local: int) -> int:
            # CL_KERNEL_WORK_GROUP_SIZE needs a built program: build each variant only when a
            # point of it is first asked about (a program build costs ~0.5 s on PoCL).
            if local not in kmax_cache:
                k = self.kernel(rt, {"local": local, "cr": 1, "cc": 1, "vec": 1})
                kmax_cache[local] = min(dev.max_work_group_size,
                                        rt.kernel_max_work_group_size(k))
            return kmax_cache[local]

        items = dev.max_work_item_sizes
        max_c = items[0] if items else dev.max_work_group_size
        max_r = items[1] if len(items) > 1 else 1
        budget = dev.local_mem_size - LOCAL_RESERVE
        shape, itemsize, packed = self.shape, self.tile_itemsize, self.packed

        def sized(p) -> bool:             # not the runtime's choice (wg_r = wg_c = 0)
            return not (int(p["wg_r"]) == 0 and int(p["wg_c"]) == 0)

        def vector(p) -> bool:
            return int(p["vec"]) > 1

        def columns(p) -> int:
            return vector_columns(p, itemsize) if vector(p) else int(p["cc"])

        rules = Legality([
            one_of("local", (0, 1)),
            at_least("cr", 1),
            at_least("cc", 1),
            one_of("vec", PACKED_VEC_VALUES if packed else VEC_VALUES),
            # (packed plans unroll their loops per word of 4 cells)
            Rule(lambda p: int(p["cr"]) * columns(p) <= MAX_CELLS * (4 if packed else 1),
                 lambda p: f"cr={p['cr']} x cc={p['cc']} (or vec={p['vec']}: "
                           f"{columns(p)} columns) cells per work-item is over skelpy's "
                           f"maximum MAX_CELLS ({MAX_CELLS}{' words' if packed else ''}; "
                           "the cell loops are unrolled: build time grows with them)"),
            # the vector path reads global memory into registers: no local tile, no column
            # coarsening beyond the vector, and a window small enough to stay in registers
            Rule(lambda p: not vector(p) or not int(p["local"]),
                 lambda p: f"vec={p['vec']} reads global memory into registers: it excludes "
                           "local=1"),
            Rule(lambda p: not vector(p) or int(p["cc"]) == 1,
                 lambda p: f"vec={p['vec']} computes vec columns per work-item: cc must be 1"),
            Rule(lambda p: not vector(p)
                 or window_elements(shape, p, itemsize, packed) <= WINDOW_LIMIT,
                 lambda p: f"the vector path's register window of "
                           f"{window_elements(shape, p, itemsize, packed)} "
                           f"{'words' if packed else 'elements'} (cr={p['cr']}, "
                           f"vec={p['vec']}: {columns(p)} columns, reach {shape}) is over "
                           f"{WINDOW_LIMIT}"),
            Rule(lambda p: sized(p) or not int(p["local"]),
                 lambda p: "wg_r=wg_c=0 (the OpenCL runtime chooses the work-group) has no "
                           "local tile: local must be 0"),
            Rule(lambda p: not sized(p) or min(int(p["wg_r"]), int(p["wg_c"])) >= 1,
                 lambda p: f"work-group wg_r={p['wg_r']} x wg_c={p['wg_c']}: both must be "
                           ">= 1 (or both 0: the OpenCL runtime chooses)"),
            Rule(lambda p: not sized(p) or (int(p["wg_r"]) <= max_r and int(p["wg_c"]) <= max_c),
                 lambda p: f"work-group wg_r={p['wg_r']} x wg_c={p['wg_c']} is over "
                           f"{dev.name}'s work-item sizes ({max_r} rows, {max_c} columns)"),
            Rule(lambda p: not sized(p)
                 or int(p["wg_r"]) * int(p["wg_c"]) <= dev.max_work_group_size,
                 lambda p: f"work-group size wg_r x wg_c = "
                           f"{int(p['wg_r']) * int(p['wg_c'])} is over {dev.name}'s maximum "
                           f"{dev.max_work_group_size}"),
            Rule(lambda p: not sized(p) or not int(p["local"])
                 or tile_bytes(shape, itemsize, p) <= budget,
                 lambda p: f"local=1 stages a tile of {tile_bytes(shape, itemsize, p)} bytes; "
                           f"{dev.name} has {dev.local_mem_size} bytes of local memory "
                           f"({budget} after {LOCAL_RESERVE} reserved)"),
            Rule(lambda p: not sized(p)
                 or int(p["wg_r"]) * int(p["wg_c"]) <= kmax(int(p["local"])),
                 lambda p: f"work-group size wg_r x wg_c = "
                           f"{int(p['wg_r']) * int(p['wg_c'])} is over the compiled kernel's "
                           f"maximum {kmax(int(p['local']))} (CL_KERNEL_WORK_GROUP_SIZE)"),
        ])

        params = [
            Param("wg_r", tuple(v for v in WG_R_VALUES if v <= max_r), doc="work-group rows"),
            Param("wg_c", tuple(v for v in WG_C_VALUES if v <= max_c),
                  doc="work-group columns"),
            Param("cr", CR_VALUES, doc="cells per work-item along rows"),
            Param("cc", CC_VALUES, doc="cells per work-item along columns"),
            Param("local", (0, 1), numeric=False, doc="1: stage tile + halo in local memory"),
            # On CPUs the vector path can be forced but is not tuned over: on PoCL it measured
            # 1.4x faster for a Gaussian 5x5 yet 1.4x slower for the 5-point stencil, the model
            # shipped for PoCL predates it, and the larger space slowed decisions (0.9 vs 0.55
            # ms).
            # Packed plans tune it on CPUs too (Life uint8 on PoCL: packed 1.15x faster than
            # per cell at 512^2, 1.1-1.7x slower at 1024^2-2048^2; they start per cell there).
            Param("vec", PACKED_VEC_VALUES if packed else VEC_VALUES if dev.kind == "gpu"
                  else (1,),
                  doc="columns per work-item read and written as one vector"),
        ]
        space = ParamSpace(params, default_point(dev, self.features, itemsize, packed), rules,
                           extra_values_ok=("wg_r", "wg_c", "cr", "cc", "vec"))
        if not space.is_legal(space.default):
            nearest = space.nearest(space.default)
            if nearest is not None:
                space.default = nearest
        return space, rules


def _row_bytes_align(cols: int) -> int:
    """The largest power of two up to 32 (a packed plan's widest vector, in bytes) that
    divides a row of ``cols`` one-byte cells."""
    align = 32
    while align > 1 and cols % align:
        align //= 2
    return align


def window_elements(shape: Shape, point: Mapping, itemsize: int = VECTOR_WORD,
                    packed: bool = False) -> int:
    """Size of the vector path's per-work-item register window (elements of ``itemsize``
    bytes; ``packed``: 32-bit words, the item's own and one of halo each side)."""
    rows = shape.north + int(point["cr"]) + shape.south
    if packed:
        return rows * (vector_columns(point, itemsize) // 4 + 2)
    return rows * (shape.west + vector_columns(point, itemsize) + shape.east)


def tile_bytes(plan_shape: Shape, itemsize: int, point: Mapping) -> int:
    """Local memory one work-group needs for its tile plus halo."""
    rows = int(point["wg_r"]) * int(point["cr"]) + plan_shape.north + plan_shape.south
    cols = int(point["wg_c"]) * int(point["cc"]) + plan_shape.west + plan_shape.east
    return rows * cols * itemsize


# Neighbours read per cell above which a stencil counts as compute-heavy on a GPU, whose local
# tile pays off late: on an H200 at 4096^2 the tile ran a 5x5 LoG (13 reads) in 106.7 us
# against the light default's 42.1 us (issue 18) and a 5x5 Gaussian (26 reads) in 0.150 ms
# against 0.104 ms without it, and won only for the 11x11 Gaussian (121). CPUs have their own
# rule (skelpy.tuner.cpu_defaults).
HEAVY_READS = {"gpu": 48}


def default_point(dev, features: Mapping[str, float], itemsize: int = VECTOR_WORD,
                  packed: bool = False) -> dict:
    """A good first guess before the tuner knows better, measured with
    ``benchmarks/bench_stencil.py`` (``--bandwidth-sweep`` and the "skelpy best" sweeps).

    Light stencils (a few reads per cell) are memory-bound: on an H200, 4x64 work-items each
    computing 2 rows by a 2-vector from a register window reach 83% / 95% / 95% of a same-size
    copy at 2048^2 / 4096^2 / 8192^2 (the scalar 2x128 with 2x2 cells: 73-85%). Heavy stencils
    (a Gaussian 11x11 reads all 121 neighbours) re-read each input many times: the H200 then
    wants the local-memory tile (8x32, 2 rows per item, up to 6x faster than the light
    default). CPUs: :func:`skelpy.tuner.cpu_defaults.stencil_point` (issue 18).

    Elements narrower than 4 bytes (``itemsize``) on a GPU take 4 rows by an 8-byte vector
    (``vec=2``, :func:`vector_columns`: a uchar8) in 8 x 32 groups: a 1-byte cell leaves few
    instructions per byte moved, and the 2-byte-wide default spent 30 per cell (ptxas, sm_90)
    where 4 x uchar8 and 2 x uchar16 both spend 15.5; 4 x uchar8 does it in 48 registers
    against 76 (more work-groups per compute unit to hide memory latency)."""
    if packed and dev.kind == "gpu":
        # one-byte muscles packed four cells per word (muscle/packed.py): on an H200 4 rows by
        # 32 columns (8 words) per work-item in 4 x 32 groups, the best of 90 points measured
        # at 8192^2 and 16384^2 (Life uint8: 75% / 87% of copy, as the hand-written SWAR
        # kernel; 16 columns by 2 rows: 70% / 79%). The tuner's model, which has not measured
        # packed kernels, keeps it (StencilPlan.model_known). On PoCL (2-core VM, quiet) the
        # per-cell default below ran Life uint8 in 0.070 / 0.171 / 0.457 ms at 512^2 / 1024^2
        # / 2048^2 against 0.061 / 0.195 / 0.780 packed (4 rows by 16 columns): CPUs start
        # per cell, and packed plans tune ``vec`` there too.
        return {"wg_r": 4, "wg_c": 32, "cr": 4, "cc": 1, "local": 0, "vec": 8}
    reads = float(features.get("reads_dyn", features.get("reads", 0.0)))
    area = ((features.get("north", 0.0) + features.get("south", 0.0) + 1)
            * (features.get("west", 0.0) + features.get("east", 0.0) + 1))
    # many reads that cover much of the neighbourhood: a sparse far-reaching stencil (Table
    # 6.3's synthetic 1/10/30/30) gains nothing from staging its large halo
    heavy = reads > HEAVY_READS["gpu"] and reads >= 0.25 * area
    if dev.kind == "gpu":
        if heavy:
            return {"wg_r": 8, "wg_c": 32, "cr": 2, "cc": 1, "local": 1, "vec": 1}
        if itemsize < VECTOR_WORD:
            return {"wg_r": 8, "wg_c": 32, "cr": 4, "cc": 1, "local": 0, "vec": 2}
        return {"wg_r": 4, "wg_c": 64, "cr": 2, "cc": 1, "local": 0, "vec": 2}
    return cpu_defaults.stencil_point(dev, features)   # issue 18: re-measured on PoCL
