"""Static types of muscle expressions: NumPy dtypes plus NEP 50 "weak" Python scalars.

Every expression has a :class:`Ty`.  Strong types are plain NumPy dtypes.  Weak types stand for
Python ``bool``/``int``/``float`` values (literals, Python constants, ``range()`` loop variables,
``len()``...); they adapt to the strong operand they meet, exactly as NEP 50 prescribes, and are
only given a concrete C type where they are *materialised* (see ``weak.py``).  Promotion is
delegated to NumPy itself (``ufunc.resolve_dtypes``), so the translator cannot drift from NumPy.
"""

from __future__ import annotations

import math
import operator
import warnings
from dataclasses import dataclass

import numpy as np

from ..dtypes import SUPPORTED_DTYPES, c_type

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
FLOAT16 = np.dtype(np.float16)

_KIND_ORDER = {"b": 0, "i": 1, "f": 2}
_WEAK_DEFAULT = {"b": BOOL, "i": INT64, "f": FLOAT64}


@dataclass(frozen=True)
class Ty:
    """The static type of a value: a dtype, and whether it is a weak Python scalar.

    For weak types ``dtype`` is the default dtype of the Python kind (bool, int64, float64),
    i.e. what NumPy would make of the value on its own.
    """

    dtype: np.dtype
    weak: bool = False

    @property
    def kind(self) -> str:
        """'b', 'i' (signed or unsigned integer) or 'f'."""
        k = self.dtype.kind
        return "i" if k in "iu" else k

    def __str__(self) -> str:
        if self.weak:
            return {"b": "Python bool", "i": "Python int", "f": "Python float"}[self.kind]
        return str(self.dtype)


def weak(kind: str) -> Ty:
    return Ty(_WEAK_DEFAULT[kind], True)


WEAK_BOOL = weak("b")
WEAK_INT = weak("i")
WEAK_FLOAT = weak("f")


def ty_of_value(value) -> Ty | None:
    """The type of a Python or NumPy scalar constant; None if it is not a supported number."""
    if isinstance(value, np.generic):
        dt = value.dtype
        return Ty(dt) if dt in SUPPORTED_DTYPES else None
    if isinstance(value, bool):
        return WEAK_BOOL
    if isinstance(value, int):
        return WEAK_INT
    if isinstance(value, float):
        return WEAK_FLOAT
    return None


def _spec(t: Ty):
    """How NumPy's resolve_dtypes spells this type (Python types are weak)."""
    if not t.weak:
        return t.dtype
    return {"b": BOOL, "i": int, "f": float}[t.kind]


def _rep(t: Ty):
    """A representative value for np.result_type (Python scalars are weak there)."""
    if not t.weak:
        return t.dtype
    return {"b": BOOL, "i": 0, "f": 0.0}[t.kind]


def _fix(dt: np.dtype) -> np.dtype:
    # float16 is not supported on devices in general: NumPy gives it for sqrt(int8) and such;
    # we compute in float32 instead (documented deviation).
    return FLOAT32 if dt == FLOAT16 else dt


def result_type(*tys: Ty) -> Ty:
    """NumPy promotion of several types (``np.result_type`` with NEP 50 weak scalars)."""
    if all(t.weak for t in tys):
        return weak(max((t.kind for t in tys), key=_KIND_ORDER.__getitem__))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dt = np.result_type(*(_rep(t) for t in tys))
    return Ty(_fix(dt))


def resolve_ufunc(ufunc: np.ufunc, tys: tuple[Ty, ...]) -> tuple[tuple[np.dtype, ...], np.dtype]:
    """(input loop dtypes, output dtype) NumPy selects for ``ufunc`` on these types.

    Raises TypeError (with NumPy's message) where NumPy has no loop (e.g. ``-`` on bools).
    """
    res = ufunc.resolve_dtypes(tuple(_spec(t) for t in tys) + (None,) * ufunc.nout)
    ins = tuple(_fix(d) for d in res[: ufunc.nin])
    out = _fix(res[ufunc.nin])
    for d in ins + (out,):
        if d not in SUPPORTED_DTYPES:
            raise TypeError(f"{ufunc.__name__} gives {d}, which skelpy does not support")
    return ins, out


_PY_REP = {"b": True, "i": 3, "f": 1.5}


