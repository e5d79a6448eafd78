"""The elementwise operations an array expression may hold, and how each is written in the
fused muscle.

Every operation is a NumPy ufunc: NumPy itself says what dtype each node has and which
operand dtypes are errors (the ufunc is called on empty arrays when the node is built, so the
error is raised at the user's line, with NumPy's message). The fused muscle is Python that the
muscle translator compiles (``skelpy/muscle``): each node is written as the Python operator or
NumPy function below, its result cast to the node's dtype, so that the kernel computes exactly
the dtypes NumPy would.
"""

from __future__ import annotations

import numpy as np

# name -> (ufunc, template for the fused muscle; {0}, {1}, {2} are the operands)
BINARY: dict[str, tuple[np.ufunc, str]] = {
    "add": (np.add, "{0} + {1}"),
    "subtract": (np.subtract, "{0} - {1}"),
    "multiply": (np.multiply, "{0} * {1}"),
    "true_divide": (np.true_divide, "{0} / {1}"),
    "floor_divide": (np.floor_divide, "{0} // {1}"),
    "remainder": (np.remainder, "{0} % {1}"),
    "power": (np.power, "{0} ** {1}"),
    "bitwise_and": (np.bitwise_and, "{0} & {1}"),
    "bitwise_or": (np.bitwise_or, "{0} | {1}"),
    "bitwise_xor": (np.bitwise_xor, "{0} ^ {1}"),
    "left_shift": (np.left_shift, "{0} << {1}"),
    "right_shift": (np.right_shift, "{0} >> {1}"),
    "equal": (np.equal, "{0} == {1}"),
    "not_equal": (np.not_equal, "{0} != {1}"),
    "less": (np.less, "{0} < {1}"),
    "less_equal": (np.less_equal, "{0} <= {1}"),
    "greater": (np.greater, "{0} > {1}"),
    "greater_equal": (np.greater_equal, "{0} >= {1}"),
    "arctan2": (np.arctan2, "np.arctan2({0}, {1})"),
    "hypot": (np.hypot, "np.hypot({0}, {1})"),
    "copysign": (np.copysign, "np.copysign({0}, {1})"),
    "fmod": (np.fmod, "np.fmod({0}, {1})"),
    "float_power": (np.float_power, "np.float_power({0}, {1})"),
    "minimum": (np.minimum, "np.minimum({0}, {1})"),
    "maximum": (np.maximum, "np.maximum({0}, {1})"),
    "fmin": (np.fmin, "np.fmin({0}, {1})"),
    "fmax": (np.fmax, "np.fmax({0}, {1})"),
    "logical_and": (np.logical_and, "np.logical_and({0}, {1})"),
    "logical_or": (np.logical_or, "np.logical_or({0}, {1})"),
    "logical_xor": (np.logical_xor, "np.logical_xor({0}, {1})"),
}

UNARY: dict[str, tuple[np.ufunc, str]] = {
    "negative": (np.negative, "-{0}"),
    "positive": (np.positive, "+{0}"),
    "invert": (np.invert, "~{0}"),
    "absolute": (np.absolute, "abs({0})"),
    "logical_not": (np.logical_not, "np.logical_not({0})"),
    **{name: (getattr(np, name), f"np.{name}({{0}})") for name in (
        "sqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
        "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
        "arctanh", "cbrt", "floor", "ceil", "trunc", "rint", "fabs", "sign", "square",
        "isnan", "isinf", "isfinite", "signbit", "deg2rad", "rad2deg")},
}

# Not ufuncs in NumPy's API, but elementwise: where(c, a, b) and clip(x, lo, hi).
TERNARY: dict[str, tuple[object, str]] = {
    "where": (np.where, "np.where({0}, {1}, {2})"),
    "clip": (np.clip, "np.clip({0}, {1}, {2})"),
}

COMPARISONS = frozenset({"equal", "not_equal", "less", "less_equal", "greater",
                         "greater_equal"})

# ufunc object -> our name (np.abs is np.absolute, np.divide is np.true_divide...)
BY_UFUNC: dict[np.ufunc, str] = {}
for _table in (BINARY, UNARY):
    for _name, (_uf, _t) in _table.items():
        BY_UFUNC.setdefault(_uf, _name)


def template(name: str) -> str:
    for table in (BINARY, UNARY, TERNARY):
        hit = table.get(name)
        if hit is not None:
            return hit[1]
    raise KeyError(name)


def numpy_op(name: str):
    for table in (BINARY, UNARY, TERNARY):
        hit = table.get(name)
        if hit is not None:
            return hit[0]
    raise KeyError(name)
