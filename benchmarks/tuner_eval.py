"""[Cummins 2018]'s evaluation of the autotuner (OmniTune ch. 7), on this machine's device.

1. Exhaustive sweeps: every legal launch point of a scenario set (synthetic stencils from
   [Cummins 2018] Table 6.3's shapes, Game of Life, heat, Gaussian 5x5 and 11x11, the Canny
   stages, a Map and a Reduce) at sizes 512^2..4096^2 (``--quick``: 512^2 only, fewer kernels, and a
   deterministic sample of each space), measured from profiling events (on a CPU the
   minimum of a few repeats: its noise only adds).
2. Leave-one-kernel-out cross-validation of the three model approaches (classifier with
   nearest-neighbour fallback, runtime regressor, speedup regressor) and of the two coarsening
   strategies (joint, [Magni 2015]'s doubling), per parameter signature.
3. A confirmation round (``--no-confirm`` skips it): per scenario, the sweep's best few points
   and every point any method or baseline picked are re-measured, interleaved round-robin in
   one time window, and every ratio is computed from that round. The sweep's oracle is a
   minimum over many noisy estimates (winner's curse) and one disturbed measurement of a
   picked point sinks a method; the round removes both. ``noise`` in the JSON compares the
   sweep-only ratios with the confirmed ones.
4. Reported per device: performance relative to the oracle (geometric mean, median); speedup
   over the best single static point, over the "human expert" point (32x4 for 2-D work-groups,
   128 for 1-D), over the space default and over the runtime's choice (local size None, where
   the skeleton offers it); the fraction of refused points; the decision overhead (a model
   decision for a new scenario, and a cache hit).

Prints a table and writes ``benchmarks/results/tuner_eval_<device>.json`` plus PNG plots.
Skeletons this build lacks are skipped with a note.

    python benchmarks/tuner_eval.py --quick          # CPU / CI scale
    python benchmarks/tuner_eval.py                  # the full set (a GPU)

On a small CPU (PoCL, 2 cores) the full set does not fit in ~40 minutes: every sampled point
is a separate kernel build (1-3 s on PoCL when not cached). The PoCL results in
benchmarks/results/ come from this reduced set, swept in two runs and analysed together:

    python benchmarks/tuner_eval.py --sweep-only --sizes 512,1024,2048 --max-points 96 \
        --case-seconds 40 --minutes 30 --synthetic 0,1,2,8,4 --tag r1 \
        --out benchmarks/results/tuner_eval_data
    python benchmarks/tuner_eval.py --sweep-only --sizes 512,1024,2048 --max-points 64 \
        --case-seconds 240 --synthetic 0,1,2,8,4 --only "_wrap_|float64" --tag r2 \
        --out benchmarks/results/tuner_eval_data
    python benchmarks/tuner_eval.py --analyse \
        benchmarks/results/tuner_eval_data/tuner_eval_<device>_r1_sweeps.json,\
        benchmarks/results/tuner_eval_data/tuner_eval_<device>_r2_sweeps.json
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import skelpy as sk  # noqa: E402
from skelpy import tuner  # noqa: E402
from skelpy.errors import ParameterError, RefusedParameters  # noqa: E402
from skelpy.tuner import model as tmodel  # noqa: E402
from skelpy.tuner import (
    model_files,  # noqa: E402
    synthetic,  # noqa: E402
)
from skelpy.tuner import store as tstore  # noqa: E402
from skelpy.tuner.measure import Budget, measure  # noqa: E402
from skelpy.tuner.space import ParamSpace  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

# -- the real kernels ([Cummins 2018] ch. 6.1) ---------------------------------------------


def game_of_life(nb):
    n = (nb[-1, -1] + nb[-1, 0] + nb[-1, 1] + nb[0, -1] + nb[0, 1] + nb[1, -1] + nb[1, 0]
         + nb[1, 1])
    alive = 0
    if n == 3 or (nb[0, 0] == 1 and n == 2):
        alive = 1
    return alive


def heat(nb):
    return nb[0, 0] + 0.1 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


def make_gaussian(radius: int, sigma: float):
    w = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    W = (w / w.sum()).astype(np.float32)
    R = radius

    def gaussian(nb):
        acc = nb[0, 0] * 0
        for dr in range(-R, R + 1):
            for dc in range(-R, R + 1):
                acc += W[dr + R] * W[dc + R] * nb[dr, dc]
        return acc
    return gaussian


def sobel(nb):
    gx = (nb[-1, 1] + 2 * nb[0, 1] + nb[1, 1]) - (nb[-1, -1] + 2 * nb[0, -1] + nb[1, -1])
    gy = (nb[1, -1] + 2 * nb[1, 0] + nb[1, 1]) - (nb[-1, -1] + 2 * nb[-1, 0] + nb[-1, 1])
    return math.sqrt(gx * gx + gy * gy)


def non_max_suppression(nb):
    gx = nb[0, 1] - nb[0, -1]
    gy = nb[1, 0] - nb[-1, 0]
    c = nb[0, 0]
    ax = abs(gx)
    ay = abs(gy)
    a = nb[-1, 1]
    b = nb[1, -1]
    if ax > 2.414 * ay:
        a = nb[0, -1]
        b = nb[0, 1]
    elif ay > 2.414 * ax:
        a = nb[-1, 0]
        b = nb[1, 0]
    elif gx * gy > 0:
        a = nb[-1, -1]
        b = nb[1, 1]
    keep = c * 0
    if c >= a and c >= b:
        keep = c
    return keep


HIGH, LOW = 0.6, 0.3


def hysteresis(nb):
    strong = 0.0
    c = nb[0, 0]
    if c >= HIGH:
        strong = 1.0
    elif c >= LOW:
        for dr in range(-1, 2):
            for dc in range(-1, 2):
                if nb[dr, dc] >= HIGH:
                    strong = 1.0
    return strong


def brighten(x):
    return math.sqrt(x * x + 1.0) * 0.5 + x


def add(a, b):
    return a + b


def maximum(a, b):
    return max(a, b)


# -- cases ----------------------------------------------------------------------------------------


@dataclasses.dataclass
class EvalCase:
    group: str                               # the kernel, for leave-one-kernel-out
    kind: str                                # stencil | map | reduce
    size: int                                # rows = cols (1-D kinds: size**2 elements)
    build: Callable[[], tuple[Callable[..., Any], Any]]   # -> (call(**kw), skeleton)


def _stencil_case(group, fn, shape, size, *, dtype="float32", border="nearest", data=None):
    def build():
        rng = np.random.default_rng(size)
        arr = data(size, rng) if data else rng.random((size, size)).astype(dtype)
        st = sk.Stencil(fn, shape=shape, border=border)
        m = sk.Matrix(arr)
        return (lambda **kw: st(m, **kw)), st
    return EvalCase(group, "stencil", size, build)


def _synthetic_case(shape4, complex_body, size, border="nearest", dtype="float32"):
    n, s, e, w = shape4
    group = f"synthetic_{n}_{s}_{e}_{w}_{'complex' if complex_body else 'simple'}"
    if border != "nearest" or dtype != "float32":
        group += f"_{border}_{dtype}"
    src = synthetic.stencil_source(n, s, e, w, complex_body=complex_body, dtype=dtype,
                                   name="muscle")

    def build():
        fn = synthetic.compile_muscle(src, "muscle")
        st = sk.Stencil(fn, shape=sk.Shape(north=n, south=s, east=e, west=w), border=border)
        m = sk.Matrix(synthetic.random_data((size, size), dtype, np.random.default_rng(size)))
        return (lambda **kw: st(m, **kw)), st
    return EvalCase(group, "stencil", size, build)


def _map_case(size):
    def build():
        f = sk.Map(brighten)
        v = sk.Vector(np.random.default_rng(size).random(size * size).astype(np.float32))
        return (lambda **kw: f(v, **kw)), f
    return EvalCase("map_brighten", "map", size, build)


def _poly_case(size):
    src = synthetic.map_source(8, math_calls=1, name="muscle")

    def build():
        f = sk.Map(synthetic.compile_muscle(src, "muscle"))
        v = sk.Vector(np.random.default_rng(size).random(size * size).astype(np.float32))
        return (lambda **kw: f(v, **kw)), f
    return EvalCase("map_poly8", "map", size, build)


def saxpy(x, y, a):
    return a * x + y


def _zip_case(size):
    def build():
        z = sk.Zip(saxpy)
        rng = np.random.default_rng(size)
        x = sk.Vector(rng.random(size * size).astype(np.float32))
        y = sk.Vector(rng.random(size * size).astype(np.float32))
        return (lambda **kw: z(x, y, 2.0, **kw)), z
    return EvalCase("zip_saxpy", "map", size, build)


def _reduce_case(size, dtype="float32"):
    def build():
        r = sk.Reduce(add, identity=0)
        v = sk.Vector(np.random.default_rng(size).random(size * size).astype(dtype))
        return (lambda **kw: r(v, **kw)), r
    return EvalCase("reduce_sum" + ("" if dtype == "float32" else f"_{dtype}"), "reduce", size,
                    build)


def _reduce_max_case(size):
    def build():
        r = sk.Reduce(maximum, identity=-1.0)
        v = sk.Vector(np.random.default_rng(size).random(size * size).astype(np.float32))
        return (lambda **kw: r(v, **kw)), r
    return EvalCase("reduce_max", "reduce", size, build)


def cases(quick: bool, sizes: list[int], kinds: set[str] | None = None,
          synthetic_shapes: list[int] | None = None) -> tuple[list[EvalCase], list[str]]:
    have = {k for k in ("Stencil", "Map", "Reduce") if hasattr(sk, k)}
    notes = [f"skipped: sk.{k} is not available in this build"
             for k in ("Stencil", "Map", "Reduce") if k not in have]
    out: list[EvalCase] = []
    # quick leaves out (1, 10, 30, 30): 732 reads per cell take minutes per sweep on a CPU
    # (the n-th synthetic kernel has a complex body when n is odd)
    if synthetic_shapes is not None:
        shapes = [synthetic.STENCIL_SHAPES[i] for i in synthetic_shapes]
    else:
        shapes = [synthetic.STENCIL_SHAPES[i] for i in (0, 1, 2, 6)] if quick \
            else synthetic.STENCIL_SHAPES[:8]
    for size in sizes:
        if "Stencil" in have:
            gol_data = lambda s, rng: (rng.random((s, s)) < 0.3).astype(np.int32)  # noqa: E731
            out += [
                _stencil_case("game_of_life", game_of_life, 1, size, border="wrap",
                              data=gol_data),
                _stencil_case("heat", heat, 1, size),
                _stencil_case("gaussian_5x5", make_gaussian(2, 1.0), 2, size),
                _stencil_case("gaussian_11x11", make_gaussian(5, 2.0), 5, size),
                _stencil_case("canny_sobel", sobel, 1, size),
                _stencil_case("canny_nms", non_max_suppression, 1, size),
                _stencil_case("canny_hysteresis", hysteresis, 1, size),
            ]
            for k, shape4 in enumerate(shapes):
                if quick and size > min(sizes) and k % 2:
                    continue
                out.append(_synthetic_case(shape4, bool(k % 2), size))
            if not quick:
                # border modes and dtypes beyond the default ([Cummins 2018]'s generator varies
                # shape, dtype and body; the border mode changes the index arithmetic)
                # (the complex float32 body with "wrap" segfaults PoCL at wg 4x1024, cr 4,
                # cc 4 on 512^2, a tile wider than the matrix: reported, left out here)
                out.append(_synthetic_case((1, 1, 1, 1), False, size, "wrap", "int32"))
        if "Map" in have:
            out += [_map_case(size), _poly_case(size)]
            if hasattr(sk, "Zip"):
                out.append(_zip_case(size))
        if "Reduce" in have:       # several kernels, so Reduce is cross-validated too
            out += [_reduce_case(size), _reduce_max_case(size)]
            if not quick:
                out.append(_reduce_case(size, "float64"))
    if kinds:
        out = [c for c in out if c.kind in kinds]
    return out, notes


# -- sweeping -------------------------------------------------------------------------------------


def _h(key: tuple) -> int:
    return int(hashlib.sha1(repr(key).encode()).hexdigest()[:8], 16)


def expert_point(space: ParamSpace) -> dict | None:
    """The "human expert" choice: 32x4 work-groups for 2-D kernels, 128 for 1-D ones; other
    parameters at the space default."""
    names = space.names
    p = dict(space.default)
    if "wg_c" in names and "wg_r" in names:
        p.update(wg_c=32, wg_r=4)
    elif "wg" in names:
        p["wg"] = 128
    else:
        return None
    return p


def runtime_choice_point(space: ParamSpace) -> dict | None:
    """The point meaning "local size None" (the runtime chooses), if the skeleton has one."""
    for cand in ({"wg": 0}, {"wg_r": 0, "wg_c": 0}, {"wg": None}):
        if not set(cand) <= set(space.names):
            continue
        try:
            return space.normalise(cand)
        except ParameterError:
            continue
    return None


RUNTIME_CHOICE_NA = {
    "reduce": "n/a: Reduce's kernel sizes its local-memory tree from the work-group size at "
              "build time, so it cannot leave the size to the runtime (local_size=None)"}


def sample_space(space: ParamSpace, max_points: int | None) -> ParamSpace:
    """A deterministic sample of the legal points (same sample for every scenario of the same
    parameter grid), always keeping the default and the expert point."""
    legal = space.points()
    if not max_points or len(legal) <= max_points:
        return space
    keep = {space.key(space.default)}
    ex = expert_point(space)
    if ex is not None and space.is_legal(ex):
        keep.add(space.key(ex))
    frac = max_points / len(legal)
    chosen = {space.key(p) for p in legal if (_h(space.key(p)) % 10_000) < frac * 10_000}
    chosen |= keep
    sub = ParamSpace(space.params, space.default,
                     constraint=lambda p, c=chosen, s=space: s.is_legal(p) and s.key(p) in c)
    return sub


def capture_request(call: Callable[..., Any]) -> list:
    """Run one call in 'off' mode and return the tuning requests it made."""
    got: list = []
    orig = tuner.execute

    def spy(req):
        got.append(req)
        return orig(req)
    tuner.execute = spy
    try:
        with tuner.tuning("off"):
            call()
    finally:
        tuner.execute = orig
    return got


def sweep_case(case: EvalCase, max_points: int | None, budget: Budget,
               case_seconds: float | None = None) -> dict | None:
    call, skel = case.build()
    reqs = capture_request(call)
    if not reqs:
        return None
    req = max(reqs, key=lambda r: r.dataset.get("n", 0))      # the main kernel of the call
    sub = sample_space(req.space, max_points)
    t0 = time.perf_counter()
    stop = None if not case_seconds else t0 + case_seconds
    with tuner.tuning("exhaustive"), tuner.sweep_deadline(stop):
        tuner.execute(dataclasses.replace(req, space=sub))
    sweep_s = time.perf_counter() - t0
    none_t = None
    na = None
    rp = runtime_choice_point(req.space)
    if rp is None:
        na = RUNTIME_CHOICE_NA.get(req.skeleton, f"{req.skeleton} offers no local_size=None point")
    if rp is not None:
        try:
            none_t = measure(req.run, rp, budget).seconds
        except RefusedParameters:
            none_t = None
    return {"group": case.group, "kind": case.kind, "size": case.size,
            "scenario": tuner.scenario_id(req), "request": req, "sweep_seconds": sweep_s,
            "space_points": len(req.space.points()), "sampled_points": len(sub.points()),
            "swept_points": len(tstore.get_store().measurements(tuner.scenario_id(req))),
            "runtime_choice_seconds": none_t, "runtime_choice_na": na,
            "expert": expert_point(req.space)}


# -- analysis -------------------------------------------------------------------------------------


def geomean(xs) -> float:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _space_of(sd: tmodel.ScenarioData) -> ParamSpace:
    from skelpy.tuner.space import Param

    params = [Param(p["name"], tuple(p["values"]), p.get("numeric", True))
              for p in sd.space["params"]]
    measured = set(sd.times)
    return ParamSpace(params, sd.space["default"],
                      constraint=lambda p: tstore.params_json(p) in measured)


def predict_for(gm: tmodel.GroupModel, sd: tmodel.ScenarioData, approach: str,
                coarsen: str, **choose_kw: Any) -> str:
    """The params JSON the model picks for a held-out scenario (among its measured points)."""
    space = _space_of(sd)
    pts = space.points()
    cand = tmodel.CandidateSet(pts, space.names, {p.name: p.numeric for p in space.params})
    dflt = cand.index_of(sd.space["default"]) if sd.default_key in sd.times else None
    pick = tmodel.choose(gm, sd.features, cand, set(), approach=approach, coarsen=coarsen,
                         default=dflt, **choose_kw)
    if pick is None:
        # the tuner's own fallback: the default (never the held-out scenario's measured best)
        return sd.default_key if sd.default_key in sd.times else \
            tstore.params_json(space.nearest(sd.space["default"]))
    if isinstance(pick, int):
        return tstore.params_json(cand.points[pick])
    near = space.nearest(pick)
    return tstore.params_json(near)


METHODS = [("classifier", "joint"), ("runtime", "joint"), ("runtime", "doubling"),
           ("speedup", "joint"), ("speedup", "doubling")]
# Not a model alone: the speedup regressor's shortlist of k points, each measured once (as an
# online tuner would on its first k calls), the fastest kept. The pick is chosen from the
# sweep's times; its ratio, like every other, comes from the confirmation round.
SHORTLISTS = (4, 8)


def shortlist_for(gm: tmodel.GroupModel, sd: tmodel.ScenarioData, k: int,
                  **choose_kw: Any) -> str | None:
    space = _space_of(sd)
    pts = space.points()
    cand = tmodel.CandidateSet(pts, space.names, {p.name: p.numeric for p in space.params})
    idx = tmodel.shortlist(gm, sd.features, cand, set(), k, approach="speedup", **choose_kw)
    keys = [tstore.params_json(cand.points[i]) for i in idx]
    return min(keys, key=sd.times.__getitem__) if keys else None


def evaluate(scns: list[tmodel.ScenarioData], groups: dict[str, str], info: dict[str, dict],
             n_estimators: int, fit_kw: dict | None = None,
             choose_kw: dict | None = None) -> dict:
    """Leave-one-kernel-out per parameter signature; returns per-scenario rows + summary."""
    by_sig: dict[str, list[tmodel.ScenarioData]] = {}
    for sd in scns:
        by_sig.setdefault(tmodel.signature(sd.names), []).append(sd)
    rows = []
    notes = []
    for sig, sds in by_sig.items():
        kernels = sorted({groups[sd.key] for sd in sds})
        # the best single static point ([Cummins 2018] §7.3.3) in hindsight, over all scenarios
        ranked = tmodel.static_ranking(sds)
        static_all = ranked[0] if ranked else None
        if len(kernels) < 2:
            notes.append(f"[{sig}] only one kernel ({kernels[0]}): no cross-validation")
        for held in kernels:
            train = [sd for sd in sds if groups[sd.key] != held]
            test = [sd for sd in sds if groups[sd.key] == held]
            gm = tmodel.fit_group(sig, train, n_estimators=n_estimators, n_jobs=-1,
                                  **(fit_kw or {})) \
                if len(train) >= tmodel.MIN_SCENARIOS else None
            # what a developer would fix after tuning the other kernels
            ranked_train = tmodel.static_ranking(train)
            static = ranked_train[0] if ranked_train else None
            for sd in test:
                best_k, best_t = sd.best()
                row = {"scenario": sd.key, "kernel": held, "signature": sig,
                       "size": info[sd.key]["size"], "points": len(sd.times),
                       "refused": len(sd.refused), "oracle": json.loads(best_k),
                       "oracle_seconds": best_t}
                for approach, co in METHODS:
                    name = f"{approach}/{co}"
                    if gm is None:
                        row[name] = None
                        continue
                    k = predict_for(gm, sd, approach, co, **(choose_kw or {}))
                    row[name] = best_t / sd.times[k]
                    row[name + ":point"] = json.loads(k)
                for n_short in SHORTLISTS if gm is not None else ():
                    k = shortlist_for(gm, sd, n_short, **(choose_kw or {}))
                    if k is not None:
                        name = f"speedup/measure{n_short}"
                        row[name] = best_t / sd.times[k]
                        row[name + ":point"] = json.loads(k)
                ex = info[sd.key].get("expert")
                exk = tstore.params_json(ex) if ex else None
                for b, k in (("default", sd.default_key), ("static", static),
                             ("static_hindsight", static_all), ("expert", exk)):
                    row[b] = best_t / sd.times[k] if k in sd.times else None
                    if k in sd.times:
                        row[b + ":point"] = json.loads(k)
                nt = info[sd.key].get("runtime_choice_seconds")
                row["runtime_choice"] = best_t / nt if nt else None
                if info[sd.key].get("runtime_choice_na"):
                    row["runtime_choice_na"] = info[sd.key]["runtime_choice_na"]
                rows.append(row)
    return {"rows": rows, "notes": notes}


BASELINES = ("static", "static_hindsight", "expert", "default", "runtime_choice")


def _confirm_points(sd: tmodel.ScenarioData, rows: list[dict], top_k: int) -> list[str]:
    """What the confirmation round re-measures for one scenario: the sweep's best few and
    every point a method or a baseline picked (params JSON, best first)."""
    ranked = sorted(sd.times, key=sd.times.__getitem__)
    keys = dict.fromkeys(ranked[:top_k])
    for row in rows:
        for name, v in row.items():
            if name.endswith(":point") and v is not None:
                keys[tstore.params_json(v)] = None
    return [k for k in keys if k in sd.times]


def remeasure(scns: list[tmodel.ScenarioData], info: dict[str, dict],
              lookup: dict[tuple[str, int], EvalCase],
              points_of: Callable[[tmodel.ScenarioData], list[str]], *,
              runtime_choice: bool = False, rounds: int = 15, seconds: float = 8.0,
              passes: int = 1, estimator: str = "min", label: str = "confirm"
              ) -> dict[str, dict]:
    """Re-measure ``points_of(sd)`` (params JSON) of every scenario, and its runtime-choice
    point if asked, interleaved round-robin in one time window (a disturbance hits all the
    candidates alike rather than one), ``rounds`` times or until ``seconds`` ran out (at
    least 3 rounds); then the same again ``passes`` times, minutes apart, since this VM's
    slow spells (steal time) last seconds. Returns scenario -> {params JSON or
    "runtime_choice": seconds over all samples, "_rounds": rounds in all}."""
    from skelpy.tuner.measure import run_seconds

    samples: dict[str, dict[str, list[float]]] = {}
    t_all = time.perf_counter()
    for pas in range(passes):
        for n, sd in enumerate(scns):
            meta = info[sd.key]
            case = lookup.get((meta["group"], int(meta["size"])))
            keys = points_of(sd)
            if case is None or not keys:
                continue
            call, _skel = case.build()
            reqs = capture_request(call)
            req = max(reqs, key=lambda r: r.dataset.get("n", 0))
            if tuner.scenario_id(req) != sd.key:
                print(f"{label}: {meta['group']}@{meta['size']} rebuilt as another scenario; "
                      "skipped", flush=True)
                continue
            pts: dict[str, dict] = {k: json.loads(k) for k in keys}
            rp = runtime_choice_point(req.space) if runtime_choice else None
            if rp is not None:
                pts["runtime_choice"] = dict(rp)
            got = samples.setdefault(sd.key, {k: [] for k in pts})
            t0 = time.perf_counter()
            for k in list(pts):                       # warm-up (and drop what is refused now)
                try:
                    run_seconds(req.run, pts[k])
                except RefusedParameters:
                    del pts[k]
            r = 0
            while r < rounds and (r < 3 or time.perf_counter() - t0 < seconds):
                order = list(pts)
                order = order[r % len(order):] + order[:r % len(order)]   # rotate the order
                for k in order:
                    got[k].append(run_seconds(req.run, pts[k])[2])
                r += 1
            print(f"{label} pass {pas + 1}/{passes} [{n + 1}/{len(scns)}] {meta['group']}@"
                  f"{meta['size']}: {len(pts)} points x {r} rounds in "
                  f"{time.perf_counter() - t0:.1f} s (total {time.perf_counter() - t_all:.0f} s)",
                  flush=True)
    f = min if estimator == "min" else statistics.median
    out: dict[str, dict] = {}
    for key, got in samples.items():
        out[key] = {k: f(v) for k, v in got.items() if v}
        out[key]["_rounds"] = max((len(v) for v in got.values()), default=0)
    return out


def confirm(rows: list[dict], scns: list[tmodel.ScenarioData], info: dict[str, dict],
            lookup: dict[tuple[str, int], EvalCase], *, top_k: int = 6,
            **kw: Any) -> dict[str, dict]:
    """The confirmation round: per scenario, the top ``top_k`` points, every point that any
    method or baseline picked and the runtime's choice, re-measured by :func:`remeasure`.
    Ratios computed from these are free of the sweep's winner's curse (its oracle is the
    minimum over many single noisy estimates) and of one unlucky timing sinking a pick."""
    by_key: dict[str, list[dict]] = {}
    for r in rows:
        by_key.setdefault(r["scenario"], []).append(r)
    todo = [sd for sd in scns if sd.key in by_key]
    return remeasure(todo, info, lookup,
                     lambda sd: _confirm_points(sd, by_key[sd.key], top_k),
                     runtime_choice=True, label="confirm", **kw)


def refine(scns: list[tmodel.ScenarioData], info: dict[str, dict],
           lookup: dict[tuple[str, int], EvalCase], *, top_k: int = 8,
           **kw: Any) -> dict[str, dict]:
    """Training data the models can trust: per scenario, the sweep's best ``top_k`` points, the
    default (every speedup target is relative to it) and the expert point re-measured by
    :func:`remeasure`, before any model sees them. Apply with :func:`apply_refined`."""
    def points_of(sd: tmodel.ScenarioData) -> list[str]:
        keys = dict.fromkeys(sorted(sd.times, key=sd.times.__getitem__)[:top_k])
        keys[sd.default_key] = None
        ex = info[sd.key].get("expert")
        if ex:
            keys[tstore.params_json(ex)] = None
        return [k for k in keys if k in sd.times]
    return remeasure(scns, info, lookup, points_of, label="refine", **kw)


def apply_refined(scns: list[tmodel.ScenarioData], refined: dict[str, dict],
                  estimator: str = "min") -> int:
    """Fold re-measured times into the scenarios (the minimum of both on a CPU, where each is
    a minimum of repeats; else the re-measured one). Returns the points updated."""
    n = 0
    for sd in scns:
        for k, t in refined.get(sd.key, {}).items():
            if k in sd.times:
                sd.times[k] = min(sd.times[k], t) if estimator == "min" else t
                n += 1
    return n


def apply_confirmation(rows: list[dict], conf: dict[str, dict]) -> list[dict]:
    """Rows whose ratios come from the confirmation round (the sweep's are kept under
    ``sweep``); the oracle is the fastest confirmed point of the space."""
    out = []
    for row in rows:
        c = conf.get(row["scenario"])
        if not c:
            continue
        pts = {k: v for k, v in c.items() if not k.startswith("_") and k != "runtime_choice"}
        best_k = min(pts, key=pts.__getitem__)
        best_t = pts[best_k]
        new = dict(row)
        new["sweep"] = {k: row.get(k) for k in [m for m in row if not m.endswith(":point")
                                                and (("/" in m) or m in BASELINES)]}
        new["sweep"]["oracle"] = row["oracle"]
        new["sweep"]["oracle_seconds"] = row["oracle_seconds"]
        new.update(oracle=json.loads(best_k), oracle_seconds=best_t, confirm_rounds=c["_rounds"],
                   sweep_oracle_confirmed_seconds=pts.get(tstore.params_json(row["oracle"])))
        for name in [m for m in row if "/" in m and not m.endswith(":point")] + list(BASELINES):
            if name == "runtime_choice":
                t = c.get("runtime_choice")
            else:
                p = row.get(name + ":point")
                t = pts.get(tstore.params_json(p)) if p is not None else None
            new[name] = best_t / t if t else None
        out.append(new)
    return out


def noise_report(rows: list[dict]) -> dict:
    """How much of the sweep's shortfall was noise: per scenario, the sweep's oracle
    re-measured against the confirmed best, and the change of every method's ratio."""
    if not rows or "sweep" not in rows[0]:
        return {}
    same = sum(1 for r in rows if r["oracle"] == r["sweep"]["oracle"])
    curse = [r["sweep"]["oracle_seconds"] / r["sweep_oracle_confirmed_seconds"]
             for r in rows if r.get("sweep_oracle_confirmed_seconds")]
    oracle_gap = [r["oracle_seconds"] / r["sweep_oracle_confirmed_seconds"]
                  for r in rows if r.get("sweep_oracle_confirmed_seconds")]
    out = {"scenarios": len(rows), "sweep_oracle_still_best": same / len(rows),
           "sweep_oracle_time_over_its_confirmed_time_geomean": geomean(curse),
           "confirmed_best_over_sweep_oracle_geomean": geomean(oracle_gap), "methods": {}}
    for name in [m for m in rows[0] if "/" in m and not m.endswith(":point")] + \
            list(BASELINES):
        a = [r["sweep"].get(name) for r in rows]
        b = [r.get(name) for r in rows]
        pairs = [(x, y) for x, y in zip(a, b) if x and y]
        if pairs:
            out["methods"][name] = {"sweep_geomean": geomean(x for x, _ in pairs),
                                    "confirmed_geomean": geomean(y for _, y in pairs)}
    return out


