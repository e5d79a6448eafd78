"""``np.sum/prod/min/max/mean/argmin/argmax`` (and the methods) on containers, on the device.

A reduction of an array expression is ONE kernel: the expression's fused muscle (``fusion``)
is the map of a :class:`~skelpy.skeletons.MapReduce` over the expression's leaves, so
``np.sum((x - y) ** 2)`` reads x and y once and stores nothing in between. Dtypes follow
NumPy: ``sum``/``prod`` accumulate as ``np.sum`` does (``fold_muscle``), ``mean`` in float64
for integers (the input's float type otherwise), ``min``/``max`` propagate NaN as
``np.minimum``/``np.maximum`` do, and an empty ``min``/``max``/``argmin``/``argmax`` is
NumPy's ValueError. ``axis=None``, 0 or 1 (a Vector's only axis gives a scalar).

``argmin``/``argmax`` of data of at most 32 bits (and fewer than 2^32 positions per fold)
take ONE pass: each element becomes a 64-bit key, its value's rank in the high half (an
order-preserving bit pattern: floats with -0.0 as 0.0, NaN ranked first as NumPy finds the
first NaN; negated for argmax) and its position in the low half, and the keys are folded
with ``min`` — so ties go to the first position, as in NumPy. 64-bit data take two passes:
the extreme value (per row or column), then the first position holding it (NaN: the first
NaN) — a MapReduce over the data, an index space and the extremes (broadcast along the axis
as a view), folding positions with ``min``.
"""

from __future__ import annotations

import operator
import threading

import numpy as np

from ..containers import Container, IndexMatrix, IndexVector, Vector
from ..dtypes import c_type
from ..errors import DTypeError, ShapeError
from ..skeletons import MapReduce
from . import expression, fusion

_NOT_FOUND = int(np.iinfo(np.int64).max)     # the positions' fold identity
_LOCK = threading.Lock()
_SKELETONS: dict[tuple, MapReduce] = {}


def _add(a, b):
    return a + b


def _mul(a, b):
    return a * b


def _minimum(a, b):
    return np.minimum(a, b)


def _maximum(a, b):
    return np.maximum(a, b)


def _first_min(a, b):
    return min(a, b)


def _first_flat(x, i, m, big):
    return i if (x == m or (m != m and x != x)) else big


def _first_in_row(x, p, m, big):
    return p[1] if (x == m or (m != m and x != x)) else big


def _first_in_col(x, p, m, big):
    return p[0] if (x == m or (m != m and x != x)) else big


# the same for integers and bools, which have no NaN: ``x != x`` of an integer made clang warn
# ("self-comparison always evaluates to false"; PoCL printed "2 warnings generated." on stderr)


def _first_flat_exact(x, i, m, big):
    return i if x == m else big


def _first_in_row_exact(x, p, m, big):
    return p[1] if x == m else big


def _first_in_col_exact(x, p, m, big):
    return p[0] if x == m else big


def _extreme_identity(name: str, dt: np.dtype):
    if dt == np.bool_:
        return name == "min"
    if dt.kind == "f":
        return np.inf if name == "min" else -np.inf
    info = np.iinfo(dt)
    return int(info.max) if name == "min" else int(info.min)


class AxisError(ShapeError, np.exceptions.AxisError):
    """An axis a container does not have: NumPy's AxisError (a ValueError and an
    IndexError), also a skelpy ShapeError."""


_ALL = "all axes"


def _axis(x: Container, axis):
    """The axis of a reduction: None (all of them, also a tuple naming both), 0 or 1, or
    ``()`` for none (NumPy: the elements themselves)."""
    if axis is None:
        return None
    axes = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for a in axes:
        try:
            if isinstance(a, (bool, np.bool_)):
                raise TypeError
            a = operator.index(a)
        except TypeError:
            raise DTypeError(f"an axis must be an integer, not {type(a).__name__}") from None
        if not -x.ndim <= a < x.ndim:
            raise AxisError(f"axis {a} is out of bounds for array of dimension {x.ndim}")
        a %= x.ndim
        if a in out:
            raise ShapeError("duplicate value in 'axis'")
        out.append(a)
    if not isinstance(axis, tuple):
        return None if x.ndim == 1 else out[0]
    if len(out) == x.ndim:
        return None
    return out[0] if out else ()


