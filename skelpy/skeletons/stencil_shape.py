"""A stencil's reach and border: :class:`Shape`, the border modes and the constant value, and
the shape a muscle's offsets need (:func:`resolve_shape`).

``Shape`` says how far a stencil reads in each direction (SkelCL's stencil shape); ``border``
names follow ``scipy.ndimage`` with its meanings; ``cval`` (border ``"constant"``) is written
into the kernel exactly, as a constant of each element type that reads it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..dtypes import storage_c_type, storage_dtype
from ..errors import DTypeError, ParameterError, ShapeError

#: The farthest a stencil may reach (kernels index with 32-bit ints: a reach near 2^31 wrapped
#: around; a neighbourhood wider than a million cells is a mistake, not a stencil).
MAX_REACH = 2**20

__all__ = ["Shape", "MAX_REACH", "BORDERS", "border_mode", "cval_literal", "check_cval",
           "resolve_shape", "table_entry"]

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
            if v > MAX_REACH:
                raise ShapeError(f"Shape: {name}={v} is over skelpy's maximum reach "
                                 f"MAX_REACH ({MAX_REACH})")
            object.__setattr__(self, name, int(v))

    @classmethod
    def of(cls, value) -> Shape:
        """An int (the same reach all four ways) or a Shape."""
        if isinstance(value, Shape):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            if value < 0:
                raise ShapeError(f"stencil shape must be >= 0, got {value}")
            if value > MAX_REACH:
                raise ShapeError(f"stencil shape {value} is over skelpy's maximum reach "
                                 f"MAX_REACH ({MAX_REACH})")
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
    """``value`` as a C constant of ``dtype``'s storage type, exactly.

    Total (no exception, no warning): every kernel defines the constant of each storage type
    it uses, also where the border is not ``constant`` or the constant is never read there;
    :func:`check_cval` rejects the values a read would get wrong (``nan`` for an integer
    matrix, ``300`` for uint8, ``1e300`` for float32) before any kernel reads them."""
    st = storage_c_type(dtype)
    dt = storage_dtype(dtype)
    if dt.kind == "f":
        with np.errstate(over="ignore"):
            v = float(dt.type(value))
        if math.isnan(v):
            # the NaN's own bits (sign and payload; NumPy's nan is 0x7fc00000 as float32):
            # OpenCL's NAN is the implementation's (PoCL: 0x7fffffff), so a cval=np.nan
            # border, and arithmetic on it, differed from scipy bit for bit
            bits = int(np.asarray(dt.type(value)).view(f"u{dt.itemsize}"))
            return f"(as_{st}(({'uint' if dt.itemsize == 4 else 'ulong'})0x{bits:x}UL))"
        if math.isinf(v):
            return f"(({st})({'-' if v < 0 else ''}INFINITY))"
        return f"(({st})({v.hex()}{'f' if dt == np.float32 else ''}))"
    try:
        v = int(value)                  # truncated, as NumPy's cast of a float
    except (OverflowError, ValueError):  # inf, nan: no integer holds them (never read)
        v = 0
    bits = v & ((1 << (8 * dt.itemsize)) - 1)     # two's complement: NumPy's wrap-around
    return f"(({st})0x{bits:x}UL)"


def check_cval(cval, dtype: np.dtype, what: str, origin: str) -> None:
    """Whether ``cval`` (a bool, int or float within float64's range: Stencil checks) is a
    value of ``dtype``, as border='constant' reads it there; a DTypeError names it if not."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        with np.errstate(over="ignore"):
            ok = not math.isfinite(cval) or bool(np.isfinite(dt.type(cval)))
        if not ok:      # a finite constant beyond the dtype's range
            raise DTypeError(f"{origin}: cval={cval!r} cannot be represented in {what}'s dtype "
                             f"{dt} (border='constant' reads cval as that dtype; it overflows "
                             "to infinity)")
    if dt.kind in "iub":
        ok = isinstance(cval, int) or (math.isfinite(cval) and float(cval).is_integer())
        if ok and dt.kind in "iu":
            info = np.iinfo(dt)
            ok = info.min <= int(cval) <= info.max
        if ok and dt.kind == "b":
            ok = int(cval) in (0, 1)
        if not ok:
            raise DTypeError(f"{origin}: cval={cval!r} cannot be represented in {what}'s dtype "
                             f"{dt} (border='constant' reads cval as that dtype)")


def resolve_shape(tm, nb_params: Sequence[int], shape: Shape | None, origin: str
                  ) -> tuple[Shape, bool]:
    """The shape a stencil uses (``shape``, or inferred from the translated muscle ``tm``'s
    constant offsets) and whether some offsets are known only at run time (then checked
    there). ``nb_params``: the muscle parameters read as neighbourhoods.

    Raises ShapeError for constant reads outside a given shape, or when no shape is given and
    the offsets cannot be inferred."""
    bounds_all = getattr(tm, "access_bounds", None) or {}
    accesses_all = getattr(tm, "accesses", None) or {}
    unknown = False
    inferred = Shape()
    for p in nb_params:
        b = table_entry(bounds_all, p)
        if b is None:
            unknown = True
            _check_constant_sites(tm, p, shape)
            continue
        try:
            inferred = inferred.union(Shape.from_bounds(b))
        except ShapeError as exc:       # an offset beyond MAX_REACH
            raise ShapeError(f"{_access_line(tm, p, table_entry(accesses_all, p) or []) or origin}"
                             f": the muscle reads too far: {exc}") from None
        if shape is not None and not shape.contains(b[0][0], b[1][0]) or \
                shape is not None and not shape.contains(b[0][1], b[1][1]):
            bad = [a for a in (table_entry(accesses_all, p) or [])
                   if not shape.contains(int(a[0]), int(a[1]))]
            what = "the neighbourhood" if p == 0 else f"extra matrix {p}"
            shown = ", ".join(f"[{a[0]}, {a[1]}]" for a in bad[:4]) or \
                f"rows {b[0][0]}..{b[0][1]}, columns {b[1][0]}..{b[1][1]}"
            where = _access_line(tm, p, bad)
            raise ShapeError(
                f"{where or origin}: the muscle reads {what} at {shown}, outside the "
                f"stencil {shape} (north/south = negative/positive row offsets, west/east = "
                f"negative/positive column offsets); widen shape= or omit it to infer it")
    if shape is not None:
        return shape, unknown
    if unknown:
        raise ShapeError(
            f"{origin}: cannot infer the stencil shape because the muscle reads "
            "neighbours at offsets that are not constants; pass shape= (an int or "
            "sk.Shape(north=, south=, east=, west=))")
    return inferred, False


def _check_constant_sites(tm, param: int, shape: Shape | None) -> None:
    """The constant offsets of a neighbourhood whose other offsets are known only at run
    time are checked against the given shape here, at construction (the run-time check
    covers the others)."""
    if shape is None:
        return
    for site in getattr(tm, "read_sites", {}).get(param, ()):
        if site.offsets is not None and not shape.contains(*site.offsets):
            what = "the neighbourhood" if param == 0 else f"extra matrix {param}"
            raise ShapeError(
                f"Stencil({site.where}): the muscle reads {what} at "
                f"[{site.offsets[0]}, {site.offsets[1]}], outside the stencil "
                f"{shape}; widen shape= to read that far")


def _access_line(tm, param: int, bad) -> str | None:
    """``file:line (name)`` of the first read of parameter ``param`` at offsets that lie in
    ``bad``, so that a shape error points at the offending line (None for C muscles, which
    record no read sites: the error then names the muscle)."""
    wanted = {(int(a[0]), int(a[1])) for a in bad}
    for site in tm.read_sites.get(param, ()):
        if site.offsets in wanted:
            return f"Stencil({site.where})"
    return None


def table_entry(table, key):
    """``table[key]`` for a dict or a sequence, None when absent."""
    if table is None:
        return None
    if isinstance(table, Mapping):
        return table.get(key)
    try:
        return table[key]
    except (IndexError, KeyError, TypeError):
        return None
