"""An OpenCL device as skelpy sees it, and finding devices by what a user names.

The tuner, the cost model and the caches key everything on a device's identity and queries
(:class:`Device`), and ``sk.use``/``SKELPY_DEVICE`` name devices by index, kind, ``"gpu:1"`` or
a name substring (:func:`select_from`). Neither needs a context or a queue, so they live apart
from :mod:`skelpy.runtime`, which opens those.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cached_property

import pyopencl as cl

from .errors import DeviceError


class Device:
    """An OpenCL device as skelpy sees it: a name, a kind, and the queries the tuner uses."""

    def __init__(self, cl_device: cl.Device):
        self.cl_device = cl_device

    @cached_property
    def name(self) -> str:
        return self.cl_device.name.strip()

    @cached_property
    def platform(self) -> str:
        return self.cl_device.platform.name.strip()

    @cached_property
    def kind(self) -> str:
        t = self.cl_device.type
        if t & cl.device_type.GPU:
            return "gpu"
        if t & cl.device_type.CPU:
            return "cpu"
        if t & cl.device_type.ACCELERATOR:
            return "accelerator"
        return "other"

    @cached_property
    def has_fp64(self) -> bool:
        d = self.cl_device
        try:
            if d.double_fp_config:
                return True
        except cl.Error:
            pass
        return "cl_khr_fp64" in d.extensions

    @cached_property
    def max_work_group_size(self) -> int:
        return int(self.cl_device.max_work_group_size)

    @cached_property
    def max_work_item_sizes(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.cl_device.max_work_item_sizes)

    @cached_property
    def local_mem_size(self) -> int:
        return int(self.cl_device.local_mem_size)

    @cached_property
    def max_alloc_size(self) -> int:
        """The largest buffer the device allocates (CL_DEVICE_MAX_MEM_ALLOC_SIZE)."""
        return int(self.cl_device.max_mem_alloc_size)

    @cached_property
    def compute_units(self) -> int:
        return int(self.cl_device.max_compute_units)

    @cached_property
    def ordinal(self) -> int:
        """Position of this device among the identical ones (same platform, name and driver)
        of its platform: 0 for the first."""
        d = self.cl_device
        try:
            same = [x for x in d.platform.get_devices()
                    if x.name == d.name and x.driver_version == d.driver_version]
            return same.index(d)
        except (cl.Error, ValueError):
            return 0

    @cached_property
    def key(self) -> str:
        """Stable identity of this device and driver, for caches and the tuning store. A second
        identical device (two H200s of one host) gets ``| #1`` after it, so that the tuner
        decides, measures and records refusals per device."""
        d = self.cl_device
        key = f"{self.platform} | {self.name} | {d.driver_version.strip()}"
        return key + (f" | #{self.ordinal}" if self.ordinal else "")

    @cached_property
    def short_key(self) -> str:
        return hashlib.sha1(self.key.encode()).hexdigest()[:12]

    @cached_property
    def features(self) -> dict[str, float]:
        """Device queries used as model features ([Cummins 2018] Table 5.1, adapted)."""
        d = self.cl_device

        def q(attr, default=0):
            try:
                return float(getattr(d, attr))
            except (cl.Error, AttributeError, TypeError, ValueError):
                return float(default)

        return {
            "dev_is_gpu": 1.0 if self.kind == "gpu" else 0.0,
            # neither GPU nor CPU: the tuner's models never predict for a kind of device
            # their training data has not seen (0 for every CPU and GPU, as in old data)
            "dev_is_other": 0.0 if self.kind in ("gpu", "cpu") else 1.0,
            "dev_compute_units": q("max_compute_units"),
            "dev_max_wg": q("max_work_group_size"),
            "dev_local_mem": q("local_mem_size"),
            "dev_global_cache": q("global_mem_cache_size"),
            "dev_cacheline": q("global_mem_cacheline_size"),
            "dev_clock_mhz": q("max_clock_frequency"),
            "dev_global_mem": q("global_mem_size"),
            "dev_pref_vec_float": q("preferred_vector_width_float"),
            "dev_has_fp64": 1.0 if self.has_fp64 else 0.0,
        }

    def __repr__(self) -> str:
        return f"<skelpy.Device {self.name!r} ({self.kind}, {self.platform})>"

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) and other.cl_device == self.cl_device

    def __hash__(self) -> int:
        return hash(self.cl_device.int_ptr)


def devices() -> list[Device]:
    """All OpenCL devices on all platforms, GPUs first."""
    found = []
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        platforms = []
    for p in platforms:
        try:
            found.extend(Device(d) for d in p.get_devices())
        except cl.Error:
            continue
    order = {"gpu": 0, "accelerator": 1, "cpu": 2, "other": 3}
    return sorted(found, key=lambda d: order[d.kind])


def select_from(spec, candidates: Sequence[Device]) -> Device:
    """The device of ``candidates`` that ``spec`` names (as :func:`skelpy.use` reads it)."""
    if not candidates:
        raise DeviceError(
            "no OpenCL device found: install an OpenCL runtime (on Debian: "
            "`apt-get install pocl-opencl-icd` for the CPU) and check `clinfo -l`")
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, cl.Device):
        return Device(spec)
    if isinstance(spec, int):
        if not 0 <= spec < len(candidates):
            raise DeviceError(f"device index {spec} out of range: {len(candidates)} devices")
        return candidates[spec]
    if spec is None or str(spec).strip() == "":
        return candidates[0]
    s = str(spec).strip().lower()
    if s.isdigit():
        return select_from(int(s), candidates)
    kind, colon, index = s.partition(":")
    if colon and kind in ("gpu", "cpu", "accelerator") and index.isdigit():
        of_kind = [d for d in candidates if d.kind == kind]      # "gpu:1": the second GPU
        if int(index) >= len(of_kind):
            raise DeviceError(f"no {s!r}: {len(of_kind)} {kind.upper()} device(s); available: "
                              + ", ".join(d.name for d in candidates))
        return of_kind[int(index)]
    if s in ("gpu", "cpu", "accelerator"):
        for d in candidates:
            if d.kind == s:
                return d
        raise DeviceError(f"no {s.upper()} OpenCL device; available: "
                          + ", ".join(d.name for d in candidates))
    for d in candidates:
        if s in d.name.lower() or s in d.platform.lower():
            return d
    raise DeviceError(f"no OpenCL device matches {spec!r}; available: "
                      + ", ".join(d.name for d in candidates))


def select(spec) -> Device:
    """The device ``spec`` names (as :func:`skelpy.use` reads it), without choosing it."""
    return select_from(spec, devices())
