"""The expression graph of lazy array values: nodes, and building one operation at a time.

An operation on containers (``a * x + y``, ``np.sin(v)``, ``sk.where(c, a, b)``) does not run:
it returns a *pending* container whose recipe holds a :class:`Node`. A node is a leaf (a
container that has data: an owner or a view), a constant (a scalar, which becomes a kernel
argument so that a loop over values does not recompile) or an operation on other nodes. An
operand that is itself pending contributes its node, so chains grow into one graph, which
``fusion.py`` compiles into one kernel when the value is needed.

Everything that can be wrong is found while the node is built, at the user's line: NumPy's
own ufunc runs on empty arrays of the operand dtypes (its dtype, its NEP 50 rules for Python
scalars, its errors), shapes broadcast as in NumPy, and each operation's translation is
checked once per dtype signature (``fusion.check_translates``).
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np

from ..containers import Container, Matrix, MatrixRow, Vector
from ..dtypes import check_dtype
from ..errors import DTypeError, ShapeError, dtype_error_like
from . import ops

#: A graph with more operations than this, or more distinct leaves, is evaluated in parts:
#: the pending operands of the operation that would cross the limit are computed first.
MAX_OPS = 48
MAX_LEAVES = 12


class Node:
    """One operation of an expression graph (:class:`Leaf` and :class:`Scalar` are the
    other nodes) (see the module docstring). ``op`` is ``"leaf"``
    (``args = (container,)``), ``"const"`` (``args = (value,)``, a NumPy scalar of
    ``dtype``), ``"weak"`` (a Python scalar passed on to a muscle: weak, as in a skeleton
    call), ``"call"`` (a skeleton's muscle ``fn`` applied to ``args``: a deferred Map or Zip,
    see :mod:`.chains`) or an operation name of :mod:`.ops` (``args``: nodes); ``"astype"``
    converts.

    Each node also knows, from its arguments' (so a graph is never walked to find them):
    ``leaves`` (the distinct containers read, in first-use order), ``consts`` (the kernel
    arguments of its constants, in use order), ``sid`` (a small integer naming the graph's
    structure: operations, dtypes, literals, muscles, which leaf each operand reads; not the
    values) and ``shared``: some operation or constant may be reachable by two paths (one
    was already an operand, ``uses > 0``, when a node took it: the later node and all above
    it are marked, so the test errs only towards True). A shared graph is not a tree, and
    ``fusion`` walks it to number its nodes once each.

    ``plain``: every leaf is a container's own block (no view) of this node's shape, read
    element for element (nothing broadcast). A leaf's ``sid`` names its dtype, so a plain
    tree's ``sid`` and ``ndim`` say all its kernel depends on (``fusion`` then reads no
    leaf to find its program). ``stores``: the leaves' storages (their data's state), in
    the same order."""

    __slots__ = ("op", "args", "dtype", "shape", "n_ops", "leaves", "stores", "fn", "consts",
                 "sid", "shared", "uses", "plain", "__weakref__")

    def __init__(self, op: str, args: tuple, dtype: np.dtype, shape: tuple[int, ...],
                 fn=None):
        self.op, self.args, self.dtype, self.shape, self.fn = op, args, dtype, shape, fn
        self.uses = 0
        if len(args) == 2:                  # most operations: unrolled
            a, b = args
            shared = False
            if a.op != "leaf":
                # an operation (or constant) used a second time: this graph may be a DAG
                shared = a.shared or a.uses > 0
                a.uses += 1
            if b.op != "leaf":
                shared = shared or b.shared or b.uses > 0
                b.uses += 1
            self.n_ops, self.shared = 1 + a.n_ops + b.n_ops, shared
            ca, cb = a.consts, b.consts
            self.consts = ca + cb if ca and cb else ca or cb
            la, lb = a.leaves, b.leaves
            self.plain = (a.plain and (not la or a.shape == shape)
                          and b.plain and (not lb or b.shape == shape))
            if not lb or not la or (len(la) == 1 and len(lb) == 1 and la[0] is not lb[0]):
                # disjoint leaves (the common case): ours are a's then b's
                if la and lb:
                    self.leaves, self.stores = la + lb, a.stores + b.stores
                else:
                    self.leaves, self.stores = (la, a.stores) if la else (lb, b.stores)
                structure = (op, dtype, fn, a.sid, b.sid, None)
                sid = SIDS.get(structure)
                self.sid = structure_id(structure) if sid is None else sid
                return
        else:
            n_ops, shared, consts, plain = 1, False, (), True
            for a in args:
                n_ops += a.n_ops
                if a.op != "leaf":
                    shared = shared or a.shared or a.uses > 0
                    a.uses += 1
                if a.consts:
                    consts = consts + a.consts if consts else a.consts
                plain = plain and a.plain and (not a.leaves or a.shape == shape)
            self.n_ops, self.shared, self.consts, self.plain = n_ops, shared, consts, plain
            if len(args) == 1:
                a = args[0]
                self.leaves, self.stores = a.leaves, a.stores
                self.sid = structure_id((op, dtype, fn, a.sid))
                return
        seen: dict[int, int] = {}
        leaves: list[Container] = []
        reads: list[int] = []          # for each argument's leaves: the index in ours
        for a in args:
            for c in a.leaves:
                k = seen.get(id(c))
                if k is None:
                    k = seen[id(c)] = len(leaves)
                    leaves.append(c)
                reads.append(k)
        self.leaves = tuple(leaves)
        self.stores = tuple(c.storage for c in leaves)
        # None: each argument reads leaves of its own (ours are theirs in order)
        self.sid = structure_id((op, dtype, fn, *(a.sid for a in args),
                                 None if len(reads) == len(leaves) else tuple(reads)))

    def __repr__(self) -> str:
        if self.op == "leaf":
            return f"leaf{self.shape}:{self.dtype}"
        if self.op in ("const", "weak"):
            return f"{self.args[0]!r}"
        if self.op == "call":
            return f"{getattr(self.fn, '__name__', 'muscle')}({', '.join(map(repr, self.args))})"
        return f"{self.op}({', '.join(map(repr, self.args))})"


#: structure -> its id (see Node.sid). Ids are never reused: when the table is cleared (it
#: is bounded), later structures get new ids, so a live node's id still names only its own.
SIDS: dict[tuple, int] = {}
_NEXT_SID = itertools.count(1)       # next() is atomic: two structures never share an id
MAX_STRUCTURES = 1 << 16


def structure_id(structure: tuple) -> int:
    sid = SIDS.get(structure)
    if sid is None:
        if len(SIDS) >= MAX_STRUCTURES:
            SIDS.clear()
        sid = SIDS[structure] = next(_NEXT_SID)
    return sid


class Leaf(Node):
    """A leaf (a container with data): built for every operand (the operators' fast path
    makes it only when a walk asks: ``fusion.PendingNode``), so its constant fields are
    the class's and only the others are set (``dtype``, ``shape`` and ``storage`` of a
    container's own block, no view, may be passed by a caller that has them). Its ``sid``
    names its dtype."""

    __slots__ = ()
    op, fn, n_ops, consts, shared, uses = "leaf", None, 0, (), False, 0

    def __init__(self, c: Container, dtype: np.dtype | None = None,   # noqa: D107
                 shape: tuple[int, ...] | None = None, storage=None):
        self.args = self.leaves = (c,)
        if dtype is None:
            self.dtype, self.shape, self.plain = c.dtype, c.shape, c.layout is None
            dtype = self.dtype
        else:
            self.dtype, self.shape, self.plain = dtype, shape, True
        self.stores = (c.storage,) if storage is None else (storage,)
        sid = LEAF_SIDS.get(dtype)
        self.sid = sid if sid is not None else leaf_sid(dtype)


#: dtype -> the structure id of a leaf of that dtype
LEAF_SIDS: dict[np.dtype, int] = {}


def leaf_sid(dtype: np.dtype) -> int:
    sid = LEAF_SIDS[dtype] = structure_id(("leaf", dtype))
    return sid


class Scalar(Node):
    """A constant, literal or weak scalar node (see :func:`const`, :func:`weak`)."""

    __slots__ = ()
    fn, n_ops, leaves, stores, shared, plain = None, 0, (), (), False, True

    def __init__(self, op: str, value, dtype: np.dtype):   # noqa: D107 - see the class
        self.op, self.args, self.dtype, self.shape, self.uses = op, (value,), dtype, (), 0
        if op == "literal":
            self.consts, self.sid = (), structure_id((op, dtype, value.item()))
        elif op == "const":
            sid = CONST_SIDS.get(dtype)
            self.consts, self.sid = self.args, const_sid(dtype) if sid is None else sid
        else:
            self.consts, self.sid = self.args, structure_id((op, dtype))


#: dtype -> the structure id of a constant of that dtype (every loop iteration makes one)
CONST_SIDS: dict[np.dtype, int] = {}


def const_sid(dtype: np.dtype) -> int:
    sid = CONST_SIDS[dtype] = structure_id(("const", dtype))
    return sid


def leaf(c: Container) -> Node:
    return Leaf(c)


def operand_node(x) -> Node:
    """A fresh node of an operand the operators' fast path keeps as it is: a container with
    data (its own block) is a leaf, a NumPy scalar a constant of its dtype."""
    if isinstance(x, Container):
        return Leaf(x)
    return Scalar("const", x, x.dtype)


def const(value, dtype: np.dtype, literal: bool = False) -> Node:
    """A scalar: a kernel argument, or (``literal``) a constant written into the muscle, so
    that the translator can specialise it (``x ** 2`` is ``x * x``, not ``pow``)."""
    if type(value) is float and dtype.kind == "f" and (dtype.itemsize == 8 or
                                                        abs(value) < 3.0e38):
        v = dtype.type(value)              # the common case, without NumPy's warning guards
    elif isinstance(value, np.generic) and value.dtype == dtype:
        v = value                          # a NumPy scalar of its own dtype: as it is
    else:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = np.asarray(value).astype(dtype)[()]
    return Scalar("literal" if literal else "const", v, dtype)


def weak(value) -> Node:
    """A Python scalar handed to a muscle as it is (weak, NEP 50: the muscle types it)."""
    return Scalar("weak", value, np.result_type(value))


# -- operands ---------------------------------------------------------------------------------

def as_operand(x):
    """A container, or a scalar (Python scalars stay Python: weak, NEP 50), from anything an
    operation takes; None when skelpy cannot hold it (then NumPy does the work)."""
    if isinstance(x, Container):
        return x
    if isinstance(x, MatrixRow):
        return x._matrix[x._row, :]   # noqa: SLF001 - a row is a view of its matrix
    if isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, np.generic):
        return x if _supported(x.dtype) else None
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    if isinstance(x, np.ndarray):
        if x.ndim == 0:
            return x[()] if _supported(x.dtype) else None
        if x.ndim > 2 or not _supported(x.dtype):
            return None
        return (Vector if x.ndim == 1 else Matrix)(x)
    return None


def _supported(dt: np.dtype) -> bool:
    try:
        check_dtype(dt)
    except DTypeError:
        return False
    return True


def is_python_scalar(x) -> bool:
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def probe(x):
    """What NumPy is asked with in place of ``x``: an empty array of its dtype, or the
    scalar itself (Python scalars weak, NumPy scalars strong)."""
    if isinstance(x, Container):
        return np.empty((0,) * min(x.ndim, 1), x.dtype)
    return x


def result_shape(operands, where: str) -> tuple[int, ...]:
    shapes = [x.shape for x in operands if isinstance(x, Container)]
    try:
        shape = tuple(int(s) for s in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"{where}: operands could not be broadcast together with shapes "
                         + " ".join(str(s) for s in shapes)) from None
    if len(shape) > 2:
        raise ShapeError(f"{where}: the result would be {len(shape)}-D; containers are 1-D or "
                         "2-D")
    return shape


def numpy_dtype(func, operands, where: str) -> np.dtype:
    """The dtype NumPy gives ``func(*operands)``, or its error as a skelpy error."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = func(*(probe(x) for x in operands))
    except (TypeError, OverflowError, ValueError) as exc:
        raise dtype_error_like(exc)(f"{where}: {exc}") from None
    dt = np.asarray(out).dtype
    if dt == np.float16:                        # skelpy computes half results in float32
        return np.dtype(np.float32)
    return check_dtype(dt, where)


