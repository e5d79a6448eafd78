"""Definite assignment: every local a muscle reads has a value on every path that reaches it.

C declares a muscle's locals at the top of the function (initialised to 0), so a local that is
assigned on some paths only (``if x > 0: y = x`` then ``return y``) would quietly read 0 where
Python raises ``UnboundLocalError``. This pass finds such reads before any C is written, the way
compilers of languages without run-time "unbound" checks do (Java's definite assignment rules,
the dataflow problem of the dragon book): a forward walk over the typed body with the set of
locals assigned on *every* path so far.

Rules (conservative where a path is not known at translation time):

- ``if``/``while`` conditions that are compile-time constants take only the branch that runs
  (as inference does); otherwise both sides may run, and only what both assign counts after.
- A ``while`` or ``for`` body may run zero times, unless its condition is a constant true
  (``while True`` leaves only by ``break``) or its ``range`` has a constant trip count of at least
  one; a body that runs never (a constant empty ``range``, ``while False``) is not checked.
- Each read is checked against the state when the loop is entered, so a local assigned late in
  one iteration and read early in the next must get a value before the loop.
- After ``return``, ``break`` and ``continue`` nothing is read on that path.
"""

from __future__ import annotations

import ast

from .source import MISSING
from .typed import TypedBody

#: The state of a path: the locals assigned on every path reaching this point, or None for a
#: point that no path reaches (after ``return``/``break``/``continue``).
State = frozenset | None


def _meet(*states: State) -> State:
    live = [s for s in states if s is not None]
    if not live:
        return None
    out = live[0]
    for s in live[1:]:
        out = out & s
    return out


class _Loop:
    """The states at the ``break`` and ``continue`` statements of the innermost loop."""

    __slots__ = ("breaks", "continues")

    def __init__(self):
        self.breaks: list[State] = []
        self.continues: list[State] = []


class _Walk:
    def __init__(self, body: TypedBody):
        self.body = body
        self.locals = body.scope.locals
        self.loops: list[_Loop] = []

    # -- reads --------------------------------------------------------------------------------

    def reads(self, node, state: State) -> None:
        """Check every local read in expression ``node`` against ``state``."""
        if state is None or node is None:
            return
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self.read_name(node, state)
            return
        if isinstance(node, ast.IfExp):
            self.reads(node.test, state)
            taken = self.body.static_test(node.test) if node in self.body.notes else None
            if taken is not False:
                self.reads(node.body, state)
            if taken is not True:
                self.reads(node.orelse, state)
            return
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp)):
            return                                  # refused by inference
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.reads(child, state)

    def read_name(self, node: ast.Name, state: frozenset) -> None:
        if node.id in self.locals and node.id not in state:
            raise self.body.scope.err(
                node, f"local variable '{node.id}' may be used before it is assigned: it has "
                      "no value on some path that reaches this line (Python would raise "
                      "UnboundLocalError there); give it a value on every path, for example "
                      "before the 'if' or loop that assigns it", "unassigned variable")

    # -- statements ---------------------------------------------------------------------------

    def block(self, stmts, state: State) -> State:
        for s in stmts:
            state = self.stmt(s, state)
        return state

    def stmt(self, s, state: State) -> State:
        if state is None:
            return None                             # unreachable: nothing runs here
        if isinstance(s, ast.Assign):
            self.reads(s.value, state)
            for tgt in s.targets:
                state = state | _targets(tgt)
            return state
        if isinstance(s, ast.AugAssign):
            if isinstance(s.target, ast.Name):       # reads the old value first
                self.read_name(s.target, state)
            self.reads(s.value, state)
            return state | _targets(s.target)
        if isinstance(s, ast.AnnAssign):
            if s.value is None:
                return state
            self.reads(s.value, state)
            return state | _targets(s.target)
        if isinstance(s, ast.Return):
            self.reads(s.value, state)
            return None
        if isinstance(s, ast.Expr):
            self.reads(s.value, state)
            return state
        if isinstance(s, ast.If):
            self.reads(s.test, state)
            taken = self.body.static_test(s.test)
            if taken is True:
                return self.block(s.body, state)
            if taken is False:
                return self.block(s.orelse, state)
            return _meet(self.block(s.body, state), self.block(s.orelse, state))
        if isinstance(s, ast.While):
            return self.while_(s, state)
        if isinstance(s, ast.For):
            return self.for_(s, state)
        if isinstance(s, ast.Break):
            self.loops[-1].breaks.append(state)
            return None
        if isinstance(s, ast.Continue):
            self.loops[-1].continues.append(state)
            return None
        return state                                # pass

    def while_(self, s: ast.While, state: State) -> State:
        self.reads(s.test, state)
        taken = self.body.static_test(s.test)
        if taken is False:
            return state
        loop = _Loop()
        self.loops.append(loop)
        self.block(s.body, state)
        self.loops.pop()
        if taken is True:                           # leaves by break only
            return _meet(*loop.breaks)
        return state                                # the body may not run at all

    def for_(self, s: ast.For, state: State) -> State:
        for a in s.iter.args:
            self.reads(a, state)
        trips = self.trips(s.iter.args)
        if trips == 0:
            return state
        loop = _Loop()
        self.loops.append(loop)
        end = self.block(s.body, state | _targets(s.target))
        self.loops.pop()
        if trips is not None:                       # runs at least once
            return _meet(end, *loop.continues, *loop.breaks)
        return state

    def trips(self, args) -> int | None:
        values = [self.body.const(a) for a in args]
        if any(v is MISSING for v in values):
            return None
        values = [int(v) for v in values]
        if len(values) == 3 and values[2] == 0:
            return None
        return len(range(*values))


def _targets(t) -> frozenset:
    if isinstance(t, ast.Name):
        return frozenset((t.id,))
    if isinstance(t, (ast.Tuple, ast.List)):
        out: frozenset = frozenset()
        for e in t.elts:
            out = out | _targets(e)
        return out
    if isinstance(t, ast.Starred):
        return _targets(t.value)
    return frozenset()


def check_definite_assignment(body: TypedBody) -> None:
    """Raise TranslationError (naming the line of the read) when a local may be read
    before it is assigned on some path of ``body``."""
    params = frozenset(body.scope.scalar_params)
    _Walk(body).block(body.function.body, params)
