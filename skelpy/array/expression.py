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
import types

import numpy as np

from ..containers import Container, Matrix, Vector, storage_and_layout
from ..dtypes import check_dtype
from ..errors import DTypeError, DTypeValueError
from . import fusion, graph, ops
from .fusion import PendingNode, Recipe
from .graph import CONST_SIDS, LEAF_SIDS, SIDS, Leaf, Node

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
    if op == "power" and out.kind in "iu":
        negative_exponent_check(operands[1], where or Where(op))
    args = [node_of(x) if isinstance(x, Container) else graph.const(x, dt)
            for x, dt in zip(operands, dtypes)]
    if op == "power" and graph.is_python_scalar(operands[1]) \
            and float(operands[1]) in SMALL_EXPONENTS:
        args[1] = graph.const(operands[1], dtypes[1], literal=True)
    node = Node(op, tuple(args), out, shape)
    if node.n_ops > graph.MAX_OPS or len(node.leaves) > graph.MAX_LEAVES:
        node = Node(op, tuple(bounded(operands, args)), out, shape)
    return fusion.pending_container(node, shape)


def negative_exponent_check(exponent, where) -> None:
    """NumPy's ValueError for integers to a negative integer power, at the operation's line:
    a scalar exponent is looked at; a container's smallest element is computed now (on the
    device: the values the pending result will read), as NumPy looks at every element."""
    if isinstance(exponent, Container):
        if exponent.dtype.kind != "i" or exponent.size == 0:
            return
        from .reductions import reduce
        negative = reduce("min", exponent, None, None) < 0
    else:
        negative = not isinstance(exponent, (bool, np.bool_)) and exponent < 0
    if negative:
        raise DTypeValueError(f"{where}: Integers to negative integer powers are not allowed.")


#: Exponents written into the kernel (part of its structure): the translator turns them into
#: multiplications or sqrt instead of a general pow.
SMALL_EXPONENTS = frozenset({0.5, 1.0, 2.0, 3.0, 4.0, -1.0, -2.0})


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_new = object.__new__
#: (float, dtype, (its NumPy scalar,)) of binary's latest float constant (see binary)
_LAST_CONST: tuple = (None, None, ())


def binary_operator(op: str, general, name: str, reflected: bool = False):
    """:func:`binary` with ``op``, ``general`` and ``reflected`` bound, as a container's
    operator method (``self op other``, or ``other op self``): a copy of the function
    whose defaults are them, so that an operator runs it with no frame in between (it sits
    on every operator of a loop)."""
    fn = types.FunctionType(binary.__code__, binary.__globals__, name,
                            (op, general, reflected))
    fn.__qualname__ = name
    fn.__doc__ = f"``{'other' if reflected else 'self'} {op} " \
                 f"{'self' if reflected else 'other'}`` (see expression.binary)."
    return fn


