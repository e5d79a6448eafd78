"""Which rows a stencil on a device group computes, reads and exchanges (pure arithmetic).

Each device with rows owns [lo, hi) and holds ``h`` more rows on each side (an ``Overlap(h)``
part, h = k x the stencil's vertical reach): rows of its neighbours, and beyond the first and
last row of the matrix *ghost* rows. Rows are counted in the matrix (ghost rows are < 0 or >=
R); a part's buffer starts at row lo - h.

With a k-deep halo the halo is exchanged every k steps (SkelCL's "iterations between swaps");
in between, step j of k computes, besides its own rows, the halo rows the later steps of the
round still read, k - j times the reach on each side (the overlap is recomputed instead of
exchanged). Ghost rows follow the border rule:

- ``wrap``: they are rows of the other end of the matrix, exchanged and recomputed like a halo;
- ``constant``: they hold the constant, written once per buffer and never computed;
- ``nearest``, ``reflect``, ``mirror``: they are copies of rows near the edge (the rule's
  source rows), refreshed on the device before every step when the device holds those rows
  then; where it does not (parts smaller than the reach), only k = 1 is possible, and the
  exchange brings them every step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["remap", "RowPlan", "Transfer"]


def remap(x: int, n: int, mode: str) -> int | None:
    """Row ``x`` of a matrix of ``n`` rows under ``mode`` (scipy.ndimage's rules, as
    ``skp_remap`` in stencil_common.cl); None for ``constant`` outside the matrix."""
    if 0 <= x < n:
        return x
    if mode == "constant":
        return None
    if mode == "nearest":
        return 0 if x < 0 else n - 1
    if mode == "wrap":
        return x % n
    if mode == "reflect":
        y = x % (2 * n)
        return y if y < n else 2 * n - 1 - y
    if n == 1:                       # mirror
        return 0
    y = x % (2 * n - 2)
    return y if y < n else 2 * n - 2 - y


@dataclass(frozen=True)
class Transfer:
    """``count`` consecutive rows from device ``src`` (starting at row ``src_row``) to device
    ``dst`` (starting at row ``dst_row``)."""

    src: int
    src_row: int
    dst: int
    dst_row: int
    count: int


class RowPlan:
    """The rows of one stencil call on a group: ``ranges`` (lo, hi) per device, the matrix's
    ``rows``, the reach ``north``/``south``, the border ``mode`` and the halo depth ``h``."""

    def __init__(self, ranges: Sequence[tuple[int, int]], rows: int, north: int, south: int,
                 mode: str, h: int):
        self.ranges = list(ranges)
        self.rows, self.north, self.south, self.mode, self.h = rows, north, south, mode, h
        self.active = [r for r, (lo, hi) in enumerate(self.ranges) if hi > lo]

    # -- regions -------------------------------------------------------------------------------
    def computed(self, rank: int, j: int, kk: int) -> tuple[int, int]:
        """Rows device ``rank`` computes in step j (1-based) of a round of ``kk`` steps."""
        lo, hi = self.ranges[rank]
        a, b = lo - (kk - j) * self.north, hi + (kk - j) * self.south
        if self.mode != "wrap":
            a, b = max(a, 0), min(b, self.rows)
        return a, b

    def ghosts_read(self, rank: int, j: int, kk: int) -> list[int]:
        """Ghost rows (outside the matrix) step j reads on device ``rank`` (not ``wrap``)."""
        a, b = self.computed(rank, j, kk)
        out = [g for g in range(a - self.north, a) if g < 0]
        out += [g for g in range(b, b + self.south) if g >= self.rows]
        return out

    def held(self, rank: int) -> tuple[int, int]:
        lo, hi = self.ranges[rank]
        return lo - self.h, hi + self.h

    def owner(self, row: int) -> int:
        for r in self.active:
            lo, hi = self.ranges[r]
            if lo <= row < hi:
                return r
        raise ValueError(row)

    # -- feasibility ---------------------------------------------------------------------------
    def local_ghosts_ok(self, k: int) -> bool:
        """Whether every device can refresh the ghost rows it reads from rows it holds valid
        at each step of rounds of up to ``k`` steps (needed for k > 1)."""
        if self.mode in ("wrap", "constant"):
            return True
        for r in self.active:
            lo, hi = self.ranges[r]
            for kk in range(1, k + 1):
                valid = (max(lo - self.h, 0), min(hi + self.h, self.rows))
                for j in range(1, kk + 1):
                    for g in self.ghosts_read(r, j, kk):
                        src = remap(g, self.rows, self.mode)
                        if not valid[0] <= src < valid[1]:
                            return False
                    valid = self.computed(r, j, kk)
        return True

    # -- transfers ------------------------------------------------------------------------------
    def halo_transfers(self, ghosts_too: bool) -> list[Transfer]:
        """What fills every device's halo from the owners: its rows of the matrix, the ghost
        rows of ``wrap``, and with ``ghosts_too`` the ghost rows a step may read that the rule
        copies (the reach beyond the first and last row)."""
        rows: list[tuple[int, int, int, int]] = []         # (dst, dst_row, src, src_row)
        for r in self.active:
            lo, hi = self.ranges[r]
            a, b = self.held(r)
            for g in [*range(a, lo), *range(hi, b)]:
                if 0 <= g < self.rows or self.mode == "wrap":
                    src = remap(g, self.rows, "wrap") if self.rows else None
                elif ghosts_too and -self.north <= g < self.rows + self.south:
                    src = remap(g, self.rows, self.mode)
                else:
                    continue
                if src is not None:
                    rows.append((r, g, self.owner(src), src))
        return _runs(rows)

    def ghost_refresh(self, rank: int, j: int, kk: int) -> list[Transfer]:
        """Device-side copies that refresh the ghost rows step j reads on device ``rank``
        from rows it holds (nearest, reflect, mirror)."""
        if self.mode in ("wrap", "constant"):
            return []
        rows = [(rank, g, rank, remap(g, self.rows, self.mode))
                for g in self.ghosts_read(rank, j, kk)]
        return _runs(rows)

    def constant_rows(self, rank: int) -> list[tuple[int, int]]:
        """Ghost row ranges (first, count) of device ``rank`` that hold the constant."""
        if self.mode != "constant" or rank not in self.active:
            return []
        a, b = self.held(rank)
        out = []
        if a < 0:
            out.append((a, min(0, b) - a))
        if b > self.rows:
            first = max(self.rows, a)
            out.append((first, b - first))
        return out


def _runs(rows: list[tuple[int, int, int, int]]) -> list[Transfer]:
    """Consecutive rows with consecutive sources on one device as one transfer."""
    out: list[Transfer] = []
    for dst, g, src, s in rows:
        if out:
            t = out[-1]
            if t.dst == dst and t.src == src and t.dst_row + t.count == g \
                    and t.src_row + t.count == s:
                out[-1] = Transfer(src, t.src_row, dst, t.dst_row, t.count + 1)
                continue
        out.append(Transfer(src, s, dst, g, 1))
    return out
