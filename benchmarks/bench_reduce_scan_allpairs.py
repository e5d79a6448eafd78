"""Reduce, MapReduce (dot product), Scan and AllPairs (matrix multiply) against pyopencl's
ReductionKernel / GenericScanKernel / InclusiveScanKernel, a hand-written tiled OpenCL matrix
multiply, and NumPy, on one device.

Kernel times come from OpenCL profiling events (every kernel of a multi-kernel operation is
summed); NumPy times are wall clock. Memory-bound results are also given as a fraction of the
device's measured copy bandwidth (bytes moved by the operation per second over the bytes read
plus written per second of a buffer copy); the targets on a GPU are Reduce >= 90%, Scan >= 70%,
and AllPairs fp32 matmul >= 15 TFLOP/s at 4096^2.

    python benchmarks/bench_reduce_scan_allpairs.py [--quick] [--tune] [--device gpu]

``--tune`` also sweeps a few launch parameters of each skelpy kernel and reports the best
point next to the default one. Results go to ``benchmarks/results/reduce_scan_allpairs-<device>.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
from pyopencl.reduction import ReductionKernel
from pyopencl.scan import ExclusiveScanKernel, InclusiveScanKernel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

import skelpy as sk  # noqa: E402
from skelpy import runtime  # noqa: E402

TILED_MATMUL = r"""
#define TS 16
/* The textbook tiled matrix multiply: C = A @ B, all n x n, n a multiple of TS. */
__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void matmul_tiled(const int n, __global const float* A, __global const float* B,
                  __global float* C)
{
    const int lr = get_local_id(1), lc = get_local_id(0);
    const int r = get_group_id(1) * TS + lr, c = get_group_id(0) * TS + lc;
    __local float As[TS][TS], Bs[TS][TS];
    float acc = 0.0f;
    for (int t = 0; t < n; t += TS) {
        As[lr][lc] = A[r * n + t + lc];
        Bs[lr][lc] = B[(t + lr) * n + c];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; ++k)
            acc += As[lr][k] * Bs[k][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[r * n + c] = acc;
}
"""


class _Recorder:
    """Stands in for a pyopencl kernel and keeps the events of its launches."""

    def __init__(self, kernel, sink: list):
        self._kernel = kernel
        self._sink = sink

    def __call__(self, *args, **kwargs):
        ev = self._kernel(*args, **kwargs)
        self._sink.append(ev)
        return ev

    def __getattr__(self, name):
        return getattr(self._kernel, name)


def record_kernels(obj, attrs: list[str], sink: list) -> None:
    """Make the pyopencl helper ``obj`` record the events of all its kernels into ``sink``."""
    for a in attrs:
        info = getattr(obj, a, None)
        if info is not None and hasattr(info, "kernel"):
            setattr(obj, a, dataclasses.replace(info, kernel=_Recorder(info.kernel, sink)))


def time_pyopencl(call, sink: list, reps: int) -> float:
    best = float("inf")
    for i in range(reps + 1):
        sink.clear()
        call()
        t = common.event_seconds(list(sink))
        if i:
            best = min(best, t)
    return best


def time_skelpy(skel, call, reps: int) -> tuple[float, dict]:
    best, params = float("inf"), {}
    for i in range(reps + 1):
        out = call()
        if hasattr(out, "device_buffer"):
            runtime.current().finish()
        t = skel.last_launch.kernel_time
        if i and t < best:
            best, params = t, dict(skel.last_launch.params)
    return best, params


def best_point(skel, call, grid: list[dict], reps: int) -> tuple[float, dict]:
    best, where = float("inf"), {}
    for p in grid:
        try:
            t, _ = time_skelpy(skel, lambda p=p: call(p), reps)
        except sk.SkelpyError:
            continue
        if t < best:
            best, where = t, p
    return best, where


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    ap.add_argument("--tune", action="store_true", help="also sweep launch parameters")
    ap.add_argument("--device", default=None, help="device spec for sk.use (gpu, cpu, name)")
    ap.add_argument("--out", default=None, help="folder for the JSON result")
    ap.add_argument("--n", type=int, default=None, help="elements for Reduce/Scan")
    ap.add_argument("--mm", type=int, default=None, help="matrix size for AllPairs")
    args = ap.parse_args(argv)

    if args.device:
        sk.use(args.device)
    rt = runtime.current()
    dev = rt.device
    gpu = dev.kind == "gpu"
    ctx, queue = rt.context, rt.queue
    reps = 3 if args.quick else 10
    n = args.n or ((1 << 18) if args.quick else ((1 << 26) if gpu else (1 << 23)))
    nmm = args.mm or (128 if args.quick else (4096 if gpu else 512))
    print(f"device: {dev.name} ({dev.kind}, {dev.platform}); n = {n}, matmul {nmm}^2")

    bw = common.copy_bandwidth(queue, nbytes=min(256 << 20, 8 * n), reps=reps)
    print(f"copy bandwidth: {bw / 1e9:.1f} GB/s (read + write)")
    rng = np.random.default_rng(0)
    rows: list[dict] = []
    results: dict = {"copy_bandwidth_GBs": bw / 1e9, "n": n, "matmul_n": nmm, "rows": rows}

    def add(op, impl, secs, nbytes=None, flops=None, params=None):
        row = {"op": op, "impl": impl, "us": secs * 1e6}
        if nbytes is not None:
            row["GB/s"] = nbytes / secs / 1e9
            row["% copy"] = 100.0 * nbytes / secs / bw
        if flops is not None:
            row["GFLOP/s"] = flops / secs / 1e9
        if params:
            row["params"] = ",".join(f"{k}={v}" for k, v in params.items())
        rows.append(row)
        return row

    # -- Reduce: sum of float32 -------------------------------------------------------------
    x = rng.random(n, dtype=np.float32)
    vx = sk.Vector(x)
    vx.device_buffer(rt)
    ssum = sk.Reduce(lambda a, b: a + b, 0)
    t, p = time_skelpy(ssum, lambda: ssum(vx), reps)
    add("reduce sum f32", "skelpy", t, 4 * n, params=p)
    if args.tune:
        grid = [dict(wg=w, items=i, groups=g, stages=s)
                for w, i, g, s in itertools.product((128, 256, 512) if gpu else (16, 64),
                                                    (4, 8, 16, 32), (256, 1024, 4096) if gpu
                                                    else (4, 16, 64), (1,))]
        t, p = best_point(ssum, lambda p: ssum(vx, params=p), grid, max(2, reps // 2))
        add("reduce sum f32", "skelpy tuned", t, 4 * n, params=p)
    ordered = sk.Reduce(lambda a, b: a + b, 0, commutative=False)
    t, p = time_skelpy(ordered, lambda: ordered(vx), reps)
    add("reduce sum f32", "skelpy ordered", t, 4 * n, params=p)
    if args.tune:
        grid = [dict(wg=w, items=i, groups=g, stages=1)
                for w, i, g in itertools.product((128, 256, 512) if gpu else (16, 64),
                                                 (8, 16, 32), (256, 1024) if gpu else (16, 64))]
        t, p = best_point(ordered, lambda p: ordered(vx, params=p), grid, max(2, reps // 2))
        add("reduce sum f32", "skelpy ordered tuned", t, 4 * n, params=p)
    xa = cla.to_device(queue, x)
    rk = ReductionKernel(ctx, np.float32, neutral="0", reduce_expr="a+b",
                         arguments="__global const float *x", map_expr="x[i]")
    sink: list = []
    record_kernels(rk, ["stage_1_inf", "stage_2_inf"], sink)
    add("reduce sum f32", "pyopencl ReductionKernel", time_pyopencl(lambda: rk(xa), sink, reps),
        4 * n)
    add("reduce sum f32", "numpy", common.time_wall(lambda: x.sum(), reps=reps), 4 * n)
    exact = math.fsum(x.astype(np.float64))
    results["reduce_f32_rel_error"] = abs(float(ssum(vx)) - exact) / exact
    results["reduce_f32_rel_error_numpy"] = abs(float(x.sum()) - exact) / exact

    # -- MapReduce: dot product ---------------------------------------------------------------
    y = rng.random(n, dtype=np.float32)
    vy = sk.Vector(y)
    vy.device_buffer(rt)
    dot = sk.MapReduce(lambda a, b: a * b, lambda a, b: a + b, 0)
    t, p = time_skelpy(dot, lambda: dot(vx, vy), reps)
    add("dot f32", "skelpy MapReduce", t, 8 * n, params=p)
    ya = cla.to_device(queue, y)
    rkd = ReductionKernel(ctx, np.float32, neutral="0", reduce_expr="a+b",
                          arguments="__global const float *x, __global const float *y",
                          map_expr="x[i]*y[i]")
    record_kernels(rkd, ["stage_1_inf", "stage_2_inf"], sink)
    add("dot f32", "pyopencl ReductionKernel", time_pyopencl(lambda: rkd(xa, ya), sink, reps),
        8 * n)
    add("dot f32", "numpy", common.time_wall(lambda: np.dot(x, y), reps=reps), 8 * n)

    # -- Scan: exclusive and inclusive prefix sums of int32 -----------------------------------
    xi = rng.integers(0, 100, n).astype(np.int32)
    vi = sk.Vector(xi)
    vi.device_buffer(rt)
    for inclusive in (False, True):
        name = "scan " + ("inclusive" if inclusive else "exclusive") + " i32"
        # int32 sums, as pyopencl's kernels below (np.cumsum's default would be int64)
        scan = sk.Scan(lambda a, b: a + b, 0, inclusive=inclusive, dtype=np.int32)
        t, p = time_skelpy(scan, lambda: scan(vi), reps)
        add(name, "skelpy", t, 8 * n, params=p)
        other = "levels" if p.get("method") == "lookback" else "lookback"
        t, p = time_skelpy(scan, lambda: scan(vi, params={**p, "method": other}), reps)
        add(name, f"skelpy {other}", t, 8 * n, params=p)
        if args.tune:
            grid = [dict(wg=w, items=i, method=m)
                    for w, i, m in itertools.product((128, 256, 512) if gpu else (32, 64, 128),
                                                     (8, 16, 32), ("lookback", "levels"))]
            t, p = best_point(scan, lambda p: scan(vi, params=p), grid, max(2, reps // 2))
            add(name, "skelpy tuned", t, 8 * n, params=p)
        ia = cla.to_device(queue, xi)
        oa = cla.empty_like(ia)
        if inclusive:
            knl = InclusiveScanKernel(ctx, np.int32, "a+b", "0")
        else:   # a GenericScanKernel
            knl = ExclusiveScanKernel(ctx, np.int32, "a+b", "0")
        record_kernels(knl, ["first_level_scan_info", "second_level_scan_info",
                             "final_update_info"], sink)
        label = "pyopencl " + ("InclusiveScanKernel" if inclusive else "ExclusiveScanKernel")
        add(name, label, time_pyopencl(lambda: knl(ia, oa), sink, reps), 8 * n)
        add(name, "numpy", common.time_wall(lambda: np.cumsum(xi), reps=reps), 8 * n)

    # -- Scan of float32: the row trees and (look-back) compensated carries of float sums -------
    name = "scan inclusive f32"
    fscan = sk.Scan(lambda a, b: a + b, 0, inclusive=True)
    t, p = time_skelpy(fscan, lambda: fscan(vx), reps)
    add(name, "skelpy", t, 8 * n, params=p)
    other = "levels" if p.get("method") == "lookback" else "lookback"
    t, p = time_skelpy(fscan, lambda: fscan(vx, params={**p, "method": other}), reps)
    add(name, f"skelpy {other}", t, 8 * n, params=p)
    fa, fo = cla.to_device(queue, x), cla.empty(queue, (n,), np.float32)
    fknl = InclusiveScanKernel(ctx, np.float32, "a+b", "0")
    record_kernels(fknl, ["first_level_scan_info", "second_level_scan_info", "final_update_info"],
                   sink)
    add(name, "pyopencl InclusiveScanKernel", time_pyopencl(lambda: fknl(fa, fo), sink, reps),
        8 * n)
    add(name, "numpy", common.time_wall(lambda: np.cumsum(x), reps=reps), 8 * n)
    last = float(fscan(vx).to_numpy()[-1])
    results["scan_f32_last_rel_error"] = abs(last - exact) / exact
    results["scan_f32_last_rel_error_numpy_cumsum"] = abs(float(np.cumsum(x)[-1]) - exact) / exact

    # -- AllPairs: matrix multiply ---------------------------------------------------------------
    A = rng.standard_normal((nmm, nmm), dtype=np.float32)
    B = rng.standard_normal((nmm, nmm), dtype=np.float32)
    BT = np.ascontiguousarray(B.T)
    mA, mBT = sk.Matrix(A), sk.Matrix(BT)
    mA.device_buffer(rt)
    mBT.device_buffer(rt)
    flops = 2.0 * nmm ** 3
    mm = sk.AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b)
    t, p = time_skelpy(mm, lambda: mm(mA, mBT), reps)
    add("matmul f32", "skelpy AllPairs", t, flops=flops, params=p)
    C = mm(mA, mBT).to_numpy()
    ref = A @ B
    results["matmul_max_rel_error"] = float(np.max(np.abs(C - ref)) / np.max(np.abs(ref)))
    if args.tune:
        grid = [dict(tm=a, tn=b, tk=k, rm=r, rn=c)
                for a, b, k, r, c in (
                    [(128, 128, 16, 8, 8), (128, 128, 8, 8, 8), (64, 64, 16, 8, 8),
                     (128, 64, 16, 8, 8), (64, 128, 16, 8, 8), (128, 128, 32, 8, 8),
                     (64, 64, 16, 4, 4), (128, 128, 16, 8, 4), (64, 64, 32, 4, 8)]
                    if gpu else
                    [(32, 32, 16, 4, 4), (64, 64, 16, 8, 8), (32, 32, 8, 8, 8),
                     (16, 16, 16, 4, 4), (64, 32, 16, 8, 4)])]
        t, p = best_point(mm, lambda p: mm(mA, mBT, params=p), grid, max(2, reps // 2))
        add("matmul f32", "skelpy AllPairs tuned", t, flops=flops, params=p)
    if nmm % 16 == 0:
        prg = cl.Program(ctx, TILED_MATMUL).build()
        k = cl.Kernel(prg, "matmul_tiled")
        bA, bB = cla.to_device(queue, A), cla.to_device(queue, B)
        bC = cla.empty(queue, (nmm, nmm), np.float32)
        k.set_args(np.int32(nmm), bA.data, bB.data, bC.data)
        t = common.time_events(lambda: cl.enqueue_nd_range_kernel(queue, k, (nmm, nmm),
                                                                  (16, 16)), reps=reps)
        add("matmul f32", "hand-written tiled OpenCL", t, flops=flops)
    add("matmul f32", "numpy", common.time_wall(lambda: A @ B, reps=max(2, reps // 3)),
        flops=flops)

    # -- ratios -----------------------------------------------------------------------------------
    by_op: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_op.setdefault(r["op"], {})[r["impl"]] = r
    for impls in by_op.values():
        base = next((v for k, v in impls.items() if k.startswith(("pyopencl", "hand-written"))),
                    None)
        for r in impls.values():
            if base is not None:
                r["vs baseline"] = base["us"] / r["us"]
    common.print_table(rows, ["op", "impl", "us", "GB/s", "% copy", "GFLOP/s", "vs baseline",
                              "params"], title="kernel times (vs baseline: >1 means faster)")
    print(f"matmul max relative error vs NumPy: {results['matmul_max_rel_error']:.2e}")
    print(f"float32 sum relative error vs math.fsum: skelpy {results['reduce_f32_rel_error']:.1e},"
          f" NumPy {results['reduce_f32_rel_error_numpy']:.1e}; last prefix of the scan: skelpy "
          f"{results['scan_f32_last_rel_error']:.1e}, np.cumsum "
          f"{results['scan_f32_last_rel_error_numpy_cumsum']:.1e}")
    path = common.write_json("reduce_scan_allpairs", dev.name, results,
                             directory=Path(args.out) if args.out else None)
    print(f"wrote {path}")
    return results


if __name__ == "__main__":
    main()
