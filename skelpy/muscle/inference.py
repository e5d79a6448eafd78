"""Type inference: a muscle's body, specialised for parameter kinds, as a :class:`TypedBody`.

Every expression gets a :class:`~.typed.Typed` annotation (``infer_exprs.py``,
``infer_calls.py``). Locals have one type for the whole body, the promotion of everything
assigned to them (so C can declare them once, at the top): the statements are typed again
until no local's type changes, a fixed point over a finite lattice. A local read before
anything typed it is skipped in that round, and is an error once nothing changes any more.
Branches under a compile-time constant condition that never runs are not typed at all
(``x if DEBUG else y``): Python never evaluates them either.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import numpy as np

from ..errors import TranslationError
from .dtyping import INT64, WEAK_INT, Ty, result_type, weak_default
from .infer_calls import build_Call
from .infer_exprs import CONSTRUCTS, EXPRESSION_TYPERS, UnknownLocal
from .symbols import Builtin, IndexParam, Scope
from .typed import NO_CONST, HelperMuscle, Typed, TypedBody

_TYPERS = {**EXPRESSION_TYPERS, "Call": build_Call}


class InferenceContext:
    """All the state of inferring one body; the builders are stateless functions."""

    def __init__(self, scope: Scope, muscle_of: Callable[[object], HelperMuscle]):
        self.scope = scope
        self.muscle_of = muscle_of          # a called Python function -> its Muscle
        self.notes: dict[ast.AST, Typed] = {}
        self.var_types: dict[str, Ty] = {}
        self.param_types: dict[str, Ty] = {}
        self.synth: dict[ast.AST, ast.BinOp] = {}
        self.returns: list[tuple[ast.AST, Ty]] = []
        self.strict = False                 # a local still untyped is an error now
        self.skipped = False                # this round skipped an untyped local

    def err(self, node, message: str, construct: str | None = None) -> TranslationError:
        return self.scope.err(node, message, construct)

    def unsupported(self, node, what: str | None = None) -> TranslationError:
        what = what or CONSTRUCTS.get(type(node).__name__, type(node).__name__)
        return self.err(node, f"{what} is not supported in a muscle", what)

    def type(self, node) -> Ty:
        """Type ``node`` (and its children), record its annotation, return its type."""
        build = _TYPERS.get(type(node).__name__)
        if build is None:
            raise self.unsupported(node)
        note = build(self, node)
        self.notes[node] = note
        return note.ty

    def const(self, node) -> object:
        note = self.notes.get(node)
        return NO_CONST if note is None else note.const

    def static_test(self, test) -> bool | None:
        c = self.const(test)
        return None if c is NO_CONST else bool(c)

    def assign(self, name: str, t: Ty) -> None:
        old = self.var_types.get(name)
        self.var_types[name] = t if old is None else result_type(old, t)

    def type_or_skip(self, node) -> Ty | None:
        """``type(node)``, or None when it reads a local not typed yet (in this round)."""
        try:
            return self.type(node)
        except UnknownLocal as u:
            if self.strict:
                raise self.err(u.node, f"local variable '{u.node.id}' is used before it is "
                                       "assigned", "unassigned variable") from None
            self.skipped = True
            return None


# -- statements -------------------------------------------------------------------------------


def type_block(cx: InferenceContext, stmts) -> None:
    for s in stmts:
        build = _STATEMENT_TYPERS.get(type(s).__name__)
        if build is None:
            raise cx.unsupported(s)
        build(cx, s)


def _bad_target(cx: InferenceContext, tgt) -> TranslationError:
    if isinstance(tgt, ast.Subscript):
        return cx.err(tgt, f"writing to '{ast.unparse(tgt.value)}' (item assignment) is not "
                           "supported: muscles return their result", "item assignment")
    if isinstance(tgt, ast.Attribute):
        return cx.err(tgt, "attribute assignment is not supported in a muscle",
                      "attribute assignment")
    return cx.unsupported(tgt)


def type_Assign(cx: InferenceContext, s: ast.Assign) -> None:
    for tgt in s.targets:
        if isinstance(tgt, (ast.Tuple, ast.List)):
            _unpack(cx, s, tgt, s.value)
        elif isinstance(tgt, ast.Name):
            t = cx.type_or_skip(s.value)
            if t is not None:
                cx.assign(tgt.id, t)
        else:
            raise _bad_target(cx, tgt)


def _unpack(cx: InferenceContext, s, tgt, value) -> None:
    for e in tgt.elts:
        if not isinstance(e, ast.Name):
            if isinstance(e, (ast.Tuple, ast.List, ast.Starred)):
                raise cx.unsupported(e, "nested or starred unpacking")
            raise _bad_target(cx, e)
    if isinstance(value, (ast.Tuple, ast.List)):
        if len(value.elts) != len(tgt.elts):
            raise cx.err(s, f"cannot unpack {len(value.elts)} values into {len(tgt.elts)} "
                            "names", "tuple assignment")
        tys = [cx.type_or_skip(v) for v in value.elts]
        for e, t in zip(tgt.elts, tys):
            if t is not None:
                cx.assign(e.id, t)
        return
    src = cx.scope.symbol(value) if isinstance(value, ast.Name) else None
    if isinstance(src, IndexParam):
        if len(tgt.elts) != 2:
            raise cx.err(s, f"index parameter '{src.name}' unpacks into 2 names",
                         "tuple assignment")
        for e in tgt.elts:
            cx.assign(e.id, Ty(INT64))
        return
    raise cx.err(s, "tuple assignment needs a tuple of values or an index parameter on the "
                    "right", "tuple assignment")


def type_AugAssign(cx: InferenceContext, s: ast.AugAssign) -> None:
    if not isinstance(s.target, ast.Name):
        raise _bad_target(cx, s.target)
    b = cx.synth.get(s)
    if b is None:
        b = ast.BinOp(left=ast.Name(id=s.target.id, ctx=ast.Load()), op=s.op, right=s.value)
        ast.copy_location(b, s)
        ast.copy_location(b.left, s.target)
        cx.synth[s] = b
    t = cx.type_or_skip(b)
    if t is not None:
        cx.assign(s.target.id, t)


def type_AnnAssign(cx: InferenceContext, s: ast.AnnAssign) -> None:
    if s.value is None:
        return
    if not isinstance(s.target, ast.Name):
        raise _bad_target(cx, s.target)
    t = cx.type_or_skip(s.value)
    if t is not None:
        cx.assign(s.target.id, t)


def type_Return(cx: InferenceContext, s: ast.Return) -> None:
    if s.value is None:
        raise cx.err(s, "a muscle must return a value ('return' without a value)", "return")
    if isinstance(s.value, ast.Tuple):
        raise cx.err(s, "returning several values (a tuple) is not supported", "tuple value")
    t = cx.type_or_skip(s.value)
    if t is not None:
        cx.returns.append((s, t))


def type_If(cx: InferenceContext, s: ast.If) -> None:
    cx.type_or_skip(s.test)
    taken = cx.static_test(s.test)
    if taken is not False:
        type_block(cx, s.body)
    if taken is not True:
        type_block(cx, s.orelse)


def type_While(cx: InferenceContext, s: ast.While) -> None:
    if s.orelse:
        raise cx.unsupported(s, "while-else")
    cx.type_or_skip(s.test)
    if cx.static_test(s.test) is not False:
        type_block(cx, s.body)


def type_For(cx: InferenceContext, s: ast.For) -> None:
    if s.orelse:
        raise cx.unsupported(s, "for-else")
    if not isinstance(s.target, ast.Name):
        raise cx.err(s.target, "a for loop needs one loop variable (for i in range(...))",
                     "for target")
    it = s.iter
    ok = isinstance(it, ast.Call) and isinstance(it.func, (ast.Name, ast.Attribute))
    ref = cx.scope.symbol(it.func) if ok else None
    if not (isinstance(ref, Builtin) and ref.name == "range"):
        raise cx.err(s.iter, "for loops may only iterate over range(...) in a muscle",
                     "for loop over non-range")
    if it.keywords or not 1 <= len(it.args) <= 3:
        raise cx.err(it, "range() takes 1 to 3 positional arguments", "range")
    for a in it.args:
        t = cx.type_or_skip(a)
        if t is not None and t.kind != "i":
            raise cx.err(a, f"range() needs integer arguments, not {t}", "range")
    if len(it.args) == 3 and cx.const(it.args[2]) == 0:
        raise cx.err(it, "range() step must not be zero", "range")
    cx.assign(s.target.id, WEAK_INT)
    type_block(cx, s.body)


def type_nothing(cx: InferenceContext, s) -> None:
    """break, continue, pass."""


def type_Expr(cx: InferenceContext, s: ast.Expr) -> None:
    if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
        return  # docstring / comment string
    cx.type_or_skip(s.value)


_STATEMENT_TYPERS = {
    "Assign": type_Assign, "AugAssign": type_AugAssign, "AnnAssign": type_AnnAssign,
    "Return": type_Return, "If": type_If, "While": type_While, "For": type_For,
    "Break": type_nothing, "Continue": type_nothing, "Pass": type_nothing, "Expr": type_Expr,
}


# -- the fixed point --------------------------------------------------------------------------


def infer(scope: Scope, kinds: tuple, muscle_of: Callable[[object], HelperMuscle]) -> TypedBody:
    """Type the body of ``scope.function`` for these parameter kinds."""
    cx = InferenceContext(scope, muscle_of)
    for name, i in scope.scalar_params.items():
        k = kinds[i]
        cx.var_types[name] = Ty(k.dtype, k.weak)
    cx.param_types = dict(cx.var_types)
    body = scope.function.body
    for _ in range(64):
        before = dict(cx.var_types)
        cx.skipped = False
        cx.returns = []
        type_block(cx, body)
        if cx.var_types == before:
            if not cx.skipped:
                break
            cx.strict = True
    else:  # pragma: no cover - the lattice is finite
        raise cx.err(None, "type inference did not converge", "types")
    if _falls_through(body, cx.static_test):
        raise cx.err(body[-1] if body else None,
                     "the function can reach its end without returning a value",
                     "missing return")
    if not cx.returns:
        raise cx.err(None, "the function never returns a value", "missing return")
    return TypedBody(scope=scope, kinds=kinds, notes=cx.notes, var_types=cx.var_types,
                     param_types=cx.param_types, synth=cx.synth,
                     ret_ty=result_type(*(t for _, t in cx.returns)))


def result_dtypes(ret_ty: Ty, out_override: np.dtype | None) -> tuple[np.dtype, np.dtype]:
    """(the dtype the function returns, the dtype its return values are computed in).

    A weak result is a Python value: it returns as float64/int64/bool unless ``out_dtype``
    asks for another float, in which case weak floats are computed in that float."""
    out = out_override
    if out is None:
        out = ret_ty.dtype if not ret_ty.weak else weak_default(ret_ty)
    if not ret_ty.weak:
        computed = ret_ty.dtype
    elif ret_ty.kind == "f" and out.kind == "f":
        computed = out
    else:
        computed = weak_default(ret_ty)
    return out, computed


def _falls_through(stmts, static_test) -> bool:
    """Whether control can reach the end of ``stmts`` (conservative, for 'missing return')."""
    for s in stmts:
        if isinstance(s, ast.Return):
            return False
        if isinstance(s, ast.If):
            taken = static_test(s.test)
            body = _falls_through(s.body, static_test)
            orelse = _falls_through(s.orelse, static_test)
            if (taken is True and not body) or (taken is False and not orelse) or (
                    not body and not orelse):
                return False
        if (isinstance(s, ast.While) and static_test(s.test) is True
                and not _has_break(s.body)):
            return False
    return True


def _has_break(stmts) -> bool:
    for s in stmts:
        if isinstance(s, ast.Break):
            return True
        if isinstance(s, ast.If) and (_has_break(s.body) or _has_break(s.orelse)):
            return True
    return False