def scalar_dtype(x, operands, position: int, op: str) -> np.dtype:
    """The dtype a scalar operand travels in: a NumPy scalar's own; a Python scalar's is
    what NEP 50 makes of it next to the other operands (where's condition: bool)."""
    if not is_python_scalar(x):
        return check_dtype(np.asarray(x).dtype)
    if op == "where" and position == 0:
        return np.dtype(np.bool_)
    func = ops.numpy_op(op)
    if isinstance(func, np.ufunc) and not isinstance(x, bool):
        # the dtype of the loop NumPy runs: a Python int next to int8 travels as float64 in
        # ``int8 / 300`` (a float loop), not as a wrapped int8
        weak_types = [(type(o) if is_python_scalar(o) and not isinstance(o, bool)
                       else np.dtype(np.bool_) if isinstance(o, bool)
                       else o.dtype) for o in operands]
        try:
            dt = func.resolve_dtypes((*weak_types, *([None] * func.nout)))[position]
        except (TypeError, ValueError):
            pass
        else:
            return check_dtype(np.float32 if dt == np.float16 else dt)
    others = [probe(o) for k, o in enumerate(operands)
              if k != position and not (op == "where" and k == 0)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dt = np.result_type(*others, x) if others else np.result_type(x)
    if dt == np.float16:
        dt = np.dtype(np.float32)
    return check_dtype(dt)


def out_of_range_compare(op: str, operands) -> bool | None:
    """NumPy 2 compares integers with Python ints outside their dtype's range exactly (the
    answer is the same for every element): that answer, or None when this is no such case."""
    if op not in ops.COMPARISONS or len(operands) != 2:
        return None
    for k in (0, 1):
        s, other = operands[k], operands[1 - k]
        if isinstance(s, int) and not isinstance(s, bool) and isinstance(other, Container) \
                and other.dtype.kind in "iu":
            info = np.iinfo(other.dtype)
            if info.min <= s <= info.max:
                return None
            sample = int(info.min)
            args = (sample, s) if k == 1 else (s, sample)
            return bool(ops.numpy_op(op)(np.asarray(args[0], object), np.asarray(args[1],
                                                                                  object)))
    return None


def size_of(shape: tuple[int, ...]) -> int:
    return math.prod(shape)
