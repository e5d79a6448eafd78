"""Which part of a container an index touches.

A *basic* index (ints and slices, as in ``v[i]``, ``v[a:b:s]``, ``m[i, j]``, ``m[:, j]``)
selects elements inside one box: a range of a vector, or a rectangle of a matrix. Element and
slice access moves only that box between host and device; any other index (a list, an array,
a mask, ``None``, ``...``) goes through the whole host copy.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Box:
    """The smallest box holding a basic selection, and the selection relative to it."""

    start: tuple[int, ...]        # the box's first index on each axis
    extent: tuple[int, ...]       # the box's size on each axis (0 on some axis: nothing)
    local: tuple                  # the index into an array holding just the box
    shape: tuple[int, ...]        # the shape of what the index selects
    dense: bool                   # the selection is the whole box (no slice step beyond 1)

    @property
    def empty(self) -> bool:
        return 0 in self.extent


def as_int(value) -> int | None:
    """``value`` as an index if it is an integer (not a bool, which NumPy reads as a mask)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def checked_int(i: int, size: int, axis: int) -> int:
    """``i`` counted from the start (negative counts from the end), or NumPy's IndexError."""
    if not -size <= i < size:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size {size}")
    return i + size if i < 0 else i


def box_of(key, shape: tuple[int, ...]) -> Box | None:
    """The box of a basic index, or None for any other kind of index."""
    parts = key if isinstance(key, tuple) else (key,)
    if len(parts) > len(shape):
        if any(p is None or p is Ellipsis for p in parts):
            return None
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, "
                         f"but {len(parts)} were indexed")
    parts = parts + (slice(None),) * (len(shape) - len(parts))
    start, extent, local, sel = [], [], [], []
    dense = True
    for axis, (part, size) in enumerate(zip(parts, shape, strict=True)):
        if isinstance(part, slice):
            try:
                r = range(*part.indices(size))
            except TypeError:
                return None                       # NumPy says what is wrong with it
            n = len(r)
            sel.append(n)
            if n == 0:
                start.append(0)
                extent.append(0)
                local.append(slice(0, 0))
                continue
            lo = min(r[0], r[-1])
            start.append(lo)
            extent.append(abs(r[-1] - r[0]) + 1)
            first = r[0] - lo
            stop = first + n * r.step
            local.append(slice(first, stop if stop >= 0 else None, r.step))
            dense = dense and (n == 1 or abs(r.step) == 1)
            continue
        i = as_int(part)
        if i is None:
            return None
        start.append(checked_int(i, size, axis))
        extent.append(1)
        local.append(0)
    return Box(tuple(start), tuple(extent), tuple(local), tuple(sel), dense)
