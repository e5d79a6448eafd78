"""Several devices at once (issue 13): the same skeleton calls on 1, 2, ... N devices of one
host, in one run.

    python -m benchmarks.bench_multidev [--quick] [--group gpu:*] [--cases map,reduce,...]
    python -m benchmarks.suite --only multidev [--quick]

Cases (float32): ``map`` (x * 2 + 1) and ``zip`` (saxpy) of n elements, ``reduce`` (sum),
``dot`` (MapReduce), ``scan`` (inclusive sum), ``matmul`` (AllPairs zip/reduce, A and B of
mm x mm), ``heat`` (5-point, ``--iterations`` steps: the tuner picks the halo depth k),
``gauss`` (11x11, one step), ``life`` (Game of Life, ``--iterations`` steps).

Timing. Every call runs once untimed (builds, tuning, the first distribution of its inputs),
then ``--reps`` times; each timed call is followed by a finish of every queue of the group.
Two numbers per call, the minimum over the repeats:

- ``kernel_s``: from profiling events. Devices of a group run at once and their clocks are
  not one clock, so each device's span (its first event's start to its last event's end,
  exchanges and waits for them included) is taken on that device, and the call's time is the
  longest span: the critical path as the devices saw it.
- ``wall_s``: the host's clock around the call and the finish (launch overhead, host-side
  parts of exchanges included); ``enqueue_s``: around the call alone (median), the host's
  time to enqueue it: where it nears ``kernel_s`` the devices waited for the host.

``speedup`` is the one-device time over the group's (kernel and wall); for stencils on a group,
``exchange_fraction`` is the device time of the halo copies (their events) over the summed
device spans, and ``stall_fraction`` the time the devices' compute queues had no kernel
running within their spans (see :func:`exchange_terms`): the cost of the cut. The one-device run uses the group's first device alone
(``sk.use(device)``, not a group): today's path.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import skelpy as sk  # noqa: E402
from benchmarks.common import print_table, write_json  # noqa: E402
from skelpy import runtime  # noqa: E402
from skelpy.runtime import event_seconds  # noqa: E402

CASES = ("map", "zip", "reduce", "dot", "scan", "matmul", "heat", "gauss", "life")
# (n for 1-D cases, mm for matmul, stencil sizes) per scale
SIZES = {"tiny": (1 << 16, 128, (128,)), "quick": (1 << 22, 512, (1024,)),
         "medium": (1 << 26, 4096, (4096,)), "full": (1 << 28, 8192, (4096, 16384))}
GAUSS_SIZE = {"tiny": 128, "quick": 1024, "medium": 4096, "full": 8192}
TARGETS = {"map": 1.9, "zip": 1.9, "reduce": 1.9, "dot": 1.9, "scan": 1.7, "matmul": 1.9,
           "gauss": 1.9, "life": 1.9}


def _heat(u):
    return u[0, 0] + 0.1 * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4 * u[0, 0])


def _life(nb):
    n = (nb[-1, -1] + nb[-1, 0] + nb[-1, 1] + nb[0, -1] + nb[0, 1] + nb[1, -1] + nb[1, 0]
         + nb[1, 1])
    return 1 if (n == 3 or (n == 2 and nb[0, 0] == 1)) else 0


def _add(a, b):
    return a + b


def _mul(a, b):
    return a * b


def make_cases(names, scale: str, iterations: int, rng) -> list[tuple[str, str, Callable]]:
    """(case, size label, make) where make() -> (skeleton, args, kwargs, bytes moved or
    flops, unit) built for the devices in use."""
    n, mm, sizes = SIZES[scale]
    out = []
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    if "map" in names:
        out.append(("map", str(n), lambda: (sk.Map(lambda v: v * 2.0 + 1.0), (sk.Vector(x),),
                                            {}, 8 * n, "GB/s")))
    if "zip" in names:
        out.append(("zip", str(n), lambda: (sk.Zip(lambda a, b, s: s * a + b),
                                            (sk.Vector(x), sk.Vector(y), 2.0), {}, 12 * n,
                                            "GB/s")))
    if "reduce" in names:
        out.append(("reduce", str(n), lambda: (sk.Reduce(_add, 0), (sk.Vector(x),), {}, 4 * n,
                                               "GB/s")))
    if "dot" in names:
        out.append(("dot", str(n), lambda: (sk.MapReduce(_mul, _add, 0),
                                            (sk.Vector(x), sk.Vector(y)), {}, 8 * n, "GB/s")))
    if "scan" in names:
        out.append(("scan", str(n), lambda: (sk.Scan(_add, 0, inclusive=True), (sk.Vector(x),),
                                             {}, 8 * n, "GB/s")))
    if "matmul" in names:
        a = rng.random((mm, mm), dtype=np.float32)
        b = rng.random((mm, mm), dtype=np.float32)
        out.append(("matmul", f"{mm}x{mm}", lambda: (
            sk.AllPairs(zip=_mul, reduce=_add), (sk.Matrix(a), sk.Matrix(b)), {},
            2 * mm ** 3, "GFLOP/s")))
    for size in sizes:
        grid = rng.random((size, size), dtype=np.float32)
        if "heat" in names:
            out.append(("heat", f"{size}x{size}", lambda g=grid: (
                sk.Stencil(_heat, border="nearest"), (sk.Matrix(g),),
                {"iterations": iterations}, 8 * g.size * iterations, "GB/s")))
        if "life" in names:
            cells = (grid < 0.3).astype(np.uint8)
            out.append(("life", f"{size}x{size}", lambda c=cells: (
                sk.Stencil(_life, border="wrap", out_dtype=np.uint8), (sk.Matrix(c),),
                {"iterations": iterations}, 2 * c.size * iterations, "GB/s")))
    if "gauss" in names:
        g = GAUSS_SIZE[scale]
        img = rng.random((g, g), dtype=np.float32)
        from benchmarks.bench_stencil import gauss11 as gauss
        out.append(("gauss", f"{g}x{g}", lambda: (sk.Stencil(gauss, border="reflect"),
                                                  (sk.Matrix(img),), {}, 8 * img.size,
                                                  "GB/s")))
    return out


def _finish_all() -> None:
    rt = runtime.current()
    for r in (rt.group.runtimes if rt.group is not None else (rt,)):
        r.finish()


def _queue_key(ev) -> int:
    try:
        return ev.command_queue.int_ptr
    except Exception:  # noqa: BLE001 - an event without a queue (user events)
        return 0


def _spans(events) -> dict[int, float]:
    """Seconds from the first start to the last end of the events, per queue."""
    by_queue: dict[int, list] = {}
    for ev in events:
        by_queue.setdefault(_queue_key(ev), []).append(ev)
    spans = {}
    for q, evs in by_queue.items():
        try:
            start = min(e.profile.start for e in evs)
            end = max(e.profile.end for e in evs)
            spans[q] = (end - start) * 1e-9
        except Exception:  # noqa: BLE001 - an event without profiling info: its own time
            spans[q] = sum(event_seconds(e) for e in evs)
    return spans


def measure(skel, args, kwargs, reps: int) -> dict:
    """The call's best kernel span (longest per device) and wall time, and (on a group) the
    fraction of device time spent exchanging."""
    result = skel(*args, **kwargs)             # builds, tuning, the first distribution
    _finish_all()
    del result
    best_k = best_w = float("inf")
    exch = None
    enqueue = []
    for _ in range(max(1, reps)):
        t0 = time.perf_counter()
        result = skel(*args, **kwargs)
        t1 = time.perf_counter()
        _finish_all()
        wall = time.perf_counter() - t0
        enqueue.append(t1 - t0)
        launch = skel.last_launch
        spans = _spans(launch.events)
        k = max(spans.values()) if spans else 0.0
        if k < best_k:
            best_k = k
            xev = getattr(launch, "exchange_events", None)
            if xev is not None:
                exch = exchange_terms(launch.events, xev)
        best_w = min(best_w, wall)
        params = dict(launch.params)
        k_depth = getattr(launch, "k", None)
        del result
    # the host's time to make the call (enqueue, no finish), median: near kernel_s, the
    # devices waited for the host
    row = {"kernel_s": best_k, "wall_s": best_w, "enqueue_s": float(np.median(enqueue)),
           "params": params}
    if k_depth is not None:
        row["k"] = k_depth
    if exch is not None:
        row.update(exch)
    return row


def exchange_terms(events, exchange_events) -> dict:
    """The cost of the cut in a stencil call on a group, as fractions of the devices' time
    (spans summed over the devices, so a fraction is per step, on average):

    - ``exchange_fraction``: device time of the halo copies (their events, on the copy
      queues) over the compute queues' spans: what the exchange costs where it is not hidden;
    - ``stall_fraction``: time a compute queue had no kernel running within its span (waiting
      for halos, for the host to enqueue, or for launch gaps): 0 when the exchange is hidden
      behind the interior and the host keeps up.
    """
    spans = _spans(events)
    total = max(sum(spans.values()), 1e-12)
    busy = sum(event_seconds(e) for e in events)
    moved = sum(event_seconds(e) for e in exchange_events)
    return {"exchange_fraction": moved / total,
            "stall_fraction": min(max(1.0 - busy / total, 0.0), 1.0),
            "exchanges": len(exchange_events)}


def _group_of(spec) -> list:
    devs = sk.use(spec)
    return devs if isinstance(devs, list) else [devs]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a CPU, CI)")
    ap.add_argument("--scale", choices=sorted(SIZES), default=None)
    ap.add_argument("--group", default=None,
                    help="the devices (default: every GPU if there are two or more, else "
                         "every CPU device)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-devices", type=int, default=0, help="0: the whole group")
    ap.add_argument("--stencil-params", default="",
                    help="parameters of the stencil cases on the group, e.g. 'route=copy' or "
                         "'k=16,t=4' (default: the tuner's and the cost rule's choice)")
    args = ap.parse_args(argv)
    group_params = {}
    for item in filter(None, (x.strip() for x in args.stencil_params.split(","))):
        key, _, value = item.partition("=")
        group_params[key.strip()] = int(value) if value.strip().isdigit() else value.strip()
    scale = args.scale or ("quick" if args.quick else "full")
    names = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = set(names) - set(CASES)
    if unknown:
        raise SystemExit(f"unknown cases {sorted(unknown)}; known: {', '.join(CASES)}")
    spec = args.group
    if spec is None:
        gpus = [d for d in sk.devices() if d.kind == "gpu"]
        spec = "gpu:*" if len(gpus) >= 2 else "cpu:*"
    group = _group_of(spec)
    if args.max_devices:
        group = group[:args.max_devices]
    counts = sorted({1, 2, len(group)} & set(range(1, len(group) + 1)))
    rng = np.random.default_rng(0)
    cases = make_cases(names, scale, args.iterations, rng)
    rows = []
    for case, size, make in cases:
        base = None
        for count in counts:
            sk.use(group[0] if count == 1 else group[:count])
            skel, cargs, kwargs, work, unit = make()
            if count > 1 and group_params and case in ("heat", "life", "gauss"):
                kwargs = {**kwargs, "params": dict(group_params)}
            try:
                r = measure(skel, cargs, kwargs, args.reps)
            except sk.SkelpyError as exc:
                rows.append({"case": case, "size": size, "devices": count,
                             "error": f"{type(exc).__name__}: {exc}"})
                continue
            scale_by = 1e9
            r.update(case=case, size=size, devices=count,
                     rate=work / r["kernel_s"] / scale_by if r["kernel_s"] else None,
                     unit=unit)
            if count == 1:
                base = r
            elif base is not None:
                r["speedup_kernel"] = base["kernel_s"] / r["kernel_s"] if r["kernel_s"] else None
                r["speedup_wall"] = base["wall_s"] / r["wall_s"]
                target = TARGETS.get(case)
                if case == "heat":
                    target = 1.9 if size.startswith("16384") else 1.5
                elif case == "life" and not size.startswith("16384"):
                    target = None             # the target is at 16384^2 only
                if target is not None and count == 2 and scale == "full":
                    r["target"] = target
            rows.append(r)
            del skel, cargs
    sk.use(group[0])
    data = {"scale": scale, "group": [d.name for d in group], "iterations": args.iterations,
            "stencil_params": group_params,
            "reps": args.reps, "rows": rows,
            "timing": "kernel_s: longest per-device event span; wall_s: host clock to finish"}
    print_table([{k: v for k, v in r.items() if k not in ("params",)} for r in rows],
                ["case", "size", "devices", "kernel_s", "wall_s", "enqueue_s", "speedup_kernel",
                 "speedup_wall", "rate", "unit", "k", "exchange_fraction", "stall_fraction",
                 "error"])
    path = write_json("multidev", group[0].name, data)
    print(f"written to {path}")
    return data


if __name__ == "__main__":
    main()
