"""Array expressions fused into single kernels (issue 15), against hand-written and unfused
alternatives, in one run on one device.

    python -m benchmarks.bench_fusion [--quick] [--n N] [--calls K] [--loop-only]
    python -m benchmarks.suite --only fusion [--quick]

Cases (kernel times from OpenCL profiling events, minimum of repeats; CuPy's from CUDA events
when CuPy is importable, i.e. on the GPU host only):

- ``a * x + y`` (float32): the fused kernel vs a hand-written one-kernel saxpy at the same
  launch point (target within 1.05x) and vs CuPy's unfused expression (target >= 1.6x faster);
- ``((x - y) ** 2).sum()``: one MapReduce kernel vs ``sk.MapReduce`` written by hand (target
  within 1.1x) and vs CuPy's expression (target >= 2x faster);
- ``Map(f)`` then ``Reduce`` inside ``with sk.lazy():`` (one fused MapReduce kernel) vs the
  explicit MapReduce (target within 1.1x); the eager chain (two kernels) is shown beside it;
- ``argmin``/``argmax`` (one pass over 64-bit keys) vs ``x.min()`` (one fold of the values);
- ``Stencil(heat)(a * x + y)`` and ``Stencil(heat)(x * a)`` (a 5-point stencil reading the
  expression at each neighbour, one kernel; ``of_copy_bw`` counts its real traffic) vs the
  expression computed first, then the stencil (two kernels and a temporary); ``fused`` says
  whether the cost rule fused it (on a CPU a two-input expression is computed first, so both
  columns time the same thing there);
- a 6-operation chain on x and y: GB/s counting only the fused kernel's real reads and writes
  (12 bytes per element) as a fraction of the copy bandwidth (target >= 90%), the bound being a
  copy of the same bytes timed in alternation with the chain (``copy_us``);
- ``Scan(x * 2 + y)`` (the expression evaluated as the scan loads) and a k-means-like
  ``AllPairs(P * 0.5 - 1, C)`` (evaluated as slices are fetched) vs the expression computed
  first (two kernels and a temporary);
- a loop of ``--calls`` (1000) small expressions ``a * x + y`` (64 float32): kernel builds
  after the first iteration (target 0) and time per iteration of the loop (one wait at its
  end) vs the same loop of one ``Zip`` call each (target within 1.5x); beside it the host CPU
  time per call (this thread only) and the latency of a call that waits for its result.
  Each measurement alternates the two loops (expression, Zip, expression, ...), so that a
  change of load on the machine falls on both; ``--loop-only`` runs this case alone (written
  to ``results/fusion-loop-<device>.json``).

Kernel times are the minimum over repeats, and the two (or three) sides of every comparison are
timed in alternating rounds (``common.time_events_interleaved``): on a CPU device timed back to
back, the first side took the process's fresh-page and load changes alone (the same saxpy
kernel measured 0.99-1.49x of itself between processes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import pyopencl as cl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import skelpy as sk  # noqa: E402
from benchmarks.bench_map import HAND_WRITTEN, global_size  # noqa: E402
from benchmarks.common import (  # noqa: E402
    copy_bandwidth,
    print_table,
    time_events_interleaved,
    write_json,
)
from skelpy import runtime  # noqa: E402


def _cupy():
    try:
        import cupy as cp
        cp.zeros(1)
        return cp
    except Exception:  # noqa: BLE001 - no CuPy or no CUDA device: skip it
        return None


def _time_cupy(cp, fn, reps: int) -> float:
    fn()
    cp.cuda.Device().synchronize()
    best = float("inf")
    for _ in range(reps):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(start, end) * 1e-3)
    return best


def _median_wall(fn, calls: int) -> float:
    for _ in range(min(20, calls)):
        fn()
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def _loop_seconds(fns, calls: int, q) -> list[float]:
    """For each of ``fns``: seconds per iteration of a loop of ``calls`` calls and one wait
    at its end, median of 5 loops (the functions' loops alternate)."""
    samples = [[] for _ in fns]
    for _ in range(5):
        for fn, out in zip(fns, samples, strict=True):
            q.finish()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            q.finish()
            out.append((time.perf_counter() - t0) / calls)
    return [statistics.median(s) for s in samples]


def _cpu_seconds(fns, calls: int, q) -> list[float]:
    """For each of ``fns``: this thread's CPU seconds per call (no wait: the call's own host
    work; other processes on the machine do not count), median of batches of 20 (the
    functions' batches alternate)."""
    samples = [[] for _ in fns]
    for _ in range(max(1, calls // 20)):
        for fn, out in zip(fns, samples, strict=True):
            q.finish()
            t0 = time.thread_time()
            for _ in range(20):
                fn()
            out.append((time.thread_time() - t0) / 20)
    q.finish()
    return [statistics.median(s) for s in samples]


def _add(a, b):
    return a + b


def _sqdiff(a, b):
    return (a - b) ** 2


def _square(a):
    return a * a


def _heat(nb):
    return nb[0, 0] + 0.2 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


def _small_loop(rt, hx, hy, calls: int) -> tuple[dict, list]:
    """The issue's target: a loop of ``calls`` small expressions costs, per iteration, within
    1.5x of the same loop of one skeleton call each (same size, same work), and builds
    nothing after its first iteration. Timed as a loop (one wait at its end; median of 5
    loops): on a device that keeps up, that is the host's cost per call. Beside it: the host
    CPU time per call, and the latency of one call that waits for its result."""
    q = rt.queue
    sx, sy = sk.Vector(hx[:64]), sk.Vector(hy[:64])
    saxpy = sk.Zip(lambda u, v, s: s * u + v)
    a = 2.0

    def expr_host():
        sk.evaluate(a * sx + sy)

    def skel_host():
        saxpy(sx, sy, a)

    def expr_call():
        expr_host()
        q.finish()

    def skel_call():
        skel_host()
        q.finish()

    expr_call()
    skel_call()
    builds = rt.stats.builds
    t_loop_expr, t_loop_skel = _loop_seconds([expr_host, skel_host], calls, q)
    rebuilt = rt.stats.builds - builds
    c_expr, c_skel = _cpu_seconds([expr_host, skel_host], calls, q)
    t_expr = _median_wall(expr_call, min(calls, 300))
    t_skel = _median_wall(skel_call, min(calls, 300))
    loop = {"calls": calls, "builds_after_first": rebuilt,
            "loop_expression_us": t_loop_expr * 1e6, "loop_skeleton_call_us": t_loop_skel * 1e6,
            "ratio": t_loop_expr / t_loop_skel,
            "cpu_expression_us": c_expr * 1e6, "cpu_skeleton_us": c_skel * 1e6,
            "cpu_ratio": c_expr / c_skel,
            "waited_expression_us": t_expr * 1e6, "waited_skeleton_us": t_skel * 1e6,
            "waited_ratio": t_expr / t_skel}
    print_table([loop], title=f"a loop of {calls} small expressions (a*x+y, 64 float32) vs the "
                "same loop of one Zip call: us per iteration")
    return loop, [("no rebuilds in a loop of small expressions", rebuilt == 0),
                  ("a loop of small expressions within 1.5x of one skeleton call each",
                   t_loop_expr / t_loop_skel <= 1.5)]


def _report(targets) -> None:
    for what, ok in targets:
        print(f"  {'met ' if ok else 'MISS'}  {what}")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    ap.add_argument("--n", type=int, default=None, help="elements (default by device)")
    ap.add_argument("--calls", type=int, default=None, help="iterations of the small loop")
    ap.add_argument("--loop-only", action="store_true",
                    help="only the loop of small expressions")
    args = ap.parse_args(argv)
    rt = runtime.current()
    dev, q, ctx = rt.device, rt.queue, rt.context
    gpu = dev.kind == "gpu"
    n = args.n or ((1 << 24 if args.quick else 1 << 26) if gpu else
                   (1 << 20 if args.quick else 1 << 22))
    reps = 5 if args.quick else (15 if gpu else 41)   # a CPU device shares the host: more rounds
    calls = args.calls or (200 if args.quick else 1000)
    print(f"device: {dev.name} ({dev.platform}); n = {n}")
    if args.loop_only:
        rng = np.random.default_rng(0)
        hx, hy = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
        loop, targets = _small_loop(rt, hx, hy, calls)
        _report(targets)
        path = write_json("fusion-loop", dev.name, {"loop": loop, "targets": [
            {"target": t, "met": ok} for t, ok in targets]})
        print(f"wrote {path}")
        return {"loop": loop}
    bw = copy_bandwidth(q, nbytes=min(4 * n, 1 << 30), reps=reps)
    print(f"copy bandwidth: {bw / 1e9:.1f} GB/s (read + write)")
    cp = _cupy()

    rng = np.random.default_rng(0)
    hx = rng.standard_normal(n).astype(np.float32)
    hy = rng.standard_normal(n).astype(np.float32)
    x, y = sk.Vector(hx), sk.Vector(hy)
    a = 2.0
    rows, targets = [], []

    # -- a * x + y -------------------------------------------------------------------------
    def fused_saxpy():
        sk.evaluate(a * x + y)
        return sk.array.last_skeleton().last_launch.events

    fused_saxpy()                           # built; its parameters name the hand-written's
    p = dict(sk.array.last_skeleton().last_launch.params)
    prg = cl.Program(ctx, HAND_WRITTEN).build(options=[f"-DC={p['coarsen']}",
                                                       f"-DVW={p['vw']}"])
    bo = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, hx.nbytes)
    bx, by = x.device_buffer(rt), y.device_buffer(rt)
    hand = prg.zip_saxpy
    if p["blocked"]:                        # the hand-written kernel is interleaved only
        p = dict(p, blocked=0)
    g = global_size(n, p)
    t_fused, t_hand = time_events_interleaved(
        [fused_saxpy, lambda: hand(q, (g,), (p["wg"],), bx, by, bo, np.float32(a), np.int64(n))],
        reps=reps)
    row = {"case": "a*x+y", "skelpy_us": t_fused * 1e6, "hand_us": t_hand * 1e6,
           "skelpy/hand": t_fused / t_hand, "of_copy_bw": 12 * n / t_fused / bw}
    targets.append(("a*x+y within 1.05x of a hand-written saxpy", t_fused / t_hand <= 1.05))
    if cp is not None:
        cx, cy = cp.asarray(hx), cp.asarray(hy)
        t_cp = _time_cupy(cp, lambda: a * cx + cy, reps)
        row["cupy_us"] = t_cp * 1e6
        row["cupy/skelpy"] = t_cp / t_fused
        targets.append(("a*x+y >= 1.6x faster than CuPy", t_cp / t_fused >= 1.6))
    rows.append(row)

    # -- ((x - y) ** 2).sum() vs MapReduce ---------------------------------------------------
    def fused_sum():
        ((x - y) ** 2).sum()
        return sk.array.last_skeleton().last_launch.events

    mr = sk.MapReduce(_sqdiff, _add, 0)

    def explicit():
        mr(x, y)
        return mr.last_launch.events

    t_fs, t_mr = time_events_interleaved([fused_sum, explicit], reps=reps)
    row = {"case": "((x-y)**2).sum()", "skelpy_us": t_fs * 1e6, "mapreduce_us": t_mr * 1e6,
           "skelpy/mapreduce": t_fs / t_mr, "of_copy_bw": 8 * n / t_fs / bw}
    targets.append(("((x-y)**2).sum() within 1.1x of MapReduce", t_fs / t_mr <= 1.1))
    if cp is not None:
        t_cp = _time_cupy(cp, lambda: ((cx - cy) ** 2).sum(), reps)
        row["cupy_us"] = t_cp * 1e6
        row["cupy/skelpy"] = t_cp / t_fs
        targets.append(("((x-y)**2).sum() >= 2x faster than CuPy", t_cp / t_fs >= 2))
    rows.append(row)

    # -- Map(f) then Reduce: eager (two kernels) and lazy (one MapReduce) ------------------
    sq, red, mr1 = sk.Map(_square), sk.Reduce(_add, 0), sk.MapReduce(_square, _add, 0)

    def chain():
        red(sq(x))
        return list(sq.last_launch.events) + list(red.last_launch.events)

    def chain_lazy():
        with sk.lazy():
            red(sq(x))
        return red.last_launch.events      # the fused MapReduce's launch

    def chain_fused():
        mr1(x)
        return mr1.last_launch.events

    t_chain, t_lazy, t_one = time_events_interleaved([chain, chain_lazy, chain_fused],
                                                     reps=reps)
    rows.append({"case": "Map(f) then Reduce (sk.lazy)", "skelpy_us": t_lazy * 1e6,
                 "mapreduce_us": t_one * 1e6, "skelpy/mapreduce": t_lazy / t_one,
                 "eager_chain_us": t_chain * 1e6})
    targets.append(("Map then Reduce (lazy) within 1.1x of MapReduce", t_lazy / t_one <= 1.1))

    # -- one-pass argmin vs a min fold ---------------------------------------------------------
    def argmin():
        x.argmin()
        return sk.array.last_skeleton().last_launch.events

    def vmin():
        x.min()
        return sk.array.last_skeleton().last_launch.events

    t_arg, t_min = time_events_interleaved([argmin, vmin], reps=reps)
    rows.append({"case": "x.argmin() (one pass)", "skelpy_us": t_arg * 1e6,
                 "min_fold_us": t_min * 1e6, "argmin/min": t_arg / t_min,
                 "of_copy_bw": 4 * n / t_arg / bw})

    # -- a pending expression as Scan's and AllPairs' input expression ----------------------
    scan = sk.Scan(_add, 0, inclusive=True)

    def scan_fused():
        scan(x * 2.0 + y)
        return scan.last_launch.events

    def scan_unfused():
        z = x * 2.0 + y
        sk.evaluate(z)
        ev = list(sk.array.last_skeleton().last_launch.events)
        scan(z)
        return ev + list(scan.last_launch.events)

    t_sf, t_su = time_events_interleaved([scan_fused, scan_unfused], reps=reps)
    rows.append({"case": "Scan(x*2+y)", "skelpy_us": t_sf * 1e6, "unfused_us": t_su * 1e6,
                 "unfused/fused": t_su / t_sf})
    side = 1024 if gpu else 256
    pts = sk.Matrix(rng.standard_normal((side * 4, 64)).astype(np.float32))
    few = sk.Matrix(rng.standard_normal((16, 64)).astype(np.float32))
    dist = sk.AllPairs(zip=_sqdiff, reduce=_add)

    def ap_fused():                 # k-means-like: many points against few centres
        dist(pts * 0.5 - 1.0, few)
        return dist.last_launch.events

    def ap_unfused():
        z = pts * 0.5 - 1.0
        sk.evaluate(z)
        ev = list(sk.array.last_skeleton().last_launch.events)
        dist(z, few)
        return ev + list(dist.last_launch.events)

    t_af, t_au = time_events_interleaved([ap_fused, ap_unfused], reps=reps)
    rows.append({"case": f"AllPairs(P*0.5-1, C) {side * 4}x16x64", "skelpy_us": t_af * 1e6,
                 "unfused_us": t_au * 1e6, "unfused/fused": t_au / t_af})

    # -- a pending expression read by Stencil at each neighbour ----------------------------
    side = 4096 if gpu else (1024 if args.quick else 2048)
    if args.n:
        side = max(16, int(args.n ** 0.5))
    mx, my = (sk.Matrix(rng.standard_normal((side, side)).astype(np.float32))
              for _ in range(2))
    heat = sk.Stencil(_heat, border="nearest")
    for label, make, nbytes in (("a*x+y", lambda: 0.5 * mx + my, 12),
                                ("x*a", lambda: mx * 0.5, 8)):
        def stencil_fused(make=make):
            heat(make())
            last = sk.array.last_skeleton()
            if last.muscle.name == "skp_stencil":
                return heat.last_launch.events
            # the cost rule computed the expression first: its kernel counts too
            return list(last.last_launch.events) + list(heat.last_launch.events)

        def stencil_unfused(make=make):
            z = make()
            sk.evaluate(z)
            ev = list(sk.array.last_skeleton().last_launch.events)
            heat(z)
            return ev + list(heat.last_launch.events)

        t_stf, t_stu = time_events_interleaved([stencil_fused, stencil_unfused], reps=reps)
        stencil_fused()
        fused_ran = sk.array.last_skeleton().muscle.name == "skp_stencil"
        rows.append({"case": f"Stencil(heat)({label}) {side}^2", "skelpy_us": t_stf * 1e6,
                     "unfused_us": t_stu * 1e6, "unfused/fused": t_stu / t_stf,
                     "of_copy_bw": nbytes * side * side / t_stf / bw, "fused": int(fused_ran)})

    # -- a 6-operation chain -------------------------------------------------------------------
    def chain6():
        sk.evaluate(((x * 1.5 + y) * x - 2.0) / (y + 3.0))
        return sk.array.last_skeleton().last_launch.events

    # its copy bound measured alongside (the run's first copy figure moves with the load on a
    # CPU device): a copy of 6n bytes reads and writes what the chain's 2 reads and 1 write do
    src = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 6 * n)
    dst = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 6 * n)
    cl.enqueue_fill_buffer(q, src, np.uint8(1), 0, 6 * n).wait()
    t6, t_copy = time_events_interleaved(
        [chain6, lambda: cl.enqueue_copy(q, dst, src, byte_count=6 * n)], reps=reps)
    frac = t_copy / t6
    rows.append({"case": "((x*1.5+y)*x-2)/(y+3)", "skelpy_us": t6 * 1e6,
                 "GB/s": 12 * n / t6 / 1e9, "of_copy_bw": frac, "copy_us": t_copy * 1e6})
    targets.append(("6-op chain >= 90% of copy bandwidth", frac >= 0.9))
    columns = list(dict.fromkeys(k for r in rows for k in r))
    print_table(rows, columns, title="fused kernels (kernel time)")

    loop, more = _small_loop(rt, hx, hy, calls)
    targets += more
    _report(targets)
    data = {"n": n, "copy_bandwidth_GBs": bw / 1e9, "cases": rows, "loop": loop,
            "cupy": cp is not None, "targets": [{"target": t, "met": ok} for t, ok in targets]}
    path = write_json("fusion", dev.name, data)
    print(f"wrote {path}")
    return data


if __name__ == "__main__":
    main()
