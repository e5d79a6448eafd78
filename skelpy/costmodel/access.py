"""Access classes of a muscle's reads of extra arrays, from its typed body.

[Joshi & Omar 2011] §2.2 types an index as ``ID(a, b, c) = a·tid + b·bid + c`` and tracks
only sums and multiples by constants; anything else is untracked. Here the one coefficient
that decides coalescing is kept: how far the address moves between *consecutive work-items*
(the skeleton's innermost index: ``i`` of an ``IndexVector``, the column of an
``IndexMatrix``). A read is

- ``constant`` when that step is 0 (every work-item of a row or group reads the same
  element: a broadcast, whatever uniform values the index holds),
- ``coalesced`` when it is ±1 element,
- ``strided`` when it is another constant, or a multiple of a uniform value (``a[i * k]``),
- ``gathered`` when the index is not tracked: it depends on data (``a[int(x)]``), or on the
  work-item in another than an affine way (``a[i * i]``, ``a[i // 2]``) — [Pöppl 2014]
  §5.5.2's "complex" class.

Each read counts once per run of the loops around it (static trip counts; a loop with a
trip count not known until run time counts once). Reads inside called helper functions are
not analysed; the caller counts them as gathered (see :func:`extra_read_classes`).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

from ..muscle.typed import (
    NO_CONST,
    AccessorRead,
    CastCall,
    FunctionCall,
    IndexComponent,
    TypedBody,
)

CLASSES = ("constant", "coalesced", "strided", "gathered")


@dataclass(frozen=True)
class Form:
    """What is known of an integer value: ``step`` is its change between consecutive
    work-items (None: a non-zero multiple of a uniform value), ``value`` its compile-time
    value if it has one."""

    step: float | None
    value: object = NO_CONST


UNKNOWN = None                       # an untracked value (data, or not affine)
ZERO_STEP = Form(0.0)                # uniform between neighbouring work-items
ROLES = ("id", "row", "col", "point", "data", "uniform")


def _add(a: Form | None, b: Form | None, sign: int = 1) -> Form | None:
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    value = NO_CONST
    if a.value is not NO_CONST and b.value is not NO_CONST:
        try:
            value = a.value + sign * b.value
        except TypeError:
            value = NO_CONST
    if a.step is None or b.step is None:
        return Form(None, value)
    return Form(a.step + sign * b.step, value)


def _mul(a: Form | None, b: Form | None) -> Form | None:
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    for x, y in ((a, b), (b, a)):
        if x.value is not NO_CONST and isinstance(x.value, (int, float)):
            if y.value is not NO_CONST:
                return Form(0.0, x.value * y.value)
            return Form(None if y.step is None else y.step * x.value)
    if a.step == 0 and b.step == 0:
        return ZERO_STEP
    if (a.step == 0) != (b.step == 0):
        return Form(None)                # a work-item step times a uniform value
    return UNKNOWN                       # i * i


class _Reads:
    """Walks one typed body and counts classified reads of the array accessors."""

    def __init__(self, body: TypedBody, roles: Mapping[int, str], loop_trip: float):
        self.body = body
        self.roles = roles
        self.loop_trip = loop_trip
        self.counts = dict.fromkeys(CLASSES, 0.0)
        self.weight = 1.0

    # -- statements ----------------------------------------------------------------------
    def block(self, stmts, env) -> None:
        for s in stmts:
            self.stmt(s, env)

    def stmt(self, s, env) -> None:
        if isinstance(s, ast.Assign):
            value = self.ev(s.value, env)
            for tgt in s.targets:
                if isinstance(tgt, ast.Name):
                    env[tgt.id] = value
                else:
                    for e in ast.walk(tgt):
                        if isinstance(e, ast.Name):
                            env[e.id] = UNKNOWN
        elif isinstance(s, ast.AugAssign):
            synth = self.body.synth.get(s)
            value = self.ev(synth, env) if synth is not None else UNKNOWN
            if isinstance(s.target, ast.Name):
                env[s.target.id] = value
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None and isinstance(s.target, ast.Name):
                env[s.target.id] = self.ev(s.value, env)
        elif isinstance(s, (ast.Return, ast.Expr)):
            if s.value is not None:
                self.ev(s.value, env)
        elif isinstance(s, ast.If):
            self.ev(s.test, env)
            static = self.body.static_test(s.test)
            if static is not None:
                self.block(s.body if static else s.orelse, env)
                return
            e1, e2 = dict(env), dict(env)
            self.block(s.body, e1)
            self.block(s.orelse, e2)
            for k in set(e1) | set(e2):
                env[k] = e1.get(k) if e1.get(k) == e2.get(k) else UNKNOWN
        elif isinstance(s, (ast.For, ast.While)):
            self.loop(s, env)

    def loop(self, s, env) -> None:
        trip = None
        if isinstance(s, ast.For):
            args = [self.body.const(a) for a in getattr(s.iter, "args", [])]
            if args and all(isinstance(a, int) for a in args):
                try:
                    trip = len(range(*args))
                except (TypeError, ValueError):
                    trip = None
            for a in getattr(s.iter, "args", []):
                self.ev(a, env)
        else:
            self.ev(s.test, env)
        changed = {n.id for n in ast.walk(s) if isinstance(n, ast.Name)
                   and isinstance(n.ctx, ast.Store)}
        for name in changed:
            env[name] = UNKNOWN
        if isinstance(s, ast.For) and isinstance(s.target, ast.Name):
            env[s.target.id] = ZERO_STEP            # the same for every work-item
        saved = self.weight
        self.weight *= float(trip) if trip is not None else self.loop_trip
        self.block(s.body, dict(env))
        self.weight = saved
        for name in changed:
            env[name] = UNKNOWN

    # -- expressions ---------------------------------------------------------------------
    def ev(self, node, env) -> Form | None:
        note = self.body.notes.get(node)
        if note is not None and note.const is not NO_CONST:
            self.children(node, env)
            return Form(0.0, note.const)
        meaning = note.meaning if note is not None else None
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            role = self.role_of(node.id)
            return {"id": Form(1.0), "col": Form(1.0), "row": ZERO_STEP,
                    "uniform": ZERO_STEP}.get(role, UNKNOWN)
        if isinstance(meaning, IndexComponent):
            return Form(1.0) if meaning.component == 1 else ZERO_STEP
        if isinstance(meaning, AccessorRead):
            forms = [self.ev(i, env) for i in meaning.indices]
            if meaning.param.kind.kind == "array":
                self.counts[_classify(forms)] += self.weight
            return UNKNOWN
        if isinstance(node, ast.BinOp):
            a, b = self.ev(node.left, env), self.ev(node.right, env)
            op = type(node.op).__name__
            if op == "Add":
                return _add(a, b)
            if op == "Sub":
                return _add(a, b, -1)
            if op == "Mult":
                return _mul(a, b)
            if a is not UNKNOWN and b is not UNKNOWN and a.step == 0 and b.step == 0:
                return ZERO_STEP
            return UNKNOWN
        if isinstance(node, ast.UnaryOp):
            a = self.ev(node.operand, env)
            if isinstance(node.op, ast.USub) and a is not UNKNOWN:
                return Form(None if a.step is None else -a.step)
            return a if isinstance(node.op, ast.UAdd) else _uniform_or_unknown(a)
        if isinstance(node, ast.Call) and isinstance(meaning, CastCall) and node.args:
            a = self.ev(node.args[0], env)
            for extra in node.args[1:]:
                self.ev(extra, env)
            return a
        if isinstance(node, ast.Call) and isinstance(meaning, FunctionCall):
            forms = [self.ev(a, env) for a in node.args]
            ok = all(f is not UNKNOWN and f.step == 0 for f in forms)
            return ZERO_STEP if ok else UNKNOWN
        forms = self.children(node, env)
        return ZERO_STEP if forms and all(f is not UNKNOWN and f.step == 0
                                          for f in forms) else UNKNOWN

    def children(self, node, env) -> list:
        return [self.ev(c, env) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]

    def role_of(self, name: str) -> str | None:
        scope = self.body.scope
        if name in scope.scalar_params:
            return self.roles.get(scope.scalar_params[name], "uniform")
        return None


def _uniform_or_unknown(a: Form | None) -> Form | None:
    return ZERO_STEP if a is not UNKNOWN and a.step == 0 else UNKNOWN


def _classify(forms: list) -> str:
    """The class of a read at these index forms (row-major: the last index is fastest)."""
    if any(f is UNKNOWN for f in forms):
        return "gathered"
    *outer, last = forms
    if any(f.step != 0 for f in outer):
        return "strided"                 # down a column: a row apart per work-item
    if last.step is None:
        return "strided"
    if last.step == 0:
        return "constant"
    return "coalesced" if abs(last.step) == 1 else "strided"


def read_classes(body: TypedBody, roles: Mapping[int, str] | None = None,
                 loop_trip: float = 1.0) -> dict[str, float]:
    """Reads of array accessors per muscle application, by class.

    ``roles`` names what each scalar parameter (by position) carries: ``"id"`` the
    work-item's index (an ``IndexVector``), ``"row"``/``"col"`` an ``IndexMatrix``'s,
    ``"data"`` an element of an input (untracked), ``"uniform"`` (the default) a value the
    same for every work-item, such as an extra scalar argument."""
    walker = _Reads(body, roles or {}, loop_trip)
    walker.block(body.function.body, {})
    return walker.counts


def extra_read_classes(muscle, kinds: tuple, roles: Mapping[int, str] | None,
                       features: Mapping[str, float], itemsize: float = 4.0
                       ) -> dict[str, float]:
    """The ``extra_reads`` of a :class:`~.choice.CallSpec`: per muscle application, the
    reads of extra arrays by class (``coalesced`` in bytes of ``itemsize``, the others in
    reads). Reads the analysis does not see (in helpers, in OpenCL C muscles) count as
    gathered, up to the translator's own count of reads (``reads_dyn``)."""
    counts = dict.fromkeys(CLASSES, 0.0)
    if not getattr(muscle, "is_c", True):
        try:
            counts = read_classes(muscle.typed_body(kinds), roles)
        except Exception:  # noqa: BLE001 - an analysis failure only costs precision
            counts = dict.fromkeys(CLASSES, 0.0)
    total = float(features.get("reads_dyn", features.get("reads", 0.0)))
    seen = sum(counts.values())
    if total > seen:
        counts["gathered"] += total - seen
    out = {k: v for k, v in counts.items() if v}
    if "coalesced" in out:
        out["coalesced"] *= itemsize
    return out
