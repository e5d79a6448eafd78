"""Devices, the one context and profiling queue, the program cache, launches and timing.

One :class:`Runtime` exists per chosen device. Programs are cached in memory by
(source, options) and, beneath that, on disk by pyopencl's own binary cache; kernel objects are
fetched once per program because looking them up on every launch is slow (pyopencl#830).
Every launch goes through :meth:`Runtime.launch`, which turns parameter-caused refusals into
:class:`~skelpy.errors.RefusedParameters` so that the tuner can fall back.
"""

from __future__ import annotations

import hashlib
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.tools as cl_tools

from .errors import BuildError, DeviceError, LaunchError, RefusedParameters

KERNEL_DIR = Path(__file__).parent / "kernels"

# Launch failures that mean "these launch parameters are not acceptable here" (seed 002 calls
# them refused parameters): retrying with other parameters can succeed.
REFUSAL_CODES = frozenset({
    cl.status_code.INVALID_WORK_GROUP_SIZE,
    cl.status_code.INVALID_WORK_ITEM_SIZE,
    cl.status_code.OUT_OF_RESOURCES,
    cl.status_code.INVALID_GLOBAL_WORK_SIZE,
})


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
    def compute_units(self) -> int:
        return int(self.cl_device.max_compute_units)

    @cached_property
    def key(self) -> str:
        """Stable identity of this device and driver, for caches and the tuning store."""
        d = self.cl_device
        return f"{self.platform} | {self.name} | {d.driver_version.strip()}"

    @cached_property
    def short_key(self) -> str:
        return hashlib.sha1(self.key.encode()).hexdigest()[:12]

    @cached_property
    def features(self) -> dict[str, float]:
        """Device queries used as model features (seed 002 Table 5.1, adapted)."""
        d = self.cl_device

        def q(attr, default=0):
            try:
                return float(getattr(d, attr))
            except (cl.Error, AttributeError, TypeError, ValueError):
                return float(default)

        return {
            "dev_is_gpu": 1.0 if self.kind == "gpu" else 0.0,
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


def _select(spec, candidates: Sequence[Device]) -> Device:
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
        return _select(int(s), candidates)
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


@dataclass
class TransferStats:
    """Counts of host<->device traffic; tests use it to prove laziness."""

    uploads: int = 0
    downloads: int = 0
    upload_bytes: int = 0
    download_bytes: int = 0
    launches: int = 0
    builds: int = 0

    def reset(self) -> None:
        for f in ("uploads", "downloads", "upload_bytes", "download_bytes", "launches", "builds"):
            setattr(self, f, 0)


@dataclass
class Launch:
    """What one skeleton call ran: parameters, sizes and (lazily) the kernel time."""

    skeleton: str
    params: dict
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    events: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    source: str = "default"

    @property
    def kernel_time(self) -> float:
        """Seconds of device time of this call's kernels, from profiling events."""
        return sum(event_seconds(e) for e in self.events)

    def __repr__(self) -> str:
        return (f"Launch({self.skeleton}, params={self.params}, global={self.global_size}, "
                f"local={self.local_size}, source={self.source!r})")


def event_seconds(event: cl.Event) -> float:
    event.wait()
    return (event.profile.end - event.profile.start) * 1e-9


class Runtime:
    """The context, queue, allocator and caches for one device."""

    def __init__(self, device: Device):
        self.device = device
        try:
            self.context = cl.Context([device.cl_device])
            self.queue = cl.CommandQueue(
                self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        except cl.Error as exc:
            raise DeviceError(f"cannot open {device.name}: {exc}") from exc
        self.allocator = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(self.queue))
        self._programs: dict[tuple[str, str], cl.Program] = {}
        self._kernels: dict[tuple[int, str], cl.Kernel] = {}
        # per kernel, what its arguments were last set to (see _set_args)
        self._kernel_args: dict[cl.Kernel, list] = {}
        self._lock = threading.Lock()
        self._building: dict[tuple[str, str], threading.Lock] = {}
        self.stats = TransferStats()
        # Tests set this to make the runtime refuse chosen launches (fault injection).
        self.refuse_hook: Callable[[str, dict, tuple, tuple | None], bool] | None = None

    # -- memory ----------------------------------------------------------------------------
    def allocate(self, nbytes: int):
        return self.allocator.allocate(max(int(nbytes), 1))

    def upload(self, buffer, host: np.ndarray, wait: bool = False) -> cl.Event:
        self.stats.uploads += 1
        self.stats.upload_bytes += host.nbytes
        return cl.enqueue_copy(self.queue, buffer, host, is_blocking=wait)

    def download(self, host: np.ndarray, buffer) -> None:
        self.stats.downloads += 1
        self.stats.download_bytes += host.nbytes
        cl.enqueue_copy(self.queue, host, buffer, is_blocking=True)

    # -- programs --------------------------------------------------------------------------
    def build(self, source: str, options: Sequence[str] = ()) -> cl.Program:
        opts = " ".join(options)
        key = (source, opts)
        prg = self._programs.get(key)
        if prg is not None:
            return prg
        with self._lock:                 # one build per key; different keys build at once
            lock = self._building.setdefault(key, threading.Lock())
        with lock:
            prg = self._programs.get(key)
            if prg is not None:
                return prg
            self.stats.builds += 1
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # pyopencl's "build succeeded with log"
                    prg = cl.Program(self.context, source).build(
                        options=list(options))
            except cl.RuntimeError as exc:
                log = str(exc)
                raise BuildError(f"the OpenCL compiler for {self.device.name} rejected the "
                                 "generated kernel", source=source, log=log,
                                 options=opts) from None
            self._programs[key] = prg
        with self._lock:
            self._building.pop(key, None)
        return prg

    def kernel(self, program: cl.Program, name: str) -> cl.Kernel:
        key = (id(program), name)
        k = self._kernels.get(key)
        if k is None:
            k = self._kernels[key] = getattr(program, name)
        return k

    def kernel_max_work_group_size(self, kernel: cl.Kernel) -> int:
        return int(kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE,
                                              self.device.cl_device))

    # -- launching -------------------------------------------------------------------------
    def launch(self, kernel: cl.Kernel, global_size: tuple[int, ...],
               local_size: tuple[int, ...] | None, args: Sequence, *, params: dict,
               skeleton: str = "") -> cl.Event:
        """Enqueue ``kernel``; a parameter-caused failure raises RefusedParameters."""
        hook = self.refuse_hook
        if hook is not None and hook(skeleton, params, global_size, local_size):
            raise RefusedParameters(f"{skeleton}: launch with {params} refused (injected)",
                                    params=params, code=int(cl.status_code.OUT_OF_RESOURCES))
        try:
            self._set_args(kernel, args)
            event = cl.enqueue_nd_range_kernel(self.queue, kernel, global_size, local_size)
        except cl.Error as exc:
            self._kernel_args.pop(kernel, None)
            code = _error_code(exc)
            if code in REFUSAL_CODES:
                raise RefusedParameters(
                    f"{skeleton}: the OpenCL runtime refused launch parameters {params} "
                    f"(global {global_size}, local {local_size}): {exc}",
                    params=params, code=code) from None
            raise LaunchError(f"{skeleton}: kernel launch failed: {exc}") from None
        self.stats.launches += 1
        return event

    def _set_args(self, kernel: cl.Kernel, args: Sequence) -> None:
        """Set only the arguments that changed since this kernel's last launch.

        Kernel arguments persist in OpenCL, and a repeated call usually differs in its output
        buffer alone. Setting a NumPy scalar through pyopencl's generic path costs ~9 us;
        its packed bytes go in through ``_set_arg_buf`` in ~0.4 us. Buffers compare by their
        cl_mem handle (pool blocks are reused, so the handle often repeats)."""
        last = self._kernel_args.get(kernel)
        if last is None or len(last) != len(args):
            last = self._kernel_args[kernel] = [None] * len(args)
        try:
            for i, a in enumerate(args):
                if isinstance(a, np.generic):
                    key = a.tobytes()
                    if last[i] != key:
                        kernel._set_arg_buf(i, key)
                        last[i] = key
                elif isinstance(a, cl.MemoryObjectHolder):
                    key = a.int_ptr
                    if last[i] != key:
                        kernel.set_arg(i, a)
                        last[i] = key
                else:
                    last[i] = None
                    kernel.set_arg(i, a)
        except BaseException:
            self._kernel_args.pop(kernel, None)
            raise

    def finish(self) -> None:
        self.queue.finish()

    def copy_part(self, host: np.ndarray, buffer, offset: int, pitches: Sequence[int] = (), *,
                  to_device: bool = False) -> None:
        """Blocking copy between the C-contiguous ``host`` and part of ``buffer``, so that
        element and slice access to a container moves only what it needs. The last axis of
        ``host`` is one contiguous run of bytes, the first at byte ``offset``; ``pitches``
        gives, for each earlier axis (at most two), the distance in bytes between the runs of
        consecutive indices in the buffer (a rectangle, or a regular grid of runs). A grid
        must fit OpenCL's (and CUDA's) rules for a 3-D copy: the first run starts in row
        ``y <= rows_per_plane - rows`` of its plane, each plane holding a whole number of
        rows."""
        if host.nbytes == 0:
            return
        if to_device:
            self.stats.uploads += 1
            self.stats.upload_bytes += host.nbytes
        else:
            self.stats.downloads += 1
            self.stats.download_bytes += host.nbytes
        if not pitches:
            if to_device:
                cl.enqueue_copy(self.queue, buffer, host, dst_offset=offset, is_blocking=True)
            else:
                cl.enqueue_copy(self.queue, host, buffer, src_offset=offset, is_blocking=True)
            return
        width = host.shape[-1] * host.itemsize
        rows = host.shape[-2]
        if len(pitches) == 1:               # rows of one rectangle: origin (byte, row)
            planes, row_pitch, slice_pitch = 1, pitches[0], 0
            z, (y, x) = 0, divmod(offset, row_pitch)
        else:                               # planes of rows: origin (byte, row, plane)
            planes, (slice_pitch, row_pitch) = host.shape[-3], pitches
            z, rest = divmod(offset, slice_pitch)
            y, x = divmod(rest, row_pitch)
        rect = {"buffer_origin": (x, y, z), "host_origin": (0, 0, 0),
                "region": (width, rows, planes), "buffer_pitches": (row_pitch, slice_pitch),
                "host_pitches": (width, width * rows if planes > 1 else 0),
                "is_blocking": True}
        if to_device:
            cl.enqueue_copy(self.queue, buffer, host, **rect)
        else:
            cl.enqueue_copy(self.queue, host, buffer, **rect)


