"""How much of a CPU's gap to its sweep's oracle is measurement noise (issue 18)?

A sweep keeps, per point, the minimum of 3-4 repeats taken once; its oracle is the minimum
over ~100 such noisy estimates (the winner's curse), and the default's estimate is one noisy
draw too. This re-measures, for a sample of this machine's device's shipped scenarios (by
kernel name and size, as ``tuner_eval --lodo-confirm`` does), the sweep's best ``--top``
points and the default, interleaved round-robin, in two passes with the order reversed, and
reports per scenario and in all:

- ``curse``: the sweep's best time over the confirmed best (below 1: the sweep's oracle was
  optimistic);
- the default's ratio to the oracle from the sweep, from pass 1 and from pass 2 (pass 1 vs
  pass 2 is the noise of a confirmed ratio itself);
- ``spread``: per point, the median over rounds of (time / that point's minimum) - 1, the
  noise of one sample;
- ``top_stable``: whether the sweep's best is within ``--tie`` of the confirmed best.

    python -m benchmarks.tuner_noise --scenarios 16 --top 4 --rounds 7
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RESULTS = Path(__file__).resolve().parent / "results"


def geomean(xs) -> float:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def interleaved(call, pts: dict[str, dict], rounds: int, reverse: bool) -> dict[str, list]:
    """Raw per-round seconds of every point, round-robin (rotated each round)."""
    from skelpy.errors import RefusedParameters
    from skelpy.tuner import measure

    run = call.req.run
    order = list(pts)[::-1] if reverse else list(pts)
    out: dict[str, list] = {k: [] for k in order}
    for k in list(order):
        try:
            measure.run_seconds(run, pts[k])            # build + warm-up
        except RefusedParameters:
            order.remove(k)
            out.pop(k)
    for r in range(rounds):
        for k in order[r % len(order):] + order[:r % len(order)]:
            out[k].append(measure.run_seconds(run, pts[k])[2])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", type=int, default=16)
    ap.add_argument("--top", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--max-size", type=int, default=1024,
                    help="stencil rows (and 1-D elements up to its square) at most")
    ap.add_argument("--tie", type=float, default=0.05)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    os.environ["SKELPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="skelpy-noise-")
    os.environ["SKELPY_TUNE_RETRAIN"] = "off"

    import skelpy as sk
    from benchmarks.tuner_transfer import _device_name, _rebuild_index, exhaustive_call, load_sets
    from skelpy.tuner import zero_shot

    dev = sk.current_device()
    mine = [d for d in load_sets(None) if _device_name(d.device) == dev.name]
    if not mine:
        print(f"no shipped training data of {dev.name}")
        return 1
    scns = [sd for sd in zero_shot.align(mine[0].scenarios) if sd.default_key in sd.times
            and len(sd.times) >= 8]
    def size_of(sd):
        return int(sd.dataset.get("rows", 0)) if sd.skeleton == "stencil" \
            else int(sd.dataset.get("n", 0))
    scns = [sd for sd in scns if size_of(sd) <= (args.max_size if sd.skeleton == "stencil"
                                                 else args.max_size ** 2)]
    # spread the sample over kernels: round-robin over kernel names
    by: dict[str, list] = {}
    for sd in scns:
        by.setdefault(sd.group, []).append(sd)
    sample = []
    while len(sample) < args.scenarios and any(by.values()):
        for g in list(by):
            if by[g] and len(sample) < args.scenarios:
                sample.append(by[g].pop(0))
    sizes = sorted({size_of(sd) for sd in sample if sd.skeleton == "stencil"})
    index = _rebuild_index(sizes)
    rows = []
    t0 = time.perf_counter()
    for sd in sample:
        case = index.get((sd.group, size_of(sd)))
        if case is None:
            continue
        try:
            call = exhaustive_call(case)
            if set(call.space.names) != set(sd.names):
                continue
            ranked = sorted(sd.times, key=sd.times.__getitem__)[:args.top]
            keys = list(dict.fromkeys([*ranked, sd.default_key]))
            pts = {k: {**json.loads(k)} for k in keys}
            p1 = interleaved(call, pts, args.rounds, reverse=False)
            p2 = interleaved(call, pts, args.rounds, reverse=True)
        except Exception as exc:  # noqa: BLE001
            print(f"  {sd.group}@{size_of(sd)}: FAILED {type(exc).__name__}: {str(exc)[:160]}")
            continue
        m1 = {k: min(v) for k, v in p1.items() if v}
        m2 = {k: min(v) for k, v in p2.items() if v}
        both = {k: min(m1[k], m2[k]) for k in m1 if k in m2}
        best = min(both.values())
        d = sd.default_key
        row = {"kernel": sd.group, "size": size_of(sd), "skeleton": sd.skeleton,
               "sweep_points": len(sd.times),
               "curse": min(sd.times.values()) / best,
               "default_sweep": min(sd.times.values()) / sd.times[d],
               "default_pass1": min(m1.values()) / m1[d] if d in m1 else None,
               "default_pass2": min(m2.values()) / m2[d] if d in m2 else None,
               "default_confirmed": best / both[d] if d in both else None,
               "sweep_best_confirmed": best / both[ranked[0]] if ranked[0] in both else None,
               "spread": statistics.median(statistics.median(x / min(v) - 1 for x in v)
                                           for v in [*p1.values(), *p2.values()] if v),
               "pass_disagreement": statistics.median(abs(math.log(m1[k] / m2[k]))
                                                      for k in m1 if k in m2),
               "confirmed": {k: both[k] for k in keys if k in both},
               "sweep": {k: sd.times[k] for k in keys},
               "default_key": d, "samples": {"pass1": p1, "pass2": p2}}
        row["top_stable"] = (row["sweep_best_confirmed"] or 0) >= 1 - args.tie
        rows.append(row)
        print(f"  {sd.group}@{size_of(sd)}: curse {row['curse']:.2f}  default sweep "
              f"{row['default_sweep']:.2f} / pass1 {row['default_pass1']:.2f} / pass2 "
              f"{row['default_pass2']:.2f}  sweep-best {row['sweep_best_confirmed']:.2f}  "
              f"spread {row['spread']:.1%}", flush=True)
    summary = {
        "scenarios": len(rows), "seconds": time.perf_counter() - t0,
        "curse_geomean": geomean([r["curse"] for r in rows]),
        "default_sweep_geomean": geomean([r["default_sweep"] for r in rows]),
        "default_pass1_geomean": geomean([r["default_pass1"] for r in rows]),
        "default_pass2_geomean": geomean([r["default_pass2"] for r in rows]),
        "default_confirmed_geomean": geomean([r["default_confirmed"] for r in rows]),
        "sweep_best_confirmed_geomean": geomean([r["sweep_best_confirmed"] for r in rows]),
        "top_stable_share": sum(r["top_stable"] for r in rows) / max(len(rows), 1),
        "spread_median": statistics.median(r["spread"] for r in rows) if rows else None,
        "pass_disagreement_median": statistics.median(r["pass_disagreement"] for r in rows)
        if rows else None,
        "load_before": os.getloadavg()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"tuner_noise_{dev.name.lower().replace(' ', '-')[:40]}.json"
    path.write_text(json.dumps({"device": dev.key, "args": vars(args), "summary": summary,
                                "rows": rows}, indent=1, default=str))
    print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                      for k, v in summary.items()}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
