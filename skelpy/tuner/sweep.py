"""Measuring many points of one scenario: the sweeps of ``exhaustive`` mode, ``online``
mode's settling and ``skelpy tune``, built so that a sweep is never worse than not tuning.

* **Order.** The space's default comes first (every other point's result must equal it), then
  what the call would run without tuning (the model's pick), the model's shortlist, and the
  rest in the model's predicted order (without a model: nearest to the default first, or, for
  training data, a deterministic random sample). A sweep cut short by its time box has
  measured the likely winners.
* **Keeping a point.** The fastest few measured points and the untuned choices (the default
  and the model's pick) are re-measured interleaved, round-robin, in one short window
  (:func:`confirm`): a point replaces the untuned choice only when it beats it there by more
  than ``settings.keep_margin``. A single lucky timing in the sweep cannot make the call
  slower than it would have been without tuning.
* **Speed.** Programs are built ahead of their measurement through the request's
  ``prepare`` hook: on a GPU a chunk at a time (the untuned choices alone first, then
  growing chunks: :func:`chunks`), the next chunk building in a background thread while this
  one is measured; on a CPU (whose compiler would run on the cores being
  measured) each point just before its measurement, so a deadline never waits for builds.
* **Resuming.** Points already in the store are not measured again (as Kernel Tuner's cache
  does), so an interrupted ``skelpy tune`` goes on where it stopped.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import RefusedParameters
from . import measure
from .features import is_coarsening
from .space import Point
from .store import params_json

if TYPE_CHECKING:
    from .engine import Call

SAVE_EVERY = 16      # measurements per store write during a sweep
CHUNK = 16           # points prepared (built) ahead of their measurement at a time

# How hard a sweep measures each point, by device kind. A CPU's noise only adds (other
# processes, interrupts), so the minimum of a few repeats estimates a point well enough: the
# confirmation round re-measures every point that can win. A GPU's median converges fast.
SWEEP_BUDGETS = {
    "gpu": measure.Budget(warmup=1, min_reps=3, max_reps=15, rel_ci=0.03, max_seconds=0.3,
                          prune_factor=4.0),
    "cpu": measure.Budget(warmup=1, min_reps=3, max_reps=4, rel_ci=0.0, max_seconds=0.3,
                          prune_factor=4.0, estimator="min"),
}
CONFIRM_ROUNDS = {"gpu": 7, "cpu": 6}


def device_kind(call: Call) -> str:
    return "gpu" if call.req.device.features.get("dev_is_gpu", 1.0) else "cpu"


def sweep_budget(call: Call) -> measure.Budget:
    """``settings.sweep_budget`` when set, else the budget of the device's kind."""
    b = call.settings.sweep_budget
    return b if b is not None else SWEEP_BUDGETS[device_kind(call)]


# -- order -----------------------------------------------------------------------------------


def ordered(call: Call, points: Sequence[Point], *, order: str = "predicted",
            shortlist: int | None = None) -> list[Point]:
    """``points`` in the order a sweep measures them: the default, the untuned choice (the
    model's pick), the model's shortlist, then the rest by the model's predicted score
    (``order="predicted"``; without a model, nearest to the default first) or in a
    deterministic random order (``order="sample"``: training data for ``skelpy tune``; on a
    CPU the points unrolled least come first, :func:`unroll_tier`)."""
    space = call.space
    want = {space.key(p): p for p in points}
    out: dict[tuple, Point] = {}

    def take(p: Point | None) -> None:
        if p is not None:
            k = space.key(p)
            if k in want and k not in out:
                out[k] = want[k]

    default = call.default()
    take(default)
    take(call.untuned()[0])
    ranked = call.ranking()
    k = call.settings.online_shortlist if shortlist is None else shortlist
    for p in ranked[:k]:
        take(p)
    if order == "sample":
        rest = [p for kk, p in want.items() if kk not in out]
        rest.sort(key=space.key)
        random.Random(call.req.kernel_key).shuffle(rest)   # every size: the same sample
        if device_kind(call) == "cpu":
            rest.sort(key=unroll_tier)                     # stable: random within a tier
        for p in rest:
            take(p)
        return list(out.values())
    for p in ranked[k:]:
        take(p)
    rest = [p for kk, p in want.items() if kk not in out]
    rest.sort(key=lambda p: (space.distance(p, default), space.key(p)))
    for p in rest:
        take(p)
    return list(out.values())


# Tiers of a point's unrolling (the product of its coarsening factors) for a CPU's sampled
# sweeps. PoCL compiles the muscle's body once per cell a work-item computes: a synthetic
# stencil with a complex body built in 0.6-1.1 s at 1x1 cells, 2.1 s at 2x2 and 32 s at 4x4
# (and ran 5x slower there), so a random sample spent most of ``skelpy tune``'s budget
# compiling a few points that never win. Points of a lower tier come first.
UNROLL_TIERS = (4, 16)


