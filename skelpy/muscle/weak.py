"""Weak-scalar resolution: which C type each weak (Python) value is computed in.

A weak value has no type of its own (NEP 50): it takes the type of the strong value it meets,
so in ``a * x`` with float32 ``x`` a weak ``a`` is float32. That *context* flows down the
expression tree, like loopy's ``type_context``: every operation says which context each of its
operands is computed in (:func:`operands`, the one place these rules live; the C emitter
reads them too). Weak *variables* (weak Scalar parameters, locals holding Python floats,
captured tuples of Python floats) get the promotion of every context they are used in, or the
default (float64/int64/bool) when they meet weak values only. Because a context may itself
come from a weak variable (``x * k`` where ``k`` is resolved to float32), :func:`resolve_weak`
walks the typed body again until no variable's type changes; emission then runs once.

Weak ints are computed in ``long``; a weak int *parameter* still learns the integer contexts it
meets (so ``x + k`` with int8 ``x`` passes ``k`` as int8).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np

from .cnames import c_ident
from .dtyping import BOOL, FLOAT64, INT64, WHERE_RAISES, Ty, fits, result_type
from .params import Scalar
from .typed import (
    NO_CONST,
    AccessorRead,
    ArrayItem,
    BoolTail,
    CastCall,
    FunctionCall,
    HelperCall,
    Loop,
    MixedSignCompare,
    RecursiveMuscle,
    RoundToInt,
    SameType,
    TypedBody,
    WeakCompare,
    WeakMath,
)
from .typed_muscle import TypedMuscle

UINT64 = np.dtype(np.uint64)
TRUTH = "truth"  # an operand tested for truth (``x != 0`` unless it is a bool)


@dataclass(frozen=True, slots=True)
class Operand:
    """A child expression, the context it is computed in, and what its parent makes of it:
    a dtype (converted to it), TRUTH, or None (taken as it comes)."""

    node: ast.expr
    context: np.dtype | None
    target: np.dtype | str | None


@dataclass(frozen=True, slots=True)
class HelperUse:
    """The specialisation of a called function at one call: its C name and TypedMuscle."""

    c_name: str
    typed: TypedMuscle


@dataclass(slots=True)
class Operands:
    """An operation's operands in evaluation order, and the dtype it computes in."""

    items: tuple[Operand, ...]
    dtype: np.dtype | None = None
    helper: HelperUse | None = None


_LEAF = Operands(())


