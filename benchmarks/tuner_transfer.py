"""The tuner on a device it has never measured (issue 18): leave-one-device-out evaluation of
the cross-device model, collecting a device's training data in one command, and the
"new machine" run (fresh store, ``skelpy tune`` with its default budget, then held-out
kernels against their oracle).

    python -m benchmarks.tuner_eval --lodo [DATA.npz ...]        # zero-shot, per device
    python -m benchmarks.tuner_eval --collect --minutes 3         # this device's data file
    python -m benchmarks.tuner_eval --new-device                  # the GPU acceptance run

Leave-one-device-out: for every device with a training-data file (the shipped ones under
``skelpy/tuner/pretrained/`` plus any given), a model is trained on the other devices' data
only and picks a point for each of the held-out device's scenarios among the points measured
there; the ratio to the best measured point is its performance (the sweep's oracle; other
devices' data cannot be re-measured here, so there is no confirmation round and the oracle
carries the sweep's winner's curse: ratios are conservative). ``--leave-kernels-out`` also
drops, per held-out scenario, every device's scenarios of the same kernel (a new device
running a new kernel).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skelpy.tuner import model as tmodel
from skelpy.tuner import training_data, zero_shot
from skelpy.tuner.model_files import PRETRAINED_DIR
from skelpy.tuner.space import Param, ParamSpace
from skelpy.tuner.store import params_json


def geomean(xs) -> float:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _space_of(sd: tmodel.ScenarioData) -> ParamSpace:
    params = [Param(p["name"], tuple(p["values"]), p.get("numeric", True))
              for p in sd.space["params"]]
    measured = set(sd.times)
    return ParamSpace(params, sd.space["default"],
                      constraint=lambda p: params_json(p) in measured)


def pick(gm: tmodel.GroupModel | None, sd: tmodel.ScenarioData) -> tuple[str, str]:
    """(params JSON, source) of what the tuner runs for ``sd`` with model ``gm`` and no
    measurement: the speedup regressor's choice among the measured points, or the default
    when there is no model for this signature and kind of device."""
    kind = tmodel.device_kind(sd.features)
    default = sd.default_key if sd.default_key in sd.times else None
    if gm is None or (gm.kinds and kind not in gm.kinds):
        return default or min(sd.times, key=sd.times.__getitem__), "default"
    space = _space_of(sd)
    pts = space.points()
    cand = tmodel.CandidateSet(pts, space.names, {p.name: p.numeric for p in space.params})
    i = tmodel.choose(gm, sd.features, cand, set(), approach="speedup", coarsen="joint",
                      default=cand.index_of(json.loads(default)) if default else None)
    if i is None:
        return default or min(sd.times, key=sd.times.__getitem__), "default"
    if not isinstance(i, int):
        return params_json(space.nearest(i)), "model"
    if default and cand.points[i] == json.loads(default):
        return default, "default"             # the model kept the default
    return params_json(cand.points[i]), "model"


def _fit(scns: Sequence[tmodel.ScenarioData], trees: int, depth: int
         ) -> dict[str, tmodel.GroupModel]:
    """The shipped model's groups (``zero_shot.build``: per signature and kind of device)."""
    sets = [training_data.DeviceData("", {}, list(scns))]
    return zero_shot.build(sets, trees=trees, depth=depth).groups


