"""Launch-parameter spaces: which points exist, which are legal, which is nearest.

Each skeleton describes its kernel's tunable parameters as a :class:`ParamSpace`. The space
knows the constraint that makes a point legal on this device and kernel (work-group limits,
local memory), and answers "nearest legal point" queries, which is the fallback found best
when the runtime refuses a point ([Cummins 2018] §5.5.1; see docs/references.md).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..errors import ParameterError

Point = dict[str, object]


@dataclass(frozen=True)
class Param:
    """One tunable parameter: its name, its ordered candidate values, and whether the
    distance between values is measured on a log2 scale (sizes) or by category."""

    name: str
    values: tuple
    numeric: bool = True
    doc: str = ""


class ParamSpace:
    def __init__(self, params: Iterable[Param], default: Mapping[str, object],
                 constraint: Callable[[Point], bool] | None = None, *,
                 extra_values_ok: Iterable[str] = ()):
        self.params: tuple[Param, ...] = tuple(params)
        self.names = tuple(p.name for p in self.params)
        self._constraint = constraint or (lambda p: True)
        # Parameters for which a forced value outside the listed candidates is fine
        # (e.g. any work-group size up to the device max).
        self._extra_ok = frozenset(extra_values_ok)
        self._points: list[Point] | None = None
        self._index: dict[tuple, int] = {}
        self.default: Point = self.normalise(default, check_legal=False)

    # -- membership -------------------------------------------------------------------------
    def key(self, point: Mapping[str, object]) -> tuple:
        return tuple(point[n] for n in self.names)

    def from_key(self, key: Iterable) -> Point:
        return dict(zip(self.names, key, strict=True))

    def is_legal(self, point: Mapping[str, object]) -> bool:
        try:
            return bool(self._constraint(dict(point)))
        except (KeyError, ValueError, ZeroDivisionError):
            return False

    def points(self) -> list[Point]:
        """Every legal point of the grid of candidate values."""
        return [dict(p) for p in self.legal_points()]

    def legal_points(self) -> list[Point]:
        """The cached legal grid, shared and not copied (the tuner walks it on every
        fallback): callers must not modify the list or its dicts; :meth:`points` copies."""
        if self._points is None:
            grid = itertools.product(*(p.values for p in self.params))
            self._points = [pt for pt in (dict(zip(self.names, v, strict=True)) for v in grid)
                            if self.is_legal(pt)]
            self._index = {self.key(pt): i for i, pt in enumerate(self._points)}
        return self._points

    def index(self, point: Mapping[str, object]) -> int | None:
        """Position of ``point`` in :meth:`points`, or None if it is not a legal grid point."""
        self.legal_points()
        try:
            return self._index.get(self.key(point))
        except (KeyError, TypeError):
            return None

    def describe(self) -> dict:
        """A JSON-able description (stored with each scenario, used by reports)."""
        return {"params": [{"name": p.name, "values": [_plain(v) for v in p.values],
                            "numeric": p.numeric} for p in self.params],
                "default": {k: _plain(v) for k, v in self.default.items()},
                "legal": len(self.legal_points())}

    def normalise(self, forced: Mapping[str, object] | None, *, check_legal: bool = True,
                  base: Mapping[str, object] | None = None) -> Point:
        """Fill in unspecified parameters from ``base`` (default: the space's default) and
        check names and values; raises :class:`ParameterError` naming what is wrong."""
        out = dict(base if base is not None else getattr(self, "default", {}))
        for k, v in (forced or {}).items():
            spec = next((p for p in self.params if p.name == k), None)
            if spec is None:
                raise ParameterError(
                    f"unknown launch parameter {k!r}; this kernel takes {', '.join(self.names)}")
            if v not in spec.values and k not in self._extra_ok:
                raise ParameterError(
                    f"launch parameter {k}={v!r} is not one of {list(spec.values)}")
            if spec.numeric and (not isinstance(v, numbers.Real) or isinstance(v, bool)):
                raise ParameterError(f"launch parameter {k}={v!r} must be a number")
            if spec.numeric and not float(v).is_integer():   # wg=3.5 launched 3 work-items
                raise ParameterError(f"launch parameter {k}={v!r} must be a whole number")
            if spec.numeric and all(isinstance(c, int) for c in spec.values):
                v = int(v)          # counts and sizes: reported (last_launch) as plain ints
            out[k] = v
        missing = [n for n in self.names if n not in out]
        if missing:
            raise ParameterError(f"launch parameters missing: {', '.join(missing)}")
        if check_legal and not self.is_legal(out):
            out = self._complete(forced or {}, out)
            if out is None:
                raise ParameterError(f"launch parameters {dict(forced or {})} are not legal on "
                                     "this device/kernel")
        return out

    def _complete(self, forced: Mapping[str, object], filled: Point) -> Point | None:
        """The legal point that keeps every forced value and is nearest to ``filled`` in the
        parameters the caller left open: forcing ``local=1`` where the default uses a vector
        path that excludes it should still work."""
        free = [p for p in self.params if p.name not in forced]
        best, best_d = None, math.inf
        for values in itertools.product(*(p.values for p in free)):
            cand = dict(filled)
            cand.update(zip((p.name for p in free), values, strict=True))
            if self.is_legal(cand):
                d = self.distance(cand, filled)
                if d < best_d:
                    best, best_d = cand, d
        return best

    # -- distance ---------------------------------------------------------------------------
    def distance(self, a: Mapping[str, object], b: Mapping[str, object]) -> float:
        d = 0.0
        for p in self.params:
            x, y = a[p.name], b[p.name]
            if p.numeric:
                d += (math.log2(max(float(x), 1e-9)) - math.log2(max(float(y), 1e-9))) ** 2
            else:
                d += 0.0 if x == y else 1.0
        return math.sqrt(d)

    def nearest(self, point: Mapping[str, object], exclude: Iterable[tuple] = ()) -> Point | None:
        """The legal point nearest to ``point`` that is not in ``exclude`` (keys)."""
        excluded = set(exclude)
        best, best_d = None, math.inf
        for cand in self.legal_points():
            if self.key(cand) in excluded:
                continue
            d = self.distance(point, cand)
            if d < best_d:
                best, best_d = cand, d
        return None if best is None else dict(best)

    def neighbours(self, point: Mapping[str, object], radius: float = 1.0) -> list[Point]:
        """Legal points within ``radius`` of ``point`` (one doubling or halving of one
        parameter is distance 1), nearest first, ``point`` itself excluded."""
        k = self.key(point)
        found = []
        for cand in self.legal_points():
            if self.key(cand) == k:
                continue
            d = self.distance(point, cand)
            if d <= radius + 1e-9:
                found.append((d, cand))
        found.sort(key=lambda t: t[0])
        return [dict(c) for _, c in found]


def pow2_range(lo: int, hi: int) -> tuple[int, ...]:
    """Powers of two from ``lo`` to ``hi`` inclusive."""
    out, v = [], 1
    while v <= hi:
        if v >= lo:
            out.append(v)
        v *= 2
    return tuple(out)


def _plain(v: object) -> object:
    """NumPy scalars as plain Python values (for JSON)."""
    item = getattr(v, "item", None)
    return item() if callable(item) and not isinstance(v, (str, bytes)) else v
