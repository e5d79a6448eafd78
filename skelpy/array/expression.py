"""Building pending values: one elementwise operation on containers and scalars.

:func:`apply` checks everything at the caller's line (dtypes and errors as NumPy has them,
broadcasting, translation), then returns a pending container whose graph is the operation
over its operands' graphs (a pending operand contributes its graph; a container with data is
a leaf; a scalar is a constant, a kernel argument). A graph that would grow past
``graph.MAX_OPS`` operations or ``graph.MAX_LEAVES`` leaves has its pending operands computed
first.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from ..containers import Container, Matrix, Vector, storage_and_layout
from ..dtypes import check_dtype
from ..errors import DTypeError
from . import fusion, graph, ops
from .fusion import Recipe
from .graph import CONST_SIDS, LEAF_SIDS, SIDS, Leaf, Node, Scalar

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_line() -> str:
    """``file:line`` of the innermost caller outside skelpy and NumPy (where errors point)."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if not name.startswith(_PACKAGE) and "/numpy/" not in name and not name.startswith("<"):
            return f"{os.path.relpath(name) if not name.startswith('..') else name}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


class Where:
    """``file:line (op)`` of the user's call, found only when a message needs it (walking
    the stack on every operation cost more than the operation): it holds the frame the
    operation was called from, and is formatted while that call is still running."""

    __slots__ = ("frame", "op", "text")

    def __init__(self, op: str):
        self.frame, self.op, self.text = sys._getframe(2), op, None

    def __str__(self) -> str:
        if self.text is None:
            f = self.frame
            while f is not None:
                name = f.f_code.co_filename
                if not name.startswith(_PACKAGE) and "/numpy/" not in name \
                        and not name.startswith("<"):
                    break
                f = f.f_back
            line = "<unknown>" if f is None else \
                f"{os.path.relpath(f.f_code.co_filename)}:{f.f_lineno}"
            self.text = f"{line} ({self.op})"
            self.frame = None
        return self.text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


#: (op, operand signature) -> (shape, result dtype, operand dtypes) of an operation that
#: built without an error. A Python int is keyed by its sign and bit length: that says
#: exactly which integer dtypes hold it, which is all NEP 50's dtypes and errors depend on
#: (so a loop over int values is typed once; an out-of-range comparison is never stored).
_SIGNATURES: dict[tuple, tuple] = {}


def _operand_key(x):
    t = type(x)
    if t is float or t is bool:
        return t
    if t is int:
        return (int, x.bit_length() if x >= 0 else -1 - (-1 - x).bit_length())
    if isinstance(x, Container):
        return (x.dtype, x.shape)
    return (t, getattr(x, "dtype", None))


def node_of(x: Container) -> Node:
    """A container's graph: its pending graph, or a leaf."""
    pending = x.storage.pending
    if pending is not None and x.layout is None:
        return pending.node
    return graph.leaf(x)


def apply(op: str, operands: list, where: str | None = None) -> Container:
    """``op`` (a name of :mod:`.ops`) over containers and scalars, as a pending container."""
    key = (op, _operand_key(operands[0]), _operand_key(operands[1])) if len(operands) == 2 \
        else (op, *[_operand_key(x) for x in operands])
    hit = _SIGNATURES.get(key)
    if hit is None:
        where = where or Where(op)
        shape = graph.result_shape(operands, where)
        constant = graph.out_of_range_compare(op, operands)
        if constant is not None:
            x = next(o for o in operands if isinstance(o, Container))
            return apply("equal" if constant else "not_equal", [x, x], where)
        out = graph.numpy_dtype(ops.numpy_op(op), operands, where)
        dtypes = []
        for k, x in enumerate(operands):
            if isinstance(x, Container):
                dtypes.append(x.dtype)
            else:
                dtypes.append(graph.scalar_dtype(x, operands, k, op))
        fusion.check_translates(op, tuple(dtypes), out, str(where))
        if len(_SIGNATURES) > 4096:
            _SIGNATURES.clear()
        _SIGNATURES[key] = shape, out, dtypes
    else:
        shape, out, dtypes = hit
    args = [node_of(x) if isinstance(x, Container) else graph.const(x, dt)
            for x, dt in zip(operands, dtypes)]
    if op == "power" and graph.is_python_scalar(operands[1]) \
            and float(operands[1]) in SMALL_EXPONENTS:
        args[1] = graph.const(operands[1], dtypes[1], literal=True)
    node = Node(op, tuple(args), out, shape)
    if node.n_ops > graph.MAX_OPS or len(node.leaves) > graph.MAX_LEAVES:
        node = Node(op, tuple(bounded(operands, args)), out, shape)
    return fusion.pending_container(node, shape)


