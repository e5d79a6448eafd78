"""Where a container's data lives: a host array and a device buffer, each flagged valid.

One small state object per container (shared by a container and its views). On a device group
it may also hold ``parts``: the data spread over the group's devices
(:mod:`skelpy.distribution.parts`), one more copy under the same rules. It keeps these promises:

- **Copy on write.** The host array is never written while anybody else can see it: arrays
  handed out (``to_numpy()``, slice reads) and containers built from this one share it, so the
  next write copies it first (``shared``); what was handed out never changes.
- **Locked host array.** The host array is read-only except during the container's own
  writes, so that a read-only view handed out cannot be made writable again.
- **One newest copy.** A host write marks the device copy and the parts stale; a device write
  the host copy (and a single-device write the parts). Where only the parts are valid, every
  single-device or host reader gathers them first (:meth:`resolve`, :meth:`sync_host`).
  A *borrowed* host array is a caller's ndarray wrapped for the length of one skeleton call
  (``as_container``): it is never written and never handed to a longer-lived container.
- **Pending values are computed before anybody looks.** The data of a lazy result (an
  array expression, ``skelpy.array``) is ``pending``: an object whose ``evaluate()`` fills
  this storage. Every read resolves it first. A pending value *reads* other storages (its
  ``readers`` are registered there): before any write to a storage, the pending values that
  read it are computed, so a lazy result never sees data written after it was asked for.
"""

from __future__ import annotations

import weakref

import numpy as np
import pyopencl as cl

from ..dtypes import storage_dtype
from ..errors import BoundsError, ShapeError, dtype_error_like
from .selection import Selection

#: A storage's list of readers is pruned (readers gone or computed dropped) when it reaches
#: this length (and then each power of two above it), so that a loop of pending values over
#: one container keeps it short.
MAX_READERS = 64

_new = object.__new__


