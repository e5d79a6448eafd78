"""Vector and Matrix: containers whose data moves between host and device only when needed.

A container owns its data (see README, "Containers"): building one copies its input; what a
read hands out (``to_numpy()``, ``np.asarray(v)``, ``v[a:b]``) is read-only and never changes
afterwards; host-side writes go through the container (``v[i] = x``, ``m[i][j] = x``,
``with v.host_edit() as a: ...``), which knows that its device copy is stale. So a skeleton
always computes from what the container shows. Skeleton results live on the device until read;
element and slice access then moves only the part it touches (:mod:`.selection`).

On a device group a container also has a *distribution* (:mod:`.distributions`): ``Vector(a,
distribution="block")`` asks for one, ``v.distribution`` says which it has, and
``v.redistribute("copy")`` changes it; without one, the first skeleton picks it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .. import runtime as _rt
from ..dtypes import check_dtype
from ..errors import DTypeError, ShapeError
from .distributions import Distribution, as_distribution
from .index_spaces import IndexSpace
from .selection import as_int, basic_selection, checked_int
from .storage import Storage


class Container:
    """Common behaviour of Vector and Matrix."""

    __slots__ = ("_shape", "_dtype", "_storage", "__weakref__")
    ndim: int = 0
    __array_priority__ = 10.0
    # skelpy.distribution installs here the function that spreads a container over a device
    # group (``distributed(container, group, dist)``); containers do not import it
    distributor = None
    # skelpy.mpi installs here what builds containers under MPI (``sk.use("mpi")``), where
    # construction is collective: shapes agreed, data scattered from the rank that has it
    collective = None

    def __init__(self, data: Any = None, dtype=None, *, shape: tuple[int, ...] | None = None,
                 distribution: str | Distribution | None = None):
        hook = Container.collective
        built = None if hook is None else hook.init(type(self), data, dtype, shape,
                                                    distribution)
        if built is not None:
            self._shape, self._dtype, self._storage = built._shape, built._dtype, built._storage
            return
        self._init_data(data, dtype, shape)
        if distribution is not None:
            self._storage.distribution = as_distribution(distribution)

    def _init_data(self, data, dtype, shape) -> None:
        name = type(self).__name__
        if data is None:
            if shape is None or dtype is None:
                raise ShapeError(f"{name} needs data, or shape and dtype")
            shp = tuple(int(s) for s in shape)
            if len(shp) != self.ndim or any(s < 0 for s in shp):
                raise ShapeError(f"{name}: bad shape {shape}")
            self._adopt(np.zeros(shp, check_dtype(dtype, name)))
            return
        if isinstance(data, Container):
            self._copy_of(data, dtype)
            return
        if isinstance(data, IndexSpace):
            data = data.to_numpy()
        if dtype is not None:
            dtype = check_dtype(dtype, name)
        try:
            arr = np.array(data, dtype=dtype, order="C")  # a copy: the container owns its data
        except (TypeError, ValueError, OverflowError) as exc:
            cls = ShapeError if "shape" in str(exc) else DTypeError
            raise cls(f"{name}: cannot make an array of {type(data).__name__}: {exc}") from None
        self._adopt(arr)

    def _adopt(self, arr: np.ndarray) -> None:
        name = type(self).__name__
        if arr.ndim != self.ndim:
            raise ShapeError(f"{name} needs {self.ndim}-D data, got shape {arr.shape}")
        dt = check_dtype(arr.dtype, name)
        if arr.dtype != dt:                       # a non-native byte order
            arr = arr.astype(dt)
        self._shape = tuple(int(s) for s in arr.shape)
        self._dtype = dt
        self._storage = Storage.owned(arr)

    def _copy_of(self, other: Container, dtype) -> None:
        if other.ndim != self.ndim:
            raise ShapeError(f"{type(self).__name__} needs {self.ndim}-D data, got "
                             f"{type(other).__name__} of shape {other.shape}")
        if dtype is not None and check_dtype(dtype, type(self).__name__) != other.dtype:
            self._adopt(other.to_numpy().astype(dtype))
            return
        self._shape, self._dtype = other._shape, other._dtype
        self._storage = other._storage.copy()

    @classmethod
    def _borrow(cls, arr: np.ndarray) -> Container:
        """Wrap ``arr`` without a host copy when it is usable as it is (see as_container)."""
        self = object.__new__(cls)
        dt = check_dtype(arr.dtype, cls.__name__)
        self._shape = tuple(int(s) for s in arr.shape)
        self._dtype = dt
        if arr.dtype != dt or not arr.flags.c_contiguous:
            self._storage = Storage.owned(np.ascontiguousarray(arr, dtype=dt))
        else:
            self._storage = Storage.borrowed_from(arr)
        return self

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
        """The data as a read-only ndarray that never changes afterwards (downloads once if
        the device holds the newest copy; no host copy otherwise). ``np.array(v)`` gives a
        writable copy; write through the container (``v[i] = x``, :meth:`host_edit`)."""
        return self._storage.snapshot()

    def __array__(self, dtype=None, copy=None):
        arr = self._storage.snapshot()
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError(f"{type(self).__name__} of {arr.dtype} cannot be read as "
                                 f"{np.dtype(dtype)} without a copy")
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def __getitem__(self, key):
        """An element (a NumPy scalar) or a read-only array; only the part read moves from the
        device. ``m[i]`` is a :class:`MatrixRow` that also writes through (``m[i][j] = x``)."""
        key = _plain(key)
        s = self._storage
        if self.ndim == 2:
            row = _row_of(key)
            if row is not None:
                return MatrixRow(self, checked_int(row, self._shape[0], 0))
        if s.host is not None or not s.device_valid:
            return s.read_host(key)
        sel = basic_selection(key, self._shape)
        if sel is None:
            return s.read_host(key)
        return s.read_part(sel)

    def __setitem__(self, key, value) -> None:
        """Write on the host, or straight into the device copy when that one is the newest
        and the index is basic (ints and slices): then only the touched elements move."""
        key, value = _plain(key), _plain(value)
        s = self._storage
        if s.host is None and s.device_valid:
            sel = basic_selection(key, self._shape)
            if sel is not None:
                s.write_part(sel, value, self)
                return
        s.write_host(key, value, self)

    @contextmanager
    def host_edit(self) -> Iterator[np.ndarray]:
        """``with v.host_edit() as a:`` gives the data as a writable ndarray for in-place
        NumPy work; skeletons called inside or after the block see the edits. The array
        becomes read-only when the block ends: do not keep it."""
        s = self._storage
        arr = s.begin_edit().view()
        try:
            yield arr
        finally:
            arr.flags.writeable = False
            s.end_edit()

    def __iter__(self):
        return iter(self.to_numpy())

    def __repr__(self) -> str:
        s = self._storage
        where = "device" if s.device_valid and s.host is None else "host"
        if s.parts is not None and s.host is None and not s.device_valid:
            where = f"{len(s.parts.parts)} devices, {s.parts.dist}"
        return f"{type(self).__name__}(shape={self._shape}, dtype={self._dtype}, on={where})"

    def copy(self):
        """An independent container with the same contents (stays on the device if it is
        there); the same as ``type(v)(v)``."""
        return type(self)(self)

    __copy__ = copy

    def __deepcopy__(self, memo):
        return self.copy()

    # -- distribution ------------------------------------------------------------------------
    @property
    def distribution(self) -> Distribution | None:
        """How the data is spread over a device group (``"single"``, ``"block"``, ``"copy"``
        or ``sk.Overlap(h)``); None until one is asked for or a skeleton on a group picks
        one. It compares equal to its name: ``v.distribution == "block"``."""
        return self._storage.distribution

    def redistribute(self, distribution: str | Distribution):
        """Change the distribution (on the device side where possible when a device group
        is in use; otherwise it takes effect on the first group). Returns the container."""
        dist = as_distribution(distribution)
        rt = _rt.current()
        s = self._storage
        if rt.group is not None and Container.distributor is not None and dist is not None:
            Container.distributor(self, rt.group, dist)
        else:
            if s.parts is not None:
                s.sync_host()
                s.parts = None
            s.distribution = dist
        return self

    @classmethod
    def from_local(cls, part, dtype=None, *, distribution: str | Distribution | None = None):
        """Under MPI (``sk.use("mpi")``, collective): the container whose rows are every
        rank's ``part`` in rank order, built without any rank holding the whole. In one
        process, which holds all rows, the same as ``cls(part)``."""
        hook = Container.collective
        if hook is not None and hook.active():
            return hook.from_local(cls, part, dtype, distribution)
        return cls(part, dtype, distribution=distribution)

    def local_numpy(self) -> np.ndarray:
        """Under MPI: this rank's rows (of its block) as a read-only array, without a
        gather. In one process, which holds all rows: ``to_numpy()``."""
        hook = Container.collective
        if hook is not None and hook.active():
            return hook.local_numpy(self)
        return self.to_numpy()

    @property
    def storage(self):
        """The host/device state of the data (:class:`~.storage.Storage`), for skeletons."""
        return self._storage

    @classmethod
    def from_parts(cls, parts):
        """A container whose only copy is ``parts`` on a device group (a skeleton's result)."""
        self = object.__new__(cls)
        self._shape = tuple(parts.shape)
        self._dtype = parts.dtype
        self._storage = Storage(None, None, None, self._shape, self._dtype, False, False,
                                False, parts)
        return self

    # -- device side ------------------------------------------------------------------------
    @classmethod
    def from_device(cls, buffer, shape, dtype, runtime):
        """A container whose only copy is ``buffer`` (a skeleton's result); shape and dtype
        are trusted, which keeps this off the per-call overhead."""
        self = object.__new__(cls)
        self._shape = shape
        self._dtype = dtype
        self._storage = Storage(None, buffer, runtime, shape, dtype, True, False, False)
        return self

    def device_buffer(self, rt: _rt.Runtime | None = None):
        """The device buffer, uploading the host data first if it is newer."""
        s = self._storage
        if s.device_valid and s.runtime is rt:
            return s.buffer
        return s.device_buffer(rt or _rt.current())

    @property
    def has_device_buffer(self) -> bool:
        """Whether a device buffer exists (valid or not)."""
        return self._storage.buffer is not None

    def mark_device_written(self) -> None:
        """A kernel wrote the device buffer: the host copy is now stale."""
        self._storage.device_written()


class Vector(Container):
    """A 1-D container; ``Vector(a)`` copies ``a``, ``Vector(v)`` is an independent copy."""

    __slots__ = ()
    ndim = 1


class Matrix(Container):
    """A 2-D container in C (row-major) order."""

    __slots__ = ()
    ndim = 2

    @property
    def rows(self) -> int:
        return self._shape[0]

    @property
    def cols(self) -> int:
        return self._shape[1]

    def __iter__(self):
        self._storage.sync_host()        # all rows will be read: one download
        return (MatrixRow(self, i) for i in range(self._shape[0]))


class MatrixRow:
    """``m[i]``: row ``i`` of a Matrix, read and written through it (so ``m[i][j] = x``
    works, as in SkelCL). It reads like a 1-D array (``np.asarray(row)``, ``row[a:b]``)."""

    __slots__ = ("_matrix", "_row")
    ndim = 1

    def __init__(self, matrix: Matrix, row: int):
        self._matrix = matrix
        self._row = row

    @property
    def shape(self) -> tuple[int]:
        return (self._matrix.cols,)

    @property
    def dtype(self) -> np.dtype:
        return self._matrix.dtype

    @property
    def size(self) -> int:
        return self._matrix.cols

    def __len__(self) -> int:
        return self._matrix.cols

    def _key(self, key) -> tuple:
        return (self._row, *key) if isinstance(key, tuple) else (self._row, key)

    def __getitem__(self, key):
        return self._matrix[self._key(key)]

    def __setitem__(self, key, value) -> None:
        self._matrix[self._key(key)] = value

    def to_numpy(self) -> np.ndarray:
        """The row as a read-only ndarray (only the row moves from the device)."""
        return self._matrix[self._row, :]

    def __array__(self, dtype=None, copy=None):
        arr = self.to_numpy()
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def __iter__(self):
        return iter(self.to_numpy())

    def __repr__(self) -> str:
        return f"MatrixRow({self._row}, {self.to_numpy()!r})"

    # Compare as the array it shows (an object comparison would be silently wrong).
    def __eq__(self, other):
        return self.to_numpy() == _plain(other)

    def __ne__(self, other):
        return self.to_numpy() != _plain(other)

    def __lt__(self, other):
        return self.to_numpy() < _plain(other)

    def __le__(self, other):
        return self.to_numpy() <= _plain(other)

    def __gt__(self, other):
        return self.to_numpy() > _plain(other)

    def __ge__(self, other):
        return self.to_numpy() >= _plain(other)

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return bool(self.to_numpy())


def _plain(value):
    """Containers and rows inside an index or a written value, as the arrays they show."""
    if isinstance(value, (Container, MatrixRow)):
        return value.to_numpy()
    if isinstance(value, tuple) and any(isinstance(v, (Container, MatrixRow)) for v in value):
        return tuple(_plain(v) for v in value)
    return value


def _row_of(key) -> int | None:
    """The row of ``m[i]`` (or ``m[(i,)]``); None for any other index."""
    if isinstance(key, tuple):
        if len(key) != 1:
            return None
        key = key[0]
    return as_int(key)


def as_container(value, what: str = "argument") -> Container | IndexSpace:
    """Pass a container through, or wrap an ndarray for the length of one skeleton call.

    The wrapper borrows the array (no host copy when it is C-contiguous in a supported
    dtype): it must not outlive the call, because the caller may change the array
    afterwards. Anything kept (``copy()``) gets its own copy."""
    if isinstance(value, (Container, IndexSpace)):
        return value
    if isinstance(value, np.ndarray):
        if value.ndim == 1:
            return Vector._borrow(value)
        if value.ndim == 2:
            return Matrix._borrow(value)
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
