"""Small OpenCL C helpers that give Python/NumPy semantics where C differs.

C truncates integer division, traps on ``INT_MIN / -1`` and on division by zero, has undefined
shifts past the bit width and no floor-modulo; NumPy defines all of these.  Each helper is emitted
once per program (guarded with ``#ifndef``) so that several muscles can share one program.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import c_type


def _u(dt: np.dtype) -> str:
    """The unsigned C type wide enough to compute ``dt`` modulo 2**bits without UB."""
    return "ulong" if dt.itemsize == 8 else "uint"


def _lit_half(t: str) -> str:
    return "0.5f" if t == "float" else "0.5"


class CLib:
    """Collects the helpers a muscle needs, in dependency order."""

    def __init__(self) -> None:
        self.parts: dict[str, str] = {}

    def _add(self, name: str, body: str) -> str:
        if name not in self.parts:
            self.parts[name] = (f"#ifndef SKELPY_HELPER_{name}\n#define SKELPY_HELPER_{name}\n"
                                f"{body.strip()}\n#endif\n")
        return name

    def source(self) -> str:
        return "".join(self.parts.values())

    # -- integer helpers ----------------------------------------------------------------------

    def floordiv(self, dt: np.dtype) -> str:
        t = c_type(dt)
        name = f"skelpy_floordiv_{t}"
        if dt.kind == "f":
            h = _lit_half(t)
            return self._add(name, f"""
static inline {t} {name}({t} a, {t} b) {{
    if (b == 0) return a / b;
    {t} mod = fmod(a, b);
    {t} div = (a - mod) / b;
    if (mod != 0) {{
        if ((b < 0) != (mod < 0)) div -= 1;
    }}
    if (div != 0) {{
        {t} fl = floor(div);
        if (div - fl > {h}) fl += 1;
        return fl;
    }}
    return copysign(({t})0, a / b);
}}""")
        if dt.kind == "u":
            return self._add(name, f"static inline {t} {name}({t} a, {t} b) "
                                   f"{{ return b == 0 ? ({t})0 : ({t})(a / b); }}")
        u = _u(dt)
        return self._add(name, f"""
static inline {t} {name}({t} a, {t} b) {{
    if (b == 0) return ({t})0;
    if (b == ({t})-1) return ({t})(({u})0 - ({u})a);
    {t} q = ({t})(a / b);
    if (({t})(a % b) != 0 && ((a < 0) != (b < 0))) q = ({t})(q - 1);
    return q;
}}""")

    def mod(self, dt: np.dtype) -> str:
        t = c_type(dt)
        name = f"skelpy_mod_{t}"
        if dt.kind == "f":
            return self._add(name, f"""
static inline {t} {name}({t} a, {t} b) {{
    {t} mod = fmod(a, b);
    if (b == 0) return mod;
    if (mod != 0) {{
        if ((b < 0) != (mod < 0)) mod += b;
    }} else {{
        mod = copysign(({t})0, b);
    }}
    return mod;
}}""")
        if dt.kind == "u":
            return self._add(name, f"static inline {t} {name}({t} a, {t} b) "
                                   f"{{ return b == 0 ? ({t})0 : ({t})(a % b); }}")
        return self._add(name, f"""