def unroll_tier(point: Point) -> int:
    """0 for points unrolled at most ``UNROLL_TIERS[0]`` times, 1 up to the next, ..."""
    prod = 1
    for name, v in point.items():
        if is_coarsening(name) and isinstance(v, (int, float)) and not isinstance(v, bool):
            prod *= max(int(v), 1)
    return next((i for i, hi in enumerate(UNROLL_TIERS) if prod <= hi), len(UNROLL_TIERS))


# -- building ahead ------------------------------------------------------------------------------


class _Builder:
    """Builds chunks of points through ``prepare``; with ``background``, the next chunk
    builds in a thread while the caller measures this one."""

    def __init__(self, prepare: Callable[[Sequence[Point]], Any] | None, background: bool):
        self.prepare = prepare
        self.background = background and prepare is not None
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None

    def _run(self, chunk: Sequence[Point]) -> None:
        try:
            self.prepare(chunk)           # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - measuring the point reports real errors
            self._failed = exc

    def ready(self, chunk: Sequence[Point], upcoming: Sequence[Point]) -> None:
        """``chunk`` is about to be measured: make sure it is built; start ``upcoming``."""
        if self.prepare is None:
            return
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        else:
            self._run(chunk)
        if self.background and upcoming:
            self._thread = threading.Thread(target=self._run, args=(list(upcoming),),
                                            daemon=True, name="skelpy-prebuild")
            self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def chunks(n: int, head: int) -> list[tuple[int, int]]:
    """(start, stop) of the chunks a GPU sweep builds at a time: the untuned choices first
    (``head`` points: only they are built before the first measurement), then 4, 8, up to
    :data:`CHUNK` points, so that a short time box (``skelpy tune``'s first round: a second
    or two per scenario) does not wait for a whole chunk of builds to measure two of them
    (an H100's first round measured 56 points in 120 s that way)."""
    out, start, size = [], 0, max(head, 1)
    while start < n:
        out.append((start, min(start + size, n)))
        start += size
        size = 4 if start == max(head, 1) else min(2 * size, CHUNK)
    return out


# -- sweeping ----------------------------------------------------------------------------------


@dataclass
class SweepResult:
    """What one sweep did."""

    measured: int = 0                 # points measured now (the store had the others)
    refused: list[Point] = field(default_factory=list)
    truncated: bool = False           # stopped by the deadline or the point limit
    seconds: float = 0.0


def _bar(total: int, label: str, show: bool | None):
    from tqdm.auto import tqdm

    # show=None: only on a terminal, and only for a sweep that lasts more than a second
    return tqdm(total=total, desc=label, unit="point", leave=show is True,
                delay=1.0 if show is None else 0.0, disable=None if show is None else not show)


def sweep(call: Call, *, budget: measure.Budget | None = None, deadline: float | None = None,
          limit: int | None = None, order: str = "predicted") -> SweepResult:
    """Measure the scenario's legal, unrefused points not yet in the store, in
    :func:`ordered` order, until ``deadline`` (a ``time.perf_counter()`` value; the default
    and the model's pick are always measured) or until the scenario has ``limit`` measured
    points. Every result is checked against the default's."""
    t_start = time.perf_counter()
    call.load()
    req, sc, settings = call.req, call.sc, call.settings
    space = req.space
    budget = budget or sweep_budget(call)
    have = call.measured()
    legal = [p for p in space.legal_points() if space.key(p) not in sc.refused]
    todo = [p for p in ordered(call, legal, order=order) if params_json(p) not in have]
    res = SweepResult()
    if limit is not None and len(have) + len(todo) > limit:
        todo = todo[:max(limit - len(have), 0)]
        res.truncated = True
    default = call.default()
    ref_res: Any = None
    ref_point: Point | None = None
    if todo and space.key(todo[0]) != space.key(default):
        # the default was measured by an earlier (interrupted) sweep: its result is still the
        # reference every new point must equal
        try:
            ref_res = measure.as_array(measure.run_seconds(req.run, dict(default))[0])
            ref_point = default
        except RefusedParameters:
            call.refuse(default)
    # the untuned choices (the default, the model's pick) lead ``todo`` when not measured yet:
    # no deadline stops a sweep before they are measured, so that ``keep`` can compare with
    # what the call would have run without the sweep
    firsts = {space.key(default), space.key(call.untuned()[0])}
    head = 0
    while head < len(todo) and space.key(todo[head]) in firsts:
        head += 1
    best_t = min((t for t, _n in have.values()), default=None)
    rows: list = []
    builder = _Builder(req.prepare if settings.prebuild else None,
                       background=device_kind(call) == "gpu")
    bar = _bar(len(todo), f"sweep {req.skeleton} {req.kernel_key[:8]}", settings.progress)
    stopped = False                       # the deadline passed
    bounds = chunks(len(todo), head)
    try:
        for c, (start, stop) in enumerate(bounds):
            if deadline is not None and ref_res is not None and start >= head \
                    and time.perf_counter() > deadline:
                stopped = True
                break
            chunk = todo[start:stop]
            if builder.background:
                nxt = bounds[c + 1] if c + 1 < len(bounds) else (stop, stop)
                builder.ready(chunk, todo[nxt[0]:nxt[1]])
            for i, p in enumerate(chunk, start):
                if deadline is not None and ref_res is not None and i >= head \
                        and time.perf_counter() > deadline:
                    stopped = True
                    break
                if not builder.background:
                    # a CPU builds on the cores it measures on: one point at a time, so that
                    # a deadline does not wait for a chunk of builds it will not measure
                    builder.ready([p], ())
                try:
                    m = measure.measure(req.run, dict(p), budget, best_t)
                except RefusedParameters:
                    call.refuse(p)
                    res.refused.append(dict(p))
                    bar.update(1)
                    continue
                bar.update(1)
                if ref_res is None:
                    ref_res, ref_point = measure.as_array(m.result), p
                else:
                    measure.check_same(ref_res, m.result, p, ref_point, req.origin)
                rows.append((dict(p), m.seconds, m.n))
                res.measured += 1
                if best_t is None or m.seconds < best_t:
                    best_t = m.seconds
                if len(rows) >= SAVE_EVERY:
                    call.save_rows(rows)
                    rows = []
            if stopped:
                break
    finally:
        builder.close()
        bar.close()
        call.save_rows(rows)
    res.truncated = res.truncated or stopped
    res.seconds = time.perf_counter() - t_start
    return res


