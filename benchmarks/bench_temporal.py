"""Temporal blocking (``Stencil(...)(m, iterations=N)`` in passes of t steps) against single
steps, in GCell-steps/s beside the copy bound; and the issue's "no slow corners" figures.

    python -m benchmarks.bench_temporal [--quick] [--sizes 4096,8192,16384] [--iterations 100]
                                        [--cases heat,gauss3,life_i32,life_u8] [--grid staged|full]
                                        [--borders 512,1024,2048,4096 | --borders none]
                                        [--force-t 2,4,8 [--force-ring 0,1]]

Cases: heat (5-point, float32, nearest), Gaussian 3x3 (float32, reflect), Game of Life (int32
and uint8, wrap). For each case and size it times, with OpenCL profiling events (minimum of
repeats, all passes of one call summed):

- ``single``: one launch per step at the parameters skelpy chooses (``params={"t": 1}``);
  ``single %copy`` is the issue's "no slow corners" figure for a single step;
- ``default``: what ``st(m, iterations=N)`` runs with no parameters (the temporal default on
  GPUs, single steps on CPUs);
- the temporal path over passes: t (steps per pass), ``tb_vec`` (columns per work-item, one
  vector), ``tb_wc`` (work-items per stream), ``tb_rows`` (rows per stream), ``tb_ring`` (own
  columns in registers or all from the local ring), ``tb_wr`` (streams per work-group),
  ``tb_pre`` (rows loaded ahead). ``--grid staged`` (the default) varies one parameter at a
  time from the default point (t, vector width, tile width, rows, ring, streams, prefetch, t
  again at the best tile); ``--grid full`` measures a product around it.

Every temporal result is compared bit for bit with the single-step result (at every size for the
best and default points, at the smallest size for all); each case prints ``bitwise PASS`` or
``bitwise FAIL``, and the command exits with status 1 when any comparison failed.

``--force-t 2,4,8`` checks the kernel instead of searching: at every case and size it runs each
of those t with the default tile (on a GPU the GPU default: 128 work-items of one column, 128
rows per stream, two rows ahead), once per ``--force-ring`` layout (0: own columns in registers,
1: every window from the local ring), and prints one line per point: PASS or FAIL against the
single steps, bit for bit, and its GCell-steps/s beside the single step's. The H200 check of
Game of Life in passes (issue 16):

    python -m benchmarks.bench_temporal --cases life_i32,life_u8,heat --sizes 4096,8192 \
        --iterations 100 --force-t 2,3,4,8 --borders none The copy bound: a device-to-device copy
of the same bytes measured in the same run; a step moves 2 x itemsize bytes per cell (8 for
float32), so ``copy-eq`` = copy bandwidth / (2 x itemsize) cell-steps/s and ``%copy`` =
throughput / copy-eq (above 100% only by carrying several steps on chip).

Border modes (``--borders``): heat float32, one default single-step call per mode and size
(what a new user gets), each mode's time over ``nearest``'s (the issue: within 1.5x).

Runs: on a GPU the full mode is heat at 4096^2, 8192^2, 16384^2 and the other cases at 8192^2
and 16384^2, 100 iterations (about 6 minutes on an H200; the search stops at
``--budget-seconds``, 330 by default); ``--quick`` heat at 4096^2 and 8192^2, the others at
8192^2 (about 2 minutes). On a CPU (PoCL) ``--quick``: 256^2, 20 iterations, a short search
(about 2 minutes on two cores). Results: tables on stdout and
``benchmarks/results/temporal-<device>.json``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import skelpy as sk  # noqa: E402
from benchmarks.bench_stencil import heat, life  # noqa: E402 (the same muscles)
from benchmarks.common import copy_bandwidth, print_table, write_json  # noqa: E402
from skelpy import runtime  # noqa: E402

G3 = np.array([0.25, 0.5, 0.25], np.float32)


def gauss3(nb):
    acc = np.float32(0)
    for dr in range(-1, 2):
        row = np.float32(0)
        for dc in range(-1, 2):
            row += G3[dc + 1] * nb[dr, dc]
        acc += G3[dr + 1] * row
    return acc




CASES = {
    "heat": (lambda: sk.Stencil(heat, shape=1, border="nearest"), np.float32),
    "gauss3": (lambda: sk.Stencil(gauss3, border="reflect"), np.float32),
    "life_i32": (lambda: sk.Stencil(life, shape=1, border="wrap", out_dtype=np.int32),
                 np.int32),
    "life_u8": (lambda: sk.Stencil(life, shape=1, border="wrap", out_dtype=np.uint8),
                np.uint8),
}

START = {"t": 4, "tb_wc": 128, "tb_wr": 1, "tb_rows": 128, "tb_vec": 1, "tb_ring": 0,
         "tb_unroll": 1, "tb_pre": 2}                 # where the default point is not temporal
STAGES = [("t", (2, 3, 4, 6, 8)), ("tb_vec", (1, 2, 4, 8, 16)), ("tb_wc", (32, 64, 128, 256)),
          ("tb_rows", (64, 128, 256, 512)), ("tb_ring", (0, 1)), ("tb_wr", (1, 2, 4)),
          ("tb_pre", (1, 2, 4)), ("t", (2, 3, 4, 6, 8, 12))]
QUICK_STAGES = [("t", (2, 4, 8)), ("tb_vec", (1, 2, 4, 8)), ("tb_wc", (64, 128, 256)),
                ("tb_ring", (0, 1)), ("t", (2, 4, 6, 8))]
FULL_GRID = {"t": (2, 4, 8), "tb_vec": (1, 2, 4), "tb_wc": (64, 128, 256),
             "tb_rows": (128, 256), "tb_ring": (0, 1)}
CPU_STAGES = [("t", (2, 3, 4)), ("tb_wc", (16, 64)), ("tb_ring", (0, 1))]
BORDERS = ("nearest", "constant", "wrap", "reflect", "mirror")


def sample(dtype, size, rng):
    if np.dtype(dtype).kind in "iu":
        return (rng.random((size, size)) < 0.3).astype(dtype)
    return rng.random((size, size), dtype=np.float32)


def time_call(st, m, iterations, params, reps):
    """Min device seconds of one ``st(m, iterations=...)`` call (its launches summed), the
    result of the last call and the parameters it ran."""
    best, out = float("inf"), None
    for _ in range(reps + 1):          # the first call builds and warms up
        out = st(m, iterations=iterations, params=params)
        secs = st.last_launch.kernel_time
        best = min(best, secs)
    return best, out, dict(st.last_launch.params)


def key(p: dict) -> tuple:
    return tuple(sorted(p.items()))


class Search:
    """Measured temporal points of one case and size; rejects illegal points quietly."""

    def __init__(self, st, m, iterations, reps, ref, deadline, check_all):
        self.st, self.m, self.iterations, self.reps = st, m, iterations, reps
        self.ref, self.deadline, self.check_all = ref, deadline, check_all
        self.seen: dict[tuple, dict] = {}

    def measure(self, p: dict) -> dict | None:
        k = key(p)
        if k in self.seen:
            return self.seen[k]
        if time.perf_counter() > self.deadline:
            return None
        try:
            secs, out, ran = time_call(self.st, self.m, self.iterations, p, self.reps)
        except sk.SkelpyError as exc:          # illegal here (local memory, work-group size)
            self.seen[k] = rec = {"params": dict(p), "error": str(exc).splitlines()[0][:160]}
            return rec
        if ran != p:     # the runtime refused the point and skelpy fell back to another
            self.seen[k] = rec = {"params": dict(p), "error": f"refused; ran {ran}"}
            return rec
        rec = {"params": dict(p), "seconds": secs}
        if self.check_all:
            rec["bitwise"] = same(out, self.ref)
        self.seen[k] = rec
        return rec

    def best(self) -> dict | None:
        ok = [r for r in self.seen.values() if "seconds" in r and r.get("bitwise", True)]
        return min(ok, key=lambda r: r["seconds"]) if ok else None


def same(out, ref) -> bool:
    a = out.to_numpy()
    return a.dtype == ref.dtype and np.array_equal(a.view(np.uint8), ref.view(np.uint8))


def staged(search: Search, start: dict, stages) -> None:
    cur = dict(start)
    for name, values in stages:
        for v in values:
            search.measure(dict(cur, **{name: v}))
        b = search.best()
        if b is not None:
            cur = dict(b["params"])


def full(search: Search, start: dict, grid: dict) -> None:
    names = list(grid)
    for values in itertools.product(*(grid[n] for n in names)):
        search.measure(dict(start, **dict(zip(names, values))))


def forced(st, m, iterations, reps, ref, start, t_values, rings, t_single, cells, label):
    """Each forced t (and ring layout) at the ``start`` tile, checked bit for bit against the
    single steps' ``ref``; one PASS/FAIL line per point. Returns the point records."""
    recs = []
    for t, ring in itertools.product(t_values, rings):
        p = dict(start, t=t, tb_ring=ring, tb_unroll=1)
        try:
            secs, out, ran = time_call(st, m, iterations, p, reps)
        except sk.SkelpyError as exc:
            rec = {"params": p, "error": str(exc).splitlines()[0][:160]}
            print(f"  CHECK {label} t={t} ring{ring}: ERROR {rec['error']}", flush=True)
            recs.append(rec)
            continue
        ok = same(out, ref) and ran == p
        del out
        rec = {"params": p, "ran": ran, "seconds": secs, "bitwise": ok,
               "gcs": cells / secs / 1e9, "speedup": t_single / secs}
        recs.append(rec)
        print(f"  CHECK {label} t={t} ring{ring}: {'PASS' if ok else 'FAIL'}  "
              f"{rec['gcs']:.1f} GCell-steps/s, {rec['speedup']:.2f}x single "
              f"({cells / t_single / 1e9:.1f})"
              + ("" if ran == p else f"  (ran {ran})"), flush=True)
    return recs