class WeakTypes:
    """The resolution of a body's weak values (and all the state of finding it).

    ``resolved`` maps a weak variable (or ``"@" + key`` of a weak captured array) to the dtype
    it is computed in, None meaning its default. ``helper_names`` gives each helper
    specialisation (muscle, kinds, out dtype) its C name; it keeps every name handed out, as
    the C names of helpers depend on the order they were first met in."""

    def __init__(self, body: TypedBody, c_name: str, return_dtype: np.dtype,
                 checks: str | None = None):
        self.body = body
        self.checks = checks                    # helpers are specialised with the same checks
        self.c_name = c_name
        self.return_dtype = return_dtype
        self.resolved: dict[str, np.dtype | None] = {}
        self.helper_names: dict[tuple, str] = {}
        # each weak-int expression -> the dtype its value must fit; each call of a helper ->
        # its TypedMuscle (host_ints.py)
        self.int_sites: dict[ast.AST, np.dtype] = {}
        self.int_calls: dict[ast.AST, TypedMuscle] = {}

    # -- storage types ---------------------------------------------------------------------

    def storage(self, name: str) -> np.dtype:
        """The C type of local ``name``."""
        return self.storage_of(name, self.body.var_types[name])

    def storage_of(self, key: str, t: Ty) -> np.dtype:
        if not t.weak:
            return t.dtype
        r = self.resolved.get(key)
        if t.kind == "f":
            return r if r is not None else FLOAT64
        if t.kind == "i":
            return r if r is not None else INT64
        return BOOL

    def array_dtype(self, array) -> np.dtype:
        return self.storage_of("@" + array.key, array.elem)

    def assign_context(self, name: str) -> np.dtype | None:
        """The context a value assigned to ``name`` is computed in."""
        t = self.body.var_types[name]
        return t.dtype if not t.weak else self.resolved.get(name)

    def assigned(self, value, name: str) -> Operand:
        """``value`` as assigned to local ``name``."""
        return Operand(value, self.assign_context(name), self.storage(name))

    def returned(self, value) -> Operand:
        return Operand(value, self.return_dtype, self.return_dtype)

    def param_dtype(self, name: str) -> np.dtype:
        """The C type scalar parameter ``name`` is passed in."""
        body = self.body
        k = body.kinds[body.scope.scalar_params[name]]
        if not k.weak:
            return k.dtype
        if body.is_direct_param(name):
            return self.storage(name)
        local = self.storage(name)
        kind = Ty(k.dtype, True).kind
        if kind == "f":
            return local if local.kind == "f" else FLOAT64
        if kind == "i":
            return local if local.kind in "iu" else INT64
        return BOOL

    # -- contexts ----------------------------------------------------------------------------

    def natural(self, node) -> np.dtype | None:
        """Float type of the weak float variables in ``node`` (weak values with no outer
        context are computed in the type of the weak variables they combine)."""
        dts = []
        var_types, notes = self.body.var_types, self.body.notes
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in var_types:
                t = var_types[n.id]
                r = self.resolved.get(n.id)
                if t.weak and t.kind == "f" and r is not None:
                    dts.append(r)
            elif isinstance(n, ast.Subscript):
                note = notes.get(n)
                meaning = note.meaning if note is not None else None
                if (isinstance(meaning, ArrayItem) and meaning.array.elem.weak
                        and meaning.array.elem.kind == "f"):
                    r = self.resolved.get("@" + meaning.array.key)
                    if r is not None:
                        dts.append(r)
        if not dts:
            return None
        return result_type(*(Ty(d) for d in dts)).dtype

    def float_context(self, node, mat) -> np.dtype | None:
        """The context a weak float expression passes to its weak variables: a real one (an
        outer strong type, or the type its weak variables were resolved to), never the float64
        default, so that a default does not pin variables that later meet float32."""
        if mat is not None and mat.kind == "f":
            return mat
        return self.natural(node)

    def float_type(self, node, mat) -> np.dtype:
        """The float type a weak float expression is computed in."""
        return self.float_context(node, mat) or FLOAT64

    def weak_dtype(self, t: Ty, node, mat) -> np.dtype:
        """The dtype a weak operation of type ``t`` computes in."""
        if t.kind == "f":
            return self.float_type(node, mat)
        return INT64 if t.kind == "i" else BOOL

    def operand_context(self, operand, t: Ty, node, mat) -> np.dtype | None:
        """Context for an operand of weak operation ``node`` of type ``t``: float contexts
        pass down; weak ints compute in long, operands included (Python ints do not wrap:
        with ``s = 300``, ``x8 + s // 4`` adds 75, so ``s`` must not be passed as int8; only
        a parameter that meets int8 itself, as in ``x8 + s``, is)."""
        if t.kind == "f":
            return self.float_context(node, mat)
        return INT64 if t.kind == "i" else None

    def literal_dtype(self, node, value, t: Ty, mat) -> np.dtype:
        """The dtype a constant is written in, in context ``mat`` (a Python int that does not
        fit the integer type it meets is an error, as in NumPy)."""
        if not t.weak:
            return t.dtype
        if t.kind == "b":
            return BOOL
        if t.kind == "i":
            v = int(value)
            if mat is not None and mat.kind in "iu":
                if not fits(v, mat):
                    raise self.body.function.error(
                        node, f"Python integer {v} out of bounds for {mat} (as in NumPy)",
                        "integer overflow")
                return mat
            if mat is not None and mat.kind == "f":
                return mat
            if not fits(v, INT64):
                raise self.body.function.error(node, f"integer constant {v} does not fit in "
                                                     "int64", "integer constant")
            return INT64
        return mat if (mat is not None and mat.kind == "f") else FLOAT64

    def helper(self, node: ast.Call, call: HelperCall, mat) -> HelperUse:
        """The helper's specialisation at this call: a weak float result takes the caller's
        float context as its out dtype."""
        t = self.body.notes[node].ty
        out = None
        if t.weak and t.kind == "f" and mat is not None and mat.kind == "f":
            out = mat
        m = call.muscle
        key = (id(m), call.kinds, out)
        cname = self.helper_names.get(key)
        if cname is None:
            cname = f"{self.c_name}_{c_ident(m.name.strip('<>'))}"
            if cname in self.helper_names.values():
                cname = f"{cname}{len(self.helper_names)}"
            self.helper_names[key] = cname
        try:
            tm = m.specialise(call.kinds, out_dtype=out, c_name=cname, checks=self.checks)
        except RecursiveMuscle:
            raise self.body.function.error(node, f"recursive call to '{m.name}' is not "
                                                 "supported in a muscle", "recursion") from None
        return HelperUse(cname, tm)

    # -- the fixed point ---------------------------------------------------------------------

    def weak_keys(self) -> dict[str, Ty]:
        """The weak variables (and ``"@" + key`` of weak captured arrays) with their kinds."""
        keys = {n: t for n, t in self.body.var_types.items() if t.weak}
        for a in self.body.scope.arrays.values():
            if a.elem.weak:
                keys["@" + a.key] = a.elem
        return keys

    def resolution(self, contexts: dict[str, set]) -> dict[str, np.dtype | None]:
        """What each weak variable is computed in, given the contexts it met: the promotion of
        its float contexts (weak floats), of its integer contexts (weak int parameters that
        keep their type), else None (the default)."""
        new = {}
        for key, t in self.weak_keys().items():
            ctx = contexts.get(key, ())
            if t.kind == "f":
                fl = [d for d in ctx if d.kind == "f"]
                new[key] = result_type(*(Ty(d) for d in fl)).dtype if fl else None
            elif t.kind == "i" and self.body.is_direct_param(key):
                ints = [d for d in ctx if d.kind in "iu"]
                if ints:
                    r = np.result_type(*ints)
                    new[key] = r if r.kind in "iu" else INT64
                else:
                    new[key] = None
            else:
                new[key] = None
        return new


