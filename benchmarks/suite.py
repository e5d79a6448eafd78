"""The whole benchmark suite in one run, within a time budget: ``skelpy bench`` / ``make bench``.

    python -m benchmarks.suite [--budget-minutes 10] [--quick] [--only map,stencil,...]

Parts (each a separate process, so that a part that outruns the budget can be stopped and
one part's device state cannot colour the next one's timings):

    map                   Map and Zip vs a hand-written kernel (same parameters) and NumPy
    reduce_scan_allpairs  Reduce, dot, Scan, matmul vs pyopencl's kernels, tiled OpenCL, NumPy
    stencil               Game of Life, heat, Gaussian 5x5/11x11, Canny vs hand-written OpenCL,
                          scipy.ndimage and cupyx.scipy.ndimage
    extras                pyopencl ElementwiseKernel for Map/Zip; CuPy for Map/Zip/Reduce/Scan/
                          matmul when CuPy is importable (a CUDA GPU)
    tuning                every benchmark with tuning off (defaults), model, online and a
                          sampled exhaustive sweep: tuned vs default
    tuner_eval            [Cummins 2018]'s tuner evaluation (ch. 7) (opt-in: --only tuner_eval)
    temporal              iterated stencils in passes of t steps vs single steps, GCell-steps/s
                          beside the copy bound (opt-in: --only temporal; bench_temporal.py)
    borders               each border mode's default single step against nearest's, heat,
                          3x3 and 5x5 Gaussians and a 5x5 LoG, tuning off and model (opt-in:
                          --only borders; bench_borders.py)
    sequence              stencil sequences fused into one kernel vs staged (Canny: Gaussian ->
                          Sobel -> NMS), bitwise checked (opt-in: --only sequence;
                          bench_sequence.py)
    fusion                array expressions fused into one kernel vs hand-written, MapReduce
                          and CuPy (opt-in: --only fusion; bench_fusion.py)
    multidev              Map, Zip, Reduce, dot, Scan, matmul, heat, Gaussian, Life on 1 vs
                          2 (vs N) devices of one host: speedups, exchange fraction. It runs
                          by itself when the group in use has more than one device
                          (``--device "gpu:*"``, ``SKELPY_DEVICE="cpu:*"``, or no device
                          named on a host with two or more GPUs: every GPU), on that group;
                          the other parts then run on its first device. Else opt-in
                          (``--only multidev``; bench_multidev.py)

Each part gets a share of the budget and picks its sizes (tiny < quick < medium < full) from
that share; a part still running at its (cumulative) deadline is stopped, and parts that no
longer fit are recorded as skipped. The parts' results are merged into one document per device,
``benchmarks/results/<device-slug>.json``: the device, its copy bandwidth measured in this run,
one row per benchmark and size (skelpy's kernel time, every alternative's time and the speedup
``alternative / skelpy``, GB/s or GFLOP/s and the fraction of the copy bandwidth), tuned vs
default, and the targets of the earlier issues. ``benchmarks/report.py`` turns the documents
into ``benchmarks/RESULTS.md``.

By default every part runs on a fresh, empty tuning store (``--store user`` keeps yours), so
that "skelpy" means what a fresh install gets and the tuning part shows what tuning adds.
With ``--only``, the other parts keep their results from the device's previous document
(``--fresh`` drops them). The parts' raw results stay in the document, so
``python -m benchmarks.suite --remerge FILE...`` rebuilds it after a change to the merging.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
SCHEMA = "skelpy-bench-suite/1"

PARTS = ("map", "reduce_scan_allpairs", "stencil", "extras", "tuning", "tuner_eval",
         "temporal", "borders", "sequence", "fusion", "multidev")
DEFAULT_PARTS = ("map", "reduce_scan_allpairs", "stencil", "extras", "tuning")
ALIASES = {"zip": "map", "reduce": "reduce_scan_allpairs", "scan": "reduce_scan_allpairs",
           "allpairs": "reduce_scan_allpairs", "matmul": "reduce_scan_allpairs",
           "rsa": "reduce_scan_allpairs", "stencils": "stencil", "tune": "tuning",
           "elementwise": "extras", "cupy": "extras"}
# Share of the budget per part (relative weights).
WEIGHTS = {"map": 1.0, "reduce_scan_allpairs": 2.0, "stencil": 4.0, "extras": 1.0,
           "tuning": 2.0, "tuner_eval": 4.0, "temporal": 2.0, "borders": 1.0, "sequence": 1.0,
           "fusion": 1.0,
           "multidev": 2.0}
SCALES = ("tiny", "quick", "medium", "full")
# Rough seconds per part and scale on the reference machines (a 2-core PoCL CPU with a cold
# kernel cache, measured; the GPU's are guesses); a part takes the largest scale whose
# estimate fits its share. The tuning part and tuner_eval are time-boxed themselves, so their
# estimate is the least time they need.
EST_SECONDS = {
    "cpu": {"map": (4, 8, 15, 30), "reduce_scan_allpairs": (6, 12, 30, 70),
            "stencil": (10, 25, 50, 200), "extras": (4, 6, 12, 30),
            "tuning": (10, 40, 90, 150), "tuner_eval": (40, 240, 480, 1200),
            "temporal": (15, 50, 150, 400), "borders": (10, 30, 60, 120),
            "sequence": (30, 90, 200, 400), "fusion": (30, 60, 120, 240),
            "multidev": (20, 60, 120, 300)},
    "gpu": {"map": (4, 8, 15, 30), "reduce_scan_allpairs": (6, 12, 25, 60),
            "stencil": (10, 30, 80, 200), "extras": (4, 6, 10, 20),
            "tuning": (10, 40, 80, 150), "tuner_eval": (40, 240, 480, 1200),
            "temporal": (15, 180, 600, 1800), "borders": (10, 20, 40, 80),
            "sequence": (10, 60, 150, 300), "fusion": (20, 40, 90, 180),
            "multidev": (20, 60, 150, 400)},
}
STENCIL_SET = "game_of_life,heat_5pt,gaussian_5x5,gaussian_11x11,canny"
_now = time.perf_counter      # the suite's clock (tests replace it to spend the budget)


@dataclasses.dataclass(frozen=True)
class Scale:
    """Problem sizes of one scale on one kind of device."""

    name: str
    n: int                  # elements of the 1-D benchmarks
    mm: int                 # matrix size of the matmul (AllPairs)
    sizes: tuple[int, ...]  # stencil matrix sizes (square)
    reps: int


def scale_config(name: str, gpu: bool) -> Scale:
    """Sizes of a scale: GPUs get the issues' sizes (2^26 elements, 4096^2) at full scale."""
    table = {
        "tiny": Scale("tiny", 1 << 16, 64, (64,), 2),
        "quick": Scale("quick", 1 << 20, 128, (256, 512), 3),
        "medium": Scale("medium", 1 << 24 if gpu else 1 << 22, 2048 if gpu else 256,
                        (512, 1024, 2048) if gpu else (512, 1024), 5),
        "full": Scale("full", 1 << 26 if gpu else 1 << 24, 4096 if gpu else 512,
                      (512, 1024, 2048, 4096) if gpu else (512, 1024, 2048), 10),
    }
    return table[name]


def parse_parts(text: str | None) -> list[str]:
    """Part names from ``--only`` (comma list; aliases like zip, scan, matmul allowed)."""
    if not text:
        return list(DEFAULT_PARTS)
    out: list[str] = []
    for raw in text.split(","):
        name = ALIASES.get(raw.strip().lower(), raw.strip().lower())
        if not name:
            continue
        if name not in PARTS:
            raise SystemExit(f"skelpy bench: unknown part {raw!r}; parts: {', '.join(PARTS)}")
        if name not in out:
            out.append(name)
    return [p for p in PARTS if p in out]        # always in the suite's order


def plan(parts: Sequence[str], budget_s: float, kind: str, *, cap: str | None = None,
         fixed: str | None = None) -> list[dict]:
    """Each part's share of the budget, its cumulative deadline (seconds from the start) and
    its scale: the largest whose estimate fits the share (at most ``cap``), or ``fixed``."""
    total_w = sum(WEIGHTS[p] for p in parts) or 1.0
    est = EST_SECONDS["gpu" if kind == "gpu" else "cpu"]
    out, t = [], 0.0
    top = SCALES.index(cap) if cap else len(SCALES) - 1
    for p in parts:
        share = budget_s * WEIGHTS[p] / total_w
        t += share
        if fixed:
            scale = fixed
        else:
            fits = [s for i, s in enumerate(SCALES[:top + 1]) if est[p][i] <= share]
            scale = fits[-1] if fits else SCALES[0]
        out.append({"part": p, "share_s": share, "deadline_s": t, "scale": scale,
                    "min_s": est[p][0] * 0.5})
    return out


