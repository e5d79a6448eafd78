"""Packed (SWAR) form of a one-byte stencil muscle: four cells per 32-bit word.

Why: a uint8 cell costs as many integer instructions as an int32 one, so byte stencils (Game
of Life, counts, masks) run integer-bound at a quarter of the bytes per second of their int32
twins (the H200: Life uint8 42% of copy against 85% for int32). Evaluated on words, one
instruction serves four (or, in 16-bit lanes, two) cells: a hand-written packed Life ran at
75-86% of copy there.

:func:`lower` turns a typed body (``typed.py``) into ``skp_muscle_packed(w, wp)``, which
computes the 4 cells of one output word from the input words around it (``w`` points at the
word of the cell row in a window ``wp`` words wide, with one word of halo each side, so the
body may read columns -4..4 around each cell). It covers bodies over uint8, int8 and bool
values: ``+ - *`` (``*`` by a constant), unary ``- + ~``, ``& | ^``, comparisons (``== != <
<= > >=``, one operator), ``not``/``and``/``or`` of bools, ``x if c else y``, locals, ``for``
over a short constant ``range`` (unrolled) and ``if`` on constants, and returning a value
stored in one byte. Anything else raises :class:`NotPackable` and the skeleton keeps its
per-cell code. The values and their C are ``swar.py``'s. Results equal the per-cell code's
bit for bit:

- Sums are linear forms mod 256 (NumPy's uint8/int8 arithmetic wraps), evaluated in 16-bit
  lanes (even and odd bytes in two words) whose value range is tracked, so no carry ever
  crosses a lane; the reads of one column offset are summed before they are shifted into
  place, so a column sum serves its neighbours (the compiler merges the identical sums of
  adjacent words).
- Comparisons see the true values: the low byte of each lane (``== !=`` bytewise; ordered
  ones in 16-bit lanes, int8 with its sign bit flipped into unsigned order).
- Truth values live in bit 7 of each byte (``Mask``); a byte is non-zero iff bit 7 of
  ``((x & 0x7f..) + 0x7f..) | x`` is set.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np

from .swar import FUNNEL, Emitter, Lin, Mask, add, scale
from .typed import NO_CONST, AccessorRead, TypedBody

__all__ = ["MAX_REACH", "NotPackable", "PackedMuscle", "lower"]

MAX_REACH = 4                     # columns either side a packed body may read (one halo word)
_INT8 = (np.dtype(np.uint8), np.dtype(np.int8))
_BOOL = np.dtype(np.bool_)


class NotPackable(Exception):
    """The muscle uses something the packed form does not cover (the message says what)."""


@dataclass(frozen=True)
class PackedMuscle:
    """``source`` defines ``skp_muscle_packed`` (the stencil's shape bounds its reads)."""

    source: str


# -- the walk -------------------------------------------------------------------------------


class _Lowering:
    def __init__(self, tb: TypedBody):
        self.tb = tb
        self.em = Emitter()
        self.env: dict[str, object] = {}
        self.consts: dict[str, int] = {}      # loop variables of the unrolled loops

    def fail(self, node, what: str):
        raise NotPackable(f"line {getattr(node, 'lineno', '?')}: {what}")

    def ty(self, node):
        note = self.tb.notes.get(node)
        if note is None:
            self.fail(node, "an expression without a type")
        return note.ty

    def int8(self, node) -> bool:
        """Whether ``node`` is a uint8/int8 value (not weak): its signedness."""
        t = self.ty(node)
        if t.weak or t.dtype not in _INT8:
            self.fail(node, f"a {t} value")
        return t.dtype == np.dtype(np.int8)

    # statements -------------------------------------------------------------------------
    def run(self, out_dtype: np.dtype) -> str:
        fn = self.tb.function.node
        if isinstance(fn, ast.Lambda):
            return self.result(self.expr(fn.body), fn.body, out_dtype)
        body = list(fn.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]                    # the docstring
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            self.fail(fn, "the body does not end in one return of a value")
        self.block(body[:-1])
        return self.result(self.expr(body[-1].value), body[-1].value, out_dtype)

    def block(self, stmts) -> None:
        """Straight-line statements; ``for`` over a constant ``range`` is unrolled here (its
        variable is a constant in each copy) and ``if`` on a constant takes its branch."""
        for st in stmts:
            if isinstance(st, ast.Pass):
                continue
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                    isinstance(st.targets[0], ast.Name):
                self.assign(st.targets[0].id, self.expr(st.value), st)
            elif isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name):
                self.assign(st.target.id, self.expr(self.tb.synth[st]), st)
            elif isinstance(st, ast.If):
                test = self.static(st.test)
                if test is None:
                    self.fail(st, "an if whose condition depends on the data")
                self.block(st.body if test else st.orelse)
            elif isinstance(st, ast.For) and isinstance(st.target, ast.Name) and \
                    not st.orelse:
                name = st.target.id
                for value in self.static_range(st.iter):
                    self.consts[name] = value
                    self.block(st.body)
                self.consts.pop(name, None)
            else:
                self.fail(st, f"a {type(st).__name__} statement")

    def static_range(self, node) -> range:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "range" and not node.keywords and 1 <= len(node.args) <= 3:
            args = [self.static(a) for a in node.args]
            if all(isinstance(a, int) and not isinstance(a, bool) for a in args) and \
                    (len(args) < 3 or args[2] != 0):
                r = range(*args)
                if len(r) <= 64:
                    return r
        self.fail(node, "a loop that is not over a short constant range")

    def static(self, node):
        """The value of an expression of constants and unrolled loop variables (Python's
        semantics on Python ints), or None."""
        c = self.tb.const(node)
        if c is not NO_CONST:
            return c if isinstance(c, (bool, int)) else None
        if isinstance(node, ast.Name):
            return self.consts.get(node.id)
        if isinstance(node, ast.UnaryOp):
            v = self.static(node.operand)
            if v is None:
                return None
            return {ast.USub: lambda: -v, ast.UAdd: lambda: +v, ast.Not: lambda: not v,
                    ast.Invert: lambda: ~v}[type(node.op)]()
        if isinstance(node, ast.BinOp):
            a, b = self.static(node.left), self.static(node.right)
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: a // b if b else None,
                   ast.Mod: lambda: a % b if b else None}
            if a is None or b is None or type(node.op) not in ops:
                return None
            return ops[type(node.op)]()
        if isinstance(node, ast.BoolOp):
            vals = [self.static(v) for v in node.values]
            if any(v is None for v in vals):
                return None
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, ast.Compare):
            vals = [self.static(node.left)] + [self.static(v) for v in node.comparators]
            if any(v is None for v in vals):
                return None
            cmp = {ast.Eq: lambda x, y: x == y, ast.NotEq: lambda x, y: x != y,
                   ast.Lt: lambda x, y: x < y, ast.LtE: lambda x, y: x <= y,
                   ast.Gt: lambda x, y: x > y, ast.GtE: lambda x, y: x >= y}
            if any(type(op) not in cmp for op in node.ops):
                return None
            return all(cmp[type(op)](x, y) for op, x, y in zip(node.ops, vals, vals[1:]))
        return None

    def assign(self, name: str, value, node) -> None:
        t = self.tb.var_types.get(name)
        if t is None or t.weak or t.dtype not in (*_INT8, _BOOL):
            self.fail(node, f"local {name!r} of type {t}")
        if t.dtype == _BOOL:
            value = self.as_mask(value, node)
        else:
            value = self.as_lin(value, node, t.dtype == np.dtype(np.int8))
        self.env[name] = value

    def result(self, value, node, out_dtype: np.dtype) -> str:
        if out_dtype.itemsize != 1:
            self.fail(node, f"a result stored as {out_dtype}")
        em = self.em
        if out_dtype == _BOOL:
            if not isinstance(value, Mask):
                value = self.compare_const(self.as_lin(value, node, False), ast.NotEq(), 0,
                                           False)
            return em.ones(value)
        if isinstance(value, Mask):
            return em.ones(value)
        return em.bytes_of(self.as_lin(value, node, out_dtype == np.dtype(np.int8)))

    # expressions ------------------------------------------------------------------------
    def as_lin(self, v, node, signed: bool) -> Lin:
        if isinstance(v, Lin):
            return v
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            self.fail(node, "a value that is not an 8-bit integer")
        return Lin((), int(v) % 256, signed)

    def as_mask(self, v, node) -> Mask:
        if isinstance(v, Mask):
            return v
        if isinstance(v, (bool, np.bool_)):
            return Mask(None, bool(v))
        self.fail(node, "a value that is not a bool")

    def expr(self, node):
        c = self.tb.const(node)
        if c is not NO_CONST:
            if isinstance(c, (bool, np.bool_)):
                return bool(c)
            if isinstance(c, (int, np.integer)):
                return int(c)
            self.fail(node, f"the constant {c!r}")
        meth = getattr(self, "_" + type(node).__name__, None)
        if meth is None:
            self.fail(node, f"a {type(node).__name__} expression")
        return meth(node)

    def _Name(self, node):
        if node.id in self.consts:
            return self.consts[node.id]
        v = self.env.get(node.id)
        if v is None:
            self.fail(node, f"the name {node.id!r}")
        return v

    def _Subscript(self, node):
        note = self.tb.notes.get(node)
        if note is None or not isinstance(note.meaning, AccessorRead) or \
                note.meaning.param.index != 0 or len(note.meaning.indices) != 2:
            self.fail(node, "a subscript that is not a read of the neighbourhood")
        offs = [self.static(i) for i in note.meaning.indices]
        if any(o is None or isinstance(o, bool) or not isinstance(o, (int, np.integer))
               for o in offs):
            self.fail(node, "a neighbourhood read at a computed offset")
        dr, dc = (int(o) for o in offs)
        if abs(dc) > MAX_REACH:
            self.fail(node, f"a read {dc} columns away (at most {MAX_REACH})")
        return Lin(((("r", dr, dc), 1),), 0, self.int8(node))

    def _BinOp(self, node):
        op = node.op
        if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and \
                self.ty(node).dtype == _BOOL:
            a = self.em.mask_word(self.as_mask(self.expr(node.left), node))
            b = self.em.mask_word(self.as_mask(self.expr(node.right), node))
            sym = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}[type(op)]
            return Mask(self.em.let(f"{a} {sym} {b}"))
        signed = self.int8(node)
        a = self.as_lin(self.expr(node.left), node, signed)
        b = self.as_lin(self.expr(node.right), node, signed)
        if isinstance(op, ast.Add):
            return add(a, b, 1, signed)
        if isinstance(op, ast.Sub):
            return add(a, b, -1, signed)
        if isinstance(op, ast.Mult):
            if not a.terms:
                return scale(b, a.const)
            if not b.terms:
                return scale(a, b.const)
            self.fail(node, "a product of two values that are not constants")
        if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            sym = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}[type(op)]
            word = self.em.let(f"{self.em.bytes_of(a)} {sym} {self.em.bytes_of(b)}")
            return Lin(((("b", word), 1),), 0, signed)
        self.fail(node, f"the operator {type(op).__name__}")

    def _UnaryOp(self, node):
        op = node.op
        if isinstance(op, ast.Not) or (isinstance(op, ast.Invert)
                                       and self.ty(node).dtype == _BOOL):
            v = self.expr(node.operand)
            if not isinstance(v, Mask):       # `not x` of an integer: x == 0
                t = self.ty(node.operand)
                if t.weak or t.dtype not in _INT8:
                    self.fail(node, f"not of a {t} value")
                v = self.compare_const(self.as_lin(v, node, False), ast.Eq(), 0, False)
                return v
            return Mask(v.name, not v.inv)
        signed = self.int8(node)
        v = self.as_lin(self.expr(node.operand), node, signed)
        if isinstance(op, ast.UAdd):
            return v
        if isinstance(op, ast.USub):
            return scale(v, -1)
        if isinstance(op, ast.Invert):         # ~x == -x - 1 (mod 256)
            return add(scale(v, -1), Lin((), 255, signed), 1, signed)
        self.fail(node, f"the operator {type(op).__name__}")

    def _BoolOp(self, node):
        if self.ty(node).dtype != _BOOL or self.ty(node).weak:
            self.fail(node, "and/or of values that are not bools")
        words = [self.em.mask_word(self.as_mask(self.expr(v), node)) for v in node.values]
        sym = " & " if isinstance(node.op, ast.And) else " | "
        return Mask(self.em.let(sym.join(words)))

    def _IfExp(self, node):
        test = self.as_mask(self.expr(node.test), node)
        t = self.ty(node)
        em = self.em
        if t.dtype == _BOOL and not t.weak:
            a = em.mask_word(self.as_mask(self.expr(node.body), node))
            b = em.mask_word(self.as_mask(self.expr(node.orelse), node))
            m = em.mask_word(test)
            return Mask(em.let(f"({m} & {a}) | (~{m} & {b})"))
        if t.weak and t.kind == "i":           # `1 if c else 0`: Python ints, stored mod 256
            body, orelse = self.expr(node.body), self.expr(node.orelse)
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (body, orelse)):
                self.fail(node, "x if c else y of Python ints that are not constants")
            signed = False
        else:
            signed = self.int8(node)
            body, orelse = self.expr(node.body), self.expr(node.orelse)
        a = em.bytes_of(self.as_lin(body, node, signed))
        b = em.bytes_of(self.as_lin(orelse, node, signed))
        m = em.let(f"{em.ones(test)} * 0xffu")
        word = em.let(f"({m} & {a}) | (~{m} & {b})")
        return Lin(((("b", word), 1),), 0, signed)

    def _Compare(self, node):
        if len(node.ops) != 1:
            self.fail(node, "a chained comparison")
        op, (ln, rn) = node.ops[0], (node.left, node.comparators[0])
        lv, rv = self.expr(ln), self.expr(rn)
        if isinstance(lv, Mask) or isinstance(rv, Mask) or isinstance(lv, bool) \
                or isinstance(rv, bool):
            self.fail(node, "a comparison of bools")
        if isinstance(lv, int) and isinstance(rv, int):
            self.fail(node, "a comparison of constants")
        if isinstance(lv, int):                # constant on the left: swap it to the right
            lv, rv, ln, rn = rv, lv, rn, ln
            op = {ast.Lt: ast.Gt(), ast.Gt: ast.Lt(), ast.LtE: ast.GtE(),
                  ast.GtE: ast.LtE()}.get(type(op), op)
        signed = self.int8(ln)
        a = self.as_lin(lv, node, signed)
        if isinstance(rv, int):
            return self.compare_const(a, op, rv, signed)
        if self.int8(rn) != signed:
            self.fail(node, "a comparison of int8 with uint8")
        return self.compare(a, op, rv, signed)

    # comparisons ------------------------------------------------------------------------
    def compare_const(self, a: Lin, op, k: int, signed: bool) -> Mask:
        lo, hi = (-128, 127) if signed else (0, 255)
        if not lo <= k <= hi:                  # exact, as NumPy compares with a Python int
            truth = {ast.Eq: False, ast.NotEq: True, ast.Lt: k > hi, ast.LtE: k > hi,
                     ast.Gt: k < lo, ast.GtE: k < lo}[type(op)]
            return Mask(None, truth)
        return self.compare(a, op, Lin((), k % 256, signed), signed)

    def compare(self, a: Lin, op, b: Lin, signed: bool) -> Mask:
        em = self.em
        if isinstance(op, (ast.Eq, ast.NotEq)):
            diff = em.let(f"{em.bytes_of(a)} ^ {b.const * 0x01010101:#010x}u") \
                if not b.terms else em.bytes_of(add(a, b, -1, signed))
            m = em.nonzero(diff)
            return m if isinstance(op, ast.NotEq) else Mask(m.name, True)
        if isinstance(op, (ast.Gt, ast.LtE)):  # a > b == not (b >= a)
            a, b = b, a
        ge = self.greater_equal(a, b, signed)
        return ge if isinstance(op, (ast.GtE, ast.LtE)) else Mask(ge.name, True)

    def greater_equal(self, a: Lin, b: Lin, signed: bool) -> Mask:
        """a >= b per byte: bit 8 of each 16-bit lane of a + 256 - b (both 0..255)."""
        em = self.em
        flip = 0x80 if signed else 0
        ae, ao = self.ordered_halves(a, flip)
        if not b.terms:
            k = 256 - ((b.const ^ flip) & 0xFF)
            ge_e, ge_o = (em.let(f"{h} + {k * 0x10001:#x}u") for h in (ae, ao))
        else:
            be, bo = self.ordered_halves(b, flip)
            ge_e = em.let(f"({ae} + 0x01000100u) - {be}")
            ge_o = em.let(f"({ao} + 0x01000100u) - {bo}")
        return Mask(em.let(f"(({ge_e} >> 1) & 0x00800080u) | (({ge_o} << 7) & 0x80008000u)"))

    def ordered_halves(self, v: Lin, flip: int) -> tuple[str, str]:
        if flip:
            word = self.em.let(f"{self.em.bytes_of(v)} ^ 0x80808080u")
            return self.em.halves(word)
        return self.em.normal_halves(v)


def lower(tb: TypedBody, out_dtype) -> PackedMuscle:
    """The packed form of a one-byte stencil muscle (raises :class:`NotPackable`)."""
    lw = _Lowering(tb)
    ret = lw.run(np.dtype(out_dtype))
    em = lw.em
    src = (FUNNEL
           + "static inline uint skp_muscle_packed(__private const uint* w, const int wp)\n{\n"
           + "\n".join(em.lines) + f"\n    return {ret};\n}}\n")
    return PackedMuscle(src)
