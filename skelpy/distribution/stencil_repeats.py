"""The repeated launches of one stencil call on a device group, prepared once per call.

Between two halo exchanges each device runs one kernel per step (or per pass of t steps),
alternating between two buffers. Re-planning every launch (options, geometry, argument lists,
a Launch record each) cost more host time than a step of a 4096^2 stencil on an H200 (issue
13: 2 x H200 spent ~100 us per step against ~35 us of kernel). Here each (device, kernel,
source buffer, destination buffer) gets its own kernel object whose arguments stay set, so a
step changes at most its row window (two scalars, set only when they differ) before the
enqueue; the launches' events are kept by device and summarised in one Launch per device at
the end of the call.
"""

from __future__ import annotations

from collections.abc import Callable

import pyopencl as cl

from .. import runtime as _rt

__all__ = ["Repeats"]


class Repeats:
    """Prepared kernels, argument lists and geometries of one call, and its launches' events."""

    def __init__(self, kind: str, origin: str):
        self.kind, self.origin = kind, origin
        self._entries: dict[tuple, tuple[cl.Kernel, list]] = {}
        self._memo: dict[tuple, object] = {}
        self.events: dict[int, list] = {}
        self._first: dict[int, tuple] = {}
        self.count = 0

    def memo(self, key: tuple, make: Callable[[], object]):
        """``make()``, once per ``key`` in this call (geometries, kernels, row schedules)."""
        value = self._memo.get(key)
        if value is None:
            value = self._memo[key] = make()
        return value

    def entry(self, rank: int, kernel: cl.Kernel, src, dst,
              make_args: Callable[[], list]) -> tuple[cl.Kernel, list]:
        """The kernel object of device ``rank`` that reads buffer ``src`` and writes ``dst``
        (a copy of ``kernel`` for each pair of buffers, so that its buffer arguments are set
        once), with its argument list (``make_args()`` on first use; the caller updates the
        window's scalars in place)."""
        key = (rank, kernel.int_ptr, src.int_ptr, dst.int_ptr)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = (_copy_for(kernel, src, dst), make_args())
        return entry

    def launch(self, rt: _rt.Runtime, rank: int, kernel: cl.Kernel, gsize, lsize,
               args: list, point: dict) -> cl.Event:
        """Enqueue on ``rt`` (only the arguments that changed are set); no flush, no wait."""
        ev = rt.launch(kernel, gsize, lsize, args, params=point, skeleton=self.kind,
                       origin=self.origin)
        evs = self.events.get(rank)
        if evs is None:
            evs = self.events[rank] = []
            self._first[rank] = (point, gsize, lsize)
        evs.append(ev)
        self.count += 1
        return ev

    def records(self, source: str) -> dict[int, _rt.Launch]:
        """One Launch per device for its repeated launches (the first one's sizes)."""
        out = {}
        for rank, evs in self.events.items():
            point, gsize, lsize = self._first[rank]
            out[rank] = _rt.Launch(self.kind, dict(point), gsize, lsize, list(evs),
                                   source=source)
        return out


KEPT_COPIES = 8        # kernel copies kept per kernel across calls (the most recent pairs)


def _copy_for(kernel: cl.Kernel, src, dst) -> cl.Kernel:
    """A copy of ``kernel`` for the buffers ``src`` -> ``dst``, kept on ``kernel`` across calls:
    pool buffers are reused, so a loop of calls meets the same pairs again, and the copy's
    arguments are then already set (creating a kernel costs a driver call per call and
    device otherwise). Buffers are told apart by their handle, as the runtime's argument
    cache does."""
    copies = getattr(kernel, "_skelpy_copies", None)
    if copies is None:
        copies = kernel._skelpy_copies = {}
    pair = (src.int_ptr, dst.int_ptr)
    own = copies.pop(pair, None)
    if own is None:
        own = cl.Kernel(kernel.program, kernel.function_name)
        local = getattr(kernel, "_skelpy_local", None)
        if local is not None:
            own._skelpy_local = local
        while len(copies) >= KEPT_COPIES:
            copies.pop(next(iter(copies)))
    copies[pair] = own                    # the most recent last
    return own
