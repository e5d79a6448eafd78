"""A container's data on the devices of a group: one :class:`Part` per device.

A part owns rows ``[lo, hi)`` (elements of a Vector) and holds ``north`` rows above and
``south`` rows below them (an ``Overlap``'s halo; beyond the first or last row of the matrix
they are *ghost* rows, which a stencil fills by its border rule). Its buffer holds rows
``[lo - north, hi + south)`` in order. :class:`Parts` is the whole: the distribution, the
parts, and whether the halo rows hold their neighbours' current rows (``halo_valid``).

Redistribution (:func:`redistribute`) is one rule for every pair of distributions: each row a
new part needs comes from the same device when the old parts hold it there (a device-side
copy), otherwise from the device that owns it, through the exchange (pinned host memory).
A container keeps one distribution at a time (as in SkelCL): a skeleton that needs another
redistributes its input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import runtime as _rt
from ..containers import Container, Matrix, Vector
from ..containers.distributions import Distribution
from ..dtypes import storage_dtype
from .exchange import Move, Piece, Span, exchange_of

__all__ = ["Part", "Parts", "distributed", "redistribute", "allocate", "upload", "parts_of"]


@dataclass(eq=False)
class Part:
    """Device ``rank``'s part: owned rows [lo, hi), ``north``/``south`` rows held around
    them, in ``buffer`` (None when it holds no row)."""

    rank: int
    rt: Any
    lo: int
    hi: int
    north: int = 0
    south: int = 0
    buffer: Any = None

    @property
    def rows(self) -> int:
        return self.hi - self.lo

    @property
    def first(self) -> int:
        """The first row held (may be a ghost row, < 0)."""
        return self.lo - self.north

    @property
    def held(self) -> int:
        return self.rows + self.north + self.south

    def offset(self, row: int, row_bytes: int) -> int:
        """Byte offset of row ``row`` (held) in the buffer."""
        return (row - self.first) * row_bytes


class Parts:
    """A container's data spread over ``group`` with distribution ``dist``."""

    def __init__(self, group, dist: Distribution, shape: tuple[int, ...], dtype: np.dtype,
                 parts: Sequence[Part], halo_valid: bool = True):
        self.group = group
        self.dist = dist
        self.shape = shape
        self.dtype = dtype
        self.parts = list(parts)
        self.halo_valid = halo_valid
        self.ghosts: tuple | None = None     # the border rule the ghost rows now follow
        ex = group.exchange                  # (under MPI: which parts a read gathers)
        self.stamp = ex.stamp() if ex is not None else None

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def row_bytes(self) -> int:
        return (self.shape[1] if len(self.shape) > 1 else 1) * self.dtype.itemsize

    @property
    def exchange(self):
        return exchange_of(self.group)

    def span(self, part: Part, row: int) -> Span:
        return Span(part.rank, part.buffer, part.offset(row, self.row_bytes))

    def holders(self) -> list[Part]:
        """Parts that own rows, in rank order (the copy distribution: the first only)."""
        if self.dist.name == "copy":
            return self.parts[:1]
        return [p for p in self.parts if p.rows]

    # -- host side ------------------------------------------------------------------------------
    def gather(self) -> np.ndarray:
        """The whole data as a new host array (blocks)."""
        host = np.empty(self.shape, self.dtype)
        if host.size:
            rb = self.row_bytes
            pieces = [Piece(self.span(p, p.lo), p.lo * rb, p.rows * rb) for p in self.holders()]
            self.exchange.to_host(pieces, host.view(storage_dtype(self.dtype)), source=self)
        return host

    def copy(self) -> Parts:
        """An independent copy (each part duplicated on its device)."""
        new = allocate(self.group, self.dist, self.shape, self.dtype,
                       [(p.lo, p.hi, p.north, p.south) for p in self.parts])
        rb = self.row_bytes
        self.exchange.move([Move(Span(p.rank, p.buffer), Span(q.rank, q.buffer), p.held * rb)
                            for p, q in zip(self.parts, new.parts) if p.buffer is not None])
        new.halo_valid, new.ghosts = self.halo_valid, self.ghosts
        return new

    # -- per-device views --------------------------------------------------------------------
    def local_view(self, part: Part) -> Container:
        """The rows a part owns as a device container on its device (a block part: no halo)."""
        assert part.north == 0 and part.south == 0, "a view needs a part without halo"
        shape = (part.rows, *self.shape[1:])
        cls = Vector if len(shape) == 1 else Matrix
        return cls.from_device(part.buffer, shape, self.dtype, part.rt)

    def whole_view(self, part: Part) -> Container:
        """A copy distribution's part as a device container of the whole shape."""
        cls = Vector if len(self.shape) == 1 else Matrix
        return cls.from_device(part.buffer, self.shape, self.dtype, part.rt)


