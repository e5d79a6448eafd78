"""Type inference for expressions (calls are in ``infer_calls.py``).

One stateless builder per AST node type, ``build_<Node>(cx, node) -> Typed``; ``cx`` is the
:class:`~.inference.InferenceContext` that holds all state, and ``cx.type(child)`` types a
child (and records its annotation). Types follow NumPy 2 (NEP 50): operations on NumPy values
take the ufunc loop NumPy picks (``resolve_ufunc``), operations on weak Python values stay weak
and are folded when every operand is a constant.
"""

from __future__ import annotations

import ast
import warnings
from typing import TYPE_CHECKING

import numpy as np

from .dtyping import (
    BINOPS,
    BOOL,
    CMPOPS,
    INT64,
    UNOPS,
    WEAK_INT,
    Ty,
    python_result_kind,
    resolve_ufunc,
    result_type,
    ty_of_value,
    weak,
)
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
    ShapeOf,
)
from .typed import (
    AccessorAttribute,
    AccessorRead,
    ArrayItem,
    BoolTail,
    Comparisons,
    IndexComponent,
    Loop,
    MixedSignCompare,
    Typed,
    WeakCompare,
)

if TYPE_CHECKING:
    from .inference import InferenceContext

CONSTRUCTS = {
    "Lambda": "lambda", "ListComp": "list comprehension", "SetComp": "set comprehension",
    "DictComp": "dict comprehension", "GeneratorExp": "generator expression", "Dict": "dict",
    "Set": "set", "List": "list", "Tuple": "tuple value", "JoinedStr": "f-string",
    "FormattedValue": "f-string", "Yield": "yield", "YieldFrom": "yield", "Await": "await",
    "Starred": "starred expression", "Slice": "slicing",
    "NamedExpr": "assignment expression (:=)", "MatMult": "@ operator",
    "FunctionDef": "nested function definition",
    "AsyncFunctionDef": "nested function definition", "ClassDef": "class definition",
    "Import": "import", "ImportFrom": "import", "Global": "global statement",
    "Nonlocal": "nonlocal statement", "With": "with statement", "AsyncWith": "with statement",
    "Try": "try statement", "TryStar": "try statement", "Raise": "raise statement",
    "Assert": "assert statement", "Delete": "del statement", "Match": "match statement",
    "AsyncFor": "async for", "Is": "'is' comparison", "IsNot": "'is not' comparison",
    "In": "'in' operator", "NotIn": "'not in' operator",
}


class UnknownLocal(Exception):
    """A local read before any assignment typed it (during the inference fixed point)."""

    def __init__(self, node: ast.Name):
        super().__init__(node.id)
        self.node = node


# -- names and attributes ---------------------------------------------------------------------


def build_Constant(cx: InferenceContext, node: ast.Constant) -> Typed:
    v = node.value
    t = ty_of_value(v) if not isinstance(v, np.generic) else None
    if t is None:
        what = {str: "string literal", bytes: "bytes literal", complex: "complex number",
                type(None): "None", type(...): "Ellipsis"}.get(type(v), "literal")
        raise cx.unsupported(node, what)
    return Typed(t, v)


def build_Name(cx: InferenceContext, node: ast.Name) -> Typed:
    n = node.id
    if n in cx.scope.locals:
        t = cx.var_types.get(n)
        if t is None:
            raise UnknownLocal(node)
        return Typed(t)
    return value_of_symbol(cx, cx.scope.symbol(node), node, n)


def value_of_symbol(cx: InferenceContext, s, node, label) -> Typed:
    if isinstance(s, ConstValue):
        return Typed(s.ty, s.value)
    what = {AccessorParam: "an accessor parameter (index it)",
            IndexParam: f"an index parameter (use {label}[0]/{label}[1] or unpack it)",
            ConstArray: "a captured array (index it)", MathFunction: "a function",
            Cast: "a type", HelperFunction: "a function", ModuleRef: "a module",
            Builtin: "a builtin function", ShapeOf: "a shape (index it)"}
    raise cx.err(node, f"'{label}' is {what.get(type(s), 'not a value')}, not a value",
                 "non-value")


