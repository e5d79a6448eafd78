"""Points measured per second by a sweep, before and after issue 18's fast sweeps.

Every launch point of a stencil space is its own program build (and, on PoCL, its own
work-group-function compile at the first launch of each local size), so a sweep measured a
few points a second at best. This times time-boxed exhaustive sweeps of a few kernels on a
device that has never built them (fresh tuning store, pyopencl's and PoCL's caches off, the
kernel sources salted), once with the sweep as it was ("before": the median of 3-20 repeats
within a 3% confidence interval or 0.5 s per point, each program built when first launched)
and once as it is now ("after": the device kind's budget, programs built ahead through the
skeleton's prepare hook, in background threads on a GPU). Each mode runs in its own
process; the modes alternate so that a busy machine slows both alike.

    python -m benchmarks.sweep_rate                 # 20 s per kernel and mode
    python -m benchmarks.sweep_rate --seconds 60 --rounds 2

Writes benchmarks/results/sweep_rate_<device>.json (benchmarks/report.py turns it into the
table in RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

KERNELS = {
    "heat": ("def heat(nb):\n    return nb[0, 0] + {salt} * (nb[-1, 0] + nb[1, 0] + nb[0, -1]"
             " + nb[0, 1] - 4 * nb[0, 0])\n", 1),
    "gaussian_5x5": ("def g5(nb):\n    acc = nb[0, 0] * 0\n    for dr in range(-2, 3):\n"
                     "        for dc in range(-2, 3):\n"
                     "            acc += ({salt} + 0.01 * (dr * dr + dc * dc)) * nb[dr, dc]\n"
                     "    return acc\n", 2),
    "map": ("def f(x):\n    return x * {salt} + x * x\n", None),
}


def _child(mode: str, kernel: str, size: int, seconds: float, salt: str) -> dict:
    """One sweep in this process (a fresh store and caches are set by the parent)."""
    import numpy as np

    import skelpy as sk
    from skelpy import tuner
    from skelpy.tuner import synthetic
    from skelpy.tuner.measure import Budget

    if mode == "before":
        tuner.settings.sweep_budget = Budget(warmup=1, min_reps=3, max_reps=20, rel_ci=0.03,
                                             max_seconds=0.5)
        tuner.settings.prebuild = False
    src, reach = KERNELS[kernel]
    fn = synthetic.compile_muscle(src.format(salt=salt), src.split("(")[0].split()[-1])
    if reach is None:
        skel = sk.Map(fn)
        x = sk.Vector(np.random.default_rng(0).random(size * size).astype(np.float32))
    else:
        skel = sk.Stencil(fn, shape=reach)
        x = sk.Matrix(np.random.default_rng(0).random((size, size)).astype(np.float32))
    with tuner.capture_requests() as reqs:
        skel(x)
    req = max(reqs, key=lambda r: r.dataset.get("n", 0))
    from skelpy.tuner.sweep import sweep

    call = tuner.new_call(req, "exhaustive")
    res = sweep(call, deadline=time.perf_counter() + seconds)
    return {"mode": mode, "kernel": kernel, "size": size, "points": res.measured,
            "seconds": res.seconds, "rate": res.measured / res.seconds,
            "space": len(req.space.points()), "builds": sk.runtime.current().stats.builds}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="time box per sweep")
    ap.add_argument("--rounds", type=int, default=1, help="before/after pairs per kernel")
    ap.add_argument("--size", type=int, default=None, help="matrix side (default: 1024 on "
                    "a GPU, 512 on a CPU); Map: side**2 elements")
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--child", nargs=5, metavar=("MODE", "KERNEL", "SIZE", "SECONDS", "SALT"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        mode, kernel, size, seconds, salt = args.child
        print(json.dumps(_child(mode, kernel, int(size), float(seconds), salt)))
        return 0
    import skelpy as sk

    if args.device:
        sk.use(args.device)
    dev = sk.current_device()
    gpu = dev.kind == "gpu"
    size = args.size or (1024 if gpu else 512)
    rows = []
    for r in range(args.rounds):
        for kernel in args.kernels.split(","):
            for mode in (("before", "after") if r % 2 == 0 else ("after", "before")):
                salt = f"{0.1 + 1e-6 * (time.time_ns() % 99991):.7f}"   # never built before
                env = dict(os.environ, SKELPY_CACHE_DIR=tempfile.mkdtemp(prefix="skelpy-rate-"),
                           PYOPENCL_NO_CACHE="1", POCL_KERNEL_CACHE="0",
                           SKELPY_TUNE_RETRAIN="off")
                if args.device:
                    env["SKELPY_DEVICE"] = args.device
                p = subprocess.run([sys.executable, "-m", "benchmarks.sweep_rate", "--child",
                                    mode, kernel, str(size), str(args.seconds), salt],
                                   env=env, capture_output=True, text=True,
                                   cwd=Path(__file__).resolve().parent.parent)
                if p.returncode != 0:
                    print(f"{kernel} {mode}: failed\n{p.stderr[-2000:]}")
                    continue
                row = json.loads(p.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(f"{kernel:<14} {mode:<7} {row['points']:>5} points in {row['seconds']:6.1f} s"
                      f" = {row['rate']:6.2f} points/s ({row['builds']} builds; space "
                      f"{row['space']})", flush=True)
    summary = {}
    for kernel in args.kernels.split(","):
        for mode in ("before", "after"):
            sel = [x for x in rows if x["kernel"] == kernel and x["mode"] == mode]
            if sel:
                summary.setdefault(kernel, {})[mode] = sum(x["points"] for x in sel) / sum(
                    x["seconds"] for x in sel)
    for k, v in summary.items():
        if "before" in v and "after" in v:
            print(f"{k:<14} before {v['before']:6.2f}/s  after {v['after']:6.2f}/s  "
                  f"x{v['after'] / v['before']:.2f}")
    slug = re.sub(r"[^A-Za-z0-9]+", "-", dev.name).strip("-").lower()[:40]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"sweep_rate_{slug}.json"
    path.write_text(json.dumps({"device": dev.name, "kind": dev.kind, "size": size,
                                "seconds_per_sweep": args.seconds, "rows": rows,
                                "summary": summary,
                                "when": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
