"""``local_numpy()`` of a pending value under MPI: this rank's rows, computed by this rank alone.

A pending array expression (``x * 3 + y``) is computed, when its value is needed, by a
collective call: every rank runs the fused kernel on its block. ``local_numpy()`` is a local
read (a rank may call it alone, as it reads a computed container's rows without the others),
so it must not start that call: a rank that did would wait forever for ranks that never come.

An elementwise expression needs, for this rank's rows, only the same rows of each operand (a
view or a broadcast operand: of that view): this rank holds them when it has its block of a
distributed operand, or a host copy (an array every rank passed; the base of a view, which
every rank read when it made the view). Then it runs the expression's own fused kernel (the one
the collective call runs on each block: the same bits) on those rows, on its device, and keeps
nothing (the value stays pending on every rank, as the other ranks have it). An operand whose
rows lie on other ranks only (a broadcast of a distributed Vector) raises
:class:`~skelpy.errors.CollectiveError` at once, naming the line; the section runs under
:meth:`~.exchange.MPIExchange.by_itself`, so whatever would still reach a collective raises
too instead of waiting.
"""

from __future__ import annotations

import math

import numpy as np
import pyopencl as cl

from ..array import fusion
from ..array.expression import user_line
from ..containers import Container, Matrix, Vector
from ..containers.distributions import BLOCK
from ..dtypes import storage_dtype
from ..errors import CollectiveError

__all__ = ["pending_rows"]


def pending_rows(c: Container, group) -> np.ndarray:
    """This rank's rows (of the block distribution a computed value takes) of the pending
    container ``c``, computed here alone; a read-only array."""
    me, ex = group.rank, group.exchange
    what = (f"{type(c).__name__}{list(c.shape)}.local_numpy() at {user_line()} on rank {me}, "
            "of a pending value")
    recipe = c.storage.pending
    node, shape = getattr(recipe, "node", None), getattr(recipe, "shape", None)
    if c.layout is not None or node is None or tuple(shape) != tuple(c.shape):
        raise _needs_others(what, "a view of a pending value")
    lo, hi = BLOCK.ranges(shape[0], group.size)[me]
    out = np.empty((hi - lo, *shape[1:]), c.dtype)
    if out.size:
        for leaf in node.leaves:              # (a broadcast or a view of data spread over
            s = leaf.storage                  # the ranks would be gathered to build it)
            if (leaf.layout is not None or tuple(leaf.shape) != tuple(shape)) \
                    and (s.host is None or s.pending is not None):
                raise _needs_others(what, f"an operand of shape {list(leaf.shape)} read as "
                                          f"{list(shape)}, whose rows are spread over the "
                                          "ranks")
        rt = group.runtimes[me]
        with ex.by_itself(what):
            program = fusion.linearise(node, tuple(shape))
            skeleton = fusion.skeleton_for(program)
            inputs = [_rows_here(leaf, lo, hi, group, rt, what) for leaf in program.leaves]
            res = skeleton.run_on(rt, [*inputs, *program.consts])
            rt.download(out.view(storage_dtype(c.dtype)), res.storage.buffer)
    out.flags.writeable = False
    return out


def _rows_here(leaf: Container, lo: int, hi: int, group, rt, what: str) -> Container:
    """Rows [lo, hi) of an operand (a container, or a view broadcast to the value's shape)
    as a container on this rank's device, from what this rank holds: its part of the
    operand on ``group``, its host copy, or its device copy."""
    s = leaf.storage
    own = leaf.layout is None and tuple(leaf.shape) == tuple(s.shape)
    row_bytes = math.prod(leaf.shape[1:]) * storage_dtype(leaf.dtype).itemsize
    nbytes = (hi - lo) * row_bytes
    shape = (hi - lo, *leaf.shape[1:])
    parts = s.parts
    if own and parts is not None and parts.group is group:
        p = parts.parts[group.rank]
        if p.buffer is not None and p.first <= lo and hi <= p.hi + p.south:
            at = p.offset(lo, parts.row_bytes)
            return _on_device(leaf, shape, rt, _region(rt, p.buffer, at, nbytes))
    if s.host is not None and s.pending is None:     # (a view reads its base's host copy)
        rows = (s.host if own else leaf.to_numpy())[lo:hi]
        buf = rt.allocate(max(nbytes, 1))
        rt.upload(buf, np.ascontiguousarray(rows).view(storage_dtype(leaf.dtype)), wait=True)
        return _on_device(leaf, shape, rt, buf)
    if own and s.device_valid and s.runtime is rt:
        return _on_device(leaf, shape, rt, _region(rt, s.buffer, lo * row_bytes, nbytes))
    held = "" if own else f" (read as {list(leaf.shape)})"
    raise _needs_others(what, f"rows {lo}..{hi - 1} of an operand of shape {list(s.shape)}"
                              f"{held} that this rank does not hold")


def _region(rt, buffer, at: int, nbytes: int):
    """``nbytes`` of ``buffer`` from byte ``at``: the buffer itself from 0, else a copy."""
    if at == 0:
        return buffer
    out = rt.allocate(max(nbytes, 1))
    if nbytes:
        cl.enqueue_copy(rt.queue, out, buffer, byte_count=nbytes, src_offset=at)
    return out


def _on_device(leaf: Container, shape, rt, buffer) -> Container:
    cls = Vector if len(shape) == 1 else Matrix
    return cls.from_device(buffer, shape, leaf.dtype, rt)


def _needs_others(what: str, reason: str) -> CollectiveError:
    return CollectiveError(
        f"{what}: it reads {reason}, so computing it needs the other ranks (a collective "
        "call), and local_numpy() is a read of this rank alone. Compute it on every rank "
        "first (sk.evaluate(x), or any skeleton call or to_numpy() on every rank), then "
        "read its rows with local_numpy()")
