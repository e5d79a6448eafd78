"""Compiling an expression graph into one kernel, and computing pending values.

A graph is *linearised* (each node once, in dependency order: a node used twice is computed
once, into a local) into a :class:`Program`: its leaves (the kernel's inputs, each read through
its input kind: a container, or a view with offset and strides, which is also how operands
broadcast), its constants (kernel arguments), and a *structure key* that names the graph's
shape without its values. The program is written as a Python muscle --

.. code-block:: python

    def fused(a0, a1, c0):          # leaves, then constants
        t0 = np.float32(a0 * c0)    # every node cast to the dtype NumPy gives it
        t1 = np.float32(t0 + a1)
        return t1

-- which the muscle translator compiles, and runs as ONE elementwise kernel (a Map over the
leaves, ``skeletons.elementwise.ZipN``), or as the input expression of a reduction. Skeletons
are cached per structure key, so a loop that changes only values (or views' offsets)
compiles nothing after its first iteration; the tuner sees the kernel like any Map.
"""

from __future__ import annotations

import hashlib
import linecache
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .. import runtime as _rt
from ..containers import Container, Matrix, Vector
from ..errors import SkelpyError, TranslationError
from ..muscle import Muscle
from ..muscle.params import Scalar
from ..skeletons.arguments import input_kind
from ..skeletons.elementwise import ZipN
from . import ops
from .graph import Node, operand_node

#: Fused skeletons kept (least recently used go first; their programs then go too).
MAX_CACHED_SKELETONS = 256

_LOCK = threading.RLock()
_SKELETONS: OrderedDict[tuple, ZipN] = OrderedDict()
_MUSCLES: dict[tuple, Muscle] = {}
_CHECKED: dict[tuple, object] = {}


@dataclass
class Program:
    """A linearised graph: see the module docstring."""

    key: tuple
    leaves: list              # the containers read (views already broadcast to the shape)
    consts: list              # NumPy scalars (Python scalars for weak ones)
    lines: list[str]          # the muscle's body
    result: str               # the name returned
    text: str                 # the expression in NumPy notation (for source() and errors)
    functions: list           # the muscles of skeleton calls in the graph (``f0, f1, ...``)


_DTYPE_NAMES: dict[np.dtype, str] = {}


def dtype_name(dt: np.dtype) -> str:
    name = _DTYPE_NAMES.get(dt)
    if name is None:
        name = _DTYPE_NAMES[dt] = "np.bool_" if dt == np.bool_ else f"np.{dt.name}"
    return name


#: structure key -> (lines, result, text, functions): the text of a program, written once per
#: structure (a loop re-walks its graph only for the key, leaves and constants).
_TEXTS: dict[tuple, tuple] = {}


#: (root structure id, result ndim, what each leaf is read as) -> [structure key, text,
#: fused skeleton or None] of a tree-shaped graph seen before: its program, and its kernel,
#: without walking it (``Node.sid``). At most MAX_CACHED_SKELETONS entries.
_TREES: dict[tuple, list] = {}


def _tree_key(root: Node, shape: tuple[int, ...]):
    """(key in _TREES, the leaves as the kernel reads them) of a tree-shaped graph, or None
    for a graph that may share nodes (or reads nothing)."""
    if root.shared or not root.n_ops:
        return None
    if root.plain and root.shape == shape:     # its sid names the leaves' dtypes too
        return (root.sid, len(shape)), root.leaves
    views, key = [], [root.sid, len(shape)]
    for c in root.leaves:
        s = c.storage if c.layout is None else None   # its own block: the storage's shape
        if s is not None and s.shape == shape:        # a plain container: its dtype says all
            views.append(c)
            key.append(s.dtype)
        else:
            v = c if c.shape == shape else c.broadcast_to(shape)
            views.append(v)
            key.append(input_kind(v))
    return tuple(key), views