def _error_code(exc: cl.Error) -> int | None:
    try:
        return exc.code
    except AttributeError:
        try:
            return exc.args[0].code()
        except Exception:  # noqa: BLE001 - pyopencl error objects vary by version
            return None


_current: Runtime | None = None
_current_lock = threading.Lock()


def use(device=None) -> Device:
    """Choose the device for all later skeleton calls: a :class:`Device`, an index into
    :func:`devices`, ``"gpu"``/``"cpu"``, or a substring of the device or platform name."""
    global _current
    chosen = _select(device, devices())
    with _current_lock:
        if _current is None or _current.device != chosen:
            _current = Runtime(chosen)
    return chosen


def current() -> Runtime:
    """The runtime of the chosen device, opening the default one on first use."""
    rt = _current
    if rt is not None:
        return rt
    use(os.environ.get("SKELPY_DEVICE") or None)
    assert _current is not None
    return _current


def current_device() -> Device:
    return current().device


def read_kernel(name: str) -> str:
    """The text of ``skelpy/kernels/<name>``."""
    return _kernel_text(name)


_kernel_texts: dict[str, str] = {}


def _kernel_text(name: str) -> str:
    text = _kernel_texts.get(name)
    if text is None:
        text = _kernel_texts[name] = (KERNEL_DIR / name).read_text()
    return text