# -- keeping a point -----------------------------------------------------------------------------


def confirm(call: Call, points: Sequence[Point], *, rounds: int | None = None,
            record: bool = True, deadline: float | None = None) -> dict[tuple, float]:
    """Re-measure ``points`` interleaved round-robin (a disturbance hits them all alike) and
    return space key -> seconds (the minimum over the rounds on a CPU, else the median).
    The samples go to the store as one row per point (its sample count exceeds a CPU
    sweep's, so the store's weighted median takes this value). Points refused now are
    dropped. After ``deadline`` no round starts beyond the second."""
    req, space = call.req, call.space
    kind = device_kind(call)
    rounds = rounds or call.settings.confirm_rounds or CONFIRM_ROUNDS[kind]
    pts = {space.key(p): dict(p) for p in points}
    samples: dict[tuple, list[float]] = {k: [] for k in pts}
    for k in list(pts):                           # warm-up (every point was built already)
        try:
            measure.run_seconds(req.run, pts[k])
        except RefusedParameters:
            call.refuse(pts.pop(k))
            samples.pop(k)
    order = list(pts)
    for r in range(rounds):
        if deadline is not None and r >= 2 and time.perf_counter() > deadline:
            break
        for k in order[r % len(order):] + order[:r % len(order)] if order else ():
            try:
                samples[k].append(measure.run_seconds(req.run, pts[k])[2])
            except RefusedParameters:
                call.refuse(pts[k])
    est = min if kind == "cpu" else statistics.median
    out = {k: est(v) for k, v in samples.items() if v}
    if record:
        call.save_rows([(pts[k], t, len(samples[k])) for k, t in out.items()])
    return out


@dataclass
class Choice:
    """The point a sweep keeps and why."""

    point: Point
    reference: Point                          # the untuned choice it had to beat
    confirmed: dict[str, float] = field(default_factory=dict)   # params JSON -> seconds

    @property
    def speedup(self) -> float:
        """Confirmed time of the reference over that of the point kept (1.0 when equal)."""
        a = self.confirmed.get(params_json(self.reference))
        b = self.confirmed.get(params_json(self.point))
        return a / b if a and b else 1.0


def keep(call: Call, *, top: int = 2) -> Choice | None:
    """The point to keep after a sweep: the fastest measured points and the untuned choices
    (the default, the model's pick) confirmed interleaved; a point replaces the faster
    untuned choice only when it is faster than it by more than ``settings.keep_margin``.
    None when nothing is measured."""
    space, refused = call.space, call.sc.refused
    times: dict[tuple, tuple[float, Point]] = {}
    for pj, (t, _n) in call.measured().items():
        p = call.parse_point(pj)
        if p is None or space.key(p) in refused:
            continue
        times[space.key(p)] = (t, p)
    if not times:
        return None
    untuned = []
    for p in (call.default(), call.untuned()[0]):
        if p is not None and space.key(p) in times and space.key(p) not in untuned:
            untuned.append(space.key(p))
    ranked = sorted(times, key=lambda k: times[k][0])
    cands = list(dict.fromkeys(ranked[:top] + untuned))
    if not untuned:
        # nothing untuned was measurable (refused): the fastest confirmed point
        untuned = [ranked[0]]
    if len(cands) == 1:
        p = times[cands[0]][1]
        return Choice(p, p, {params_json(p): times[cands[0]][0]})
    conf = confirm(call, [times[k][1] for k in cands])
    if not conf:
        return None
    ref_keys = [k for k in untuned if k in conf] or [min(conf, key=conf.__getitem__)]
    ref = min(ref_keys, key=conf.__getitem__)
    win = min(conf, key=conf.__getitem__)
    if win not in ref_keys and not conf[win] < conf[ref] * (1.0 - call.settings.keep_margin):
        win = ref
    return Choice(space.from_key(win), space.from_key(ref),
                  {params_json(space.from_key(k)): t for k, t in conf.items()})
