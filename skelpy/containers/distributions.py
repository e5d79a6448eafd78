"""Distributions (SkelCL's): how a container's rows are spread over the devices of a group.

``"single"``: everything on the group's first device. ``"block"``: consecutive rows (elements of
a Vector) split as evenly as possible, the first parts one row longer when the count does not
divide (as ``np.array_split``); a device may get no rows. ``"copy"``: everything on every device.
``Overlap(h)``: the block split, each part also holding ``h`` halo rows on each side (rows of its
neighbours; beyond the first and last row, ghost rows that a stencil fills by its border rule).

A distribution compares equal to its name (``v.distribution == "block"``).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError

__all__ = ["Distribution", "SINGLE", "BLOCK", "COPY", "Overlap", "as_distribution", "split"]


@dataclass(frozen=True, eq=False)
class Distribution:
    """A way to spread rows over a group; ``halo`` rows each side (Overlap only)."""

    name: str
    halo: int = 0

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            return other.lower() == self.name
        return isinstance(other, Distribution) and (other.name, other.halo) == (self.name,
                                                                                 self.halo)

    def __hash__(self) -> int:
        # equal to its name, so hashed as it (``v.distribution in {"block", "copy"}``)
        return hash(self.name)

    def __repr__(self) -> str:
        return f"Overlap({self.halo})" if self.name == "overlap" else repr(self.name)

    __str__ = __repr__

    @property
    def spread(self) -> bool:
        """Each device holds its own rows (block or overlap), not all of them."""
        return self.name in ("block", "overlap")

    def ranges(self, rows: int, devices: int) -> list[tuple[int, int]]:
        """The rows each device owns: [lo, hi) per device."""
        if self.name == "copy":
            return [(0, rows)] * devices
        if self.name == "single":
            return [(0, rows)] + [(rows, rows)] * (devices - 1)
        return split(rows, devices)


SINGLE = Distribution("single")
BLOCK = Distribution("block")
COPY = Distribution("copy")


def Overlap(halo: int) -> Distribution:  # noqa: N802 - reads like SkelCL's class
    """Row blocks with ``halo`` rows of the neighbours on each side (``sk.Overlap(2)``)."""
    try:                           # any integer (a NumPy one too), not a bool
        rows = None if isinstance(halo, (bool, np.bool_)) else operator.index(halo)
    except TypeError:
        rows = None
    if rows is None or rows < 0:
        raise ParameterError(f"Overlap needs a halo of rows >= 0, got {halo!r}")
    return Distribution("overlap", rows)


_NAMED = {"single": SINGLE, "block": BLOCK, "copy": COPY}


def as_distribution(value) -> Distribution | None:
    """``"single"``, ``"block"``, ``"copy"``, an ``Overlap(h)`` or None (no distribution yet)."""
    if value is None or isinstance(value, Distribution):
        return value
    if isinstance(value, str) and value.lower() in _NAMED:
        return _NAMED[value.lower()]
    raise ParameterError(f"unknown distribution {value!r}; use 'single', 'block', 'copy' or "
                         "sk.Overlap(rows)")


def split(rows: int, devices: int) -> list[tuple[int, int]]:
    """``rows`` split into ``devices`` consecutive ranges as evenly as possible (the first
    ``rows % devices`` one longer)."""
    base, extra = divmod(rows, devices)
    out, lo = [], 0
    for d in range(devices):
        hi = lo + base + (d < extra)
        out.append((lo, hi))
        lo = hi
    return out
