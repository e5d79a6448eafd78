"""Helpers shared by the benchmark scripts: timing from profiling events, the device's copy
bandwidth (the yardstick for memory-bound skeletons), JSON results and a plain-text table.

Kernel times always come from OpenCL profiling events (``end - start``), never from wall
clocks, so that launch overhead and Python do not blur comparisons between kernels; ratios
are taken between numbers measured in the same run on the same device.
"""

from __future__ import annotations

import json
import platform
import re
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyopencl as cl

from skelpy.runtime import event_seconds as runtime_event_seconds

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def event_seconds(events) -> float:
    """Device seconds of one event or a list of events (summed)."""
    if isinstance(events, cl.Event):
        events = [events]
    return sum(runtime_event_seconds(e) for e in events)


def time_events(run: Callable[[], object], *, reps: int = 10, warmup: int = 2,
                reduce: str = "min") -> float:
    """Device seconds of ``run()``, which enqueues work and returns its event(s).

    ``run`` is called ``warmup`` times untimed (builds, caches), then ``reps`` times; the
    minimum (default) or median of the summed event times is returned."""
    for _ in range(warmup):
        event_seconds(run())
    times = [event_seconds(run()) for _ in range(max(1, reps))]
    return min(times) if reduce == "min" else statistics.median(times)


def time_events_interleaved(runs: Sequence[Callable[[], object]], *, reps: int = 10,
                            warmup: int = 2) -> list[float]:
    """Device seconds of each of ``runs`` (as :func:`time_events`), measured in alternating
    rounds: a change of the machine's state during the measurement (a CPU device's first
    touches of fresh pages, other jobs' load) falls on every run alike, so their ratio holds
    where back-to-back blocks of repeats give one of them the slow start."""
    for _ in range(warmup):
        for run in runs:
            event_seconds(run())
    best = [float("inf")] * len(runs)
    for _ in range(max(1, reps)):
        for i, run in enumerate(runs):
            best[i] = min(best[i], event_seconds(run()))
    return best


def time_wall(run: Callable[[], object], *, reps: int = 5, warmup: int = 1) -> float:
    """Best wall-clock seconds of ``run()`` (for NumPy and end-to-end timings)."""
    for _ in range(warmup):
        run()
    best = float("inf")
    for _ in range(max(1, reps)):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def copy_bandwidth(queue: cl.CommandQueue, nbytes: int = 256 << 20, *, reps: int = 10) -> float:
    """Bytes per second of a device-to-device buffer copy, counting bytes read plus written.

    This is the reference a memory-bound kernel is compared with ("x% of copy bandwidth"):
    the best the device's memory system does on a plain streaming job."""
    ctx = queue.context
    nbytes = int(min(nbytes, queue.device.max_mem_alloc_size // 2))
    nbytes -= nbytes % 64
    src = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, nbytes)
    dst = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, nbytes)
    cl.enqueue_fill_buffer(queue, src, np.uint8(1), 0, nbytes).wait()
    secs = time_events(lambda: cl.enqueue_copy(queue, dst, src, byte_count=nbytes),
                       reps=reps, warmup=2)
    src.release()
    dst.release()
    return 2.0 * nbytes / secs


def device_slug(name: str) -> str:
    """A file-name-safe short form of a device name."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()
    return slug[:60] or "device"


def write_json(name: str, device_name: str, data: dict, *, directory: Path | None = None) -> Path:
    """Write ``data`` (plus host and device info) to ``results/<name>-<device>.json``."""
    directory = directory or RESULTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{device_slug(device_name)}.json"
    payload = {"benchmark": name, "device": device_name, "host": platform.node(),
               "python": platform.python_version(), "numpy": np.__version__,
               "pyopencl": cl.VERSION_TEXT, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
               **data}
    path.write_text(json.dumps(payload, indent=2, default=_json_default) + "\n")
    return path


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def format_table(rows: Sequence[dict], columns: Sequence[str] | None = None) -> str:
    """Rows of dicts as an aligned plain-text table (floats with 4 significant digits)."""
    if not rows:
        return "(no rows)"
    columns = list(columns or rows[0].keys())

    def cell(v) -> str:
        if isinstance(v, float | np.floating):
            return f"{v:.4g}"
        return "" if v is None else str(v)

    cells = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join([line, sep, *body])


def print_table(rows: Sequence[dict], columns: Sequence[str] | None = None,
                title: str | None = None) -> None:
    if title:
        print(f"\n{title}")
    print(format_table(rows, columns))
