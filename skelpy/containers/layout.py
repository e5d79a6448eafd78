"""Where a view's elements lie in its base's data: an offset and a stride per axis.

A container's data is one C-ordered block (its :class:`~.storage.Storage`). A *view*
(``v[a:b]``, ``v[::2]``, ``m[r0:r1, c0:c1]``, ``m[:, j]``, ``m.T``, a broadcast row) is another
container over the same block, described by a :class:`Layout`: element ``(i, j)`` of the view
is element ``offset + i * strides[0] + j * strides[1]`` of the block (in elements, not bytes;
strides may be negative, or zero where a broadcast repeats a value). Kernels read views
through these numbers (``skeletons/arguments.py``), the host through :func:`host_view`, and
partial transfers through :func:`selection_of` when the view is a regular part of the block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ShapeError
from .selection import Selection, as_int, checked_int


@dataclass(frozen=True)
class Layout:
    """A view's offset and strides (in elements) into its base's C-ordered block."""

    offset: int
    strides: tuple[int, ...]


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides (in elements) of a C-ordered block of ``shape``."""
    out, step = [], 1
    for s in reversed(shape):
        out.append(step)
        step *= max(s, 1)
    return tuple(reversed(out))


def whole(shape: tuple[int, ...]) -> Layout:
    """The layout of the whole block."""
    return Layout(0, c_strides(shape))


def is_contiguous(layout: Layout, shape: tuple[int, ...]) -> bool:
    """Whether the view's elements are consecutive in C order (an offset may remain)."""
    return all(n <= 1 or s == c for n, s, c in zip(shape, layout.strides, c_strides(shape),
                                                     strict=True))


def repeats(layout: Layout | None, shape: tuple[int, ...]) -> bool:
    """Whether the view shows one element in several places (a broadcast): it is read-only,
    as NumPy's broadcast views are."""
    return layout is not None and any(st == 0 and n > 1
                                      for st, n in zip(layout.strides, shape, strict=True))


def check_writable(layout: Layout | None, shape: tuple[int, ...], what: object) -> None:
    if repeats(layout, shape):
        raise ShapeError(f"assignment destination is read-only: {what!r} is a broadcast "
                         "view (it repeats elements); write into the container it repeats")


def is_whole(layout: Layout, shape: tuple[int, ...], base_shape: tuple[int, ...]) -> bool:
    """Whether the view is exactly its base's block (same elements, same order)."""
    return (layout.offset == 0 and math.prod(shape) == math.prod(base_shape)
            and is_contiguous(layout, shape))


def index(layout: Layout, shape: tuple[int, ...],
          key) -> tuple[Layout, tuple[int, ...]] | int | None:
    """The layout and shape of ``view[key]`` for a basic key (ints and slices); a flat element
    position when every axis gets an int; None for any other key."""
    parts = key if isinstance(key, tuple) else (key,)
    if len(parts) > len(shape):
        if any(p is None or p is Ellipsis for p in parts):
            return None
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, "
                         f"but {len(parts)} were indexed")
    parts = parts + (slice(None),) * (len(shape) - len(parts))
    offset = layout.offset
    strides, out_shape = [], []
    for axis, (part, size, stride) in enumerate(zip(parts, shape, layout.strides, strict=True)):
        if isinstance(part, slice):
            try:
                r = range(*part.indices(size))
            except TypeError:
                return None
            if len(r):
                offset += r.start * stride
            strides.append(r.step * stride)
            out_shape.append(len(r))
            continue
        i = as_int(part)
        if i is None:
            return None
        offset += checked_int(i, size, axis) * stride
    if not out_shape:
        return offset
    return Layout(offset, tuple(strides)), tuple(out_shape)


def transpose(layout: Layout) -> Layout:
    return Layout(layout.offset, tuple(reversed(layout.strides)))


def broadcast(layout: Layout, shape: tuple[int, ...], target: tuple[int, ...]) -> Layout:
    """The layout that shows the view (of ``shape``) broadcast to ``target`` (NumPy's rules;
    the caller has checked that they apply): new leading axes and axes of length 1 repeat."""
    strides = [0] * (len(target) - len(shape))
    for n, s, t in zip(shape, layout.strides, target[len(target) - len(shape):], strict=True):
        strides.append(0 if n == 1 and t != 1 else s)
    return Layout(layout.offset, tuple(strides))


def host_view(block: np.ndarray, layout: Layout, shape: tuple[int, ...]) -> np.ndarray:
    """The view of ``block`` (a C-ordered array) as a read-only ndarray (no copy)."""
    flat = block.reshape(-1)
    item = block.dtype.itemsize
    if math.prod(shape) == 0:
        out = np.empty(shape, block.dtype)
    else:
        # as_strided only computes addresses: negative strides walk back into the block
        out = np.lib.stride_tricks.as_strided(
            flat[layout.offset:], shape, tuple(s * item for s in layout.strides),
            writeable=False)
    out.flags.writeable = False
    return out


def selection_of(layout: Layout, shape: tuple[int, ...],
                 base_shape: tuple[int, ...]) -> Selection | None:
    """The view as a regular part of the block (a :class:`Selection`, which moves in one
    rectangular transfer), or None when it is not one (a transpose, a broadcast)."""
    base_strides = c_strides(base_shape)
    if any(s == 0 and n > 1 for n, s in zip(shape, layout.strides, strict=True)):
        return None
    # Assign each view axis to the base axis it walks, in order; ints drop the others.
    first = list(np.unravel_index(layout.offset, base_shape)) if math.prod(base_shape) else \
        [0] * len(base_shape)
    first = [int(f) for f in first]
    count = [1] * len(base_shape)
    step = [1] * len(base_shape)
    reverse = [False] * len(base_shape)
    dropped = [True] * len(base_shape)
    axis = 0
    for n, s in zip(shape, layout.strides, strict=True):
        while axis < len(base_shape) and (n > 1 and abs(s) % base_strides[axis] != 0
                                          or n > 1 and abs(s) // base_strides[axis] == 0):
            axis += 1
        if axis >= len(base_shape):
            return None
        k = abs(s) // base_strides[axis] if n > 1 else 1
        if n > 1 and abs(s) != k * base_strides[axis]:
            return None
        last = first[axis] + (n - 1) * (k if s >= 0 else -k)
        if not (0 <= last < base_shape[axis]) and n:
            return None
        if s < 0 and n > 1:
            first[axis] = last
            reverse[axis] = True
        count[axis], step[axis], dropped[axis] = n, k, False
        axis += 1
    return Selection(tuple(first), tuple(count), tuple(step), tuple(reverse), tuple(dropped))
