"""``skelpy tune``: a model for every skeleton kind within a time budget, resumable.

The budget (by default :data:`DEFAULT_MINUTES` for the device's kind) decides how many
synthetic programs of each kind are measured; each program runs at two data sizes (a second
size costs little: its programs are built, and PoCL's work-group functions compiled, once).
Programs are swept round-robin with a growing number of points per scenario
(:data:`ROUND_LIMITS`): every kind has measured scenarios after the first round, so a budget
cut short still trains a model for each, and the rest of the time deepens them. Stencil
spaces (about 1,600 points) are sampled, not exhausted: after the default, the untuned pick
and the model's shortlist, points come in a random order fixed per kernel (every size of a
program measures the same sample; on a CPU the points with the fewest cells per work-item
first, which PoCL compiles in a fraction of the time). Measurements already in the store
are not taken again, so an interrupted run goes on where it stopped (the points this run
swept are measured again, interleaved, at the end). What is left of the budget trains the model:
this device's scenarios with the shipped ones of other devices (``zero_shot.train``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import synthetic
from .engine import capture_requests, manager, new_call
from .sweep import confirm, sweep

DEFAULT_MINUTES = {"gpu": 2.0, "cpu": 8.0}
# share of the budget kept for training the model at the end
TRAIN_SHARE = {"gpu": 0.12, "cpu": 0.12}
# share of the budget for measuring every swept point again, interleaved
REFINE_SHARE = {"gpu": 0.1, "cpu": 0.15}
ROUND_LIMITS = (8, 20, 40, 80, 160, 320, 640)
# the share of the sweeping time that rounds 1, 2, ... may have used by their end
ROUND_SHARES = (0.3, 0.6, 0.8, 0.9, 1.0)
# programs per minute of budget, and the share of each kind (stencils have the largest
# spaces and the most varied best points)
PROGRAMS_PER_MINUTE = {"gpu": 10.0, "cpu": 2.5}
KIND_SHARES = {"stencil": 0.44, "map": 0.12, "zip": 0.06, "reduce": 0.1, "mapreduce": 0.06,
               "scan": 0.08, "allpairs": 0.14}
BORDERS = ("nearest", "wrap", "constant", "reflect")   # a stencil's border changes its index
                                                        # arithmetic, and so its best point
MAX_AREA = 121             # cells a stencil reads at most (11x11; see _cases)
SIZES = {  # (2-D side, 1-D length, all-pairs rows) per device kind, two each
    "gpu": ((1024, 4096), (1 << 20, 1 << 24), (1024, 2048)),
    "cpu": ((512, 1024), (1 << 18, 1 << 21), (256, 512)),
}


@dataclass
class Program:
    """One synthetic program at several data sizes (one case each)."""

    kind: str
    cases: list[synthetic.Case]


def programs(device_kind: str, minutes: float, *, seed: int = 0,
             kinds: Sequence[str] | None = None) -> list[Program]:
    """The programs a budget of ``minutes`` measures on this kind of device: at least one
    per skeleton kind, more as the budget grows, stencils first."""
    want = [k for k in synthetic.KINDS if kinds is None or k in kinds]
    total = max(len(want), round(PROGRAMS_PER_MINUTE[device_kind] * minutes))
    share = sum(KIND_SHARES.get(k, 0.1) for k in want)
    count = {k: max(1, math.floor(total * KIND_SHARES.get(k, 0.1) / share)) for k in want}
    s2, s1, sap = SIZES[device_kind]
    rng = np.random.default_rng(seed)
    out: list[Program] = []
    for kind in want:
        for i in range(count[kind]):
            out.append(Program(kind, _cases(kind, i, rng, s2, s1, sap)))
    # interleave kinds, so that a run cut short has measured every kind
    by_kind = {k: [p for p in out if p.kind == k] for k in want}
    mixed: list[Program] = []
    while any(by_kind.values()):
        for k in want:
            if by_kind[k]:
                mixed.append(by_kind[k].pop(0))
    return mixed


def _cases(kind: str, i: int, rng: np.random.Generator, s2, s1, sap) -> list[synthetic.Case]:
    if kind == "stencil":
        # reaches up to 11x11: a 21x21 body unrolled over 8x8 cells per work-item took PoCL
        # minutes to compile for one point, more than a whole budget
        shapes = [s for s in synthetic.STENCIL_SHAPES if synthetic.stencil_area(s) <= MAX_AREA]
        shape4 = shapes[i] if i < len(shapes) else \
            tuple(int(v) for v in rng.integers(0, 6, size=4))
        area = synthetic.stencil_area(shape4)
        cplx = bool(i % 2) and area <= 49      # a complex 21x21 body compiles for minutes
        dt = "float32" if i % 4 != 3 else str(rng.choice(("int32", "float64")))
        border = BORDERS[(i // 2) % len(BORDERS)]
        return [synthetic.stencil_case(shape4, complex_body=cplx, dtype=dt, size=(n, n),
                                       border=border, seed=i) for n in s2]
    if kind == "map":
        inten, calls = int(rng.integers(0, 24)), int(rng.integers(0, 4))
        dt = "float32" if i % 3 else str(rng.choice(("float32", "float64")))
        return [synthetic.map_case(inten, calls, dtype=dt, size=n, seed=i) for n in s1]
    if kind == "zip":
        inten = int(rng.integers(0, 16))
        return [synthetic.zip_case(inten, dtype="float32", size=n, seed=i) for n in s1]
    if kind == "reduce":
        op = tuple(synthetic.REDUCE_OPS)[i % len(synthetic.REDUCE_OPS)]
        dt = ("float32", "int32", "float64")[i % 3]
        return [synthetic.reduce_case(op, dtype=dt, size=n, seed=i) for n in s1]
    if kind == "mapreduce":
        inten = int(rng.integers(0, 12))
        return [synthetic.mapreduce_case(inten, dtype="float32", size=n, seed=i) for n in s1]
    if kind == "scan":
        op = tuple(synthetic.SCAN_OPS)[i % len(synthetic.SCAN_OPS)]
        dt = ("float32", "int32")[(i // 2) % 2]
        return [synthetic.scan_case(op, dtype=dt, size=n, inclusive=bool(i % 2), seed=i)
                for n in s1]
    variant = synthetic.ALLPAIRS_KINDS[i % len(synthetic.ALLPAIRS_KINDS)]
    depth = (64, 16, 256)[(i // 3) % 3]
    return [synthetic.allpairs_case(variant, dtype="float32", size=n, depth=depth, seed=i)
            for n in sap]


@dataclass
class RunReport:
    """What a budgeted run did."""

    programs: int = 0
    scenarios: int = 0
    measured: int = 0                     # points measured now (the store had the rest)
    refined: int = 0                      # points measured again, interleaved
    rounds: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    sweep_seconds: float = 0.0
    train_seconds: float = 0.0
    stopped: str = ""                     # "budget" or "done"
    per_kind: dict[str, int] = field(default_factory=dict)   # scenarios measured per kind
    model: Any = None                     # the model trained at the end (train=True)


def run(kit: synthetic.Toolkit, device: Any, *, minutes: float | None = None, seed: int = 0,
        kinds: Sequence[str] | None = None, train: bool = True,
        progress: Callable[[str], None] | None = None,
        chosen: Sequence[Program] | None = None,
        keep_for_training: bool | None = None) -> RunReport:
    """Measure the budget's programs (or ``chosen`` ones) round-robin, then train
    ``device``'s model, all within ``minutes``: a share of them is kept for training (also
    without ``train`` when ``keep_for_training``: the caller trains)."""
    kind = "gpu" if device.features.get("dev_is_gpu", 1.0) else "cpu"
    minutes = DEFAULT_MINUTES[kind] if minutes is None else float(minutes)
    keep = train if keep_for_training is None else keep_for_training
    t0 = time.perf_counter()
    end = t0 + 60.0 * minutes * (1.0 - (TRAIN_SHARE[kind] if keep else 0.0))
    deadline = end - 60.0 * minutes * REFINE_SHARE[kind]
    progs = list(chosen) if chosen is not None else programs(kind, minutes, seed=seed,
                                                             kinds=kinds)
    rep = RunReport(programs=len(progs))
    say = progress or (lambda _m: None)
    calls: dict[str, Any] = {}            # case name -> its captured call (or None: failed)
    earlier: dict[str, set[str]] = {}     # case name -> points the store had before this run
    done: set[str] = set()                # scenarios with nothing left to measure
    # every program at its first size, then at its second (built already: cheap)
    order = [p.cases[i] for i in range(max(len(p.cases) for p in progs)) for p in progs
             if i < len(p.cases)]
    t_sweep = deadline - t0
    for r, limit in enumerate(ROUND_LIMITS):
        if time.perf_counter() > deadline:
            break
        rep.rounds += 1
        t_round, before = time.perf_counter(), rep.measured
        # each round may use its share of the sweep time, split evenly over the scenarios
        # left in it (what one leaves, the next may use): a program whose points compile
        # slowly gets fewer points rather than the others' time
        round_end = min(deadline, t0 + t_sweep * ROUND_SHARES[min(r, len(ROUND_SHARES) - 1)])
        left = [c for c in order if c.name not in done]
        for i, case in enumerate(left):
            now = time.perf_counter()
            if now > deadline:
                break
            case_end = now + max(round_end - now, 0.0) / (len(left) - i)
            call = calls.get(case.name, False)
            if call is False:
                call = calls[case.name] = _capture(kit, case, rep)
                if call is not None:
                    earlier[case.name] = set(call.measured())
            if call is None:
                done.add(case.name)
                continue
            try:
                res = sweep(call, limit=limit, deadline=min(case_end, deadline), order="sample")
            except Exception as exc:  # noqa: BLE001 - report the program and go on
                rep.failed.append((case.name, f"{type(exc).__name__}: {str(exc)[:200]}"))
                done.add(case.name)
                continue
            rep.measured += res.measured
            if not res.truncated:
                done.add(case.name)
        n = rep.measured - before
        dt = time.perf_counter() - t_round
        say(f"round {rep.rounds} (up to {limit} points per scenario): {n} points in "
            f"{dt:.0f} s ({n / max(dt, 1e-9):.1f}/s)")
        if len(done) == sum(len(p.cases) for p in progs):
            rep.stopped = "done"
            break
    else:
        rep.stopped = "done"
    rep.stopped = rep.stopped or "budget"
    t_ref = time.perf_counter()
    for name, c in calls.items():
        if not c or time.perf_counter() > end:
            continue
        # this run's points (an earlier, interrupted run's are not taken again)
        pts = [p for p in (c.parse_point(pj) for pj in c.measured()
                           if pj not in earlier.get(name, ())) if p is not None]
        if len(pts) > 1:
            confirm(c, pts, deadline=end)
            rep.refined += len(pts)
    if rep.refined:
        say(f"measured {rep.refined} points again, interleaved, in "
            f"{time.perf_counter() - t_ref:.0f} s")
    rep.sweep_seconds = time.perf_counter() - t0
    rep.scenarios = sum(1 for c in calls.values() if c)
    for c in calls.values():
        if c:
            rep.per_kind[c.req.skeleton] = rep.per_kind.get(c.req.skeleton, 0) + 1
    if train:
        t1 = time.perf_counter()
        mgr = manager()
        mgr.store.flush(timeout=10)           # writes queued behind another process's
        rep.model = mgr.retrain(device.key)
        rep.train_seconds = time.perf_counter() - t1
    return rep


def _capture(kit: synthetic.Toolkit, case: synthetic.Case, rep: RunReport):
    """Build the case's skeleton and inputs, run it once at its default, and return the
    :class:`~skelpy.tuner.engine.Call` of its main kernel (the largest request)."""
    try:
        fn = case.prepare(kit)
        with capture_requests() as reqs:
            fn()
    except Exception as exc:  # noqa: BLE001
        rep.failed.append((case.name, f"{type(exc).__name__}: {str(exc)[:200]}"))
        return None
    if not reqs:
        return None
    req = max(reqs, key=lambda r: r.dataset.get("n", 0))
    return new_call(req, "exhaustive")
