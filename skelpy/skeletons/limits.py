"""The limits a launch must respect, each with the words that name it.

A skeleton's legal launch points are those that pass every :class:`Rule` of its
:class:`Legality`: the device's and the compiled kernel's limits (work-group size, work-item
sizes, local memory) and skelpy's own maxima for parameters a user may force beyond the values
the tuner tries. Those maxima exist because coarsening factors become unrolled loops whose
build time grows with them (``coarsen=128`` took 3.6 s to build on PoCL, 1024 took 209 s):

========================  ======================================================
``MAX_COARSEN`` = 64      Map/Zip ``coarsen``
``MAX_CELLS`` = 64        Stencil cells per work-item: ``cr * cc`` and ``cr * vec``
``MAX_ITERATIONS``        Stencil ``iterations``: 2**31 - 1
``MAX_GROUPS`` = 2**20    Reduce ``groups`` (an upper bound on work-groups)
========================  ======================================================

When a forced point has no legal completion, :func:`check_forced` says which limit it breaks.
Buffers over the device's largest allocation are refused before allocating
(:func:`check_output`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .. import runtime as _rt
from ..errors import ParameterError
from ..tuner.space import ParamSpace

MAX_COARSEN = 64
MAX_CELLS = 64
MAX_ITERATIONS = 2**31 - 1
MAX_GROUPS = 1 << 20


@dataclass(frozen=True)
class Rule:
    """One limit: ``ok(point)`` holds for legal points; ``says(point)`` names the limit."""

    ok: Callable[[Mapping], bool]
    says: Callable[[Mapping], str]


class Legality:
    """A space's constraint as named rules (a ParamSpace calls it like a function)."""

    def __init__(self, rules: Sequence[Rule]):
        self.rules = tuple(rules)

    def __call__(self, point: Mapping) -> bool:
        return all(r.ok(point) for r in self.rules)

    def first_broken(self, point: Mapping) -> tuple[int, str] | None:
        """The first rule ``point`` breaks, as (its position, what it says), or None when the
        point is legal. Rules are checked in order, as the constraint does (later rules may
        cost a build)."""
        for i, r in enumerate(self.rules):
            try:
                fine = r.ok(point)
            except (KeyError, TypeError, ValueError, ZeroDivisionError):
                fine = False
            if not fine:
                return i, r.says(point)
        return None


def at_most(name: str, limit: int, what: str, why: str = "") -> Rule:
    """``name`` may not exceed ``limit``; ``what`` names the limit, ``why`` explains it."""
    because = f" ({why})" if why else ""
    return Rule(lambda p: int(p[name]) <= limit,
                lambda p: f"{name}={p[name]} is over {what}, {limit}{because}")


def at_least(name: str, low: int) -> Rule:
    return Rule(lambda p: int(p[name]) >= low,
                lambda p: f"{name}={p[name]} is below {low}")


def one_of(name: str, values: Sequence) -> Rule:
    return Rule(lambda p: p[name] in values,
                lambda p: f"{name}={p[name]!r} is not one of {list(values)}")


def first_broken(limits: Iterable[tuple[Callable[[], bool], Callable[[], str]]]
                 ) -> tuple[int, str] | None:
    """The first of ``(breaks, says)`` limits that breaks, as (its position, what it says),
    or None: the form of :meth:`Legality.first_broken` for limits computed lazily from one
    point (a pass's or a fused tile's)."""
    for i, (bad, says) in enumerate(limits):
        if bad():
            return i, says()
    return None


def check_forced(space: ParamSpace, broken: Callable[[Mapping], tuple[int, str] | None],
                 forced: Mapping, origin: str, device_name: str, *,
                 free: Sequence[str] | None = None, shown: Mapping | None = None) -> dict:
    """The legal point a forced point completes to (``space``'s nearest), or a
    :class:`ParameterError` naming the limit it breaks where no legal point keeps it:
    malformed names and values as the space words them; otherwise, of the completions of the
    open parameters (those of ``free``, default all, not forced), the one that passes the most
    limits in ``broken``'s order (a :meth:`Legality.first_broken`) shows the reason.
    ``shown``: the params as the user gave them."""
    try:
        base = space.normalise(forced, check_legal=False)
    except ParameterError as exc:
        raise ParameterError(f"{origin}: {exc}") from None
    try:
        return space.normalise(forced)
    except ParameterError:
        pass
    open_ = [p for p in space.params
             if (free is None or p.name in free) and p.name not in forced]
    best: tuple[int, str] | None = None
    for values in itertools.product(*(p.values for p in open_)):
        b = broken(dict(base, **dict(zip((p.name for p in open_), values, strict=True))))
        if b is not None and (best is None or b[0] > best[0]):
            best = b
    reason = best[1] if best else "no legal point keeps these values"
    raise ParameterError(f"{origin}: launch parameters {dict(shown or forced)} are not legal "
                         f"on {device_name}: {reason}")


def check_iterations(origin: str, iterations) -> int:
    """``iterations`` as an int in [0, MAX_ITERATIONS]."""
    if isinstance(iterations, (bool, np.bool_)) or not isinstance(iterations, (int, np.integer)) \
            or iterations < 0:
        raise ParameterError(f"{origin}: iterations must be an int >= 0, got {iterations!r}")
    if iterations > MAX_ITERATIONS:
        raise ParameterError(f"{origin}: iterations={iterations} is over skelpy's maximum "
                             f"{MAX_ITERATIONS} (MAX_ITERATIONS; every iteration is a launch)")
    return int(iterations)


def check_output(origin: str, shape: Sequence[int], dtype: np.dtype, rt: _rt.Runtime,
                 what: str = "the output") -> None:
    """Refuse, before allocating, an output larger than the device allocates in one buffer."""
    nbytes = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
    _rt.check_allocation(rt.device, nbytes, f"{what} {tuple(shape)} of {np.dtype(dtype)}",
                         origin)