def lodo(sets: Sequence[training_data.DeviceData], *, trees: int = zero_shot.TREES,
         depth: int = zero_shot.DEPTH, leave_kernels_out: bool = False) -> dict[str, Any]:
    """Leave-one-device-out over ``sets``: per device, the zero-shot model's performance
    relative to the sweep's oracle (and the default's, for comparison)."""
    aligned = zero_shot.align([sd for d in sets for sd in d.scenarios])
    by_dev: dict[str, list[tmodel.ScenarioData]] = {}
    for sd in aligned:
        by_dev.setdefault(sd.device, []).append(sd)
    out: dict[str, Any] = {"devices": {}, "trees": trees, "depth": depth,
                           "leave_kernels_out": leave_kernels_out}
    for dev, test in by_dev.items():
        t0 = time.perf_counter()
        train_all = [sd for sd in aligned if sd.device != dev]
        models: dict[str, dict[str, tmodel.GroupModel]] = {}
        rows = []
        for sd in test:
            mkey = sd.group if leave_kernels_out else ""
            if mkey not in models:
                train = [s for s in train_all if not leave_kernels_out or s.group != sd.group]
                models[mkey] = _fit(train, trees, depth)
            gm = tmodel.group_for(models[mkey], tmodel.signature(sd.names),
                                  tmodel.device_kind(sd.features))
            best = min(sd.times.values())
            k, src = pick(gm, sd)
            row = {"scenario": sd.key, "kernel": sd.group, "skeleton": sd.skeleton,
                   "size": sd.dataset.get("rows", sd.dataset.get("n")),
                   "points": len(sd.times), "model": best / sd.times[k], "source": src,
                   "model_point": json.loads(k),
                   "default": best / sd.times[sd.default_key]
                   if sd.default_key in sd.times else None}
            rows.append(row)
        perf = [r["model"] for r in rows]
        dflt = [r["default"] for r in rows if r["default"]]
        out["devices"][dev] = {
            "scenarios": len(rows), "kernels": len({r["kernel"] for r in rows}),
            # the devices of its kind: the model of a kind is trained on those only
            "trained_on": sorted({sd.device for sd in train_all
                                  if tmodel.device_kind(sd.features)
                                  == tmodel.device_kind(test[0].features)}),
            "zero_shot_geomean": geomean(perf),
            "zero_shot_median": statistics.median(perf) if perf else None,
            "default_geomean": geomean(dflt),
            "model_used": sum(1 for r in rows if r["source"] == "model"),
            "seconds": time.perf_counter() - t0, "rows": rows}
    return out


def print_lodo(res: dict[str, Any]) -> None:
    print(f"\n== leave one device out ({'kernels left out too' if res['leave_kernels_out'] else 'same kernels on other devices'}) ==")
    print(f"{'held-out device':<64} {'scen':>5} {'zero-shot':>9} {'median':>7} {'default':>8}")
    for dev, d in res["devices"].items():
        print(f"{dev[:64]:<64} {d['scenarios']:>5} {d['zero_shot_geomean']:>9.1%} "
              f"{d['zero_shot_median']:>7.1%} {d['default_geomean']:>8.1%}"
              f"   (model for {d['model_used']}; trained on {len(d['trained_on'])} "
              "device(s) of its kind)")


def load_sets(paths: Sequence[str] | None) -> list[training_data.DeviceData]:
    """The shipped training data plus ``paths`` (a file of a device already shipped replaces
    the shipped one)."""
    sets = {d.device: d for d in training_data.shipped(PRETRAINED_DIR)}
    for p in paths or ():
        d = training_data.load(p)
        sets[d.device] = d
    return list(sets.values())


def main_lodo(paths: Sequence[str], out: Path, leave_kernels_out: bool,
              confirm: int | None = None) -> int:
    """``confirm``: None, no confirmation round; 0, of every scenario of this machine's
    device; N, of its first N."""
    sets = load_sets(paths)
    if len(sets) < 2:
        print("leave-one-device-out needs the data of at least two devices")
        return 1
    results = {"when": time.strftime("%Y-%m-%d %H:%M:%S"),
               "sets": [{"device": d.device, "file": Path(d.source).name,
                         "scenarios": len(d.scenarios), "points": d.points} for d in sets]}
    for lko in ([False, True] if leave_kernels_out else [False]):
        res = lodo(sets, leave_kernels_out=lko)
        print_lodo(res)
        results["kernels_left_out" if lko else "same_kernels"] = res
        if confirm is not None and not lko:
            print("\n== confirmation round on this machine's held-out device ==")
            c = results["confirmed"] = confirm_lodo(res, sets, limit=confirm or None)
            if c.get("summary"):
                print(f"{c['device']}: {c['scenarios']} scenarios: "
                      + ", ".join(f"{k} {v:.1%}" for k, v in c["summary"].items()))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "tuner_lodo.json"
    path.write_text(json.dumps(results, indent=1, default=str))
    print(f"wrote {path}")
    return 0


# -- the new-device run --------------------------------------------------------------------------
# Kernels that no synthetic training program resembles (the tuner_eval kernels and the issue's
# six); `skelpy tune` never sees them, and the shipped data of every device is used without
# them (held out by name), so their numbers are what a new user's own kernels get.

