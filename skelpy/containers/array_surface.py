"""The NumPy array surface of containers: operators, ufuncs and ``__array_function__``,
``T``/``reshape``/``astype``, reductions and conversions to Python scalars.

Containers only forward these to the *array backend* (``skelpy.array``, which sits above the
skeletons and registers itself with :func:`set_array_backend` when skelpy is imported): it
builds the lazy values, so the containers package does not depend on the skeletons.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import layout as _layout

if TYPE_CHECKING:
    from .container import Container

_ARRAY = None

#: How many ``sk.lazy()`` blocks are open (in any thread; the backend checks its own): while
#: none is, Map and Zip calls pay one integer test for the feature.
lazy_calls = 0


def set_array_backend(backend) -> None:
    """Register the object that implements operators, ufuncs, reductions and device copies
    of views on containers (``skelpy.array`` does, when skelpy is imported). Its
    ``operator(op, name, reflected)`` makes the binary operator methods, which are then the
    containers' own (an operator in a loop of small expressions runs no frame of ours
    before the backend's)."""
    global _ARRAY
    _ARRAY = backend
    _install_binary(backend.operator)


def array_backend():
    if _ARRAY is None:                      # pragma: no cover - skelpy/__init__ registers it
        raise RuntimeError("skelpy.array is not loaded")
    return _ARRAY


def _reduction(name: str, takes_dtype: bool = False):
    """The container method ``name`` (``v.sum(axis)`` ...): ``np.<name>(self, axis=axis)`` on
    the device; any other NumPy keyword goes through ``np.<name>`` itself."""
    numpy_fn = getattr(np, name)
    if takes_dtype:
        def method(self, axis=None, dtype=None, **kwargs):
            if kwargs:
                return numpy_fn(self, axis=axis, dtype=dtype, **kwargs)
            return array_backend().reduce(name, self, axis, dtype)
    else:
        def method(self, axis=None, **kwargs):
            if kwargs:
                return numpy_fn(self, axis=axis, **kwargs)
            return array_backend().reduce(name, self, axis, None)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``np.{name}`` of the elements, along ``axis``, on the device."
    return method


class ArraySurface:
    """Operators, NumPy protocols, views by shape (``T``, ``reshape``), ``astype`` and the
    reductions of a container, each handed to the array backend."""

    __slots__ = ()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return array_backend().ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return array_backend().function(func, types, args, kwargs)

    @property
    def T(self) -> Container:                                    # noqa: N802 - NumPy's name
        """The transpose: a view (a Vector is its own transpose)."""
        if self.ndim == 1:
            return self
        self._storage.resolve()
        return self._view(_layout.transpose(self._own_layout()), self._shape[::-1])

    def transpose(self) -> Container:
        return self.T

    def reshape(self, *shape) -> Container:
        """A view with another 1-D or 2-D shape (``-1`` is inferred); the data must be
        C-contiguous, as for a view in NumPy (else :class:`ShapeError`)."""
        return array_backend().reshape(self, shape)

    def ravel(self) -> Container:
        return self.reshape(-1)

    def astype(self, dtype, copy: bool = True) -> Container:
        """The elements converted to ``dtype`` (lazy: fused into the kernel that reads it)."""
        return array_backend().astype(self, dtype, copy)

    # The reductions: on the device; NumPy's other keywords (``keepdims``, ``out``,
    # ``initial``, ``where``) go through ``np.<name>``, which does what it can on the
    # device and the rest on the host, with a one-time warning.
    sum = _reduction("sum", takes_dtype=True)
    prod = _reduction("prod", takes_dtype=True)
    min = _reduction("min")
    max = _reduction("max")
    mean = _reduction("mean", takes_dtype=True)
    argmin = _reduction("argmin")
    argmax = _reduction("argmax")
    any = _reduction("any")
    all = _reduction("all")

    def clip(self, min=None, max=None) -> Container:          # noqa: A002 - NumPy's names
        """``np.clip(self, min, max)`` (lazy, on the device)."""
        return np.clip(self, min, max)

    def round(self, decimals: int = 0) -> Container:
        return np.round(self, decimals)

    def flatten(self) -> Container:
        """A copy of the elements as a Vector, in C order (``reshape(-1)`` is the view)."""
        return array_backend().astype(self.reshape(-1), self.dtype, True)

    def squeeze(self, axis=None):
        """The Vector view of a matrix with one axis of length 1 (as ``np.squeeze``)."""
        return np.squeeze(self, axis)

    def fill(self, value) -> None:
        """Set every element to ``value`` (in this container's dtype, as NumPy's fill)."""
        self[:] = value

    def item(self, *args):
        return self.to_numpy().item(*args)

    def tolist(self) -> list:
        return self.to_numpy().tolist()

    # What NumPy arrays also have and skelpy computes on the host (np.std etc. warn once).
    def std(self, *args, **kwargs):
        return np.std(self, *args, **kwargs)

    def var(self, *args, **kwargs):
        return np.var(self, *args, **kwargs)

    def cumsum(self, *args, **kwargs):
        return np.cumsum(self, *args, **kwargs)

    def cumprod(self, *args, **kwargs):
        return np.cumprod(self, *args, **kwargs)

    def argsort(self, *args, **kwargs):
        return np.argsort(self, *args, **kwargs)

    def nonzero(self):
        return np.nonzero(self)

    def dot(self, other):
        return np.dot(self, other)

    def sort(self, axis: int = -1) -> None:
        """Sort in place (on the host, with a one-time HostFallbackWarning)."""
        self[:] = np.sort(self, axis=axis)

    def __divmod__(self, other):
        return _divmod(self, other)

    def __rdivmod__(self, other):
        return _divmod(other, self)

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous. Use a.any() or a.all()")
        return bool(self.to_numpy().reshape(-1)[0])

    def __float__(self) -> float:
        return float(self._single())

    def __int__(self) -> int:
        return int(self._single())

    def __index__(self) -> int:
        return self._single().__index__()

    def _single(self):
        if self.size != 1:
            raise TypeError("only containers of one element can be converted to Python "
                            "scalars")
        return self.to_numpy().reshape(-1)[0]


