"""Pinned host memory for exchanges between devices (in one process, or through MPI): buffers
allocated with ``CL_MEM_ALLOC_HOST_PTR`` and mapped once, so the device copies to and from the
memory the host (or MPI) reads and writes, and a pool that reuses them."""

from __future__ import annotations

import numpy as np
import pyopencl as cl

__all__ = ["Pinned", "PinnedPool"]


class Pinned:
    """A pinned host buffer, mapped once; ``busy``: events of the copies and messages that
    still use it."""

    __slots__ = ("buffer", "host", "busy")

    def __init__(self, context: cl.Context, queue: cl.CommandQueue, nbytes: int):
        mf = cl.mem_flags
        self.buffer = cl.Buffer(context, mf.READ_WRITE | mf.ALLOC_HOST_PTR, nbytes)
        self.host, _ev = cl.enqueue_map_buffer(queue, self.buffer,
                                               cl.map_flags.READ | cl.map_flags.WRITE, 0,
                                               (nbytes,), np.uint8)
        self.busy: list = []

    @property
    def nbytes(self) -> int:
        return self.host.nbytes

    def idle(self) -> bool:
        done = cl.command_execution_status.COMPLETE
        self.busy = [e for e in self.busy if e.command_execution_status != done]
        return not self.busy


class PinnedPool:
    """Pinned buffers kept for reuse: :meth:`get` hands out the smallest idle one that holds
    ``nbytes``, or maps a new one (a power of two, at least 4 KiB) on ``map_queue`` (a queue of
    its own: a blocking map behind a copy queue's copies would wait for the kernels they wait
    for); idle buffers beyond ``max_idle`` bytes in all are let go, smallest first."""

    def __init__(self, context: cl.Context, map_queue: cl.CommandQueue, max_idle: int):
        self.context, self.map_queue, self.max_idle = context, map_queue, max_idle
        self._buffers: list[Pinned] = []

    def __len__(self) -> int:
        return len(self._buffers)

    def get(self, nbytes: int) -> Pinned:
        best = None
        for p in self._buffers:
            if p.nbytes >= nbytes and p.idle() and (best is None or p.nbytes < best.nbytes):
                best = p
        if best is None:
            best = Pinned(self.context, self.map_queue,
                          max(4096, 1 << (max(nbytes, 1) - 1).bit_length()))
            self._buffers.append(best)
            idle = [p for p in self._buffers if not p.busy and p is not best]
            total = sum(p.nbytes for p in idle)
            for p in sorted(idle, key=lambda p: p.nbytes):
                if total <= self.max_idle:
                    break
                self._buffers.remove(p)
                total -= p.nbytes
        return best
