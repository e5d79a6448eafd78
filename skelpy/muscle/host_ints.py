"""Python ints computed from a muscle's Python-int extras, checked on the host at each call.

NumPy 2 (NEP 50) computes an expression of Python ints exactly, in Python, and raises
OverflowError where the result meets a NumPy integer type that cannot hold it: with
``s = 4000``, ``x8 + s // 4`` raises (1000 is out of bounds for uint8). A kernel computes the
Python ints in ``long`` and converts the result, so it would wrap. The value of such an
expression is known on the host when it depends only on Python-int extras, constants and
locals assigned once from them, on a path every call takes; the host then evaluates it exactly
as Python does, before anything runs, and raises what NumPy (or Python) raises:

- a value that meets an integer type in an arithmetic operation, a ufunc or a cast
  (``x8 + v``, ``np.maximum(x8, v)``, ``np.uint8(v)``) and does not fit it: OverflowError;
- any computed Python int beyond int64, the type the kernel computes it in (``f32 + s * s``
  with ``s = 2**40``; NumPy computes 2**80 exactly): OverflowError, as the kernel cannot;
- ``s // 0``, ``s % 0``: ZeroDivisionError; a negative shift count: ValueError;
- builtin ``max``/``min`` of NumPy integers and a Python int that does not fit their type:
  OverflowError, as for a constant (``weak._builtin_minmax``).

Values the host does not know are left as they are: those computed from the data
(``x8 + int(y)``), in loops, in the right of ``and``/``or``, in branches whose test depends
on the data (an ``if`` or ``a if c else b`` comparing Python-int extras is followed on the
host) and after one that may return, and values passed through calls other than ``abs``,
``min`` and ``max`` (``int(s)``, ``np.int64(s)``). A called Python function has checks of its
own, run with the arguments the host knows. The walk in ``weak.py`` records which weak-int
expressions meet which type (:attr:`~.weak.WeakTypes.int_sites`) and which helper each call
runs (``int_calls``); this module keeps what the host can decide.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import DTypeOverflowError, DTypeValueError, DTypeZeroDivisionError
from .dtyping import INT64, fits
from .typed import NO_CONST, FunctionCall, TypedBody

_BIG = 1 << 200           # beyond every C type: larger values are clamped to it (no huge ints)
_RETURN = object()        # the step of a ``return``

Value = Callable[[dict], "int | None"]


def _clamp(v: int) -> int:
    return v if -_BIG <= v <= _BIG else (_BIG if v > 0 else -_BIG)


def _pow(a: int, b: int) -> int | None:
    if b < 0:
        return None                     # a float in Python: not a Python int any more
    if abs(a) > 1 and b > 0 and (a.bit_length() - 1) * b > 256:
        return -_BIG if a < 0 and b % 2 else _BIG
    return a ** b


def _lshift(a: int, b: int) -> int:
    if b > 256 and a:
        return _BIG if a > 0 else -_BIG
    return a << b


def _rshift(a: int, b: int) -> int:
    return a >> min(b, 256) if b >= 0 else a >> b    # a negative count raises as in Python


_BINOPS: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: _pow,
    ast.LShift: _lshift, ast.RShift: _rshift, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}
_UNARY: dict[type, Callable] = {ast.USub: operator.neg, ast.UAdd: operator.pos,
                                ast.Invert: operator.invert}


@dataclass(frozen=True)
class IntSite:
    """One weak-int expression: the type its value must fit (``dtype``; int64 where it only
    has to fit the kernel's ``long``), whether NumPy raises there, where and what it is."""

    dtype: np.dtype
    where: str
    text: str


@dataclass(frozen=True)
class _Call:
    """The step of a call of a helper function: its checks (run with the arguments the host
    knows, by parameter index)."""

    checks: IntChecks


@dataclass(frozen=True)
class IntChecks:
    """What a call checks: the steps in the order Python runs them, a step being a local
    assigned ``(name, value)``, a site checked ``(site, value)``, a branch ``(test, then,
    orelse)`` or a return; ``params`` maps each Python-int (or bool) parameter's index to its
    name."""

    params: tuple[tuple[int, str], ...]
    steps: tuple[tuple, ...]

    def check(self, values: Mapping[int, object]) -> None:
        """Raise as NumPy/Python would for the extras ``values`` (by parameter index)."""
        env: dict[str, int | None] = {}
        for index, name in self.params:
            v = values.get(index)
            env[name] = int(v) if type(v) in (int, bool) else None
        _run(self.steps, env)


def _run(steps, env: dict) -> bool:
    """Run ``steps`` in ``env``: True where a ``return`` ended them."""
    for step in steps:
        what = step[0]
        if what is _RETURN:
            return True
        if isinstance(what, str):
            env[what] = _safe(step[1], env)
        elif isinstance(what, IntSite):
            _check_site(what, step[1], env)
        elif isinstance(what, _Call):
            args = {j: _safe(v, env) for j, v in step[1]}
            what.checks.check({j: v for j, v in args.items() if v is not None})
        else:                                     # a branch decided on the host
            taken = _safe(what, env)
            if taken is None:
                return True          # cannot tell which way it goes: nothing more is known
            if _run(step[1] if taken else step[2], env):
                return True
    return False


def _check_site(what: IntSite, value: Value, env: dict) -> None:
    try:
        v = value(env)
    except ZeroDivisionError:
        raise DTypeZeroDivisionError(f"{what.where}: `{what.text}` divides a Python "
                                     f"integer by zero ({_shown(env)})") from None
    except ValueError as exc:
        raise DTypeValueError(f"{what.where}: `{what.text}`: {exc} ({_shown(env)})") from None
    if v is None or fits(v, what.dtype):
        return
    shown = "beyond 2**200" if abs(v) >= _BIG else str(v)
    if what.dtype == INT64:
        raise DTypeOverflowError(
            f"{what.where}: Python integer {shown} does not fit int64: the value of "
            f"`{what.text}` with {_shown(env)}; skelpy computes Python integers in 64 bits "
            "on the device (NumPy would compute it exactly); pass a float or compute it on "
            "the host")
    raise DTypeOverflowError(
        f"{what.where}: Python integer {shown} out of bounds for {what.dtype}, the "
        f"type it meets (as in NumPy): the value of `{what.text}` with {_shown(env)}")


def _safe(value: Value | None, env: dict) -> int | None:
    if value is None:
        return None
    try:
        return value(env)
    except (ZeroDivisionError, ValueError):
        return None          # the site that computes it raises (a local is checked where used)


def _shown(env: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items() if v is not None) or "no extras"


def int_checks(body: TypedBody, sites: Mapping[ast.AST, np.dtype],
               calls: Mapping[ast.AST, object] = {}) -> IntChecks | None:   # noqa: B006
    """The checks of ``body``'s weak-int ``sites`` (node -> the dtype its value must fit)
    that the host can decide, or None when there are none; ``calls`` maps each call of a
    helper function to its TypedMuscle (whose checks run with the arguments the host knows)."""
    params = []
    for name, index in body.scope.scalar_params.items():
        t = body.param_types.get(name)
        if t is not None and t.weak and t.kind in "ib":
            params.append((index, name))
    if not params or not sites:
        return None
    builder = _Builder(body, sites, calls)
    steps = builder.block(body.function.body)
    if not builder.any_site:
        return None
    return IntChecks(tuple(params), steps)


class _Builder:
    """The steps of the statements every call runs, each statement's sites in evaluation order
    (inner before outer); a branch whose test the host can compute is followed at each call,
    and nothing after a branch that may return (or one it cannot follow) is checked."""

    def __init__(self, body: TypedBody, sites: Mapping[ast.AST, np.dtype],
                 calls: Mapping[ast.AST, object]):
        self.body = body
        self.sites = sites
        self.calls = calls
        self.any_site = False

    def block(self, stmts) -> tuple:
        """The steps of ``stmts``, up to the first that stops what can be known."""
        body = self.body
        self.steps: list = []
        steps = self.steps
        for s in stmts:
            self.steps = steps
            if isinstance(s, ast.Assign):
                self.expr(s.value)
                if len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                    steps.append((s.targets[0].id, self.value(s.value)))
                else:
                    self.forget(s)
            elif isinstance(s, ast.AugAssign):
                synth = body.synth[s]
                self.expr(synth)
                steps.append((s.target.id, self.value(synth)))
            elif isinstance(s, ast.AnnAssign):
                if s.value is not None:
                    self.expr(s.value)
                    steps.append((s.target.id, self.value(s.value)))
            elif isinstance(s, ast.Return):
                self.expr(s.value)
                steps.append((_RETURN,))
                break
            elif isinstance(s, ast.Expr):
                self.expr(s.value)
            elif isinstance(s, ast.If):
                taken = body.static_test(s.test)
                if taken is not None:
                    inner = self.block(s.body if taken else s.orelse)
                    self.steps = steps
                    steps.extend(inner)
                    if inner and inner[-1][0] is _RETURN:
                        break
                    continue
                self.expr(s.test)
                test = self.truth(s.test)
                if test is not None:                # followed on the host at each call
                    then, orelse = self.block(s.body), self.block(s.orelse)
                    self.steps = steps
                    steps.append((test, then, orelse))
                elif self.stops(s):
                    break
            elif isinstance(s, ast.While):
                if body.static_test(s.test) is False:
                    continue
                self.expr(s.test)
                if self.stops(s):
                    break
            elif isinstance(s, ast.For):
                for a in s.iter.args:
                    self.expr(a)
                if self.stops(s):
                    break
            # pass and the like: nothing
        self.steps = steps
        return tuple(steps)

    def stops(self, s) -> bool:
        """After a branch or loop the host does not follow: stop where it may return (True),
        else forget what it assigns."""
        if any(isinstance(n, ast.Return) for n in ast.walk(s)):
            return True
        self.forget(s)
        return False

    def forget(self, s) -> None:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                self.steps.append((n.id, None))

    def expr(self, node) -> None:
        """The steps of ``node``'s sites, inner first: those every evaluation reaches, and
        those in the branch of ``a if c else b`` that the host's test takes; none in the
        operands after the first of ``and``/``or`` or comparisons after a chain's first."""
        self.steps.extend(self._expr_steps(node))

    def _expr_steps(self, n) -> list:
        if n is None or isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                                       ast.GeneratorExp)):
            return []
        out: list = []
        if isinstance(n, ast.IfExp):
            out += self._expr_steps(n.test)
            test = self.truth(n.test)
            if test is not None:
                out.append((test, tuple(self._expr_steps(n.body)),
                            tuple(self._expr_steps(n.orelse))))
        elif isinstance(n, ast.BoolOp):
            out += self._expr_steps(n.values[0])
        elif isinstance(n, ast.Compare):
            out += self._expr_steps(n.left) + self._expr_steps(n.comparators[0])
        else:
            for child in ast.iter_child_nodes(n):
                if isinstance(child, ast.expr):
                    out += self._expr_steps(child)
        helper = self.calls.get(n)
        checks = getattr(helper, "int_checks", None)
        if checks is not None:                     # the helper's checks, with its arguments
            args = tuple((j, v) for j, v in enumerate(self.value(a) for a in n.args)
                         if v is not None)
            if args:
                out.append((_Call(checks), args))
                self.any_site = True
        dtype = self.sites.get(n)
        if dtype is not None:
            value = self.value(n)
            if value is not None:
                out.append((IntSite(dtype, self.body.function.where(n), ast.unparse(n)), value))
                self.any_site = True
        return out

    def value(self, node) -> Value | None:
        """``node``'s value from the environment as a function (Python semantics), or None
        where it is not a Python int the host knows."""
        note = self.body.notes.get(node)
        if note is None:
            return None
        c = note.const
        if c is not NO_CONST:
            if isinstance(c, (bool, int, np.integer)):
                v = int(c)
                return lambda env: v
            return None
        t = note.ty
        if not t.weak or t.kind not in "ib":
            return None
        if isinstance(node, ast.Name):
            name = node.id
            return lambda env: env.get(name)
        if isinstance(node, ast.BinOp) and t.kind == "i":
            op = _BINOPS.get(type(node.op))
            left, right = self.value(node.left), self.value(node.right)
            if op is None or left is None or right is None:
                return None

            def binop(env):
                a, b = left(env), right(env)
                if a is None or b is None:
                    return None
                r = op(a, b)
                return None if r is None else _clamp(r)
            return binop
        if isinstance(node, ast.IfExp) and t.kind == "i":
            test, then, orelse = (self.truth(node.test), self.value(node.body),
                                  self.value(node.orelse))
            if test is None or then is None or orelse is None:
                return None

            def ifexp(env):
                taken = test(env)
                return None if taken is None else (then if taken else orelse)(env)
            return ifexp
        meaning = note.meaning
        if isinstance(meaning, FunctionCall) and t.kind == "i" and not node.keywords \
                and meaning.spec.canonical in _CALLS:
            fn = _CALLS[meaning.spec.canonical]
            args = [self.value(a) for a in node.args]
            if None in args:
                return None

            def call(env):
                vals = [a(env) for a in args]
                return None if None in vals else fn(*vals)
            return call
        if isinstance(node, ast.UnaryOp) and t.kind == "i":
            op = _UNARY.get(type(node.op))
            inner = self.value(node.operand)
            if op is None or inner is None:
                return None

            def unary(env):
                a = inner(env)
                return None if a is None else _clamp(op(a))
            return unary
        return None


    def truth(self, node) -> Value | None:
        """The truth of test ``node`` as a function of the environment (None: unknown), where
        it compares, negates or combines Python ints the host knows."""
        if isinstance(node, ast.Compare):
            parts = [self.value(n) for n in [node.left, *node.comparators]]
            ops = [_COMPARE.get(type(op)) for op in node.ops]
            if None in parts or None in ops:
                return None

            def compare(env):
                vals = [p(env) for p in parts]
                if None in vals:
                    return None
                return all(op(a, b) for op, a, b in zip(ops, vals, vals[1:]))
            return compare
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.truth(node.operand)
            return None if inner is None else lambda env: _not(inner(env))
        if isinstance(node, ast.BoolOp):
            parts = [self.truth(v) for v in node.values]
            if None in parts:
                return None
            want = isinstance(node.op, ast.Or)     # the value that decides

            def boolop(env):
                for p in parts:
                    v = p(env)
                    if v is None:
                        return None
                    if v == want:
                        return want
                return not want
            return boolop
        value = self.value(node)
        return None if value is None else lambda env: _not(_not(value(env)))


_CALLS: dict[str, Callable] = {"abs": abs, "pymin": min, "pymax": max}
_COMPARE: dict[type, Callable] = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
                                  ast.GtE: operator.ge, ast.Eq: operator.eq,
                                  ast.NotEq: operator.ne}


def _not(v):
    return None if v is None else not v