def jacobi9(nb):
    return (nb[-1, -1] + nb[-1, 0] + nb[-1, 1] + nb[0, -1] + nb[0, 0] + nb[0, 1]
            + nb[1, -1] + nb[1, 0] + nb[1, 1]) * (1.0 / 9.0)


def log5(nb):
    return (nb[-2, 0] + nb[2, 0] + nb[0, -2] + nb[0, 2] + nb[-1, -1] + nb[-1, 1] + nb[1, -1]
            + nb[1, 1] + 2 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1]) - 16 * nb[0, 0])


def perona_malik(nb):
    c = nb[0, 0]
    dn, ds, de, dw = nb[-1, 0] - c, nb[1, 0] - c, nb[0, 1] - c, nb[0, -1] - c
    k = 0.1
    gn = math.exp(-(dn / k) * (dn / k))
    gs = math.exp(-(ds / k) * (ds / k))
    ge = math.exp(-(de / k) * (de / k))
    gw = math.exp(-(dw / k) * (dw / k))
    return c + 0.2 * (gn * dn + gs * ds + ge * de + gw * dw)


def transcendental(x):
    return math.sin(x) * math.exp(-x * x) + math.log(1.0 + x * x)


def chebyshev(a, b):
    acc = a[0] * 0
    for k in range(a.size):
        acc = max(acc, abs(a[k] - b[k]))
    return acc


def held_out_cases(sizes_2d: Sequence[int], sizes_1d: Sequence[int],
                   sizes_ap: Sequence[int]) -> list:
    """The held-out kernels at these sizes (``tuner_eval.EvalCase``s)."""
    import numpy as np

    import skelpy as sk
    from benchmarks import tuner_eval as te

    out = []
    for n in sizes_2d:
        out += [
            te._stencil_case("game_of_life", te.game_of_life, 1, n, border="wrap",
                             data=lambda s, rng: (rng.random((s, s)) < 0.3).astype(np.int32)),
            te._stencil_case("heat", te.heat, 1, n),
            te._stencil_case("jacobi9", jacobi9, 1, n),
            te._stencil_case("gaussian_5x5", te.make_gaussian(2, 1.0), 2, n),
            te._stencil_case("log5x5_constant", log5, 2, n, border="constant"),
            te._stencil_case("gaussian_11x11", te.make_gaussian(5, 2.0), 5, n),
            te._stencil_case("perona_malik", perona_malik, 1, n),
            te._stencil_case("canny_sobel", te.sobel, 1, n),
            te._stencil_case("canny_nms", te.non_max_suppression, 1, n),
            te._stencil_case("canny_hysteresis", te.hysteresis, 1, n),
        ]
    for n in sizes_1d:
        def mk_map(n=n, fn=transcendental, name="map_transcendental"):
            def build():
                f = sk.Map(fn)
                v = sk.Vector(np.random.default_rng(n).random(n).astype(np.float32))
                return (lambda **kw: f(v, **kw)), f
            return te.EvalCase(name, "map", n, build)

        def mk_red(n=n):
            def build():
                r = sk.Reduce(te.maximum, identity=-1.0)
                v = sk.Vector(np.random.default_rng(n).random(n).astype(np.float32))
                return (lambda **kw: r(v, **kw)), r
            return te.EvalCase("reduce_max", "reduce", n, build)

        def mk_scan(n=n):
            def build():
                s = sk.Scan(te.add, identity=0, inclusive=True)
                v = sk.Vector(np.random.default_rng(n).random(n).astype(np.float32))
                return (lambda **kw: s(v, **kw)), s
            return te.EvalCase("scan_cumsum", "scan", n, build)
        out += [mk_map(), mk_map(fn=te.brighten, name="map_brighten"), mk_red(), mk_scan()]
    for n in sizes_ap:
        def mk_ap(n=n):
            def build():
                ap = sk.AllPairs(chebyshev)
                rng = np.random.default_rng(n)
                a = sk.Matrix(rng.random((n, 96)).astype(np.float32))
                b = sk.Matrix(rng.random((n, 96)).astype(np.float32))
                return (lambda **kw: ap(a, b, **kw)), ap
            return te.EvalCase("allpairs_chebyshev", "allpairs", n, build)
        out.append(mk_ap())
    return out


