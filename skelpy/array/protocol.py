"""Containers as NumPy arrays: operators, ``__array_ufunc__``, ``__array_function__``.

This is the *array backend* the containers call (``containers.set_array_backend``).
Elementwise operators and ufuncs build pending values (:mod:`.expression`); reductions go to
:mod:`.reductions`; views and device copies to :mod:`.views`. Whatever skelpy does not do on
the device (another ufunc, a ufunc method such as ``np.add.outer``, ``out=``, a NumPy function
without a device version) is done by NumPy on the host, with a :class:`HostFallbackWarning`
the first time each one is met: never silently.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..containers import Container, Matrix, MatrixRow, Vector
from ..dtypes import SUPPORTED_DTYPES
from . import chains, expression, inputs, ops, reductions, stencils, views
from .graph import as_operand


class HostFallbackWarning(UserWarning):
    """An operation on containers ran in NumPy on the host (skelpy has no device version)."""


_WARNED: set = set()


def fallback_warning(what: str) -> None:
    if what in _WARNED:
        return
    _WARNED.add(what)
    warnings.warn(f"skelpy: {what} is not supported on the device; computed by NumPy on the "
                  "host (the containers are downloaded)", HostFallbackWarning, stacklevel=4)


def _host(x):
    if isinstance(x, (Container, MatrixRow)):
        return x.to_numpy()
    if isinstance(x, (list, tuple)):
        return type(x)(_host(v) for v in x)
    if isinstance(x, dict):
        return {k: _host(v) for k, v in x.items()}
    return x


def _operands(values) -> list | None:
    out = []
    for v in values:
        o = as_operand(v)
        if o is None:
            return None
        out.append(o)
    return out


_CONTAINERS = frozenset({Vector, Matrix})
#: operand types taken as they are (``as_operand`` returns them unchanged): containers,
#: Python scalars and NumPy scalars of a supported dtype
_PLAIN = _CONTAINERS | {bool, int, float} | {np.dtype(d).type for d in SUPPORTED_DTYPES}


def _binary(op: str, a, b):
    """``a op b`` for any operands (see ArrayBackend.binary)."""
    ta, tb = type(a), type(b)
    if ta in _PLAIN and tb in _PLAIN and (ta in _CONTAINERS or tb in _CONTAINERS) \
            and op != "matmul":          # the common case, without the conversions
        return expression.apply(op, [a, b])
    if op == "matmul":
        return views.matmul(a, b)
    operands = _operands((a, b))
    if operands is None or not any(isinstance(o, Container) for o in operands):
        return NotImplemented
    return expression.apply(op, operands)


class ArrayBackend:
    """What containers call for their NumPy-like behaviour (see the module docstring)."""

    # -- operators ----------------------------------------------------------------------------
    @staticmethod
    def binary(op: str, a, b):
        """``a op b`` (see :func:`expression.binary`)."""
        return expression.binary(a, b, op, _binary)

    @staticmethod
    def operator(op: str, name: str, reflected: bool = False):
        """The method ``name`` of containers computing ``self op other`` (or, ``reflected``,
        ``other op self``): :func:`expression.binary` itself, with ``op`` bound (no frame
        between Python's operator and the build: this sits on every operator of a loop)."""
        return expression.binary_operator(op, _binary, name, reflected)

    def unary(self, op: str, a):
        return expression.apply(op, [a])

    def inplace(self, op: str, target: Container, other) -> None:
        """``target op= other``: computed on the device, written into target's data (views
        of it see the change), in target's dtype (NumPy's same-kind casting rule)."""
        value = self.binary(op, target, other)
        if value is NotImplemented:
            raise TypeError(f"unsupported operand for {op}=: {type(other).__name__}")
        views.write(target, value, f"{expression.user_line()} ({op}=)")

    def assign(self, target: Container, key, value: Container) -> bool:
        """``target[key] = value`` for a container value: on the device (True), or False to
        let the container write through the host."""
        return views.assign(target, key, value)

    # -- views and copies ---------------------------------------------------------------------
    def gather(self, view: Container, rt):
        return views.gather(view, rt)

    def reshape(self, x: Container, shape):
        return views.reshape(x, shape)

    def astype(self, x: Container, dtype, copy: bool = True):
        if not copy and np.dtype(dtype) == x.dtype:
            return x
        return expression.astype(x, dtype)

    # -- reductions and skeleton chains -------------------------------------------------------
    def reduce(self, name: str, x: Container, axis, dtype):
        return reductions.reduce(name, x, axis, dtype)

    def defer(self, skeleton, args):
        return chains.defer(skeleton, args)

    def fused_reduce(self, skeleton, x: Container):
        return chains.fused_reduce(skeleton, x)

    def fused_stencil(self, skeleton, x: Container, extras, iterations, out_dtype):
        return stencils.fused_stencil(skeleton, x, extras, iterations, out_dtype)

    def fused_scan(self, skeleton, x: Container, params):
        return chains.fused_scan(skeleton, x, params)

    def allpairs_operands(self, A, B):
        return inputs.allpairs_operands(A, B)

    # -- NumPy protocols ----------------------------------------------------------------------
    def ufunc(self, ufunc, method, inputs, kwargs):
        name = ops.BY_UFUNC.get(ufunc)
        if method == "__call__" and name is not None and not kwargs:
            operands = list(inputs) if all(type(x) in _PLAIN for x in inputs) else \
                _operands(inputs)
            if operands is not None:
                return expression.apply(name, operands)
        if method == "reduce" and name in ("add", "multiply", "minimum", "maximum") \
                and len(inputs) == 1 and isinstance(inputs[0], Container) \
                and set(kwargs) <= {"axis", "dtype"}:
            red = {"add": "sum", "multiply": "prod", "minimum": "min", "maximum": "max"}[name]
            return reductions.reduce(red, inputs[0], kwargs.get("axis", 0),
                                     kwargs.get("dtype"))
        fallback_warning(f"np.{ufunc.__name__}" + ("" if method == "__call__" else
                                                   f".{method}")
                         + (f" with {', '.join(sorted(kwargs))}=" if kwargs else ""))
        return getattr(ufunc, method)(*_host(inputs), **_host(kwargs))

    def function(self, func, types, args, kwargs):
        impl = _FUNCTIONS.get(func)
        if impl is not None:
            try:
                return impl(*args, **kwargs)
            except _Unsupported:
                pass
        fallback_warning(f"np.{getattr(func, '__name__', func)}")
        return func(*_host(args), **_host(kwargs))


class _Unsupported(Exception):
    """Raised by a device implementation for arguments it does not take (NumPy does them)."""


def _where(cond, x=None, y=None):
    if x is None or y is None:
        raise _Unsupported
    operands = _operands((cond, x, y))
    if operands is None:
        raise _Unsupported
    return expression.apply("where", operands)


def _clip(a, a_min=None, a_max=None, out=None, **kwargs):
    if out is not None or kwargs or a_min is None or a_max is None:
        raise _Unsupported
    operands = _operands((a, a_min, a_max))
    if operands is None:
        raise _Unsupported
    return expression.apply("clip", operands)


def _reduction(name: str):
    def impl(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        if out is not None or keepdims or kwargs or not isinstance(a, Container):
            raise _Unsupported
        if name in ("min", "max", "argmin", "argmax") and dtype is not None:
            raise _Unsupported
        return reductions.reduce(name, a, axis, dtype)
    return impl


def _arg_reduction(name: str):
    def impl(a, axis=None, out=None, keepdims=False):
        if out is not None or keepdims or not isinstance(a, Container):
            raise _Unsupported
        return reductions.reduce(name, a, axis, None)
    return impl


def _transpose(a, axes=None):
    if axes is not None or not isinstance(a, Container):
        raise _Unsupported
    return a.T


def _reshape(a, *args, **kwargs):
    shape = kwargs.pop("shape", kwargs.pop("newshape", None))
    if shape is None and args:
        shape, args = args[0], args[1:]
    if args or kwargs or not isinstance(a, Container):
        raise _Unsupported
    return views.reshape(a, shape if isinstance(shape, tuple) else (shape,))


def _broadcast_to(array, shape, subok=False):
    if not isinstance(array, Container):
        raise _Unsupported
    return array.broadcast_to(shape if isinstance(shape, tuple) else (shape,))


_FUNCTIONS = {
    np.where: _where,
    np.clip: _clip,
    np.sum: _reduction("sum"),
    np.prod: _reduction("prod"),
    np.min: _reduction("min"),
    np.max: _reduction("max"),
    np.amin: _reduction("min"),
    np.amax: _reduction("max"),
    np.mean: _reduction("mean"),
    np.argmin: _arg_reduction("argmin"),
    np.argmax: _arg_reduction("argmax"),
    np.transpose: _transpose,
    np.reshape: _reshape,
    np.ravel: lambda a, order="C": views.reshape(a, (-1,)) if order == "C" else _raise(),
    np.broadcast_to: _broadcast_to,
}


def _raise():
    raise _Unsupported
