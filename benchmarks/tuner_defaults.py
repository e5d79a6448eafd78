"""Candidate default points measured interleaved on this machine's device (issue 18: the
defaults ``off`` mode runs and ``model`` mode falls back to).

For each evaluation kernel (the real ones of ``tuner_eval``, the held-out ones of
``tuner_transfer`` and a few synthetic shapes) at each size, every candidate point of its
kind is built once and measured round-robin (a disturbance of the shared machine hits them
all alike); a pass is repeated (``--passes``, the later ones in reverse order) and each
point's time is the median over the passes of its minimum within a pass. Prints, per
scenario, each candidate's ratio to the best candidate and the default's; writes JSON.

    python -m benchmarks.tuner_defaults --sizes 512,1024 --passes 3
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _st(wg_r, wg_c, cr=1, cc=1, local=0):
    return {"wg_r": wg_r, "wg_c": wg_c, "cr": cr, "cc": cc, "local": local, "vec": 1}


# Stencil candidates on a CPU: the light and heavy defaults before issue 18's change, the
# narrower groups that won light stencils in the sweeps, and local tiles several columns wide.
STENCIL_CANDIDATES = {
    "4x64": _st(4, 64), "4x32": _st(4, 32), "8x32": _st(8, 32), "8x16": _st(8, 16),
    "1x64": _st(1, 64), "4x16c2": _st(4, 16, 2), "8x16c2": _st(8, 16, 2),
    "4x32c2": _st(4, 32, 2),
    "2x16c2x2L": _st(2, 16, 2, 2, 1), "4x8c2x4L": _st(4, 8, 2, 4, 1),
    "8x16c2x2L": _st(8, 16, 2, 2, 1), "4x16c1x4L": _st(4, 16, 1, 4, 1),
}
REDUCE_CANDIDATES = {f"wg{wg}i{it}g{g}": {"wg": wg, "items": it, "groups": g, "stages": 1}
                     for wg in (1, 4, 16, 64) for it in (2, 16) for g in (4, 16, 64)}
SCAN_CANDIDATES = {f"wg{wg}i{it}{m[:3]}": {"wg": wg, "items": it, "method": m}
                   for wg in (1, 8, 64) for it in (4, 16) for m in ("lookback", "levels")}
MAP_CANDIDATES = {f"wg{wg}c{c}vw{vw}": {"wg": wg, "coarsen": c, "blocked": 0, "vw": vw}
                  for wg in (256, 512) for c in (1, 4) for vw in (1, 4, 16)}


def scenario_cases(sizes, only: str | None):
    from benchmarks import tuner_eval as te
    from benchmarks import tuner_transfer as tt
    from skelpy.tuner import synthetic

    shapes = [synthetic.STENCIL_SHAPES[i] for i in (0, 1, 2, 4, 6, 7)]
    out = []
    for s in sizes:
        seen = set()
        for c in tt.held_out_cases([s], [s * s], ()):
            if c.kind in ("stencil", "map", "reduce", "scan"):
                out.append(c)
                seen.add(c.group)
        for k, sh in enumerate(shapes):
            out.append(te._synthetic_case(sh, bool(k % 2), s))
        out.append(te._synthetic_case((1, 1, 1, 1), False, s, "wrap", "int32"))
        out.append(te._map_case(s))
        out.append(te._poly_case(s))
        out.append(te._zip_case(s))
        out += [te._reduce_case(s), te._reduce_case(s, "float64")]
        for intensity, calls in ((0, 0), (1, 0), (2, 0), (4, 0), (8, 0), (0, 1), (2, 1), (0, 2)):
            out.append(_synthetic_map(intensity, calls, s))
    if only:
        out = [c for c in out if re.search(only, c.group)]
    return out


def _synthetic_map(intensity: int, calls: int, size: int):
    """A synthetic Map (``synthetic.map_source``) over ``size**2`` float32 elements."""
    import numpy as np

    import skelpy as sk
    from benchmarks.tuner_eval import EvalCase
    from skelpy.tuner import synthetic

    src = synthetic.map_source(intensity, math_calls=calls, name="muscle")

    def build():
        f = sk.Map(synthetic.compile_muscle(src, "muscle"))
        v = sk.Vector(np.random.default_rng(size).random(size * size).astype(np.float32))
        return (lambda **kw: f(v, **kw)), f
    return EvalCase(f"synthetic_map_{intensity}_{calls}", "map", size, build)


def measure_case(case, rounds: int, passes: int) -> dict:
    from benchmarks.tuner_transfer import exhaustive_call
    from skelpy.tuner.sweep import confirm

    call = exhaustive_call(case)
    cands = {"stencil": STENCIL_CANDIDATES, "reduce": REDUCE_CANDIDATES,
             "mapreduce": REDUCE_CANDIDATES, "scan": SCAN_CANDIDATES}.get(call.req.skeleton, MAP_CANDIDATES)
    default = call.default()
    pts = {}
    for name, p in cands.items():
        p = {k: v for k, v in p.items() if k in call.space.names}
        if call.space.is_legal(p):
            pts[name] = p
    pts.setdefault("default", default)
    names = list(pts)
    per_pass: dict[str, list[float]] = {n: [] for n in names}
    for i in range(passes):
        order = names if i % 2 == 0 else names[::-1]
        conf = confirm(call, [pts[n] for n in order], rounds=rounds, record=False)
        for n in names:
            t = conf.get(call.space.key(pts[n]))
            if t:
                per_pass[n].append(t)
    times = {n: statistics.median(v) for n, v in per_pass.items() if v}
    best = min(times.values())
    return {"kernel": case.group, "size": case.size, "skeleton": call.req.skeleton,
            "features": call.req.features, "default": default,
            "default_name": next((n for n in names if pts[n] == default), "default"),
            "points": pts, "seconds": times, "passes": per_pass,
            "ratio": {n: best / t for n, t in times.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="512,1024")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--only", default=None, help="kernels whose name matches this regex")
    ap.add_argument("--out", default=str(RESULTS / "tuner_defaults.json"))
    args = ap.parse_args(argv)
    import os

    import skelpy as sk

    os.environ.setdefault("SKELPY_TUNE_PRETRAINED", "off")
    rows = []
    t0 = time.perf_counter()
    for case in scenario_cases([int(s) for s in args.sizes.split(",")], args.only):
        try:
            r = measure_case(case, args.rounds, args.passes)
        except Exception as exc:  # noqa: BLE001
            print(f"{case.group}@{case.size}: FAILED {type(exc).__name__}: {exc}", flush=True)
            continue
        rows.append(r)
        top = sorted(r["ratio"].items(), key=lambda kv: -kv[1])
        print(f"{r['kernel']}@{r['size']}: default({r['default_name']}) "
              f"{r['ratio'].get('default', r['ratio'].get(r['default_name'], 0)):.2f} | "
              + " ".join(f"{n} {x:.2f}" for n, x in top), flush=True)
    out = {"device": sk.current_device().name, "when": time.strftime("%Y-%m-%d %H:%M:%S"),
           "rounds": args.rounds, "passes": args.passes, "rows": rows,
           "seconds": time.perf_counter() - t0}
    for kind in ("stencil", "map", "zip", "reduce", "scan"):
        rs = [r for r in rows if r["skeleton"] == kind]
        if not rs:
            continue
        names = sorted({n for r in rs for n in r["ratio"]})
        gm = {n: math.exp(statistics.fmean(math.log(r["ratio"][n]) for r in rs
                                           if n in r["ratio"]))
              for n in names}
        print(f"{kind}: geomean of each candidate over the best: "
              + " ".join(f"{n} {x:.2f}" for n, x in sorted(gm.items(), key=lambda kv: -kv[1])))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {args.out} in {out['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