def build_Attribute(cx: InferenceContext, node: ast.Attribute) -> Typed:
    base = cx.scope.symbol(node.value)
    label = f"{ast.unparse(node.value)}.{node.attr}"
    if isinstance(base, ModuleRef):
        return value_of_symbol(cx, cx.scope.symbol(node), node, label)
    if isinstance(base, AccessorParam):
        if node.attr == "ndim":
            return Typed(WEAK_INT, base.kind.ndim)
        key = {"size": "size"}.get(node.attr)
        if key is None or key not in base.kind.attrs:
            raise cx.err(node, f"attribute '{node.attr}' of parameter '{base.name}' is not "
                               "available (use len(), .size, .shape[k] or indexing)", "attribute")
        return Typed(WEAK_INT, meaning=AccessorAttribute(base, key))
    if isinstance(base, IndexParam):
        comp = {"row": 0, "y": 0, "col": 1, "x": 1}.get(node.attr)
        if comp is None:
            raise cx.err(node, f"index parameter '{base.name}' has no attribute '{node.attr}' "
                               "(use .row/.col, .y/.x or [0]/[1])", "attribute")
        return Typed(Ty(INT64), meaning=IndexComponent(base, comp))
    if isinstance(base, ConstArray):
        if node.attr == "size":
            return Typed(WEAK_INT, len(base.values))
        if node.attr == "ndim":
            return Typed(WEAK_INT, 1)
    if base is None and isinstance(node.value, (ast.Name, ast.Attribute)):
        cx.type(node.value)
        raise cx.err(node, f"attribute '{node.attr}' of a value is not supported in a muscle",
                     "attribute")
    raise cx.err(node, f"attribute '{label}' is not supported in a muscle", "attribute")


# -- subscripts -------------------------------------------------------------------------------


def _indices(cx: InferenceContext, node: ast.Subscript) -> list[ast.expr]:
    s = node.slice
    idx = list(s.elts) if isinstance(s, ast.Tuple) else [s]
    for i in idx:
        if isinstance(i, ast.Slice):
            raise cx.unsupported(i, "slicing")
    return idx


def _int_index(cx: InferenceContext, i) -> Ty:
    t = cx.type(i)
    if t.kind != "i":
        raise cx.err(i, f"an index must be an integer, not {t}", "index type")
    return t


def build_Subscript(cx: InferenceContext, node: ast.Subscript) -> Typed:
    idx = _indices(cx, node)
    base_node = node.value
    # p[i][j] on a 2-D accessor
    if isinstance(base_node, ast.Subscript):
        inner = cx.scope.symbol(base_node.value)
        if isinstance(inner, AccessorParam) and inner.kind.ndim == 2:
            first = _indices(cx, base_node)
            if len(first) == 1 and len(idx) == 1:
                for i in first + idx:
                    _int_index(cx, i)
                return Typed(Ty(inner.kind.dtype), meaning=AccessorRead(inner, first + idx))
    base = cx.scope.symbol(base_node)
    if isinstance(base, AccessorParam):
        if len(idx) != base.kind.ndim:
            raise cx.err(node, f"'{base.name}' is {base.kind.ndim}-D and needs "
                               f"{base.kind.ndim} index(es), got {len(idx)}", "indexing")
        for i in idx:
            _int_index(cx, i)
        return Typed(Ty(base.kind.dtype), meaning=AccessorRead(base, idx))
    if isinstance(base, IndexParam):
        if len(idx) != 1:
            raise cx.err(node, f"index parameter '{base.name}' takes one index (0 or 1)",
                         "indexing")
        cx.type(idx[0])
        c = cx.const(idx[0])
        if c not in (0, 1, -1, -2) or isinstance(c, bool):
            raise cx.err(node, f"index parameter '{base.name}' must be indexed with a "
                               "constant 0 (row) or 1 (column)", "indexing")
        return Typed(Ty(INT64), meaning=IndexComponent(base, int(c) % 2))
    if isinstance(base, ShapeOf):
        return _shape_item(cx, node, base, idx)
    if isinstance(base, ConstArray):
        if len(idx) != 1:
            raise cx.err(node, "a captured sequence takes one index", "indexing")
        _int_index(cx, idx[0])
        c = cx.const(idx[0])
        n = len(base.values)
        value = MISSING
        if c is not MISSING:
            c = int(c)
            if not -n <= c < n:
                raise cx.err(node, f"index {c} is out of range for a captured sequence of "
                                   f"length {n}", "indexing")
            value = base.values[c]
            if not base.elem.weak:
                value = base.elem.dtype.type(value)
        return Typed(base.elem, value, ArrayItem(base, idx[0]))
    if base is None or isinstance(base, ConstValue):
        t = cx.type(base_node)
        raise cx.err(node, f"cannot index a {t} value", "indexing")
    raise cx.err(node, f"cannot index '{ast.unparse(base_node)}'", "indexing")