def summarise(rows: list[dict]) -> dict:
    out: dict[str, Any] = {}
    baselines = BASELINES
    names = [f"{a}/{c}" for a, c in METHODS] + [f"speedup/measure{k}" for k in SHORTLISTS]
    for name in names:
        perf = [r[name] for r in rows if r.get(name)]
        if not perf:
            continue
        s = {"perf_geomean": geomean(perf), "perf_median": statistics.median(perf),
             "perf_min": min(perf), "scenarios": len(perf),
             "oracle_hits": sum(1 for p in perf if p >= 0.999) / len(perf)}
        for b in baselines:
            pairs = [(r[name], r[b]) for r in rows if r.get(name) and r.get(b)]
            s[f"speedup_over_{b}"] = geomean(p / q for p, q in pairs) if pairs else None
            s[f"speedup_over_{b}_median"] = statistics.median(p / q for p, q in pairs) \
                if pairs else None
        out[name] = s
    for b in baselines:
        perf = [r[b] for r in rows if r.get(b)]
        out[b] = {"perf_geomean": geomean(perf) if perf else None,
                  "perf_median": statistics.median(perf) if perf else None,
                  "scenarios": len(perf),
                  "missing": sum(1 for r in rows if not r.get(b))}
    return out


def decision_overhead(records: list[dict], dm: tmodel.DeviceModel) -> dict:
    """Seconds of a model decision through the real tuner entry point, with an empty store
    and the model installed: the first decision for a kernel (includes the one-off work of
    enumerating and featurising its space), a decision for a new scenario of a known
    kernel, and a decision-cache hit."""
    firsts, misses, hits, sources = [], [], [], []
    with tempfile.TemporaryDirectory() as d:
        old = os.environ.get("SKELPY_CACHE_DIR")
        os.environ["SKELPY_CACHE_DIR"] = d
        try:
            tstore.get_store()
            for r in records:
                req = r["request"]
                tuner.forget_space(req.space)
                tuner.manager().set(req.device.key, dm)
                t0 = time.perf_counter()
                tuner.choose_params(req)
                firsts.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                for _ in range(200):
                    tuner.choose_params(req)
                hits.append((time.perf_counter() - t0) / 200)
                tuner.reset()
                tuner.manager().set(req.device.key, dm)
                t0 = time.perf_counter()
                _, src = tuner.choose_params(req)
                misses.append(time.perf_counter() - t0)
                sources.append(src)
        finally:
            if old is None:
                os.environ.pop("SKELPY_CACHE_DIR", None)
            else:
                os.environ["SKELPY_CACHE_DIR"] = old
            tstore.get_store()

    def ms(xs, f):
        return 1e3 * f(xs) if xs else None
    return {"model_decision_ms_median": ms(misses, statistics.median),
            "model_decision_ms_max": ms(misses, max),
            "first_decision_of_kernel_ms_median": ms(firsts, statistics.median),
            "cache_hit_us_median": 1e3 * ms(hits, statistics.median) if hits else None,
            "approach": "/".join(tmodel.default_method(records[0]["request"].device.features))
            if records else None,
            "sources": {s: sources.count(s) for s in set(sources)}}


