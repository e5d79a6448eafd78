"""What the skeletons' runs on a device group share: the group in use, inputs as per-device
parts, extra arguments on every device, and one Launch record for a call on several devices."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from .. import runtime as _rt
from ..containers import Container, IndexMatrix, IndexVector
from ..containers.distributions import BLOCK, COPY
from .exchange import exchange_of
from .parts import Part, Parts, distributed

__all__ = ["group_launch", "block_inputs", "copied_extras", "input_view", "collective",
           "here", "named"]


def collective(run):
    """A skeleton's run on a group as one call of the group's exchange (``Exchange.call``:
    under MPI a failure on one rank raises on all). A call that fails leaves its inputs'
    distributions as they were (nothing the user passed is modified by a failed call)."""
    @functools.wraps(run)
    def wrapped(*args, **kwargs):
        kept = _distributions((args, kwargs.values()))
        try:
            with exchange_of(_rt.current().group).call(args[0],
                                                       (*args[1:], *kwargs.values())):
                return run(*args, **kwargs)
        except BaseException:
            _restore(kept)
            raise
    return wrapped


def _distributions(values, depth: int = 0) -> list[tuple]:
    """(storage, parts, distribution) of each container among ``values`` (nested lists,
    tuples and the like, as the runs' ``extras``)."""
    out: list[tuple] = []
    for v in values:
        if isinstance(v, Container):
            s = v.storage
            if s.pending is None:
                out.append((s, s.parts, s.distribution))
        elif depth < 3 and isinstance(v, (list, tuple, type({}.values()))):
            out += _distributions(v, depth + 1)
    return out


def _restore(kept: list[tuple]) -> None:
    """Put back the distributions a failed call changed. A redistribution copies: the old
    parts (kept alive here) still hold the data, or, where there were none, the host or
    single-device copy the new parts were uploaded from is still valid."""
    for s, parts, dist in kept:
        if s.parts is parts:
            continue
        if parts is not None or s.host is not None or s.device_valid:
            s.parts, s.distribution = parts, dist


def named(result, dist):
    """A result made whole on one device (an empty one, or one from an empty input) named
    with the distribution the call gives its results (``v.distribution`` says what the
    call's results have, whatever their size); it is spread that way when next used."""
    if isinstance(result, Container):
        result.storage.distribution = dist
    return result


def here(part: Part) -> bool:
    """Whether this process drives the part's device (under MPI a process drives one)."""
    return part.rt is not None


def group_launch(kind: str, launches: Sequence[_rt.Launch]) -> _rt.Launch:
    """One Launch for a call on several devices: the first device's parameters and sizes,
    every event, every refusal; ``per_device`` lists each device's Launch (rank order)."""
    launches = [ln for ln in launches if ln is not None]
    if not launches:
        return _rt.Launch(kind, {}, (0,), None)
    first = launches[0]
    merged = _rt.Launch(kind, dict(first.params), first.global_size, first.local_size,
                        [e for ln in launches for e in ln.events],
                        [r for ln in launches for r in ln.refused], first.source)
    merged.per_device = list(launches)
    return merged


def block_inputs(group, inputs: Sequence) -> list[Parts | None]:
    """Each container input as block parts (None for index spaces, which split by rows)."""
    return [distributed(c, group, BLOCK) if isinstance(c, Container) else None for c in inputs]


def input_view(value, parts: Parts | None, part: Part):
    """What device ``part.rank`` computes on: its block of a container, or its rows of an
    index space."""
    if parts is not None:
        return parts.local_view(parts.parts[part.rank])
    if isinstance(value, (IndexVector, IndexMatrix)):
        return value.rows(part.lo, part.hi)
    raise TypeError(f"unsupported input {value!r}")


def copied_extras(group, extras: Sequence) -> list:
    """Extras per device: containers read by index are copied to every device (the copy
    distribution); numbers pass as they are. Returns one list of values per rank."""
    per_rank: list[list] = [[] for _ in range(group.size)]
    for e in extras:
        if isinstance(e, Container):
            parts = distributed(e, group, COPY)
            for r in range(group.size):
                per_rank[r].append(parts.whole_view(parts.parts[r]))
        else:
            for r in range(group.size):
                per_rank[r].append(e)
    return per_rank
