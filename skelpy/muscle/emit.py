"""C emission: the statements of a typed body as C, in one pass.

Every expression is emitted in the context :mod:`.weak` decided for it and carries its C dtype
(``emit_expr`` returns ``(code, dtype)``, as warp's codegen does); operands are converted with
explicit casts, so C's integer promotion never leaks (int8 wraps as in NumPy) and no
``double`` appears unless a float64 value really exists. Locals are declared at the top of the
function (``assemble.py``), so statements only assign. ``for`` loops become C ``for`` loops over
``long``; the loops with a constant trip count are recorded (:class:`LoopRecord`) so that a
skeleton can ask for them to be unrolled.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np

from ..dtypes import c_type, storage_c_type
from .c_ops import CCode
from .checks import ALL, OFFSETS, Site, check_call, register
from .dtyping import BOOL, CMPOPS, FLOAT64, INT64, c_literal
from .params import IndexPoint, Scalar, scalar_arguments
from .source import MISSING
from .typed import (
    NO_CONST,
    AccessorAttribute,
    AccessorRead,
    ArrayItem,
    CastCall,
    FunctionCall,
    HelperCall,
    IndexComponent,
    MixedSignCompare,
    RoundToInt,
    SameType,
    TypedBody,
    WeakMath,
)
from .weak import TRUTH, Operand, WeakTypes, operands


@dataclass(frozen=True)
class LoopRecord:
    """A ``for`` loop with a constant trip count: the index of its header among the body's
    lines, and the nearest enclosing such loop (an index into the records), if any."""

    line: int
    trips: int
    parent: int | None


class EmitContext:
    """All the state of emitting one body; the emitters are stateless functions."""

    def __init__(self, body: TypedBody, weak: WeakTypes, names: dict[str, str], c_name: str,
                 out_dtype: np.dtype, checks: str | None = None):
        self.body = body
        self.checks = checks                    # the level of checked reads (checks.py)
        self.checked = False                    # a read is checked: takes the check buffer
        self.weak = weak
        self.names = names                      # Python name -> C name
        self.c_name = c_name
        self.out_dtype = out_dtype
        self.code = CCode()                     # C helpers, features, fp64
        self.lines: list[str] = []
        self.ntmp = 0
        self.used_arrays: dict = {}             # key -> ConstArray read somewhere
        self.helpers: dict = {}                 # C name -> TypedMuscle of a called function
        self.loops: list[LoopRecord] = []
        self.open_loops: list[int] = []         # the constant loops around this point

    def line(self, ind: int, text: str) -> None:
        self.lines.append("    " * ind + text)

    def tmp(self, what: str) -> str:
        self.ntmp += 1
        return f"_sk_{what}{self.ntmp}"

    def array_name(self, array) -> str:
        return f"{self.c_name}_k_{array.key}"


def emit_body(body: TypedBody, weak: WeakTypes, names: dict[str, str], c_name: str,
              out_dtype: np.dtype, checks: str | None = None) -> EmitContext:
    """Emit the statements of ``body``; the context holds the lines and what they need.
    ``checks``: which reads go through ``skp_check`` (see checks.py)."""
    cx = EmitContext(body, weak, names, c_name, out_dtype, checks)
    emit_block(cx, body.function.body, 1)
    return cx


# -- expressions ------------------------------------------------------------------------------


def emit_expr(cx: EmitContext, node, mat) -> tuple[str, np.dtype]:
    """``node`` computed in context ``mat``: its C code and the dtype that code has."""
    note = cx.body.notes[node]
    if note.const is not NO_CONST:
        dt = cx.weak.literal_dtype(node, note.const, note.ty, mat)
        code = c_literal(note.const, dt)
    else:
        code, dt = _EMITTERS[type(node).__name__](cx, node, note, mat)
    cx.code.note(dt)
    return code, dt


def emit_operand(cx: EmitContext, o: Operand) -> str:
    """An operand, converted to its target dtype (or tested for truth)."""
    code, dt = emit_expr(cx, o.node, o.context)
    if o.target is TRUTH:
        return code if dt == BOOL else f"({code} != 0)"
    return cx.code.cast(code, dt, o.target)


def _attribute(cx: EmitContext, meaning) -> tuple[str, np.dtype]:
    if isinstance(meaning, AccessorAttribute):
        acc = meaning.param
        code = acc.kind.fill(acc.kind.attrs[meaning.key], cx.names[acc.name])
        return f"((long)({code}))", INT64
    if isinstance(meaning, IndexComponent):
        parts = scalar_arguments(IndexPoint(), cx.names[meaning.param.name])
        return parts[meaning.component], INT64
    raise AssertionError(meaning)  # pragma: no cover


def _name(cx: EmitContext, node, note, mat):
    return cx.names[node.id], cx.weak.storage(node.id)


def _attribute_node(cx: EmitContext, node, note, mat):
    return _attribute(cx, note.meaning)


def _subscript(cx: EmitContext, node, note, mat):
    meaning = note.meaning
    if isinstance(meaning, ArrayItem):
        arr = meaning.array
        dt = cx.weak.array_dtype(arr)
        cx.used_arrays[arr.key] = arr
        i = emit_operand(cx, operands(cx.weak, node, mat).items[0])
        n = len(arr.values)
        if cx.checks == ALL and cx.body.const(meaning.index) is NO_CONST:
            site = Site(cx.body.function.where(node), ast.unparse(node), "index",
                        f"the captured sequence '{ast.unparse(node.value)}' of {n} elements")
            i = _checked(cx, i, f"{-n}L", f"{n}L", site)
        cx.code.clib.widx()
        code = f"{cx.array_name(arr)}[skelpy_widx({i}, {n}L)]"
        if dt == BOOL:
            code = f"((bool){code})"
        return code, dt
    if isinstance(meaning, AccessorRead):
        return _accessor_read(cx, node, meaning, mat)
    return _attribute(cx, meaning)


_INDEX_NAMES = {1: ("index",), 2: ("row index", "column index")}
_OFFSET_NAMES = {1: ("offset",), 2: ("row offset", "column offset")}


def _accessor_read(cx: EmitContext, node, meaning: AccessorRead, mat):
    """``p[i]``/``p[i, j]`` through the accessor's read template. Indices into arrays and
    rows count from the end when they are negative constants (as in Python); with checks,
    an index that may be out of range goes through ``skp_check`` (see checks.py), and a read
    of an array that may be empty reads 0 instead (``skp_check`` has no index to give it)."""
    param = meaning.param
    k = param.kind
    name = cx.names[param.name]
    fmt = {"name": name, "ctype": c_type(k.dtype), "stype": storage_c_type(k.dtype)}
    bounds = k.index_bounds(name)
    wanted = cx.checks == ALL or (cx.checks == OFFSETS and k.offsets)
    labels = (_OFFSET_NAMES if k.offsets else _INDEX_NAMES).get(k.ndim, ())
    checked = []
    for j, o in enumerate(operands(cx.weak, node, mat).items):
        code = emit_operand(cx, o)
        value = cx.body.const(o.node)
        constant = value is not NO_CONST
        if bounds is not None and constant and not k.offsets and int(value) < 0:
            code = f"({bounds[j][1]}) + ({code})"          # Python's "from the end"
        if wanted and bounds is not None and not (constant and k.offsets):
            what = (f"the neighbourhood '{param.name}'" if k.offsets
                    else f"'{param.name}'")
            site = Site(cx.body.function.where(node), ast.unparse(node),
                        labels[j] if j < len(labels) else f"index {j}", what, k.offsets)
            code = _checked(cx, code, bounds[j][0], bounds[j][1], site)
            checked.append(code)
        fmt[f"i{j}"] = f"({code})"
    cx.code.features.op("reads")
    read = k.read.format(**fmt)
    if checked and not k.offsets:
        # an empty array has no index to read instead: its checks fail, and 0 is read
        nonempty = " && ".join(f"({hi}) > ({lo})" for lo, hi in bounds)
        read = f"(({nonempty}) ? {read} : ({', '.join(checked)}, ({c_type(k.dtype)})0))"
    return read, k.dtype


def _checked(cx: EmitContext, code: str, lo: str, hi: str, site: Site) -> str:
    cx.checked = True
    cx.code.clib.check()
    return check_call(code, lo, hi, register(site))


def _binop_code(cx: EmitContext, node, op: str, right, t, mat):
    ops = operands(cx.weak, node, mat)
    a, b = (emit_operand(cx, o) for o in ops.items)
    d = ops.dtype
    exponent = cx.body.const(right)
    if t.weak:
        return cx.code.arith(op, a, b, d, d, exponent, wrap=False), d
    return cx.code.arith(op, a, b, d, t.dtype, exponent, wrap=True), t.dtype


def _binop(cx: EmitContext, node, note, mat):
    return _binop_code(cx, node, type(node.op).__name__, node.right, note.ty, mat)


def _unaryop(cx: EmitContext, node, note, mat):
    op = type(node.op).__name__
    t = note.ty
    ops = operands(cx.weak, node, mat)
    (o,), d = ops.items, ops.dtype
    if op == "Not":
        cx.code.features.op("ops_logic", "b")
        return f"(!{emit_operand(cx, o)})", BOOL
    a = emit_operand(cx, o)
    out = t.dtype if not t.weak else d
    return cx.code.unary(op, a, d, out, wrap=not t.weak), out


def _boolop(cx: EmitContext, node, note, mat):
    ops = operands(cx.weak, node, mat)
    if len(ops.items) == 1:                   # ``True and x``: x (see build_BoolOp)
        (only,) = ops.items
        return emit_expr(cx, only.node, only.context)
    cx.code.features.op("ops_logic", "b", n=len(ops.items) - 1)
    if ops.dtype == BOOL:
        sym = " && " if isinstance(node.op, ast.And) else " || "
        return "(" + sym.join(emit_operand(cx, o) for o in ops.items) + ")", BOOL
    # Python's value: ``a and b`` is ``a ? b : a``, ``a or b`` is ``a ? a : b``; the
    # deciding operand is emitted twice (muscle expressions have no side effects) and the
    # others are evaluated only when Python evaluates them.
    codes = [emit_operand(cx, o) for o in ops.items]
    code = codes[-1]
    for c in reversed(codes[:-1]):
        test = f"({c} != 0)"
        code = f"({test} ? {code} : {c})" if isinstance(node.op, ast.And) else \
            f"({test} ? {c} : {code})"
    return code, ops.dtype


def _compare(cx: EmitContext, node, note, mat):
    items = operands(cx.weak, node, mat).items
    feat = cx.code.features
    parts = []
    for i, op in enumerate(node.ops):
        sym = CMPOPS[type(op).__name__][2]
        mode = note.meaning.modes[i]
        oa, ob = items[2 * i], items[2 * i + 1]
        ca, cb = emit_operand(cx, oa), emit_operand(cx, ob)
        if isinstance(mode, MixedSignCompare):
            parts.append(f"{cx.code.clib.cmp_mixed(sym, mode.unsigned_left)}({ca}, {cb})")
            feat.op("ops_cmp", "i")
            continue
        d = oa.target
        feat.op("ops_cmp", "f" if d.kind == "f" else "i", d == FLOAT64)
        parts.append(f"({ca} {sym} {cb})")
    if len(parts) == 1:
        return parts[0], BOOL
    feat.op("ops_logic", "b", n=len(parts) - 1)
    return "(" + " && ".join(parts) + ")", BOOL


def _ifexp(cx: EmitContext, node, note, mat):
    ops = operands(cx.weak, node, mat)
    if cx.body.static_test(node.test) is not None:
        (taken,) = ops.items
        return emit_expr(cx, taken.node, taken.context)
    a, b = emit_operand(cx, ops.items[0]), emit_operand(cx, ops.items[1])
    cx.code.features.op("branches")
    return f"({emit_operand(cx, ops.items[2])} ? {a} : {b})", ops.dtype


def _call(cx: EmitContext, node, note, mat):
    meaning = note.meaning
    if isinstance(meaning, FunctionCall):
        return _function(cx, node, note, meaning, mat)
    if isinstance(meaning, CastCall):
        return _cast(cx, node, meaning, mat)
    if isinstance(meaning, HelperCall):
        return _helper(cx, node, meaning, mat)
    return _attribute(cx, meaning)  # len()


def _cast(cx: EmitContext, node, call: CastCall, mat):
    ops = operands(cx.weak, node, mat)
    (o,) = ops.items
    if call.cast.dtype is not None:
        d = call.cast.dtype
        code, dt = emit_expr(cx, o.node, o.context)
        if d == BOOL and dt != BOOL:
            return f"({code} != 0)", BOOL
        return cx.code.cast(code, dt, d), d
    return emit_operand(cx, o), ops.dtype


def _function(cx: EmitContext, node, note, call: FunctionCall, mat):
    t = note.ty
    canon = call.spec.canonical
    code, feat = cx.code, cx.code.features
    if call.operator is not None:
        return _binop_code(cx, node, call.operator, node.args[1], t, mat)
    ops = operands(cx.weak, node, mat)
    items, d, rule = ops.items, ops.dtype, call.rule
    if canon == "negative":
        return code.unary("USub", emit_operand(cx, items[0]), d, t.dtype), t.dtype
    if isinstance(rule, SameType):
        if canon == "where":
            c = emit_operand(cx, items[0])
            a, b = emit_operand(cx, items[1]), emit_operand(cx, items[2])
            feat.op("branches")
            return f"({c} ? {a} : {b})", d
        codes = [emit_operand(cx, o) for o in items]
        fk = "f" if d.kind == "f" else "i"
        if canon == "clip":
            feat.op("ops_cmp", fk, d == FLOAT64, 2)
            return f"{code.clib.clip(d)}({codes[0]}, {codes[1]}, {codes[2]})", d
        fn = code.clib.minmax(d, canon)
        out = codes[0]
        for c in codes[1:]:
            feat.op("ops_cmp", fk, d == FLOAT64)
            out = f"{fn}({out}, {c})"
        if not t.weak and t.dtype != d:        # builtin min/max of mixed integers
            return code.cast(out, d, t.dtype), t.dtype
        return out, d
    if isinstance(rule, RoundToInt):
        if rule.arg.kind == "f":
            feat.op("ops_math", "f", d == FLOAT64)
            return f"((long)rint({emit_operand(cx, items[0])}))", INT64
        return emit_operand(cx, items[0]), INT64
    if isinstance(rule, WeakMath):
        if canon == "abs" and rule.kind == "i":
            return code.function("abs", [emit_operand(cx, items[0])], INT64, INT64), INT64
        codes = [emit_operand(cx, o) for o in items]
        if rule.kind == "i":  # floor/ceil/trunc of a Python float -> Python int
            return f"((long){code.function(canon, codes, d, d)})", INT64
        if rule.kind == "b":
            return code.function(canon, codes, d, BOOL), BOOL
        return code.function(canon, codes, d, d), d
    codes = [emit_operand(cx, o) for o in items]
    return code.function(canon, codes, d, t.dtype), t.dtype


def _helper(cx: EmitContext, node, call: HelperCall, mat):
    ops = operands(cx.weak, node, mat)
    use = ops.helper
    tm = use.typed
    scalars = iter(ops.items)
    args = []
    for a, k in zip(node.args, call.kinds):
        if isinstance(k, Scalar):
            args.append(emit_operand(cx, next(scalars)))
        else:
            args.extend(scalar_arguments(k, cx.names[a.id]))
    cx.helpers[use.c_name] = tm
    if tm.checked:
        cx.checked = True                       # its redirect macro passes skp_dbg on
    cx.code.features.add(tm.features)
    if tm.uses_fp64:
        cx.code.fp64 = True
    return f"{use.c_name}({', '.join(args)})", tm.out_dtype


_EMITTERS = {
    "Name": _name, "Attribute": _attribute_node, "Subscript": _subscript, "BinOp": _binop,
    "UnaryOp": _unaryop, "BoolOp": _boolop, "Compare": _compare, "IfExp": _ifexp,
    "Call": _call,
}


# -- statements -------------------------------------------------------------------------------


def emit_block(cx: EmitContext, stmts, ind: int) -> None:
    for s in stmts:
        _STATEMENTS[type(s).__name__](cx, s, ind)


def _assign(cx: EmitContext, s: ast.Assign, ind: int) -> None:
    weak, names = cx.weak, cx.names
    for tgt in s.targets:
        if isinstance(tgt, ast.Name):
            cx.line(ind, f"{names[tgt.id]} = {emit_operand(cx, weak.assigned(s.value, tgt.id))};")
            continue
        value = s.value
        if isinstance(value, (ast.Tuple, ast.List)):
            cx.line(ind, "{")
            tmps = []
            for e, v in zip(tgt.elts, value.elts):
                dt = weak.storage(e.id)
                tv = cx.tmp("t")
                tmps.append(tv)
                cx.line(ind + 1, f"{c_type(dt)} {tv} = {emit_operand(cx, weak.assigned(v, e.id))};")
            for e, tv in zip(tgt.elts, tmps):
                cx.line(ind + 1, f"{names[e.id]} = {tv};")
            cx.line(ind, "}")
        else:
            parts = scalar_arguments(IndexPoint(), names[value.id])
            for e, src in zip(tgt.elts, parts):
                cx.line(ind, f"{names[e.id]} = {cx.code.cast(src, INT64, weak.storage(e.id))};")


def _augassign(cx: EmitContext, s: ast.AugAssign, ind: int) -> None:
    n = s.target.id
    value = emit_operand(cx, cx.weak.assigned(cx.body.synth[s], n))
    cx.line(ind, f"{cx.names[n]} = {value};")


def _annassign(cx: EmitContext, s: ast.AnnAssign, ind: int) -> None:
    if s.value is not None:
        n = s.target.id
        cx.line(ind, f"{cx.names[n]} = {emit_operand(cx, cx.weak.assigned(s.value, n))};")


def _return(cx: EmitContext, s: ast.Return, ind: int) -> None:
    code = emit_operand(cx, cx.weak.returned(s.value))
    ret = cx.weak.return_dtype
    cx.line(ind, f"return {cx.code.cast(code, ret, cx.out_dtype)};")


def _truth(cx: EmitContext, test) -> str:
    """A condition for ``if (...)``/``while (...)``: without the outer parentheses every
    comparison is emitted in (``if ((i == 3L))`` made clang warn on every build)."""
    return _unwrapped(emit_operand(cx, Operand(test, None, TRUTH)))


def _unwrapped(code: str) -> str:
    """``code`` without one pair of parentheses around all of it, if it has one."""
    if not (code.startswith("(") and code.endswith(")")):
        return code
    depth = 0
    for k, ch in enumerate(code):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and k < len(code) - 1:
            return code            # "(a) && (b)": the first pair closes early
    return code[1:-1]


def _if(cx: EmitContext, s: ast.If, ind: int) -> None:
    taken = cx.body.static_test(s.test)
    if taken is not None:
        emit_block(cx, s.body if taken else s.orelse, ind)
        return
    cx.code.features.op("branches")
    cx.line(ind, f"if ({_truth(cx, s.test)}) {{")
    emit_block(cx, s.body, ind + 1)
    orelse = s.orelse
    while (len(orelse) == 1 and isinstance(orelse[0], ast.If)
           and cx.body.static_test(orelse[0].test) is None):
        e = orelse[0]
        cx.code.features.op("branches")
        cx.line(ind, f"}} else if ({_truth(cx, e.test)}) {{")
        emit_block(cx, e.body, ind + 1)
        orelse = e.orelse
    if orelse:
        cx.line(ind, "} else {")
        emit_block(cx, orelse, ind + 1)
    cx.line(ind, "}")


def _while(cx: EmitContext, s: ast.While, ind: int) -> None:
    if cx.body.static_test(s.test) is False:
        return
    cx.code.features.enter_loop(None)
    cx.line(ind, f"while ({_truth(cx, s.test)}) {{")
    emit_block(cx, s.body, ind + 1)
    cx.line(ind, "}")
    cx.code.features.exit_loop()


def _for(cx: EmitContext, s: ast.For, ind: int) -> None:
    """``for x in range(...)``. A unit step, or constants whose last step stays inside int64,
    is C's plain loop; any other range counts its trips first (``skelpy_range_len``, exact in
    unsigned arithmetic) and steps the index without overflow: ``i += step`` past the end of
    ``range(n, 2**63 - 1, 2**62)`` overflowed, which is undefined in C (clang ran such loops
    1 time instead of 2, or 4 instead of 1), and a step of 0 known only at run time looped
    forever; there it runs no iteration (Python raises ValueError)."""
    args = s.iter.args
    consts = [cx.body.const(a) for a in args]
    codes = [emit_operand(cx, Operand(a, INT64, INT64)) for a in args]
    if len(args) == 1:
        start, stop, step = "0L", codes[0], "1L"
        cvals = [0, consts[0], 1]
    else:
        start, stop = codes[0], codes[1]
        step = codes[2] if len(args) == 3 else "1L"
        cvals = list(consts) + ([1] if len(args) == 2 else [])
    trip = None
    if all(c is not MISSING for c in cvals):
        trip = len(range(*(int(c) for c in cvals)))
    counted = _may_overflow(cvals, trip)
    cx.line(ind, "{")
    i = cx.tmp("i")
    if cvals[1] is MISSING:
        e = cx.tmp("e")
        cx.line(ind + 1, f"const long {e} = {stop};")
        stop = e
    if cvals[2] is MISSING:
        st = cx.tmp("s")
        cx.line(ind + 1, f"const long {st} = {step};")
        step = st
        cond = f"({st} > 0) ? ({i} < {stop}) : ({i} > {stop})"
    else:
        cond = f"{i} < {stop}" if int(cvals[2]) > 0 else f"{i} > {stop}"
    if counted:
        if cvals[0] is MISSING and len(args) > 1:
            b = cx.tmp("b")
            cx.line(ind + 1, f"const long {b} = {start};")
            start = b
        n, k = cx.tmp("n"), cx.tmp("k")
        cx.line(ind + 1, f"const ulong {n} = {cx.code.clib.range_len()}({start}, {stop}, {step});")
        cx.line(ind + 1, f"long {i} = {start};")
        header = (f"for (ulong {k} = 0; {k} < {n}; "
                  f"{k}++, {i} = (long)((ulong){i} + (ulong){step})) {{")
    else:
        header = f"for (long {i} = {start}; {cond}; {i} += {step}) {{"
    cx.code.features.enter_loop(trip)
    if trip is not None:
        parent = cx.open_loops[-1] if cx.open_loops else None
        cx.open_loops.append(len(cx.loops))
        cx.loops.append(LoopRecord(len(cx.lines), trip, parent))
    cx.line(ind + 1, header)
    n = s.target.id
    cx.line(ind + 2, f"{cx.names[n]} = {cx.code.cast(i, INT64, cx.weak.storage(n))};")
    emit_block(cx, s.body, ind + 2)
    cx.line(ind + 1, "}")
    cx.line(ind, "}")
    if trip is not None:
        cx.open_loops.pop()
    cx.code.features.exit_loop()


def _may_overflow(cvals, trip) -> bool:
    """Whether ``i += step`` of C's plain loop may leave int64 (undefined) before the loop
    test stops it: never for a step of 1 or -1 (``i < stop`` leaves room for ``i + 1``), nor
    for constants whose first value past the end fits."""
    step = cvals[2]
    if step is not MISSING and abs(int(step)) == 1:
        return False
    if trip is None:
        return True
    past = int(cvals[0]) + trip * int(step)
    return not -2**63 <= past < 2**63


def _break(cx: EmitContext, s, ind: int) -> None:
    cx.line(ind, "break;")


def _continue(cx: EmitContext, s, ind: int) -> None:
    cx.line(ind, "continue;")


def _pass(cx: EmitContext, s, ind: int) -> None:
    pass


def _expr(cx: EmitContext, s: ast.Expr, ind: int) -> None:
    if isinstance(s.value, ast.Constant):
        return
    code, _ = emit_expr(cx, s.value, None)
    cx.line(ind, f"(void)({code});")


_STATEMENTS = {
    "Assign": _assign, "AugAssign": _augassign, "AnnAssign": _annassign, "Return": _return,
    "If": _if, "While": _while, "For": _for, "Break": _break, "Continue": _continue,
    "Pass": _pass, "Expr": _expr,
}