def resolve_weak(body: TypedBody, c_name: str, return_dtype: np.dtype,
                 checks: str | None = None) -> WeakTypes:
    """Resolve the weak values of ``body`` whose returns are computed in ``return_dtype``."""
    wt = WeakTypes(body, c_name, return_dtype, checks)
    if not wt.weak_keys():
        return wt  # nothing to resolve
    for _ in range(32):
        walk = _ContextWalk(wt)
        walk.block(body.function.body)
        new = wt.resolution(walk.contexts)
        wt.int_sites, wt.int_calls = walk.int_sites, walk.int_calls
        if new == wt.resolved:
            break
        wt.resolved = new
    return wt  # resolution only widens, so this converges quickly


# -- the rules: operands and their contexts ---------------------------------------------------


def operands(wt: WeakTypes, node, mat) -> Operands:
    """The operands of expression ``node`` computed in context ``mat`` (none for constants,
    names and other leaves)."""
    note = wt.body.notes[node]
    if note.const is not NO_CONST:
        return _LEAF
    rule = _RULES.get(type(node).__name__)
    return _LEAF if rule is None else rule(wt, node, note, mat)


def _binop(wt: WeakTypes, node, t: Ty, ins, left, right, mat) -> Operands:
    if t.weak:
        d = wt.weak_dtype(t, node, mat)
        return Operands((Operand(left, wt.operand_context(left, t, node, mat), d),
                         Operand(right, wt.operand_context(right, t, node, mat), d)), d)
    return Operands((Operand(left, ins[0], ins[0]), Operand(right, ins[1], ins[1])), ins[0])


def _rule_BinOp(wt, node, note, mat) -> Operands:
    ins = note.meaning.ins if isinstance(note.meaning, Loop) else None
    return _binop(wt, node, note.ty, ins, node.left, node.right, mat)


def _rule_UnaryOp(wt, node, note, mat) -> Operands:
    t = note.ty
    if isinstance(node.op, ast.Not):
        return Operands((Operand(node.operand, None, TRUTH),), BOOL)
    if t.weak:
        d = wt.weak_dtype(t, node, mat)
        return Operands((Operand(node.operand, wt.operand_context(node.operand, t, node, mat),
                                 d),), d)
    d = note.meaning.ins[0]
    return Operands((Operand(node.operand, d, d),), d)