def _skeleton(key: tuple, make) -> MapReduce:
    with _LOCK:
        sk = _SKELETONS.get(key)
        if sk is None:
            if len(_SKELETONS) > 4 * fusion.MAX_CACHED_SKELETONS:
                _SKELETONS.clear()
            sk = _SKELETONS[key] = make()
        return sk


def fold(name: str, x: Container, axis: int | None, dtype=None):
    """sum / prod / min / max of ``x`` (an expression, a view or a container) in one kernel."""
    program = fusion.linearise(expression.node_of(x), x.shape)
    muscle = fusion.muscle_for(program)
    reduce_fn, identity = {
        "sum": (_add, 0), "prod": (_mul, 1),
        "min": (_minimum, None), "max": (_maximum, None)}[name]
    if identity is None:
        identity = _extreme_identity(name, x.dtype)
    dt = None if dtype is None else np.dtype(dtype)
    key = (program.key, name, axis, dt)
    sk = _skeleton(key, lambda: MapReduce(muscle, reduce_fn, identity, axis=axis, dtype=dt,
                                          inputs=len(program.leaves)))
    fusion.LAST.skeleton = sk
    return sk(*program.leaves, *program.consts)


def reduce(name: str, x: Container, axis, dtype):
    """``np.<name>(x, axis=axis, dtype=dtype)`` on the device (see the module docstring)."""
    if name in ("argmin", "argmax") and isinstance(axis, tuple):
        raise DTypeError(f"{name}: an axis must be an integer, not a tuple")
    ax = _axis(x, axis)
    if ax == ():                             # no axis: each element is its own reduction
        return _elementwise(name, x, dtype)
    where = f"{expression.user_line()} ({name})"
    if name in ("any", "all"):
        return _logical(name, x, ax)
    if name in ("min", "max", "argmin", "argmax"):
        empty = x.size == 0 if ax is None else x.shape[ax] == 0
        if empty:
            raise ShapeError(f"{where}: zero-size array to reduction operation "
                             f"{'minimum' if 'min' in name else 'maximum'} which has no "
                             "identity" if name in ("min", "max") else
                             f"{where}: attempt to get {name} of an empty sequence")
    if name in ("sum", "prod", "min", "max"):
        return fold(name, x, ax, dtype)
    if name == "mean":
        acc = dtype
        if acc is None:
            acc = np.float64 if x.dtype.kind in "biu" else x.dtype
        count = x.size if ax is None else x.shape[ax]
        total = fold("sum", x, ax, acc)
        if ax is None:
            with np.errstate(all="ignore"):
                return np.dtype(acc).type(total / count)
        return total / count
    return _arg(name, x, ax)


def _elementwise(name: str, x: Container, dtype):
    """A reduction over no axis (``axis=()``): each element alone, in the dtype NumPy gives
    (``np.sum(int8, axis=())`` is int64, ``np.mean`` float64, ``np.any`` bool)."""
    if name in ("any", "all"):
        return x.astype(np.bool_)
    probe = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max,
             "mean": np.mean}[name]
    with np.errstate(all="ignore"):
        dt = probe(np.zeros((1, 1) if x.ndim == 2 else 1, x.dtype), axis=(),
                   **({"dtype": dtype} if dtype is not None else {})).dtype
    return x.astype(dt)


def _logical(name: str, x: Container, ax):
    """``np.any``/``np.all``: the max/min of the elements as bool; over no elements False
    for any and True for all, as NumPy."""
    span = x.size if ax is None else x.shape[ax]
    if span == 0:
        if ax is None:
            return np.bool_(name == "all")
        return Vector(np.full(x.shape[1 - ax], name == "all"))
    return fold("max" if name == "any" else "min", x.astype(np.bool_), ax)


