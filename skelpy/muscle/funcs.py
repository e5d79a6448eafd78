"""The math/NumPy/builtin functions a muscle may call, keyed by the function *object*.

Keying by identity (not by the spelling in the source) means ``import numpy as xp``,
``from math import sqrt`` and closures all work, and a user function that happens to be called
``sqrt`` is never mistaken for the builtin.
"""

from __future__ import annotations

import builtins
import math
import operator
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FuncSpec:
    """canonical: our name of the operation; family: 'math' and 'builtin' functions keep Python
    scalars weak (``math.sqrt(2.0)`` is a Python float), 'numpy' ones make them strong NumPy
    scalars (``np.sqrt(2.0)`` is an ``np.float64``)."""

    canonical: str
    family: str
    nargs: tuple[int, ...]
    ufunc: np.ufunc | None = None


# canonical name -> OpenCL C builtin (float arguments)
UNARY_FLOAT_C = {
    "sqrt": "sqrt", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2",
    "log10": "log10", "log1p": "log1p", "sin": "sin", "cos": "cos", "tan": "tan",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh",
    "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "cbrt": "cbrt",
    "erf": "erf", "erfc": "erfc", "gamma": "tgamma", "lgamma": "lgamma", "fabs": "fabs",
}
BINARY_FLOAT_C = {"arctan2": "atan2", "hypot": "hypot", "copysign": "copysign",
                  "float_power": "pow"}
ROUNDING = {"floor", "ceil", "trunc", "rint"}
PREDICATES = {"isnan", "isinf", "isfinite", "signbit"}

FUNCS: dict[object, FuncSpec] = {}


def _reg(obj, canonical: str, family: str, nargs=(1,), ufunc=None) -> None:
    if obj is None:
        return
    FUNCS.setdefault(obj, FuncSpec(canonical, family, tuple(nargs), ufunc))


def _build() -> None:
    unary_np = {
        "sqrt": np.sqrt, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log,
        "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos,
        "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
        "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "arcsinh": np.arcsinh,
        "arccosh": np.arccosh, "arctanh": np.arctanh, "cbrt": np.cbrt, "floor": np.floor,
        "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "fabs": np.fabs,
        "abs": np.absolute, "sign": np.sign, "square": np.square, "isnan": np.isnan,
        "isinf": np.isinf, "isfinite": np.isfinite, "signbit": np.signbit,
        "deg2rad": np.deg2rad, "rad2deg": np.rad2deg, "logical_not": np.logical_not,
    }
    for canon, uf in unary_np.items():
        _reg(uf, canon, "numpy", (1,), uf)
    _reg(np.radians, "deg2rad", "numpy", (1,), np.radians)
    _reg(np.degrees, "rad2deg", "numpy", (1,), np.degrees)
    _reg(np.fix, "trunc", "numpy", (1,), np.trunc)
    # np.round is rint of floats and bools, but keeps integers as they are (np.rint(int8) is
    # a float16): see infer_calls
    _reg(np.round, "around", "numpy", (1,), np.rint)
    _reg(getattr(np, "around", None), "around", "numpy", (1,), np.rint)
    binary_np = {
        "arctan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign, "fmod": np.fmod,
        "power": np.power, "float_power": np.float_power, "minimum": np.minimum,
        "maximum": np.maximum, "fmin": np.fmin, "fmax": np.fmax,
        "logical_and": np.logical_and, "logical_or": np.logical_or,
        "logical_xor": np.logical_xor,
        "add": np.add, "subtract": np.subtract, "multiply": np.multiply,
        "true_divide": np.true_divide, "floor_divide": np.floor_divide,
        "remainder": np.remainder, "bitwise_and": np.bitwise_and,
        "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    }
    for canon, uf in binary_np.items():
        _reg(uf, canon, "numpy", (2,), uf)
    _reg(np.negative, "negative", "numpy", (1,), np.negative)
    _reg(np.clip, "clip", "numpy", (3,))
    _reg(np.where, "where", "numpy", (3,))

    unary_math = {
        "sqrt": math.sqrt, "exp": math.exp, "exp2": getattr(math, "exp2", None),
        "expm1": math.expm1, "log2": math.log2, "log10": math.log10, "log1p": math.log1p,
        "sin": math.sin, "cos": math.cos, "tan": math.tan, "arcsin": math.asin,
        "arccos": math.acos, "arctan": math.atan, "sinh": math.sinh, "cosh": math.cosh,
        "tanh": math.tanh, "arcsinh": math.asinh, "arccosh": math.acosh, "arctanh": math.atanh,
        "cbrt": getattr(math, "cbrt", None), "floor": math.floor, "ceil": math.ceil,
        "trunc": math.trunc, "fabs": math.fabs, "isnan": math.isnan, "isinf": math.isinf,
        "isfinite": math.isfinite, "deg2rad": math.radians, "rad2deg": math.degrees,
        "erf": math.erf, "erfc": math.erfc, "gamma": math.gamma, "lgamma": math.lgamma,
    }
    ufunc_of = {**unary_np, "deg2rad": np.deg2rad, "rad2deg": np.rad2deg}
    for canon, f in unary_math.items():
        _reg(f, canon, "math", (1,), ufunc_of.get(canon))
    _reg(math.log, "log", "math", (1, 2), np.log)
    binary_math = {"arctan2": (math.atan2, np.arctan2), "hypot": (math.hypot, np.hypot),
                   "copysign": (math.copysign, np.copysign), "fmod": (math.fmod, np.fmod),
                   "mpow": (math.pow, np.power)}
    for canon, (f, uf) in binary_math.items():
        _reg(f, canon, "math", (2,), uf)

    _reg(builtins.abs, "abs", "builtin", (1,), np.absolute)
    _reg(builtins.min, "pymin", "builtin", tuple(range(2, 33)))
    _reg(builtins.max, "pymax", "builtin", tuple(range(2, 33)))
    _reg(builtins.round, "round", "builtin", (1,))
    _reg(builtins.pow, "power", "builtin", (2,), np.power)


_build()


#: what np.round/np.around compute where they round: np.rint
RINT = FUNCS[np.rint]


def lookup(obj) -> FuncSpec | None:
    try:
        return FUNCS.get(obj)
    except TypeError:  # unhashable
        return None


# operator-module functions and builtins that can be used as a whole muscle (sk.Reduce(max))
OPERATOR_SOURCES = {
    operator.add: "a + b", operator.sub: "a - b", operator.mul: "a * b",
    operator.truediv: "a / b", operator.floordiv: "a // b", operator.mod: "a % b",
    operator.pow: "a ** b", operator.and_: "a & b", operator.or_: "a | b",
    operator.xor: "a ^ b", operator.lshift: "a << b", operator.rshift: "a >> b",
    operator.lt: "a < b", operator.le: "a <= b", operator.gt: "a > b", operator.ge: "a >= b",
    operator.eq: "a == b", operator.ne: "a != b", operator.neg: "-a", operator.pos: "+a",
    operator.invert: "~a", operator.not_: "not a", operator.abs: "abs(a)",
}