def _rule_BoolOp(wt, node, note, mat) -> Operands:
    """Bools: each operand tested for truth. Otherwise each operand is computed in the
    result's type (the emitter tests it for truth after that conversion: promotion never
    turns a non-zero into zero, nor NaN into a number)."""
    t = note.ty
    values = node.values
    if isinstance(note.meaning, BoolTail):       # constants in front that do not decide
        values = values[note.meaning.start:]
        if len(values) == 1:
            return Operands((Operand(values[0], mat, None),))
    if t.kind == "b":
        return Operands(tuple(Operand(v, None, TRUTH) for v in values), BOOL)
    if t.weak:
        d = wt.weak_dtype(t, node, mat)
        return Operands(tuple(Operand(v, wt.operand_context(v, t, node, mat), d)
                              for v in values), d)
    d = t.dtype
    return Operands(tuple(Operand(v, d, d) for v in values), d)


def _rule_Compare(wt, node, note, mat) -> Operands:
    nodes = [node.left] + list(node.comparators)
    items = []
    for i, mode in enumerate(note.meaning.modes):
        a, b = nodes[i], nodes[i + 1]
        if isinstance(mode, WeakCompare):
            k = mode.kind
            d = wt.float_type(node, None) if k == "f" else (INT64 if k == "i" else BOOL)
            ctx = wt.float_context(node, None) if k == "f" else None
            items += [Operand(a, ctx, d), Operand(b, ctx, d)]
        elif isinstance(mode, MixedSignCompare):
            da, db = (UINT64, INT64) if mode.unsigned_left else (INT64, UINT64)
            items += [Operand(a, da, da), Operand(b, db, db)]
        else:
            items += [Operand(a, mode.ins[0], mode.ins[0]), Operand(b, mode.ins[1], mode.ins[1])]
    return Operands(tuple(items), BOOL)


def _rule_IfExp(wt, node, note, mat) -> Operands:
    taken = wt.body.static_test(node.test)
    if taken is not None:
        return Operands((Operand(node.body if taken else node.orelse, mat, None),))
    t = note.ty
    test = Operand(node.test, None, TRUTH)
    if t.weak:
        d = wt.weak_dtype(t, node, mat)
        return Operands((Operand(node.body, wt.operand_context(node.body, t, node, mat), d),
                         Operand(node.orelse, wt.operand_context(node.orelse, t, node, mat), d),
                         test), d)
    d = t.dtype
    return Operands((Operand(node.body, d, d), Operand(node.orelse, d, d), test), d)


def _rule_Subscript(wt, node, note, mat) -> Operands:
    meaning = note.meaning
    if isinstance(meaning, AccessorRead):
        return Operands(tuple(Operand(i, INT64, INT64) for i in meaning.indices))
    if isinstance(meaning, ArrayItem):
        return Operands((Operand(meaning.index, INT64, INT64),))
    return _LEAF


def _rule_Call(wt, node, note, mat) -> Operands:
    meaning = note.meaning
    args = node.args
    if isinstance(meaning, FunctionCall):
        return _function(wt, node, note.ty, meaning, mat)
    if isinstance(meaning, CastCall):
        cast, arg = meaning.cast, args[0]
        if cast.dtype is not None:
            d = cast.dtype
            ctx = d if wt.body.notes[arg].ty.kind != "i" or d.kind in "iu" else None
            return Operands((Operand(arg, ctx, None),), d)
        if cast.kind == "b":
            return Operands((Operand(arg, None, TRUTH),), BOOL)
        if cast.kind == "i":
            return Operands((Operand(arg, None, INT64),), INT64)
        d = wt.float_type(node, mat)
        return Operands((Operand(arg, wt.float_context(node, mat), d),), d)
    if isinstance(meaning, HelperCall):
        use = wt.helper(node, meaning, mat)
        items = tuple(Operand(a, use.typed.scalar_dtypes[j], use.typed.scalar_dtypes[j])
                      for j, (a, k) in enumerate(zip(args, meaning.kinds))
                      if isinstance(k, Scalar))
        return Operands(items, use.typed.out_dtype, use)
    return _LEAF  # len(): an accessor attribute