class RowSurface:
    """The NumPy surface of a Matrix row ``m[i]`` (a MatrixRow): operators, ufuncs,
    reductions and methods compute on the row's view ``m[i, :]``, on the device, so
    ``m[i] * 2`` and ``m[i] += 1`` work as on a NumPy row. (Comparisons are the row's own.)"""

    __slots__ = ()

    def _as_view(self) -> Container:
        return self._matrix[self._row, :]

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return array_backend().ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return array_backend().function(func, types, args, kwargs)

    def __getattr__(self, name: str):
        # the container methods (sum, astype, reshape, clip, any...) of the row's view
        if name.startswith("_") or not hasattr(ArraySurface, name):
            raise AttributeError(f"'MatrixRow' object has no attribute '{name}'")
        return getattr(self._as_view(), name)


def _row_method(name: str):
    def method(self, *args):
        return getattr(self._as_view(), name)(*args)
    method.__name__ = name
    return method


def _row_inplace(name: str):
    def method(self, other):
        view = self._as_view()
        getattr(view, name)(other)
        return self
    method.__name__ = name
    return method


def _divmod(a, b):
    """``divmod(a, b)``: ``(a // b, a % b)``, both lazy."""
    q = array_backend().binary("floor_divide", a, b)
    if q is NotImplemented:
        return NotImplemented
    return q, array_backend().binary("remainder", a, b)


_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
           "floordiv": "floor_divide", "mod": "remainder", "pow": "power",
           "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
           "lshift": "left_shift", "rshift": "right_shift", "matmul": "matmul"}
_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
            "gt": "greater", "ge": "greater_equal"}
_UNARY = {"neg": "negative", "pos": "positive", "invert": "invert", "abs": "absolute"}


def _binary(op: str, name: str, reflected: bool = False):
    """An operator method handing the operation to the backend (until one is registered:
    :func:`set_array_backend` installs the backend's own)."""
    if reflected:
        def method(self, other):
            return array_backend().binary(op, other, self)
    else:
        def method(self, other):
            return array_backend().binary(op, self, other)
    return method


def _install_binary(make) -> None:
    """Set the binary operator methods of containers to ``make(op, name, reflected)``."""
    for name, op in _BINARY.items():
        setattr(ArraySurface, f"__{name}__", make(op, f"__{name}__"))
        setattr(ArraySurface, f"__r{name}__", make(op, f"__r{name}__", reflected=True))
    for name, op in _COMPARE.items():
        setattr(ArraySurface, f"__{name}__", make(op, f"__{name}__"))


def _inplace(op: str):
    def method(self, other):
        array_backend().inplace(op, self, other)
        return self
    return method


def _unary(op: str):
    def method(self):
        return array_backend().unary(op, self)
    return method


_install_binary(_binary)
for _name, _op in _BINARY.items():
    setattr(ArraySurface, f"__i{_name}__", _inplace(_op))
for _name, _op in _UNARY.items():
    setattr(ArraySurface, f"__{_name}__", _unary(_op))
for _name in _BINARY:
    for _m in (f"__{_name}__", f"__r{_name}__"):
        setattr(RowSurface, _m, _row_method(_m))
    setattr(RowSurface, f"__i{_name}__", _row_inplace(f"__i{_name}__"))
for _m in (*(f"__{n}__" for n in _UNARY), "__divmod__", "__rdivmod__", "__float__",
           "__int__", "__index__"):
    setattr(RowSurface, _m, _row_method(_m))
