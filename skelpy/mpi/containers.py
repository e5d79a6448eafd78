"""Containers under MPI: construction is collective (every rank builds the same containers in
the same order, as it calls the same skeletons), so that every rank's copy of a container is in
the same state and a read that needs the others (``to_numpy()``) finds them in it too.

- ``sk.Matrix(a)`` on every rank: each keeps its copy; a skeleton uploads each rank's rows.
- ``sk.Matrix(a)`` on one rank, ``sk.Matrix(None, shape=, dtype=)`` on the others: the first
  rank with data sends every rank its rows (its part of the distribution asked for, block by
  default); no rank keeps the whole afterwards.
- ``sk.Matrix.from_local(rows)``: each rank's rows, in rank order; rebalanced to the block
  distribution on the device side when the counts are not the block split.

Shapes and dtypes are compared first: ranks that disagree get the same ShapeError.
Containers built inside a skeleton call (its own scratch values) stay local.

Writes through a container (``v[i] = x``, ``m[i][j] = x``, ``host_edit``) are collective too:
every rank's copy must stay the same, so every rank makes the same write at the same point of
the program. Each write first compares a digest of (container, index, value) across the ranks
(for ``host_edit``, of the edited data when the block ends); a write made on some ranks only, or
different writes, raise the same :class:`~skelpy.errors.CollectiveError` on every rank (the
ranks that did not write raise it from their next skeleton call or collective) instead of
leaving the ranks' copies silently different. ``local_numpy()`` is read-only: writing into it
raises at once, on the rank that tries, and changes nothing. It is a read of this rank alone,
also of a pending value (:mod:`.local_view`). Reads that gather (``to_numpy()``, ``x[1:]``,
``v[i]``) are collective: one made on some ranks only raises on every rank
(:mod:`.exchange`).
"""

from __future__ import annotations

import zlib

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from ..containers.distributions import BLOCK, Distribution, as_distribution
from ..distribution.exchange import Piece
from ..distribution.parts import allocate, layout, redistribute
from ..dtypes import check_dtype, storage_dtype
from ..errors import CollectiveError, ShapeError
from .local_view import pending_rows
from .status import HOST_WRITE

__all__ = ["Collective"]


