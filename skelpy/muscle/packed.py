"""Packed (SWAR) form of a one-byte stencil muscle: four cells per 32-bit word.

Why: a uint8 cell costs as many integer instructions as an int32 one, so byte stencils (Game
of Life, counts, masks) run integer-bound at a quarter of the bytes per second of their int32
twins (the H200: Life uint8 42% of copy against 85% for int32). Evaluated on words, one
instruction serves four (or, in 16-bit lanes, two) cells: a hand-written packed Life ran at
75-86% of copy there.

:func:`lower` turns a typed body (``typed.py``) into ``skp_muscle_packed(w, wp)``, which
computes the 4 cells of one output word from the input words around it (``w`` points at the
word of the cell row in a window ``wp`` words wide, with one word of halo each side, so the
body may read columns -4..4 around each cell). It covers straight-line bodies over uint8, int8
and bool values: ``+ - *`` (``*`` by a constant), unary ``- + ~``, ``& | ^``, comparisons
(``== != < <= > >=``, one operator), ``not``/``and``/``or`` of bools, ``x if c else y``,
locals, and returning a value stored in one byte. Anything else raises :class:`NotPackable`
and the skeleton keeps its per-cell code. Results equal the per-cell code's bit for bit:

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

from .typed import NO_CONST, AccessorRead, TypedBody

__all__ = ["MAX_REACH", "NotPackable", "PackedMuscle", "lower"]

MAX_REACH = 4                     # columns either side a packed body may read (one halo word)
_LO = "0x00ff00ffu"               # the low byte of each 16-bit lane
_HI = "0xff00ff00u"
_M7 = "0x7f7f7f7fu"
_ONES = "0x01010101u"
_LANE_MAX = 0xFFFF
_INT8 = (np.dtype(np.uint8), np.dtype(np.int8))
_BOOL = np.dtype(np.bool_)


# The 32 bits from bit s of the 64-bit word hi:lo (s a multiple of 8). clang makes the shift
# pair an llvm.fshl, which oclgrind does not know: there (SKP_SIMULATOR, program_builder.py)
# a byte shuffle instead.
_FUNNEL = """#ifndef SKP_FUNNEL
#if defined(SKP_SIMULATOR) && SKP_SIMULATOR
#define SKP_FUNNEL(lo, hi, s) as_uint(shuffle2(as_uchar4(lo), as_uchar4(hi), \\
    (uchar4)((s) / 8, (s) / 8 + 1, (s) / 8 + 2, (s) / 8 + 3)))
