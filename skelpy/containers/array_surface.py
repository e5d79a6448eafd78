"""The NumPy array surface of containers: operators, ufuncs and ``__array_function__``,
``T``/``reshape``/``astype``, reductions and conversions to Python scalars.

Containers only forward these to the *array backend* (``skelpy.array``, which sits above the
skeletons and registers itself with :func:`set_array_backend` when skelpy is imported): it
builds the lazy values, so the containers package does not depend on the skeletons.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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

    def sum(self, axis=None, dtype=None):
        return array_backend().reduce("sum", self, axis, dtype)

    def prod(self, axis=None, dtype=None):
        return array_backend().reduce("prod", self, axis, dtype)

    def min(self, axis=None):
        return array_backend().reduce("min", self, axis, None)

    def max(self, axis=None):
        return array_backend().reduce("max", self, axis, None)

    def mean(self, axis=None, dtype=None):
        return array_backend().reduce("mean", self, axis, dtype)

    def argmin(self, axis=None):
        return array_backend().reduce("argmin", self, axis, None)

    def argmax(self, axis=None):
        return array_backend().reduce("argmax", self, axis, None)

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