def linearise(root: Node, shape: tuple[int, ...]) -> Program:
    tree = _tree_key(root, shape)
    if tree is not None:
        hit = _TREES.get(tree[0])
        if hit is not None:
            return Program(hit[0], tree[1], list(root.consts), *hit[1])
    key, leaves, consts = _walk(root, shape, None)
    text = _TEXTS.get(key)
    if text is None:
        parts: dict = {}
        _walk(root, shape, parts)
        text = (parts["lines"], parts["result"], parts["text"], parts["functions"])
        if len(_TEXTS) > 4 * MAX_CACHED_SKELETONS:
            _TEXTS.clear()
        _TEXTS[key] = text
    if tree is not None and _same_program(leaves, consts, tree[1], root.consts):
        with _LOCK:
            if len(_TREES) >= MAX_CACHED_SKELETONS:
                _TREES.clear()
            _TREES[tree[0]] = [key, text, None]
    return Program(key, leaves, consts, *text)


def _same_program(leaves, consts, views, node_consts) -> bool:
    """Whether the walk numbered a tree's leaves and constants as its nodes do (it always
    should: a tree is only registered for the walk-free path when it did)."""
    return len(leaves) == len(views) and len(consts) == len(node_consts) and \
        all(a is b or (a.storage is b.storage and a.shape == b.shape and a.layout == b.layout)
            for a, b in zip(leaves, views, strict=True)) and \
        all(a is b for a, b in zip(consts, node_consts, strict=True))


def _walk(root: Node, shape: tuple[int, ...], parts: dict | None):
    """(structure key, leaves, constants) of a graph; with ``parts`` (a dict) the muscle's
    lines, result, text and functions are written into it too (only on a cache miss: the
    strings are most of the walk's cost)."""
    leaves, consts, lines, key, names, texts, functions = [], [], [], [], {}, {}, []
    leaf_of: dict[int, str] = {}
    fn_of: dict[int, str] = {}
    full = parts is not None

    def visit(n: Node) -> str:
        got = names.get(id(n))
        if got is not None:
            return got
        op = n.op
        if op == "leaf":
            c = n.args[0]
            name = leaf_of.get(id(c))
            if name is None:
                view = c if c.shape == shape else c.broadcast_to(shape)
                name = leaf_of[id(c)] = f"a{len(leaves)}"
                leaves.append(view)
                key.append(("leaf", id(input_kind(view))))
                texts[name] = name
            names[id(n)] = name
            return name
        if op == "literal":
            v = n.args[0]
            name = f"{dtype_name(n.dtype)}({v.item()!r})"
            key.append(("literal", n.dtype, v.item()))
            names[id(n)] = name
            texts[name] = repr(v.item())
            return name
        if op == "const" or op == "weak":
            name = f"c{len(consts)}"
            consts.append(n.args[0])
            key.append((op, n.dtype))
            names[id(n)] = name
            texts[name] = name
            return name
        args = [visit(a) for a in n.args]
        name = f"t{len(key)}"
        if op == "call":
            fname = fn_of.get(id(n.fn))
            if fname is None:
                fname = fn_of[id(n.fn)] = f"f{len(functions)}"
                functions.append(n.fn)
            key.append(("call", n.fn))       # the function itself: an id could be reused
            if full:
                expr = f"{dtype_name(n.dtype)}({fname}({', '.join(args)}))"
                text = f"{getattr(n.fn, '__name__', fname)}" \
                       f"({', '.join(texts[a] for a in args)})"
        elif full and op == "astype":
            expr = f"{dtype_name(n.dtype)}({args[0]})"
            text = f"{texts[args[0]]}.astype({n.dtype.name})"
        elif full:
            expr = f"{dtype_name(n.dtype)}({ops.template(op).format(*args)})"
            text = ops.template(op).format(*(f"({texts[a]})" if a[0] == "t" else
                                             texts[a] for a in args))
        if full:
            lines.append(f"    {name} = {expr}")
            texts[name] = text
        key.append((op, tuple(args), n.dtype))
        names[id(n)] = name
        return name

    result = visit(root)
    if root.op in ("leaf", "const", "literal", "weak"):    # a copy (or a fill): one node
        name = "t0"
        lines.append(f"    {name} = {dtype_name(root.dtype)}({result})")
        key.append(("copy", root.dtype))
        texts[name] = texts[result]
        result = name
    key.append(("shape", len(shape)))
    if full:
        parts.update(lines=lines, result=result, text=texts[result], functions=functions)
    return tuple(key), leaves, consts


