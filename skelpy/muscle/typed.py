"""The typed body: what type inference knows about every expression of a muscle.

Inference (``inference.py``) annotates each expression node with a :class:`Typed`: its
:class:`~.dtyping.Ty` (a NumPy dtype, or a weak Python scalar kind), its value when it is a
compile-time constant, and, where an expression means more than its syntax says, a *meaning*
(one of the small dataclasses below): ``p[i, j]`` on an accessor is an :class:`AccessorRead`,
``a + b`` on NumPy values runs the ufunc :class:`Loop` NumPy would pick, ``np.where(c, x, y)``
computes in one :class:`SameType`, and so on. The later passes (weak-scalar resolution, C
emission, access analysis) read these annotations and never look names up again.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from . import funcs as F
from .dtyping import Ty
from .source import MISSING, PyFunction
from .symbols import AccessorParam, Cast, ConstArray, IndexParam, Scope

NO_CONST = MISSING


# -- meanings ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AccessorRead:
    """``p[i]`` / ``p[i, j]`` / ``p[i][j]`` on an accessor parameter."""

    param: AccessorParam
    indices: list[ast.expr]


@dataclass(frozen=True, slots=True)
class ArrayItem:
    """``T[i]`` on a captured sequence (a ``__constant`` table)."""

    array: ConstArray
    index: ast.expr


@dataclass(frozen=True, slots=True)
class AccessorAttribute:
    """``len(p)``, ``p.size``, ``p.shape[k]``: ``key`` is one of the accessor's ``attrs``."""

    param: AccessorParam
    key: str


@dataclass(frozen=True, slots=True)
class IndexComponent:
    """``p[0]``, ``p.row``, ``p.x``... of an index point: component 0 (row) or 1 (column)."""

    param: IndexParam
    component: int


@dataclass(frozen=True, slots=True)
class Loop:
    """The input dtypes of the NumPy ufunc loop an operation on NumPy values runs."""

    ins: tuple[np.dtype, ...]


@dataclass(frozen=True, slots=True)
class WeakCompare:
    """A comparison of two weak values, computed in the weak kind ``kind`` ('b', 'i', 'f')."""

    kind: str


@dataclass(frozen=True, slots=True)
class MixedSignCompare:
    """An exact comparison of uint64 with int64 (NumPy compares these exactly)."""

    unsigned_left: bool


@dataclass(frozen=True, slots=True)
class Comparisons:
    """One mode per operator of a (chained) comparison: WeakCompare, MixedSignCompare, Loop."""

    modes: tuple[WeakCompare | MixedSignCompare | Loop, ...]


@dataclass(frozen=True, slots=True)
class SameType:
    """min/max/clip/where: every value operand converted to ``ty``."""

    ty: Ty


@dataclass(frozen=True, slots=True)
class RoundToInt:
    """Builtin ``round(x)``: a Python int from an argument of type ``arg``."""

    arg: Ty


@dataclass(frozen=True, slots=True)
class BoolTail:
    """``and``/``or`` whose first ``start`` operands are constants that do not decide (``True
    and x``, ``0.0 or x``): Python's value is that of the operands from ``start`` on."""

    start: int


@dataclass(frozen=True, slots=True)
class WeakMath:
    """A math/builtin function of weak values only: a weak result of kind ``kind``."""

    kind: str


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """A call of a math/NumPy/builtin function. ``operator`` is the Python operator
    (``"Add"``...) when the function is an arithmetic ufunc called by name (``np.add``)."""

    spec: F.FuncSpec
    rule: Loop | SameType | RoundToInt | WeakMath | None
    operator: str | None = None


@dataclass(frozen=True, slots=True)
class CastCall:
    """``int(x)``, ``float(x)``, ``bool(x)``, ``np.float32(x)``..."""

    cast: Cast


@dataclass(frozen=True, slots=True)
class HelperCall:
    """A call of another Python (or C) function, translated as a helper for ``kinds``."""

    muscle: HelperMuscle
    kinds: tuple


# -- annotations ------------------------------------------------------------------------------


@dataclass(slots=True)
class Typed:
    """What inference knows about one expression node."""

    ty: Ty
    const: object = NO_CONST
    meaning: object = None


class HelperMuscle(Protocol):
    """What the passes use of a called function (a :class:`~.muscle.Muscle`)."""

    name: str
    n_params: int
    is_c: bool

    def result_type(self, kinds: tuple) -> Ty: ...

    def typed_body(self, kinds: tuple) -> TypedBody: ...

    def specialise(self, kinds, out_dtype=None, c_name: str = "skelpy_f",
                   checks: str | None = None): ...


class RecursiveMuscle(Exception):
    """A muscle calls itself (directly or through helpers) while being translated."""


@dataclass
class TypedBody:
    """A muscle's body specialised for parameter kinds, with every expression typed.

    ``var_types``: the one type of each local (the promotion of everything assigned to it);
    ``param_types``: the types the scalar parameters come in with; ``synth``: the ``x op y``
    expression standing for each ``x op= y``; ``ret_ty``: the promotion of all returns."""

    scope: Scope
    kinds: tuple
    notes: dict[ast.AST, Typed]
    var_types: dict[str, Ty]
    param_types: dict[str, Ty]
    synth: dict[ast.AST, ast.BinOp]
    ret_ty: Ty

    @property
    def function(self) -> PyFunction:
        return self.scope.function

    def const(self, node) -> object:
        """The compile-time value of ``node``, or NO_CONST."""
        note = self.notes.get(node)
        return NO_CONST if note is None else note.const

    def static_test(self, test) -> bool | None:
        """True/False for a condition that is a compile-time constant, else None."""
        c = self.const(test)
        return None if c is NO_CONST else bool(c)

    def is_direct_param(self, name: str) -> bool:
        """A scalar parameter whose local keeps the type it is passed in."""
        return (name in self.scope.scalar_params
                and self.var_types[name] == self.param_types[name])
