"""Where a container's data lives: a host array and a device buffer, each flagged valid.

One small state object per container (views of one container, and distributions over several
devices, can later share or hold several of these). It keeps three promises:

- **Copy on write.** The host array is never written while anybody else can see it: arrays
  handed out (``to_numpy()``, slice reads) and containers built from this one share it, so the
  next write copies it first (``shared``); what was handed out never changes.
- **Locked host array.** The host array is read-only except during the container's own
  writes, so that a read-only view handed out cannot be made writable again.
- **One newest copy.** A host write marks the device copy stale; a device write the host copy.
  A *borrowed* host array is a caller's ndarray wrapped for the length of one skeleton call
  (``as_container``): it is never written and never handed to a longer-lived container.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl

from ..dtypes import storage_dtype
from ..errors import DTypeError, ShapeError
from .selection import Box


class Storage:
    """The host/device state of one container's data (of ``shape`` and ``dtype``)."""

    __slots__ = ("host", "buffer", "device_valid", "runtime", "shape", "dtype", "shared",
                 "borrowed", "editing")

    def __init__(self, host, buffer, runtime, shape, dtype, device_valid, shared, borrowed):
        # host: the host array, None while the device holds the only valid copy
        self.host = host
        self.buffer = buffer
        self.device_valid = device_valid
        self.runtime = runtime
        self.shape = shape
        self.dtype = dtype
        self.shared = shared
        self.borrowed = borrowed
        self.editing = 0

    @classmethod
    def owned(cls, host: np.ndarray) -> Storage:
        """Take ``host`` (a fresh array nobody else holds) as the only copy."""
        if not host.flags.owndata:
            host = host.copy()
        host.flags.writeable = False
        return cls(host, None, None, host.shape, host.dtype, False, False, False)

    @classmethod
    def borrowed_from(cls, host: np.ndarray) -> Storage:
        """Wrap a caller's C-contiguous array without copying it (for one skeleton call)."""
        return cls(host, None, None, host.shape, host.dtype, False, True, True)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    # -- device side ------------------------------------------------------------------------
    def device_buffer(self, rt):
        """The device buffer on runtime ``rt``, uploading the host copy first if it is newer."""
        if self.runtime is not rt:
            # The device changed since this buffer was made: bring the data over via the host.
            if self.device_valid and self.host is None:
                self.sync_host()
            self.buffer = None
            self.device_valid = False
            self.runtime = rt
        if self.buffer is None:
            self.buffer = rt.allocate(self.nbytes)
        if not self.device_valid:
            if self.nbytes:
                rt.upload(self.buffer, self.host.view(storage_dtype(self.dtype)), wait=True)
            # Under an open host_edit the host array may change at any moment: upload again.
            self.device_valid = not self.editing
        return self.buffer

    def device_written(self) -> None:
        self.device_valid = True
        self.host = None

    # -- host side --------------------------------------------------------------------------
    def sync_host(self) -> np.ndarray:
        """The host array, downloaded first if the device holds the newest copy."""
        if self.host is not None:
            return self.host
        host = np.empty(self.shape, self.dtype)
        if host.size:
            self.runtime.download(host.view(storage_dtype(self.dtype)), self.buffer)
        host.flags.writeable = False
        self.host = host
        self.shared = self.borrowed = False
        return host

    def snapshot(self) -> np.ndarray:
        """A read-only array of the data that never changes afterwards (no copy if it can)."""
        host = self.sync_host()
        if self.editing:
            out = host.copy()
        else:
            self.shared = True
            out = host.view()
        out.flags.writeable = False
        return out

    def read_host(self, key):
        """``host[key]`` for a reader: a scalar, or a read-only array that stays as it is."""
        out = self.sync_host()[key]
        if isinstance(out, np.ndarray):
            if np.may_share_memory(out, self.host):
                if self.editing:
                    out = out.copy()
                else:
                    self.shared = True
            out.flags.writeable = False
        return out

    def writable_host(self) -> np.ndarray:
        """The host array made writable, copied first if anybody else can see it; the caller
        must call :meth:`host_written` afterwards (also when its write failed)."""
        host = self.sync_host()
        if self.shared:
            host = np.array(host, order="C")
            self.host, self.shared, self.borrowed = host, False, False
        else:
            host.flags.writeable = True
        return host

    def host_written(self, changed: bool = True) -> None:
        if not self.editing:
            self.host.flags.writeable = False
        if changed:
            self.device_valid = False

    def write_host(self, key, value, what: str) -> None:
        host = self.writable_host()
        try:
            assign(host, key, value, what)
        except BaseException:
            self.host_written(changed=False)
            raise
        self.host_written()

    def begin_edit(self) -> np.ndarray:
        host = self.writable_host()
        self.editing += 1
        self.device_valid = False
        return host

    def end_edit(self) -> None:
        self.editing -= 1
        self.host_written()

    def copy(self) -> Storage:
        """An independent copy: a valid host array is shared until either side writes; a
        valid device copy is duplicated on the device (so a copy of a result stays there)."""
        host = None
        if self.host is not None:
            if self.editing or self.borrowed:
                host = self.host.copy()
                host.flags.writeable = False
            else:
                host = self.host
                self.shared = True
        buf = rt = None
        if self.device_valid:
            rt = self.runtime
            buf = rt.allocate(self.nbytes)
            if self.nbytes:
                cl.enqueue_copy(rt.queue, buf, self.buffer, byte_count=self.nbytes)
        return Storage(host, buf, rt, self.shape, self.dtype, buf is not None,
                       host is not None and host is self.host, False)

    # -- parts of the device copy -----------------------------------------------------------
    def read_box(self, box: Box):
        """The selection of ``box`` read from the device (only the box moves)."""
        if box.empty:
            out = np.empty(box.shape, self.dtype)
        else:
            out = self._download(box)[box.local]
        if isinstance(out, np.ndarray):
            out.flags.writeable = False
        return out

    def write_box(self, box: Box, value, what: str) -> None:
        """Write ``value`` into the selection of ``box`` on the device: the box is uploaded
        (after downloading it when the selection has gaps, so the gaps keep their values)."""
        if box.empty:
            assign(np.empty(box.shape, self.dtype), ..., value, what)   # only the checks
            return
        part = self._download(box) if not box.dense else np.empty(box.extent, self.dtype)
        assign(part, box.local, value, what)
        self._transfer(box, part.view(storage_dtype(self.dtype)), to_device=True)

    def _download(self, box: Box) -> np.ndarray:
        part = np.empty(box.extent, storage_dtype(self.dtype))
        self._transfer(box, part, to_device=False)
        return part.view(self.dtype)

    def _transfer(self, box: Box, part: np.ndarray, *, to_device: bool) -> None:
        item = part.itemsize
        if len(self.shape) == 1:
            self.runtime.copy_part(part, self.buffer, box.start[0] * item, to_device=to_device)
            return
        cols = self.shape[1]
        offset = (box.start[0] * cols + box.start[1]) * item
        self.runtime.copy_part(part, self.buffer, offset, cols * item, to_device=to_device)


def assign(target: np.ndarray, key, value, what: str) -> None:
    """``target[key] = value`` with NumPy's rules, its failures as skelpy errors. NumPy
    converts and checks ``value`` before it writes anything, so a failure writes nothing."""
    try:
        target[key] = value
    except IndexError:
        raise
    except (ValueError, TypeError, OverflowError) as exc:
        text = str(exc)
        shape_problem = any(w in text for w in ("broadcast", "sequence", "shape"))
        cls = ShapeError if shape_problem else DTypeError
        raise cls(f"{what}: {text}") from None