def _function(wt, node, t: Ty, call: FunctionCall, mat) -> Operands:
    args, rule = node.args, call.rule
    if call.operator is not None:
        ins = rule.ins if isinstance(rule, Loop) else None
        return _binop(wt, node, t, ins, args[0], args[1], mat)
    if isinstance(rule, SameType):
        rt = rule.ty
        d = wt.weak_dtype(rt, node, mat) if rt.weak else rt.dtype

        def conv(a):
            return Operand(a, wt.operand_context(a, rt, node, mat) if rt.weak else d, d)

        if call.spec.canonical == "where":
            return Operands((Operand(args[0], None, TRUTH), conv(args[1]), conv(args[2])), d)
        if call.spec.canonical in ("pymin", "pymax") and not rt.weak:
            return _builtin_minmax(wt, args, d, conv)
        return Operands(tuple(conv(a) for a in args), d)
    if isinstance(rule, RoundToInt):
        at = rule.arg
        if at.kind == "f":
            d = wt.float_type(args[0], None) if at.weak else at.dtype
            ctx = wt.float_context(args[0], None) if at.weak else d
            return Operands((Operand(args[0], ctx, d),), d)
        return Operands((Operand(args[0], None, INT64),), INT64)
    if isinstance(rule, WeakMath):
        if call.spec.canonical == "abs" and rule.kind == "i":
            return Operands((Operand(args[0], None, INT64),), INT64)
        outer = mat if rule.kind == "f" else None
        d = wt.float_type(node, outer)
        ctx = wt.float_context(node, outer)
        return Operands(tuple(Operand(a, ctx, d) for a in args), d)
    return Operands(tuple(Operand(a, d, d) for a, d in zip(args, rule.ins)), rule.ins[0])


def _builtin_minmax(wt, args, d: np.dtype, conv) -> Operands:
    """Builtin ``min``/``max`` compare their operands as Python does, each as it is (NumPy
    compares mixed integers exactly), and return the chosen one: of mixed integer types they
    compare in int64 and the result is converted to ``d`` after. Converted to ``d`` first,
    ``max(k, x)`` with a Python int ``k = -5`` and a uint32 ``x = 3`` compared 4294967291 with
    3. A constant must still fit ``d`` (it is written in ``d``, as NumPy's scalars are).
    uint64 with a negative Python int is the one mix no C type holds: compared in uint64."""
    notes = wt.body.notes
    tys = [notes[a].ty for a in args]
    if d.kind not in "iu" or d == UINT64 or all(not t.weak and t.dtype == d for t in tys):
        return Operands(tuple(conv(a) for a in args), d)
    items = []
    for a, t in zip(args, tys):
        if notes[a].const is not NO_CONST:
            ctx = d
        else:
            ctx = INT64 if t.weak else t.dtype
        items.append(Operand(a, ctx, INT64))
    return Operands(tuple(items), INT64)


_RULES = {"BinOp": _rule_BinOp, "UnaryOp": _rule_UnaryOp, "BoolOp": _rule_BoolOp,
          "Compare": _rule_Compare, "IfExp": _rule_IfExp, "Subscript": _rule_Subscript,
          "Call": _rule_Call}


# -- the walk that collects contexts ----------------------------------------------------------


def _raises_out_of_bounds(node, note) -> bool:
    """Whether NumPy raises where a Python-int operand of ``node`` does not fit the integer
    type it meets: arithmetic on NumPy values (operators and ufuncs) and casts do, ``where``
    as the installed NumPy does (:data:`WHERE_RAISES`); builtin ``min``/``max``, comparisons
    (exact in NumPy 2) and assignments do not."""
    if note.ty.weak:
        return False
    meaning = note.meaning
    if isinstance(node, ast.BinOp):
        return True
    if isinstance(meaning, FunctionCall):
        if meaning.spec.canonical == "where":
            return WHERE_RAISES
        return meaning.operator is not None or isinstance(meaning.rule, Loop)
    if isinstance(meaning, CastCall):
        return meaning.cast.dtype is not None and meaning.cast.dtype.kind in "iu"
    return False


