"""SIMD within a register for one-byte cells: the values and C operations of packed muscles.

Four one-byte cells share a 32-bit word. :class:`Lin` is an 8-bit integer value as a linear
form mod 256 over reads and computed words; :class:`Mask` a truth per byte (bit 7). The
:class:`Emitter` writes the C of their operations: words of the input window shifted by whole
bytes, the even and odd bytes as two words of 16-bit lanes (sums there never carry into the
next cell while their tracked range stays under 2^16; the low byte is the value mod 256),
bytes packed back, and the byte tests. ``packed.py`` walks a muscle's typed body with them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FUNNEL", "Emitter", "Lin", "Mask", "add", "make_lin", "scale"]

_LO = "0x00ff00ffu"               # the low byte of each 16-bit lane
_HI = "0xff00ff00u"
_M7 = "0x7f7f7f7fu"
_ONES = "0x01010101u"
_LANE_MAX = 0xFFFF

# The 32 bits from bit s of the 64-bit word hi:lo (s a multiple of 8). clang makes the shift
# pair an llvm.fshl, which oclgrind does not know: there (SKP_SIMULATOR, program_builder.py)
# a byte shuffle instead.
FUNNEL = """#ifndef SKP_FUNNEL
#if defined(SKP_SIMULATOR) && SKP_SIMULATOR
#define SKP_FUNNEL(lo, hi, s) as_uint(shuffle2(as_uchar4(lo), as_uchar4(hi), \\
    (uchar4)((s) / 8, (s) / 8 + 1, (s) / 8 + 2, (s) / 8 + 3)))
#else
#define SKP_FUNNEL(lo, hi, s) (((lo) >> (s)) | ((hi) << (32 - (s))))
#endif
#endif
"""


# -- values ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lin:
    """An 8-bit integer value as a linear form mod 256: ``const + sum(coef * atom)``.

    An atom is ``("r", dr, dc)`` (a read of the input) or ``("b", name)`` (a C word of 4
    exact bytes computed at the cell). Coefficients lie in [-128, 127] and are not 0."""

    terms: tuple[tuple[tuple, int], ...]
    const: int
    signed: bool

    @property
    def atom(self) -> tuple | None:
        """The one atom this value is (coefficient 1, no constant), else None."""
        if self.const == 0 and len(self.terms) == 1 and self.terms[0][1] == 1:
            return self.terms[0][0]
        return None


@dataclass(frozen=True)
class Mask:
    """A bool per byte: bit 7 of ``name`` (``inv``: negated); ``name`` None: all ``inv``."""

    name: str | None
    inv: bool = False


def _coef(c: int) -> int:
    c %= 256
    return c - 256 if c >= 128 else c


def make_lin(terms: dict, const: int, signed: bool) -> Lin:
    kept = tuple(sorted(((a, _coef(c)) for a, c in terms.items() if _coef(c)), key=repr))
    return Lin(kept, const % 256, signed)


def scale(v: Lin, k: int) -> Lin:
    return make_lin({a: c * k for a, c in v.terms}, v.const * k, v.signed)


def add(a: Lin, b: Lin, sign: int, signed: bool) -> Lin:
    terms = dict(a.terms)
    for atom, c in b.terms:
        terms[atom] = terms.get(atom, 0) + sign * c
    return make_lin(terms, a.const + sign * b.const, signed)


# -- C emission -----------------------------------------------------------------------------


class Emitter:
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

    def bytes_of(self, v: Lin) -> str:
        if not v.terms:
            return f"{v.const * 0x01010101:#010x}u"
        atom = v.atom
        if atom is not None:
            return self.shifted_bytes(atom[1], atom[2]) if atom[0] == "r" else atom[1]
        e, o, _ = self.pair(v)
        return self.let(f"({e} & {_LO}) | (({o} << 8) & {_HI})")

    def normal_halves(self, v: Lin) -> tuple[str, str]:
        """Even and odd bytes of ``v`` as 16-bit lanes holding exactly the byte (0..255)."""
        if v.atom is not None:
            return self.halves(self.bytes_of(v))
        e, o, hi = self.pair(v)
        if hi <= 255:
            return e, o
        return self.let(f"{e} & {_LO}"), self.let(f"{o} & {_LO}")

    # linear forms in 16-bit lanes -------------------------------------------------------
    def pair(self, v: Lin) -> tuple[str, str, int]:
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
        out = []
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
    def nonzero(self, word: str) -> Mask:
        return Mask(self.let(f"((({word}) & {_M7}) + {_M7}) | ({word})"))

    def mask_word(self, m: Mask) -> str:
        """Bit 7 of each byte is the truth (other bits unspecified)."""
        if m.name is None:
            return "0x80808080u" if m.inv else "0u"
        return self.let(f"~{m.name}") if m.inv else m.name

    def ones(self, m: Mask) -> str:
        """0 or 1 per byte."""
        return self.let(f"({self.mask_word(m)} >> 7) & {_ONES}")
