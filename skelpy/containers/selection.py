"""Which part of a container an index touches.

A *basic* index (ints and slices, as in ``v[i]``, ``v[a:b:s]``, ``m[i, j]``, ``m[:, j]``)
selects a regular pattern of elements (a range, a rectangle, every k-th column...), which
moves between host and device as one (rectangular) transfer of just those elements. Any other
index (a list, an array, a mask, ``None``, ``...``) goes through the whole host copy.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from ..errors import BoundsError


@dataclass(frozen=True)
class Selection:
    """A basic index as a regular pattern: on each axis, ``count`` elements ``step`` apart
    from ``first``, listed in increasing order; ``reverse`` marks the axes that the index
    walks backwards, ``dropped`` those that an int index removes."""

    first: tuple[int, ...]
    count: tuple[int, ...]
    step: tuple[int, ...]                  # positive
    reverse: tuple[bool, ...]
    dropped: tuple[bool, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of what the index selects."""
        return tuple(c for c, d in zip(self.count, self.dropped, strict=True) if not d)

    @property
    def empty(self) -> bool:
        return 0 in self.count


def as_int(value) -> int | None:
    """``value`` as an index if it is an integer (not a bool, which NumPy reads as a mask)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def checked_int(i: int, size: int, axis: int) -> int:
    """``i`` counted from the start (negative counts from the end), or NumPy's IndexError
    (as a :class:`~skelpy.errors.BoundsError`)."""
    if not -size <= i < size:
        raise BoundsError(f"index {i} is out of bounds for axis {axis} with size {size}")
    return i + size if i < 0 else i


def basic_selection(key, shape: tuple[int, ...]) -> Selection | None:
    """The selection of a basic index, or None for any other kind of index."""
    parts = key if isinstance(key, tuple) else (key,)
    if len(parts) > len(shape):
        if any(p is None or p is Ellipsis for p in parts):
            return None
        raise BoundsError(f"too many indices for array: array is {len(shape)}-dimensional, "
                         f"but {len(parts)} were indexed")
    parts = parts + (slice(None),) * (len(shape) - len(parts))
    first, count, step, reverse, dropped = [], [], [], [], []
    for axis, (part, size) in enumerate(zip(parts, shape, strict=True)):
        if isinstance(part, slice):
            try:
                r = range(*part.indices(size))
            except TypeError:
                return None                       # NumPy says what is wrong with it
            n = len(r)
            first.append(min(r[0], r[-1]) if n else 0)
            count.append(n)
            step.append(abs(r.step) if n > 1 else 1)
            reverse.append(r.step < 0 and n > 1)
            dropped.append(False)
            continue
        i = as_int(part)
        if i is None:
            return None
        first.append(checked_int(i, size, axis))
        count.append(1)
        step.append(1)
        reverse.append(False)
        dropped.append(True)
    return Selection(tuple(first), tuple(count), tuple(step), tuple(reverse), tuple(dropped))