HELD_OUT_SIZES = {"gpu": ((1024, 4096), (1 << 22, 1 << 24), (1024,)),
                  "cpu": ((512, 1024), (1 << 20,), (256,))}


def _model_pick(dm, call) -> dict | None:
    """The point model ``dm`` picks for this call over every legal point (None: no model
    for it), as the tuner's model mode would."""
    from skelpy import tuner

    mgr = tuner.manager()
    mgr.set(call.req.device.key, dm)
    call.sc.feats = None
    try:
        return call.predict(mgr)
    except Exception:  # noqa: BLE001
        return None


def _device_name(key: str) -> str:
    """The device name part of a device key ("platform | name | driver")."""
    parts = key.split(" | ")
    return parts[1] if len(parts) >= 3 else key


def main_new_device(args) -> int:
    """Fresh store; the zero-shot picks; ``skelpy tune`` with its default budget (or
    ``--minutes``); this device's training data exported; the held-out kernels swept
    (sampled) for their oracle; every method's pick confirmed interleaved; JSON."""
    import os
    import tempfile

    import skelpy as sk
    from benchmarks import tuner_eval as te
    from skelpy import containers, skeletons
    from skelpy.tuner import budget, synthetic
    from skelpy.tuner import store as tstore
    from skelpy.tuner.measure import measure
    from skelpy.tuner.sweep import sweep, sweep_budget

    if args.device:
        sk.use(args.device)
    dev = sk.current_device()
    kind = "gpu" if dev.features.get("dev_is_gpu", 1.0) else "cpu"
    # a GPU's held-out sweeps fit ~6 minutes in all; a CPU's take longer per point
    args.max_points = args.max_points or (32 if kind == "gpu" else 64)
    args.case_seconds = args.case_seconds or (6.0 if kind == "gpu" else 30.0)
    unseen = getattr(args, "unseen", False)
    tag = "_".join(t for t in (args.tag, "unseen" if unseen else "") if t)
    slug = te._slug(dev.name) + (f"_{tag}" if tag else "")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="skelpy-new-"))
    os.environ["SKELPY_CACHE_DIR"] = str(cache)
    os.environ["SKELPY_TUNE_RETRAIN"] = "off"        # models are trained when this says so
    tstore.reset_store()
    t_all = time.perf_counter()
    s2, s1, sap = HELD_OUT_SIZES[kind]
    if args.sizes:
        s2 = tuple(int(x) for x in args.sizes.split(","))
    cases = held_out_cases(s2, s1, sap)
    held = sorted({c.group for c in cases})
    sets = [d for d in load_sets(args.data)
            if not (unseen and _device_name(d.device) == dev.name)]
    shipped_minus = [training_data.DeviceData(d.device, d.device_features,
                                              [sd for sd in d.scenarios if sd.group not in held],
                                              d.source) for d in sets]
    zs_model = zero_shot.build(shipped_minus) if shipped_minus else None
    result: dict[str, Any] = {"device": dev.name, "device_key": dev.key, "kind": kind,
                              "cache": str(cache), "held_out_kernels": held,
                              "shipped_sets": [Path(d.source).name for d in sets],
                              "unseen": unseen,
                              "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    # 1. skelpy tune, default budget
    minutes = args.minutes if args.minutes is not None else budget.DEFAULT_MINUTES[kind]
    kit = synthetic.Toolkit.from_modules(skeletons, containers)
    t0 = time.perf_counter()
    # training (below, on the shipped data without the held-out kernels) has its share of
    # the budget, as in `skelpy tune`
    kinds = args.kinds.split(",") if getattr(args, "kinds", None) else None
    result["tune_kinds"] = kinds or "all"
    rep = budget.run(kit, dev, minutes=minutes, train=False, keep_for_training=True,
                     progress=print, kinds=kinds)
    tstore.get_store().flush(timeout=30)
    t_train = time.perf_counter()
    tuned = zero_shot.train(tstore.get_store(), dev.key, shipped=shipped_minus, base=zs_model)
    result["tune"] = {"minutes": minutes, "programs": rep.programs, "scenarios": rep.scenarios,
                      "points": rep.measured, "rounds": rep.rounds,
                      "sweep_seconds": rep.sweep_seconds,
                      "train_seconds": time.perf_counter() - t_train,
                      "total_seconds": time.perf_counter() - t0,
                      "points_per_second": rep.measured / max(rep.sweep_seconds, 1e-9),
                      "per_kind": rep.per_kind, "failed": rep.failed,
                      "signatures": {s: {"scenarios": g.n_scenarios, "local": g.n_local,
                                         "origin": g.origin, "keeps_default": g.keeps_default,
                                         "validation": g.validation}
                                     for s, g in tuned.groups.items()}}
    print(f"tune: {rep.measured} points of {rep.scenarios} scenarios in "
          f"{rep.sweep_seconds:.0f} s + training {result['tune']['train_seconds']:.0f} s",
          flush=True)
    tune_data = training_data.from_store(tstore.get_store(), dev.key)
    # 2. the held-out kernels: every method's pick, then a sampled sweep for the oracle
    rows, calls = [], {}
    for c in cases:
        name = f"{c.group}@{c.size}"
        try:
            call = exhaustive_call(c)
            picks = {"default": call.default(),
                     "zero_shot": _model_pick(zs_model, call) if zs_model else None,
                     "tuned": _model_pick(tuned, call)}
            picks = {k: v for k, v in picks.items() if v is not None}
            b = sweep_budget(call)
            for p in picks.values():                  # the picks are measured in any case
                if params_json(p) not in call.measured():
                    call.save_rows([(p, measure(call.req.run, dict(p), b).seconds, b.min_reps)])
            res = sweep(call, limit=args.max_points, order="sample",
                        deadline=time.perf_counter() + args.case_seconds)
            calls[name] = (c, call, picks)
            print(f"held out {name}: {len(call.measured())} points "
                  f"({res.measured} swept in {res.seconds:.1f} s)", flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"held out {name}: FAILED {type(exc).__name__}: {str(exc)[:200]}", flush=True)
    # 3. confirmation: the sweep's best few and every pick, interleaved
    from skelpy.tuner.sweep import confirm

    for c, call, picks in calls.values():
        meas = call.measured()
        ranked = sorted(meas, key=lambda k: meas[k][0])[:args.confirm_top]
        pts = {k: json.loads(k) for k in ranked}
        for p in picks.values():
            pts[params_json(p)] = dict(p)
        conf = confirm(call, list(pts.values()), rounds=args.confirm_rounds, record=False)
        by_json = {params_json(call.space.from_key(k)): t for k, t in conf.items()}
        best = min(by_json.values())
        row = {"kernel": c.group, "size": c.size, "skeleton": call.req.skeleton,
               "points": len(meas), "oracle_seconds": best}
        for m, p in picks.items():
            t = by_json.get(params_json(p))
            row[m] = best / t if t else None
            row[m + ":point"] = p
        rows.append(row)
    result["rows"] = rows
    summary = {}
    for m in ("default", "zero_shot", "tuned"):
        perf = [r[m] for r in rows if r.get(m)]
        summary[m] = {"perf_geomean": geomean(perf), "scenarios": len(perf),
                      "perf_median": statistics.median(perf) if perf else None,
                      "perf_min": min(perf) if perf else None}
    result["summary"] = summary
    # 4. this device's training data (the tune and the held-out sweeps), to ship
    all_data = training_data.from_store(tstore.get_store(), dev.key,
                                        names={call.sc.key: c.group
                                               for c, call, _p in calls.values()})
    data_path = out_dir / f"data-{slug}.npz"
    training_data.save(all_data, data_path)
    result["data_file"] = str(data_path)
    result["tune_data_points"] = tune_data.points
    result["seconds_total"] = time.perf_counter() - t_all
    path = out_dir / f"tuner_newdevice_{slug}.json"
    path.write_text(json.dumps(result, indent=1, default=str))
    print(f"\n== {dev.name}: held-out kernels ({len(rows)} scenarios), % of the oracle ==")
    for m, s in summary.items():
        if s["scenarios"]:
            print(f"  {m:<10} geomean {s['perf_geomean']:.1%}  median {s['perf_median']:.1%}"
                  f"  min {s['perf_min']:.1%}  ({s['scenarios']} scenarios)")
    print(f"wrote {path} and {data_path} ({data_path.stat().st_size / 1024:.0f} KiB) in "
          f"{result['seconds_total'] / 60:.1f} min")
    return 0


# -- collecting a device's training data -------------------------------------------------------


def main_collect(args) -> int:
    """One command for a device's training data: the evaluation's kernels (real and
    synthetic) and the held-out ones at two sizes, swept round-robin on a sample within
    ``--minutes`` (20% of it to measure every swept point again, interleaved), written as
    ``data-<device>.npz`` to ship (see the README's autotuner section)."""
    import os
    import tempfile

    import skelpy as sk
    from benchmarks import tuner_eval as te
    from skelpy.tuner import budget
    from skelpy.tuner import store as tstore
    from skelpy.tuner.sweep import confirm, sweep

    if args.device:
        sk.use(args.device)
    dev = sk.current_device()
    kind = "gpu" if dev.features.get("dev_is_gpu", 1.0) else "cpu"
    cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="skelpy-collect-"))
    os.environ["SKELPY_CACHE_DIR"] = str(cache)
    os.environ["SKELPY_TUNE_RETRAIN"] = "off"
    tstore.reset_store()
    minutes = args.minutes if args.minutes is not None else (3.0 if kind == "gpu" else 30.0)
    t0 = time.perf_counter()
    end = t0 + 60 * minutes
    deadline = end - 0.2 * 60 * minutes
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else \
        list(HELD_OUT_SIZES[kind][0])
    s2, s1, sap = HELD_OUT_SIZES[kind]
    cases = te.cases(False, sizes, None, args.synthetic)[0] + held_out_cases(sizes, s1, sap)
    seen: set[tuple[str, int]] = set()
    cases = [c for c in cases if (c.group, c.size) not in seen
             and not seen.add((c.group, c.size))]
    calls: dict[str, Any] = {}
    names: dict[str, str] = {}
    measured = 0
    for limit in budget.ROUND_LIMITS:
        if time.perf_counter() > deadline:
            break
        n0 = measured
        for c in cases:
            if time.perf_counter() > deadline:
                break
            name = f"{c.group}@{c.size}"
            if name not in calls:
                try:
                    calls[name] = exhaustive_call(c)
                    names[calls[name].sc.key] = c.group
                except Exception as exc:  # noqa: BLE001
                    print(f"{name}: FAILED {type(exc).__name__}: {str(exc)[:200]}")
                    calls[name] = None
            call = calls[name]
            if call is None:
                continue
            try:
                measured += sweep(call, limit=limit, deadline=deadline, order="sample").measured
            except Exception as exc:  # noqa: BLE001
                print(f"{name}: FAILED {type(exc).__name__}: {str(exc)[:200]}")
                calls[name] = None
        print(f"round up to {limit} points per scenario: {measured - n0} points "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    refined = 0
    for call in calls.values():
        if call is None or time.perf_counter() > end:
            continue
        pts = [p for p in (call.parse_point(pj) for pj in call.measured()) if p is not None]
        if len(pts) > 1:
            confirm(call, pts, deadline=end)
            refined += len(pts)
    tstore.get_store().flush(timeout=30)
    data = training_data.from_store(tstore.get_store(), dev.key, names=names)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"data-{te._slug(dev.name)}{'_' + args.tag if args.tag else ''}.npz"
    training_data.save(data, path)
    print(f"wrote {path}: {len(data.scenarios)} scenarios, {data.points} points "
          f"({measured} swept, {refined} measured again) in "
          f"{(time.perf_counter() - t0) / 60:.1f} min, {path.stat().st_size / 1024:.0f} KiB")
    return 0


# -- leave-one-device-out, confirmed on this machine ---------------------------------------------
# A CPU sweep's oracle is the minimum over ~100 noisy measurements on a shared machine (winner's
# curse): even the other CPU's best point of the same kernel and size reaches only ~65% of it.
# When the held-out device is this machine's, its scenarios are rebuilt (by kernel name and
# size) and the sweep's best few, the default and the zero-shot pick are measured again,
# interleaved: ratios from that round are what a user of this device would see.

def exhaustive_call(case):
    """The tuner's call for an evaluation case's largest request (built and run once, the
    requests captured, not launched), in exhaustive mode: what a sweep or a confirmation
    round measures."""
    from skelpy import tuner

    fn, _skel = case.build()
    with tuner.capture_requests() as reqs:
        fn()
    req = max(reqs, key=lambda r: r.dataset.get("n", 0))
    return tuner.new_call(req, "exhaustive")


def _rebuild_index(sizes: Sequence[int]) -> dict[tuple[str, int], Any]:
    """(kernel name, rows or elements) -> the evaluation case that measured it."""
    from benchmarks import tuner_eval as te
    from skelpy.tuner import synthetic

    out: dict[tuple[str, int], Any] = {}
    shapes = list(range(len(synthetic.STENCIL_SHAPES)))
    for s in sizes:
        for c in te.cases(False, [s], None, shapes)[0]:
            out.setdefault((c.group, s if c.kind == "stencil" else s * s), c)
    for c in held_out_cases(sizes, [s * s for s in sizes], ()):
        out.setdefault((c.group, c.size), c)
    return out


def confirm_lodo(res: dict[str, Any], sets: Sequence[training_data.DeviceData], *,
                 top: int = 3, rounds: int = 7, limit: int | None = None) -> dict[str, Any]:
    """Re-measure, for the held-out device that is this machine's, each rebuilt scenario's
    sweep best ``top`` points, its default (today's rule; ``former_default``: the one the
    sweep ran) and the zero-shot pick, interleaved over ``rounds``; the ratios of that round
    per method."""
    import skelpy as sk
    from skelpy.tuner.sweep import confirm

    dev = sk.current_device()
    held = [d for d in res["devices"] if _device_name(d) == dev.name]
    if not held:
        return {"note": f"no held-out device is this machine's ({dev.name})"}
    name = held[0]
    data = {sd.key: sd for d in sets for sd in zero_shot.align(d.scenarios)
            if d.device == name}
    sizes = sorted({int(r["size"]) for r in res["devices"][name]["rows"]
                    if r["skeleton"] == "stencil"})
    index = _rebuild_index(sizes)
    rows = []
    for r in res["devices"][name]["rows"][:limit]:
        sd = data.get(r["scenario"])
        case = index.get((r["kernel"], int(r["size"])))
        if sd is None or case is None:
            continue
        try:
            call = exhaustive_call(case)
            if set(call.space.names) != set(sd.names):
                continue
            ranked = sorted(sd.times, key=sd.times.__getitem__)[:top]
            # the default is today's (the code's rule now, not the one the sweep ran), and so
            # is the zero-shot pick where the model kept the default
            today = params_json(call.default())
            methods = {"default": today, "former_default": sd.default_key,
                       "zero_shot": today if r["source"] == "default"
                       else params_json(r["model_point"])}
            pts = {k: json.loads(k) for k in [*ranked, *methods.values()]}
            conf = confirm(call, list(pts.values()), rounds=rounds, record=False)
            by = {params_json(call.space.from_key(k)): t for k, t in conf.items()}
            best = min(by.values())
            row = {"kernel": r["kernel"], "size": r["size"], "skeleton": r["skeleton"],
                   "default_point": call.default(), "zero_shot_source": r["source"],
                   "sweep": {m: r["model"] if m == "zero_shot" else r["default"]
                             for m in ("default", "zero_shot")},
                   "sweep_best_confirmed": best / min(by[k] for k in ranked if k in by)}
            for m, k in methods.items():
                row[m] = best / by[k] if k in by else None
            rows.append(row)
            print(f"  {r['kernel']}@{r['size']}: default {row['default']:.2f} "
                  f"zero-shot {row['zero_shot']:.2f} the sweep's default "
                  f"{row['former_default']:.2f} (sweep: {r['default']:.2f}, "
                  f"{r['model']:.2f})", flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"  {r['kernel']}@{r['size']}: FAILED {type(exc).__name__}: "
                  f"{str(exc)[:160]}", flush=True)
    summary = {m: geomean([x[m] for x in rows if x.get(m)])
               for m in ("default", "zero_shot", "former_default")}
    summary.update({f"sweep_{m}": geomean([x["sweep"][m] for x in rows if x["sweep"][m]])
                    for m in ("default", "zero_shot")})
    return {"device": name, "scenarios": len(rows), "summary": summary, "rows": rows,
            "top": top, "rounds": rounds}
