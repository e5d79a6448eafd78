"""Calibration microbenchmarks: one device's cost-model coefficients in a few seconds.

After [Pöppl 2014] App. B.1 and §5: transfers of growing size per direction, from pageable
and from pinned host memory, fitted as ``t = l + x/b`` (§5.1; [Gaspar 2022] §6.5 measures
both kinds of host memory); an empty kernel for the launch and per-work-item base cost
(§5.2); write-only, copy, strided, gathered, constant and neighbourhood kernels for the
memory classes (§5.5); register-only loops for each operation class, charged as the time
beyond the write-only kernel (§5.4); a copy with arithmetic for the overlap of the two.

Sizes adapt to the device: each kernel runs at growing sizes until it takes
:data:`TARGET_S` (or reaches the largest size), and its per-item cost is the slope between
the last two sizes, so a slow simulator and a fast GPU both finish quickly. Kernel times
come from profiling events; launch latencies and transfers from the wall clock, as a caller
waits for them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from ..containers import Vector, as_container
from .terms import MEMORY_CLASSES, OP_CLASSES, DeviceCoefficients, Line

KERNEL_FILE = Path(__file__).resolve().parent.parent / "kernels" / "calibrate.cl"
TARGET_S = 2e-3            # grow a kernel's size until one run takes this long
MIN_ITEMS = 1 << 12
MAX_ITEMS = 1 << 24
TRANSFER_SIZES = (1 << 12, 1 << 16, 1 << 20, 1 << 23, 1 << 25)
OPS = 64                   # iterations of the arithmetic loops (calibrate.cl's SKC_OPS)
STRIDE = 16                # elements between strided reads (64 bytes of float)
NB_COLS = 1024             # row length of the neighbourhood kernel's matrix
REPEATS = 5


def _median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def fit_line(xs: Sequence[float], ts: Sequence[float]) -> Line:
    """``t = latency + per_unit * x`` minimising the *relative* error (small transfers
    matter as much as large ones), both terms non-negative."""
    x = np.asarray(xs, float)
    t = np.asarray(ts, float)
    w = 1.0 / np.maximum(t, 1e-12)
    a = np.stack([w, w * x], axis=1)
    (lat, per), *_ = np.linalg.lstsq(a, w * t, rcond=None)
    if per <= 0:                                   # noise: keep the latency, no slope
        return Line(max(float(np.min(t)), 0.0), 0.0)
    if lat < 0:                                    # through the origin instead
        per = float(np.sum(w * w * x * t) / np.sum(w * w * x * x))
        return Line(0.0, max(per, 0.0))
    return Line(float(lat), float(per))


# What one work-item of each calibration kernel does, in the model's units (bytes for
# read_byte/write_byte, accesses or operations otherwise); "item" is the base cost. The index
# arithmetic of the strided, constant and neighbourhood reads is left in their class: it
# comes with every such read in a skeleton too, and the compiler changes it beyond counting
# (a guess of 45 integer operations per neighbourhood pulled the integer cost to half).
KERNEL_WORK: dict[str, dict[str, float]] = {
    "empty": {"item": 1},
    "write": {"item": 1, "write_byte": 4},
    "copy": {"item": 1, "read_byte": 4, "write_byte": 4},
    "strided": {"item": 1, "strided": 1, "write_byte": 4},
    "gather": {"item": 1, "read_byte": 4, "gathered": 1, "write_byte": 4},
    "constant": {"item": 1, "constant": 1, "write_byte": 4},
    "neighbours": {"item": 1, "read_byte": 4, "cached": 8, "write_byte": 4},
    "alu": {"item": 1, "write_byte": 4, "alu32": 2 * OPS + 3},
    "int": {"item": 1, "write_byte": 4, "int": 2 * OPS + 3},
    "div": {"item": 1, "write_byte": 4, "div": OPS, "alu32": OPS + 3},
    "math": {"item": 1, "write_byte": 4, "math": 2 * OPS, "alu32": 2 * OPS + 3},
    "alu64": {"item": 1, "write_byte": 8, "alu64": 2 * OPS + 3},
}
COLUMNS = ("item", *MEMORY_CLASSES, *OP_CLASSES)


def fit_classes(slopes: dict[str, float]) -> dict[str, float]:
    """Per-unit costs of every class from the kernels' per-item slopes: non-negative least
    squares on relative errors. A difference of two noisy slopes can be negative (on a busy
    CPU a copy can time faster than a write); the joint fit spreads that noise over the
    classes instead of clipping one of them to zero."""
    from sklearn.linear_model import LinearRegression

    names = [k for k in KERNEL_WORK if k in slopes and slopes[k] > 0]
    cols = [c for c in COLUMNS if any(c in KERNEL_WORK[k] for k in names)]
    a = np.array([[KERNEL_WORK[k].get(c, 0.0) for c in cols] for k in names])
    t = np.array([slopes[k] for k in names])
    w = 1.0 / t
    scale = np.maximum(np.abs(a * w[:, None]).max(axis=0), 1e-30)  # columns of one size
    reg = LinearRegression(positive=True, fit_intercept=False)
    reg.fit(a * w[:, None] / scale, np.ones_like(t))
    coef = dict.fromkeys(COLUMNS, 0.0)
    coef.update({c: float(v) for c, v in zip(cols, reg.coef_ / scale, strict=True)})
    return coef


class Calibrator:
    """Runs the microbenchmarks on one runtime (a :class:`skelpy.runtime.Runtime`)."""

    def __init__(self, rt: _rt.Runtime, *, quick: bool = False,
                 progress: Callable[[str], None] | None = None):
        self.rt = rt
        self.queue = rt.queue
        self.ctx = rt.context
        self.quick = quick
        self.progress = progress or (lambda _msg: None)
        dev = rt.device.cl_device
        self.max_items = int(min(MAX_ITEMS >> (2 if quick else 0),
                                 dev.max_mem_alloc_size // 8,
                                 dev.global_mem_size // 64))
        self._programs: dict[str, cl.Program] = {}
        self._kernels: dict[tuple[str, str], cl.Kernel] = {}

    # -- building -------------------------------------------------------------------------
    def program(self, ctype: str) -> cl.Program:
        prg = self._programs.get(ctype)
        if prg is None:
            opts = [f"-DSKC_T={ctype}", f"-DSKC_OPS={OPS}"]
            if ctype in ("float", "double"):
                opts.append("-DSKC_FLOAT")
            src = KERNEL_FILE.read_text()
            if ctype == "double":
                src = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + src
            prg = self._programs[ctype] = self.rt.build(src, opts)
        return prg

    def kernel(self, ctype: str, name: str) -> cl.Kernel:
        k = self._kernels.get((ctype, name))
        if k is None:
            k = self._kernels[(ctype, name)] = cl.Kernel(self.program(ctype), name)
        return k

    def buffer(self, nbytes: int) -> cl.Buffer:
        return cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, max(int(nbytes), 4))

    # -- timing ---------------------------------------------------------------------------
    def event_seconds(self, kernel: cl.Kernel, n: int, args: Sequence) -> float:
        """The fastest of :data:`REPEATS` runs: other work on the machine only ever adds
        time, so the minimum is the estimate least disturbed by it."""
        kernel.set_args(*args)
        times = []
        for _ in range(REPEATS):
            ev = cl.enqueue_nd_range_kernel(self.queue, kernel, (n,), None)
            ev.wait()
            times.append(_rt.event_seconds(ev))
        return min(times)

    def slope(self, name: str, ctype: str, make_args: Callable[[int], Sequence],
              itemsize: int = 4) -> Line:
        """Per-kernel intercept and per-item slope of kernel ``name``: a line through its
        event times at the last three sizes of a growing sequence."""
        kernel = self.kernel(ctype, name)
        cap = max(MIN_ITEMS * 4, self.max_items * 4 // max(itemsize, 4))
        n = MIN_ITEMS
        args = make_args(n)
        self.event_seconds(kernel, n, args)                  # first run: compile, page in
        points = [(n, self.event_seconds(kernel, n, args))]
        while points[-1][1] < TARGET_S and n * 4 <= cap:
            n *= 4
            points.append((n, self.event_seconds(kernel, n, make_args(n))))
        if len(points) < 3:
            for m in (n // 4, n // 16):
                if m >= 1 and all(m != p[0] for p in points):
                    points.insert(0, (m, self.event_seconds(kernel, m, make_args(m))))
        xs, ts = zip(*points[-3:], strict=True)
        return fit_line(xs, ts)

    # -- transfers ------------------------------------------------------------------------
    def transfers(self) -> dict[str, Line]:
        """Transfers as containers make them: an upload into a buffer from the runtime's
        pool (``Storage.device_buffer``), a download into a new host array
        (``Storage.sync_host``: its pages are touched first by the copy, which costs as
        much as the copy itself on some systems); and the same from pinned memory."""
        sizes = [s for s in TRANSFER_SIZES if s <= self.max_items * 4]
        if self.quick:
            sizes = sizes[:4]
        big = sizes[-1]
        pageable = np.ones(big // 4, np.float32)
        pinned_buf = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR,
                               big)
        pinned, _ev = cl.enqueue_map_buffer(self.queue, pinned_buf,
                                            cl.map_flags.READ | cl.map_flags.WRITE, 0,
                                            (big // 4,), np.float32)
        pinned[:] = 1.0
        out = {}
        try:
            for name, host in (("", pageable), ("_pinned", pinned)):
                for direction in ("h2d", "d2h"):
                    xs, ts = [], []
                    for size in sizes:
                        xs.append(float(size))
                        ts.append(self._copy_seconds(host[: size // 4], direction == "h2d",
                                                     7 if size < (1 << 22) else 3,
                                                     pinned=bool(name)))
                    out[direction + name] = fit_line(xs, ts)
        finally:
            pinned.base.release(self.queue)          # unmap, then free
            pinned_buf.release()
        return out

    def _copy_seconds(self, host: np.ndarray, to_device: bool, reps: int,
                      pinned: bool) -> float:
        """The median of ``reps`` blocking copies of ``host``'s bytes (after one more that
        warms up). From pageable memory they go through a container, as a call's do (an
        upload into a pool buffer; a download into a new array), so that the Python work
        around them counts too; pinned ones are plain copies."""
        rt = self.rt
        src = rt.allocate(host.nbytes)
        cl.enqueue_copy(self.queue, src, host, is_blocking=True)
        times = []
        for k in range(reps + 1):
            t0 = time.perf_counter()
            if pinned:
                if to_device:
                    cl.enqueue_copy(self.queue, src, host, is_blocking=True)
                else:
                    cl.enqueue_copy(self.queue, host, src, is_blocking=True)
            elif to_device:
                as_container(host).device_buffer(rt)
            else:
                Vector.from_device(src, host.shape, host.dtype, rt).to_numpy()
            if k:
                times.append(time.perf_counter() - t0)
        return _median(times)

    # -- launch ---------------------------------------------------------------------------
    def launch(self) -> Line:
        """The wall-clock cost of a call beyond its kernels' run time: for the first kernel
        and for each further kernel enqueued in the same call."""
        k = self.kernel("float", "skc_empty")
        buf = self.buffer(4)
        k.set_args(buf)
        cl.enqueue_nd_range_kernel(self.queue, k, (1,), None).wait()
        one, two, body = [], [], []
        for _ in range(15 if self.quick else 40):
            t0 = time.perf_counter()
            e1 = cl.enqueue_nd_range_kernel(self.queue, k, (1,), None)
            e1.wait()
            one.append(time.perf_counter() - t0 - _rt.event_seconds(e1))
            body.append(_rt.event_seconds(e1))
            t0 = time.perf_counter()
            e1 = cl.enqueue_nd_range_kernel(self.queue, k, (1,), None)
            e2 = cl.enqueue_nd_range_kernel(self.queue, k, (1,), None)
            e2.wait()
            two.append(time.perf_counter() - t0 - _rt.event_seconds(e1)
                       - _rt.event_seconds(e2))
        first = max(_median(one), 0.0)
        self.kernel_fixed = _median(body)
        return Line(first, max(_median(two) - first, 0.0))

    # -- kernels --------------------------------------------------------------------------
    def kernels(self, has_fp64: bool) -> tuple[Line, dict[str, float], dict[str, float],
                                                float, dict[str, float]]:
        rng = np.random.default_rng(1)
        f = np.float32
        bufs: dict[int, tuple] = {}

        def pair(n: int):
            got = bufs.get(n)
            if got is None:
                bufs.clear()
                a, b = self.buffer(4 * n), self.buffer(4 * n)
                cl.enqueue_copy(self.queue, a, np.ones(n, f))
                got = bufs[n] = (a, b)
            return got

        idx_cache: dict[int, cl.Buffer] = {}

        def index(n: int) -> cl.Buffer:
            b = idx_cache.get(n)
            if b is None:
                idx_cache.clear()
                b = idx_cache[n] = self.buffer(4 * n)
                cl.enqueue_copy(self.queue, b, rng.permutation(n).astype(np.uint32))
            return b

        pad_cache: dict[int, cl.Buffer] = {}

        def padded(n: int) -> cl.Buffer:
            b = pad_cache.get(n)
            if b is None:
                pad_cache.clear()
                size = n + 2 * NB_COLS + 2
                b = pad_cache[n] = self.buffer(4 * size)
                cl.enqueue_copy(self.queue, b, np.ones(size, f))
            return b

        self.progress("kernel base cost")
        empty = self.slope("skc_empty", "float", lambda n: (pair(n)[1],))
        s = {"empty": empty.per_unit}
        for name, args in (
                ("write", lambda n: (pair(n)[1],)),
                ("copy", lambda n: pair(n)),
                ("strided", lambda n: (*pair(n), np.uint64(STRIDE),
                                       np.uint64(_pow2_below(n) - 1))),
                ("gather", lambda n: (pair(n)[0], index(n), pair(n)[1])),
                ("constant", lambda n: pair(n)),
                ("neighbours", lambda n: (padded(n), pair(n)[1], np.int64(NB_COLS)))):
            self.progress(f"memory: {name}")
            s[name] = self.slope("skc_" + name, "float", args).per_unit
        one, two = f(1.0001), f(0.5)
        for name, ctype, a, b in (("alu", "float", one, two), ("div", "float", one, two),
                                  ("math", "float", one, two),
                                  ("int", "int", np.int32(3), np.int32(1))):
            self.progress(f"operations: {name}")
            kname = "skc_alu" if name == "int" else "skc_" + name
            s[name] = self.slope(kname, ctype, lambda n, a=a, b=b: (pair(n)[1], a, b)).per_unit
        if has_fp64:
            self.progress("operations: fp64")
            s["alu64"] = self.slope(
                "skc_alu", "double",
                lambda n: (self.buffer(8 * n), np.float64(1.0001), np.float64(0.5)),
                itemsize=8).per_unit
        coef = fit_classes(s)
        memory = {k: coef[k] for k in MEMORY_CLASSES}
        ops = {k: coef[k] for k in OP_CLASSES}
        if not has_fp64:
            ops["alu64"] = 4 * ops["alu32"]      # never used: fp64 calls cannot run there
        # a kernel's own fixed time: what one work-item of the empty kernel takes (the line
        # through large sizes extrapolates it badly: noise at the far end)
        work_item = Line(getattr(self, "kernel_fixed", empty.latency), coef["item"])
        self.progress("overlap of memory and arithmetic")
        overlap = self._overlap(pair, memory, ops["alu32"], coef["item"])
        return work_item, memory, ops, overlap, s

    def _overlap(self, pair, memory: dict[str, float], alu: float, base: float) -> float:
        """The share of the smaller of memory and arithmetic time that adds to the larger,
        from a copy with about as much arithmetic as memory time."""
        mem = 4 * (memory["read_byte"] + memory["write_byte"])
        if alu <= 0 or mem <= 0:
            return 0.0
        iters = int(min(max(round(mem / (2 * alu)), 1), 256))
        args = lambda n: (*pair(n), np.float32(1.0001), np.float32(0.5), np.int32(iters))  # noqa: E731
        mixed = self.slope("skc_mixed", "float", args).per_unit - base
        ops = 2 * iters * alu
        hi, lo = max(mem, ops), min(mem, ops)
        return float(min(max((mixed - hi) / lo, 0.0), 1.0)) if lo > 0 else 0.0

    # -- all ------------------------------------------------------------------------------
    def run(self) -> DeviceCoefficients:
        t0 = time.perf_counter()
        dev = self.rt.device
        self.progress("transfers")
        tr = self.transfers()
        self.progress("launch latency")
        launch = self.launch()
        work_item, memory, ops, overlap, slopes = self.kernels(dev.has_fp64)
        assert set(memory) == set(MEMORY_CLASSES)
        return DeviceCoefficients(
            device_key=dev.key, device_name=dev.name, kind=dev.kind,
            h2d=tr["h2d"], d2h=tr["d2h"], h2d_pinned=tr["h2d_pinned"],
            d2h_pinned=tr["d2h_pinned"], launch=launch, work_item=work_item,
            memory=memory, ops=ops, overlap=overlap,
            seconds_taken=time.perf_counter() - t0, created=time.time(),
            extra={f"slope_{k}": v for k, v in slopes.items()} | {"quick": int(self.quick)})


def _pow2_below(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def calibrate(rt: _rt.Runtime, *, quick: bool = False,
              progress: Callable[[str], None] | None = None) -> DeviceCoefficients:
    """Measure the coefficients of ``rt``'s device (a few seconds)."""
    return Calibrator(rt, quick=quick, progress=progress).run()