#: Exponents written into the kernel (part of its structure): the translator turns them into
#: multiplications or sqrt instead of a general pow.
SMALL_EXPONENTS = frozenset({0.5, 1.0, 2.0, 3.0, 4.0, -1.0, -2.0})


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_new = object.__new__


def binary(op: str, a, b, general):
    """``a op b`` (an operator on containers): when the operands' signature was built before
    (the common case, in a loop; the stored signature also says the operands are of kinds
    :func:`apply` takes), the same node and pending container as :func:`apply` builds, with
    everything inline: a plain container's leaf, a float's constant and the operation's
    node are filled in field by field (the fields ``graph.Node`` computes, from what this
    path knows of fresh leaves and constants), and the pending container registers as a
    reader of its leaves' storages in one call. A container's own block (``layout`` None)
    has its storage's shape and dtype. Anything else (a first signature, other operand
    types, ``power``'s literal exponents, operands that read a common leaf, a graph at the
    limits) takes the general ways (``general(op, a, b)``, ``graph.Node``)."""
    ta, tb = type(a), type(b)
    if ta is Vector or ta is Matrix:
        sa, la = storage_and_layout(a)
        ka = (sa.dtype, sa.shape) if la is None else (a.dtype, a.shape)
    else:
        ka = ta if ta is float else _operand_key(a)
    if tb is Vector or tb is Matrix:
        sb, lb = storage_and_layout(b)
        kb = (sb.dtype, sb.shape) if lb is None else (b.dtype, b.shape)
    else:
        kb = tb if tb is float else _operand_key(b)
    hit = _SIGNATURES.get((op, ka, kb))
    if hit is None or op == "power":
        return general(op, a, b)
    shape, out, (da, db) = hit
    # Each operand's node. A fresh leaf (kind 1) or constant (kind 2) also gives what the
    # operation takes from it: no operations, not shared, plain where its shape is ours.
    xa = 0
    if ta is Vector or ta is Matrix:
        if la is not None:
            na = Leaf(a)
        else:
            na = sa.pending
            if na is None:                        # a plain container: graph.Leaf, inline
                na = _new(Leaf)
                na.args = na.leaves = (a,)
                na.dtype, na.shape, na.plain, na.stores = da, sa.shape, True, (sa,)
                sid = LEAF_SIDS.get(da)
                na.sid = graph.leaf_sid(da) if sid is None else sid
                xa, pa = 1, sa.shape == shape
            else:
                na = na.node
    elif ta is float and (da is _F64 or (da is _F32 and -3.0e38 < a < 3.0e38)):
        na = _new(Scalar)                         # graph.const's common case, inline
        na.op, na.args, na.dtype, na.shape, na.uses = "const", (da.type(a),), da, (), 0
        na.consts = na.args
        sid = CONST_SIDS.get(da)
        na.sid = graph.const_sid(da) if sid is None else sid
        xa, pa = 2, True
    else:
        na = graph.const(a, da)
    xb = 0
    if tb is Vector or tb is Matrix:
        if lb is not None:
            nb = Leaf(b)
        else:
            nb = sb.pending
            if nb is None:
                nb = _new(Leaf)
                nb.args = nb.leaves = (b,)
                nb.dtype, nb.shape, nb.plain, nb.stores = db, sb.shape, True, (sb,)
                sid = LEAF_SIDS.get(db)
                nb.sid = graph.leaf_sid(db) if sid is None else sid
                xb, pb = 1, sb.shape == shape
            else:
                nb = nb.node
    elif tb is float and (db is _F64 or (db is _F32 and -3.0e38 < b < 3.0e38)):
        nb = _new(Scalar)
        nb.op, nb.args, nb.dtype, nb.shape, nb.uses = "const", (db.type(b),), db, (), 0
        nb.consts = nb.args
        sid = CONST_SIDS.get(db)
        nb.sid = graph.const_sid(db) if sid is None else sid
        xb, pb = 2, True
    else:
        nb = graph.const(b, db)
    la, lb = na.leaves, nb.leaves
    n_ops = 1 + na.n_ops + nb.n_ops
    if (la and lb and (len(la) != 1 or len(lb) != 1 or la[0] is lb[0])) \
            or n_ops > graph.MAX_OPS:
        # operands that may read a common leaf, or too many operations: graph.Node (and
        # bounded), as apply does (disjoint single leaves are two, under MAX_LEAVES; one
        # operand's leaves alone are within it)
        node = Node(op, (na, nb), out, shape)
        if node.n_ops > graph.MAX_OPS or len(node.leaves) > graph.MAX_LEAVES:
            node = Node(op, tuple(bounded([a, b], [na, nb])), out, shape)
    else:
        # graph.Node's two-operand case (disjoint leaves), inline
        node = _new(Node)
        node.op, node.args, node.dtype, node.shape, node.fn, node.uses = \
            op, (na, nb), out, shape, None, 0
        if xa:
            shared = False
            if xa == 2:
                na.uses = 1
        else:
            if na.op != "leaf":
                shared = na.shared or na.uses > 0
                na.uses += 1
            else:
                shared = False
            pa = na.plain and (not la or na.shape == shape)
        if xb:
            if xb == 2:
                nb.uses = 1
        else:
            if nb.op != "leaf":
                shared = shared or nb.shared or nb.uses > 0
                nb.uses += 1
            pb = nb.plain and (not lb or nb.shape == shape)
        node.n_ops, node.shared, node.plain = n_ops, shared, pa and pb
        ca, cb = na.consts, nb.consts
        node.consts = ca + cb if ca and cb else ca or cb
        if la and lb:
            node.leaves, node.stores = la + lb, na.stores + nb.stores
        else:
            node.leaves, node.stores = (la, na.stores) if la else (lb, nb.stores)
        structure = (op, out, None, na.sid, nb.sid, None)
        sid = SIDS.get(structure)
        node.sid = graph.structure_id(structure) if sid is None else sid
    # fusion.pending_container, inline (the container sets recipe.storage)
    recipe = _new(Recipe)
    recipe.node, recipe.shape, recipe.direct = node, shape, None
    return (Vector if len(shape) == 1 else Matrix).pending(shape, out, recipe, node.stores)