# -- output ---------------------------------------------------------------------------------------


def _fmt(x, pct=False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "   n/a"
    return f"{x:6.1%}" if pct else f"{x:5.2f}x"


def print_table(dev_name: str, summary: dict, extra: dict) -> None:
    print(f"\n== autotuner evaluation on {dev_name} ==")
    print(f"scenarios {extra['scenarios']} ({extra['kernels']} kernels), swept points "
          f"{extra['points']}, refused {extra['refused_fraction']:.2%}")
    print(f"{'method':<20} {'perf geo':>8} {'median':>7} {'min':>7} {'vs static':>9} "
          f"{'vs 32x4/128':>11} {'vs default':>10} {'vs None':>8}")
    for name, s in summary.items():
        if "/" not in name:
            continue
        print(f"{name:<20} {_fmt(s['perf_geomean'], True):>8} {_fmt(s['perf_median'], True):>7} "
              f"{_fmt(s['perf_min'], True):>7} {_fmt(s['speedup_over_static']):>9} "
              f"{_fmt(s['speedup_over_expert']):>11} {_fmt(s['speedup_over_default']):>10} "
              f"{_fmt(s['speedup_over_runtime_choice']):>8}")
    for b in ("static", "static_hindsight", "expert", "default", "runtime_choice"):
        s = summary[b]
        print(f"{b:<20} {_fmt(s['perf_geomean'], True):>8} {_fmt(s['perf_median'], True):>7}"
              f"   ({s['missing']} scenarios without it)")
    oh = extra["overhead"]
    print(f"decision overhead ({oh.get('approach')}): new scenario "
          f"{oh['model_decision_ms_median']:.3f} ms median ({oh['model_decision_ms_max']:.3f} "
          f"max); first decision of a kernel {oh['first_decision_of_kernel_ms_median']:.2f} ms "
          f"(one-off space preparation); cache hit {oh['cache_hit_us_median']:.1f} us; "
          f"sources {oh['sources']}"
          if oh.get("model_decision_ms_median") is not None else "decision overhead: n/a")


def plots(slug: str, rows: list[dict], summary: dict, out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no plots: matplotlib missing; pip install 'skelpy[plot]')")
        return []
    files = []
    names = [n for n in summary if "/" in n] + ["static", "static_hindsight", "expert",
                                                "default", "runtime_choice"]
    names = [n for n in names if summary[n].get("perf_geomean")]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    geo = [summary[n]["perf_geomean"] for n in names]
    med = [summary[n]["perf_median"] for n in names]
    x = np.arange(len(names))
    ax.bar(x - 0.2, geo, 0.4, label="geometric mean")
    ax.bar(x + 0.2, med, 0.4, label="median")
    ax.axhline(0.95, color="k", ls="--", lw=0.8, label="95% target")
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylim(0, 1.2)
    ax.set_ylabel("performance relative to the oracle")
    ax.set_title(f"leave-one-kernel-out, {slug}")
    ax.legend(loc="upper right", ncol=3)
    fig.tight_layout()
    p = out / f"tuner_eval_{slug}_perf.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    files.append(str(p))
    # oracle work-group sizes of the 2-D scenarios ([Cummins 2018] Fig. 7.x)
    pts = [r["oracle"] for r in rows if "wg_r" in r["oracle"] and "wg_c" in r["oracle"]]
    if pts:
        rs = sorted({p["wg_r"] for p in pts})
        cs = sorted({p["wg_c"] for p in pts})
        grid = np.zeros((len(rs), len(cs)))
        for p in pts:
            grid[rs.index(p["wg_r"]), cs.index(p["wg_c"])] += 1
        fig, ax = plt.subplots(figsize=(6, 4))
        im = ax.imshow(grid, origin="lower", cmap="magma")
        ax.set_xticks(range(len(cs)), cs)
        ax.set_yticks(range(len(rs)), rs)
        ax.set_xlabel("work-group columns")
        ax.set_ylabel("work-group rows")
        ax.set_title("oracle work-group sizes (count of scenarios)")
        fig.colorbar(im, ax=ax)
        fig.tight_layout()
        p = out / f"tuner_eval_{slug}_oracle_wg.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        files.append(str(p))
    return files


# -- main -----------------------------------------------------------------------------------------


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()[:40]


def sweep_phase(args, out: Path) -> tuple[dict, list[dict]]:
    """Sweep the cases on this machine's device; saves as it goes (a run cut short still
    leaves its sweeps and the store's data in ``out``)."""
    if args.device:
        sk.use(args.device)
    dev = sk.current_device()
    slug = _slug(dev.name) + (f"_{args.tag}" if args.tag else "")
    # the first size is swept for every kernel before the next size starts, so a time budget
    # cuts whole sizes rather than whole kernels
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else \
        ([512] if args.quick else [1024, 512, 2048, 4096])
    max_points = args.max_points if args.max_points is not None else \
        (48 if args.quick else None)
    # On a CPU the noise only adds (other processes, interrupts): the minimum of the repeats
    # estimates the undisturbed time, the median drifts with the machine's load.
    is_cpu = not dev.features.get("dev_is_gpu", 1.0)
    # The minimum of a few repeats is enough for the sweep: the confirmation round re-measures
    # every point that matters, so a CI target would only spend the time budget.
    budget = Budget(warmup=1, min_reps=3, max_reps=8 if args.quick else 15,
                    rel_ci=0.05 if args.quick else 0.03,
                    max_seconds=0.15 if args.quick else 0.3,
                    estimator="min" if is_cpu else "median")
    if is_cpu:
        budget.max_reps, budget.rel_ci = 4, 0.0
    if args.reps:
        budget.min_reps = budget.max_reps = args.reps
    if args.prune:
        budget.prune_factor = args.prune
    tuner.settings.sweep_budget = budget          # the sweeps of exhaustive mode use it
    todo, notes = cases(args.quick, sizes,
                        set(args.kinds.split(",")) if args.kinds else None, args.synthetic)
    if args.only:
        todo = [c for c in todo if re.search(args.only, c.group)]
    if args.limit:
        todo = todo[:args.limit]
    for n in notes:
        print("note:", n)
    meta = {"device": dev.name, "device_key": dev.key, "slug": slug, "quick": args.quick,
            "sizes": sizes, "max_points": max_points, "synthetic_shapes": args.synthetic, "budget": dataclasses.asdict(budget),
            "notes": notes, "failures": [], "not_swept": []}
    sweeps_path = out / f"tuner_eval_{slug}_sweeps.json"
    records: list[dict] = []

    def save():
        blob = dict(meta, sweeps=[{k: v for k, v in r.items() if k != "request"}
                                  for r in records])
        sweeps_path.write_text(json.dumps(blob, indent=1, default=str))
        (out / f"tuner_eval_{slug}_store.json").write_text(
            json.dumps(tstore.get_store().export_data()))

    deadline = None if args.minutes is None else time.perf_counter() + 60 * args.minutes
    t_start = time.perf_counter()
    for i, c in enumerate(todo):
        name = f"{c.group}@{c.size}"
        if deadline is not None and time.perf_counter() > deadline:
            meta["not_swept"].append(name)
            continue
        t0 = time.perf_counter()
        try:
            r = sweep_case(c, max_points, budget, args.case_seconds)
            if r:
                records.append(r)
                print(f"[{i + 1}/{len(todo)}] {name}: {r['swept_points']} of "
                      f"{r['space_points']} points in {time.perf_counter() - t0:.1f} s "
                      f"(total {time.perf_counter() - t_start:.0f} s)", flush=True)
        except Exception as exc:  # noqa: BLE001 - report and go on
            meta["failures"].append(f"{name}: {type(exc).__name__}: {str(exc)[:300]}")
            print(f"[{i + 1}/{len(todo)}] {name}: FAILED {meta['failures'][-1]}", flush=True)
        save()
    if meta["not_swept"]:
        print(f"not swept (time budget): {len(meta['not_swept'])} cases")
    if records:
        t0 = time.perf_counter()
        full = tmodel.train(tstore.get_store(), dev.key, n_estimators=args.trees)
        meta["train_all_seconds"] = time.perf_counter() - t0
        meta["overhead"] = decision_overhead(records, full)
        print(f"decision overhead: {meta['overhead']}", flush=True)
    save()
    return meta, records


def write_pretrained(scns: list[tmodel.ScenarioData], meta: dict, path: Path,
                     trees: int) -> None:
    """Train on every analysed scenario and save the compact model the package ships for
    this device kind (only the approach the device kind uses)."""
    by: dict[str, list[tmodel.ScenarioData]] = {}
    for sd in scns:
        by.setdefault(tmodel.signature(sd.names), []).append(sd)
    approach, _co = tmodel.default_method(scns[0].features)
    groups = {sig: tmodel.fit_group(sig, sds, n_estimators=trees, n_jobs=-1,
                                    approaches=(approach,))
              for sig, sds in by.items() if len(sds) >= tmodel.MIN_SCENARIOS}
    dm = model_files.compact(tmodel.DeviceModel(meta["device_key"], 0, groups, time.time()),
                             approach)
    model_files.save(dm, path)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB, {approach}, "
          f"{len(scns)} scenarios)")