def _muscle(program: Program) -> Muscle:
    """The Python muscle of a program (cached per structure key)."""
    hit = _MUSCLES.get(program.key)
    if hit is not None:
        return hit
    params = [f"a{k}" for k in range(len(program.leaves))] + \
             [f"c{k}" for k in range(len(program.consts))]
    digest = hashlib.sha1(repr(program.key).encode()).hexdigest()[:12]
    filename = f"<skelpy fused {digest}>"
    src = (f"def fused({', '.join(params)}):\n"
           f"    # {program.text}\n"
           + "\n".join(program.lines) + f"\n    return {program.result}\n")
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {"np": np, **{f"f{k}": fn for k, fn in enumerate(program.functions)}}
    exec(compile(src, filename, "exec"), ns)  # noqa: S102 - our own generated source
    muscle = Muscle(ns["fused"])
    muscle._skelpy_fn = ns["fused"]           # keep the function (muscles cache it weakly)
    if len(_MUSCLES) > 4 * MAX_CACHED_SKELETONS:
        _MUSCLES.clear()
    _MUSCLES[program.key] = muscle
    return muscle


def skeleton_for(program: Program) -> ZipN:
    """The fused Map skeleton of a program (cached per structure key, LRU)."""
    with _LOCK:
        sk = _SKELETONS.get(program.key)
        if sk is not None:
            _SKELETONS.move_to_end(program.key)
            return sk
        sk = ZipN(_muscle(program), len(program.leaves), description=program.text)
        _SKELETONS[program.key] = sk
        while len(_SKELETONS) > MAX_CACHED_SKELETONS:
            _SKELETONS.popitem(last=False)
        return sk


def muscle_for(program: Program) -> Muscle:
    with _LOCK:
        return _muscle(program)


def check_translates(op: str, dtypes: tuple, out: np.dtype, where: str) -> None:
    """Translate one operation on these dtypes once (cached), so that an operation the
    translator cannot compile is an error at the user's line, not at evaluation."""
    key = (op, dtypes, out)
    if key in _CHECKED:
        message = _CHECKED[key]
        if message is not None:
            raise TranslationError(message, origin=where)
        return
    args = [f"a{k}" for k in range(len(dtypes))]
    if op == "astype":
        body = f"{dtype_name(out)}(a0)"
    else:
        body = f"{dtype_name(out)}({ops.template(op).format(*args)})"
    filename = f"<skelpy op {op}>"
    src = f"def {op}({', '.join(args)}):\n    return {body}\n"
    linecache.cache[filename + str(len(src))] = (len(src), None, src.splitlines(True),
                                                 filename + str(len(src)))
    ns = {"np": np}
    exec(compile(src, filename + str(len(src)), "exec"), ns)  # noqa: S102
    try:
        Muscle(ns[op]).specialise([Scalar(d) for d in dtypes], c_name="skp_check")
    except SkelpyError as exc:
        message = f"{op} on {', '.join(str(d) for d in dtypes)} cannot run on the device: " \
                  f"{exc}"
        _CHECKED[key] = message
        raise TranslationError(message, origin=where) from None
    _CHECKED[key] = None


# -- pending values ----------------------------------------------------------------------------


