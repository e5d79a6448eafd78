"""Vector and Matrix: containers whose data moves between host and device only when needed.

A container owns its data (see README, "Containers"): building one copies its input; what a
read hands out (``to_numpy()``, ``np.asarray(v)``, ``v[a:b]``) is read-only and never changes
afterwards; host-side writes go through the container (``v[i] = x``, ``m[i][j] = x``,
``with v.host_edit() as a: ...``), which knows that its device copy is stale. So a skeleton
always computes from what the container shows. Skeleton results live on the device until read;
element and slice access then moves only the part it touches (:mod:`.host_access`,
:mod:`.selection`).

Views (``v[a:b]``, ``m[:, j]``, ``m.T``, ``reshape``) are containers over their base's data
(:mod:`.layout`): writes through either are seen by both. Operators, NumPy ufuncs and
reductions on containers are the *array backend*'s (``skelpy.array``, which sits above the
skeletons and registers itself here with :func:`set_array_backend`): they build lazy values
whose storage is ``pending`` until read (:mod:`.storage`).

On a device group a container also has a *distribution* (:mod:`.distributions`): ``Vector(a,
distribution="block")`` asks for one, ``v.distribution`` says which it has, and
``v.redistribute("copy")`` changes it; without one, the first skeleton picks it. Element
access, views and host reads of a container whose only copy is on the group gather it first.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from .. import runtime as _rt
from ..dtypes import check_dtype
from ..errors import DTypeError, ParameterError, ShapeError
from . import layout as _layout
from .array_surface import ArraySurface
from .device_side import DeviceSide
from .distributions import Distribution, as_distribution
from .host_access import HostAccess, MatrixRow
from .index_spaces import IndexSpace
from .layout import Layout
from .storage import Storage

_new = object.__new__
_pending_value = Storage.pending_value


class Container(ArraySurface, HostAccess, DeviceSide):
    """Common behaviour of Vector and Matrix (the NumPy array surface: :mod:`.array_surface`;
    element and slice access from the host: :mod:`.host_access`; the device buffer skeletons
    launch with: :mod:`.device_side`)."""

    __slots__ = ("_shape", "_dtype", "_storage", "_layout", "__weakref__")
    ndim: int = 0
    __array_priority__ = 10.0
    __hash__ = None  # type: ignore[assignment]   # == is elementwise, as for ndarrays
    # skelpy.distribution installs here the function that spreads a container over a device
    # group (``distributed(container, group, dist)``); containers do not import it
    distributor = None
    # skelpy.mpi installs here what builds containers under MPI (``sk.use("mpi")``), where
    # construction is collective: shapes agreed, data scattered from the rank that has it
    collective = None

    def __init__(self, data: Any = None, dtype=None, *, shape: tuple[int, ...] | None = None,
                 distribution: str | Distribution | None = None):
        dist = as_distribution(distribution)
        hook = Container.collective
        built = None if hook is None else hook.init(type(self), data, dtype, shape,
                                                    distribution)
        if built is not None:
            for name in ("_shape", "_dtype", "_storage", "_layout"):
                setattr(self, name, getattr(built, name))
            return
        self._init_data(data, dtype, shape)
        if dist is not None:
            self._storage.distribution = dist

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
        self._layout = None

    def _copy_of(self, other: Container, dtype) -> None:
        if other.ndim != self.ndim:
            raise ShapeError(f"{type(self).__name__} needs {self.ndim}-D data, got "
                             f"{type(other).__name__} of shape {other.shape}")
        if dtype is not None and check_dtype(dtype, type(self).__name__) != other.dtype:
            self._adopt(other.to_numpy().astype(dtype))
            return
        if other._layout is not None:           # a view: its elements, in a block of their own
            s = other._storage
            s.resolve()
            rt = s.runtime
            # copied on its device by a kernel of the runtime in use (array_backend().gather):
            # only where that is the device it is on (on a device group that kernel would
            # spread the view again, without end); otherwise through the host
            here = _rt.fixed()
            if s.host is None and rt is not None and rt.group is None \
                    and (here is None or here is rt):
                self._shape, self._dtype, self._layout = other._shape, other._dtype, None
                self._storage = Storage(None, other.device_buffer(rt), rt, other._shape,
                                        other._dtype, True, False, False)
            else:
                self._adopt(np.array(other.to_numpy(), order="C"))
            return
        self._shape, self._dtype = other._shape, other._dtype
        self._storage = other._storage.copy()
        self._layout = None

    @classmethod
    def _borrow(cls, arr: np.ndarray) -> Container:
        """Wrap ``arr`` without a host copy when it is usable as it is (see as_container)."""
        self = object.__new__(cls)
        dt = check_dtype(arr.dtype, cls.__name__)
        self._shape = tuple(int(s) for s in arr.shape)
        self._dtype = dt
        self._layout = None
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
        if self._layout is None:
            return self._storage.snapshot()
        return self._read_view()

    def _read_view(self) -> np.ndarray:
        """A view's elements: only they move when the device holds the newest copy and they
        are a regular part of the block; else the block is read (once) and viewed."""
        s, lay, shape = self._storage, self._layout, self._shape
        s.resolve()
        if s.host is None:
            sel = _layout.selection_of(lay, shape, s.shape)
            if sel is not None:
                return s.read_part(sel).reshape(shape)
        out = _layout.host_view(s.snapshot(), lay, shape)
        if s.editing:
            out = out.copy()
            out.flags.writeable = False
        return out

    @property
    def layout(self) -> Layout | None:
        """Where a view's elements lie in its base's data (None: the container's own block,
        in C order)."""
        return self._layout

    def _view(self, lay: Layout, shape: tuple[int, ...]) -> Container:
        """A view of this container's data with ``lay`` and ``shape`` (1-D: a Vector)."""
        out = object.__new__(Vector if len(shape) == 1 else Matrix)
        out._shape, out._dtype, out._storage = shape, self._dtype, self._storage
        out._layout = lay
        return out

    @property
    def storage(self) -> Storage:
        """The state of the data (shared by a container and its views; skelpy internals)."""
        return self._storage

    def broadcast_to(self, shape) -> Container:
        """A view repeating this container's data to ``shape`` as NumPy broadcasts (for
        reading: do not write through it)."""
        shape = tuple(int(s) for s in shape)
        try:
            np.broadcast_shapes(self._shape, shape) == shape or _raise()
        except ValueError:
            raise ShapeError(f"cannot broadcast {type(self).__name__} of shape {self._shape} "
                             f"to {shape}") from None
        if shape == self._shape:
            return self
        self._storage.resolve()
        return self._view(_layout.broadcast(self._own_layout(), self._shape, shape), shape)

    def _own_layout(self) -> Layout:
        return self._layout or _layout.whole(self._shape)

    def __array__(self, dtype=None, copy=None):
        arr = self.to_numpy()
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError(f"{type(self).__name__} of {arr.dtype} cannot be read as "
                                 f"{np.dtype(dtype)} without a copy")
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def __iter__(self):
        return iter(self.to_numpy())

    def __repr__(self) -> str:
        s = self._storage
        if s.pending is not None:
            where = "pending"
        elif s.parts is not None and s.host is None and not s.device_valid:
            where = f"{len(s.parts.parts)} devices, {s.parts.dist}"
        else:
            where = "device" if s.device_valid and s.host is None else "host"
        view = ", view" if self._layout is not None else ""
        return (f"{type(self).__name__}(shape={self._shape}, dtype={self._dtype}, "
                f"on={where}{view})")

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
        one. It compares equal to its name: ``v.distribution == "block"``. A view has none
        of its own (None): a skeleton on a group spreads a copy of its elements. A pending
        value (an array expression) is computed first: then it has the one it is computed
        into (not under MPI, where computing is collective and this read may be one rank's:
        None until it is computed)."""
        if self._layout is not None:
            return None
        s = self._storage
        if s.pending is not None:
            hook = Container.collective
            if hook is None or not hook.active():
                s.pending.evaluate()
        return s.distribution

    def redistribute(self, distribution: str | Distribution):
        """Change the distribution (on the device side where possible when a device group
        is in use; otherwise it takes effect on the first group). Returns the container."""
        dist = as_distribution(distribution)
        if self._layout is not None:
            raise ParameterError(f"redistribute({dist}): a view ({type(self).__name__} of "
                                 f"shape {self._shape}) shares its base's data; "
                                 "redistribute the base, or a copy (v.copy())")
        rt = _rt.current()
        s = self._storage
        if s.pending is not None:
            s.pending.evaluate()
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

    @classmethod
    def from_parts(cls, parts):
        """A container whose only copy is ``parts`` on a device group (a skeleton's result)."""
        self = object.__new__(cls)
        self._shape = tuple(parts.shape)
        self._dtype = parts.dtype
        self._layout = None
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
        self._layout = None
        return self

    @classmethod
    def pending(cls, shape: tuple[int, ...], dtype: np.dtype, recipe, reads=()) -> Container:
        """A lazy container whose data ``recipe.evaluate()`` computes when first needed;
        ``reads``: the storages it reads (see ``Storage.pending_value``)."""
        self = _new(cls)
        self._shape, self._dtype, self._layout = shape, dtype, None
        self._storage = _pending_value(shape, dtype, recipe, reads)
        return self

    @property
    def is_pending(self) -> bool:
        """Whether the data is a lazy value not computed yet."""
        return self._storage.pending is not None


#: ``(storage, layout)`` of a container (its :attr:`~Container.storage` and
#: :attr:`~Container.layout`) in one call without a Python frame: the array backend's
#: operators read both for every operand.
storage_and_layout = operator.attrgetter("_storage", "_layout")


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


def _raise():
    raise ValueError("not broadcastable")


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