def _shape_item(cx: InferenceContext, node, base: ShapeOf, idx) -> Typed:
    if len(idx) != 1:
        raise cx.err(node, "shape takes one index", "indexing")
    cx.type(idx[0])
    c = cx.const(idx[0])
    b = base.base
    nd = b.kind.ndim if isinstance(b, AccessorParam) else 1
    if not isinstance(c, (int, np.integer)) or not -nd <= int(c) < nd:
        raise cx.err(node, f"shape index must be a constant in range for a {nd}-D parameter",
                     "indexing")
    c = int(c) % nd
    if isinstance(b, ConstArray):
        return Typed(WEAK_INT, len(b.values))
    key = f"shape{c}"
    if key not in b.kind.attrs:
        raise cx.err(node, f"'{b.name}.shape[{c}]' is not available for this parameter",
                     "attribute")
    return Typed(WEAK_INT, meaning=AccessorAttribute(b, key))


# -- operators --------------------------------------------------------------------------------


def build_BinOp(cx: InferenceContext, node: ast.BinOp) -> Typed:
    op = type(node.op).__name__
    if op not in BINOPS:
        raise cx.unsupported(node, CONSTRUCTS.get(op, f"operator {op}"))
    a = cx.type(node.left)
    b = cx.type(node.right)
    return binop_type(cx, node, op, a, b, node.left, node.right)


def binop_type(cx: InferenceContext, node, op: str, a: Ty, b: Ty, left, right) -> Typed:
    """The type (and folded value) of ``left op right``, Python's rules for two weak values
    and NumPy's ufunc loop otherwise."""
    pyop, uf, sym = BINOPS[op]
    ca, cb = cx.const(left), cx.const(right)
    if a.weak and b.weak:
        try:
            kind = python_result_kind(pyop, (a.kind, b.kind))
        except TypeError:
            raise cx.err(node, f"operator '{sym}' is not supported for {a} and {b}",
                         f"operator {sym}") from None
        if op == "Pow" and kind == "i" and cb is not MISSING and cb < 0:
            kind = "f"
        t = weak(kind)
        if ca is not MISSING and cb is not MISSING and not (op == "Pow" and abs(cb) > 4096):
            try:
                v = pyop(ca, cb)
            except ZeroDivisionError:
                raise cx.err(node, "division by zero in a constant expression",
                             "constant expression") from None
            except (OverflowError, ValueError) as e:
                raise cx.err(node, f"constant expression fails: {e}",
                             "constant expression") from None
            return Typed(ty_of_value(v) or t, v)
        return Typed(t)
    try:
        ins, out = resolve_ufunc(uf, (a, b))
    except TypeError:
        raise cx.err(node, f"operator '{sym}' is not supported for {a} and {b}",
                     f"operator {sym}") from None
    if op == "Pow" and ins[1].kind in "iu" and cb is not MISSING and int(cb) < 0:
        raise cx.err(node, "integers to negative integer powers are not allowed (as in NumPy)",
                     "operator **")
    value = MISSING
    if ca is not MISSING and cb is not MISSING and not (a.weak or b.weak):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                v = uf(ca, cb)
                if isinstance(v, np.generic) and v.dtype == out:
                    value = v
            except Exception:  # pragma: no cover - folding is optional
                pass
    return Typed(Ty(out), value, Loop(ins))


def build_UnaryOp(cx: InferenceContext, node: ast.UnaryOp) -> Typed:
    a = cx.type(node.operand)
    op = type(node.op).__name__
    c = cx.const(node.operand)
    if op == "Not":
        value = MISSING if c is MISSING else (not c if a.weak else np.bool_(not c))
        return Typed(Ty(BOOL, a.weak), value)
    pyop, uf, sym = UNOPS[op]
    if a.weak:
        try:
            kind = python_result_kind(pyop, (a.kind,))
        except TypeError:
            raise cx.err(node, f"operator '{sym}' is not supported for {a}",
                         f"operator {sym}") from None
        value = MISSING
        if c is not MISSING:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = pyop(c)
        return Typed(weak(kind), value)
    try:
        ins, out = resolve_ufunc(uf, (a,))
    except TypeError:
        raise cx.err(node, f"operator '{sym}' is not supported for {a}",
                     f"operator {sym}") from None
    value = MISSING
    if c is not MISSING:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            v = uf(c)
        if isinstance(v, np.generic) and v.dtype == out:
            value = v
    return Typed(Ty(out), value, Loop(ins))


