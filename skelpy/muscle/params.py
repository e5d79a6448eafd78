"""What a muscle's parameters are, as seen by the translator.

A skeleton describes each parameter of the muscle with one of these kinds and the translator
specialises the muscle for them.  The kinds carry *templates* of the C code that declares and
reads them, so that one translator serves every skeleton: a Map extra argument reads
``x[i]`` from global memory, a stencil neighbourhood reads ``nb[dr, dc]`` from a tile in local
memory, an AllPairs row reads ``a[k]`` from a tile — the skeleton decides, the translator only
fills the templates.

Template placeholders: ``{name}`` (the C name of the parameter), ``{ctype}`` (C type of the
element as computed with), ``{stype}`` (C storage type of the element; differs for bool), and in
``read`` templates ``{i0}``, ``{i1}``, ... (the C index expressions, already parenthesised and
of type ``long``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import c_type, check_dtype, storage_c_type


@dataclass(frozen=True)
class Scalar:
    """A value passed by value. ``weak`` marks a Python ``int``/``float``/``bool`` (NEP 50)."""

    dtype: np.dtype
    weak: bool = False

    def __post_init__(self):
        object.__setattr__(self, "dtype", check_dtype(self.dtype))


@dataclass(frozen=True)
class IndexPoint:
    """A 2-D index (row, col) as one parameter: ``p[0]``/``p.row``/``p.y`` is the row,
    ``p[1]``/``p.col``/``p.x`` the column, and ``r, c = p`` unpacks it. Both are int64."""

    c_params: tuple[str, ...] = ("long {name}_r", "long {name}_c")


@dataclass(frozen=True)
class Accessor:
    """A parameter the muscle indexes: ``p[i]`` (ndim 1), ``p[i, j]`` (ndim 2).

    ``attrs`` maps Python attribute spellings to C expression templates; the keys the
    translator understands are ``"len"`` (``len(p)``), ``"size"`` (``p.size``), ``"shape0"``,
    ``"shape1"`` (``p.shape[0]``, ``p.shape[1]``).
    ``kind`` is "array", "neighbourhood" or "row"; it feeds the features, and says what an
    index means: an index into an array or a row (a negative constant counts from the end, as
    in Python) or an offset into a neighbourhood (``nb[-1, 0]`` is the neighbour above).
    ``bounds`` gives, per index, C templates of its valid range ``[lo, hi)`` for checked
    reads (see checks.py); by default an array's or row's are ``0`` to its ``len``/``shape``
    attributes, and a neighbourhood's must be given.
    """

    dtype: np.dtype
    ndim: int
    c_params: tuple[str, ...]
    read: str
    attrs: Mapping[str, str] = field(default_factory=dict)
    kind: str = "array"
    bounds: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "dtype", check_dtype(self.dtype))
        object.__setattr__(self, "attrs", dict(self.attrs))
        object.__setattr__(self, "bounds", tuple(tuple(b) for b in self.bounds))

    def __hash__(self):
        return hash((self.dtype, self.ndim, self.c_params, self.read,
                     tuple(sorted(self.attrs.items())), self.kind, self.bounds))

    @property
    def offsets(self) -> bool:
        """Whether its indices are offsets (a neighbourhood), not positions in an array."""
        return self.kind == "neighbourhood"

    def index_bounds(self, name: str) -> list[tuple[str, str]] | None:
        """The valid range ``[lo, hi)`` of each index as C expressions for a parameter called
        ``name``, or None when unknown (its reads are then not checked)."""
        bounds = self.bounds
        if not bounds and not self.offsets:
            keys = ("len",) if self.ndim == 1 else ("shape0", "shape1")
            if all(k in self.attrs for k in keys):
                bounds = tuple(("0", self.attrs[k]) for k in keys)
        if len(bounds) != self.ndim:
            return None
        return [(self.fill(lo, name), self.fill(hi, name)) for lo, hi in bounds]

    def fill(self, template: str, name: str) -> str:
        return template.format(name=name, ctype=c_type(self.dtype),
                               stype=storage_c_type(self.dtype))

    def declarations(self, name: str) -> list[str]:
        """The C parameter declarations for a parameter called ``name``."""
        return [self.fill(t, name) for t in self.c_params]

    def arguments(self, name: str) -> list[str]:
        """The C names to pass, in order, when calling with a parameter called ``name``."""
        return [_declared_name(d) for d in self.declarations(name)]


def global_array(dtype, ndim: int = 1) -> Accessor:
    """A container in global memory, the usual extra argument of Map/Zip."""
    if ndim == 1:
        return Accessor(dtype, 1, ("__global const {stype}* restrict {name}", "long {name}_n"),
                        "(({ctype}){name}[{i0}])",
                        {"len": "{name}_n", "size": "{name}_n", "shape0": "{name}_n"})
    return Accessor(dtype, 2,
                    ("__global const {stype}* restrict {name}", "long {name}_rows",
                     "long {name}_cols"),
                    "(({ctype}){name}[({i0}) * {name}_cols + ({i1})])",
                    {"len": "{name}_rows", "size": "({name}_rows * {name}_cols)",
                     "shape0": "{name}_rows", "shape1": "{name}_cols"})


def scalar_arguments(kind, name: str) -> list[str]:
    if isinstance(kind, Scalar):
        return [name]
    if isinstance(kind, IndexPoint):
        return [f"{name}_r", f"{name}_c"]
    return kind.arguments(name)


_IDENT_AT_END = re.compile(r"([A-Za-z_][A-Za-z_0-9]*)\s*$")


def _declared_name(declaration: str) -> str:
    m = _IDENT_AT_END.search(declaration)
    if not m:
        raise ValueError(f"cannot find the parameter name in {declaration!r}")
    return m.group(1)

