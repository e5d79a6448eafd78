"""Devices, the one context and profiling queue, the program cache, launches and timing.

One :class:`Runtime` exists per chosen device; a :class:`Group` of several devices (``sk.use(
["gpu:0", "gpu:1"])``, ``sk.use("gpu:*")``) holds one Runtime per device, all in one context
(see :class:`Group` for why). Programs are cached in memory by (source,
options) in a :class:`~skelpy.programs.ProgramCache`, an LRU bounded by count and bytes whose
entries also go when the last plan that used them is dropped; beneath that, pyopencl caches
binaries on disk. Kernel objects are created once per program because looking them up on every
launch is slow (pyopencl#830). Every allocation goes through :meth:`Runtime.allocate`, which
refuses a buffer over the device's maximum before asking OpenCL, and every launch through
:meth:`Runtime.launch`, which turns parameter-caused refusals (including local memory over the
device's limit, which PoCL answers by aborting) into :class:`~skelpy.errors.RefusedParameters`
so that the tuner can fall back. Every other OpenCL error comes out as a
:class:`~skelpy.errors.SkelpyError` subclass.
"""

from __future__ import annotations

import hashlib
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.tools as cl_tools

from .build_log import build_warning
from .device_groups import Group, is_group_spec, open_group, select_group
from .errors import BuildError, DeviceError, LaunchError, RefusedParameters, ShapeError
from .programs import ProgramCache

# The build option that lets oclgrind run skelpy's kernels (see Runtime.__init__).
_NO_RESTRICT = "-Drestrict="
# ... and tells device code it runs there (what oclgrind cannot run has another form)
_SIMULATOR = "-DSKP_SIMULATOR=1"

# Launch failures that mean "these launch parameters are not acceptable here" ([Cummins 2018]
# §5.4.1 calls them refused parameters): retrying with other parameters can succeed.
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
    choice: Any = None      # in auto mode: the cost model's DeviceChoice (device, why, error)

    @property
    def kernel_time(self) -> float:
        """Seconds of device time of this call's kernels, from profiling events."""
        return sum(event_seconds(e) for e in self.events)

    def __repr__(self) -> str:
        where = "" if self.choice is None else f", device={self.choice.device!r}"
        return (f"Launch({self.skeleton}, params={self.params}, global={self.global_size}, "
                f"local={self.local_size}, source={self.source!r}{where})")


def event_seconds(event: cl.Event) -> float:
    event.wait()
    return (event.profile.end - event.profile.start) * 1e-9


