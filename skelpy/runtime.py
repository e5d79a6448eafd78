"""The context and profiling queue of a device, its allocations, transfers and launches, and
which device (or group, or auto mode) later calls use.

One :class:`Runtime` exists per chosen device; a :class:`Group` of several devices (``sk.use(
["gpu:0", "gpu:1"])``, ``sk.use("gpu:*")``) holds one Runtime per device, all in one context
(see :class:`Group` for why). Programs are built and cached per runtime by its
:class:`~skelpy.program_builder.ProgramBuilder`; devices are found and named in
:mod:`skelpy.device`. Every allocation goes through :meth:`Runtime.allocate`, which
refuses a buffer over the device's maximum before asking OpenCL, and every launch through
:meth:`Runtime.launch`, which turns parameter-caused refusals (including local memory over the
device's limit, which PoCL answers by aborting) into :class:`~skelpy.errors.RefusedParameters`
so that the tuner can fall back. Every other OpenCL error comes out as a
:class:`~skelpy.errors.SkelpyError` subclass.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

import numpy as np
import pyopencl as cl
import pyopencl.tools as cl_tools

# Device, devices, select, Launch, TransferStats and event_seconds are read as runtime.X
from .device import Device, devices, select, select_from  # noqa: F401
from .device_groups import Group, is_group_spec, open_group, select_group
from .errors import DeviceError, LaunchError, RefusedParameters, ShapeError
from .program_builder import ProgramBuilder
from .programs import ProgramCache
from .runtime_records import Launch, TransferStats, event_seconds  # noqa: F401

# Launch failures that mean "these launch parameters are not acceptable here" ([Cummins 2018]
# §5.4.1 calls them refused parameters): retrying with other parameters can succeed.
REFUSAL_CODES = frozenset({
    cl.status_code.INVALID_WORK_GROUP_SIZE,
    cl.status_code.INVALID_WORK_ITEM_SIZE,
    cl.status_code.OUT_OF_RESOURCES,
    cl.status_code.INVALID_GLOBAL_WORK_SIZE,
})


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
        self.allocator = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(self.queue))
        self._local_limit = device.local_mem_size
        self.stats = TransferStats()
        # a context over several devices builds a program for this device only
        self.builder = ProgramBuilder(device, self.context, self.stats,
                                      None if context is None else [device.cl_device])
        # Kernel arguments are state of the kernel object: setting them and enqueueing must
        # not interleave between threads that launch the same kernel.
        self._launch_lock = threading.Lock()
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
        """The program for (source, options), from the cache or built now
        (:meth:`ProgramBuilder.build <skelpy.program_builder.ProgramBuilder.build>`)."""
        return self.builder.build(source, options, origin=origin, owner=owner)

    def kernel(self, program: cl.Program, name: str, *, origin: str = "") -> cl.Kernel:
        """The kernel ``name`` of ``program`` (one object per program and name)."""
        return self.builder.kernel(program, name, origin=origin)

    @property
    def programs(self) -> ProgramCache:
        """The cache of this device's built programs (bounds settable on it)."""
        return self.builder.programs

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
        named = [select_from(x.strip(), found) for x in device.partition(":")[2].split(",")
                 if x.strip()]
        rts = [runtime_of(d) for d in dict.fromkeys(named or found)]
        with _current_lock:
            _auto, _current, _auto_list = True, None, rts
        return select_from(None, [r.device for r in rts])
    if is_group_spec(device):                       # several devices at once
        chosen = select_group(device, devices(), select_from)
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
    chosen = select_from(device, devices())
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