def _evaluate(self) -> None:
    """Compute a pending value into its storage, if that still waits for it (``evaluate``
    of a :class:`Recipe` and of a :class:`PendingNode`: ``self``)."""
    storage = self.storage()
    if storage is None or storage.pending is not self:
        return
    if self.direct is not None:
        out, skeleton = self.direct()
    else:
        node = self if type(self) is PendingNode else self.node
        shape = self.shape
        # a tree whose structure ran before: straight into its kernel's repeat launcher
        if node.plain and node.n_ops and not node.shared and node.shape == shape:
            hit = _TREES.get((node.sid, len(shape)))         # _tree_key, inline
            leaves = node.leaves
        else:
            tree = _tree_key(node, shape)
            hit = None if tree is None else _TREES.get(tree[0])
            leaves = None if tree is None else tree[1]
        if hit is not None:
            sk = hit[2]
            if sk is not None:
                launch = sk.repeat_launcher()
                if launch is not None and \
                        launch(shape, leaves, node.consts, node.stores, storage):
                    LAST.skeleton = sk
                    return
        out, skeleton = compute(node, shape)
    LAST.skeleton = skeleton
    parts = out.storage.parts
    if parts is not None and not out.storage.device_valid:
        storage.filled_parts(parts)      # computed on a device group: it stays there
        return
    rt = _rt.current()
    storage.filled(out.device_buffer(rt), rt)
    if out.storage.distribution is not None:   # an empty result on a device group: its name
        storage.distribution = out.storage.distribution


class Recipe:
    """What a pending container computes (its storage's ``pending``): a graph and a shape;
    ``storage`` (a weak reference to the storage it fills) is set by the storage.

    ``direct`` (a deferred skeleton call, :mod:`.chains`): a function that runs the call as
    it would have run eagerly, used while no consumer has fused it into its own kernel."""

    __slots__ = ("node", "shape", "storage", "direct")

    def __init__(self, node: Node, shape: tuple[int, ...], direct=None):
        self.node, self.shape, self.storage, self.direct = node, shape, None, direct

    evaluate = _evaluate


class PendingNode(Node):
    """An operation built by the operators' fast path (``expression.binary``) with fewer
    objects: it is also the recipe of the pending container it was built for (its ``node``
    is itself, its ``shape`` the node's; it runs no deferred call), and an operand that is
    a plain container or a constant is kept in ``operands`` as it is (the container, or
    its NumPy scalar), its node made only when ``args`` is first read (a walk: a tree seen
    before runs from ``sid``, ``leaves``, ``stores`` and ``consts`` alone). Every field
    is the one ``graph.Node`` gives the same operands."""

    __slots__ = ("storage", "operands")
    direct = fn = None

    @property
    def node(self) -> Node:
        return self

    @property
    def args(self) -> tuple:
        """``Node.args``: the operands' nodes, made on first use and kept."""
        ops = self.operands
        if not (isinstance(ops[0], Node) and isinstance(ops[1], Node)):
            ops = self.operands = tuple(x if isinstance(x, Node) else _taken(x) for x in ops)
        return ops

    evaluate = _evaluate


def _taken(x) -> Node:
    """The node of an operand kept as it is, taken once (a constant's ``uses`` is 1)."""
    n = operand_node(x)
    if n.op != "leaf":
        n.uses = 1
    return n


class _Last:
    """The fused skeleton that ran most recently (``skelpy.array.last_skeleton()``)."""

    skeleton: ZipN | None = None


LAST = _Last()


def pending_container(node: Node, shape: tuple[int, ...], direct=None) -> Container:
    """A pending container computing ``node``; it reads ``node``'s leaves, so they compute
    it before anybody writes them."""
    recipe = Recipe(node, shape, direct)
    cls = Vector if len(shape) == 1 else Matrix
    return cls.pending(shape, node.dtype, recipe, node.stores)   # sets recipe.storage


def compute(node: Node, shape: tuple[int, ...]) -> tuple[Container, ZipN]:
    """Run the graph as one kernel: a fresh container of ``shape`` (and the skeleton). A
    tree-shaped graph whose structure ran before goes straight to its skeleton."""
    tree = _tree_key(node, shape)
    if tree is not None:
        hit = _TREES.get(tree[0])
        if hit is not None and hit[2] is not None:
            sk = hit[2]
            return sk(*tree[1], *node.consts), sk
    program = linearise(node, shape)
    sk = skeleton_for(program)
    if tree is not None:
        hit = _TREES.get(tree[0])
        if hit is not None:
            hit[2] = sk
    return sk(*program.leaves, *program.consts), sk
