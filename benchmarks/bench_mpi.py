"""Skeletons under MPI against one rank alone and against the in-process device group (opt-in;
not part of ``skelpy bench``). On a host with two GPUs:

    mpiexec -n 2 python -m benchmarks.bench_mpi            # P ranks x 1 GPU vs 1 GPU alone
    python -m benchmarks.bench_mpi --group "gpu:*"          # the in-process group, same cases
    ... [--quick] [--iterations 100] [--cases heat,reduce,...] [--out benchmarks/results/....json]

Cases (issue 14; ``--cases`` picks by key): ``heat`` 5-point at 16384^2 and 4096^2 with
iterations, ``gauss`` 11x11 at 8192^2, ``allpairs`` matmul 8192^2, ``reduce`` (sum) of 2^28
floats, ``dot`` (MapReduce) and ``scan`` (inclusive sum) of 2^28 floats, and ``fixed``: Reduce,
dot and Scan of 2^10 floats, where the per-call cost of the small collectives is all there is;
``--quick`` takes small sizes (a check that it runs, e.g. on PoCL). Times are wall clock from a barrier to a barrier around the whole
call on every rank, the result complete on the devices (the slowest rank counts), best of
``--reps`` (and their median); the one-rank time is the same call on rank 0's device alone while the others wait.
Inputs are built from each rank's own rows (``from_local``), so no scatter is timed.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

import skelpy as sk
from skelpy import runtime
from skelpy.containers.distributions import split

RESULTS = Path(__file__).resolve().parent / "results"


def heat(nb):
    return nb[0, 0] + 0.1 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


def gauss11(nb):
    s = 0.0
    for i in range(-5, 6):
        for j in range(-5, 6):
            s += nb[i, j] * (1.0 / 121)
    return s


CASES = ("heat", "gauss", "allpairs", "reduce", "dot", "scan", "fixed")


def cases(quick: bool, iterations: int):
    """(key, name, input shapes, run(inputs) -> result, work units for a rate)."""
    n1, n2, g, ap, red = (1024, 512, 512, 512, 1 << 22) if quick else \
        (16384, 4096, 8192, 8192, 1 << 28)
    step = sk.Stencil(heat, shape=1, border="nearest")
    blur = sk.Stencil(gauss11, border="reflect")
    mm = sk.AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b)
    add = sk.Reduce(lambda a, b: a + b, identity=0)
    dot = sk.MapReduce(lambda a, b: a * b, lambda a, b: a + b, identity=0)
    scan = sk.Scan(lambda a, b: a + b, identity=0, inclusive=True)
    lg, small = red.bit_length() - 1, 1 << 10
    return [
        ("heat", f"heat {n1}^2 x{iterations}", [(n1, n1)],
         lambda m: step(m, iterations=iterations), n1 * n1 * iterations),
        ("heat", f"heat {n2}^2 x{iterations}", [(n2, n2)],
         lambda m: step(m, iterations=iterations), n2 * n2 * iterations),
        ("gauss", f"gaussian 11x11 {g}^2", [(g, g)], lambda m: blur(m), g * g),
        ("allpairs", f"allpairs matmul {ap}^2", [(ap, ap), (ap, ap)], lambda a, b: mm(a, b),
         2 * ap ** 3),
        ("reduce", f"reduce 2^{lg}", [(red,)], lambda v: add(v), red),
        ("dot", f"dot 2^{lg}", [(red,), (red,)], lambda a, b: dot(a, b), red),
        ("scan", f"scan 2^{lg}", [(red,)], lambda v: scan(v), red),
        ("fixed", "fixed cost: reduce 2^10", [(small,)], lambda v: add(v), small),
        ("fixed", "fixed cost: dot 2^10", [(small,), (small,)], lambda a, b: dot(a, b), small),
        ("fixed", "fixed cost: scan 2^10", [(small,)], lambda v: scan(v), small),
    ]


def rows_of(shape, lo, hi, seed):
    """Rows [lo, hi) of the case's input (the same numbers whoever makes them)."""
    rng = np.random.default_rng([seed, lo])
    return rng.random((hi - lo, *shape[1:]), dtype=np.float32)


def complete(result) -> None:
    """Wait until ``result`` is computed on every device of this process."""
    rt = runtime.current()
    group = rt.group
    if group is not None and group.exchange is not None:
        group.exchange.finish()
    for r in (group.runtimes if group is not None else [rt]):
        if r is not None:
            r.finish()


def timed(run, inputs, reps, barrier) -> tuple[float, float]:
    """(best, median) seconds of ``run(*inputs)`` over ``reps`` calls after a first one."""
    times = []
    for k in range(reps + 1):                       # the first call builds and tunes
        barrier()
        t0 = time.perf_counter()
        complete(run(*inputs))
        barrier()
        if k:
            times.append(time.perf_counter() - t0)
    return min(times), float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--group", help="an in-process device group instead of MPI ('gpu:*')")
    ap.add_argument("--kind", default="", help="mpi device kind: gpu or cpu")
    ap.add_argument("--cases", default=",".join(CASES), help="keys: " + ",".join(CASES))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = []
    if args.group:
        sk.use(args.group)
        ranks, rank, barrier = len(sk.current_devices()), 0, (lambda: None)
    else:
        sk.use("mpi:" + args.kind if args.kind else "mpi")
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        ranks, rank, barrier = comm.size, comm.rank, comm.Barrier
    mine = runtime.current().device
    keys = set(args.cases.split(","))
    for key, name, shapes, run, work in cases(args.quick, args.iterations):
        if key not in keys:
            continue
        inputs = []
        for i, shape in enumerate(shapes):
            cls = sk.Vector if len(shape) == 1 else sk.Matrix
            if args.group:
                inputs.append(cls(rows_of(shape, 0, shape[0], i)))
            else:
                lo, hi = split(shape[0], ranks)[rank]
                inputs.append(cls.from_local(rows_of(shape, lo, hi, i)))
        reps = args.reps * 10 if key == "fixed" else args.reps    # microseconds: more
        t_group, t_median = timed(run, inputs, reps, barrier)
        whole = [np.asarray(c) for c in inputs]          # gathered on every rank
        t_one = None
        spec = args.group or ("mpi:" + args.kind if args.kind else "mpi")
        if rank == 0:
            sk.use(mine)
            alone = [type(c)(w) for c, w in zip(inputs, whole)]
            t_one = timed(run, alone, reps, lambda: None)[0]
            sk.use(spec)
        barrier()
        row = {"case": name, "ranks": ranks, "seconds": t_group, "median_seconds": t_median,
               "one_device_seconds": t_one, "work": work}
        if t_one:
            row["speedup"] = t_one / t_group
            row["efficiency"] = row["speedup"] / ranks
        rows.append(row)
        if rank == 0:
            print(f"{name:28s} {ranks} {'devices' if args.group else 'ranks'}: "
                  f"{t_group * 1e3:9.2f} ms (median {t_median * 1e3:.2f})   "
                  f"1 device: {t_one * 1e3:9.2f} ms   "
                  f"speedup {row['speedup']:.2f}x", flush=True)
    if rank == 0:
        doc = {"schema": "skelpy-bench-mpi/1", "mode": "group" if args.group else "mpi",
               "device": mine.name, "host": platform.node(), "ranks": ranks,
               "iterations": args.iterations, "quick": args.quick, "rows": rows}
        out = args.out or RESULTS / (f"mpi-{doc['mode']}-{ranks}-"
                                     + "".join(c if c.isalnum() else "-"
                                               for c in mine.name.lower()) + ".json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1))
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
