"""The repeated launches of one stencil call on a device group, prepared once.

Between two halo exchanges each device runs one kernel per step (or per pass of t steps),
alternating between two buffers. Re-planning every launch (options, geometry, argument lists,
a Launch record each) cost more host time than a step of a 4096^2 stencil on an H200 (issue
13: 2 x H200 spent ~100 us per step against ~35 us of kernel), and so did comparing and
setting its arguments (~5 us of Python a launch): at 4096^2 on two H200s a pass takes ~80 us
per device, and the host must enqueue both devices' passes in well under that, or in a slow
moment (a noisy VM) the devices wait for it. So every launch (device, kernel, window of rows,
source and destination buffer) gets a copy of the kernel of its own (:func:`copy_of`), whose
arguments the runtime sets and checks at its first launch (refusals, local memory); after
that a launch is one OpenCL call, with nothing set. Copies are kept across calls (pool buffers
are reused, so a loop of calls meets the same buffers and windows again). The launches'
events are kept by device and summarised in one Launch per device at the end of the call.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyopencl as cl

from .. import runtime as _rt

__all__ = ["Repeats", "copy_of", "arg_key"]

KEPT_COPIES = 64       # kernel copies kept per window (buffer pairs) across calls


class Repeats:
    """The launches of one call: their events, and the kernel copies' first launches."""

    def __init__(self, kind: str, origin: str):
        self.kind, self.origin = kind, origin
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

    def fire(self, rank: int, rt, own: cl.Kernel, gsize, lsize, point: dict,
             make_args: Callable[[], list]) -> cl.Event:
        """Enqueue the kernel copy ``own`` (see :func:`copy_of`) on ``rt``'s queue; no wait,
        and no flush but after the device's first launch of the call. The copy's first
        launch goes through the runtime (``make_args()``: the whole argument list, set then;
        refusals and local memory checked); later ones are one OpenCL call."""
        if own.__dict__.get("_skelpy_ready") and rt.refuse_hook is None:
            try:
                ev = cl.enqueue_nd_range_kernel(rt.queue, own, gsize, lsize)
            except cl.Error:                  # the runtime's launch says why, as it would
                own._skelpy_ready = False
                own._skelpy_args = None
                ev = self._launch(rt, own, gsize, lsize, point, make_args())
            else:
                rt.stats.launches += 1
        else:
            ev = self._launch(rt, own, gsize, lsize, point, make_args())
            own._skelpy_ready = True
        evs = self.events.get(rank)
        if evs is None:                       # the device's first launch of the call: submit
            evs = self.events[rank] = []      # it now, so that the device starts while the
            self._first[rank] = (point, gsize, lsize)    # host enqueues the rest
            rt.queue.flush()
        evs.append(ev)
        self.count += 1
        return ev

    def _launch(self, rt, own, gsize, lsize, point, args) -> cl.Event:
        return rt.launch(own, gsize, lsize, args, params=point, skeleton=self.kind,
                         origin=self.origin)

    def records(self, source: str) -> dict[int, _rt.Launch]:
        """One Launch per device for its repeated launches (the first one's sizes)."""
        out = {}
        for rank, evs in self.events.items():
            point, gsize, lsize = self._first[rank]
            out[rank] = _rt.Launch(self.kind, dict(point), gsize, lsize, list(evs),
                                   source=source)
        return out


def arg_key(a) -> object:
    """A hashable stand-in for a kernel argument (a buffer by its handle, local memory by
    its size)."""
    if isinstance(a, np.generic):
        return (a.dtype.str, a.tobytes())
    if isinstance(a, cl.LocalMemory):
        return ("local", a.size)
    ptr = getattr(a, "int_ptr", None)
    return ("mem", ptr) if ptr is not None else ("obj", id(a))


def copy_of(copies: dict, key, kernel: cl.Kernel, kept: int = KEPT_COPIES) -> cl.Kernel:
    """The copy of ``kernel`` kept in ``copies`` for ``key`` (at most ``kept``: the oldest
    made goes first). ``key`` with the place ``copies`` is kept in must fix every argument of
    the copy's launches (buffers by handle, as the runtime's argument cache tells them apart,
    and the rest) and its sizes: its arguments stay set across the calls that meet it again
    (creating a kernel costs a driver call, setting its arguments one per argument)."""
    own = copies.get(key)
    if own is None:
        own = cl.Kernel(kernel.program, kernel.function_name)
        local = kernel.__dict__.get("_skelpy_local")
        if local is not None:
            own._skelpy_local = local
        while len(copies) >= kept:
            copies.pop(next(iter(copies)))
        copies[key] = own
    return own
