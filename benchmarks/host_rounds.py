"""The host's share of a stencil loop on a device group: per halo-exchange round, the Python
time, the OpenCL calls (enqueues, argument sets, flushes, event waits, maps) and any call that
blocks the host (issue 13: on 2 x H200 heat 4096^2 the devices' queues stalled 21-41% of their
span in some runs, waiting for the host to enqueue the next pass).

    POCL_DEVICES="pthread pthread" python -m benchmarks.host_rounds [--size 64] \
        [--iterations 32] [--params t=4,k=8,route=copy] [--reps 31]
    mpiexec -n 2 python -m benchmarks.host_rounds --group mpi:cpu      # the same under MPI

Each call of ``Stencil(heat)(m, iterations=n)`` runs at n and 2n (interleaved, after warm-up
calls): the difference divided by the extra rounds is what one steady-state round costs the
host, free of the call's fixed cost. A round is k steps: m = k/t passes of t steps on every
device, then the halo exchange. ``host_us``: the CPU time of the calling thread during the
call, the enqueues only (no finish), median of the repeats, without the counting wrappers
(CPU time, not the clock: on a shared machine the clock also counts the devices' and other
jobs' threads preempting the host; ``wall_us`` is the clock); ``api_us``: of that, the CPU
time inside OpenCL calls (from a second, counted run); ``calls``: OpenCL calls by kind.
``blocking``: calls that wait for a device (finish, event waits, blocking copies and maps):
0 per round is the goal, so that the host runs ahead of the devices. (pyopencl's own waits
when a pending host copy's event is collected are not seen here.)
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager

import numpy as np
import pyopencl as cl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import skelpy as sk  # noqa: E402
from skelpy import runtime  # noqa: E402

# (owner, attribute) of the OpenCL calls counted; the functions are looked up on the module
# at call time by skelpy, so replacing the module attribute sees every call
FUNCTIONS = ("enqueue_nd_range_kernel", "enqueue_copy", "enqueue_barrier", "enqueue_marker",
             "enqueue_fill_buffer", "enqueue_map_buffer", "wait_for_events")
METHODS = ((cl.CommandQueue, "flush"), (cl.CommandQueue, "finish"), (cl.Event, "wait"),
           (cl.Kernel, "set_arg"), (cl.Kernel, "_set_arg_buf"), (cl.Event, "get_info"),
           (cl.UserEvent, "set_status"))
# objects made (counted where skelpy makes them through the module: a new kernel copy,
# buffer, queue or user event per round would show here)
MADE = ("Kernel", "Buffer", "CommandQueue", "UserEvent")
BLOCKING = ("CommandQueue.finish", "Event.wait", "wait_for_events", "blocking enqueue_copy",
            "blocking enqueue_map_buffer")


def _touches_host(label: str, args: tuple) -> bool:
    """Whether a copy or map can block: it reads or writes host memory (a copy between two
    buffers never blocks, whatever ``is_blocking`` says)."""
    if label != "enqueue_copy":
        return True
    return not all(isinstance(a, cl.MemoryObjectHolder) for a in args[1:3])


class ApiCounter:
    """Counts (and times) the OpenCL calls made through pyopencl while installed: those of
    the thread that installed it, and apart (``thread: ...``) those of other threads."""

    def __init__(self):
        self.calls: Counter = Counter()
        self.seconds = 0.0

    def blocking(self) -> int:
        return sum(self.calls[k] for k in BLOCKING)

    def reset(self) -> None:
        self.calls.clear()
        self.seconds = 0.0

    @contextmanager
    def installed(self):
        saved = []
        clock = time.thread_time
        calls = self.calls

        main = threading.get_ident()

        def wrap(fn, label, blocking_kw=None):
            def counted(*args, **kwargs):
                if threading.get_ident() != main:   # a helper thread's (MPI progress)
                    calls["thread: " + label] += 1
                    return fn(*args, **kwargs)
                calls[label] += 1
                if blocking_kw and kwargs.get(blocking_kw, True) and _touches_host(label, args):
                    calls["blocking " + label] += 1
                t0 = clock()
                try:
                    return fn(*args, **kwargs)
                finally:
                    self.seconds += clock() - t0
            return counted

        for name in FUNCTIONS:
            fn = getattr(cl, name)
            saved.append((cl, name, fn))
            blocking_kw = "is_blocking" if name in ("enqueue_copy", "enqueue_map_buffer") \
                else None
            setattr(cl, name, wrap(fn, name, blocking_kw))
        for owner, name in METHODS:
            fn = owner.__dict__[name] if name in owner.__dict__ else getattr(owner, name)
            saved.append((owner, name, fn))
            setattr(owner, name, wrap(fn, f"{owner.__name__}.{name}"))
        for name in MADE:
            fn = getattr(cl, name)
            saved.append((cl, name, fn))
            setattr(cl, name, wrap(fn, f"{name}()"))
        try:
            yield self
        finally:
            for owner, name, fn in reversed(saved):
                setattr(owner, name, fn)


def _heat(u):
    return u[0, 0] + 0.1 * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4 * u[0, 0])


def _exchange():
    group = runtime.current().group
    return group.exchange if group is not None else None


def _finish_all() -> None:
    rt = runtime.current()
    for r in (rt.group.runtimes if rt.group is not None else (rt,)):
        if r is not None:                 # (None: a device of another MPI process)
            r.finish()
    ex = _exchange()
    if ex is not None:
        ex.finish()


def parse_params(text: str) -> dict:
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, _, value = item.partition("=")
        out[key.strip()] = int(value) if value.strip().isdigit() else value.strip()
    return out


def measure(size: int, iterations: int, params: dict, reps: int) -> dict:
    """Per steady-state round of ``Stencil(heat)`` on the group in use (see the module
    docstring)."""
    grid = np.random.default_rng(0).random((size, size), dtype=np.float32)
    m = sk.Matrix(grid)
    st = sk.Stencil(_heat, border="nearest")
    counts = (iterations, 4 * iterations)

    def call(n):
        return st(m, iterations=n, params=dict(params)) if params else st(m, iterations=n)

    for n in counts * 12:                    # builds, tuning, pinned staging, kernel copies
        call(n)
        _finish_all()
    k = int(getattr(st.last_launch, "k", None) or 1)
    host = {n: [] for n in counts}
    wall = {n: [] for n in counts}
    for _ in range(max(1, reps)):
        for n in counts:                     # interleaved
            _finish_all()
            c0, t0 = time.thread_time(), time.perf_counter()
            out = call(n)
            wall[n].append(time.perf_counter() - t0)
            host[n].append(time.thread_time() - c0)
            _finish_all()
            del out
    counter = ApiCounter()
    calls, api = {}, {n: [] for n in counts}
    with counter.installed():
        for _ in range(max(1, reps // 3)):
            for n in counts:
                _finish_all()
                counter.reset()
                ex = _exchange()
                before = getattr(ex, "collectives", 0)
                out = call(n)
                calls[n] = Counter(counter.calls)
                if hasattr(ex, "collectives"):    # MPI: status collectives (Allgather)
                    calls[n]["MPI status collective"] = ex.collectives - before
                api[n].append(counter.seconds)
                _finish_all()
                del out
    api = {n: float(np.median(v)) for n, v in api.items()}
    rounds = {n: -(-n // k) for n in counts}
    extra = rounds[counts[1]] - rounds[counts[0]]
    devices = runtime.current().group.size
    per_round = {name: (calls[counts[1]][name] - calls[counts[0]][name]) / extra
                 for name in set(calls[counts[0]]) | set(calls[counts[1]])}
    per_round = {name: v for name, v in sorted(per_round.items()) if v}
    h = {n: float(np.median(host[n])) for n in counts}
    w = {n: float(np.median(wall[n])) for n in counts}
    return {
        "size": size, "iterations": counts, "k": k, "t": st.last_launch.params.get("t"),
        "devices": devices, "params": dict(params),
        "host_us_per_round": (h[counts[1]] - h[counts[0]]) / extra * 1e6,
        "host_us_per_call": {n: h[n] * 1e6 for n in counts},
        "wall_us_per_round": (w[counts[1]] - w[counts[0]]) / extra * 1e6,
        "api_us_per_round": (api[counts[1]] - api[counts[0]]) / extra * 1e6,
        "calls_per_round": per_round,
        "blocking_per_round": sum(per_round.get(b, 0) for b in BLOCKING),
        "blocking_per_call": {n: sum(calls[n][b] for b in BLOCKING) for n in counts},
        "calls_per_call": {n: dict(sorted(calls[n].items())) for n in counts},
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--group", default="cpu:*")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--iterations", type=int, default=32)
    ap.add_argument("--params", default="t=4,k=8,route=copy",
                    help="the stencil's params on the group ('' for the tuner's choice)")
    ap.add_argument("--reps", type=int, default=31)
    args = ap.parse_args(argv)
    sk.use(args.group)
    row = measure(args.size, args.iterations, parse_params(args.params), args.reps)
    if runtime.current().group is None or 0 in _exchange().local:
        for key, value in row.items():
            print(f"{key}: {value}")
    return row


if __name__ == "__main__":
    main()
