"""Views on the device: copies of views, reshapes, writes through views, matrix products.

A view (``containers.layout``) is read by kernels in place, through its offset and strides
(``skeletons.arguments.ViewInput``). A skeleton that needs a block of its own (a stencil's
tile loads, AllPairs, Scan, an extra argument read by index) gets one from :func:`gather`: a
fused copy kernel on the device, no host round trip. Writes through a view (``v[a:b] = w``,
``v[::2] += 1``) run :func:`scatter` on the device.
"""

from __future__ import annotations

import math

import numpy as np

from .. import runtime as _rt
from ..containers import Container, Matrix, Vector
from ..containers.layout import Layout, c_strides, check_writable, is_contiguous
from ..dtypes import storage_c_type
from ..errors import DTypeError, ShapeError
from ..skeletons.kernel_source import kernel_file
from . import expression, fusion

SCATTER_WG = 256


def gather(view: Container, rt: _rt.Runtime):
    """A fresh device buffer holding the view's elements in C order."""
    out, _skeleton = fusion.compute(expression.node_of(view), view.shape)
    return out.device_buffer(rt)


def reshape(x: Container, shape) -> Container:
    """A view of ``x``'s data with another shape (NumPy's rules; ``-1`` is inferred)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = [int(s) for s in shape]
    n = x.size
    if shape.count(-1) > 1 or any(s < -1 for s in shape):
        raise ShapeError(f"cannot reshape {x!r} to {tuple(shape)}")
    if -1 in shape:
        rest = math.prod(s for s in shape if s != -1)
        if rest == 0 or n % rest:
            raise ShapeError(f"cannot reshape array of size {n} into shape {tuple(shape)}")
        shape[shape.index(-1)] = n // rest
    shape = tuple(shape)
    if math.prod(shape) != n:
        raise ShapeError(f"cannot reshape array of size {n} into shape {shape}")
    if len(shape) not in (1, 2):
        raise ShapeError(f"containers are 1-D or 2-D; cannot reshape to {shape}")
    x.storage.resolve()
    lay = x.layout
    if lay is not None and not is_contiguous(lay, x.shape):
        x = expression.copy_of(x)            # NumPy copies here too
        x.storage.resolve()
        lay = None
    offset = 0 if lay is None else lay.offset
    return x._view(Layout(offset, c_strides(shape)), shape)   # noqa: SLF001


def write(target: Container, value: Container, where: str,
          casting: str = "same_kind") -> None:
    """Write ``value`` (broadcast to target's shape) into ``target``'s elements, on the
    device; casting as NumPy's in-place operators (same kind)."""
    if value.dtype != target.dtype and not np.can_cast(value.dtype, target.dtype, casting):
        raise DTypeError(f"{where}: Cannot cast ufunc output from {value.dtype} to "
                             f"{target.dtype} with casting rule 'same_kind'")
    _store(target, value)


def assign(target: Container, key, value: Container) -> bool:
    """``target[key] = value`` on the device when the key is basic (a view) and the data is
    there (or the value is computed there); False lets the container write on the host."""
    part = target[key] if not _is_element_key(target, key) else None
    if not isinstance(part, Container):
        return False
    if part.storage.host is not None and not value.is_pending \
            and value.storage.host is not None:
        return False                          # both on the host: NumPy's assignment is cheaper
    try:
        np.broadcast_shapes(value.shape, part.shape) == part.shape or _no()
    except ValueError:
        raise ShapeError(f"could not broadcast input array from shape {value.shape} into "
                         f"shape {part.shape}") from None
    _store(part, value)
    return True


def _no():
    raise ValueError


def _is_element_key(target: Container, key) -> bool:
    parts = key if isinstance(key, tuple) else (key,)
    return len(parts) == target.ndim and all(isinstance(p, (int, np.integer)) for p in parts)


def _store(target: Container, value: Container) -> None:
    check_writable(target.layout, target.shape, target)
    if value.shape != target.shape:
        value = value.broadcast_to(target.shape)
    rt = _rt.current()
    storage = target.storage
    if target.layout is not None and value.dtype == target.dtype and value.layout is None \
            and not value.is_pending and value.storage is not storage:
        src = value.device_buffer(rt)        # scattered straight from the value's block
    else:
        if value.dtype != target.dtype:
            value = expression.astype(value, target.dtype, "write")
        # a block nobody else holds, computed before the target changes
        fresh, _skeleton = fusion.compute(expression.node_of(value), target.shape)
        src = fresh.device_buffer(rt)
    storage = target.storage
    storage.resolve()
    if target.layout is None:
        storage.take(src, rt)
        return
    if storage.readers:
        storage.before_write()
    dst = storage.device_buffer(rt)
    n = target.size
    if n:
        lay = target.layout
        if target.ndim == 1:
            s0, s1, cols = 0, lay.strides[0], n
        else:
            (s0, s1), cols = lay.strides, target.shape[1]
        kernel = _scatter_kernel(rt, target.dtype)
        gsize = -(-n // SCATTER_WG) * SCATTER_WG
        rt.launch(kernel, (gsize,), (SCATTER_WG,),
                  [dst, np.int64(n), np.int64(lay.offset), np.int64(s0), np.int64(s1),
                   np.int64(cols), src], params={"wg": SCATTER_WG}, skeleton="scatter",
                  origin="skelpy.array.views.scatter")
    storage.device_written()


_SCATTER: dict = {}


def _scatter_kernel(rt: _rt.Runtime, dtype: np.dtype):
    key = (rt, dtype)
    k = _SCATTER.get(key)
    if k is None:
        prg = rt.build(kernel_file("array_scatter.cl"), (f"-DSKP_T={storage_c_type(dtype)}",),
                       origin="skelpy.array.views.scatter")
        k = _SCATTER[key] = rt.kernel(prg, "skelpy_scatter", origin="skelpy.array.views")
    return k


# -- matrix products ---------------------------------------------------------------------------

_MATMUL = None


def matmul(a, b):
    """``A @ B``: of two matrices, AllPairs of A's rows and B's columns (B.T, a view); with a
    Vector, the products' sum along the shared axis (one MapReduce: ``(A * x).sum(1)``),
    accumulated in the result dtype as NumPy's ``matmul`` does."""
    global _MATMUL
    from ..skeletons import AllPairs
    from .protocol import fallback_warning
    a = Vector(a) if isinstance(a, np.ndarray) and a.ndim == 1 else \
        Matrix(a) if isinstance(a, np.ndarray) and a.ndim == 2 else a
    b = Vector(b) if isinstance(b, np.ndarray) and b.ndim == 1 else \
        Matrix(b) if isinstance(b, np.ndarray) and b.ndim == 2 else b
    if not (isinstance(a, Container) and isinstance(b, Container)) \
            or np.result_type(a.dtype, b.dtype) == np.bool_:
        fallback_warning("@ (matmul) of other than containers of numbers")
        return np.matmul(np.asarray(a), np.asarray(b))
    inner_a, inner_b = a.shape[-1], b.shape[0]
    if inner_a != inner_b:
        raise ShapeError(f"matmul: input operand 1 has a mismatch in its core dimension 0 "
                         f"(size {inner_b} is different from {inner_a})")
    if a.ndim == 1 or b.ndim == 1:
        dt = np.result_type(a.dtype, b.dtype)
        if a.ndim == 1 and b.ndim == 1:
            return (a * b).sum(dtype=dt)
        if a.ndim == 2:
            return (a * b).sum(axis=1, dtype=dt)
        return (a.reshape(-1, 1) * b).sum(axis=0, dtype=dt)
    if _MATMUL is None:
        _MATMUL = AllPairs(zip=_mul, reduce=_add)
    return _MATMUL(a, b.T)


def _mul(x, y):
    return x * y


def _add(x, y):
    return x + y


__all__ = ["assign", "gather", "matmul", "reshape", "write", "Vector"]
