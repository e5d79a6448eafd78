"""Type inference for calls: math/NumPy/builtin functions, casts, ``len`` and helpers.

Functions are known by identity (``funcs.py``). A ufunc called by name (``np.add``) types like
its operator; ``math.*`` on Python values stays Python (weak); NumPy functions follow their
ufunc's loop. A call of a plain Python function is typed by inferring that function for the
argument kinds (the callee is a muscle of its own, translated as a helper).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TranslationError
from . import funcs as F
from .dtyping import (
    FLOAT64,
    INT64,
    WEAK_FLOAT,
    WEAK_INT,
    Ty,
    convert_constant,
    fits,
    python_result_kind,
    resolve_ufunc,
    result_type,
    weak,
    weak_default,
)
from .infer_exprs import binop_type
from .params import IndexPoint, Scalar
from .source import MISSING
from .symbols import (
    AccessorParam,
    Builtin,
    Cast,
    ConstArray,
    ConstValue,
    HelperFunction,
    IndexParam,
    MathFunction,
    ModuleRef,
)
from .typed import (
    AccessorAttribute,
    CastCall,
    FunctionCall,
    HelperCall,
    Loop,
    RecursiveMuscle,
    RoundToInt,
    SameType,
    Typed,
    WeakMath,
)

if TYPE_CHECKING:
    from .inference import InferenceContext

# arithmetic ufuncs called by name behave like the operators
_OPERATOR_UFUNCS = {
    "add": "Add", "subtract": "Sub", "multiply": "Mult", "true_divide": "Div",
    "floor_divide": "FloorDiv", "remainder": "Mod", "power": "Pow", "bitwise_and": "BitAnd",
    "bitwise_or": "BitOr", "bitwise_xor": "BitXor",
}


def build_Call(cx: InferenceContext, node: ast.Call) -> Typed:
    for k in node.keywords:
        raise cx.err(k.value if k.arg is None else node,
                     f"keyword argument '{k.arg}' is not supported in a muscle call",
                     "keyword argument")
    for a in node.args:
        if isinstance(a, ast.Starred):
            raise cx.unsupported(a)
    if isinstance(node.func, ast.Attribute):
        base = cx.scope.symbol(node.func.value)
        if not isinstance(base, ModuleRef):
            raise cx.err(node, f"method call '.{node.func.attr}()' is not supported in a muscle "
                               "(only functions of math/numpy)", "method call")
    ref = cx.scope.symbol(node.func)
    label = ast.unparse(node.func)
    if isinstance(ref, MathFunction):
        return _function(cx, node, ref.spec, label)
    if isinstance(ref, Cast):
        return _cast(cx, node, ref, label)
    if isinstance(ref, Builtin):
        if ref.name == "len":
            return _len(cx, node)
        raise cx.err(node, "range() may only be used in a for loop", "range")
    if isinstance(ref, HelperFunction):
        return _helper(cx, node, ref.fn, label)
    if ref is None:
        if not isinstance(node.func, (ast.Name, ast.Attribute)):
            cx.type(node.func)  # reports the construct (a lambda, a subscript...)
        raise cx.err(node, f"cannot call '{label}' (not a function)", "call")
    raise cx.err(node, f"'{label}' cannot be called in a muscle", "call")


def _len(cx: InferenceContext, node: ast.Call) -> Typed:
    if len(node.args) != 1:
        raise cx.err(node, "len() takes one argument", "len")
    arg = node.args[0]
    s = cx.scope.symbol(arg) if isinstance(arg, (ast.Name, ast.Attribute)) else None
    if isinstance(s, ConstArray):
        return Typed(WEAK_INT, len(s.values))
    if isinstance(s, AccessorParam):
        if "len" not in s.kind.attrs:
            raise cx.err(node, f"len() is not available for parameter '{s.name}'", "len")
        return Typed(WEAK_INT, meaning=AccessorAttribute(s, "len"))
    raise cx.err(node, "len() needs an accessor parameter or a captured sequence", "len")


def _cast(cx: InferenceContext, node: ast.Call, ref: Cast, label: str) -> Typed:
    if len(node.args) != 1:
        raise cx.err(node, f"{label}() takes one argument in a muscle", "cast")
    arg = node.args[0]
    meaning = CastCall(ref)
    if (ref.kind == "f" and isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            and arg.value.strip().lower() in ("nan", "inf", "-inf", "+inf", "infinity",
                                              "-infinity")):
        return Typed(WEAK_FLOAT, float(arg.value), meaning)
    cx.type(arg)
    c = cx.const(arg)
    if ref.dtype is not None:
        value = MISSING
        if c is not MISSING:
            if type(c) is int and ref.dtype.kind in "iu" and not fits(c, ref.dtype):
                raise cx.err(node, f"Python integer {c} out of bounds for {ref.dtype} (as in "
                                   "NumPy)", "integer overflow")
            value = convert_constant(c, ref.dtype)
        return Typed(Ty(ref.dtype), value, meaning)
    value = MISSING
    if c is not MISSING:
        try:
            value = {"i": int, "f": float, "b": bool}[ref.kind](c)
        except (ValueError, OverflowError) as e:
            raise cx.err(node, f"{label}() of a constant fails: {e}", "cast") from None
    return Typed(weak(ref.kind), value, meaning)


def _function(cx: InferenceContext, node: ast.Call, spec: F.FuncSpec, label: str) -> Typed:
    args = node.args
    if len(args) not in spec.nargs:
        want = " or ".join(str(n) for n in spec.nargs[:3])
        if len(spec.nargs) > 3:
            want = f"{spec.nargs[0]} or more"
        raise cx.err(node, f"{label}() takes {want} argument(s) in a muscle, got {len(args)}",
                     label)
    tys = [cx.type(a) for a in args]
    canon = spec.canonical
    if canon == "around":
        # np.round: an integer is its own rounding, in its own dtype (np.round(int8) is an
        # int8; np.rint(int8) a float16); floats and bools are np.rint's
        spec, canon = F.RINT, "rint"
        if tys[0].kind == "i":
            dt = INT64 if tys[0].weak else tys[0].dtype
            return Typed(Ty(dt), meaning=FunctionCall(spec, Loop((dt,))))
    bad = f"{label}() is not supported for " + ", ".join(str(t) for t in tys)
    if canon in _OPERATOR_UFUNCS:
        op = _OPERATOR_UFUNCS[canon]
        typed = binop_type(cx, node, op, tys[0], tys[1], args[0], args[1])
        t, rule = typed.ty, typed.meaning
        if spec.family == "numpy" and t.weak:
            t = Ty(weak_default(t))
            rule = Loop((t.dtype, t.dtype))
        return Typed(t, meaning=FunctionCall(spec, rule, op))
    if canon == "negative":
        if tys[0].weak:
            t = Ty(weak_default(tys[0]))
            if t.kind == "b":
                raise cx.err(node, bad, label)
            return Typed(t, meaning=FunctionCall(spec, Loop((t.dtype,))))
        try:
            ins, out = resolve_ufunc(np.negative, (tys[0],))
        except TypeError:
            raise cx.err(node, bad, label) from None
        return Typed(Ty(out), meaning=FunctionCall(spec, Loop(ins)))
    if canon in ("pymin", "pymax"):
        t = result_type(*tys)
        value = _builtin_constant(cx, args, t, min if canon == "pymin" else max)
        return Typed(t, value, meaning=FunctionCall(spec, SameType(t)))
    if canon == "round":
        return Typed(WEAK_INT, _builtin_constant(cx, args, WEAK_INT, round),
                     meaning=FunctionCall(spec, RoundToInt(tys[0])))
    if canon in ("where", "clip"):
        t = result_type(*(tys[1:] if canon == "where" else tys))
        t = Ty(weak_default(t)) if t.weak else t
        return Typed(t, meaning=FunctionCall(spec, SameType(t)))
    if all(t.weak for t in tys) and spec.family in ("math", "builtin"):
        kinds = tuple(t.kind for t in tys)
        if canon in ("floor", "ceil", "trunc"):
            rk = "i"
        elif canon in F.PREDICATES:
            rk = "b"
        elif canon == "abs":
            rk = "i" if kinds[0] == "b" else kinds[0]
        elif canon == "power":
            rk = python_result_kind(pow, kinds)
            cb = cx.const(args[1])
            if rk == "i" and cb is not MISSING and cb < 0:
                rk = "f"
        else:
            rk = "f"
        return Typed(weak(rk), meaning=FunctionCall(spec, WeakMath(rk)))
    if spec.ufunc is None:
        # math functions without a NumPy ufunc (erf, gamma...): float32 stays float32
        t = result_type(*tys)
        dt = t.dtype if (not t.weak and t.dtype == np.float32) else FLOAT64
        return Typed(Ty(dt), meaning=FunctionCall(spec, Loop((dt,) * len(tys))))
    if canon == "log" and len(tys) == 2:
        t = result_type(*tys)
        try:
            ins, out = resolve_ufunc(np.log, (t,))
        except TypeError:
            raise cx.err(node, bad, label) from None
        return Typed(Ty(out), meaning=FunctionCall(spec, Loop((ins[0], ins[0]))))
    try:
        ins, out = resolve_ufunc(spec.ufunc, tuple(tys))
    except TypeError:
        raise cx.err(node, bad, label) from None
    if canon in ("mpow", "fmod") and spec.family == "math" and out.kind != "f":
        ins, out = (FLOAT64,) * len(ins), FLOAT64
    elif (spec.family == "math" and canon not in F.ROUNDING and out.kind == "f"
          and all(t.kind in "bi" for t in tys)):
        # math.* of integers is a Python float (float64), as numba's math functions are;
        # NumPy's sqrt(int8) would be float16 (float32 here)
        ins, out = (FLOAT64,) * len(ins), FLOAT64
    return Typed(Ty(out), meaning=FunctionCall(spec, Loop(ins)))


def _builtin_constant(cx: InferenceContext, args, t, fn):
    """``min``/``max``/``round`` of constants, folded as Python computes them, so that the
    value meets its context as a constant does (``x_u32 + min(-1, 5)`` is out of bounds for
    uint32, as in NumPy, rather than -1 wrapped); MISSING when an argument is not constant."""
    consts = [cx.const(a) for a in args]
    if any(c is MISSING for c in consts):
        return MISSING
    try:
        with np.errstate(all="ignore"):
            v = fn(*consts)
        return {"b": bool, "i": int, "f": float}[t.kind](v) if t.weak else t.dtype.type(v)
    except (ValueError, OverflowError, TypeError):
        return MISSING


def _helper(cx: InferenceContext, node: ast.Call, fn, label: str) -> Typed:
    try:
        m = cx.muscle_of(fn)
    except TranslationError as e:
        raise cx.err(node, f"cannot translate called function '{label}': {e}", "call") from None
    kinds = []
    for a in node.args:
        s = cx.scope.symbol(a) if isinstance(a, (ast.Name, ast.Attribute)) else None
        if isinstance(s, AccessorParam):
            kinds.append(s.kind)
            cx.notes[a] = Typed(Ty(s.kind.dtype))
        elif isinstance(s, IndexParam):
            kinds.append(IndexPoint())
            cx.notes[a] = Typed(Ty(INT64))
        elif s is not None and not isinstance(s, ConstValue):
            raise cx.err(a, f"cannot pass '{ast.unparse(a)}' to '{label}'", "call argument")
        else:
            t = cx.type(a)
            kinds.append(Scalar(t.dtype, weak=t.weak))
    if len(kinds) != m.n_params:
        raise cx.err(node, f"'{label}' takes {m.n_params} argument(s), got {len(kinds)}", "call")
    try:
        t = m.result_type(tuple(kinds))
    except RecursiveMuscle:
        raise cx.err(node, f"recursive call to '{label}' is not supported in a muscle",
                     "recursion") from None
    return Typed(t, meaning=HelperCall(m, tuple(kinds)))