#: The key of one element for the one-pass argmin/argmax (``T``: the data's C type; ``RANK``:
#: its value's ascending rank as a uint, never 0 for floats except for NaN; ``POS``: its
#: position in the fold).
_KEY_MUSCLE = """ulong func(T x, skelpy_index_point p, long cols) {
    uint rank;
    RANK
    if (ARGMAX) rank = ~rank;
    FIRST_NAN
    return ((ulong)rank << 32) | (ulong)(uint)(POS);
}"""
_RANK = {
    "f": "if (isnan(x)) rank = 0u; else { float v = (x == 0.0f) ? 0.0f : x; "
         "uint b = as_uint(v); rank = (b & 0x80000000u) ? ~b : (b | 0x80000000u); }",
    "i": "rank = ((uint)(int)x) ^ 0x80000000u;",
    "u": "rank = (uint)x;",
    "b": "rank = (uint)(x ? 1 : 0);",
}
_POS = {1: "p.col", 0: "p.row"}


def _one_pass(x: Container, ax: int | None) -> bool:
    span = x.size if ax is None else x.shape[ax]
    return x.dtype.itemsize <= 4 and span < 2**32


def _key_skeleton(name: str, dt: np.dtype, ax: int | None) -> MapReduce:
    def make():
        src = (_KEY_MUSCLE.replace("RANK", _RANK[dt.kind])
               .replace("ARGMAX", "1" if name == "argmax" else "0")
               .replace("FIRST_NAN", "if (isnan(x)) rank = 0u;" if dt.kind == "f" else "")
               .replace("T x", f"{c_type(dt)} x"))
        if ax is None:
            # the whole array: its flat index (an IndexVector) is the position; an
            # IndexMatrix would cost a 64-bit division per element (6.6x slower than a min
            # fold on an H200)
            src = src.replace("skelpy_index_point p, long cols", "long i").replace("POS", "i")
        else:
            src = src.replace("POS", _POS[ax])
        return MapReduce(src, "ulong func(ulong a, ulong b) { return min(a, b); }",
                         2**64 - 1, dtype=np.uint64, axis=ax, commutative=True, inputs=2)
    return _skeleton(("key", name, dt, ax), make)


def _arg(name: str, x: Container, ax: int | None):
    if _one_pass(x, ax):
        data = x if x.layout is not None or not x.is_pending else expression.copy_of(x)
        data.storage.resolve()
        sk = _key_skeleton(name, x.dtype, ax)
        fusion.LAST.skeleton = sk
        if ax is None:
            try:
                data = data.reshape(-1)
            except ShapeError:                 # a strided view: its elements, in a block
                data = expression.copy_of(data)
                data.storage.resolve()
                data = data.reshape(-1)
            key = sk(data, IndexVector(data.size))
            return np.int64(int(key) & 0xFFFFFFFF)
        key = sk(data, IndexMatrix(data.shape), np.int64(data.shape[1]))
        return (key & np.uint64(0xFFFFFFFF)).astype(np.int64)
    extreme = fold("min" if name == "argmin" else "max", x, ax)
    data = x if not x.is_pending else expression.copy_of(x)
    data.storage.resolve()
    big = _NOT_FOUND
    nan = x.dtype.kind == "f"
    if ax is None:
        if data.ndim == 2:
            data = data.reshape(-1)
        first = _first_flat if nan else _first_flat_exact
        sk = _skeleton(("arg", None, nan), lambda: MapReduce(first, _first_min, big,
                                                             dtype=np.int64, inputs=2))
        fusion.LAST.skeleton = sk
        pos = sk(data, IndexVector(x.size), x.dtype.type(extreme), big)
        return np.int64(pos)
    shape = x.shape
    m_b = (extreme.reshape(-1, 1) if ax == 1 else extreme.reshape(1, -1)).broadcast_to(shape)
    if nan:
        fn = _first_in_row if ax == 1 else _first_in_col
    else:
        fn = _first_in_row_exact if ax == 1 else _first_in_col_exact
    sk = _skeleton(("arg", ax, nan), lambda: MapReduce(fn, _first_min, big, axis=ax,
                                                  dtype=np.int64, inputs=3))
    fusion.LAST.skeleton = sk
    out = sk(data, IndexMatrix(shape), m_b, big)
    return out if isinstance(out, Container) else Vector(out)