#else
#define SKP_FUNNEL(lo, hi, s) (((lo) >> (s)) | ((hi) << (32 - (s))))
#endif
#endif
"""


class NotPackable(Exception):
    """The muscle uses something the packed form does not cover (the message says what)."""


@dataclass(frozen=True)
class PackedMuscle:
    """``source`` defines ``skp_muscle_packed``; ``reach`` = (north, south, west, east) read."""

    source: str
    reach: tuple[int, int, int, int]


# -- values ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Lin:
    """An 8-bit integer value as a linear form mod 256: ``const + sum(coef * atom)``.

    An atom is ``("r", dr, dc)`` (a read of the input) or ``("b", name)`` (a C word of 4
    exact bytes computed at the cell). Coefficients lie in [-128, 127] and are not 0."""

    terms: tuple[tuple[tuple, int], ...]
    const: int
    signed: bool


@dataclass(frozen=True)
class _Mask:
    """A bool per byte: bit 7 of ``name`` (``inv``: negated); ``name`` None: all ``inv``."""

    name: str | None
    inv: bool = False


def _coef(c: int) -> int:
    c %= 256
    return c - 256 if c >= 128 else c


def _lin(terms: dict, const: int, signed: bool) -> _Lin:
    kept = tuple(sorted(((a, _coef(c)) for a, c in terms.items() if _coef(c)), key=repr))
    return _Lin(kept, const % 256, signed)


def _scale(v: _Lin, k: int) -> _Lin:
    return _lin({a: c * k for a, c in v.terms}, v.const * k, v.signed)


def _add(a: _Lin, b: _Lin, sign: int, signed: bool) -> _Lin:
    terms = dict(a.terms)
    for atom, c in b.terms:
        terms[atom] = terms.get(atom, 0) + sign * c
    return _lin(terms, a.const + sign * b.const, signed)


# -- C emission -----------------------------------------------------------------------------


class _Emitter:
    """The statements of one packed body; identical expressions share one name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.memo: dict[str, str] = {}

    def let(self, expr: str) -> str:
        name = self.memo.get(expr)
        if name is None:
            name = self.memo[expr] = f"p{len(self.memo)}"
            self.lines.append(f"    const uint {name} = {expr};")
        return name

    # words, bytes and lanes -------------------------------------------------------------
    def word(self, dr: int, off: int) -> str:
        return self.let(f"w[{dr} * wp + {off}]")

    def halves(self, word: str) -> tuple[str, str]:
        return self.let(f"{word} & {_LO}"), self.let(f"({word} >> 8) & {_LO}")

    def shifted_bytes(self, dr: int, dc: int) -> str:
        """The 4 bytes of the input row ``dr`` at column offset ``dc`` from each cell."""
        if dc == 0:
            return self.word(dr, 0)
        q, s = divmod(dc, 4)                   # word offset and byte shift (s in 0..3)
        if s == 0:
            return self.word(dr, q)
        return self.let(f"SKP_FUNNEL({self.word(dr, q)}, {self.word(dr, q + 1)}, {8 * s})")

    def bytes_of(self, v: _Lin) -> str:
        if not v.terms:
            return f"{v.const * 0x01010101:#010x}u"
        if v.const == 0 and len(v.terms) == 1 and v.terms[0][1] == 1:
            atom = v.terms[0][0]
            return self.shifted_bytes(atom[1], atom[2]) if atom[0] == "r" else atom[1]
        e, o, _ = self.pair(v)
        return self.let(f"({e} & {_LO}) | (({o} << 8) & {_HI})")

    def normal_halves(self, v: _Lin) -> tuple[str, str]:
        """Even and odd bytes of ``v`` as 16-bit lanes holding exactly the byte (0..255)."""
        if v.const == 0 and len(v.terms) == 1 and v.terms[0][1] == 1:
            return self.halves(self.bytes_of(v))
        e, o, hi = self.pair(v)
        if hi <= 255:
            return e, o
        return self.let(f"{e} & {_LO}"), self.let(f"{o} & {_LO}")

    # linear forms in 16-bit lanes -------------------------------------------------------
    def pair(self, v: _Lin) -> tuple[str, str, int]:
        """(even, odd, hi): lanes in [0, hi], each congruent to its byte of ``v`` mod 256."""
        by_dc: dict[int, list] = {}
        rest = []
        for atom, c in v.terms:
            if atom[0] == "r":
                by_dc.setdefault(atom[2], []).append((atom[1], c))
            else:
                rest.append((self.halves(atom[1]) + (255,), c))
        parts = []
        for dc in sorted(by_dc):
            profile = tuple(sorted(by_dc[dc]))
            parts.append((self.shifted_sum(profile, dc), 1))
        parts.extend(rest)
        acc = self.combine(parts)
        if v.const:
            k = v.const * 0x10001
            e, o, hi = acc if acc is not None else ("0u", "0u", 0)
            if hi + v.const > _LANE_MAX:
                e, o, hi = self.normal(e, o, hi)
            acc = (self.let(f"{e} + {k:#x}u"), self.let(f"{o} + {k:#x}u"), hi + v.const)
        return acc if acc is not None else ("0u", "0u", 0)

    def normal(self, e: str, o: str, hi: int) -> tuple[str, str, int]:
        if hi <= 255:
            return e, o, hi
        return self.let(f"{e} & {_LO}"), self.let(f"{o} & {_LO}"), 255

    def combine(self, parts: list) -> tuple[str, str, int] | None:
        """sum(coef * pair) for ((even, odd, hi), coef) in ``parts``, lanes kept in range:
        negative coefficients are subtracted from a multiple of 256 above their sum."""
        pos = [(p, c) for p, c in parts if c > 0]
        neg = [(p, -c) for p, c in parts if c < 0]
        p_acc = self._sum(pos)
        n_acc = self._sum(neg)
        if n_acc is None:
            return p_acc
        if p_acc is None:
            p_acc = ("0u", "0u", 0)
        base = 256 * max(1, -(-n_acc[2] // 256))     # a multiple of 256 >= every lane of N
        if p_acc[2] + base > _LANE_MAX:
            p_acc, n_acc = self.normal(*p_acc), self.normal(*n_acc)
            base = 256
        k = f"{base * 0x10001:#x}u"
        e = self.let(f"{p_acc[0]} + ({k} - {n_acc[0]})")
        o = self.let(f"{p_acc[1]} + ({k} - {n_acc[1]})")
        return e, o, p_acc[2] + base

    def _sum(self, parts: list) -> tuple[str, str, int] | None:
        acc = None
        for (e, o, hi), c in parts:
            if c * hi > _LANE_MAX:
                e, o, hi = self.normal(e, o, hi)
            if c != 1:
                e, o, hi = self.let(f"{e} * {c}u"), self.let(f"{o} * {c}u"), hi * c
            if acc is None:
                acc = (e, o, hi)
                continue
            if acc[2] + hi > _LANE_MAX:
                acc = self.normal(*acc)
                if acc[2] + hi > _LANE_MAX:
                    e, o, hi = self.normal(e, o, hi)
            acc = (self.let(f"{acc[0]} + {e}"), self.let(f"{acc[1]} + {o}"), acc[2] + hi)
        return acc

    def column_sum(self, profile: tuple, off: int) -> tuple[str, str, int]:
        """sum(coef * row dr) at word offset ``off``, unshifted (lanes of that word)."""
        # the cell's own row last: a profile without it (Life's column of the cell) is then
        # the first part of one with it, and the two share their sum
        order = sorted(profile, key=lambda t: (t[0] == 0, t[0]))
        return self.combine([(self.halves(self.word(dr, off)) + (255,), c)
                             for dr, c in order])

    def shifted_sum(self, profile: tuple, dc: int) -> tuple[str, str, int]:
        """The column sum of ``profile`` at column offset ``dc`` from each cell."""
        out, hi = [], 0
        for parity in (0, 1):                  # the even lanes (bytes 0, 2), then odd
            q, b = divmod(parity + dc, 4)
            src, lane = b % 2, b // 2
            e, o, hi = self.column_sum(profile, q)
            word = (e, o)[src]
            if lane == 0:
                out.append(word)
                continue
            e1, o1, _ = self.column_sum(profile, q + 1)
            out.append(self.let(f"SKP_FUNNEL({word}, {(e1, o1)[src]}, 16)"))
        return out[0], out[1], hi

    # truth values -----------------------------------------------------------------------
    def nonzero(self, word: str) -> _Mask:
        return _Mask(self.let(f"((({word}) & {_M7}) + {_M7}) | ({word})"))

    def mask_word(self, m: _Mask) -> str:
        """Bit 7 of each byte is the truth (other bits unspecified)."""
        if m.name is None:
            return "0x80808080u" if m.inv else "0u"
        return self.let(f"~{m.name}") if m.inv else m.name

    def ones(self, m: _Mask) -> str:
        """0 or 1 per byte."""
        return self.let(f"({self.mask_word(m)} >> 7) & {_ONES}")


# -- the walk -------------------------------------------------------------------------------


class _Lowering:
    def __init__(self, tb: TypedBody):
        self.tb = tb
        self.em = _Emitter()
        self.env: dict[str, object] = {}
        self.reads: set[tuple[int, int]] = set()

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
        for st in body[:-1]:
            if isinstance(st, ast.Pass):
                continue
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                    isinstance(st.targets[0], ast.Name):
                self.assign(st.targets[0].id, self.expr(st.value), st)
            elif isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name):
                self.assign(st.target.id, self.expr(self.tb.synth[st]), st)
            else:
                self.fail(st, f"a {type(st).__name__} statement")
        return self.result(self.expr(body[-1].value), body[-1].value, out_dtype)

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
            if not isinstance(value, _Mask):
                value = self.compare_const(self.as_lin(value, node, False), ast.NotEq(), 0,
                                           False)
            return em.ones(value)
        if isinstance(value, _Mask):
            return em.ones(value)
        return em.bytes_of(self.as_lin(value, node, out_dtype == np.dtype(np.int8)))

    # expressions ------------------------------------------------------------------------
    def as_lin(self, v, node, signed: bool) -> _Lin:
        if isinstance(v, _Lin):
            return v
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            self.fail(node, "a value that is not an 8-bit integer")
        return _Lin((), int(v) % 256, signed)

    def as_mask(self, v, node) -> _Mask:
        if isinstance(v, _Mask):
            return v
        if isinstance(v, (bool, np.bool_)):
            return _Mask(None, bool(v))
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
        v = self.env.get(node.id)
        if v is None:
            self.fail(node, f"the name {node.id!r}")
        return v

    def _Subscript(self, node):
        note = self.tb.notes.get(node)
        if note is None or not isinstance(note.meaning, AccessorRead) or \
                note.meaning.param.index != 0 or len(note.meaning.indices) != 2:
            self.fail(node, "a subscript that is not a read of the neighbourhood")
        offs = [self.tb.const(i) for i in note.meaning.indices]
        if any(o is NO_CONST or isinstance(o, bool) or not isinstance(o, (int, np.integer))
               for o in offs):
            self.fail(node, "a neighbourhood read at a computed offset")
        dr, dc = (int(o) for o in offs)
        self.reads.add((dr, dc))
        if abs(dc) > MAX_REACH:
            self.fail(node, f"a read {dc} columns away (at most {MAX_REACH})")
        return _Lin(((("r", dr, dc), 1),), 0, self.int8(node))

    def _BinOp(self, node):
        op = node.op
        if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and \
                self.ty(node).dtype == _BOOL:
            a = self.em.mask_word(self.as_mask(self.expr(node.left), node))
            b = self.em.mask_word(self.as_mask(self.expr(node.right), node))
            sym = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}[type(op)]
            return _Mask(self.em.let(f"{a} {sym} {b}"))
        signed = self.int8(node)
        a = self.as_lin(self.expr(node.left), node, signed)
        b = self.as_lin(self.expr(node.right), node, signed)
        if isinstance(op, ast.Add):
            return _add(a, b, 1, signed)
        if isinstance(op, ast.Sub):
            return _add(a, b, -1, signed)
        if isinstance(op, ast.Mult):
            if not a.terms:
                return _scale(b, a.const)
            if not b.terms:
                return _scale(a, b.const)
            self.fail(node, "a product of two values that are not constants")
        if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            sym = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}[type(op)]
            word = self.em.let(f"{self.em.bytes_of(a)} {sym} {self.em.bytes_of(b)}")
            return _Lin(((("b", word), 1),), 0, signed)
        self.fail(node, f"the operator {type(op).__name__}")

    def _UnaryOp(self, node):
        op = node.op
        if isinstance(op, ast.Not) or (isinstance(op, ast.Invert)
                                       and self.ty(node).dtype == _BOOL):
            v = self.expr(node.operand)
            if not isinstance(v, _Mask):       # `not x` of an integer: x == 0
                t = self.ty(node.operand)
                if t.weak or t.dtype not in _INT8:
                    self.fail(node, f"not of a {t} value")
                v = self.compare_const(self.as_lin(v, node, False), ast.Eq(), 0, False)
                return v
            return _Mask(v.name, not v.inv)
        signed = self.int8(node)
        v = self.as_lin(self.expr(node.operand), node, signed)
        if isinstance(op, ast.UAdd):
            return v
        if isinstance(op, ast.USub):
            return _scale(v, -1)
        if isinstance(op, ast.Invert):         # ~x == -x - 1 (mod 256)
            return _add(_scale(v, -1), _Lin((), 255, signed), 1, signed)
        self.fail(node, f"the operator {type(op).__name__}")

    def _BoolOp(self, node):
        if self.ty(node).dtype != _BOOL or self.ty(node).weak:
            self.fail(node, "and/or of values that are not bools")
        words = [self.em.mask_word(self.as_mask(self.expr(v), node)) for v in node.values]
        sym = " & " if isinstance(node.op, ast.And) else " | "
        return _Mask(self.em.let(sym.join(words)))

    def _IfExp(self, node):
        test = self.as_mask(self.expr(node.test), node)
        t = self.ty(node)
        em = self.em
        if t.dtype == _BOOL and not t.weak:
            a = em.mask_word(self.as_mask(self.expr(node.body), node))
            b = em.mask_word(self.as_mask(self.expr(node.orelse), node))
            m = em.mask_word(test)
            return _Mask(em.let(f"({m} & {a}) | (~{m} & {b})"))
        signed = self.int8(node)
        a = em.bytes_of(self.as_lin(self.expr(node.body), node, signed))
        b = em.bytes_of(self.as_lin(self.expr(node.orelse), node, signed))
        m = em.let(f"{em.ones(test)} * 0xffu")
        word = em.let(f"({m} & {a}) | (~{m} & {b})")
        return _Lin(((("b", word), 1),), 0, signed)

    def _Compare(self, node):
        if len(node.ops) != 1:
            self.fail(node, "a chained comparison")
        op, (ln, rn) = node.ops[0], (node.left, node.comparators[0])
        lv, rv = self.expr(ln), self.expr(rn)
        if isinstance(lv, _Mask) or isinstance(rv, _Mask) or isinstance(lv, bool) \
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
    def compare_const(self, a: _Lin, op, k: int, signed: bool) -> _Mask:
        lo, hi = (-128, 127) if signed else (0, 255)
        if not lo <= k <= hi:                  # exact, as NumPy compares with a Python int
            truth = {ast.Eq: False, ast.NotEq: True, ast.Lt: k > hi, ast.LtE: k > hi,
                     ast.Gt: k < lo, ast.GtE: k < lo}[type(op)]
            return _Mask(None, truth)
        return self.compare(a, op, _Lin((), k % 256, signed), signed)

    def compare(self, a: _Lin, op, b: _Lin, signed: bool) -> _Mask:
        em = self.em
        if isinstance(op, (ast.Eq, ast.NotEq)):
            diff = em.let(f"{em.bytes_of(a)} ^ {b.const * 0x01010101:#010x}u") \
                if not b.terms else em.bytes_of(_add(a, b, -1, signed))
            m = em.nonzero(diff)
            return m if isinstance(op, ast.NotEq) else _Mask(m.name, True)
        if isinstance(op, (ast.Gt, ast.LtE)):  # a > b == not (b >= a)
            a, b = b, a
        ge = self.greater_equal(a, b, signed)
        return ge if isinstance(op, (ast.GtE, ast.LtE)) else _Mask(ge.name, True)

    def greater_equal(self, a: _Lin, b: _Lin, signed: bool) -> _Mask:
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
        return _Mask(em.let(f"(({ge_e} >> 1) & 0x00800080u) | (({ge_o} << 7) & 0x80008000u)"))

    def ordered_halves(self, v: _Lin, flip: int) -> tuple[str, str]:
        if flip:
            word = self.em.let(f"{self.em.bytes_of(v)} ^ 0x80808080u")
            return self.em.halves(word)
        return self.em.normal_halves(v)


def lower(tb: TypedBody, out_dtype) -> PackedMuscle:
    """The packed form of a one-byte stencil muscle (raises :class:`NotPackable`)."""
    lw = _Lowering(tb)
    ret = lw.run(np.dtype(out_dtype))
    em = lw.em
    reads = lw.reads or {(0, 0)}
    north = max(0, -min(dr for dr, _ in reads))
    south = max(0, max(dr for dr, _ in reads))
    west = max(0, -min(dc for _, dc in reads))
    east = max(0, max(dc for _, dc in reads))
    src = (_FUNNEL
           + "static inline uint skp_muscle_packed(__private const uint* w, const int wp)\n{\n"
           + "\n".join(em.lines) + f"\n    return {ret};\n}}\n")
    return PackedMuscle(src, (north, south, west, east))