def layout(dist: Distribution, rows: int, size: int) -> list[tuple[int, int, int, int]]:
    """(lo, hi, north, south) per device for ``dist`` over ``rows`` rows."""
    h = dist.halo if dist.name == "overlap" else 0
    return [(lo, hi, h if hi > lo else 0, h if hi > lo else 0)
            for lo, hi in dist.ranges(rows, size)]


def allocate(group, dist: Distribution, shape: tuple[int, ...], dtype: np.dtype,
             ranges: Sequence[tuple[int, int, int, int]] | None = None) -> Parts:
    """Fresh (unfilled) parts; ``ranges`` (lo, hi, north, south) per device, by default the
    layout of ``dist``."""
    shape = tuple(int(s) for s in shape)
    ranges = ranges or layout(dist, shape[0], group.size)
    row_bytes = (shape[1] if len(shape) > 1 else 1) * dtype.itemsize
    parts = []
    for rank, (rt, (lo, hi, north, south)) in enumerate(zip(group.runtimes, ranges,
                                                            strict=True)):
        held = hi - lo + north + south
        buf = rt.allocate(held * row_bytes) if held and rt is not None else None
        parts.append(Part(rank, rt, lo, hi, north, south, buf))
    return Parts(group, dist, shape, dtype, parts)


def upload(host: np.ndarray, group, dist: Distribution) -> Parts:
    """``host`` spread over ``group`` as ``dist`` (every row a part holds, halos included)."""
    parts = allocate(group, dist, host.shape, host.dtype)
    rb = parts.row_bytes
    pieces = []
    for p in parts.parts:
        lo, hi = max(p.first, 0), min(p.hi + p.south, parts.rows)
        if hi > lo:
            pieces.append(Piece(parts.span(p, lo), lo * rb, (hi - lo) * rb))
    if host.size:
        parts.exchange.from_host(np.ascontiguousarray(host).view(storage_dtype(host.dtype)),
                                 pieces)
    return parts


def redistribute(old: Parts, dist: Distribution) -> Parts:
    """The same data as ``dist`` on the same group, moved on the device side."""
    new = allocate(old.group, dist, old.shape, old.dtype)
    rb = old.row_bytes
    moves = []
    for p in new.parts:
        lo, hi = max(p.first, 0), min(p.hi + p.south, old.rows)
        for src, a, b in _sources(old, lo, hi, p.rank):
            moves.append(Move(old.span(src, a), new.span(p, a), (b - a) * rb))
    old.exchange.move(moves)
    return new


def _sources(old: Parts, lo: int, hi: int, rank: int) -> list[tuple[Part, int, int]]:
    """Where rows [lo, hi) come from: (part, a, b) runs, the same device's part preferred."""
    runs: list[tuple[Part, int, int]] = []
    same = old.parts[rank]
    s_lo, s_hi = (same.first, same.hi + same.south) if old.halo_valid else (same.lo, same.hi)
    row = lo
    while row < hi:
        if s_lo <= row < s_hi:
            end = min(hi, s_hi)
            runs.append((same, row, end))
            row = end
            continue
        owner = next(q for q in old.holders() if q.lo <= row < q.hi)
        end = min(hi, owner.hi)
        if s_lo > row:
            end = min(end, s_lo)          # the same device holds what follows
        runs.append((owner, row, end))
        row = end
    return runs


def distributed(container: Container, group, dist: Distribution) -> Parts:
    """The container's data on ``group`` as ``dist``: as it is, redistributed on the device
    side, or uploaded from the host (downloaded first from another device or group). The
    container keeps the new distribution. A view (``v[a:b]``, ``m.T``) shares its base's data:
    its elements are spread as a block of their own, and neither it nor its base changes."""
    if container.layout is not None:
        container = type(container)(container)
    storage = container.storage
    parts = storage.parts
    if parts is not None and parts.group is group:
        if parts.dist == dist:
            return parts
        new = redistribute(parts, dist)
    else:
        new = upload(storage.sync_host(), group, dist)
    storage.set_parts(new)
    return new


def parts_of(container: Container) -> Parts | None:
    """The parts the container's data has now, if any: None for a view (``m[1:4]``, ``m.T``),
    whose storage's parts are its base's, of another shape."""
    return container.storage.parts if container.layout is None else None


def current_group():
    """The device group in use, or None for one device."""
    return _rt.current().group