def astype(x: Container, dtype, where: str | None = None) -> Container:
    where = where or Where("astype")
    dt = check_dtype(dtype, where)
    fusion.check_translates("astype", (x.dtype,), dt, where)
    (arg,) = _nodes([x], [x.dtype])
    return fusion.pending_container(Node("astype", (arg,), dt, x.shape), x.shape)


def copy_of(x: Container) -> Container:
    """A pending copy of a view or container (a fused kernel reading it)."""
    return fusion.pending_container(node_of(x), x.shape)


def _nodes(operands: list, dtypes: list) -> list[Node]:
    nodes = [node_of(x) if isinstance(x, Container) else graph.const(x, dt)
             for x, dt in zip(operands, dtypes, strict=True)]
    return bounded(operands, nodes)


def bounded(operands: list, nodes: list[Node]) -> list[Node]:
    """``nodes`` (one per operand), with the pending operands computed first (then leaves)
    when one more operation over them would cross ``graph.MAX_OPS`` or ``MAX_LEAVES``."""
    n_ops = 1 + sum(n.n_ops for n in nodes)
    leaves = {id(c) for n in nodes for c in n.leaves}
    if n_ops > graph.MAX_OPS or len(leaves) > graph.MAX_LEAVES:
        for x in operands:                   # compute the pending operands: they become leaves
            if isinstance(x, Container):
                x.storage.resolve()
        nodes = [graph.leaf(x) if isinstance(x, Container) else n
                 for x, n in zip(operands, nodes, strict=True)]
    return nodes


def evaluate(*values) -> None:
    """Compute pending values now (``sk.evaluate(z)``); containers that are not pending and
    other objects are left as they are."""
    for v in values:
        if isinstance(v, Container):
            s = v.storage
            if s.pending is not None:
                s.pending.evaluate()
            else:
                s.resolve()
        elif isinstance(v, (list, tuple)):
            evaluate(*v)


def is_bool(x) -> bool:
    return isinstance(x, Container) and x.dtype == np.bool_


__all__ = ["apply", "astype", "bounded", "copy_of", "evaluate", "node_of", "user_line",
           "DTypeError"]