class _ContextWalk:
    """One pass over the body with the current resolution: the contexts every weak variable
    meets (and the errors a constant gives in its context)."""

    def __init__(self, wt: WeakTypes):
        self.wt = wt
        self.contexts: dict[str, set] = {}
        self.int_sites: dict[ast.AST, np.dtype] = {}
        self.int_calls: dict[ast.AST, TypedMuscle] = {}

    def expr(self, node, mat, strict: bool = False) -> None:
        """Walk ``node`` computed in context ``mat``; ``strict``: its parent is an operation
        on NumPy integers that raises, as NumPy does, where a Python int does not fit."""
        wt = self.wt
        note = wt.body.notes[node]
        if note.const is not NO_CONST:
            wt.literal_dtype(node, note.const, note.ty, mat)
            return
        if note.ty.weak and note.ty.kind == "i":    # a Python int computed in long
            d = mat if strict and mat is not None and mat.kind in "iu" else INT64
            if not (isinstance(node, ast.Name) and wt.body.is_direct_param(node.id)
                    and np.can_cast(wt.param_dtype(node.id), d)):   # passed in d: checked
                self.int_sites[node] = d
        if isinstance(node, ast.Name):
            if wt.body.var_types[node.id].weak and mat is not None:
                self.contexts.setdefault(node.id, set()).add(mat)
            return
        meaning = note.meaning
        if isinstance(meaning, ArrayItem) and meaning.array.elem.weak and mat is not None:
            self.contexts.setdefault("@" + meaning.array.key, set()).add(mat)
        strict = _raises_out_of_bounds(node, note)
        ops = operands(wt, node, mat)
        if ops.helper is not None:
            self.int_calls[node] = ops.helper.typed
        for o in ops.items:
            self.expr(o.node, o.context, strict)
        if (isinstance(meaning, FunctionCall) and meaning.spec.canonical in ("pymin", "pymax")
                and not note.ty.weak and note.ty.dtype.kind in "iu"):
            for a in node.args:    # the Python int chosen is written in the result's type
                t = wt.body.notes[a]
                if t.ty.weak and t.ty.kind == "i" and t.const is NO_CONST:
                    self.int_sites[a] = note.ty.dtype

    def operand(self, o: Operand) -> None:
        self.expr(o.node, o.context)

    def block(self, stmts) -> None:
        wt, body = self.wt, self.wt.body
        for s in stmts:
            if isinstance(s, ast.Assign):
                for tgt in s.targets:
                    if isinstance(tgt, ast.Name):
                        self.operand(wt.assigned(s.value, tgt.id))
                    elif isinstance(s.value, (ast.Tuple, ast.List)):
                        for e, v in zip(tgt.elts, s.value.elts):
                            self.operand(wt.assigned(v, e.id))
            elif isinstance(s, ast.AugAssign):
                self.operand(wt.assigned(body.synth[s], s.target.id))
            elif isinstance(s, ast.AnnAssign):
                if s.value is not None:
                    self.operand(wt.assigned(s.value, s.target.id))
            elif isinstance(s, ast.Return):
                self.operand(wt.returned(s.value))
            elif isinstance(s, ast.If):
                self._if(s)
            elif isinstance(s, ast.While):
                if body.static_test(s.test) is not False:
                    self.expr(s.test, None)
                    self.block(s.body)
            elif isinstance(s, ast.For):
                for a in s.iter.args:
                    self.expr(a, INT64)
                self.block(s.body)
            elif isinstance(s, ast.Expr) and not isinstance(s.value, ast.Constant):
                self.expr(s.value, None)

    def _if(self, s: ast.If) -> None:
        body = self.wt.body
        taken = body.static_test(s.test)
        if taken is not None:
            self.block(s.body if taken else s.orelse)
            return
        self.expr(s.test, None)
        self.block(s.body)
        orelse = s.orelse
        while (len(orelse) == 1 and isinstance(orelse[0], ast.If)
               and body.static_test(orelse[0].test) is None):
            self.expr(orelse[0].test, None)
            self.block(orelse[0].body)
            orelse = orelse[0].orelse
        self.block(orelse)
