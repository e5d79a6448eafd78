"""Lazy containers: data lives where it was last written and moves only when read elsewhere.

A container holds a host array and a device buffer with a validity flag for each (as
SkelCL's Vector does). Uploads happen on first device use, downloads on first host read, and
skeleton results exist only on the device until someone reads them. Index spaces have no
storage at all: the kernel computes the index.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyopencl as cl

from . import runtime as _rt
from .dtypes import check_dtype, storage_dtype
from .errors import DTypeError, ShapeError


class Container:
    """Common behaviour of Vector and Matrix."""

    ndim: int = 0
    __array_priority__ = 10.0

    def __init__(self, data: Any = None, dtype=None, *, shape: tuple[int, ...] | None = None,
                 _device_buffer=None, _runtime=None):
        if data is not None:
            arr = data.to_numpy() if isinstance(data, Container) else data
            arr = np.asarray(arr, dtype=dtype)
            if arr.ndim != self.ndim:
                raise ShapeError(f"{type(self).__name__} needs {self.ndim}-D data, "
                                 f"got shape {arr.shape}")
            dt = check_dtype(arr.dtype, type(self).__name__)
            if arr.dtype != dt or not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr, dtype=dt)
            self._host: np.ndarray | None = arr
            self._shape = tuple(int(s) for s in arr.shape)
            self._dtype = dt
            self._host_valid = True
            self._buffer = None
            self._device_valid = False
            self._runtime = None
        else:
            if shape is None or dtype is None:
                raise ShapeError(f"{type(self).__name__} needs data, or shape and dtype")
            self._shape = tuple(int(s) for s in shape)
            if len(self._shape) != self.ndim or any(s < 0 for s in self._shape):
                raise ShapeError(f"{type(self).__name__}: bad shape {shape}")
            self._dtype = check_dtype(dtype, type(self).__name__)
            self._host = None
            self._host_valid = False
            self._buffer = _device_buffer
            self._device_valid = _device_buffer is not None
            self._runtime = _runtime
            if _device_buffer is None:  # a zero-filled container
                self._host = np.zeros(self._shape, self._dtype)
                self._host_valid = True

    # -- NumPy-like surface ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self._dtype.itemsize

    def __len__(self) -> int:
        return self._shape[0]

    def to_numpy(self) -> np.ndarray:
        """The data as an ndarray (downloads once if the device holds the newest copy).

        The array is the container's host copy: after writing to it, call
        :meth:`host_modified` so the device copy is refreshed on next use."""
        self._sync_host()
        assert self._host is not None
        return self._host

    def __array__(self, dtype=None, copy=None):
        arr = self.to_numpy()
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def __getitem__(self, index):
        return self.to_numpy()[index]

    def __setitem__(self, index, value) -> None:
        arr = self.to_numpy()
        arr[index] = value
        self.host_modified()

    def __iter__(self):
        return iter(self.to_numpy())

    def __repr__(self) -> str:
        where = "device" if self._device_valid and not self._host_valid else "host"
        return f"{type(self).__name__}(shape={self._shape}, dtype={self._dtype}, on={where})"

    def host_modified(self) -> None:
        """Declare that the host array was written to; the device copy is now stale."""
        self._host_valid = True
        self._device_valid = False

    def copy(self):
        """A new container with the same contents (stays on the device if it is there)."""
        if self._device_valid and not self._host_valid and self._runtime is not None:
            rt = self._runtime
            buf = rt.allocate(self.nbytes)
            if self.nbytes:
                cl.enqueue_copy(rt.queue, buf, self._buffer, byte_count=self.nbytes)
            return type(self).from_device(buf, self._shape, self._dtype, rt)
        return type(self)(self.to_numpy().copy())

    # -- device side ------------------------------------------------------------------------
    @classmethod
    def from_device(cls, buffer, shape, dtype, runtime):
        """A container whose only copy is ``buffer`` (a skeleton's result); shape and dtype
        are trusted, which keeps this off the per-call overhead."""
        self = object.__new__(cls)
        self._shape, self._dtype = shape, dtype
        self._host, self._host_valid = None, False
        self._buffer, self._device_valid, self._runtime = buffer, True, runtime
        return self

    def device_buffer(self, rt: _rt.Runtime | None = None):
        """The device buffer, uploading the host data first if it is newer."""
        rt = rt or _rt.current()
        if self._runtime is not rt:
            # The device changed since this buffer was made: bring the data over via the host.
            if self._device_valid and not self._host_valid:
                self._sync_host()
            self._buffer = None
            self._device_valid = False
            self._runtime = rt
        if self._buffer is None:
            self._buffer = rt.allocate(self.nbytes)
        if not self._device_valid:
            if self.size:
                host = self._host
                assert host is not None
                rt.upload(self._buffer, host.view(storage_dtype(self._dtype)))
            self._device_valid = True
        return self._buffer

    def _sync_host(self) -> None:
        if self._host_valid:
            return
        rt = self._runtime or _rt.current()
        host = np.empty(self._shape, self._dtype)
        if self.size:
            rt.download(host.view(storage_dtype(self._dtype)), self._buffer)
        self._host = host
        self._host_valid = True

    @property
    def has_device_buffer(self) -> bool:
        """Whether a device buffer exists (valid or not)."""
        return self._buffer is not None

    def mark_device_written(self) -> None:
        """A kernel wrote the device buffer: the host copy is now stale."""
        self._device_valid = True
        self._host_valid = False


class Vector(Container):
    """A 1-D container. ``Vector(ndarray)`` wraps without copying on the host."""

    ndim = 1


class Matrix(Container):
    """A 2-D container in C (row-major) order."""

    ndim = 2

    @property
    def rows(self) -> int:
        return self._shape[0]

    @property
    def cols(self) -> int:
        return self._shape[1]


class IndexSpace:
    """Indices without storage; Map over it sees each index (int64), as over ``np.arange``."""

    ndim = 0

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int64)

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    def __len__(self) -> int:
        return self._shape[0]


class IndexVector(IndexSpace):
    ndim = 1

    def __init__(self, n: int):
        n = _as_size(n, "IndexVector")
        self._shape = (n,)

    def to_numpy(self) -> np.ndarray:
        return np.arange(self._shape[0], dtype=np.int64)

    def __repr__(self) -> str:
        return f"IndexVector({self._shape[0]})"


class IndexMatrix(IndexSpace):
    """Map over it calls the muscle with (row, col), or with one index point ``p``
    (``p[0]``/``p.row``, ``p[1]``/``p.col``)."""

    ndim = 2

    def __init__(self, shape: tuple[int, int]):
        try:
            rows, cols = shape
        except (TypeError, ValueError):
            raise ShapeError(f"IndexMatrix needs (rows, cols), got {shape!r}") from None
        self._shape = (_as_size(rows, "IndexMatrix"), _as_size(cols, "IndexMatrix"))

    def to_numpy(self) -> np.ndarray:
        r, c = np.indices(self._shape, dtype=np.int64)
        return np.stack([r, c], axis=-1)

    def __repr__(self) -> str:
        return f"IndexMatrix({self._shape})"


def _as_size(n, what: str) -> int:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ShapeError(f"{what}: size must be a non-negative int, got {n!r}")
    return int(n)


def as_container(value, what: str = "argument") -> Container | IndexSpace:
    """Wrap an ndarray (no host copy) or pass a container through."""
    if isinstance(value, (Container, IndexSpace)):
        return value
    if isinstance(value, np.ndarray):
        if value.ndim == 1:
            return Vector(value)
        if value.ndim == 2:
            return Matrix(value)
        raise ShapeError(f"{what}: only 1-D and 2-D arrays are supported, got {value.ndim}-D")
    raise DTypeError(f"{what}: expected a Vector, Matrix, index space or ndarray, "
                     f"got {type(value).__name__}")


def empty_like_shape(shape: tuple[int, ...], dtype, runtime: _rt.Runtime) -> Container:
    """A device-only container of ``shape`` (1-D -> Vector, 2-D -> Matrix)."""
    dt = dtype if isinstance(dtype, np.dtype) else check_dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    buf = runtime.allocate(nbytes)
    cls = Vector if len(shape) == 1 else Matrix
    return cls.from_device(buf, tuple(int(s) for s in shape), dt, runtime)