def part_argv(part: str, sc: Scale, gpu: bool, seconds: float,
              group: str | None = None) -> list[str]:
    """The command line a part runs with at a scale (its own flags; see each script);
    ``group``: the device group spec of the multidev part."""
    quick = sc.name in ("tiny", "quick")
    if part == "map":
        return (["--quick"] if quick else []) + ["--n", str(sc.n)]
    if part == "reduce_scan_allpairs":
        return ((["--quick"] if quick else []) + ["--n", str(sc.n), "--mm", str(sc.mm)]
                + (["--tune"] if sc.name == "full" and gpu else []))
    if part == "stencil":
        argv = ["--sizes", ",".join(map(str, sc.sizes)), "--reps", str(max(1, sc.reps // 2))]
        if sc.name == "tiny":
            return argv + ["--no-sweep", "--cases", STENCIL_SET]
        if sc.name == "quick":
            return argv + ["--sweep-max-size", str(sc.sizes[0]), "--cases", STENCIL_SET]
        if sc.name == "medium":
            return argv + ["--sweep-max-size", str(sc.sizes[0]),
                           "--cases", STENCIL_SET + ",gaussian_11x11_separable"]
        return argv + (["--cases", "all"] if gpu else
                       ["--sweep-max-size", "1024", "--cases", "all"])
    if part in ("extras", "tuning"):
        return ["--scale", sc.name, "--n", str(sc.n), "--mm", str(sc.mm),
                "--size", str(sc.sizes[0]), "--reps", str(sc.reps),
                "--seconds", f"{max(seconds, 1.0):.1f}"]
    if part == "tuner_eval":
        if sc.name == "tiny":
            return ["--quick", "--sizes", "64", "--limit", "4", "--max-points", "8",
                    "--trees", "4"]
        minutes = f"{max(seconds * 0.7, 10) / 60:.2f}"   # leave time for the analysis
        return (["--quick"] if quick else []) + ["--minutes", minutes]
    if part == "fusion":
        return (["--quick"] if quick else []) + (["--calls", "50"] if sc.name == "tiny" else [])
    if part == "multidev":
        argv = ["--group", group] if group else []
        if sc.name == "tiny":
            return argv + ["--scale", "tiny", "--reps", "2", "--iterations", "4"]
        return argv + ["--scale", sc.name]
    if part == "sequence":
        if sc.name == "tiny":
            return ["--sizes", "64", "--reps", "2", "--cases", "canny"]
        return (["--quick"] if quick else []) + (["--sizes", "512"] if not gpu and quick
                                                 else [])
    if part == "temporal":
        if sc.name == "tiny":
            return ["--quick", "--sizes", "64", "--iterations", "4", "--cases", "heat"]
        return (["--quick"] if quick else []) + ["--budget-seconds", f"{seconds * 0.8:.0f}"]
    if part == "borders":
        if sc.name == "tiny":
            return ["--sizes", "128", "--reps", "2", "--tuning", "off"]
        return ["--quick"] if quick else ([] if sc.name == "full" else ["--sizes", "512,1024,2048"])
    raise ValueError(part)


# -- progress -------------------------------------------------------------------------------------


class Progress:
    """The suite's progress through tqdm: one bar over the time budget (in seconds), with
    the part running and its latest output line after it; lines that stay (a part finished
    or was skipped) are written above the bar.

    On a terminal the bar is redrawn every second; elsewhere (CI logs, make piped to a file)
    tqdm stays silent and one line is printed per part and per skip, so logs stay readable."""

    def __init__(self, budget_s: float, total: int, *, stream=None, quiet: bool = False):
        from tqdm.auto import tqdm

        self.start = time.perf_counter()
        self.budget = budget_s
        self.total = total
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.index = 0
        self.part = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.bar = tqdm(total=max(int(round(budget_s)), 1), unit="s", desc="bench",
                        file=self.stream, disable=True if quiet else None, mininterval=1.0,
                        bar_format="{desc} {bar:20} {elapsed}/" + _mmss(budget_s)
                        + " {postfix}", dynamic_ncols=True)
        self.tty = not self.bar.disable
        self._thread = None
        if self.tty:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def line(self) -> str:
        return f"[{_mmss(self.elapsed())}/{_mmss(self.budget)}] part {self.index}/{self.total} " \
               f"{self.part}"

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                self.bar.n = min(int(self.elapsed()), self.bar.total)
                self.bar.refresh()

    def begin(self, part: str, scale: str, limit_s: float) -> None:
        with self._lock:
            self.index += 1
            self.part = part
            text = f"starting ({scale}, up to {limit_s:.0f} s)"
            if self.tty:
                self.bar.set_postfix_str(f"part {self.index}/{self.total} {part}: {text}")
            elif not self.quiet:
                self.stream.write(f"{self.line()}: {text}\n")
                self.stream.flush()

    def note(self, text: str) -> None:
        text = text.strip()
        if text and self.tty:
            with self._lock:
                self.bar.set_postfix_str(f"part {self.index}/{self.total} {self.part}: "
                                         f"{text[:120]}", refresh=False)

    def message(self, text: str) -> None:
        """A line that stays (a part finished or was skipped)."""
        if self.quiet:
            return
        with self._lock:
            line = f"[{_mmss(self.elapsed())}] {text}"
            if self.tty:
                self.bar.write(line, file=self.stream)
            else:
                self.stream.write(line + "\n")
                self.stream.flush()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.bar.close()


def _mmss(s: float) -> str:
    s = int(max(s, 0))
    return f"{s // 60:d}:{s % 60:02d}"


# -- running a part in a child process ------------------------------------------------------------


def run_part(part: str, argv: list[str], *, dump: Path, parts_dir: Path, env: dict,
             timeout_s: float, log, progress: Progress | None) -> dict:
    """Run one part in a child process, streaming its output into ``log`` and the progress
    line; stop it at ``timeout_s``. Returns the status record (the data is in ``dump``)."""
    cmd = [sys.executable, "-u", "-m", "benchmarks.suite", "--child", part, "--dump", str(dump),
           "--parts-dir", str(parts_dir), "--", *argv]
    log.write(f"\n===== {part}: {' '.join(argv)}\n")
    log.flush()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1,
                            errors="replace")
    tail: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for ln in proc.stdout:
            log.write(ln)
            tail.append(ln.rstrip())
            del tail[:-20]
            if progress is not None:
                progress.note(ln.replace("\r", " "))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    status = "done"
    try:
        rc = proc.wait(timeout=max(timeout_s, 1.0))
    except subprocess.TimeoutExpired:
        proc.kill()            # our own child, by its handle
        rc = proc.wait()
        status = "timeout"
    reader.join(timeout=5)
    log.flush()
    rec = {"status": status, "seconds": time.perf_counter() - t0, "argv": argv,
           "returncode": rc}
    if status == "done" and (rc != 0 or not dump.exists()):
        rec["status"] = "failed"
        rec["error"] = "\n".join(tail[-8:])
    if status == "timeout":
        rec["reason"] = f"still running at its deadline ({timeout_s:.0f} s): stopped"
    return rec


def _child(part: str, dump: Path, parts_dir: Path, argv: list[str]) -> int:
    """In the child process: run the part's ``main(argv)`` and dump what it returned."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(1, str(ROOT / "benchmarks"))
    parts_dir.mkdir(parents=True, exist_ok=True)
    # The parts write their own JSON files too: keep those out of the committed results.
    import benchmarks.common as bcommon
    bcommon.RESULTS_DIR = parts_dir
    with contextlib.suppress(ImportError):
        import common as plain_common  # the name bench_reduce_scan_allpairs imports
        plain_common.RESULTS_DIR = parts_dir
    out = ["--out", str(parts_dir)] if part in ("reduce_scan_allpairs", "stencil",
                                                 "tuner_eval", "temporal",
                                                 "borders", "sequence") else []
    if part == "map":
        from benchmarks import bench_map as mod
        data = mod.main(argv)
    elif part == "reduce_scan_allpairs":
        from benchmarks import bench_reduce_scan_allpairs as mod
        data = mod.main(argv + out)
    elif part == "stencil":
        from benchmarks import bench_stencil as mod
        data = mod.main(argv + out)
    elif part == "tuner_eval":
        from benchmarks import tuner_eval as mod
        rc = mod.main(argv + out)
        files = sorted(parts_dir.glob("tuner_eval_*.json"), key=lambda p: p.stat().st_mtime)
        if not files:
            print(f"tuner_eval returned {rc} and wrote no JSON", file=sys.stderr)
            return 1
        full = json.loads(files[-1].read_text())
        data = {k: full.get(k) for k in ("device", "quick", "sizes", "max_points", "summary",
                                         "scenarios", "kernels", "points", "refused_fraction",
                                         "overhead", "best_method", "default_method",
                                         "notes", "failures", "not_swept", "when")}
    elif part == "temporal":
        from benchmarks import bench_temporal as mod
        data = mod.main(argv + out)
    elif part == "borders":
        from benchmarks import bench_borders as mod
        data = mod.main(argv + out)
    elif part == "sequence":
        from benchmarks import bench_sequence as mod
        data = mod.main(argv + out)
    elif part == "fusion":
        from benchmarks import bench_fusion as mod
        data = mod.main(argv)
    elif part == "multidev":
        from benchmarks import bench_multidev as mod
        data = mod.main(argv)
    elif part == "extras":
        data = part_extras(argv)
    elif part == "tuning":
        data = part_tuning(argv)
    else:
        raise SystemExit(f"unknown part {part}")
    from skelpy import runtime

    dev = runtime.current().device
    payload = {"part": part, "device": dev.name, "device_kind": dev.kind, "argv": argv,
               "data": data}
    dump.write_text(json.dumps(payload, default=_json_default))
    return 0


def _json_default(obj):
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if np is not None and isinstance(obj, np.generic):
        return obj.item()
    if np is not None and isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, set | tuple):
        return list(obj)
    return str(obj)


# -- suite-owned parts: timing helpers ------------------------------------------------------------


def _skel_params(skel) -> dict:
    launches = getattr(skel, "last_launches", None)
    if launches:
        return {str(i): dict(ln.params) for i, ln in enumerate(launches)}
    return dict(skel.last_launch.params) if skel.last_launch is not None else {}


def _time_skel(skel, args: tuple, reps: int, **kw) -> tuple[float, dict]:
    """Min kernel seconds of ``skel(*args)`` over ``reps`` calls after one warm-up call
    (profiling events; results are dropped so the output buffer is recycled)."""
    skel(*args, **kw)
    best = math.inf
    for _ in range(max(1, reps)):
        skel(*args, **kw)
        best = min(best, skel.last_launch.kernel_time)
    return best, _skel_params(skel)


def _common_parser(desc: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=desc)
    ap.add_argument("--scale", default="quick", choices=SCALES)
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--mm", type=int, default=128)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=60.0, help="time box")
    return ap


def _cupy():
    """CuPy if it is importable and sees a CUDA device, else None."""
    try:
        import cupy as cp

        cp.cuda.runtime.getDeviceCount()
        return cp
    except Exception:  # noqa: BLE001 - absent, or no CUDA device
        return None


def _time_cupy(cp, fn, reps: int) -> float:
    fn()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    best = math.inf
    for _ in range(max(1, reps)):
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(start, end) * 1e-3)
    return best


def part_extras(argv=None) -> dict:
    """pyopencl's ElementwiseKernel for Map/Zip, and CuPy for Map/Zip/Reduce/dot/Scan/matmul,
    each timed next to skelpy at the same size in the same process."""
    args = _common_parser(part_extras.__doc__).parse_args(argv)
    import numpy as np
    import pyopencl.array as cla
    from pyopencl.elementwise import ElementwiseKernel

    import skelpy as sk
    from benchmarks.common import time_events
    from skelpy import runtime

    rt = runtime.current()
    ctx, q = rt.context, rt.queue
    n, reps = args.n, args.reps
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    vx, vy = sk.Vector(x), sk.Vector(y)
    rows: list[dict] = []
    size = f"n={n}"

    affine = sk.Map(lambda v: v * 2.0 + 1.0)
    saxpy = sk.Zip(lambda x, y, a: a * x + y)
    t_map, p_map = _time_skel(affine, (vx,), reps)
    t_zip, p_zip = _time_skel(saxpy, (vx, vy, 2.0), reps)
    print(f"skelpy map {t_map * 1e6:.1f} us {p_map}, zip {t_zip * 1e6:.1f} us {p_zip}",
          flush=True)
    xa, ya = cla.to_device(q, x), cla.to_device(q, y)
    oa = cla.empty_like(xa)
    ek_map = ElementwiseKernel(ctx, "const float *a, float *o", "o[i] = a[i] * 2.0f + 1.0f",
                               "skb_map")
    ek_zip = ElementwiseKernel(ctx, "const float *x, const float *y, float *o, const float a",
                               "o[i] = a * x[i] + y[i]", "skb_zip")
    e_map = time_events(lambda: ek_map(xa, oa), reps=reps)
    e_zip = time_events(lambda: ek_zip(xa, ya, oa, np.float32(2.0)), reps=reps)
    print(f"ElementwiseKernel map {e_map * 1e6:.1f} us, zip {e_zip * 1e6:.1f} us", flush=True)
    rows.append({"benchmark": "map", "size": size, "elements": n, "bytes": 8 * n,
                 "skelpy_s": t_map, "skelpy_params": p_map, "alternatives": [
                     {"name": "pyopencl ElementwiseKernel", "kind": "pyopencl",
                      "where": "same device", "seconds": e_map}]})
    rows.append({"benchmark": "zip", "size": size, "elements": n, "bytes": 12 * n,
                 "skelpy_s": t_zip, "skelpy_params": p_zip, "alternatives": [
                     {"name": "pyopencl ElementwiseKernel", "kind": "pyopencl",
                      "where": "same device", "seconds": e_zip}]})
    cp = _cupy()
    notes = []
    if cp is None:
        notes.append("CuPy not importable or no CUDA device: CuPy comparisons skipped")
    else:
        cx, cy = cp.asarray(x), cp.asarray(y)
        # CuPy as a user writes it: array expressions (x * 2 + 1 runs as two kernels)
        rows[0]["alternatives"].append({"name": "CuPy x * 2 + 1", "kind": "cupy",
                                        "where": "CUDA GPU",
                                        "seconds": _time_cupy(cp, lambda: cx * 2 + 1, reps)})
        rows[1]["alternatives"].append({"name": "CuPy 2 * x + y", "kind": "cupy",
                                        "where": "CUDA GPU",
                                        "seconds": _time_cupy(cp, lambda: 2 * cx + cy, reps)})
        ssum = sk.Reduce(lambda a, b: a + b, 0)
        dot = sk.MapReduce(lambda a, b: a * b, lambda a, b: a + b, 0)
        t, p = _time_skel(ssum, (vx,), reps)
        rows.append({"benchmark": "reduce_sum", "size": size, "elements": n, "bytes": 4 * n,
                     "skelpy_s": t, "skelpy_params": p, "alternatives": [
                         {"name": "CuPy x.sum()", "kind": "cupy", "where": "CUDA GPU",
                          "seconds": _time_cupy(cp, lambda: cx.sum(), reps)}]})
        t, p = _time_skel(dot, (vx, vy), reps)
        rows.append({"benchmark": "dot", "size": size, "elements": n, "bytes": 8 * n,
                     "skelpy_s": t, "skelpy_params": p, "alternatives": [
                         {"name": "CuPy cupy.dot", "kind": "cupy", "where": "CUDA GPU",
                          "seconds": _time_cupy(cp, lambda: cp.dot(cx, cy), reps)}]})
        xi = rng.integers(0, 100, n).astype(np.int32)
        ci = cp.asarray(xi)
        scan = sk.Scan(lambda a, b: a + b, 0, inclusive=True)
        t, p = _time_skel(scan, (sk.Vector(xi),), reps)
        rows.append({"benchmark": "scan_inclusive", "size": size, "elements": n,
                     "bytes": 8 * n, "skelpy_s": t, "skelpy_params": p, "alternatives": [
                         {"name": "CuPy cupy.cumsum", "kind": "cupy", "where": "CUDA GPU",
                          "seconds": _time_cupy(cp, lambda: cp.cumsum(ci), reps)}]})
        mm = args.mm
        A = rng.standard_normal((mm, mm), dtype=np.float32)
        B = rng.standard_normal((mm, mm), dtype=np.float32)
        ap = sk.AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b)
        t, p = _time_skel(ap, (sk.Matrix(A), sk.Matrix(np.ascontiguousarray(B.T))), reps)
        cA, cB = cp.asarray(A), cp.asarray(B)
        rows.append({"benchmark": "matmul", "size": f"{mm}x{mm}x{mm}", "elements": mm * mm,
                     "flops": 2.0 * mm ** 3, "skelpy_s": t, "skelpy_params": p,
                     "alternatives": [{"name": "CuPy A @ B (cuBLAS)", "kind": "cupy",
                                       "where": "CUDA GPU",
                                       "seconds": _time_cupy(cp, lambda: cA @ cB, reps)}]})
        print("CuPy: " + ", ".join(f"{r['benchmark']} {r['alternatives'][-1]['seconds']:.3g} s"
                                   for r in rows), flush=True)
    return {"rows": rows, "notes": notes, "n": n, "mm": args.mm}


# -- the tuning part --------------------------------------------------------------------------------


def _tuning_cases(args) -> list[tuple[str, str, Callable[[], tuple[Any, tuple]]]]:
    """(benchmark, size label, build() -> (skeleton, args)) for tuned-vs-default."""
    import numpy as np

    import skelpy as sk
    from benchmarks import bench_stencil as bs

    n, mm, s = args.n, args.mm, args.size
    rng = np.random.default_rng(7)

    def vec(dtype=np.float32):
        if dtype == np.int32:
            return sk.Vector(rng.integers(0, 100, n).astype(np.int32))
        return sk.Vector(rng.random(n, dtype=np.float32))

    def mat(dtype=np.float32):
        if dtype == np.uint8:
            return sk.Matrix((rng.random((s, s)) < 0.3).astype(np.uint8))
        return sk.Matrix(rng.random((s, s), dtype=np.float32))

    one = f"n={n}"
    two = f"{s}x{s}"
    cases = [
        ("map", one, lambda: (sk.Map(lambda v: v * 2.0 + 1.0), (vec(),))),
        ("zip", one, lambda: (sk.Zip(lambda x, y, a: a * x + y), (vec(), vec(), 2.0))),
        ("reduce_sum", one, lambda: (sk.Reduce(lambda a, b: a + b, 0), (vec(),))),
        ("dot", one, lambda: (sk.MapReduce(lambda a, b: a * b, lambda a, b: a + b, 0),
                              (vec(), vec()))),
        ("scan_exclusive", one, lambda: (sk.Scan(lambda a, b: a + b, 0), (vec(np.int32),))),
        ("matmul", f"{mm}x{mm}x{mm}", lambda: (
            sk.AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b),
            (sk.Matrix(rng.standard_normal((mm, mm), dtype=np.float32)),
             sk.Matrix(rng.standard_normal((mm, mm), dtype=np.float32))))),
        ("game_of_life", two, lambda: (sk.Stencil(bs.life, shape=1, border="wrap",
                                                  out_dtype=np.uint8), (mat(np.uint8),))),
        ("heat_5pt", two, lambda: (sk.Stencil(bs.heat, shape=1, border="nearest"), (mat(),))),
        ("gaussian_5x5", two, lambda: (sk.Stencil(bs.gauss5, border="reflect"), (mat(),))),
        ("gaussian_11x11", two, lambda: (sk.Stencil(bs.gauss11, border="reflect"), (mat(),))),
        ("canny", two, lambda: ((sk.Stencil(bs.gauss5, border="reflect")
                                 >> sk.Stencil(bs.sobel_mag, border="reflect")
                                 >> sk.Stencil(bs.nms, border="constant", cval=0)
                                 >> sk.Stencil(bs.threshold, shape=0)), (mat(),))),
    ]
    if args.scale == "tiny":
        keep = {"map", "heat_5pt"}
        cases = [c for c in cases if c[0] in keep]
    return cases


def _sample(space, max_points: int, keep: list[dict]):
    """A deterministic sample of a request's legal points (hash of the point), always with
    the default and the points in ``keep``: an exhaustive sweep that fits the time box."""
    from skelpy.tuner.space import ParamSpace

    legal = space.points()
    if len(legal) <= max_points:
        return space
    keys = {space.key(space.default)} | {space.key(p) for p in keep if p}

    def h(k) -> int:
        return int(hashlib.sha1(repr(k).encode()).hexdigest()[:8], 16)

    ranked = sorted((space.key(p) for p in legal), key=h)
    keys |= set(ranked[:max_points])
    return ParamSpace(space.params, space.default,
                      constraint=lambda p, s=space, k=keys: s.is_legal(p) and s.key(p) in k)


def part_tuning(argv=None) -> dict:
    """Each benchmark with tuning off (the space's defaults), in model mode, after online
    tuning, and after an exhaustive sweep of a sample of its legal launch points: kernel times
    from profiling events, in one process on a fresh store; tuned vs default speedups."""
    ap = _common_parser(part_tuning.__doc__)
    ap.add_argument("--max-points", type=int, default=None)
    args = ap.parse_args(argv)
    from skelpy import tuner
    from skelpy.tuner.measure import Budget

    t_end = time.perf_counter() + args.seconds
    small = args.scale in ("tiny", "quick")
    tuner.settings.sweep_budget = Budget(warmup=1, min_reps=2, max_reps=4 if small else 8,
                                         rel_ci=0.05, max_seconds=0.1 if small else 0.3)
    max_points = args.max_points or {"tiny": 4, "quick": 24, "medium": 48, "full": 96}[args.scale]
    if args.scale == "tiny":
        tuner.settings.online_candidates = 3       # enough to exercise the path in tests
    cases = _tuning_cases(args)
    out: list[dict] = []
    skipped: list[str] = []
    for i, (name, size, build) in enumerate(cases):
        left = t_end - time.perf_counter()
        per_case = left / (len(cases) - i)
        if left < 1.0:
            skipped.append(name)
            continue
        t0 = time.perf_counter()
        try:
            out.append(_tune_case(name, size, build, args.reps, per_case, max_points))
        except Exception as exc:  # noqa: BLE001 - record and go on with the next benchmark
            out.append({"benchmark": name, "size": size,
                        "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        r = out[-1]
        print(f"tuning {name} {size}: " + (r.get("error") or
              f"off {r['modes']['off']['seconds'] * 1e3:.3f} ms, tuned "
              f"{r['tuned_seconds'] * 1e3:.3f} ms ({r['tuned_mode']}), "
              f"x{r['speedup']:.2f}") + f" [{time.perf_counter() - t0:.1f} s]", flush=True)
    return {"cases": out, "skipped": skipped, "max_points": max_points,
            "online_candidates": tuner.settings.online_candidates,
            "sweep_budget": dataclasses.asdict(tuner.settings.sweep_budget)}


def _paired(skel, sargs, reps: int, rounds: int = 3) -> tuple[float, float, dict]:
    """Kernel seconds with tuning off (the defaults) and with the tuner's current decision,
    measured in alternating rounds so that a busy machine slows both alike; returns
    (off, current, current's parameters)."""
    from skelpy import tuner

    off = cur = math.inf
    params: dict = {}
    for _ in range(rounds):
        with tuner.tuning("off"):
            off = min(off, _time_skel(skel, sargs, reps)[0])
        with tuner.tuning("model"):          # the decision cache: what the last stage chose
            t, params = _time_skel(skel, sargs, reps)
            cur = min(cur, t)
    return off, cur, params


def _tune_case(name: str, size: str, build, reps: int, seconds: float, max_points: int) -> dict:
    """One benchmark through the modes, in order (the store accumulates): model with what
    the store has, online until it settles, then a sampled exhaustive sweep."""
    from skelpy import tuner

    t_case_end = time.perf_counter() + seconds
    skel, sargs = build()
    modes: dict[str, dict] = {}
    off, cur, p = _paired(skel, sargs, reps)
    modes["model"] = {"seconds": cur, "off_seconds": off, "params": p,
                      "source": getattr(skel.last_launch, "source", "")}
    from benchmarks.tuner_eval import capture_request

    reqs = capture_request(lambda: skel(*sargs))
    # online: each call measures one candidate near the best so far, until it settles
    # (a call answered from the decision cache); the time box is split between the requests
    calls, settled = 0, 0
    with tuner.tuning("online"):
        for k, req in enumerate(reqs):
            req_end = time.perf_counter() + 0.4 * (t_case_end - time.perf_counter()) / (
                len(reqs) - k)
            for _ in range(tuner.settings.online_candidates + 3):
                if time.perf_counter() > req_end:
                    break
                calls += 1
                if tuner.execute(req).source == "cache":
                    settled += 1
                    break
    off, cur, p = _paired(skel, sargs, reps)
    modes["online"] = {"seconds": cur, "off_seconds": off, "params": p, "calls": calls,
                       "settled": settled == len(reqs)}
    # exhaustive over a sample of the legal points (plus the default and online's choice)
    sweep_end = t_case_end - 0.15 * seconds
    points, cut = 0, False
    for k, req in enumerate(reqs):
        with tuner.tuning("model"):
            online_point = tuner.choose_params(req)[0]
        sub = _sample(req.space, max_points, [online_point])
        points += len(sub.points())
        req_end = time.perf_counter() + (sweep_end - time.perf_counter()) / (len(reqs) - k)
        with tuner.tuning("exhaustive"), tuner.sweep_deadline(req_end):
            tuner.execute(dataclasses.replace(req, space=sub))
        cut = cut or time.perf_counter() > req_end
    off, cur, p = _paired(skel, sargs, reps)
    modes["exhaustive"] = {"seconds": cur, "off_seconds": off, "params": p,
                           "sampled_points": points,
                           "space_points": sum(len(r.space.points()) for r in reqs),
                           "cut_by_time": cut}
    with tuner.tuning("off"):
        skel(*sargs)
        modes["off"] = {"seconds": min(m["off_seconds"] for m in modes.values()),
                        "params": _skel_params(skel)}
    # "tuned" is the tuner's final decision (the sweep's sample includes online's choice),
    # compared with the defaults timed alongside it
    fin = modes["exhaustive"]
    return {"benchmark": name, "size": size, "modes": modes, "tuned_mode": "exhaustive",
            "tuned_seconds": fin["seconds"], "default_seconds": fin["off_seconds"],
            "speedup": fin["off_seconds"] / fin["seconds"], "requests": len(reqs)}


# -- merging the parts into one document -------------------------------------------------------------

LABELS = {
    "map": ("Map/Zip", "Map x*2+1 (float32)"),
    "zip": ("Map/Zip", "Zip a*x+y (float32)"),
    "reduce_sum": ("Reduce", "Reduce sum (float32)"),
    "dot": ("Reduce", "MapReduce dot product (float32)"),
    "scan_exclusive": ("Scan", "Scan exclusive sum (int32)"),
    "scan_inclusive": ("Scan", "Scan inclusive sum (int32)"),
    "matmul": ("AllPairs", "AllPairs matmul (float32)"),
    "game_of_life": ("Stencil", "Game of Life (uint8, wrap)"),
    "heat_5pt": ("Stencil", "Heat 5-point (float32)"),
    "gaussian_5x5": ("Stencil", "Gaussian 5x5 (float32)"),
    "gaussian_11x11": ("Stencil", "Gaussian 11x11 (float32)"),
    "gaussian_11x11_separable": ("Stencil", "Gaussian 11x11 separable (2 stencils)"),
    "canny": ("Stencil", "Canny (4-stencil sequence)"),
    "synthetic_simple_20_10_20_10": ("Stencil", "Synthetic simple 20/10/20/10"),
    "synthetic_complex_1_10_30_30": ("Stencil", "Synthetic complex 1/10/30/30"),
}
OPS = {"reduce sum f32": "reduce_sum", "dot f32": "dot", "scan exclusive i32": "scan_exclusive",
       "scan inclusive i32": "scan_inclusive", "matmul f32": "matmul"}
STENCIL_STAGES = {"canny": 4, "gaussian_11x11_separable": 2}


def _new_row(bench: str, size: str, skelpy_s: float, *, part: str, params=None,
             elements: int | None = None, nbytes: float | None = None,
             flops: float | None = None, copy_gbs: float | None = None) -> dict:
    group, label = LABELS.get(bench, ("Other", bench))
    row: dict[str, Any] = {"benchmark": bench, "label": label, "group": group, "size": size,
                           "elements": elements, "skelpy_s": skelpy_s, "skelpy_params": params,
                           "part": part, "alternatives": []}
    if nbytes:
        row["bytes"] = nbytes
        row["GB/s"] = nbytes / skelpy_s / 1e9
        if copy_gbs:
            row["copy_GBs"] = copy_gbs
            row["fraction_of_copy"] = row["GB/s"] / copy_gbs
    if flops:
        row["flops"] = flops
        row["GFLOP/s"] = flops / skelpy_s / 1e9
    return row


def _add_alt(row: dict, name: str, kind: str, where: str, seconds, *, part: str,
             skelpy_s: float | None = None) -> None:
    if not seconds or not math.isfinite(seconds) or seconds <= 0:
        return
    base = skelpy_s or row["skelpy_s"]
    row["alternatives"].append({"name": name, "kind": kind, "where": where,
                                "seconds": seconds, "skelpy_seconds": base,
                                "speedup": seconds / base, "part": part})


def _alt_kind(impl: str) -> tuple[str, str]:
    low = impl.lower()
    if low.startswith("pyopencl"):
        return "pyopencl", "same device"
    if low.startswith("hand"):
        return "opencl", "same device"
    if low.startswith("numpy"):
        return "numpy", "host CPU"
    if low.startswith("scipy"):
        return "scipy", "host CPU"
    if "cupy" in low:
        return "cupy", "CUDA GPU"
    return "other", "?"


def rows_from_map(data: dict) -> tuple[list[dict], dict]:
    """bench_map's result: skelpy at the parameters it chose vs the hand-written kernel at
    the same parameters (and at the best of the points it measured), NumPy on the host."""
    rows = []
    n = int(data.get("n") or 0)
    bw = data.get("copy_bandwidth_GBs")
    kernels = data.get("kernels") or []
    numpy_rows = {r.get("kernel"): r for r in data.get("numpy") or []}
    for kind, per in (("map", 8), ("zip", 12)):
        ks = [r for r in kernels if r.get("kernel") == kind and r.get("skelpy_us")]
        if not ks:
            continue
        chosen = next((r for r in ks if "chosen" in str(r.get("params", ""))), ks[0])
        s = chosen["skelpy_us"] * 1e-6
        row = _new_row(kind, f"n={n}", s, part="map", params=chosen.get("params"),
                       elements=n, nbytes=per * n, copy_gbs=bw)
        _add_alt(row, "hand-written OpenCL (same parameters)", "opencl", "same device",
                 (chosen.get("hand_us") or 0) * 1e-6, part="map")
        hands = [r["hand_us"] for r in ks if r.get("hand_us")]
        if len(hands) > 1:
            _add_alt(row, f"hand-written OpenCL (best of {len(hands)} parameter points)",
                     "opencl", "same device", min(hands) * 1e-6, part="map")
        if kind in numpy_rows:
            _add_alt(row, "NumPy", "numpy", "host CPU",
                     (numpy_rows[kind].get("numpy_us") or 0) * 1e-6, part="map")
        row["skelpy_best_s"] = min(r["skelpy_us"] for r in ks) * 1e-6
        row["skelpy_vs_hand_same_params"] = [
            {"params": r.get("params"), "ratio": r.get("skelpy/hand")} for r in ks]
        rows.append(row)
    extra = {}
    if data.get("overhead"):
        extra["overhead"] = dict(data["overhead"])
    if data.get("worst_kernel_ratio") is not None:
        extra["map_worst_kernel_ratio"] = data["worst_kernel_ratio"]
    return rows, extra


def rows_from_rsa(data: dict) -> tuple[list[dict], dict]:
    """bench_reduce_scan_allpairs's result: one row per operation; the first plain skelpy
    implementation is skelpy's figure, its variants (ordered, levels, tuned) ride along."""
    bw = data.get("copy_bandwidth_GBs")
    n = int(data.get("n") or 0)
    nmm = int(data.get("matmul_n") or 0)
    by_op: dict[str, list[dict]] = {}
    for r in data.get("rows") or []:
        by_op.setdefault(r.get("op", ""), []).append(r)
    rows = []
    for op, impls in by_op.items():
        bench = OPS.get(op, op.replace(" ", "_"))
        sk_rows = [r for r in impls if str(r.get("impl", "")).startswith("skelpy")]
        if not sk_rows:
            continue
        plain = [r for r in sk_rows if not any(w in r["impl"] for w in
                                                 ("tuned", "ordered", "levels", "lookback"))]
        main = (plain or sk_rows)[0]
        s = main["us"] * 1e-6
        if bench == "matmul":
            row = _new_row(bench, f"{nmm}x{nmm}x{nmm}", s, part="reduce_scan_allpairs",
                           params=main.get("params"), elements=nmm * nmm,
                           flops=2.0 * nmm ** 3)
        else:
            nbytes = main["GB/s"] * 1e9 * s if main.get("GB/s") else None
            row = _new_row(bench, f"n={n}", s, part="reduce_scan_allpairs",
                           params=main.get("params"), elements=n, nbytes=nbytes, copy_gbs=bw)
        row["skelpy_variants"] = {r["impl"]: r["us"] * 1e-6 for r in sk_rows if r is not main}
        row["skelpy_best_s"] = min(r["us"] for r in sk_rows) * 1e-6
        for r in impls:
            if r in sk_rows:
                continue
            kind, where = _alt_kind(r["impl"])
            _add_alt(row, r["impl"].replace("numpy", "NumPy"), kind, where, r["us"] * 1e-6,
                     part="reduce_scan_allpairs")
        rows.append(row)
    extra = {}
    if data.get("matmul_max_rel_error") is not None:
        extra["matmul_max_rel_error"] = data["matmul_max_rel_error"]
    return rows, extra


def rows_from_stencil(data: dict) -> tuple[list[dict], dict]:
    """bench_stencil's result: one row per case and size. Bandwidth counts each stage reading
    and writing the matrix once (the least any implementation moves)."""
    bw = data.get("copy_bandwidth_GBs")
    rows = []
    for r in data.get("rows") or []:
        case, size = r.get("case"), int(r.get("size") or 0)
        if not case or not r.get("skelpy_ms"):
            continue
        s = r["skelpy_ms"] * 1e-3
        item = 1 if case == "game_of_life" else 4
        nbytes = 2.0 * item * size * size * STENCIL_STAGES.get(case, 1)
        row = _new_row(case, f"{size}x{size}", s, part="stencil", params=r.get("params"),
                       elements=size * size, nbytes=nbytes, copy_gbs=bw)
        if r.get("skelpy_best_ms"):
            row["skelpy_best_s"] = r["skelpy_best_ms"] * 1e-3
            row["skelpy_best_params"] = r.get("best_params")
        _add_alt(row, "hand-written OpenCL", "opencl", "same device",
                 (r.get("hand_ms") or 0) * 1e-3, part="stencil")
        _add_alt(row, "scipy.ndimage", "scipy", "host CPU", (r.get("scipy_ms") or 0) * 1e-3,
                 part="stencil")
        _add_alt(row, "scipy.ndimage.gaussian_filter (separable)", "scipy", "host CPU",
                 (r.get("scipy_sep_ms") or 0) * 1e-3, part="stencil")
        _add_alt(row, "cupyx.scipy.ndimage", "cupy", "CUDA GPU",
                 (r.get("cupy_ms") or 0) * 1e-3, part="stencil")
        if "agree" in r:
            row["agrees_with_hand_written"] = r["agree"]
        rows.append(row)
    return rows, {}


def merge_extras(rows: list[dict], data: dict) -> None:
    """Attach the extras part's alternatives to the matching rows (same benchmark and size),
    each with the skelpy time it was measured against; rows it alone has are added."""
    for e in data.get("rows") or []:
        target = next((r for r in rows if r["benchmark"] == e["benchmark"]
                       and r["size"] == e["size"]), None)
        if target is None:
            target = _new_row(e["benchmark"], e["size"], e["skelpy_s"], part="extras",
                              params=e.get("skelpy_params"), elements=e.get("elements"),
                              nbytes=e.get("bytes"), flops=e.get("flops"))
            rows.append(target)
        for a in e.get("alternatives") or []:
            _add_alt(target, a["name"], a["kind"], a["where"], a["seconds"], part="extras",
                     skelpy_s=e["skelpy_s"])


def tuning_rows(data: dict) -> list[dict]:
    """One row per benchmark of the tuning part. Each mode's speedup is over the defaults
    timed in alternating rounds with it (``*_off_s``); ``default_s`` is the fastest of those."""
    out = []
    for c in data.get("cases") or []:
        if "error" in c:
            out.append({"benchmark": c["benchmark"], "size": c["size"], "error": c["error"]})
            continue
        m = c["modes"]

        def ratio(mode: str) -> float:
            return m[mode].get("off_seconds", m["off"]["seconds"]) / m[mode]["seconds"]

        out.append({
            "benchmark": c["benchmark"], "label": LABELS.get(c["benchmark"], ("", c["benchmark"]))[1],
            "size": c["size"], "default_s": m["off"]["seconds"], "model_s": m["model"]["seconds"],
            "online_s": m["online"]["seconds"], "exhaustive_s": m["exhaustive"]["seconds"],
            "tuned_s": c["tuned_seconds"], "tuned_mode": c["tuned_mode"],
            "tuned_default_s": c["default_seconds"], "speedup": c["speedup"],
            "model_speedup": ratio("model"), "online_speedup": ratio("online"),
            "online_calls": m["online"].get("calls"), "online_settled": m["online"].get("settled"),
            "sampled_points": m["exhaustive"].get("sampled_points"),
            "space_points": m["exhaustive"].get("space_points"),
            "sweep_cut_by_time": m["exhaustive"].get("cut_by_time"),
            "default_params": m["off"]["params"], "tuned_params": m[c["tuned_mode"]]["params"],
        })
    return out


def _largest(rows: list[dict], bench: str) -> dict | None:
    cand = [r for r in rows if r["benchmark"] == bench]
    return max(cand, key=lambda r: r.get("elements") or 0) if cand else None


def targets(doc: dict) -> list[dict]:
    """The earlier issues' targets, evaluated on this document (``applies``: whether the
    target is stated for this kind of device; ``met`` is None when nothing was measured)."""
    gpu = doc.get("device_kind") == "gpu"
    rows = doc.get("rows") or []
    out: list[dict] = []

    def add(issue, name, text, value, threshold, better, *, applies=True, unit="", where=""):
        met = None if value is None else (value >= threshold if better == "higher"
                                          else value <= threshold)
        out.append({"issue": issue, "name": name, "target": text, "value": value,
                    "threshold": threshold, "better": better, "unit": unit,
                    "applies": applies, "met": met, "where": where})

    for b in ("map", "zip"):
        r = _largest(rows, b)
        ratio = None
        if r:
            same = next((a for a in r["alternatives"] if a["name"].startswith(
                "hand-written OpenCL (same")), None)
            ratio = r["skelpy_s"] / same["seconds"] if same else None
        add(2, f"{b}_vs_hand", f"{b.capitalize()} kernel time within 3% of the hand-written "
            "kernel (same parameters)", ratio, 1.03, "lower", unit="x", where=r["size"] if r else "")
    if doc.get("map_worst_kernel_ratio") is not None:
        add(2, "map_zip_worst_point", "Map/Zip: worst skelpy/hand-written ratio over the "
            "measured parameter points", doc["map_worst_kernel_ratio"], 1.03, "lower", unit="x")
    ov = doc.get("overhead") or {}
    add(2, "call_overhead", "tiny-input call overhead within 1.5x of a raw pyopencl "
        "enqueue+wait", ov.get("ratio"), 1.5, "lower", unit="x")
    for b, thr in (("reduce_sum", 0.90), ("scan_exclusive", 0.70), ("scan_inclusive", 0.70)):
        r = _largest(rows, b)
        add(3, f"{b}_bandwidth", f"{LABELS[b][1]} at >= {thr:.0%} of the copy bandwidth (GPU)",
            r.get("fraction_of_copy") if r else None, thr, "higher", applies=gpu,
            where=r["size"] if r else "")
    r = _largest(rows, "matmul")
    at4096 = bool(r) and r["size"].startswith("4096x")
    add(3, "matmul_tflops", "AllPairs fp32 matmul >= 15 TFLOP/s at 4096^2 (GPU)",
        (r["GFLOP/s"] / 1e3) if r and at4096 else None, 15.0, "higher", applies=gpu,
        unit="TFLOP/s", where=r["size"] if r else "")
    r = _largest(rows, "heat_5pt")
    add(4, "stencil5_bandwidth", "5-point float32 stencil at >= 85% of the copy bandwidth "
        "(GPU)", r.get("fraction_of_copy") if r else None, 0.85, "higher", applies=gpu,
        where=r["size"] if r else "")
    g11 = [x for x in rows if x["benchmark"] == "gaussian_11x11"]
    sp = [a["speedup"] for x in g11 for a in x["alternatives"] if a["name"] == "scipy.ndimage"]
    add(4, "gaussian11_vs_scipy", "Gaussian 11x11 faster than scipy.ndimage (PoCL; worst "
        "size)", min(sp) if sp else None, 1.0, "higher", applies=not gpu, unit="x")
    te = doc.get("tuner_eval") or {}
    summ = te.get("summary") or {}
    method = te.get("default_method") or te.get("best_method")
    perf = (summ.get(method) or {}).get("perf_geomean") if method else None
    add(5, "tuner_oracle", "autotuner >= 95% of the oracle for held-out kernels (geometric "
        f"mean, {method or 'default method'})", perf, 0.95, "higher")
    oh = (te.get("overhead") or {}).get("model_decision_ms_median")
    add(5, "decision_overhead", "decision overhead under 1 ms", oh, 1.0, "lower", unit="ms")
    return out


def _geomean(xs) -> float | None:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarise(doc: dict) -> dict:
    """Headline figures: per alternative kind, the geometric mean of skelpy's speedups over
    the benchmarks (largest size of each; the first alternative of that kind, e.g. the
    hand-written kernel at the same parameters), the best fraction of the copy bandwidth, and
    the geometric mean of tuned over default."""
    rows = doc.get("rows") or []
    largest = [_largest(rows, b) for b in dict.fromkeys(r["benchmark"] for r in rows)]
    by_kind: dict[str, list[float]] = {}
    for r in largest:
        first: dict[str, float] = {}
        for a in r["alternatives"]:          # the first listed of each kind: the like-for-like
            first.setdefault(a["kind"], a["speedup"])
        for k, v in first.items():
            by_kind.setdefault(k, []).append(v)
    fr = [(r["fraction_of_copy"], r["benchmark"]) for r in largest if r.get("fraction_of_copy")]
    tun = [t["speedup"] for t in doc.get("tuning") or [] if t.get("speedup")]
    return {
        "speedup_geomean_by_kind": {k: _geomean(v) for k, v in sorted(by_kind.items())},
        "speedup_count_by_kind": {k: len(v) for k, v in sorted(by_kind.items())},
        "best_fraction_of_copy": max(fr)[0] if fr else None,
        "best_fraction_of_copy_benchmark": max(fr)[1] if fr else None,
        "tuned_over_default_geomean": _geomean(tun),
        "tuned_over_default_max": max(tun) if tun else None,
    }


def merge(meta: dict, raw: dict[str, dict]) -> dict:
    """One device document from the parts' raw results (``raw[part] = part's data``)."""
    doc = dict(meta)
    rows: list[dict] = []
    merge_errors = {}
    for part, fn in (("map", rows_from_map), ("reduce_scan_allpairs", rows_from_rsa),
                     ("stencil", rows_from_stencil)):
        if part in raw:
            try:
                got, extra = fn(raw[part])
                rows += got
                doc.update(extra)
            except Exception as exc:  # noqa: BLE001 - a part's format changed: say so
                merge_errors[part] = f"{type(exc).__name__}: {exc}"
    if "extras" in raw:
        try:
            merge_extras(rows, raw["extras"])
            doc["extras_notes"] = raw["extras"].get("notes", [])
        except Exception as exc:  # noqa: BLE001
            merge_errors["extras"] = f"{type(exc).__name__}: {exc}"
    doc["rows"] = rows
    doc["tuning"] = []
    if "tuning" in raw:
        try:
            doc["tuning"] = tuning_rows(raw["tuning"])
            doc["tuning_setup"] = {k: raw["tuning"].get(k) for k in
                                   ("max_points", "online_candidates", "sweep_budget", "skipped")}
        except Exception as exc:  # noqa: BLE001
            merge_errors["tuning"] = f"{type(exc).__name__}: {exc}"
    if "tuner_eval" in raw:
        doc["tuner_eval"] = raw["tuner_eval"]
    if "temporal" in raw:
        doc["temporal"] = raw["temporal"]
    if "borders" in raw:
        doc["borders"] = raw["borders"]
    if "sequence" in raw:
        doc["sequence"] = raw["sequence"]
    if "fusion" in raw:
        doc["fusion"] = raw["fusion"]
    if "multidev" in raw:
        doc["multidev"] = raw["multidev"]
    if merge_errors:
        doc["merge_errors"] = merge_errors
    doc["targets"] = targets(doc)
    doc["summary"] = summarise(doc)
    return doc


# -- the suite --------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="skelpy bench", description=__doc__.split("\n\n")[0])
    add_arguments(ap)
    return ap


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The suite's options (shared with the ``skelpy bench`` subcommand)."""
    ap.add_argument("--budget-minutes", type=float, default=10.0, metavar="M",
                    help="time budget of the whole suite (default 10)")
    ap.add_argument("--quick", action="store_true", help="at most the quick sizes")
    ap.add_argument("--only", default=None, metavar="NAMES",
                    help=f"comma list of parts ({', '.join(PARTS)}; default: all but "
                         "tuner_eval)")
    ap.add_argument("--scale", default="auto", choices=("auto", *SCALES),
                    help="sizes for every part (default: chosen from each part's share)")
    ap.add_argument("--device", default=None, help="sk.use() spec: gpu, cpu, a name part")
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    ap.add_argument("--store", default="fresh", choices=("fresh", "user"),
                    help="tuning store: a fresh empty one (default) or yours")
    ap.add_argument("--fresh", action="store_true", help="with --only: drop the other parts' "
                    "results instead of keeping them from the device's previous document")
    ap.add_argument("--no-report", action="store_true", help="do not regenerate RESULTS.md")
    ap.add_argument("--quiet", action="store_true", help="no progress line")


def main(argv: Sequence[str] | None = None) -> dict:
    """Run the suite; returns the device document it wrote (``skelpy bench`` calls this)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:           # the suite running one part (see run_part)
        head, rest = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv \
            else (argv, [])
        cp = argparse.ArgumentParser()
        cp.add_argument("--child")
        cp.add_argument("--dump")
        cp.add_argument("--parts-dir")
        cargs = cp.parse_args(head)
        raise SystemExit(_child(cargs.child, Path(cargs.dump), Path(cargs.parts_dir), rest))
    if argv[:1] == ["--remerge"]:         # rebuild documents from their embedded raw data
        for f in argv[1:]:
            remerge(Path(f))
        return {}
    args = _parser().parse_args(argv)
    return run_suite(args)


def remerge(path: Path) -> dict:
    """Rebuild a device document from the parts' raw results it embeds (after a change to
    the merging code or to a part's output format), keeping its run information."""
    doc = json.loads(path.read_text())
    meta = {k: v for k, v in doc.items() if k not in
            ("rows", "tuning", "tuning_setup", "targets", "summary", "merge_errors",
             "overhead", "map_worst_kernel_ratio", "matmul_max_rel_error", "extras_notes",
             "tuner_eval")}
    new = merge(meta, doc.get("raw") or {})
    path.write_text(json.dumps(new, indent=1, default=_json_default) + "\n")
    print(f"re-merged {path}")
    return new


def run_suite(args: argparse.Namespace) -> dict:
    """The suite proper, from parsed options (see :func:`add_arguments`)."""
    t_start = _now()
    budget_s = max(args.budget_minutes, 0.0) * 60.0
    parts = parse_parts(args.only)
    out_dir = Path(args.out) if args.out else RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if args.device:
        env["SKELPY_DEVICE"] = args.device
        os.environ["SKELPY_DEVICE"] = args.device
    tmp = Path(tempfile.mkdtemp(prefix="skelpy-bench-"))
    if args.store == "fresh":
        env["SKELPY_CACHE_DIR"] = str(tmp / "store")
    env.setdefault("SKELPY_TUNE_RETRAIN", "off")   # no background training during timings
    env["PYTHONUNBUFFERED"] = "1"
    env["MPLBACKEND"] = "Agg"
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"]
                                     if env.get("PYTHONPATH") else "")

    sys.path.insert(0, str(ROOT))
    import numpy as np
    import pyopencl as cl

    import skelpy as sk
    from benchmarks.common import copy_bandwidth, device_slug, write_json
    from skelpy import runtime

    group_spec = multidev_group(args.device)
    if group_spec is not None:
        # the single-device parts run on the group's first device, the multidev part on all
        first = sk.use(group_spec)[0]
        sk.use(first)
        env["SKELPY_DEVICE"] = str(sk.devices().index(first))
        os.environ["SKELPY_DEVICE"] = env["SKELPY_DEVICE"]
        if not args.only and "multidev" not in parts:
            parts = [p for p in PARTS if p in (*parts, "multidev")]
    elif args.device:
        sk.use(args.device)
    rt = runtime.current()
    dev = rt.device
    gpu = dev.kind == "gpu"
    slug = device_slug(dev.name)
    fixed = None if args.scale == "auto" else args.scale
    schedule = plan(parts, budget_s, dev.kind, cap="quick" if args.quick else None, fixed=fixed)
    copy_bytes = (16 << 20) if fixed == "tiny" else (256 << 20)
    bw = copy_bandwidth(rt.queue, nbytes=copy_bytes, reps=5 if fixed == "tiny" else 10)
    meta = {
        "schema": SCHEMA, "device": dev.name, "device_slug": slug, "device_kind": dev.kind,
        "platform": dev.platform, "compute_units": dev.compute_units,
        "host": platform.node(), "python": platform.python_version(), "numpy": np.__version__,
        "pyopencl": cl.VERSION_TEXT, "skelpy": getattr(sk, "__version__", "?"),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "budget_s": budget_s,
        "quick": bool(args.quick), "scale": args.scale, "store": args.store,
        "tuning_mode_of_parts": env.get("SKELPY_TUNE", "model"),
        "copy_bandwidth_GBs": bw / 1e9, "copy_bandwidth_bytes": copy_bytes,
        "git": _git_rev(),
    }
    progress = Progress(budget_s, len(parts), quiet=args.quiet)
    progress.message(f"skelpy bench on {dev.name} ({dev.kind}, {dev.platform}); copy "
                     f"bandwidth {bw / 1e9:.1f} GB/s; budget {_mmss(budget_s)}; parts: "
                     + ", ".join(f"{p['part']} ({p['scale']})" for p in schedule))
    raw: dict[str, dict] = {}
    status: dict[str, dict] = {}
    log_path = out_dir / f"{slug}.log"
    try:
        with open(log_path, "w") as log:
            log.write(f"skelpy bench {meta['time']} on {dev.name}\n")
            for p in schedule:
                name = p["part"]
                now = _now() - t_start
                limit = min(p["deadline_s"], budget_s) - now
                if budget_s - now < p["min_s"] or limit < p["min_s"]:
                    status[name] = {"status": "skipped", "scale": p["scale"],
                                    "reason": f"time budget exhausted ({_mmss(now)} of "
                                              f"{_mmss(budget_s)} used)"}
                    progress.index += 1
                    progress.message(f"{name}: skipped (time budget exhausted)")
                    continue
                sc = scale_config(p["scale"], gpu)
                pargv = part_argv(name, sc, gpu, limit * 0.85, group=group_spec)
                progress.begin(name, p["scale"], limit)
                dump = tmp / f"{name}.json"
                rec = run_part(name, pargv, dump=dump, parts_dir=tmp / "parts", env=env,
                               timeout_s=limit, log=log, progress=progress)
                rec["scale"] = p["scale"]
                rec["share_s"] = p["share_s"]
                if rec["status"] == "done":
                    payload = json.loads(dump.read_text())
                    raw[name] = payload["data"]
                    if name == "multidev":      # also on its own, as bench_multidev writes it
                        write_json("multidev", dev.name, payload["data"], directory=out_dir)
                    if payload.get("device") != dev.name:
                        rec["warning"] = f"ran on {payload.get('device')!r}, not {dev.name!r}"
                status[name] = rec
                progress.message(f"{name}: {rec['status']} in {rec['seconds']:.0f} s"
                                 + (f" ({rec.get('reason') or rec.get('error', '')[-200:]})"
                                    if rec["status"] != "done" else ""))
    finally:
        progress.close()
        shutil.rmtree(tmp, ignore_errors=True)
    prev_path = out_dir / f"{slug}.json"
    if args.only and not args.fresh and prev_path.exists():
        _keep_previous(prev_path, parts, raw, status)
    for name in PARTS:
        if name not in status and name not in parts:
            status[name] = {"status": "not selected"}
    meta["parts"] = status
    meta["elapsed_s"] = _now() - t_start
    meta["raw"] = raw
    doc = merge(meta, raw)
    path = out_dir / f"{slug}.json"
    path.write_text(json.dumps(doc, indent=1, default=_json_default) + "\n")
    print(f"wrote {path} ({meta['elapsed_s']:.0f} s; log {log_path})")
    _print_summary(doc)
    if not args.no_report:
        try:
            from benchmarks import report

            md = (ROOT / "benchmarks" / "RESULTS.md") if out_dir.resolve() == \
                RESULTS_DIR.resolve() else out_dir / "RESULTS.md"
            report.main(["--results", str(out_dir), "--markdown", str(md)])
        except Exception as exc:  # noqa: BLE001 - the JSON is written; the report can follow
            print(f"report not regenerated: {type(exc).__name__}: {exc}")
    return doc


def multidev_group(device: str | None) -> str | None:
    """The device group the multidev part runs on, when the group in use has more than one
    device: ``device`` (or ``SKELPY_DEVICE``) naming a group of several, or, with no device
    named, every GPU of a host with two or more; else None."""
    import skelpy as sk
    from skelpy.device_groups import is_group_spec

    spec = device or os.environ.get("SKELPY_DEVICE") or None
    if spec is None:
        gpus = [d for d in sk.devices() if d.kind == "gpu"]
        return "gpu:*" if len(gpus) >= 2 else None
    if is_group_spec(spec):
        return spec if len(sk.use(spec)) > 1 else None
    return None


def _keep_previous(path: Path, parts: list[str], raw: dict, status: dict) -> None:
    """With ``--only``, the parts not run now keep their results from the device's previous
    document (each part's ratios were still taken within one run of that part)."""
    try:
        prev = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if not str(prev.get("schema", "")).startswith(SCHEMA.split("/")[0]):
        return
    for name, data in (prev.get("raw") or {}).items():
        if name in parts or name in raw or name not in PARTS:
            continue
        raw[name] = data
        old = (prev.get("parts") or {}).get(name) or {}
        status[name] = {**old, "status": "done",
                        "kept_from": old.get("kept_from") or prev.get("time")}


def _git_rev() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _print_summary(doc: dict) -> None:
    print(f"\n{'benchmark':<26} {'size':<14} {'skelpy ms':>10} {'GB/s':>8} {'%copy':>6}  "
          "speedup over alternatives (alt time / skelpy time)")
    for r in doc["rows"]:
        alts = ", ".join(f"{a['name']} {a['speedup']:.2f}x" for a in r["alternatives"])
        gbs = r.get("GB/s") or r.get("GFLOP/s")
        frac = r.get("fraction_of_copy")
        print(f"{r['benchmark']:<26} {r['size']:<14} {r['skelpy_s'] * 1e3:>10.4g} "
              f"{gbs if gbs is None else f'{gbs:.3g}':>8} "
              f"{'' if frac is None else f'{frac:.0%}':>6}  {alts}")
    for t in doc.get("tuning") or []:
        if "error" in t:
            print(f"tuning {t['benchmark']}: {t['error']}")
        else:
            print(f"tuned vs default {t['benchmark']:<22} {t['size']:<12} x{t['speedup']:.2f} "
                  f"({t['tuned_mode']})")
    unmet = [t for t in doc["targets"] if t["applies"] and t["met"] is False]
    for t in unmet:
        print(f"target not met (issue {t['issue']}): {t['target']}: {t['value']:.3g}")
    skipped = [k for k, v in doc["parts"].items() if v["status"] in ("skipped", "timeout",
                                                                      "failed")]
    if skipped:
        print("parts not completed: " + ", ".join(f"{k} ({doc['parts'][k]['status']})"
                                                  for k in skipped))


if __name__ == "__main__":
    main()