class Collective:
    """Installed as ``Container.collective`` while an MPI group exists."""

    def __init__(self, group):
        self.groups = [group]

    def add(self, group) -> Collective:
        self.groups.append(group)
        return self

    def _group(self):
        """The MPI group in use, outside any skeleton call; else None."""
        group = _rt.current().group
        if group in self.groups and group.exchange.depth == 0:
            return group
        return None

    def active(self) -> bool:
        return self._group() is not None

    # -- construction ---------------------------------------------------------------------------
    def init(self, cls, data, dtype, shape, distribution):
        """The container ``cls(data, dtype, shape=, distribution=)`` built collectively, or
        None where the ordinary path builds it (no MPI group in use, a copy of a container)."""
        from ..containers import Container, IndexSpace
        group = self._group()
        if group is None or isinstance(data, (Container, IndexSpace)):
            return None
        ex = group.exchange
        name = cls.__name__
        with ex.call(f"{name}(...) (construction)"):
            local = None
            if data is not None:
                local = cls(data, dtype, distribution=distribution)
                sig = (True, local.shape, local.dtype.str, as_distribution(distribution))
            else:
                shp = None if shape is None else tuple(int(s) for s in shape)
                dt = None if dtype is None else check_dtype(dtype, name).str
                sig = (False, shp, dt, as_distribution(distribution))
            sigs = ex.allgather_objects(sig)
            dist = _agreed(name, [s[3] for s in sigs], lambda: _listing(sigs))
            have = [r for r, s in enumerate(sigs) if s[0]]
            if not have:                       # nobody has data: zeros of the agreed shape
                if len({s[:3] for s in sigs}) > 1:
                    raise ShapeError(f"{name}: the ranks disagree on shape and dtype: "
                                     + _listing(sigs))
                return cls(None, dtype, shape=shape, distribution=dist)
            root = have[0]
            _, ref_shape, ref_dt, _ = sigs[root]
            if any((s[0] and s[1:3] != (ref_shape, ref_dt))
                   or (not s[0] and s[1] not in (None, ref_shape))
                   or (not s[0] and s[2] not in (None, ref_dt)) for s in sigs):
                raise ShapeError(f"{name}: the ranks disagree on the data: " + _listing(sigs))
            if len(have) == group.size:
                local.storage.distribution = dist
                return local
            dt = np.dtype(ref_dt)
            parts = allocate(group, dist or BLOCK, ref_shape, dt)
            rb = parts.row_bytes
            pieces = []
            for p in parts.parts:
                lo, hi = max(p.first, 0), min(p.hi + p.south, parts.rows)
                if hi > lo:
                    pieces.append(Piece(parts.span(p, lo), lo * rb, (hi - lo) * rb))
            host = None
            if ex.rank == root:
                host = np.ascontiguousarray(local.to_numpy()).view(storage_dtype(dt))
            ex.scatter(host, pieces, root)
            return cls.from_parts(parts)

    def from_local(self, cls, part, dtype, distribution):
        """Every rank's rows, in rank order, as one container (see the module docstring)."""
        group = self._group()
        ex = group.exchange
        name = cls.__name__
        with ex.call(f"{name}.from_local(...)"):
            arr = np.ascontiguousarray(part.to_numpy() if hasattr(part, "to_numpy") else
                                       np.asarray(part, dtype=dtype))
            if dtype is not None:
                arr = arr.astype(check_dtype(dtype, name), copy=False)
            if arr.ndim != cls.ndim:
                raise ShapeError(f"{name}.from_local needs {cls.ndim}-D rows, got shape "
                                 f"{arr.shape} on rank {ex.rank}")
            check_dtype(arr.dtype, name)
            sigs = ex.allgather_objects((arr.shape, arr.dtype.str,
                                         as_distribution(distribution)))
            if len({(s[1:], d) for s, d, _ in sigs}) > 1:
                raise ShapeError(f"{name}.from_local: the ranks' rows differ in columns or "
                                 "dtype: " + ", ".join(f"rank {r}: {s} ({d})"
                                                       for r, (s, d, _) in enumerate(sigs)))
            want = _agreed(f"{name}.from_local", [w for _, _, w in sigs],
                           lambda: ", ".join(f"rank {r}: {w}"
                                             for r, (_, _, w) in enumerate(sigs))) or BLOCK
            counts = [s[0] for s, _, _ in sigs]
            starts = np.concatenate([[0], np.cumsum(counts)]).tolist()
            shape = (starts[-1], *arr.shape[1:])
            dt = arr.dtype
            ranges = [(starts[r], starts[r + 1], 0, 0) for r in range(group.size)]
            parts = allocate(group, Distribution("local"), shape, dt, ranges)
            mine = parts.parts[ex.rank]
            if mine.rows:
                cl.enqueue_copy(mine.rt.queue, mine.buffer, arr.view(storage_dtype(dt)),
                                is_blocking=True)
            if ranges == layout(want, shape[0], group.size):
                parts.dist = want
            else:
                parts = redistribute(parts, want)
            return cls.from_parts(parts)

    # -- writing --------------------------------------------------------------------------------
    def host_write(self, c, key, value) -> None:
        """Before ``c[key] = value``: every rank writes the same (see the module docstring)."""
        group = self._group()
        what = f"{type(c).__name__}{list(c.shape)}[{_short(key)}] = {_short(value)}"
        token = _digest(("write", type(c).__name__, c.shape, c.dtype.str, key, value))
        group.exchange.check(op=HOST_WRITE, token=token, what=what)

    def host_edit(self, c, arr: np.ndarray | None) -> None:
        """At the start (``arr`` None) and the end of ``with c.host_edit() as arr``: every
        rank edits, and ends with the same data."""
        group = self._group()
        if group is None:
            return
        stage = "start" if arr is None else "end"
        what = f"{type(c).__name__}{list(c.shape)}.host_edit() ({stage})"
        token = _digest(("edit", type(c).__name__, c.shape, c.dtype.str,
                         None if arr is None else np.ascontiguousarray(arr)))
        group.exchange.check(op=HOST_WRITE, token=token, what=what)

    # -- reading --------------------------------------------------------------------------------
    def local_numpy(self, c) -> np.ndarray:
        """This rank's owned rows of ``c`` (its block when the host holds the data); of a
        pending value, computed by this rank alone (:mod:`.local_view`)."""
        group = self._group()
        me = group.rank
        s = c.storage
        if s.pending is not None:
            return pending_rows(c, group)
        parts = s.parts
        if parts is not None and parts.group is group:
            p = parts.parts[me]
            out = np.empty((p.rows, *c.shape[1:]), c.dtype)
            if out.size:
                cl.enqueue_copy(p.rt.queue, out.view(storage_dtype(c.dtype)), p.buffer,
                                src_offset=p.offset(p.lo, parts.row_bytes), is_blocking=True)
        else:
            lo, hi = (s.distribution or BLOCK).ranges(c.shape[0], group.size)[me]
            out = np.array(s.sync_host()[lo:hi])
        out.flags.writeable = False
        return out


def _digest(obj) -> int:
    """A CRC-32 of an index or value, equal on every rank exactly when they are equal."""
    crc = 0

    def feed(x) -> None:
        nonlocal crc
        if isinstance(x, (tuple, list)):
            crc = zlib.crc32(b"(%d" % len(x), crc)
            for y in x:
                feed(y)
        elif isinstance(x, slice):
            feed(("slice", x.start, x.stop, x.step))
        elif isinstance(x, np.ndarray) or np.isscalar(x) and not isinstance(x, str):
            a = np.ascontiguousarray(x)
            crc = zlib.crc32(f"{a.dtype.str}{a.shape}".encode(), crc)
            crc = zlib.crc32(a.view(np.uint8).reshape(-1) if a.size else b"", crc)
        elif hasattr(x, "shape") and hasattr(x, "dtype"):   # a container: its kind
            feed(("container", type(x).__name__, tuple(x.shape), np.dtype(x.dtype).str))
        else:
            crc = zlib.crc32(repr(x).encode(), crc)
    feed(obj)
    return crc


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _agreed(name: str, asked: list, listing) -> Distribution | None:
    """The distribution the ranks asked for (None: any; the ranks that name one must name
    the same: the parts of one container, and a scatter into them, must match)."""
    named = {d for d in asked if d is not None}
    if len(named) > 1:
        raise CollectiveError(f"{name}: the ranks disagree on the distribution: " + listing())
    return next(iter(named), None)


def _listing(sigs) -> str:
    return ", ".join(f"rank {r}: " + (f"shape {s[1]} {s[2]}" if s[0] else
                                      f"None (shape={s[1]}, dtype={s[2]})")
                     + (f", distribution={s[3]}" if s[3] is not None else "")
                     for r, s in enumerate(sigs))
