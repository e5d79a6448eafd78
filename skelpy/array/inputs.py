"""Pending values read by skeletons as input expressions, and when that is worth it.

A pending elementwise value (or a lazy Map result) given to ``Reduce`` or ``Scan`` is read
once or twice per element by the consumer's kernel: it is always fused (``chains``). A
consumer that reads each element many times would evaluate a fused expression that many
times. The rule, for an expression read ``reuse`` times per element::

    fuse  iff  cost(expression) * (reuse - 1) <= STORE_COST

where ``cost`` counts the graph's operations (each node once; a user muscle or a
transcendental/division-like operation counts ``HEAVY_OP``) and ``STORE_COST`` is what
storing an element and reading it back costs, in the same units (a write and a read of
global memory, and the temporary's allocation, amortised: 16 simple operations). So an
expression read once is always fused, and a cheap one (``2 * A``) read a few times too, but
``np.exp(A)`` read by 64 tiles is materialised first.

``AllPairs`` (zip/reduce form) reads each element of A once per tile of B's rows and each
element of B once per tile of A's rows: ``reuse = ceil(m / ALLPAIRS_TILE)`` for A and
``ceil(n / ALLPAIRS_TILE)`` for B (64: the CPU default tile, half the GPU one, so the rule
errs towards materialising on GPUs).
"""

from __future__ import annotations

import math

from ..containers import Container
from ..skeletons.allpairs import RowsExpression
from . import expression, fusion
from .graph import Node

STORE_COST = 16
HEAVY_OP = 8
ALLPAIRS_TILE = 64

#: Operations that cost several simple ones (a call of a math library function or a division).
HEAVY = frozenset({
    "true_divide", "floor_divide", "remainder", "power", "arctan2", "hypot", "fmod",
    "float_power", "logaddexp", "logaddexp2", "sqrt", "cbrt", "exp", "exp2", "expm1", "log",
    "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh",
    "tanh", "arcsinh", "arccosh", "arctanh", "reciprocal", "call",
})


def cost(node: Node) -> int:
    """The operations of a graph, each node once (see the module docstring)."""
    seen: set[int] = set()
    total = 0
    todo = [node]
    while todo:
        n = todo.pop()
        if id(n) in seen or n.op in ("leaf", "const", "literal", "weak"):
            continue
        seen.add(id(n))
        total += HEAVY_OP if n.op in HEAVY else 1
        todo.extend(n.args)
    return total


def worth_fusing(node: Node, reuse: int, per_read: int = 0) -> bool:
    """Whether to evaluate ``node`` at each of ``reuse`` reads rather than store it once;
    ``per_read``: what each read costs besides the operations (a Stencil reads each of the
    expression's inputs where the stored value would be one read: ``inputs - 1``)."""
    return (cost(node) + per_read) * (reuse - 1) <= STORE_COST


def rows_expression(x: Container) -> RowsExpression | None:
    """``x``'s pending graph as an AllPairs operand, or None (x is not pending, a view of
    one, or a graph that reads nothing)."""
    if not (isinstance(x, Container) and x.is_pending and x.layout is None and x.ndim == 2):
        return None
    program = fusion.linearise(expression.node_of(x), x.shape)
    if not program.leaves:
        return None
    return RowsExpression(fusion.muscle_for(program), program.key, tuple(program.leaves),
                          tuple(program.consts), x.dtype, x.shape)


def allpairs_operands(A, B) -> tuple:
    """A and B for an AllPairs call: each pending one that is worth it as an expression."""
    out = []
    for x, other in ((A, B), (B, A)):
        rows = getattr(other, "shape", (0,))[0]
        if isinstance(x, Container) and x.is_pending and \
                worth_fusing(expression.node_of(x), math.ceil(rows / ALLPAIRS_TILE)):
            out.append(rows_expression(x) or x)
        else:
            out.append(x)
    return tuple(out)
