"""Containers as NumPy arrays: operators, ``__array_ufunc__``, ``__array_function__``.

This is the *array backend* the containers call (``containers.set_array_backend``).
Elementwise operators and ufuncs build pending values (:mod:`.expression`); reductions go to
:mod:`.reductions`; views and device copies to :mod:`.views`. Whatever skelpy does not do on
the device (another ufunc, a ufunc method such as ``np.add.outer``, ``out=``, a NumPy function
without a device version) is done by NumPy on the host, with a :class:`HostFallbackWarning`
the first time each one is met: never silently.
"""

from __future__ import annotations

import builtins
import warnings

import numpy as np

from ..containers import Container, Matrix, MatrixRow, Vector
from ..dtypes import SUPPORTED_DTYPES
from ..errors import ShapeError, dtype_error_like
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
    if operands is None and (type(a) is complex or type(b) is complex):
        fallback_warning("complex numbers")   # no complex dtype on the device: NumPy's
        return ops.numpy_op(op)(*_host((a, b)))
    if operands is None and op in ("equal", "not_equal") and any(
            x is None or isinstance(x, (str, bytes)) for x in (a, b)):
        # NumPy: no element equals None or a string (Python would compare identities)
        x = a if isinstance(a, Container) else b
        return (Vector if x.ndim == 1 else Matrix)(np.full(x.shape, op == "not_equal"))
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
        if method == "__call__" and ufunc is np.matmul and not kwargs and len(inputs) == 2:
            return views.matmul(*(as_operand(x) if type(x) is MatrixRow else x
                                  for x in inputs))
        if method == "__call__" and ufunc is np.divmod and not kwargs:
            operands = _operands(inputs)
            if operands is not None:
                return (expression.apply("floor_divide", operands),
                        expression.apply("remainder", operands))
        out = kwargs.get("out")
        outs = out if isinstance(out, tuple) else (out,)
        if method == "__call__" and name is not None and set(kwargs) == {"out"} \
                and len(outs) == 1 and isinstance(outs[0], (Container, MatrixRow)):
            # ufunc(x, ..., out=container): computed on the device, written into it with
            # NumPy's same-kind casting (views of it see the change)
            operands = _operands(inputs)
            if operands is not None:
                target = as_operand(outs[0])
                value = expression.apply(name, operands)
                try:
                    fits = np.broadcast_shapes(value.shape, target.shape) == target.shape
                except ValueError:
                    fits = False
                if not fits:
                    raise ShapeError(f"non-broadcastable output operand with shape "
                                     f"{target.shape} doesn't match the broadcast shape "
                                     f"{value.shape}")
                views.write(target, value, f"{expression.user_line()} (out=)")
                return out if isinstance(out, tuple) and len(out) != 1 else outs[0]
        if method == "reduce" and name in ("add", "multiply", "minimum", "maximum") \
                and len(inputs) == 1 and isinstance(inputs[0], Container) \
                and set(kwargs) <= {"axis", "dtype"}:
            red = {"add": "sum", "multiply": "prod", "minimum": "min", "maximum": "max"}[name]
            return reductions.reduce(red, inputs[0], kwargs.get("axis", 0),
                                     kwargs.get("dtype"))
        fallback_warning(f"np.{ufunc.__name__}" + ("" if method == "__call__" else
                                                   f".{method}")
                         + (f" with {', '.join(sorted(kwargs))}=" if kwargs else ""))
        return _host_ufunc(ufunc, method, inputs, kwargs)

    def function(self, func, types, args, kwargs):
        if any(type(a) is MatrixRow for a in args):         # m[i]: as the view m[i, :]
            args = tuple(as_operand(a) if type(a) is MatrixRow else a for a in args)
        impl = _FUNCTIONS.get(func)
        if impl is not None:
            try:
                return impl(*args, **kwargs)
            except _Unsupported:
                pass
        fallback_warning(f"np.{getattr(func, '__name__', func)}")
        return _host_call(func, args, kwargs, first_written=func in _WRITES_FIRST)


#: NumPy functions that write into their first argument
_WRITES_FIRST = frozenset({np.put, np.place, np.putmask, np.fill_diagonal})


def _host_ufunc(ufunc, method, inputs, kwargs):
    return _host_call(getattr(ufunc, method), inputs, kwargs, first_written=method == "at")