def binary(a, b, op: str = "add", general=None, reflected: bool = False):
    """``a op b`` (an operator on containers): when the operands' signature was built before
    (the common case, in a loop; the stored signature also says the operands are of kinds
    :func:`apply` takes), the same graph and pending container as :func:`apply` builds,
    with fewer objects and everything inline: the operation is a ``fusion.PendingNode``
    (also the container's recipe) whose fields (those ``graph.Node`` computes) are filled
    in one by one; a plain container or a float operand is kept as it is, with what the
    node takes from its leaf or constant (its node is made only if a walk reads ``args``);
    the pending container registers as a reader of its leaves' storages in one call. A
    container's own block (``layout`` None) has its storage's shape and dtype. Anything
    else (a first signature, other operand types, ``power``'s literal exponents, operands
    that read a common leaf, a graph at the limits) takes the general ways
    (``general(op, a, b)``, ``graph.Node``). ``reflected``: the operands come as
    ``(b, a)`` (a reflected operator method, ``__radd__``).

    A float constant's NumPy scalar is kept from the latest call (``_LAST_CONST``: the same
    float object in the same dtype is the same value, ``-0.0`` and NaN included), as a
    loop's ``a * x`` passes one float again and again (in an immutable tuple: shared as
    the ``consts`` of the nodes that take it)."""
    global _LAST_CONST
    if reflected:                             # a reflected operator: self is b
        a, b = b, a
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
    # Each operand: a plain container (kind 1: its data, its own block) or a float
    # constant (kind 2: its NumPy scalar) is kept as it is, with what the operation takes
    # from its node (leaves, storages, constants, structure id, plain); its node is made
    # only if a walk asks (PendingNode.args). Anything else is a node (kind 0).
    if ta is Vector or ta is Matrix:
        if la is not None:
            na, xa = Leaf(a), 0
        else:
            na = sa.pending
            if na is None:                        # a plain container
                na, xa, la, sta, ca = a, 1, (a,), (sa,), ()
                sida = LEAF_SIDS.get(da) or graph.leaf_sid(da)
                pa = sa.shape == shape
            else:
                xa = 0
                if type(na) is not PendingNode:
                    na = na.node
    elif ta is float and (da is _F64 or (da is _F32 and -3.0e38 < a < 3.0e38)):
        c = _LAST_CONST                           # graph.const's common case
        if c[0] is not a or c[1] is not da:
            c = _LAST_CONST = (a, da, (da.type(a),))
        ca = c[2]
        na, xa, la, sta, pa = ca[0], 2, (), (), True
        sida = CONST_SIDS.get(da) or graph.const_sid(da)
    else:                                         # (a container of a subclass: its node)
        na, xa = node_of(a) if isinstance(a, Container) else graph.const(a, da), 0
    if tb is Vector or tb is Matrix:
        if lb is not None:
            nb, xb = Leaf(b), 0
        else:
            nb = sb.pending
            if nb is None:
                nb, xb, lb, stb, cb = b, 1, (b,), (sb,), ()
                sidb = LEAF_SIDS.get(db) or graph.leaf_sid(db)
                pb = sb.shape == shape
            else:
                xb = 0
                if type(nb) is not PendingNode:
                    nb = nb.node
    elif tb is float and (db is _F64 or (db is _F32 and -3.0e38 < b < 3.0e38)):
        c = _LAST_CONST
        if c[0] is not b or c[1] is not db:
            c = _LAST_CONST = (b, db, (db.type(b),))
        cb = c[2]
        nb, xb, lb, stb, pb = cb[0], 2, (), (), True
        sidb = CONST_SIDS.get(db) or graph.const_sid(db)
    else:
        nb, xb = node_of(b) if isinstance(b, Container) else graph.const(b, db), 0
    shared, n_ops = False, 1
    if not xa:
        la, sta, ca, sida = na.leaves, na.stores, na.consts, na.sid
        pa = na.plain and (not la or na.shape == shape)
        n_ops += na.n_ops
    if not xb:
        lb, stb, cb, sidb = nb.leaves, nb.stores, nb.consts, nb.sid
        pb = nb.plain and (not lb or nb.shape == shape)
        n_ops += nb.n_ops
    if (la and lb and (len(la) != 1 or len(lb) != 1 or la[0] is lb[0])) \
            or n_ops > graph.MAX_OPS:
        # operands that may read a common leaf, or too many operations: graph.Node (and
        # bounded), as apply does (disjoint single leaves are two, under MAX_LEAVES; one
        # operand's leaves alone are within it)
        na = graph.operand_node(na) if xa else na
        nb = graph.operand_node(nb) if xb else nb
        node = Node(op, (na, nb), out, shape)
        if node.n_ops > graph.MAX_OPS or len(node.leaves) > graph.MAX_LEAVES:
            node = Node(op, tuple(bounded([a, b], [na, nb])), out, shape)
        # fusion.pending_container, inline (the container sets recipe.storage)
        recipe = _new(Recipe)
        recipe.node, recipe.shape, recipe.direct = node, shape, None
    else:
        # graph.Node's two-operand case (disjoint leaves), inline; the node is the pending
        # container's recipe too (the container sets its storage)
        if not xa and na.op != "leaf":
            shared = na.shared or na.uses > 0
            na.uses += 1
        if not xb and nb.op != "leaf":
            shared = shared or nb.shared or nb.uses > 0
            nb.uses += 1
        node = recipe = _new(PendingNode)
        node.op, node.operands, node.dtype, node.shape, node.uses = op, (na, nb), out, shape, 0
        node.n_ops, node.shared, node.plain = n_ops, shared, pa and pb
        node.consts = ca + cb if ca and cb else ca or cb
        if la and lb:
            node.leaves, node.stores = la + lb, sta + stb
        else:
            node.leaves, node.stores = (la, sta) if la else (lb, stb)
        structure = (op, out, None, sida, sidb, None)
        sid = SIDS.get(structure)
        node.sid = graph.structure_id(structure) if sid is None else sid
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
    if len(values) == 1:                     # sk.evaluate(z) of a pending value, in a loop
        v = values[0]
        t = type(v)
        if t is Vector or t is Matrix:
            pending = storage_and_layout(v)[0].pending
            if pending is not None:
                pending.evaluate()
                return
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