class Storage:
    """The host/device state of one container's data (of ``shape`` and ``dtype``)."""

    __slots__ = ("host", "buffer", "device_valid", "runtime", "shape", "dtype", "shared",
                 "borrowed", "editing", "pending", "readers", "parts", "distribution",
                 "__weakref__")

    def __init__(self, host, buffer, runtime, shape, dtype, device_valid, shared, borrowed,
                 parts=None, distribution=None):
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
        self.pending = None       # a lazy value's recipe (see the module docstring)
        self.readers = None       # weak references to pending storages that read this one
        # parts: the data on a device group (valid whenever set); distribution: the one it
        # has there, or the one asked for before it is spread (None: not chosen yet)
        self.parts = parts
        self.distribution = parts.dist if parts is not None else distribution

    @classmethod
    def pending_value(cls, shape, dtype, pending, reads=()) -> Storage:
        """A storage whose data ``pending.evaluate()`` computes when it is first needed.

        ``pending.storage`` is set to a weak reference to this storage (what the value
        fills). ``reads``: the storages that value reads; each takes it as a reader (that
        same weak reference) and so computes it before it is written. Built field by field,
        as a :class:`_PendingStorage`, whose other fields start as its class's defaults: a
        loop of small array expressions makes one per operation."""
        self = _new(_PendingStorage)
        self.shape, self.dtype, self.pending = shape, dtype, pending
        pending.storage = ref = weakref.ref(self)
        if reads:
            for s in reads:
                readers = s.readers
                if readers is None:
                    s.readers = [ref]
                elif len(readers) < MAX_READERS:
                    readers.append(ref)
                else:
                    s._add_reader_ref(ref)
        return self

    def add_reader(self, reader: Storage) -> None:
        """``reader`` (pending) reads this storage: compute it before this one is written."""
        self._add_reader_ref(weakref.ref(reader))

    def _add_reader_ref(self, ref) -> None:
        readers = self.readers
        if readers is None:
            self.readers = [ref]
            return
        n = len(readers)
        if n >= MAX_READERS and not n & (n - 1):
            # drop the readers gone or computed, at lengths 64, 128, 256, ... (so a list of
            # many live readers is not walked on every addition)
            readers = self.readers = [r for r in readers
                                      if (s := r()) is not None and s.pending is not None]
        readers.append(ref)

    def resolve(self) -> None:
        """Compute a pending value now; where only the parts on a device group are valid,
        gather them to the host (a single-device or host reader follows)."""
        if self.pending is not None:
            self.pending.evaluate()
        elif self.parts is not None and self.host is None and not self.device_valid:
            self.sync_host()

    def before_write(self) -> None:
        """Compute the pending values that read this storage (it is about to change)."""
        readers = self.readers
        if readers:
            self.readers = None
            for ref in readers:
                r = ref()
                if r is not None and r.pending is not None:
                    r.pending.evaluate()

    def take(self, buffer, runtime) -> None:
        """Replace the whole data by ``buffer`` (a kernel's result of this shape and dtype):
        what read the old data is computed first."""
        if self.readers:
            self.before_write()
        self.pending = None
        self.host = None
        self.parts = None
        self.buffer, self.runtime = buffer, runtime
        self.device_valid = True
        self.shared = self.borrowed = False

    def filled(self, buffer, runtime) -> None:
        """A pending value was computed into ``buffer`` on ``runtime``."""
        self.pending = None
        self.buffer, self.runtime = buffer, runtime
        self.device_valid = True

    def filled_parts(self, parts) -> None:
        """A pending value was computed into ``parts`` on a device group."""
        self.pending = None
        self.parts, self.distribution = parts, parts.dist
        self.host, self.device_valid = None, False

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
        if self.pending is not None:
            self.pending.evaluate()
        if self.runtime is not rt:
            # The device changed since this buffer was made: bring the data over via the host.
            if self.host is None:
                self.sync_host()                 # from the device it was on, or the parts
            self.buffer = None
            self.device_valid = False
            self.runtime = rt
        if self.buffer is None:
            self.buffer = rt.allocate(self.nbytes)
        if not self.device_valid:
            if self.nbytes:
                host = self.sync_host()          # from the parts when only they are valid
                rt.upload(self.buffer, host.view(storage_dtype(self.dtype)), wait=True)
            # Under an open host_edit the host array may change at any moment: upload again.
            self.device_valid = not self.editing
        return self.buffer

    def device_written(self) -> None:
        if self.readers:
            self.before_write()
        self.device_valid = True
        self.host = None
        self.parts = None

    def set_parts(self, parts) -> None:
        """The data now (also) lives in ``parts`` on a device group (a redistribution)."""
        self.parts = parts
        self.distribution = parts.dist

    # -- host side --------------------------------------------------------------------------
    def sync_host(self) -> np.ndarray:
        """The host array, downloaded first if the device holds the newest copy."""
        if self.host is not None:
            return self.host
        if self.pending is not None:
            self.pending.evaluate()
        if self.device_valid or self.parts is None:
            host = np.empty(self.shape, self.dtype)
            if host.size:
                self.runtime.download(host.view(storage_dtype(self.dtype)), self.buffer)
        else:
            host = self.parts.gather()
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
        try:
            out = self.sync_host()[key]
        except IndexError as exc:
            if isinstance(exc, BoundsError):
                raise
            raise BoundsError(str(exc)) from None
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
        if self.readers:
            self.before_write()
        host = self.sync_host()
        if self.shared:
            host = np.array(host, order="C")
            self.host, self.shared, self.borrowed = host, False, False
        else:
            host.flags.writeable = True
        return host

    def host_written(self, changed: bool = True) -> None:
        if not self.editing and self.host is not None:
            self.host.flags.writeable = False
        if changed:
            self.device_valid = False
            self.parts = None

    def write_host(self, key, value, owner) -> None:
        host = self.writable_host()
        try:
            assign(host, key, value, owner)
        except BaseException:
            self.host_written(changed=False)
            raise
        self.host_written()

    def begin_edit(self) -> np.ndarray:
        host = self.writable_host()
        self.editing += 1
        self.device_valid = False
        self.parts = None
        return host

    def end_edit(self) -> None:
        self.editing -= 1
        self.host_written()

    def copy(self) -> Storage:
        """An independent copy: a valid host array is shared until either side writes; a
        valid device copy is duplicated on the device (so a copy of a result stays there, and
        one on a device group stays there)."""
        if self.pending is not None:
            self.pending.evaluate()
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
        parts = None
        if self.parts is not None and host is None and buf is None:
            parts = self.parts.copy()          # a distributed result stays distributed
        return Storage(host, buf, rt, self.shape, self.dtype, buf is not None,
                       host is not None and host is self.host, False, parts,
                       self.distribution)

    # -- parts of the device copy -----------------------------------------------------------
    def _host_is_newest(self) -> bool:
        """Resolve; whether the host copy is (now) the newest: a pending value computed into
        a device group's parts is gathered here, as the parts have no single device copy."""
        self.resolve()
        if self.host is None and not self.device_valid and self.parts is not None:
            self.sync_host()
        return self.host is not None

    def read_part(self, sel: Selection):
        """The selection read from the device copy (only its elements move)."""
        if self._host_is_newest():
            return self.read_host(_basic_key(sel))
        if sel.empty:
            out = np.empty(sel.shape, self.dtype)
        else:
            plan = _Transfer(sel, self.shape, self.dtype.itemsize)
            part = np.empty(plan.counts, storage_dtype(self.dtype))
            self._move(plan, part, to_device=False)
            out = part.view(self.dtype)[plan.local]
        if isinstance(out, np.ndarray):
            out.flags.writeable = False
        return out

    def write_part(self, sel: Selection, value, owner) -> None:
        """Write ``value`` into the selection, straight into the device copy."""
        if self._host_is_newest():
            self.write_host(_basic_key(sel), value, owner)
            return
        if self.readers:
            self.before_write()
        if sel.empty:
            assign(np.empty(sel.shape, self.dtype), ..., value, owner)  # only the checks
            return
        plan = _Transfer(sel, self.shape, self.dtype.itemsize)
        part = np.empty(plan.counts, storage_dtype(self.dtype))
        if plan.gaps:                 # moved with the elements in between: keep their values
            self._move(plan, part, to_device=False)
        assign(part.view(self.dtype), plan.local, value, owner)
        self._move(plan, part, to_device=True)

    def _move(self, plan: _Transfer, part: np.ndarray, *, to_device: bool) -> None:
        self.runtime.copy_part(part.reshape(plan.runs), self.buffer, plan.offset,
                               plan.pitches, to_device=to_device)