def _host_call(func, inputs, kwargs, first_written: bool = False):
    """NumPy's ``func`` on host copies; the containers it writes (``out=``, the first
    operand of ``ufunc.at`` or ``np.put``) get the result written back through them, so
    that their device copies and pending readers stay right (NumPy would write into a
    read-only snapshot, or, for ``at``, ignore that it is read-only)."""
    inputs, kwargs = list(inputs), dict(kwargs)
    written: list[tuple] = []

    def writable(x):
        if isinstance(x, (Container, MatrixRow)):
            copy = np.array(x.to_numpy())
            written.append((x, copy))
            return copy
        return x

    if first_written and inputs:
        inputs[0] = writable(inputs[0])
    out = kwargs.get("out")
    if out is not None:
        kwargs["out"] = tuple(writable(o) for o in out) if isinstance(out, tuple) \
            else writable(out)
    result = func(*_host(inputs), **_host(kwargs))
    for target, copy in written:
        target[:] = copy
    if out is not None:                       # NumPy returns its out arrays: ours
        back = {id(c): t for t, c in written}
        if isinstance(result, tuple):
            return tuple(back.get(id(r), r) for r in result)
        return back.get(id(result), result)
    return result


class _Unsupported(Exception):
    """Raised by a device implementation for arguments it does not take (NumPy does them)."""


def _where(cond, x=None, y=None):
    if x is None or y is None:
        raise _Unsupported
    operands = _operands((cond, x, y))
    if operands is None:
        raise _Unsupported
    return expression.apply("where", operands)


def _clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None,  # noqa: A002
          **kwargs):
    """``np.clip`` on the device; with one bound None it is NumPy's own ``np.minimum`` or
    ``np.maximum`` (what NumPy computes then)."""
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    if out is not None or kwargs or (lo is None and hi is None):
        raise _Unsupported
    if isinstance(a, Container) and a.dtype.kind in "iu":
        # NumPy clips integers with Python ints past their dtype's range at that range
        # (np.clip(int8, -300, 300) is the identity), never wrapping the bound
        info = np.iinfo(a.dtype)
        lo, hi = (builtins.min(builtins.max(b, int(info.min)), int(info.max))
                  if type(b) is int else b for b in (lo, hi))
    operands = _operands((a, lo if lo is not None else hi) if lo is None or hi is None
                         else (a, lo, hi))
    if operands is None:
        raise _Unsupported
    if lo is None:
        return expression.apply("minimum", operands)
    if hi is None:
        return expression.apply("maximum", operands)
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


def _dot(a, b, out=None):
    """``np.dot`` of vectors and matrices is their ``matmul``."""
    if out is not None or not all(isinstance(x, (Container, np.ndarray)) and 1 <= x.ndim <= 2
                                  for x in (a, b)):
        raise _Unsupported
    return views.matmul(a, b)


def _squeeze(a, axis=None):
    """A matrix with one axis of length 1 as the Vector view along its other axis (what
    else NumPy squeezes to has no container: 0-d results, on the host)."""
    if not isinstance(a, Container) or a.ndim != 2 or a.shape.count(1) != 1:
        raise _Unsupported
    unit = a.shape.index(1)
    if axis is not None and (axis if isinstance(axis, tuple) else (axis,)) not in \
            ((unit,), (unit - 2,)):
        raise _Unsupported
    return a[0, :] if unit == 0 else a[:, 0]


def _logical(name: str):
    def impl(a, axis=None, out=None, keepdims=False, **kwargs):
        if out is not None or keepdims or kwargs or not isinstance(a, Container):
            raise _Unsupported
        return reductions.reduce(name, a, axis, None)
    return impl


def _round(a, decimals=0, out=None):
    """``np.round`` with no decimals: ``rint`` of floats (half to even, as NumPy) and of bools
    (NumPy's float16, float32 here); integers are their own rounding."""
    if out is not None or decimals != 0 or not isinstance(a, Container):
        raise _Unsupported
    if a.dtype.kind in "fb":
        return expression.apply("rint", [a])
    return a.astype(a.dtype)


def _copyto(dst, src, casting="same_kind", where=True):
    """``np.copyto(container, value)``: NumPy's casting check (on an empty probe, so its
    error is NumPy's, as a skelpy error), then the write, on the device for a container."""
    if not isinstance(dst, Container) or where is not True:
        raise _Unsupported
    value = as_operand(src)
    if value is None:
        raise _Unsupported
    probe = np.empty((0,) * dst.ndim, dst.dtype)
    try:
        np.copyto(probe, np.empty((0,) * value.ndim, value.dtype)
                  if isinstance(value, Container) else value, casting=casting)
    except (TypeError, ValueError, OverflowError) as exc:
        raise dtype_error_like(exc)(f"{expression.user_line()} (copyto): {exc}") from None
    if isinstance(value, Container):
        views.write(dst, value, f"{expression.user_line()} (copyto)", casting="unsafe")
    else:
        dst[:] = value


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
    np.dot: _dot,
    np.squeeze: _squeeze,
    np.any: _logical("any"),
    np.all: _logical("all"),
    np.round: _round,
    np.around: _round,
    np.copyto: _copyto,
    np.transpose: _transpose,
    np.reshape: _reshape,
    np.ravel: lambda a, order="C": views.reshape(a, (-1,)) if order == "C" else _raise(),
    np.broadcast_to: _broadcast_to,
}


def _raise():
    raise _Unsupported
