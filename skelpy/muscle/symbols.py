"""What the names in a muscle refer to.

A name is a parameter (an accessor, an index point, or a scalar, which is a local variable
like any other), a local, or an object captured from the function's closure or globals: a
module, a math/NumPy function, a cast (``int``, ``np.float32``), a plain Python function
(translated as a helper), a constant number, or a tuple/list/1-D array of numbers (a
``__constant`` table). :class:`Scope` answers "what is this name" for one specialisation,
and records every captured name it resolved (``captures.py``), so that a muscle can tell when
one of them changed.
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from ..dtypes import check_dtype
from ..errors import SkelpyError, TranslationError
from . import funcs as F
from .captures import Capture
from .cnames import c_ident
from .dtyping import INT64, Ty, fits, result_type, ty_of_value
from .params import Accessor, IndexPoint
from .source import MISSING, PyFunction

MAX_CONST_ARRAY = 4096
_LIBRARIES = {"numpy", "scipy", "math", "builtins", "cmath", "random", "torch", "jax"}


@dataclass(frozen=True, eq=False)
class AccessorParam:
    index: int
    name: str
    kind: Accessor


@dataclass(frozen=True, eq=False)
class IndexParam:
    index: int
    name: str


@dataclass(eq=False)
class ConstArray:
    """A captured sequence of numbers, emitted as a ``__constant`` table."""

    key: str
    values: list
    elem: Ty


@dataclass(frozen=True)
class MathFunction:
    spec: F.FuncSpec


@dataclass(frozen=True)
class Cast:
    dtype: np.dtype | None  # None: a Python builtin (int/float/bool) -> weak result
    kind: str = ""


@dataclass(frozen=True, eq=False)
class HelperFunction:
    fn: types.FunctionType


@dataclass(frozen=True, eq=False)
class ModuleRef:
    module: types.ModuleType


@dataclass(frozen=True, eq=False)
class ShapeOf:
    base: AccessorParam | ConstArray


@dataclass(frozen=True)
class Builtin:
    name: str


@dataclass(frozen=True, eq=False)
class ConstValue:
    value: object
    ty: Ty


Symbol = (AccessorParam | IndexParam | ConstArray | MathFunction | Cast | HelperFunction
          | ModuleRef | ShapeOf | Builtin | ConstValue)


@dataclass
class Scope:
    """The names of one specialisation: parameters by kind, locals, captured arrays."""

    function: PyFunction
    accessors: dict[str, AccessorParam]
    index_params: dict[str, IndexParam]
    scalar_params: dict[str, int]
    locals: set[str]
    arrays: dict[int, ConstArray] = field(default_factory=dict)
    captures: dict[tuple, Capture] = field(default_factory=dict)   # what it read, to check

    @classmethod
    def of(cls, function: PyFunction, kinds: tuple) -> Scope:
        acc, idx, scalars = {}, {}, {}
        for i, (name, k) in enumerate(zip(function.param_names, kinds)):
            if isinstance(k, Accessor):
                acc[name] = AccessorParam(i, name, k)
            elif isinstance(k, IndexPoint):
                idx[name] = IndexParam(i, name)
            else:
                scalars[name] = i
        return cls(function, acc, idx, scalars, _local_names(function, acc, idx, scalars))

    def err(self, node, message: str, construct: str | None = None) -> TranslationError:
        return self.function.error(node, message, construct)

    def symbol(self, node) -> Symbol | None:
        """What a Name/Attribute refers to, or None for plain values (locals, numbers)."""
        if isinstance(node, ast.Name):
            n = node.id
            if n in self.accessors:
                return self.accessors[n]
            if n in self.index_params:
                return self.index_params[n]
            if n in self.locals:
                return None
            obj = self.function.lookup(n)
            if ("name", n) not in self.captures:
                self.captures["name", n] = Capture(self.function.reader(n), obj)
            return self.classify(obj, node, n)
        if isinstance(node, ast.Attribute):
            base = self.symbol(node.value)
            if isinstance(base, ModuleRef):
                obj = getattr(base.module, node.attr, MISSING)
                key = ("attr", base.module.__name__, node.attr)
                if key not in self.captures:
                    self.captures[key] = Capture(partial(getattr, base.module, node.attr,
                                                         MISSING), obj)
                if obj is MISSING:
                    raise self.err(node, f"module '{base.module.__name__}' has no attribute "
                                         f"'{node.attr}'", "unknown name")
                return self.classify(obj, node, ast.unparse(node))
            if node.attr == "shape" and isinstance(base, (AccessorParam, ConstArray)):
                return ShapeOf(base)
            return None
        return None

    def classify(self, obj, node, label: str) -> Symbol:
        """What a global/closure object is to the translator."""
        if obj is MISSING:
            raise self.err(node, f"name '{label}' is not defined", "unknown name")
        if isinstance(obj, types.ModuleType):
            return ModuleRef(obj)
        spec = F.lookup(obj)
        if spec is not None:
            return MathFunction(spec)
        if obj is int or obj is float or obj is bool:
            return Cast(None, {int: "i", float: "f", bool: "b"}[obj])
        if isinstance(obj, type) and issubclass(obj, np.generic):
            try:
                return Cast(check_dtype(obj, label))
            except SkelpyError as e:
                raise self.err(node, str(e), "dtype") from None
        if obj is len or obj is range:
            return Builtin(obj.__name__)
        t = ty_of_value(obj)
        if t is not None:
            return ConstValue(obj, t)
        if isinstance(obj, (tuple, list, np.ndarray)):
            return self._array(obj, node, label)
        library = (getattr(obj, "__module__", None) or "").split(".")[0] in _LIBRARIES
        if isinstance(obj, types.FunctionType) and not library:
            return HelperFunction(obj)
        if callable(obj):
            raise self.err(node, f"function '{label}' is not supported in a muscle (use math/"
                                 "numpy functions, casts, or plain Python functions)",
                           "unsupported function")
        raise self.err(node, f"'{label}' is a {type(obj).__name__}, which a muscle cannot use",
                       "unsupported object")

    def _array(self, obj, node, label: str) -> ConstArray:
        hit = self.arrays.get(id(obj))
        if hit is not None:
            return hit
        if isinstance(obj, np.ndarray):
            if obj.ndim != 1:
                raise self.err(node, f"captured array '{label}' must be 1-D (it is {obj.ndim}-D)",
                               "captured array")
            try:
                dt = check_dtype(obj.dtype, label)
            except SkelpyError as e:
                raise self.err(node, str(e), "captured array") from None
            values = obj.tolist()
            elem = Ty(dt)
        else:
            values = list(obj)
            tys = [ty_of_value(v) for v in values]
            if not values or any(t is None for t in tys):
                raise self.err(node, f"captured {type(obj).__name__} '{label}' must hold numbers "
                                     "only", "captured sequence")
            elem = result_type(*tys)
            values = [v.item() if isinstance(v, np.generic) else v for v in values]
        if len(values) > MAX_CONST_ARRAY:
            raise self.err(node, f"captured array '{label}' has {len(values)} elements (at most "
                                 f"{MAX_CONST_ARRAY} become constants; pass it as an argument)",
                           "captured array")
        if not values:
            raise self.err(node, f"captured array '{label}' is empty", "captured array")
        if elem.kind == "i" and elem.weak and not all(fits(int(v), INT64) for v in values):
            raise self.err(node, f"captured '{label}' holds integers beyond int64",
                           "captured sequence")
        arr = ConstArray(f"{c_ident(label)}{len(self.arrays)}", values, elem)
        self.arrays[id(obj)] = arr
        return arr


def _local_names(function: PyFunction, acc, idx, scalars) -> set[str]:
    """Every name the body assigns, plus the scalar parameters (locals like any other)."""
    names: set[str] = set(scalars)
    for t in function.assigned:
        if t.id in acc or t.id in idx:
            raise function.error(t, f"cannot assign to parameter '{t.id}' (accessor and index "
                                    "parameters are read-only)", "assignment to parameter")
        names.add(t.id)
    return names