def analyse_phase(meta: dict, sweeps: list[dict], store: tstore.Store, out: Path,
                  trees: int, min_points: int = 40, confirm_args: dict | None = None,
                  save_pretrained: str | None = None, refined_file: str | None = None) -> int:
    info = {r["scenario"]: r for r in sweeps}
    groups = {r["scenario"]: r["group"] for r in sweeps}
    scns = [sd for sd in tmodel.load_scenarios(store, meta["device_key"]) if sd.key in info]
    # a sweep cut short by its time cap has too few points for a meaningful oracle
    thin = [sd for sd in scns if len(sd.times) < min_points]
    if thin:
        meta.setdefault("notes", []).append(
            f"left out {len(thin)} scenarios with fewer than {min_points} measured points: "
            + ", ".join(f"{groups[sd.key]}@{info[sd.key]['size']} ({len(sd.times)})"
                        for sd in thin))
    scns = [sd for sd in scns if len(sd.times) >= min_points]
    if not scns:
        print("nothing to analyse")
        return 1
    lookup: dict[tuple[str, int], EvalCase] = {}
    if confirm_args is not None and sk.current_device().key != meta["device_key"]:
        meta.setdefault("notes", []).append(
            "no refinement or confirmation round: the sweeps are from another device")
        confirm_args = None
    if confirm_args is not None:
        for q in (False, True):
            for c in cases(q, [int(x) for x in meta["sizes"]], None,
                           meta.get("synthetic_shapes"))[0]:
                lookup.setdefault((c.group, c.size), c)
    refine_args = None if confirm_args is None else \
        {k: v for k, v in confirm_args.items() if k != "top_k"}
    if refined_file and Path(refined_file).exists():
        refined = json.loads(Path(refined_file).read_text())
        meta["refined_from"] = str(refined_file)
    elif refine_args is not None:
        t0 = time.perf_counter()
        refined = refine(scns, info, lookup, **refine_args)
        meta["refine"] = dict(refine_args, seconds_total=time.perf_counter() - t0)
        (out / f"tuner_eval_{meta['slug']}_refined.json").write_text(json.dumps(refined))
    else:
        refined = {}
    if refined:
        n = apply_refined(scns, refined, (confirm_args or {}).get("estimator", "min"))
        meta["refined_points"] = n
    if save_pretrained:
        write_pretrained(scns, meta, Path(save_pretrained), trees)
    if lookup:
        # the decision overhead of the current default method, on this machine, now
        recs = []
        for sd in scns:
            c = lookup.get((info[sd.key]["group"], int(info[sd.key]["size"])))
            if c is not None:
                reqs = capture_request(c.build()[0])
                recs.append({"request": max(reqs, key=lambda r: r.dataset.get("n", 0))})
        if recs:
            if meta.get("overhead"):
                meta["overhead_at_sweep"] = meta["overhead"]
            meta["overhead"] = decision_overhead(
                recs, tmodel.train(store, meta["device_key"], n_estimators=trees))
    ev = evaluate(scns, groups, info, trees)
    rows_sweep = ev["rows"]
    summary_sweep = summarise(rows_sweep)
    noise: dict = {}
    confirmed = False
    if confirm_args is not None:
        t0 = time.perf_counter()
        conf = confirm(rows_sweep, scns, info, lookup, **confirm_args)
        ev["rows"] = apply_confirmation(rows_sweep, conf)
        missing = len({r["scenario"] for r in rows_sweep}) - len(
            {r["scenario"] for r in ev["rows"]})
        if missing:
            meta.setdefault("notes", []).append(
                f"{missing} scenarios could not be confirmed and are left out")
        noise = noise_report(ev["rows"])
        confirmed = True
        meta["confirm"] = dict(confirm_args, seconds_total=time.perf_counter() - t0)
    summary = summarise(ev["rows"])
    n_ref = sum(len(sd.refused) for sd in scns)
    n_pts = sum(len(sd.times) for sd in scns)
    extra = {"scenarios": len(scns), "kernels": len(set(groups.values())), "points": n_pts,
             "refused_fraction": n_ref / max(n_ref + n_pts, 1),
             "overhead": meta.get("overhead", {})}
    print_table(meta["device"], summary, extra)
    for n in meta.get("notes", []) + ev["notes"]:
        print("note:", n)
    for f in meta.get("failures", []):
        print("failed:", f)
    best = max((n for n in summary if "/" in n and "measure" not in n),
               key=lambda n: summary[n]["perf_geomean"], default=None)
    best_online = max((n for n in summary if "measure" in n),
                      key=lambda n: summary[n]["perf_geomean"], default=None)
    print(f"best method here: {best} (model alone); with measurement: {best_online}")
    slug = meta["slug"]
    files = plots(slug + ("_quick" if meta.get("quick") else ""), ev["rows"], summary, out)
    if noise:
        print(f"noise: the sweep's oracle is still the best after confirmation in "
              f"{noise['sweep_oracle_still_best']:.0%} of scenarios; its sweep time was "
              f"{noise['sweep_oracle_time_over_its_confirmed_time_geomean']:.3f}x its confirmed "
              "time (geomean); per method, sweep -> confirmed geomean: "
              + ", ".join(f"{k} {v['sweep_geomean']:.1%} -> {v['confirmed_geomean']:.1%}"
                          for k, v in noise["methods"].items()))
    result = {**{k: v for k, v in meta.items()}, "summary": summary, **extra,
              "confirmed": confirmed, "summary_sweep_only": summary_sweep, "noise": noise,
              "rows_sweep_only": rows_sweep if confirmed else None,
              "best_method": best, "best_with_measurement": best_online,
              "rows": ev["rows"], "plots": files,
              "notes": meta.get("notes", []) + ev["notes"],
              "sweeps": sweeps, "when": time.strftime("%Y-%m-%d %H:%M:%S"),
              "default_method": "/".join(tmodel.DEFAULTS_BY_KIND[
                  "cpu" if "cpu" in meta["device"].lower() or "pthread" in meta["device"].lower()
                  else "gpu"])}
    path = out / f"tuner_eval_{slug}{'_quick' if meta.get('quick') else ''}.json"
    path.write_text(json.dumps(result, indent=1, default=str))
    print(f"wrote {path}" + "".join(f"\nwrote {f}" for f in files))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CPU/CI scale")
    ap.add_argument("--sizes", default=None, help="comma list of matrix sizes, the first "
                    "swept first for every kernel (default 1024,512,2048,4096)")
    ap.add_argument("--max-points", type=int, default=None,
                    help="sample at most this many points per scenario (quick: 48)")
    ap.add_argument("--device", default=None, help="sk.use() spec, e.g. gpu, cpu")
    ap.add_argument("--cache", default=None, help="tuning store folder (default: a fresh "
                    "temporary one, so the sweeps are this run's)")
    ap.add_argument("--trees", type=int, default=24)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--limit", type=int, default=None, help="at most this many cases")
    ap.add_argument("--minutes", type=float, default=None,
                    help="start no new sweep after this many minutes (then analyse)")
    ap.add_argument("--only", default=None, help="sweep only kernels whose name matches "
                    "this regular expression (e.g. to add kernels to earlier sweeps)")
    ap.add_argument("--kinds", default=None, help="comma list of stencil,map,reduce")
    ap.add_argument("--case-seconds", type=float, default=None,
                    help="stop measuring new points of one scenario after this long")
    ap.add_argument("--tag", default="", help="suffix for the output file names")
    ap.add_argument("--min-points", type=int, default=None,
                    help="analyse only scenarios with at least this many measured points "
                    "(default 40; quick: 10)")
    ap.add_argument("--synthetic", type=lambda v: [int(x) for x in v.split(",")],
                    default=None, help="indices into synthetic.STENCIL_SHAPES (the n-th "
                    "listed gets a complex body when n is odd; default: quick 0,1,2,6, "
                    "else the first 8)")
    ap.add_argument("--reps", type=int, default=None,
                    help="sweep: exactly this many timed repeats per point (CPU default: 3-4)")
    ap.add_argument("--prune", type=float, default=None,
                    help="sweep: a point whose warm-up is this many times slower than the "
                    "best so far keeps that one timing (default 8)")
    ap.add_argument("--save-pretrained", metavar="NPZ", default=None,
                    help="also train on all analysed scenarios and save the compact model "
                    "(skelpy/tuner/pretrained/ ships one for PoCL CPUs)")
    ap.add_argument("--no-confirm", action="store_true",
                    help="compute the ratios from the sweep itself (no confirmation round)")
    ap.add_argument("--confirm-top", type=int, default=6,
                    help="confirmation: the sweep's best this many points per scenario, plus "
                    "every point a method or baseline picked")
    ap.add_argument("--confirm-rounds", type=int, default=15)
    ap.add_argument("--confirm-passes", type=int, default=None,
                    help="repeat the refinement and confirmation rounds over all scenarios "
                    "this many times, minutes apart (default: 3 on a CPU, 1 on a GPU or "
                    "with --quick)")
    ap.add_argument("--refined", default=None, metavar="JSON",
                    help="reuse the refined times a previous analysis saved "
                    "(…_refined.json) instead of re-measuring them")
    ap.add_argument("--confirm-seconds", type=float, default=8.0,
                    help="confirmation: stop adding rounds to a scenario after this long")
    ap.add_argument("--sweep-only", action="store_true",
                    help="sweep and save (sweeps + store JSON), analyse elsewhere")
    ap.add_argument("--analyse", metavar="SWEEPS_JSON", default=None,
                    help="analyse saved sweeps (…_sweeps.json beside its …_store.json)")
    ap.add_argument("--lodo", nargs="*", metavar="DATA_NPZ", default=None,
                    help="leave-one-device-out evaluation of the cross-device model over the "
                    "shipped training data plus these files (benchmarks/tuner_transfer.py)")
    ap.add_argument("--leave-kernels-out", action="store_true",
                    help="--lodo: also leave every device's scenarios of the held-out "
                    "scenario's kernel out of training")
    ap.add_argument("--lodo-confirm", nargs="?", type=int, const=0, default=None,
                    metavar="N", help="--lodo: where the held-out device is this machine's, "
                    "measure its scenarios' (the first N; all without N) sweep best, default "
                    "and zero-shot pick again, interleaved")
    ap.add_argument("--new-device", action="store_true",
                    help="issue 18's acceptance run: fresh store, `skelpy tune` with its "
                    "default budget (or --minutes), then held-out kernels against their "
                    "oracle; writes tuner_newdevice_<device>.json and data-<device>.npz")
    ap.add_argument("--data", nargs="*", default=None, metavar="DATA_NPZ",
                    help="--new-device: training-data files beside the shipped ones")
    ap.add_argument("--unseen", action="store_true",
                    help="--new-device: leave out every training-data set of a device with "
                    "this device's name (the shipped H200 data on an H200): a device never "
                    "measured; the output files get the tag 'unseen'")
    ap.add_argument("--confirm-top-new", type=int, default=4, dest="confirm_top_new")
    ap.add_argument("--collect", action="store_true",
                    help="sweep this device's evaluation kernels on a sample within --minutes "
                    "(default 3 on a GPU, 30 on a CPU) and write data-<device>.npz, its "
                    "training data to ship")
    args = ap.parse_args(argv)
    if args.new_device and not os.environ.get("SKELPY_FRESH_MACHINE"):
        # a new machine has compiled nothing: run again with the OpenCL compilers' on-disk
        # caches off (pyopencl's binaries, PoCL's kernels, NVIDIA's compute cache), set
        # before any OpenCL platform loads
        env = dict(os.environ, SKELPY_FRESH_MACHINE="1", PYOPENCL_NO_CACHE="1",
                   POCL_KERNEL_CACHE="0", CUDA_CACHE_DISABLE="1")
        import subprocess

        return subprocess.call([sys.executable, "-m", "benchmarks.tuner_eval",
                                *(sys.argv[1:] if argv is None else argv)], env=env,
                               cwd=Path(__file__).resolve().parent.parent)
    if args.collect:
        from benchmarks import tuner_transfer

        return tuner_transfer.main_collect(args)
    if args.new_device:
        from benchmarks import tuner_transfer

        args.confirm_top = args.confirm_top_new
        args.confirm_rounds = min(args.confirm_rounds, 9)
        return tuner_transfer.main_new_device(args)
    if args.lodo is not None:
        from benchmarks import tuner_transfer

        return tuner_transfer.main_lodo(args.lodo, Path(args.out), args.leave_kernels_out,
                                        confirm=args.lodo_confirm)   # None: no round
    if args.device:
        sk.use(args.device)
    is_cpu = not sk.current_device().features.get("dev_is_gpu", 1.0)
    confirm_args = None if args.no_confirm else {
        "top_k": args.confirm_top, "rounds": args.confirm_rounds,
        "seconds": args.confirm_seconds, "estimator": "min" if is_cpu else "median",
        "passes": args.confirm_passes or (3 if is_cpu and not args.quick else 1)}
    if args.min_points is None:
        args.min_points = 10 if args.quick else 40
    if args.case_seconds is None and args.quick:
        args.case_seconds = 60.0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ["SKELPY_TUNE_RETRAIN"] = "off"          # the evaluation trains its own models
    if args.analyse:
        os.environ["SKELPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="skelpy-eval-")
        tstore.reset_store()
        store = tstore.get_store()
        meta: dict = {}
        sweeps: list = []
        for sp in args.analyse.split(","):
            blob = json.loads(Path(sp).read_text())
            store.import_data(json.loads(Path(sp.replace("_sweeps.json", "_store.json"))
                                         .read_text()))
            sweeps += blob.pop("sweeps")
            if not meta:
                meta = blob
            else:       # several runs on one device: merge what describes them
                if blob["device_key"] != meta["device_key"]:
                    print(f"note: {sp} is from another device ({blob['device']}); "
                          "analysing the first one's scenarios only")
                for k in ("notes", "failures", "not_swept"):
                    meta[k] = meta.get(k, []) + blob.get(k, [])
                meta["sizes"] = sorted(set(meta["sizes"]) | set(blob["sizes"]))
                meta["overhead_runs"] = meta.get("overhead_runs", [meta.get("overhead")]) \
                    + [blob.get("overhead")]
                # the headline is the slowest run's (conservative)
                if blob.get("overhead") and (not meta.get("overhead") or
                                             blob["overhead"]["model_decision_ms_median"] >
                                             meta["overhead"]["model_decision_ms_median"]):
                    meta["overhead"] = blob["overhead"]
        if args.tag:
            meta["slug"] = _slug(meta["device"]) + f"_{args.tag}"
        else:
            meta["slug"] = _slug(meta["device"])
        return analyse_phase(meta, sweeps, store, out, args.trees, args.min_points,
                             confirm_args, args.save_pretrained, args.refined)
    cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="skelpy-eval-"))
    os.environ["SKELPY_CACHE_DIR"] = str(cache)
    tstore.reset_store()
    meta, records = sweep_phase(args, out)
    if not records:
        print("no skeleton call could be swept")
        return 1
    if args.sweep_only:
        return 0
    sweeps = [{k: v for k, v in r.items() if k != "request"} for r in records]
    return analyse_phase(meta, sweeps, tstore.get_store(), out, args.trees, args.min_points,
                         confirm_args, args.save_pretrained, args.refined)


if __name__ == "__main__":
    sys.exit(main())