class _QuietBuilds:
    """``warnings.catch_warnings`` (ignore) around builds that may overlap in threads: it
    changes process-wide state and must not overlap itself, so the first build to start
    enters one scope and the last to finish leaves it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._scope: warnings.catch_warnings | None = None

    def __enter__(self) -> None:
        with self._lock:
            if self._count == 0:
                self._scope = warnings.catch_warnings()
                self._scope.__enter__()
                warnings.simplefilter("ignore")
            self._count += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._count -= 1
            if self._count == 0 and self._scope is not None:
                self._scope.__exit__(None, None, None)
                self._scope = None


class Runtime:
    """The context, queue, allocator and caches for one device.

    A runtime of a :class:`Group` shares the group's context (``context=``) and knows its
    ``group`` and its ``rank`` in it; a runtime of one device has ``group`` None."""

    group: Group | None = None        # the device group this runtime is part of
    rank = 0                          # its position in the group

    def __init__(self, device: Device, context: cl.Context | None = None):
        self.device = device
        try:
            self.context = cl.Context([device.cl_device]) if context is None else context
            self.queue = cl.CommandQueue(
                self.context, device.cl_device,
                properties=cl.command_queue_properties.PROFILING_ENABLE)
        except cl.Error as exc:
            raise DeviceError(f"cannot open {device.name}: {exc}") from exc
        # a context over several devices builds a program for this device only
        self._build_for = None if context is None else [device.cl_device]
        self.allocator = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(self.queue))
        self._local_limit = device.local_mem_size
        self.programs = ProgramCache()
        self._warned_sources: set[str] = set()
        # oclgrind cannot run kernels whose inlined functions take restrict pointers (clang
        # marks them with llvm.experimental.noalias.scope.decl, which it does not know)
        self._simulator = "oclgrind" in device.platform.lower()
        # PoCL builds a program's device binary only when asked for it: asking for its size
        # (for the cache's byte bound) cost a second compile there, so its size is estimated
        self._estimate_binary = "portable computing language" in device.platform.lower()
        # program -> {kernel name: kernel}; an entry goes with its program
        self._kernels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        # one lock per program being built (see build); the warnings filter of overlapping
        # builds is set once for all of them (_QuietBuilds)
        self._building: dict[tuple[str, str], threading.Lock] = {}
        self._quiet = _QuietBuilds()
        # Kernel arguments are state of the kernel object: setting them and enqueueing must
        # not interleave between threads that launch the same kernel.
        self._launch_lock = threading.Lock()
        self.stats = TransferStats()
        # Tests set this to make the runtime refuse chosen launches (fault injection).
        self.refuse_hook: Callable[[str, dict, tuple, tuple | None], bool] | None = None

    # -- memory ----------------------------------------------------------------------------
    def allocate(self, nbytes: int, what: str = "a buffer"):
        """A device buffer of ``nbytes``; a size over the device's maximum allocation is a
        :class:`~skelpy.errors.ShapeError` raised before OpenCL is asked."""
        nbytes = int(nbytes)
        if nbytes > self.device.max_alloc_size:
            check_allocation(self.device, nbytes, what)
        try:
            return self.allocator.allocate(max(nbytes, 1))
        except cl.Error as exc:
            raise DeviceError(f"{self.device.name} could not allocate {what} of "
                              f"{_size(nbytes)}: {exc}") from None

    def upload(self, buffer, host: np.ndarray, wait: bool = False) -> cl.Event:
        self.stats.uploads += 1
        self.stats.upload_bytes += host.nbytes
        return cl.enqueue_copy(self.queue, buffer, host, is_blocking=wait)

    def download(self, host: np.ndarray, buffer) -> None:
        self.stats.downloads += 1
        self.stats.download_bytes += host.nbytes
        cl.enqueue_copy(self.queue, host, buffer, is_blocking=True)

    # -- programs --------------------------------------------------------------------------
    def build(self, source: str, options: Sequence[str] = (), *, origin: str = "",
              owner: object | None = None) -> cl.Program:
        """The program for (source, options), from the cache or built now. ``origin`` (the
        skeleton and its muscle's file and line) starts any BuildError's message; ``owner``
        (a plan) keeps the entry while it lives (see :class:`ProgramCache`)."""
        if self._simulator:
            options = (*options, _NO_RESTRICT, _SIMULATOR)
        opts = " ".join(options)
        key = (source, opts)
        prg = self.programs.get(key, owner)
        if prg is not None:
            return prg
        # One build per program: a second thread asking for the same one waits for it and
        # finds it cached (its lock goes only once the program is in the cache); different
        # programs build at once (a sweep builds a chunk of points ahead, in threads on a GPU).
        with self._lock:
            lock = self._building.setdefault(key, threading.Lock())
        with lock:
            try:
                prg = self.programs.get(key, owner)
                if prg is not None:
                    return prg
                with self._lock:
                    self.stats.builds += 1
                try:
                    with self._quiet:              # pyopencl's "build succeeded with log"
                        prg = cl.Program(self.context, source).build(
                            options=list(options), devices=self._build_for)
                except cl.Error as exc:
                    where = f"{origin}: " if origin else ""
                    raise BuildError(f"{where}the OpenCL compiler for {self.device.name} "
                                     "rejected the generated kernel", source=source,
                                     log=str(exc), options=opts) from None
                binary = (estimated_binary_bytes(source) if self._estimate_binary
                          else _binary_bytes(prg))
                self.programs.put(key, prg, len(source) + binary, owner)
            finally:
                with self._lock:
                    self._building.pop(key, None)
        self._warn_build_log(prg, source, opts, origin)
        return prg

    def _warn_build_log(self, program: cl.Program, source: str, opts: str, origin: str) -> None:
        """Compiler warnings of a successful build, once per program (build_log.py)."""
        if source not in self._warned_sources:
            warning = build_warning(program, self.device, source, opts, origin)
            if warning is not None:
                self._warned_sources.add(source)
                warnings.warn(warning, stacklevel=4)

    def kernel(self, program: cl.Program, name: str, *, origin: str = "") -> cl.Kernel:
        """The kernel ``name`` of ``program`` (one object per program and name)."""
        with self._lock:
            kernels = self._kernels.get(program)
            if kernels is None:
                kernels = self._kernels[program] = {}
            k = kernels.get(name)
            if k is None:
                try:
                    k = kernels[name] = cl.Kernel(program, name)
                except cl.Error as exc:
                    where = f"{origin}: " if origin else ""
                    raise BuildError(
                        f"{where}the OpenCL runtime of {self.device.name} could not create "
                        f"kernel {name!r} from the built program ({exc}); a muscle's source "
                        "must not redefine or hide skelpy's kernels",
                        source=_program_source(program), log=str(exc)) from None
        return k

    def kernel_max_work_group_size(self, kernel: cl.Kernel) -> int:
        return int(kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE,
                                              self.device.cl_device))

    def kernel_local_mem_size(self, kernel: cl.Kernel) -> int:
        """Bytes of local memory the kernel declares itself (its ``__local`` arrays)."""
        size = getattr(kernel, "_skelpy_local", None)
        if size is None:
            try:
                size = int(kernel.get_work_group_info(
                    cl.kernel_work_group_info.LOCAL_MEM_SIZE, self.device.cl_device))
            except cl.Error:
                size = 0
            kernel._skelpy_local = size
        return size

    # -- launching -------------------------------------------------------------------------
    def launch(self, kernel: cl.Kernel, global_size: tuple[int, ...],
               local_size: tuple[int, ...] | None, args: Sequence, *, params: dict,
               skeleton: str = "", origin: str = "") -> cl.Event:
        """Enqueue ``kernel``; a parameter-caused failure raises RefusedParameters, any other
        a LaunchError. ``skeleton`` is the skeleton's kind (the refuse hook sees it),
        ``origin`` its muscle's file and line (messages name it)."""
        who = origin or skeleton
        hook = self.refuse_hook
        if hook is not None and hook(skeleton, params, global_size, local_size):
            raise RefusedParameters(f"{who}: launch with {params} refused (injected)",
                                    params=params, code=int(cl.status_code.OUT_OF_RESOURCES))
        try:
            with self._launch_lock:
                local = self._set_args(kernel, args)
                static = getattr(kernel, "_skelpy_local", None)
                local += self.kernel_local_mem_size(kernel) if static is None else static
                if local > self._local_limit:
                    self._refuse_local_memory(kernel, local, params, who)
                event = cl.enqueue_nd_range_kernel(self.queue, kernel, global_size, local_size)
        except cl.Error as exc:
            kernel._skelpy_args = None
            code = _error_code(exc)
            if code in REFUSAL_CODES:
                raise RefusedParameters(
                    f"{who}: the OpenCL runtime refused launch parameters {params} "
                    f"(global {global_size}, local {local_size}): {exc}",
                    params=params, code=code) from None
            raise LaunchError(f"{who}: kernel launch failed: {exc}") from None
        self.stats.launches += 1
        return event

    def _refuse_local_memory(self, kernel, need: int, params: dict, who: str) -> None:
        kernel._skelpy_args = None
        raise RefusedParameters(
            f"{who}: launch parameters {params} need {need} bytes of local memory per "
            f"work-group; {self.device.name} has {self._local_limit}",
            params=params, code=int(cl.status_code.OUT_OF_RESOURCES))

    def _set_args(self, kernel: cl.Kernel, args: Sequence) -> int:
        """Set only the arguments that changed since this kernel's last launch; returns the
        bytes of local memory the arguments ask for.

        Kernel arguments persist in OpenCL, and a repeated call usually differs in its output
        buffer alone. Setting a NumPy scalar through pyopencl's generic path costs ~9 us;
        its packed bytes go in through ``_set_arg_buf`` in ~0.4 us. Buffers compare by their
        cl_mem handle (pool blocks are reused, so the handle often repeats). The last values
        live on the kernel object, so they go when the kernel goes."""
        last = getattr(kernel, "_skelpy_args", None)
        if last is None or len(last) != len(args):
            last = kernel._skelpy_args = [None] * len(args)
        local = 0
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
                elif isinstance(a, cl.LocalMemory):
                    local += a.size
                    key = ("local", a.size)
                    if last[i] != key:
                        kernel.set_arg(i, a)
                        last[i] = key
                else:
                    last[i] = None
                    kernel.set_arg(i, a)
        except BaseException:
            kernel._skelpy_args = None
            raise
        return local

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
        rows = host.shape[-2]
        if len(pitches) == 1:               # rows of one rectangle
            planes, row_pitch, slice_pitch = 1, pitches[0], 0
        else:                               # planes of rows
            planes, (slice_pitch, row_pitch) = host.shape[-3], pitches
        grid = host.reshape(planes, rows, host.shape[-1])
        # NVIDIA checks a rectangle as if its last row (and plane) spanned a whole pitch, so
        # a grid that ends near the buffer's end is refused (INVALID_VALUE) although OpenCL
        # allows it: the last plane and the last row of the last plane go separately.
        if planes > 1:
            self._copy_rect(grid[:-1], buffer, offset, row_pitch, slice_pitch, to_device)
        last = offset + (planes - 1) * slice_pitch
        if rows > 1:
            self._copy_rect(grid[-1:, :-1], buffer, last, row_pitch, 0, to_device)
        tail = grid[-1, -1]
        tail_offset = last + (rows - 1) * row_pitch
        if to_device:
            cl.enqueue_copy(self.queue, buffer, tail, dst_offset=tail_offset, is_blocking=True)
        else:
            cl.enqueue_copy(self.queue, tail, buffer, src_offset=tail_offset, is_blocking=True)

    def _copy_rect(self, grid: np.ndarray, buffer, offset: int, row_pitch: int,
                   slice_pitch: int, to_device: bool) -> None:
        """One rectangular copy of ``grid`` (planes, rows, items), a C-contiguous view."""
        planes, rows, items = grid.shape
        width = items * grid.itemsize
        if planes > 1:
            z, rest = divmod(offset, slice_pitch)
        else:
            z, rest, slice_pitch = 0, offset, 0
        y, x = divmod(rest, row_pitch)
        rect = {"buffer_origin": (x, y, z), "host_origin": (0, 0, 0),
                "region": (width, rows, planes), "buffer_pitches": (row_pitch, slice_pitch),
                "host_pitches": (width, width * rows if planes > 1 else 0),
                "is_blocking": True}
        if to_device:
            cl.enqueue_copy(self.queue, buffer, grid, **rect)
        else:
            cl.enqueue_copy(self.queue, grid, buffer, **rect)


def check_allocation(device: Device, nbytes: int, what: str = "a buffer",
                     origin: str = "") -> None:
    """Raise :class:`~skelpy.errors.ShapeError` when ``nbytes`` is more than ``device``
    allocates in one buffer; skeletons call it with their origin before allocating."""
    limit = device.max_alloc_size
    if nbytes > limit:
        where = f"{origin}: " if origin else ""
        raise ShapeError(f"{where}{what} needs {_size(nbytes)}, more than the "
                         f"{_size(limit)} {device.name} allocates in one buffer "
                         "(CL_DEVICE_MAX_MEM_ALLOC_SIZE)")


def _size(nbytes: int) -> str:
    if nbytes < 1 << 20:
        return f"{nbytes} bytes"
    return f"{nbytes} bytes ({nbytes / (1 << 30):.2f} GiB)"


def estimated_binary_bytes(source: str) -> int:
    """A program's binary size where it is not asked for (PoCL, measured: 48 KB for an empty
    kernel, 309 KB for a 21 KB Reduce program)."""
    return (48 << 10) + 12 * len(source)


def _binary_bytes(program: cl.Program) -> int:
    try:
        return int(sum(program.binary_sizes))
    except (cl.Error, TypeError):
        return 0


def _program_source(program: cl.Program) -> str:
    try:
        return str(program.get_info(cl.program_info.SOURCE))
    except cl.Error:
        return ""


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
_runtimes: dict[Device, Runtime] = {}
_groups: dict[tuple[Device, ...], Group] = {}     # device groups opened, by their devices
_auto = False
_auto_list: list[Runtime] | None = None


def select(spec) -> Device:
    """The device ``spec`` names (as :func:`use` reads it), without choosing it."""
    return _select(spec, devices())


def runtime_of(device: Device) -> Runtime:
    """The one runtime of ``device`` in this process (opened on first use)."""
    rt = _runtimes.get(device)
    if rt is None:
        with _current_lock:
            rt = _runtimes.get(device)
            if rt is None:
                rt = _runtimes[device] = Runtime(device)
    return rt


def use(device=None) -> Device | list[Device]:
    """Choose the device for all later skeleton calls: a :class:`Device`, an index into
    :func:`devices`, ``"gpu"``/``"cpu"``, ``"gpu:1"`` (the second GPU), or a substring of the
    device or platform name. A list of those, or a pattern (``"gpu:*"``, ``"cpu:*"``),
    chooses a device group: skeletons then run on all of them (returns the list; a group of
    one device is that device). ``"auto"``: each call runs on the device with the lowest
    predicted time for it (``skelpy.costmodel``), among all devices or, with
    ``"auto:gpu,cpu"``, among those named; returns the first candidate. ``"mpi"``
    (``"mpi:gpu"``, ``"mpi:cpu"``), in a program started by ``mpiexec``: one device per rank,
    the ranks a group (:mod:`skelpy.mpi`)."""
    global _current, _auto, _auto_list
    if isinstance(device, str) and device.strip().lower().partition(":")[0] == "mpi":
        from . import mpi  # imports mpi4py: only when asked for
        rt = mpi.open_group(device, devices(), Runtime)
        with _current_lock:
            _auto, _current = False, rt
        return list(rt.group.devices)
    if isinstance(device, str) and device.strip().lower().split(":", 1)[0] == "auto":
        found = devices()
        named = [_select(x.strip(), found) for x in device.partition(":")[2].split(",")
                 if x.strip()]
        rts = [runtime_of(d) for d in dict.fromkeys(named or found)]
        with _current_lock:
            _auto, _current, _auto_list = True, None, rts
        return _select(None, [r.device for r in rts])
    if is_group_spec(device):                       # several devices at once
        chosen = select_group(device, devices(), _select)
        if len(chosen) > 1:
            with _current_lock:
                key = tuple(chosen)
                group = _groups.get(key)
                if group is None:
                    group = _groups[key] = open_group(chosen, Runtime)
                _auto, _current = False, group.runtimes[0]
            return chosen
        rt = runtime_of(chosen[0])                  # a group of one device is that device
        with _current_lock:
            _auto, _current = False, rt
        return chosen
    chosen = _select(device, devices())
    rt = runtime_of(chosen)
    with _current_lock:
        _auto, _current = False, rt
    return chosen


def current() -> Runtime:
    """The runtime of the chosen device (of a group: its first device's), opening the default
    one on first use (in auto mode, the default device's: calls choose their own through
    ``skelpy.costmodel``)."""
    rt = _current
    if rt is not None:
        return rt
    if not _auto:
        use(os.environ.get("SKELPY_DEVICE") or None)
        if _current is not None:
            return _current
    return auto_runtimes()[0]


def fixed() -> Runtime | None:
    """The runtime every call uses, None in auto mode (and before the first call)."""
    return _current


def auto() -> bool:
    """Whether each call chooses its device (``sk.use("auto")``, ``SKELPY_DEVICE=auto``)."""
    if _current is None and not _auto:
        env = (os.environ.get("SKELPY_DEVICE") or "").strip()
        if env.lower().split(":", 1)[0] == "auto":
            use(env)
    return _auto


def auto_runtimes() -> list[Runtime]:
    """The candidates of a call in auto mode (``use("auto:...")``; all devices, GPUs
    first, by default)."""
    return _auto_list or [runtime_of(d) for d in devices()]


def current_device() -> Device:
    """The device in use (of a group: its first)."""
    return current().device


def current_devices() -> list[Device]:
    """The devices in use: the group's, or the one device."""
    rt = current()
    return list(rt.group.devices) if rt.group is not None else [rt.device]
