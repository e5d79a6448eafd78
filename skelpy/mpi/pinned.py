"""Host memory for what goes between the device and MPI: pinned buffers (``CL_MEM_ALLOC_HOST_PTR``,
mapped once, so MPI reads and writes the memory the device copies to and from), and the
pieces a large buffer is sent in (MPI counts are C ints)."""

from __future__ import annotations

import numpy as np
import pyopencl as cl

__all__ = ["CHUNK", "Pinned", "chunks"]

CHUNK = 1 << 30                  # bytes per MPI message (MPI counts are C ints)


class Pinned:
    """A pinned host buffer, mapped once; ``busy``: events of the copies and messages that
    still use it."""

    __slots__ = ("buffer", "host", "busy")

    def __init__(self, context, queue, nbytes: int):
        mf = cl.mem_flags
        self.buffer = cl.Buffer(context, mf.READ_WRITE | mf.ALLOC_HOST_PTR, nbytes)
        self.host, _ev = cl.enqueue_map_buffer(queue, self.buffer,
                                               cl.map_flags.READ | cl.map_flags.WRITE, 0,
                                               (nbytes,), np.uint8)
        self.busy: list = []

    def idle(self) -> bool:
        done = cl.command_execution_status.COMPLETE
        self.busy = [e for e in self.busy if e.command_execution_status != done]
        return not self.busy


def chunks(view: np.ndarray):
    """``view`` in messages MPI can count (at most CHUNK bytes each)."""
    for at in range(0, view.nbytes, CHUNK):
        yield view[at:at + CHUNK]
