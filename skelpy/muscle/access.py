"""Which accessor elements a Python muscle reads: the basis of Stencil shape inference.

An abstract interpreter over the muscle's AST with integer intervals.  ``for`` loops over
``range()`` with constant bounds are unrolled (up to a budget), so ``for dr in range(-2, 3)``
gives exact constant offsets; otherwise loop variables become the interval of their range.
Calls to translated helper functions are followed with the argument intervals.  Branches whose
condition is not a constant contribute both sides, so the result is a superset of the reads
that can happen, never a subset.  Everything it needs (constants, which subscript is an
accessor read, which call a helper) comes from the typed body's annotations.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

import numpy as np

from .params import Accessor
from .typed import (
    NO_CONST,
    AccessorRead,
    ArrayItem,
    CastCall,
    FunctionCall,
    HelperCall,
    TypedBody,
)
from .typed_muscle import ReadSite

INF = math.inf
TOP = (-INF, INF)
_UNROLL_TRIPS = 256
_BUDGET = 4096
_DEPTH = 8


def _hull(a, b):
    return (min(a[0], b[0]), max(a[1], b[1]))


def _mul(a, b):
    if a == (0, 0) or b == (0, 0):
        return (0, 0)
    ps = []
    for x in a:
        for y in b:
            ps.append(0 if (x == 0 or y == 0) else x * y)
    return (min(ps), max(ps))


def _const(v):
    if isinstance(v, (bool, int, np.bool_, np.integer)):
        return (int(v), int(v))
    return TOP


@dataclass
class _Read:
    intervals: list | None          # per dimension; None: every element (a C helper reads it)
    order: tuple = ()               # (helper depth, line, column): source order of sites
    where: str = ""


class _Abs:
    def __init__(self, body: TypedBody, accmap: dict[str, int], reads: dict, state: dict,
                 depth: int = 0):
        self.body = body
        self.accmap = accmap
        self.reads = reads
        self.state = state
        self.depth = depth
        self.rets: list = []

    # -- statements ----------------------------------------------------------------------------

    def block(self, stmts, env):
        for s in stmts:
            st = self.stmt(s, env)
            if st:
                return st
        return None

    def stmt(self, s, env):
        if isinstance(s, ast.Assign):
            for tgt in s.targets:
                if isinstance(tgt, ast.Name):
                    env[tgt.id] = self.ev(s.value, env)
                elif isinstance(s.value, (ast.Tuple, ast.List)):
                    vals = [self.ev(v, env) for v in s.value.elts]
                    for e, v in zip(tgt.elts, vals):
                        env[e.id] = v
                else:
                    for e in tgt.elts:
                        env[e.id] = TOP
        elif isinstance(s, ast.AugAssign):
            b = self.body.synth.get(s)
            env[s.target.id] = self.ev(b, env) if b is not None else TOP
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                env[s.target.id] = self.ev(s.value, env)
        elif isinstance(s, ast.Return):
            self.rets.append(self.ev(s.value, env))
            return "return"
        elif isinstance(s, ast.Expr):
            self.ev(s.value, env)
        elif isinstance(s, ast.If):
            c = self.ev(s.test, env)
            if c[0] == c[1]:
                return self.block(s.body if c[0] else s.orelse, env)
            e1, e2 = dict(env), dict(env)
            s1 = self.block(s.body, e1)
            s2 = self.block(s.orelse, e2)
            if s1 and s2 and s1 == s2:
                env.update(_join(e1, e2))
                return s1
            if s1 and not s2:
                env.clear()
                env.update(e2)
            elif s2 and not s1:
                env.clear()
                env.update(e1)
            else:
                joined = _join(e1, e2)
                env.clear()
                env.update(joined)
        elif isinstance(s, ast.While):
            assigned = _assigned(s.body)
            for n in assigned:
                env[n] = TOP
            self.ev(s.test, env)
            self.block(s.body, dict(env))
            for n in assigned:
                env[n] = TOP
        elif isinstance(s, ast.For):
            return self.for_(s, env)
        elif isinstance(s, ast.Break):
            return "break"
        elif isinstance(s, ast.Continue):
            return "continue"
        return None

    def for_(self, s, env):
        args = [self.ev(a, env) for a in s.iter.args]
        if len(args) == 1:
            args = [(0, 0)] + args
        if len(args) == 2:
            args = args + [(1, 1)]
        var = s.target.id
        if all(a[0] == a[1] for a in args) and args[2][0] != 0:
            rng = range(*(int(a[0]) for a in args))
            if len(rng) <= _UNROLL_TRIPS and self.state["budget"] >= len(rng):
                self.state["budget"] -= len(rng)
                for v in rng:
                    env[var] = (v, v)
                    st = self.block(s.body, env)
                    if st == "break":
                        break
                    if st == "return":
                        return "return"
                return None
        start, stop, step = args
        if step[0] > 0:
            itv = (start[0], stop[1] - 1)
        elif step[1] < 0:
            itv = (stop[0] + 1, start[1])
        else:
            itv = _hull(start, stop)
        assigned = _assigned(s.body)
        for n in assigned:
            env[n] = TOP
        env[var] = itv
        self.block(s.body, dict(env))
        for n in assigned:
            env[n] = TOP
        env[var] = itv
        return None

    # -- expressions ---------------------------------------------------------------------------

    def visit(self, node, env):
        for c in ast.iter_child_nodes(node):
            if isinstance(c, ast.expr):
                self.ev(c, env)

    def ev(self, node, env):
        note = self.body.notes.get(node)
        if note is not None and note.const is not NO_CONST:
            return _const(note.const)
        meaning = note.meaning if note is not None else None
        if isinstance(node, ast.Name):
            return env.get(node.id, TOP)
        if isinstance(node, ast.BinOp):
            a, b = self.ev(node.left, env), self.ev(node.right, env)
            op = type(node.op).__name__
            if op == "Add":
                return (a[0] + b[0], a[1] + b[1])
            if op == "Sub":
                return (a[0] - b[1], a[1] - b[0])
            if op == "Mult":
                return _mul(a, b)
            if op == "FloorDiv" and b[0] == b[1] and b[0] > 0:
                return (math.floor(a[0] / b[0]) if a[0] > -INF else -INF,
                        math.floor(a[1] / b[0]) if a[1] < INF else INF)
            if op == "Mod" and b[0] == b[1] and b[0] > 0:
                if a[0] >= 0 and a[1] < b[0]:
                    return a
                return (0, b[0] - 1)
            return TOP
        if isinstance(node, ast.UnaryOp):
            a = self.ev(node.operand, env)
            if isinstance(node.op, ast.USub):
                return (-a[1], -a[0])
            if isinstance(node.op, ast.UAdd):
                return a
            return TOP
        if isinstance(node, ast.Compare):
            vals = [self.ev(node.left, env)] + [self.ev(c, env) for c in node.comparators]
            res = True
            for op, x, y in zip(node.ops, vals, vals[1:]):
                r = _cmp(type(op).__name__, x, y)
                if r is None:
                    return (0, 1)
                res = res and r
            return (int(res), int(res))
        if isinstance(node, ast.BoolOp):
            vals = [self.ev(v, env) for v in node.values]
            if note is not None and note.ty.kind != "b":
                hull = vals[0]   # Python's ``and``/``or``: the value of one of the operands
                for v in vals[1:]:
                    hull = _hull(hull, v)
                return hull
            known = [v for v in vals if v[0] == v[1]]
            if isinstance(node.op, ast.And):
                if any(v == (0, 0) for v in known):
                    return (0, 0)
                return (1, 1) if len(known) == len(vals) else (0, 1)
            if any(v[0] == v[1] and v[0] != 0 for v in known):
                return (1, 1)
            return (0, 0) if len(known) == len(vals) else (0, 1)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            a = self.ev(node.operand, env)
            if a[0] == a[1]:
                return (int(not a[0]), int(not a[0]))
            if a[0] > 0 or a[1] < 0:
                return (0, 0)
            return (0, 1)
        if isinstance(node, ast.IfExp):
            c = self.ev(node.test, env)
            if c[0] == c[1]:
                return self.ev(node.body if c[0] else node.orelse, env)
            return _hull(self.ev(node.body, env), self.ev(node.orelse, env))
        if isinstance(node, ast.Subscript):
            if isinstance(meaning, AccessorRead):
                idx = [self.ev(i, env) for i in meaning.indices]
                top = self.accmap.get(meaning.param.name)
                if top is not None:
                    order = (self.depth, node.lineno, node.col_offset)
                    where = self.body.function.where(node)
                    self.reads.setdefault(top, []).append(_Read(idx, order, where))
                return TOP
            if isinstance(meaning, ArrayItem):
                i = self.ev(meaning.index, env)
                vals = meaning.array.values
                if not all(isinstance(v, int) for v in vals):
                    return TOP
                n = len(vals)
                if i[0] == i[1] and -n <= i[0] < n:
                    v = vals[int(i[0])]
                    return (v, v)
                return (min(vals), max(vals))
            self.visit(node, env)
            return TOP
        if isinstance(node, ast.Call):
            if isinstance(meaning, HelperCall):
                return self.helper(node, meaning.muscle, meaning.kinds, env)
            args = [self.ev(a, env) for a in node.args]
            canon = meaning.spec.canonical if isinstance(meaning, FunctionCall) else None
            if canon in ("pymin", "minimum", "fmin") and args:
                out = args[0]
                for a in args[1:]:
                    out = (min(out[0], a[0]), min(out[1], a[1]))
                return out
            if canon in ("pymax", "maximum", "fmax") and args:
                out = args[0]
                for a in args[1:]:
                    out = (max(out[0], a[0]), max(out[1], a[1]))
                return out
            if canon == "abs" and args:
                lo, hi = args[0]
                if lo >= 0:
                    return (lo, hi)
                if hi <= 0:
                    return (-hi, -lo)
                return (0, max(-lo, hi))
            if isinstance(meaning, CastCall) and args and (
                    meaning.cast.kind == "i"
                    or (meaning.cast.dtype is not None and meaning.cast.dtype.kind in "iu")):
                return args[0]
            return TOP
        self.visit(node, env)
        return TOP

    def helper(self, node, m, kinds, env):
        args = node.args
        if m.is_c or self.depth >= _DEPTH:
            for a, k in zip(args, kinds):
                if isinstance(k, Accessor) and isinstance(a, ast.Name) and a.id in self.accmap:
                    self.reads.setdefault(self.accmap[a.id], []).append(_Read(None))
                else:
                    self.ev(a, env)
            return TOP
        sub = m.typed_body(kinds)
        accmap = {}
        senv = {}
        for pname, a, k in zip(sub.function.param_names, args, kinds):
            if isinstance(k, Accessor):
                if isinstance(a, ast.Name) and a.id in self.accmap:
                    accmap[pname] = self.accmap[a.id]
            elif isinstance(a, ast.Name) and a.id in self.body.scope.index_params:
                senv[pname] = TOP
            else:
                senv[pname] = self.ev(a, env)
        inner = _Abs(sub, accmap, self.reads, self.state, self.depth + 1)
        inner.block(sub.function.body, senv)
        if not inner.rets:
            return TOP
        out = inner.rets[0]
        for r in inner.rets[1:]:
            out = _hull(out, r)
        return out


def _cmp(op: str, x, y):
    """The truth of ``x op y`` for intervals, or None when it depends on the values."""
    if op == "Lt":
        return True if x[1] < y[0] else (False if x[0] >= y[1] else None)
    if op == "LtE":
        return True if x[1] <= y[0] else (False if x[0] > y[1] else None)
    if op == "Gt":
        return _cmp("Lt", y, x)
    if op == "GtE":
        return _cmp("LtE", y, x)
    if op == "Eq":
        if x[0] == x[1] == y[0] == y[1]:
            return True
        return False if (x[1] < y[0] or y[1] < x[0]) else None
    if op == "NotEq":
        r = _cmp("Eq", x, y)
        return None if r is None else not r
    return None


def _join(e1, e2):
    out = {}
    for k in set(e1) | set(e2):
        if k in e1 and k in e2:
            out[k] = _hull(e1[k], e2[k])
        else:
            out[k] = TOP
    return out


def _assigned(stmts) -> set[str]:
    names: set[str] = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                names.add(n.target.id)
    return names


@dataclass
class Accesses:
    """What a body reads of its accessor parameters (keyed by parameter index).

    ``offsets[i]``: the distinct constant index tuples read, or None if some index is not a
    constant.  ``bounds[i]``: inclusive (lo, hi) per dimension, or None if unbounded;
    ((0, 0), ...) when the parameter is not read at all.  ``sites[i]``: every read, in
    source order (the body's own first, then those in called functions)."""

    offsets: dict[int, list[tuple[int, ...]] | None]
    bounds: dict[int, tuple[tuple[int, int], ...] | None]
    sites: dict[int, tuple[ReadSite, ...]]


def analyse(body: TypedBody) -> Accesses:
    """The reads of ``body``'s accessor parameters."""
    accessors = body.scope.accessors
    accmap = {name: a.index for name, a in accessors.items()}
    reads: dict[int, list[_Read]] = {}
    state = {"budget": _BUDGET}
    _Abs(body, accmap, reads, state).block(body.function.body, {})
    accesses: dict = {}
    bounds: dict = {}
    sites: dict = {}
    for a in accessors.values():
        found = reads.get(a.index, [])
        sites[a.index] = _sites(found)
        rs = [r.intervals for r in found]
        ndim = a.kind.ndim
        if any(r is None for r in rs):
            accesses[a.index] = None
            bounds[a.index] = None
            continue
        if all(lo == hi for r in rs for lo, hi in r):
            seen: dict = {}
            for r in rs:
                seen.setdefault(tuple(int(lo) for lo, _ in r), None)
            accesses[a.index] = list(seen)
        else:
            accesses[a.index] = None
        if not rs:
            bounds[a.index] = ((0, 0),) * ndim  # nothing read: an empty neighbourhood
        elif all(lo > -INF and hi < INF for r in rs for lo, hi in r):
            bounds[a.index] = tuple((int(min(r[d][0] for r in rs)), int(max(r[d][1] for r in rs)))
                                    for d in range(ndim))
        else:
            bounds[a.index] = None
    return Accesses(accesses, bounds, sites)


def _sites(found: list[_Read]) -> tuple[ReadSite, ...]:
    out: dict[ReadSite, None] = {}
    for r in sorted((r for r in found if r.intervals is not None), key=lambda r: r.order):
        offsets = None
        if all(lo == hi for lo, hi in r.intervals):
            offsets = tuple(int(lo) for lo, _ in r.intervals)
        out.setdefault(ReadSite(offsets, r.where), None)
    return tuple(out)
