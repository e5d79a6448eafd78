"""A stencil's reach and border: :class:`Shape`, the border modes and the constant value.

``Shape`` says how far a stencil reads in each direction (SkelCL's stencil shape); ``border``
names follow ``scipy.ndimage`` with its meanings; ``cval`` (border ``"constant"``) is written
into the kernel exactly, as a constant of each element type that reads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..dtypes import storage_c_type, storage_dtype
from ..errors import DTypeError, ParameterError, ShapeError

__all__ = ["Shape", "BORDERS", "border_mode", "cval_literal", "check_cval"]

#: Border modes (scipy.ndimage names) -> SKP_MODE values in stencil_common.cl.
BORDERS = {"constant": 0, "nearest": 1, "wrap": 2, "reflect": 3, "mirror": 4}
_BORDER_ALIASES = {"grid-constant": "constant", "grid-wrap": "wrap", "grid-mirror": "reflect"}


@dataclass(frozen=True)
class Shape:
    """How far a stencil reads in each direction (SkelCL's stencil shape).

    ``north``: rows above the cell (negative row offsets), ``south``: rows below, ``west``:
    columns to the left (negative column offsets), ``east``: columns to the right."""

    north: int = 0
    south: int = 0
    east: int = 0
    west: int = 0

    def __post_init__(self):
        for name in ("north", "south", "east", "west"):
            v = getattr(self, name)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ShapeError(f"Shape: {name} must be a non-negative int, got {v!r}")
            object.__setattr__(self, name, int(v))

    @classmethod
    def of(cls, value) -> Shape:
        """An int (the same reach all four ways) or a Shape."""
        if isinstance(value, Shape):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            if value < 0:
                raise ShapeError(f"stencil shape must be >= 0, got {value}")
            v = int(value)
            return cls(north=v, south=v, east=v, west=v)
        raise ShapeError(f"stencil shape must be an int or sk.Shape(north=, south=, east=, "
                         f"west=), got {value!r}")

    @classmethod
    def from_bounds(cls, bounds) -> Shape:
        """The smallest shape holding ((row lo, row hi), (col lo, col hi)) offset bounds."""
        (rlo, rhi), (clo, chi) = bounds
        return cls(north=max(0, -int(rlo)), south=max(0, int(rhi)),
                   west=max(0, -int(clo)), east=max(0, int(chi)))

    def union(self, other: Shape) -> Shape:
        return Shape(north=max(self.north, other.north), south=max(self.south, other.south),
                     east=max(self.east, other.east), west=max(self.west, other.west))

    def contains(self, dr: int, dc: int) -> bool:
        return -self.north <= dr <= self.south and -self.west <= dc <= self.east

    def __str__(self) -> str:
        return (f"Shape(north={self.north}, south={self.south}, east={self.east}, "
                f"west={self.west})")


def border_mode(border) -> str:
    """A border mode's scipy.ndimage name (aliases such as ``"grid-wrap"`` resolved)."""
    name = str(border).lower() if isinstance(border, str) else border
    try:
        name = _BORDER_ALIASES.get(name, name)
    except TypeError:                       # unhashable
        name = None
    if name not in BORDERS:
        raise ParameterError(f"unknown border mode {border!r}; use one of "
                             + ", ".join(repr(b) for b in BORDERS) + " (scipy.ndimage names)")
    return name


def cval_literal(value, dtype: np.dtype) -> str:
    """``value`` as a C constant of ``dtype``'s storage type, exactly."""
    st = storage_c_type(dtype)
    dt = storage_dtype(dtype)
    if dt.kind == "f":
        v = float(dt.type(value))
        if math.isnan(v):
            return f"(({st})NAN)"
        if math.isinf(v):
            return f"(({st})({'-' if v < 0 else ''}INFINITY))"
        return f"(({st})({v.hex()}{'f' if dt == np.float32 else ''}))"
    v = int(np.asarray(value).astype(dt)[()])
    bits = v & ((1 << (8 * dt.itemsize)) - 1)
    return f"(({st})0x{bits:x}UL)"


def check_cval(cval, dtype: np.dtype, what: str, origin: str) -> None:
    dt = np.dtype(dtype)
    if dt.kind in "iub":
        ok = float(cval).is_integer()
        if ok and dt.kind in "iu":
            info = np.iinfo(dt)
            ok = info.min <= int(cval) <= info.max
        if ok and dt.kind == "b":
            ok = int(cval) in (0, 1)
        if not ok:
            raise DTypeError(f"{origin}: cval={cval!r} cannot be represented in {what}'s dtype "
                             f"{dt} (border='constant' reads cval as that dtype)")
