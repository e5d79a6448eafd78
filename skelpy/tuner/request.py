"""What a skeleton hands the tuner for one call, and what it gets back.

A skeleton describes a call as a :class:`TuningRequest` (its parameter space, the kernel's
identity and features, the data size, and a ``run`` callback that launches with given
parameters); the tuner answers with an :class:`Outcome` (the result, the parameters used and
where they came from) and, when the decision is settled, a :class:`Ticket` that lets the next
identical call skip the tuner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .space import ParamSpace, Point


@dataclass
class TuningRequest:
    """One skeleton call, as the tuner sees it."""

    skeleton: str                     # "map", "zip", "reduce", "scan", "allpairs", "stencil"
    kernel_key: str                   # hash of the generated source without launch macros
    device: Any                       # skelpy.runtime.Device
    space: ParamSpace
    dataset: dict[str, float]         # n, rows, cols, dtype_size, ...
    features: dict[str, float] = field(default_factory=dict)   # static kernel features
    forced: dict | None = None        # params= given by the user
    # run(point) launches with these parameters and returns (result, events); it raises
    # RefusedParameters when the runtime refuses the point. The tuner may call it several
    # times per call (measuring, checking): it must not modify its inputs.
    run: Callable[[Point], tuple[Any, list]] | None = None
    origin: str = ""                  # the muscle's origin, for messages
    # prepare(points) builds the programs of these points ahead of their launch (a sweep
    # calls it a chunk at a time; it may build them in parallel or as one program). Optional:
    # without it, run() builds each point when first launched.
    prepare: Callable[[list[Point]], None] | None = None
    # False where the model has never measured kernels of this kind (packed one-byte stencils,
    # muscle/packed.py: no feature tells them apart): the space's default is taken until the
    # store has measurements (on the H200 the model's pick for packed Life ran at 71% of copy
    # at 16384^2 where the default ran at 87%).
    model_known: bool = True
    # The first guess for this call's data where it depends on the data (None: the space's
    # default): a packed stencil's vector must divide its rows to be read as vectors.
    default: dict | None = None


@dataclass
class Outcome:
    """The result of one call and how its launch parameters were chosen."""

    result: Any
    params: Point
    events: list
    refused: list
    source: str     # forced | cache | store | model | default | online | exhaustive | off,
                    # with "+fallback" when a refusal moved it to the nearest legal point
    ticket: Ticket | None = None    # set when the next identical call may skip the tuner


class Ticket:
    """Proof that a scenario's decision is settled: while ``tuner.ticket_valid`` holds, a
    repeat of the same call would get the same point from the decision cache, so a skeleton
    may launch it again without building a request (the call overhead is what users of tiny
    inputs feel)."""

    __slots__ = ("scenario", "point", "mode", "store")

    def __init__(self, scenario: Any, point: Point, mode: str, store: Any):
        self.scenario, self.point, self.mode, self.store = scenario, point, mode, store