def build_BoolOp(cx: InferenceContext, node: ast.BoolOp) -> Typed:
    """``and``/``or`` as Python has them: the value of the operand that decides (``x or 5``
    is ``x`` when ``x`` is true, else 5), not a bool. Operands that are all bools give a
    bool; otherwise the operands are promoted to one type, as the branches of ``a if c else
    b`` are (numba's rule too). Constants in front are Python's: one that decides is the
    value, with its own type (``5 or 0.0`` is the int 5, ``False and x`` is False; the
    operands after it are never evaluated, so neither typed nor errors), and those that do
    not decide drop out (``0.0 or x`` is ``x``, of ``x``'s type)."""
    decides = isinstance(node.op, ast.Or)
    start = 0
    for v in node.values[:-1]:
        t = cx.type(v)
        c = cx.const(v)
        if c is MISSING:
            break
        if bool(c) == decides:
            return Typed(t, c)
        start += 1
    rest = node.values[start:]
    if len(rest) == 1:
        t = cx.type(rest[0])
        return Typed(t, cx.const(rest[0]), BoolTail(start))
    tys = [cx.type(v) for v in rest]
    t = result_type(*tys)
    if t.kind == "b":
        t = Ty(BOOL, all(u.weak for u in tys))
    return Typed(t, MISSING, BoolTail(start) if start else None)


def build_Compare(cx: InferenceContext, node: ast.Compare) -> Typed:
    operands = [node.left] + list(node.comparators)
    tys = [cx.type(o) for o in operands]
    modes = []
    for i, op in enumerate(node.ops):
        name = type(op).__name__
        if name not in CMPOPS:
            raise cx.unsupported(node, CONSTRUCTS.get(name, name))
        a, b = tys[i], tys[i + 1]
        sym = CMPOPS[name][2]
        if a.weak and b.weak:
            modes.append(WeakCompare(max(a.kind, b.kind, key="bif".index)))
            continue
        if a.weak and a.kind == "i" and b.dtype.kind in "iu" or (
                b.weak and b.kind == "i" and a.dtype.kind in "iu"):
            s = b if a.weak else a
            if s.dtype == np.uint64:
                modes.append(MixedSignCompare(not a.weak))  # unsigned on the left?
            else:
                modes.append(Loop((INT64, INT64)))
            continue
        try:
            ins, _ = resolve_ufunc(CMPOPS[name][1], (a, b))
        except TypeError:
            raise cx.err(node, f"comparison '{sym}' is not supported for {a} and {b}",
                         f"operator {sym}") from None
        if {ins[0], ins[1]} == {np.dtype(np.uint64), INT64}:
            modes.append(MixedSignCompare(ins[0] == np.uint64))
        else:
            modes.append(Loop(ins))
    consts = [cx.const(o) for o in operands]
    value = MISSING
    if all(c is not MISSING for c in consts):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            v = all(CMPOPS[type(op).__name__][0](consts[i], consts[i + 1])
                    for i, op in enumerate(node.ops))
        value = v if all(t.weak for t in tys) else np.bool_(v)
    return Typed(Ty(BOOL, all(t.weak for t in tys)), value, Comparisons(tuple(modes)))


def build_IfExp(cx: InferenceContext, node: ast.IfExp) -> Typed:
    cx.type(node.test)
    taken = cx.static_test(node.test)
    if taken is not None:
        # Python never evaluates the other branch, so it neither types nor errors
        return Typed(cx.type(node.body if taken else node.orelse))
    a = cx.type(node.body)
    b = cx.type(node.orelse)
    return Typed(result_type(a, b))


EXPRESSION_TYPERS = {
    "Constant": build_Constant, "Name": build_Name, "Attribute": build_Attribute,
    "Subscript": build_Subscript, "BinOp": build_BinOp, "UnaryOp": build_UnaryOp,
    "BoolOp": build_BoolOp, "Compare": build_Compare, "IfExp": build_IfExp,
}