def python_result_kind(op, kinds: tuple[str, ...]) -> str:
    """Kind of ``op`` applied to Python scalars of these kinds (weak op weak stays Python)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = op(*(_PY_REP[k] for k in kinds))
    if isinstance(v, bool):
        return "b"
    if isinstance(v, int):
        return "i"
    if isinstance(v, float):
        return "f"
    raise TypeError(f"unsupported result {type(v).__name__}")


def weak_default(t: Ty) -> np.dtype:
    return _WEAK_DEFAULT[t.kind]


# -- literals ---------------------------------------------------------------------------------


def fits(value: int, dtype: np.dtype) -> bool:
    info = np.iinfo(dtype)
    return info.min <= value <= info.max


def c_literal(value, dtype: np.dtype) -> str:
    """An exact OpenCL C literal of ``value`` as ``dtype`` (a C expression of that type)."""
    dtype = np.dtype(dtype)
    k = dtype.kind
    if k == "b":
        return "true" if bool(value) else "false"
    if k in "iu":
        v = int(value)
        if not fits(v, dtype):
            v = _wrap(v, dtype)
        if dtype == np.int64:
            if v == -(2**63):
                return "(-9223372036854775807L - 1L)"
            return f"{v}L" if v >= 0 else f"(-{-v}L)"
        if dtype == np.uint64:
            return f"{v}UL"
        if dtype == np.int32:
            if v == -(2**31):
                return "(-2147483647 - 1)"
            return f"{v}" if v >= 0 else f"(-{-v})"
        if dtype == np.uint32:
            return f"{v}u"
        return f"(({c_type(dtype)}){v})" if v >= 0 else f"(({c_type(dtype)})(-{-v}))"
    v = float(value)
    if dtype == np.float32:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = float(np.float32(v))  # out-of-range Python floats become inf, as in NumPy
    suffix = "f" if dtype == np.float32 else ""
    if math.isnan(v):
        return "NAN" if suffix else "((double)NAN)"
    if math.isinf(v):
        s = "INFINITY" if suffix else "((double)INFINITY)"
        return s if v > 0 else f"(-{s})"
    if dtype == np.float32:
        text = str(np.float32(v))  # shortest text that reads back as this float32
    else:
        text = repr(v)
    if "e" not in text and "." not in text:
        text += ".0"
    if text.startswith("-"):
        return f"({text}{suffix})"
    return text + suffix


def _wrap(v: int, dtype: np.dtype) -> int:
    bits = dtype.itemsize * 8
    v &= (1 << bits) - 1
    if dtype.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def convert_constant(value, dtype: np.dtype):
    """``value`` as a NumPy scalar of ``dtype`` following NumPy's conversion (NaN -> int wraps)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if np.dtype(dtype).kind in "iu" and isinstance(value, (int, np.integer)):
            return np.dtype(dtype).type(_wrap(int(value), np.dtype(dtype)))
        return np.array(value).astype(dtype)[()]


BINOPS = {
    "Add": (operator.add, np.add, "+"),
    "Sub": (operator.sub, np.subtract, "-"),
    "Mult": (operator.mul, np.multiply, "*"),
    "Div": (operator.truediv, np.true_divide, "/"),
    "FloorDiv": (operator.floordiv, np.floor_divide, "//"),
    "Mod": (operator.mod, np.remainder, "%"),
    "Pow": (operator.pow, np.power, "**"),
    "LShift": (operator.lshift, np.left_shift, "<<"),
    "RShift": (operator.rshift, np.right_shift, ">>"),
    "BitAnd": (operator.and_, np.bitwise_and, "&"),
    "BitOr": (operator.or_, np.bitwise_or, "|"),
    "BitXor": (operator.xor, np.bitwise_xor, "^"),
}

CMPOPS = {
    "Lt": (operator.lt, np.less, "<"),
    "LtE": (operator.le, np.less_equal, "<="),
    "Gt": (operator.gt, np.greater, ">"),
    "GtE": (operator.ge, np.greater_equal, ">="),
    "Eq": (operator.eq, np.equal, "=="),
    "NotEq": (operator.ne, np.not_equal, "!="),
}

UNOPS = {
    "USub": (operator.neg, np.negative, "-"),
    "UAdd": (operator.pos, np.positive, "+"),
    "Invert": (operator.invert, np.invert, "~"),
}


def _numpy_where_raises() -> bool:
    """Whether this NumPy's ``where`` raises for a Python int its result type cannot hold
    (NumPy 2.5 does; 2.4 converts it as ``astype`` does, wrapping)."""
    try:
        np.where(np.ones(1, bool), 1000, np.zeros(1, np.uint8))
    except OverflowError:
        return True
    return False


WHERE_RAISES = _numpy_where_raises()
