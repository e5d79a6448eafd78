"""Replaying a GPU new-device run offline: what the tuner's decision rule would have picked.

``python -m benchmarks.tuner_eval --new-device`` writes a results JSON and the device's data
file (the ``skelpy tune`` measurements and the held-out kernels' sweeps). From them this
retrains, without a GPU, the zero-shot model (the shipped data without the held-out kernels)
and the tuned one (that plus the tune's measurements) by the rule before validation, by
coverage alone, and with validation on the device's own kernels (``skelpy/tuner/validation.py``), and scores each one's pick among
a held-out scenario's measured points against the best of them (sweep times, not a
confirmation round: the JSON's confirmed ratios of the run's own picks are shown beside).

    python -m benchmarks.tuner_replay benchmarks/results/tuner_newdevice_nvidia-h100-80gb-hbm3.json \\
        benchmarks/results/data-nvidia-h100-80gb-hbm3.npz
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from benchmarks.tuner_transfer import geomean, load_sets, pick
from skelpy.tuner import model as tmodel
from skelpy.tuner import training_data, zero_shot


def replay(result: dict[str, Any], data: training_data.DeviceData) -> dict[str, Any]:
    """Per held-out scenario: the ratio to the sweep's best of the default, the zero-shot
    pick, and the tuned pick without and with validation (and the run's confirmed ratios)."""
    held = set(result["held_out_kernels"])
    sets = [training_data.DeviceData(d.device, d.device_features,
                                     [sd for sd in d.scenarios if sd.group not in held],
                                     d.source)
            for d in load_sets([]) if d.source.rsplit("/", 1)[-1] in result["shipped_sets"]]
    zs = zero_shot.build(sets)
    local = [sd for sd in data.scenarios if sd.group not in held]
    full = zero_shot.FULL_POINTS
    zero_shot.FULL_POINTS = 1       # main's rule before this one: any scenario counts fully
    try:
        before = zero_shot.train_on(local, data.device, shipped=sets, base=zs, validate=False)
    finally:
        zero_shot.FULL_POINTS = full
    models = {"zero_shot": zs, "tuned_before": before,
              "tuned_unchecked": zero_shot.train_on(local, data.device, shipped=sets,
                                                    base=zs, validate=False),
              "tuned": zero_shot.train_on(local, data.device, shipped=sets, base=zs)}
    confirmed = {(r["kernel"], r["size"]): r for r in result["rows"]}
    rows = []
    for sd in (sd for sd in data.scenarios if sd.group in held):
        best = min(sd.times.values())
        size = int(sd.dataset.get("rows", sd.dataset.get("n", 0)))
        row: dict[str, Any] = {"kernel": sd.group, "size": size, "points": len(sd.times),
                               "default": best / sd.times[sd.default_key]
                               if sd.default_key in sd.times else None}
        for name, m in models.items():
            k, _src = pick(tmodel.group_for(m.groups, tmodel.signature(sd.names),
                                            tmodel.device_kind(sd.features)), sd)
            row[name] = best / sd.times[k]
        run = confirmed.get((sd.group, size), {})
        row["run_confirmed"] = {m: run.get(m) for m in ("default", "zero_shot", "tuned")}
        rows.append(row)
    cols = ("default", "zero_shot", "tuned_before", "tuned_unchecked", "tuned")
    return {"device": data.device, "rows": rows,
            "summary": {c: geomean([r[c] for r in rows]) for c in cols},
            "run_summary": {m: s["perf_geomean"] for m, s in result["summary"].items()},
            "signatures": {s: {"origin": g.origin, "keeps_default": g.keeps_default,
                               **g.validation} for s, g in models["tuned"].groups.items()
                           if g.validation}}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tuner_replay",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("result", help="tuner_newdevice_<device>.json")
    ap.add_argument("data", help="data-<device>.npz of the same run")
    ap.add_argument("--json", help="write the replay here")
    args = ap.parse_args(argv)
    with open(args.result) as f:
        res = replay(json.load(f), training_data.load(args.data))
    print(f"{'kernel':<20} {'size':>9} {'default':>8} {'zero-shot':>9} {'before':>7} "
          f"{'unchecked':>9} {'tuned':>6}   (the run's confirmed default / zero-shot / tuned)")
    for r in res["rows"]:
        conf = " / ".join("-" if v is None else f"{v:.2f}" for v in r["run_confirmed"].values())
        print(f"{r['kernel'][:20]:<20} {r['size']:>9} {r['default'] or 0:>8.2f} "
              f"{r['zero_shot']:>9.2f} {r['tuned_before']:>7.2f} {r['tuned_unchecked']:>9.2f} "
              f"{r['tuned']:>6.2f}   ({conf})")
    s, run = res["summary"], res["run_summary"]
    print(f"\n{res['device']}: geomean of {len(res['rows'])} held-out scenarios, of the sweep's "
          f"best: default {s['default']:.1%}, zero-shot {s['zero_shot']:.1%}, tuned by the "
          f"rule before {s['tuned_before']:.1%}, by coverage without validation "
          f"{s['tuned_unchecked']:.1%}, tuned {s['tuned']:.1%}  (the run, "
          f"confirmed: default {run['default']:.1%}, zero-shot {run['zero_shot']:.1%}, "
          f"tuned {run['tuned']:.1%})")
    for sig, v in res["signatures"].items():
        sc = ", ".join(f"{k} {x:.2f}x" for k, x in v.get("scores", {}).items())
        print(f"  [{sig}] {v['use']} (validated on {v['scenarios']} scenarios: {sc or '-'})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
