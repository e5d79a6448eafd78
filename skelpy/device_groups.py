"""Device groups: several devices of one platform used at once (SkelCL's device group).

``sk.use(["gpu:0", "gpu:1"])``, ``sk.use("gpu:*")`` or ``sk.use("cpu:*")`` choose a group;
:mod:`skelpy.runtime` opens it (one context, one Runtime per device) and skeletons then run on
all its devices (:mod:`skelpy.distribution`). This module holds what a group is and how a spec
names one; it imports no other skelpy module, so that the runtime can use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyopencl as cl

from .errors import DeviceError

if TYPE_CHECKING:
    from .device import Device
    from .runtime import Runtime


@dataclass(eq=False)
class Group:
    """Several devices of one platform used at once: one Runtime per device (its own queue,
    allocator and programs), all in ONE context.

    Why one context for the group rather than one per device: host-pinned buffers
    (``CL_MEM_ALLOC_HOST_PTR``) belong to a context, so with one context a pinned staging
    buffer written by one device's queue is read by another's directly, and events order
    commands across the queues, so an exchange needs no host round trip (NVIDIA accepts one
    context over two H200s; PoCL over its CPU devices). A device buffer is only ever used by
    its own device's queues: a buffer used by two devices of one context is migrated by the
    driver, at 1.4 GB/s between two H200s against 55 GB/s through pinned host memory."""

    devices: tuple[Device, ...]
    context: cl.Context
    runtimes: tuple[Runtime, ...]
    exchange: Any = None              # the in-process exchange, set by skelpy.distribution

    @property
    def size(self) -> int:
        return len(self.runtimes)

    def __repr__(self) -> str:
        return "<skelpy.Group " + ", ".join(d.name for d in self.devices) + ">"


def is_group_spec(spec) -> bool:
    """A list or tuple of device specs, a comma list, or a pattern with ``*`` (``"gpu:*"``,
    ``"cpu:*"``, ``"*"``): several devices."""
    return isinstance(spec, (list, tuple)) or (isinstance(spec, str)
                                               and ("*" in spec or "," in spec))


def select_group(spec, candidates: Sequence[Device],
                 select: Callable[[Any, Sequence[Device]], Device]) -> list[Device]:
    """The devices a group spec names, each once: in the order given, or for a pattern in
    ``candidates`` order. ``select`` picks one device from one spec."""
    if isinstance(spec, str) and "*" in spec:
        kind = spec.strip().lower().partition(":")[0]
        if kind in ("", "*"):
            return list(candidates)
        chosen = [d for d in candidates if d.kind == kind]
        if not chosen:
            raise DeviceError(f"{spec!r}: no {kind.upper()} OpenCL device; available: "
                              + ", ".join(d.name for d in candidates))
        return chosen
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    chosen: list[Device] = []
    for item in items:
        d = select(item.strip() if isinstance(item, str) else item, candidates)
        if d not in chosen:
            chosen.append(d)
    if not chosen:
        raise DeviceError(f"an empty device group {spec!r}")
    return chosen


def open_group(devices: Sequence[Device], make_runtime: Callable[..., Runtime]) -> Group:
    """One context over ``devices`` (of one platform) and one Runtime per device in it,
    made by ``make_runtime(device, context=...)``."""
    if len({d.platform for d in devices}) > 1:
        raise DeviceError("a device group needs devices of one OpenCL platform; got "
                          + ", ".join(f"{d.name} ({d.platform})" for d in devices))
    try:
        context = cl.Context([d.cl_device for d in devices])
    except cl.Error as exc:
        raise DeviceError("cannot open one context over "
                          + ", ".join(d.name for d in devices) + f": {exc}") from exc
    runtimes = [make_runtime(d, context=context) for d in devices]
    group = Group(tuple(devices), context, tuple(runtimes))
    for rank, rt in enumerate(runtimes):
        rt.group, rt.rank = group, rank
    return group