static inline {t} {name}({t} a, {t} b) {{
    if (b == 0 || b == ({t})-1) return ({t})0;
    {t} r = ({t})(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = ({t})(r + b);
    return r;
}}""")

    def fmod(self, dt: np.dtype) -> str:
        """np.fmod: remainder with the sign of the dividend (C ``%``), 0 on division by zero."""
        t = c_type(dt)
        name = f"skelpy_fmod_{t}"
        if dt.kind == "f":
            return "fmod"
        guard = f"b == 0 || b == ({t})-1" if dt.kind == "i" else "b == 0"
        return self._add(name, f"static inline {t} {name}({t} a, {t} b) "
                               f"{{ return ({guard}) ? ({t})0 : ({t})(a % b); }}")

    def iabs(self, dt: np.dtype) -> str:
        """abs() of a signed integer, wrapping as NumPy's (``abs(INT_MIN)`` is INT_MIN). Not
        OpenCL's ``abs``: PoCL lowers it to llvm.abs with INT_MIN as poison, so clang took
        ``abs(x) < 0`` as false and widened ``abs(x)`` to 2**31 for x = INT_MIN. ``max(x, -x)``
        with a wrapping negation is exact, and stays a builtin call for oclgrind (which knows
        no llvm.abs, what the open-coded ``x < 0 ? -x : x`` becomes)."""
        t = c_type(dt)
        u = _u(dt)
        name = f"skelpy_abs_{t}"
        return self._add(name, f"static inline {t} {name}({t} x) "
                               f"{{ return max(x, ({t})(({u})0 - ({u})x)); }}")

    def range_len(self) -> str:
        """``len(range(b, e, s))`` without overflow (0 for a step of 0)."""
        return self._add("skelpy_range_len", """
static inline ulong skelpy_range_len(long b, long e, long s) {
    if (s > 0) return b < e ? ((ulong)e - (ulong)b - 1) / (ulong)s + 1 : 0;
    if (s < 0) return b > e ? ((ulong)b - (ulong)e - 1) / ((ulong)0 - (ulong)s) + 1 : 0;
    return 0;
}""")

    def float_to_ulong(self, src: np.dtype) -> str:
        """NumPy's float -> uint64: a negative value wraps through int64 (-1.0 -> 2**64 - 1),
        where C leaves it undefined."""
        t = c_type(src)
        name = f"skelpy_{t}_to_ulong"
        return self._add(name, f"static inline ulong {name}({t} x) "
                               "{ return x < 0 ? (ulong)(long)x : (ulong)x; }")

    def ipow(self, dt: np.dtype) -> str:
        t = c_type(dt)
        u = _u(dt)
        name = f"skelpy_ipow_{t}"
        neg = ""
        if dt.kind == "i":
            neg = (f"    if (b < 0) return ({t})(a == 1 ? 1 : "
                   f"(a == ({t})-1 ? ((b & 1) ? -1 : 1) : 0));\n")
        return self._add(name, f"""
static inline {t} {name}({t} a, {t} b) {{
{neg}    {u} r = 1, x = ({u})a;
    ulong e = (ulong)b;
    while (e) {{
        if (e & 1) r *= x;
        x *= x;
        e >>= 1;
    }}
    return ({t})r;
}}""")

    def shift(self, dt: np.dtype, left: bool) -> str:
        t = c_type(dt)
        u = _u(dt)
        bits = dt.itemsize * 8
        name = f"skelpy_{'shl' if left else 'shr'}_{t}"
        out_of_range = f"b >= {bits}" if dt.kind == "u" else f"b < 0 || b >= {bits}"
        if left:
            body = f"return ({out_of_range}) ? ({t})0 : ({t})(({u})a << b);"
        else:
            fill = f"({t})(a < 0 ? -1 : 0)" if dt.kind == "i" else f"({t})0"
            body = f"return ({out_of_range}) ? {fill} : ({t})(a >> b);"
        return self._add(name, f"static inline {t} {name}({t} a, {t} b) {{ {body} }}")

    # -- float helpers ------------------------------------------------------------------------

    def sign(self, dt: np.dtype) -> str:
        t = c_type(dt)
        name = f"skelpy_sign_{t}"
        if dt.kind == "f":
            body = (f"return x > 0 ? ({t})1 : (x < 0 ? ({t})-1 : (x == 0 ? ({t})0 : x));")
        elif dt.kind == "u":
            body = f"return ({t})(x > 0);"
        else:
            body = f"return ({t})((x > 0) - (x < 0));"
        return self._add(name, f"static inline {t} {name}({t} x) {{ {body} }}")

    def minmax(self, dt: np.dtype, kind: str) -> str:
        """kind: 'minimum'/'maximum' (NaN-propagating, np.minimum), 'pymin'/'pymax' (builtins)."""
        t = c_type(dt)
        name = f"skelpy_{kind}_{t}"
        if kind == "pymin":
            body = "return (b < a) ? b : a;"
        elif kind == "pymax":
            body = "return (b > a) ? b : a;"
        else:
            cmp = "<" if kind == "minimum" else ">"
            if dt.kind == "f":
                body = f"return isnan(a) ? a : (isnan(b) ? b : ((a {cmp} b) ? a : b));"
            else:
                body = f"return (a {cmp} b) ? a : b;"
        return self._add(name, f"static inline {t} {name}({t} a, {t} b) {{ {body} }}")

    def clip(self, dt: np.dtype) -> str:
        t = c_type(dt)
        name = f"skelpy_clip_{t}"
        mx = self.minmax(dt, "maximum")
        mn = self.minmax(dt, "minimum")
        return self._add(name, f"static inline {t} {name}({t} x, {t} lo, {t} hi) "
                               f"{{ return {mn}({mx}(x, lo), hi); }}")

    def small_pow(self, dt: np.dtype, n: int) -> str:
        """x**n for a small constant n >= 2 by multiplication (NumPy's fast path)."""
        t = c_type(dt)
        name = f"skelpy_pow{n}_{t}"
        if dt.kind == "f":
            w, back = t, ""
        else:
            w, back = _u(dt), f"({t})"
        if n == 2:
            expr = "x * x"
        elif n == 3:
            expr = "x * x * x"
        else:
            expr = "(x * x) * (x * x)" + " * x" * (n - 4)
        return self._add(name, f"static inline {t} {name}({t} x0) "
                               f"{{ {w} x = ({w})x0; return {back}({expr}); }}")

    def cmp_mixed(self, op: str, unsigned_left: bool) -> str:
        """Exact comparison of ulong with long (NumPy compares these exactly)."""
        names = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
        name = f"skelpy_cmp_{'ul' if unsigned_left else 'lu'}_{names[op]}"
        if unsigned_left:
            # a: ulong, b: long; b < 0 means a > b
            neg = {"<": "false", "<=": "false", ">": "true", ">=": "true", "==": "false",
                   "!=": "true"}[op]
            return self._add(name, f"static inline bool {name}(ulong a, long b) "
                                   f"{{ return b < 0 ? {neg} : (a {op} (ulong)b); }}")
        neg = {"<": "true", "<=": "true", ">": "false", ">=": "false", "==": "false",
               "!=": "true"}[op]
        return self._add(name, f"static inline bool {name}(long a, ulong b) "
                               f"{{ return a < 0 ? {neg} : ((ulong)a {op} b); }}")

    def widx(self) -> str:
        return self._add("skelpy_widx", "static inline long skelpy_widx(long i, long n) "
                                        "{ return i < 0 ? i + n : i; }")

    def check(self) -> str:
        """``skp_check``: the checked index of debug mode and of run-time stencil offsets
        (see checks.py): ``i`` when ``lo <= i < hi``; otherwise the first failure records
        (site, i, lo, hi) in the check buffer and a value inside the range is used instead."""
        return self._add("skp_check", """
static inline long skp_check(__global long* skp_dbg, const long i, const long lo,
                             const long hi, const long site) {
    if (i >= lo && i < hi) return i;
    if (atomic_cmpxchg((volatile __global int*)skp_dbg, 0, 1) == 0) {
        skp_dbg[1] = site;
        skp_dbg[2] = i;
        skp_dbg[3] = lo;
        skp_dbg[4] = hi;
    }
    return (i < lo || hi <= lo) ? lo : hi - 1;
}""")
