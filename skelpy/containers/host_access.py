"""Reading and writing parts of a container from the host: ``v[i]``, ``v[a:b]``, ``m[i, j] = x``,
``with v.host_edit() as a:``, and a Matrix's row ``m[i]`` (:class:`MatrixRow`).

Host access is where a container's rule (what a read hands out never changes afterwards;
writes go through the container, which knows its device copy is stale) meets partial
transfers: an element or a regular slice of data that is newest on the device moves alone
(:mod:`.selection`, :mod:`.storage`). :class:`HostAccess` is a base of
:class:`~skelpy.containers.Container` (the only one), kept here so that the container
module holds what a container is and this one how its parts are read and written.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from . import layout as _layout
from .array_surface import RowSurface, array_backend
from .layout import Layout
from .selection import Selection, as_int, basic_selection, checked_int
from .storage import assign

if TYPE_CHECKING:
    from .container import Matrix


class HostAccess:
    """Element, slice and host-side access of a container (a base of Container only, so
    ``isinstance(x, HostAccess)`` is "x is a container")."""

    __slots__ = ()
    collective: ClassVar[Any]       # the MPI hook, declared and installed on Container

    def __getitem__(self, key):
        """An element (a NumPy scalar, only it moves from the device), a *view* for ints and
        slices (``v[a:b]``, ``v[::2]``, ``m[r0:r1, c0:c1]``, ``m[:, j]``: a container over
        the same data, read and written through), or a read-only array for any other index
        (lists, masks). ``m[i]`` is a :class:`MatrixRow` that also writes through."""
        key = _plain(key)
        if self.ndim == 2:
            row = _row_of(key)
            if row is not None:
                return MatrixRow(self, checked_int(row, self._shape[0], 0))
        s = self._storage
        s.resolve()
        if self._layout is None:
            sel = basic_selection(key, self._shape)
            if sel is not None and all(sel.dropped):        # an element
                if s.host is not None:
                    return s.host[tuple(sel.first)]
                return s.read_part(sel)
        part = _layout.index(self._own_layout(), self._shape, key)
        if part is None:                                    # lists, masks: on the host
            if self._layout is None:
                return s.read_host(key)
            out = self.to_numpy()[key]
            if isinstance(out, np.ndarray):
                out.flags.writeable = False
            return out
        s.resolve()
        if isinstance(part, int):                           # an element of a view
            return self._element(part)
        return self._view(*part)

    def _element(self, position: int):
        """The element at ``position`` of the block (only it moves from the device)."""
        s = self._storage
        if s.host is not None:
            return s.host.reshape(-1)[position]
        return s.read_part(_one_element(position, s.shape))

    def __setitem__(self, key, value) -> None:
        """Write on the host, or straight into the device copy when that one is the newest
        and the index is basic (ints and slices): then only the touched elements move. A
        container (or array expression) written into a part of a container on the device
        is copied there by a kernel."""
        _layout.check_writable(self._layout, self._shape, self)
        hook = self.collective
        if hook is not None and hook.active():      # under MPI: every rank writes the same
            hook.host_write(self, key, value)
        if isinstance(value, HostAccess) and not isinstance(key, HostAccess) \
                and array_backend().assign(self, key, value):
            return
        key, value = _plain(key), _plain(value)
        s = self._storage
        s.resolve()
        if self._layout is None:
            if s.host is None:
                sel = basic_selection(key, self._shape)
                if sel is not None:
                    s.write_part(sel, value, self)
                    return
            s.write_host(key, value, self)
            return
        part = _layout.index(self._layout, self._shape, key)
        if s.host is None and part is not None:
            if isinstance(part, int):
                s.write_part(_one_element(part, s.shape), value, self)
                return
            sel = _layout.selection_of(part[0], part[1], s.shape)
            if sel is not None:
                s.write_part(sel, value, self)
                return
        host = s.writable_host()
        try:
            target = _writable_view(host, self._layout, self._shape)
            assign(target, key, value, self)
        except BaseException:
            s.host_written(changed=False)
            raise
        s.host_written()

    @contextmanager
    def host_edit(self) -> Iterator[np.ndarray]:
        """``with v.host_edit() as a:`` gives the data as a writable ndarray for in-place
        NumPy work; skeletons called inside or after the block see the edits. The array
        becomes read-only when the block ends: do not keep it."""
        _layout.check_writable(self._layout, self._shape, self)
        hook = self.collective
        hook = hook if hook is not None and hook.active() else None
        if hook is not None:                        # under MPI: every rank edits the same
            hook.host_edit(self, None)
        s = self._storage
        s.resolve()
        arr = s.begin_edit().view()
        if self._layout is not None:
            arr = _writable_view(arr, self._layout, self._shape)
        try:
            yield arr
        finally:
            arr.flags.writeable = False
            s.end_edit()
            if hook is not None:
                hook.host_edit(self, arr)


class MatrixRow(RowSurface):
    """``m[i]``: row ``i`` of a Matrix, read and written through it (so ``m[i][j] = x``
    works, as in SkelCL). It reads like a 1-D array (``np.asarray(row)``, ``row[a:b]``) and
    computes like its view ``m[i, :]`` (``m[i] * 2``, ``m[i] += 1``, ``np.sum(m[i])``)."""

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
        return self._matrix[self._row, :].to_numpy()

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
    if isinstance(value, (HostAccess, MatrixRow)):
        return value.to_numpy()
    if isinstance(value, tuple) and any(isinstance(v, (HostAccess, MatrixRow)) for v in value):
        return tuple(_plain(v) for v in value)
    return value



def _one_element(position: int, shape: tuple[int, ...]) -> Selection:
    """The element at flat ``position`` of a block of ``shape``, as a selection."""
    first = tuple(int(i) for i in np.unravel_index(position, shape))
    n = len(shape)
    return Selection(first, (1,) * n, (1,) * n, (False,) * n, (True,) * n)


def _writable_view(block: np.ndarray, lay: Layout, shape: tuple[int, ...]) -> np.ndarray:
    """A writable strided view of the (writable) host block."""
    if math.prod(shape) == 0:
        return np.empty(shape, block.dtype)
    item = block.dtype.itemsize
    return np.lib.stride_tricks.as_strided(block.reshape(-1)[lay.offset:], shape,
                                           tuple(st * item for st in lay.strides))



def _row_of(key) -> int | None:
    """The row of ``m[i]`` (or ``m[(i,)]``); None for any other index."""
    if isinstance(key, tuple):
        if len(key) != 1:
            return None
        key = key[0]
    return as_int(key)