class _PendingStorage(Storage):
    """A storage made by :meth:`Storage.pending_value`: the same object, whose fields start
    as these class attributes (they hide the slots of the same names, and a write goes to
    the instance's own ``__dict__``), so that making one sets three fields, not thirteen."""

    host = buffer = runtime = readers = parts = distribution = None
    device_valid = shared = borrowed = False
    editing = 0


# A strided innermost axis whose elements lie at most this many bytes apart moves with the
# elements in between: one contiguous run beats many tiny ones (PCIe, DMA descriptors).
SMALL_GAP_BYTES = 64


class _Transfer:
    """How a selection moves: a C-contiguous host array of ``counts`` (the selection in
    increasing order, maybe with the gaps of its innermost axis filled in), seen as ``runs``
    (rows of one contiguous run each) that lie ``pitches`` bytes apart in the buffer from
    byte ``offset``; ``local`` turns that array into the selection."""

    __slots__ = ("counts", "local", "gaps", "offset", "runs", "pitches")

    def __init__(self, sel: Selection, shape: tuple[int, ...], item: int):
        strides = [1] * len(shape)                   # C order, in elements
        for k in range(len(shape) - 2, -1, -1):
            strides[k] = strides[k + 1] * shape[k + 1]
        self.offset = sum(f * e for f, e in zip(sel.first, strides, strict=True)) * item
        pitch = [s * e for s, e in zip(sel.step, strides, strict=True)]
        step = sel.step[-1]
        strided = sel.count[-1] > 1 and step > 1
        self.gaps = strided and pitch[-1] * item <= SMALL_GAP_BYTES
        if not self._layout(sel, pitch, item) and strided:
            # A grid of single elements is one 3-D rectangular copy only if each plane
            # holds a whole number of rows and the grid's rows fit in one plane from where
            # they start (OpenCL, CUDA): otherwise move each row's span.
            self.gaps = True
            self._layout(sel, pitch, item)

    def _layout(self, sel: Selection, pitch: list[int], item: int) -> bool:
        """Fill in the layout; False if it is not a legal rectangular copy."""
        counts, pitch, local_step = list(sel.count), list(pitch), [1] * len(pitch)
        if self.gaps:
            counts[-1] = (counts[-1] - 1) * sel.step[-1] + 1
            pitch[-1], local_step[-1] = 1, sel.step[-1]
        self.counts = tuple(counts)
        self.local = tuple(0 if d else slice(None, None, -k if r else k)
                           for d, r, k in zip(sel.dropped, sel.reverse, local_step, strict=True))
        # Axes of one element do not shape the layout; a unit pitch ends in one run, and an
        # outer axis right after the run it holds merges into it.
        axes = [(c, p) for c, p in zip(counts, pitch, strict=True) if c > 1]
        run = 1
        if axes and axes[-1][1] == 1:
            run = axes.pop()[0]
        while axes and axes[-1][1] == run:
            run *= axes.pop()[0]
        self.runs = (*(c for c, _ in axes), run)
        self.pitches = tuple(p * item for _, p in axes)
        if len(axes) < 2:
            return True
        (_, planes), (rows, row) = axes            # pitches in elements
        first_row = self.offset // item % planes // row
        return planes % row == 0 and first_row + rows <= planes // row


def _basic_key(sel: Selection) -> tuple:
    """The ints and slices that select ``sel`` from a host array."""
    key = []
    for first, count, step, rev, dropped in zip(sel.first, sel.count, sel.step, sel.reverse,
                                                sel.dropped, strict=True):
        last = first + max(count - 1, 0) * step
        if dropped:
            key.append(first)
        elif rev:
            key.append(slice(last, first - 1 if first else None, -step))
        else:
            key.append(slice(first, last + 1 if count else first, step))
    return tuple(key)


def assign(target: np.ndarray, key, value, owner) -> None:
    """``target[key] = value`` with NumPy's rules, its failures as skelpy errors that name
    the container ``owner``. NumPy converts and checks ``value`` before it writes anything,
    so a failure writes nothing."""
    try:
        target[key] = value
    except IndexError as exc:
        raise BoundsError(f"{exc} (writing into {owner!r})") from None
    except (ValueError, TypeError, OverflowError) as exc:
        text = str(exc)
        shape_problem = any(w in text for w in ("broadcast", "sequence", "shape"))
        cls = ShapeError if shape_problem else dtype_error_like(exc)
        raise cls(f"cannot write {type(value).__name__} into {owner!r}: {text}") from None