def borders(sizes, reps) -> list[dict]:
    """Heat float32, one default single-step call per border mode: time over nearest's."""
    rows = []
    rng = np.random.default_rng(7)
    for size in sizes:
        m = sk.Matrix(rng.random((size, size), dtype=np.float32))
        times = {}
        for mode in BORDERS:
            st = sk.Stencil(heat, shape=1, border=mode)
            best = float("inf")
            for _ in range(reps + 1):
                st(m)
                best = min(best, st.last_launch.kernel_time)
            times[mode] = best
        row = {"size": size, "nearest ms": 1e3 * times["nearest"]}
        row.update({f"{mode}/nearest": times[mode] / times["nearest"] for mode in BORDERS[1:]})
        row["worst/nearest"] = max(times[mode] / times["nearest"] for mode in BORDERS)
        rows.append(row)
        print(f"  borders {size}^2: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()
                                                  if k != "size"), flush=True)
        del m
    return rows


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", default=None, help="comma-separated square sizes")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--cases", default="heat,gauss3,life_i32,life_u8")
    ap.add_argument("--borders", default=None,
                    help="sizes of the border-mode comparison (none: skip it)")
    ap.add_argument("--grid", choices=("staged", "full"), default=None)
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--budget-seconds", type=float, default=None,
                    help="stop searching (and mark the rest skipped) after this long")
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    ap.add_argument("--force-t", default=None,
                    help="check these t (comma-separated) at the default tile instead of "
                         "searching: PASS/FAIL and GCell-steps/s per point")
    ap.add_argument("--force-ring", default="0,1",
                    help="with --force-t: the tb_ring layouts to check (default 0,1)")
    args = ap.parse_args(argv)
    force_t = [int(v) for v in args.force_t.split(",")] if args.force_t else []
    force_rings = [int(v) for v in args.force_ring.split(",")]

    rt = runtime.current()
    dev = rt.device
    gpu = dev.kind == "gpu"
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]
    elif gpu:
        sizes = [4096, 8192] if args.quick else [4096, 8192, 16384]
    else:
        sizes = [256] if args.quick else [512, 1024]
    if args.borders == "none":
        border_sizes = []
    elif args.borders:
        border_sizes = [int(s) for s in args.borders.split(",")]
    else:
        border_sizes = ([512, 1024] if args.quick else [512, 1024, 2048, 4096]) \
            if not args.sizes else []
    iterations = args.iterations or (100 if gpu else 20)
    grid = args.grid or "staged"
    reps = args.reps or (2 if args.quick else 3)
    budget = args.budget_seconds or (100.0 if args.quick else 330.0)
    t_start = time.perf_counter()
    names = args.cases.split(",")
    print(f"device: {dev.name} ({dev.kind}, {dev.platform}); {iterations} iterations; "
          f"grid {grid}; sizes {sizes}", flush=True)

    rng = np.random.default_rng(2024)
    rows, details, copy_cache = [], [], {}
    # heat at every size; the other cases from 8192^2 on a GPU (the sizes)
    plan = [(c, s) for c in names for s in sizes
            if not (gpu and not args.sizes and c != "heat" and s < 8192)]
    for k, (case, size) in enumerate(plan):
        make, dtype = CASES[case]
        st = make()
        host = sample(dtype, size, rng)
        m = sk.Matrix(host)
        item = np.dtype(dtype).itemsize
        if host.nbytes not in copy_cache:
            copy_cache[host.nbytes] = copy_bandwidth(rt.queue, nbytes=host.nbytes, reps=5)
        copy_bw = copy_cache[host.nbytes]
        cells = float(size) * size * iterations
        copy_eq = copy_bw / (2 * item)                  # cell-steps/s at the copy bound
        t_single, ref_m, p_single = time_call(st, m, iterations, {"t": 1}, reps)
        ref = ref_m.to_numpy()
        del ref_m
        t_def, out_def, p_def = time_call(st, m, iterations, None, reps)
        def_ok = same(out_def, ref)
        del out_def
        # the time left is shared among the (case, size) pairs still to do
        share = (budget - (time.perf_counter() - t_start)) / (len(plan) - k)
        deadline = time.perf_counter() + max(share, 0.0)
        search = Search(st, m, iterations, reps, ref, deadline, check_all=(size == min(sizes)))
        start = {k: v for k, v in p_def.items() if k in START} \
            if p_def.get("t", 1) > 1 else dict(START, tb_wc=START["tb_wc"] if gpu else 64)
        checks = []
        if force_t:
            tile = dict(START, tb_wc=START["tb_wc"] if gpu else 64)   # the GPU default's
            checks = forced(st, m, iterations, reps, ref, tile, force_t, force_rings,
                            t_single, cells, f"{case} {size}^2")
            for rec in checks:
                if "seconds" in rec:
                    search.seen[key(rec["params"])] = {
                        "params": rec["params"], "seconds": rec["seconds"],
                        "bitwise": rec["bitwise"]}
        elif grid == "full":
            full(search, start, FULL_GRID)
        else:
            staged(search, start, (QUICK_STAGES if args.quick else STAGES) if gpu
                   else CPU_STAGES)
        best = search.best()
        row = {"case": case, "size": size, "copy-eq GCS/s": copy_eq / 1e9,
               "single GCS/s": cells / t_single / 1e9,
               "single %copy": 100 * cells / t_single / copy_eq,
               "default GCS/s": cells / t_def / 1e9,
               "default %copy": 100 * cells / t_def / copy_eq, "default/single": t_single / t_def}
        rec = {"case": case, "size": size, "iterations": iterations, "dtype": str(np.dtype(dtype)),
               "copy_GBs": copy_bw / 1e9, "copy_eq_GCS": copy_eq / 1e9,
               "single": {"seconds": t_single, "params": p_single},
               "default": {"seconds": t_def, "params": p_def, "bitwise": def_ok},
               "points": list(search.seen.values()), "forced": checks,
               "skipped_after_deadline": time.perf_counter() > deadline}
        if best is not None:
            # the winner checked bit for bit at this size too
            _, out_b, _ = time_call(st, m, iterations, best["params"], 0)
            best["bitwise"] = same(out_b, ref)
            del out_b
            tb = best["seconds"]
            row.update({"best GCS/s": cells / tb / 1e9, "best %copy": 100 * cells / tb / copy_eq,
                        "best/single": t_single / tb,
                        "best point": "t{t} v{tb_vec} wc{tb_wc} r{tb_rows} wr{tb_wr} "
                                      "ring{tb_ring} u{tb_unroll} pre{tb_pre}".format(
                                          **dict(START, **best["params"]))})
            rec["best"] = best
        # every comparison of this case: default, all measured points, the best, the forced
        row["bitwise"] = bool(def_ok and all(r.get("bitwise", True) for r in search.seen.values())
                              and all(r.get("bitwise", True) for r in checks)
                              and (best is None or best["bitwise"]))
        rows.append(row)
        details.append(rec)
        print(f"  {case} {size}^2: single {row['single GCS/s']:.1f} GCS/s "
              f"({row['single %copy']:.0f}% copy), best {row.get('best GCS/s', 0):.1f} GCS/s "
              f"({row.get('best %copy', 0):.0f}%) {row.get('best point', '-')}, "
              f"{len(search.seen)} points, bitwise {'PASS' if row['bitwise'] else 'FAIL'}, "
              f"{time.perf_counter() - t_start:.0f} s", flush=True)
        del m
    cols = ["case", "size", "copy-eq GCS/s", "single GCS/s", "single %copy", "default GCS/s",
            "default %copy", "default/single", "best GCS/s", "best %copy", "best/single",
            "best point", "bitwise"]
    print_table(rows, cols, title=f"Temporal blocking on {dev.name}: {iterations} iterations, "
                f"GCell-steps/s (kernel time, min of {reps}); %copy = of the copy-equivalent "
                "rate (copy bandwidth / 2 x itemsize)")
    border_rows = borders(border_sizes, reps) if border_sizes else []
    if border_rows:
        print_table(border_rows, list(border_rows[0]),
                    title="Heat float32, one default step per border mode: time / nearest's "
                          "(the issue: every mode within 1.5x)")
    failed = [f"{r['case']} {r['size']}^2" for r in rows if not r["bitwise"]]
    data = {"iterations": iterations, "sizes": sizes, "grid": grid, "reps": reps,
            "bitwise_ok": not failed,
            "device_kind": dev.kind, "platform": dev.platform, "rows": rows, "cases": details,
            "borders": border_rows, "seconds": time.perf_counter() - t_start}
    path = write_json("temporal", dev.name, data,
                      directory=None if args.out is None else Path(args.out))
    print(f"results: {path} ({data['seconds']:.0f} s)")
    print("bitwise: " + ("PASS (every temporal result equals the single steps)" if not failed
                         else "FAIL in " + ", ".join(failed)))
    return data


if __name__ == "__main__":
    sys.exit(0 if main()["bitwise_ok"] else 1)
