"""The result of specialising a muscle: C source plus what a skeleton needs to call it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import c_type
from .host_ints import IntChecks
from .params import scalar_arguments


@dataclass(frozen=True)
class ConstantLoop:
    """A ``for`` loop of the source with a constant trip count (a candidate for unrolling).

    ``offset``: where the line of its ``for (...)`` header starts in ``TypedMuscle.source``;
    ``parent``: the index (in ``constant_loops``) of the nearest enclosing constant loop of
    the same function, or None."""

    offset: int
    trips: int
    parent: int | None


@dataclass(frozen=True)
class ReadSite:
    """One read of an accessor parameter: its constant offsets (None where an index is not a
    constant) and where it is written, ``file:line (function)``."""

    offsets: tuple[int, ...] | None
    where: str


@dataclass
class TypedMuscle:
    """A muscle specialised for parameter kinds: C source plus what a skeleton needs to call it.

    ``source`` defines ``static inline <out> c_name(<c_params>)`` after any helpers (all
    guarded with ``#ifndef`` so several muscles can share a program). ``accesses[i]`` and
    ``access_bounds[i]`` describe what accessor parameter ``i`` reads (see ``access.py``);
    ``read_sites[i]`` lists its reads in source order (the muscle's own first, then those in
    functions it calls). ``constant_loops`` are the loops a skeleton may unroll
    (:meth:`with_unroll_pragmas`). A ``checked`` function reads through ``skp_check`` and
    takes the check buffer ``skp_dbg`` first; the macro after it adds that argument to every
    call, so callers compile unchanged where ``skp_dbg`` is in scope (checks.py)."""

    c_name: str
    source: str
    c_params: list[str]
    out_dtype: np.dtype
    scalar_dtypes: dict[int, np.dtype]
    uses_fp64: bool
    features: dict[str, float]
    accesses: dict[int, list[tuple[int, ...]] | None]
    access_bounds: dict[int, tuple[tuple[int, int], ...] | None]
    kinds: tuple = ()
    origin: str = ""
    name: str = ""
    param_names: list[str] = field(default_factory=list)
    constant_loops: tuple[ConstantLoop, ...] = ()
    read_sites: dict[int, tuple[ReadSite, ...]] = field(default_factory=dict)
    checked: bool = False             # takes the check buffer first (see checks.py)
    int_checks: IntChecks | None = None   # Python ints computed from extras (host_ints.py)

    def check_python_ints(self, values: Mapping[int, object]) -> None:
        """Raise as NumPy would where a Python int computed from the Python-int extras
        ``values`` (by parameter index) does not fit the type it meets (host_ints.py)."""
        if self.int_checks is not None:
            self.int_checks.check(values)

    @property
    def out_c_type(self) -> str:
        return c_type(self.out_dtype)

    def call(self, names: Sequence[str]) -> str:
        """The C call expression when the caller's variable for parameter i is ``names[i]``
        (named the same way as the parameter declarations: ``x``, ``x_n``, ``p_r``...)."""
        if len(names) != len(self.kinds):
            raise ValueError(f"{self.c_name} takes {len(self.kinds)} arguments, got {len(names)}")
        args: list[str] = []
        for kind, n in zip(self.kinds, names):
            args.extend(scalar_arguments(kind, n))
        return f"{self.c_name}({', '.join(args)})"

    def with_unroll_pragmas(self, loops: Iterable[int]) -> str:
        """``source`` with ``#pragma unroll`` (indented like the loop) before each of the
        ``constant_loops`` with these indices."""
        src = self.source
        for k in sorted(set(loops), key=lambda k: self.constant_loops[k].offset, reverse=True):
            at = end = self.constant_loops[k].offset
            while src[end] in " \t":
                end += 1
            src = f"{src[:at]}{src[at:end]}#pragma unroll\n{src[at:]}"
        return src
