"""A streaming pass's tile: what it holds, and how large it may be.

:class:`StreamTile` is the part of :class:`.stencil_stream.StreamPlan` that knows a pass's tile
from its launch parameters: the overlap columns its stages consume, the local memory of its
rings, the values a work-item holds, the limits a legal tile keeps (each named, so that a
forced tile no legal point keeps is refused with the limit it breaks:
``limits.check_forced``),
the tuner's parameters and a GPU's first guess. It reads the plan's ``infos`` (per stage:
reach, overlap columns, ring rows, held rows), ``n_stages``, ``levels``, ``cycles``,
``mixed``, ``itemsize`` and ``period``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .. import runtime as _rt
from ..tuner.space import Param
from .limits import first_broken

__all__ = ["LOCAL_RESERVE", "MAX_PERIOD", "MAX_REGS", "MAX_T", "MAX_VEC_BYTES", "StreamTile",
           "TILE_NAMES"]

TILE_NAMES = ("tb_wc", "tb_wr", "tb_rows", "tb_vec", "tb_ring", "tb_unroll", "tb_pre")

WC_VALUES = (16, 32, 64, 128, 256)
WR_VALUES = (1, 2, 4)
ROWS_VALUES = (32, 64, 128, 256, 512)
VEC_VALUES = (1, 2, 4, 8, 16)
PRE_VALUES = (1, 2, 4)
MAX_VEC_BYTES = 16            # a work-item's vector: at most 16 bytes (one wide access)
MAX_T = 16                    # stages per pass
MAX_PERIOD = 24               # longest walk unrolled by the rings' period
MAX_REGS = 160                # values a work-item may hold (estimate; beyond it, spills)
LOCAL_RESERVE = 256           # bytes of local memory left for the implementation


class StreamTile:
    """A pass's tile from its launch parameters (the plan's stages as ``infos``: see the
    module docstring)."""

    def _stage(self, level: int):
        return self.infos[level % self.n_stages]

    def overlaps(self, point: Mapping) -> tuple[int, int]:
        """Columns left and right of a tile's output that its stages consume (whole vectors)."""
        t, v = int(point["t"]), int(point["tb_vec"])
        gw = sum(self._stage(level).overlap[0] for level in range(t))
        ge = sum(self._stage(level).overlap[1] for level in range(t))
        return -(-gw // v) * v, -(-ge // v) * v

    def wout(self, point: Mapping) -> int:
        ol, orr = self.overlaps(point)
        return int(point["tb_wc"]) * int(point["tb_vec"]) - ol - orr

    def local_bytes(self, point: Mapping) -> int:
        """The rings: per level, its rows of every stream's columns plus padding."""
        v = int(point["tb_vec"])
        rows = sum(self._stage(level).ring for level in range(int(point["t"])))
        pad = -(-max(i.reach[3] for i in self.infos) // v) * v \
            + -(-max(i.reach[2] for i in self.infos) // v) * v
        return rows * int(point["tb_wr"]) * (int(point["tb_wc"]) * v + pad) * self.itemsize

    def registers(self, point: Mapping) -> int:
        """Values a work-item holds (an estimate of its registers)."""
        t, v = int(point["t"]), int(point["tb_vec"])
        window = max((i.reach[0] + i.reach[1] + 1) * (i.reach[2] + i.reach[3] + v)
                     for i in self.infos)
        if int(point["tb_ring"]):
            held = t * v
        else:
            held = sum(self._stage(level).held for level in range(t)) * v
        return held + (int(point["tb_pre"]) + 2) * v + window

    def legal(self, point: Mapping, dev) -> bool:
        """Whether a pass at ``point`` (t > 0 stages) can run on ``dev``."""
        return self.broken(point, dev) is None

    def broken(self, point: Mapping, dev) -> tuple[int, str] | None:
        """The first limit a pass at ``point`` breaks on ``dev``: (its position among the
        limits, checked in order, and the words naming it), or None where it is legal."""
        t, wc, wr = int(point["t"]), int(point["tb_wc"]), int(point["tb_wr"])
        v, ring, unroll = int(point["tb_vec"]), int(point["tb_ring"]), int(point["tb_unroll"])
        items = dev.max_work_item_sizes
        return first_broken((
            (lambda: t < 1 or t > MAX_T,
             lambda: f"t={t} is outside 1..{MAX_T} (MAX_T, stages per pass)"),
            (lambda: min(wc, wr, int(point["tb_rows"]), v, int(point["tb_pre"])) < 1,
             lambda: "tb_wc, tb_wr, tb_rows, tb_vec and tb_pre must be at least 1"),
            (lambda: ring not in (0, 1) or unroll not in (0, 1),
             lambda: "tb_ring and tb_unroll are 0 or 1"),
            (lambda: not ring and not unroll,
             lambda: "tb_ring=0 (own columns in registers) needs tb_unroll=1"),
            (lambda: unroll and self.period > MAX_PERIOD,
             lambda: f"tb_unroll=1 unrolls the row walk by the rings' period {self.period}, "
                     f"over MAX_PERIOD ({MAX_PERIOD})"),
            # a pass starts and ends with a whole cycle of stages
            (lambda: t % self.n_stages,
             lambda: f"t={t} is not a multiple of the cycle's {self.n_stages} stages"),
            (lambda: t > self.n_stages and not self.cycles,     # the cycle changes the dtype
             lambda: f"t={t}: the stages turn {self.levels[0]} into {self.levels[-1]}, so a "
                     "pass runs them once"),
            (lambda: self.mixed and v > 1,    # levels held as words: one column per work-item
             lambda: "tb_vec > 1 with levels of different dtypes (one column per work-item)"),
            (lambda: v & (v - 1) or v * self.itemsize > MAX_VEC_BYTES,
             lambda: f"tb_vec={v} is not a power of two of at most {MAX_VEC_BYTES} bytes "
                     f"({self.itemsize}-byte elements)"),
            (lambda: items and (wc > items[0] or (len(items) > 1 and wr > items[1])),
             lambda: f"tb_wc={wc} x tb_wr={wr} is over the device's work-item sizes {items}"),
            (lambda: wc * wr > dev.max_work_group_size,
             lambda: f"tb_wc * tb_wr = {wc * wr} work-items is over the device's work-group "
                     f"maximum {dev.max_work_group_size}"),
            # On an H200 (NVIDIA OpenCL) every tb_vec > 1 tried faulted (heat float32 with 2
            # and 4, Game of Life uint8 with 4: OUT_OF_RESOURCES / error -9999, a kernel's
            # invalid access) where the oclgrind and PoCL runs are clean; until that is
            # understood a work-item on NVIDIA owns one column.
            (lambda: v > 1 and "nvidia" in str(getattr(dev, "platform", "")).lower(),
             lambda: "tb_vec > 1 on an NVIDIA GPU (wider vectors faulted on an H200)"),
            # a tile must output at least a quarter of the columns it computes
            (lambda: 4 * self.wout(point) < wc * v,
             lambda: f"a tile of {wc * v} columns would output {self.wout(point)}, less than a "
                     f"quarter of them (its stages consume {sum(self.overlaps(point))} "
                     "columns of overlap); widen tb_wc"),
            (lambda: self.registers(point) > MAX_REGS,
             lambda: f"a work-item would hold about {self.registers(point)} values, over "
                     f"MAX_REGS ({MAX_REGS}): the stages' windows (or t) are too large"),
            (lambda: self.local_bytes(point) > dev.local_mem_size - LOCAL_RESERVE,
             lambda: f"the rings need {self.local_bytes(point)} bytes of local memory, over "
                     f"the device's {dev.local_mem_size} less {LOCAL_RESERVE}"),
        ))

    def tile_params(self, rt: _rt.Runtime, t_values: Sequence[int]) -> list[Param]:
        """The tuner's parameters of a pass on ``rt``'s device (``t`` among ``t_values``)."""
        vecs = (1,) if self.mixed else tuple(v for v in VEC_VALUES
                                             if v * self.itemsize <= MAX_VEC_BYTES)
        return [
            Param("t", tuple(t_values), doc="stages per pass"),
            Param("tb_wc", WC_VALUES, doc="work-items per stream along columns"),
            Param("tb_wr", WR_VALUES, doc="streams per work-group"),
            Param("tb_rows", ROWS_VALUES, doc="rows per stream (stream division)"),
            Param("tb_vec", vecs, doc="columns per work-item, read and written as a vector"),
            Param("tb_ring", (0, 1), numeric=False,
                  doc="1: windows from a local-memory ring, 0: own columns in registers"),
            Param("tb_unroll", (0, 1), numeric=False,
                  doc="1: the row walk unrolled by the rings' period"),
            Param("tb_pre", PRE_VALUES, doc="input rows loaded ahead"),
        ]

    def gpu_default(self) -> dict:
        """A GPU's first guess before the tuner knows better: 128 work-items per stream, each
        owning one 32-bit word of columns (4 uint8, 2 int16, 1 float), 128 rows per stream,
        two rows loaded ahead. One column per work-item keeps its own rows in registers;
        narrow types, several columns each, read the ring (ptxas for sm_90 at t = 4: no
        stack frame or spills, 50-70 registers for heat, Gaussian 3x3 and Game of Life)."""
        v = 1       # wider vectors faulted on an H200 (see legal)
        if self.mixed:
            # Levels of mixed dtypes (Canny: float32 -> int32 -> uint8): with own columns in
            # registers ptxas (sm_90) put 72-96 bytes of the rotated rows on the stack (Canny,
            # the separable Canny); windows from the ring, the walk a loop: 55-56 registers,
            # no stack frame, no spills (unrolled: 64-71 registers).
            return {"tb_wc": 128, "tb_wr": 1, "tb_rows": 128, "tb_vec": 1,
                    "tb_ring": 1, "tb_unroll": 0, "tb_pre": 2}
        return {"tb_wc": 128, "tb_wr": 1, "tb_rows": 128, "tb_vec": v,
                "tb_ring": int(v > 1), "tb_unroll": 1, "tb_pre": 2}
