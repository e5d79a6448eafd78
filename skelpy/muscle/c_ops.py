"""C text for single operations, with NumPy's semantics where C's differ.

Operands arrive as C expressions already converted to the dtype the operation computes in.
Integer ``+ - *`` wrap like NumPy (computed unsigned where C would overflow), ``//``, ``%``,
shifts and ``**`` go through the helpers of ``clib.py``, ``x**2`` is a multiplication as in
NumPy's fast paths. :class:`CCode` also counts every operation for the tuner's features and
notes whether double precision appears (the program then needs ``cl_khr_fp64``).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import c_type
from . import funcs as F
from .clib import CLib
from .dtyping import BINOPS, BOOL, FLOAT64, c_literal
from .features import FeatureCounter
from .source import MISSING


class CCode:
    """Writes the C of operations; collects the C helpers, features and fp64 use."""

    def __init__(self) -> None:
        self.clib = CLib()
        self.features = FeatureCounter()
        self.fp64 = False

    def note(self, dt) -> None:
        if dt == FLOAT64:
            self.fp64 = True

    def cast(self, code: str, src: np.dtype, dst: np.dtype) -> str:
        if src == dst:
            return code
        self.note(dst)
        if src.kind == "f" and dst.kind in "iu" and dst.itemsize < 8 \
                and not (dst.kind == "i" and dst.itemsize == 4):
            # NumPy truncates to a wide integer and wraps (-1.0 -> uint8 255, 300.0 -> 44);
            # C leaves a value outside the narrow type undefined (PoCL gave 0 or the maximum)
            wide = "long" if dst.itemsize == 4 else "int"
            return f"(({c_type(dst)})({wide}){code})"
        if src.kind == "f" and dst.kind == "u":
            return f"{self.clib.float_to_ulong(src)}({code})"
        return f"(({c_type(dst)}){code})"

    def arith(self, op: str, a: str, b: str, d: np.dtype, out: np.dtype, exponent,
              wrap: bool) -> str:
        """C for ``a op b`` computed in dtype ``d`` giving ``out`` (``exponent``: the constant
        value of ``b`` for ``**``, or MISSING)."""
        T = c_type(d)
        k = d.kind
        fp64 = d == FLOAT64
        fk = "f" if k == "f" else "i"
        feat, clib = self.features, self.clib
        if op in ("Add", "Sub", "Mult"):
            sym = BINOPS[op][2]
            feat.op("ops_mul" if op == "Mult" else "ops_add", fk, fp64)
            if k == "f":
                code = f"({a} {sym} {b})"
            elif k == "b":
                code = f"((bool)({a} {sym} {b}))"
            elif not wrap or (k == "u" and d.itemsize >= 4):
                code = f"({a} {sym} {b})"
            else:
                u = "ulong" if d.itemsize == 8 else "uint"
                code = f"(({T})(({u}){a} {sym} ({u}){b}))"
        elif op == "Div":
            feat.op("ops_div", fk, fp64)
            code = f"({a} / {b})"
        elif op == "FloorDiv":
            feat.op("ops_div", fk, fp64)
            code = f"{clib.floordiv(d)}({a}, {b})"
        elif op == "Mod":
            feat.op("ops_div", fk, fp64)
            code = f"{clib.mod(d)}({a}, {b})"
        elif op == "Pow":
            code = self.power(a, b, d, exponent)
        elif op in ("LShift", "RShift"):
            feat.op("ops_logic", fk)
            code = f"{clib.shift(d, op == 'LShift')}({a}, {b})"
        else:
            sym = BINOPS[op][2]
            feat.op("ops_logic", fk)
            code = f"(({T})({a} {sym} {b}))"
        if out != d:
            code = self.cast(code, d, out)
        return code

    def power(self, a: str, b: str, d: np.dtype, exponent) -> str:
        fk = "f" if d.kind == "f" else "i"
        fp64 = d == FLOAT64
        feat = self.features
        if exponent is not MISSING and not isinstance(exponent, bool):
            cv = float(exponent)
            # NumPy's fast paths: x**0, x**1, x**2 (square), x**0.5 (sqrt), x**-1 (reciprocal);
            # other float exponents go through pow() as in NumPy; ints are exact either way
            if cv.is_integer() and 0 <= cv <= (8 if d.kind != "f" else 2):
                n = int(cv)
                if n == 0:
                    return c_literal(1, d)
                if n == 1:
                    return a
                feat.op("ops_mul", fk, fp64, n - 1)
                return f"{self.clib.small_pow(d, n)}({a})"
            if d.kind == "f" and cv == 0.5:
                feat.op("ops_math", fk, fp64)
                return f"sqrt({a})"
            if d.kind == "f" and cv == -1.0:
                feat.op("ops_div", fk, fp64)
                return f"({c_literal(1, d)} / {a})"
        if d.kind == "f":
            feat.op("ops_math", fk, fp64)
            return f"pow({a}, {b})"
        feat.op("ops_mul", fk, n=4)
        if d.kind == "b":
            return f"((bool)({b} ? {a} : true))"
        return f"{self.clib.ipow(d)}({a}, {b})"

    def unary(self, op: str, a: str, d: np.dtype, out: np.dtype, wrap: bool = True) -> str:
        T = c_type(d)
        fk = "f" if d.kind == "f" else "i"
        if op == "UAdd":
            return self.cast(a, d, out)
        if op == "USub":
            self.features.op("ops_add", fk, d == FLOAT64)
            if d.kind == "f" or not wrap:
                code = f"(-{a})"
            else:
                u = "ulong" if d.itemsize == 8 else "uint"
                code = f"(({T})(-({u}){a}))"
        else:  # Invert
            self.features.op("ops_logic", fk)
            code = f"(!{a})" if d.kind == "b" else f"(({T})(~{a}))"
        return self.cast(code, d, out)

    def function(self, canon: str, codes: list[str], d: np.dtype, out: np.dtype) -> str:
        """C for a math function with arguments already in dtype ``d``."""
        k = d.kind
        fp64 = d == FLOAT64
        fk = "f" if k == "f" else "i"
        feat, clib = self.features, self.clib
        a = codes[0]
        if canon in F.UNARY_FLOAT_C and canon != "fabs" or canon == "log":
            feat.op("ops_math", fk, fp64)
            if canon == "log" and len(codes) == 2:
                code = f"(log({a}) / log({codes[1]}))"
            else:
                code = f"{F.UNARY_FLOAT_C[canon]}({a})"
        elif canon in F.BINARY_FLOAT_C:
            feat.op("ops_math", fk, fp64)
            code = f"{F.BINARY_FLOAT_C[canon]}({a}, {codes[1]})"
        elif canon in ("deg2rad", "rad2deg"):
            feat.op("ops_mul", fk, fp64)
            f = np.pi / 180 if canon == "deg2rad" else 180 / np.pi
            code = f"({a} * {c_literal(f, d)})"
        elif canon in F.ROUNDING:
            if k == "f":
                feat.op("ops_math", fk, fp64)
                code = f"{canon}({a})"
            else:
                code = a
        elif canon == "fabs":
            feat.op("ops_math", fk, fp64)
            code = f"fabs({a})"
        elif canon == "abs":
            feat.op("ops_math", fk, fp64)
            if k == "f":
                code = f"fabs({a})"
            elif k == "i":
                code = f"{clib.iabs(d)}({a})"
            else:
                code = a
        elif canon == "sign":
            feat.op("ops_cmp", fk, fp64, 2)
            code = f"{clib.sign(d)}({a})"
        elif canon == "square":
            feat.op("ops_mul", fk, fp64)
            code = f"{clib.small_pow(d, 2)}({a})" if k != "b" else a
        elif canon == "fmod":
            feat.op("ops_div", fk, fp64)
            code = f"{clib.fmod(d)}({a}, {codes[1]})"
        elif canon in ("power", "mpow"):
            code = self.power(a, codes[1], d, MISSING)
        elif canon in ("minimum", "maximum"):
            feat.op("ops_cmp", fk, fp64)
            if k == "b":
                code = f"({a} {'&&' if canon == 'minimum' else '||'} {codes[1]})"
            else:
                code = f"{clib.minmax(d, canon)}({a}, {codes[1]})"
        elif canon in ("fmin", "fmax"):
            feat.op("ops_cmp", fk, fp64)
            if k == "b":
                code = f"({a} {'&&' if canon == 'fmin' else '||'} {codes[1]})"
            elif k == "f":
                code = f"{canon}({a}, {codes[1]})"
            else:
                code = f"{canon[1:]}({a}, {codes[1]})"
        elif canon in F.PREDICATES:
            feat.op("ops_cmp", fk, fp64)
            if k == "f":
                code = f"((bool){canon}({a}))"
            elif canon == "signbit":
                code = f"({a} < 0)" if k == "i" else "false"
            else:
                code = "true" if canon == "isfinite" else "false"
        elif canon in ("logical_and", "logical_or", "logical_xor", "logical_not"):
            feat.op("ops_logic", "b")
            bs = [c if d == BOOL else f"({c} != 0)" for c in codes]
            if canon == "logical_not":
                return f"(!{bs[0]})"
            sym = {"logical_and": "&&", "logical_or": "||", "logical_xor": "!="}[canon]
            return f"({bs[0]} {sym} {bs[1]})"
        else:  # pragma: no cover - every canonical name is handled above
            raise AssertionError(canon)
        return self.cast(code, d, out) if out != BOOL or d == BOOL else code
