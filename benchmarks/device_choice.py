"""How well ``sk.use("auto")`` picks the device of each call, in the style of [Gaspar 2022]
Table 8.5 (see docs/references.md): Map, Zip, Reduce, Scan, AllPairs and three stencils at
sizes 2^10..2^26 elements (32^2..8192^2 for matrices), with the data resident on the host
(the caller reads the result there) or on either device (the result stays there).

For every (skeleton, size, residency) each device is measured forced (``sk.use(device)``,
wall clock of the call plus reading the result where the caller reads it), which gives the
oracle; then the same call runs in auto mode. Reported: the fraction of optimal choices
(the oracle's device, and within 5% of the oracle's time), the geometric-mean slowdown
against the oracle of auto mode's choices and of always one device, the prediction error
per device ([Pöppl 2014]'s ``d = max(p, m) / min(p, m)`` between the predicted and the
measured time of that device), and the decision overhead. JSON goes to
``benchmarks/results/device_choice-<devices>.json`` with a chart of predicted against
measured times; ``python benchmarks/report.py`` puts the section into RESULTS.md.

    python -m benchmarks.device_choice                      # GPU host: a GPU and the CPU
    python -m benchmarks.device_choice --quick              # here: two PoCL devices
    POCL_DEVICES="basic pthread" python -m benchmarks.device_choice --quick

Devices: the first GPU and the first CPU device (``--devices`` picks others by name), else
the first two devices. The cost model starts from scratch in a temporary cache folder
(``--cache`` to keep one): both devices are calibrated first (seconds) and the history of
predictions grows with the run, as it would with use. A budget (``--budget-s``, default
240, calibration included) skips the sizes that would end after it (a size is assumed to
take as much longer than the previous one as it is larger), so the default run ends
within about 5 minutes.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    sys.path.insert(0, str(HERE.parent))

TIE = 1.05                       # within 5% of the oracle's time counts as a tie
LARGE = 1 << 18                  # sizes where skelpy's per-call Python work is negligible
DEPTH = 16                       # AllPairs row length


@dataclass
class Case:
    name: str
    matrix: bool                 # 2-D data (sides of sqrt(n))
    n_inputs: int
    make: Callable               # () -> skeleton
    call: Callable               # (skeleton, inputs) -> result
    scalar: bool = False         # the result is a host scalar (Reduce)


def cases(sk) -> list[Case]:
    def heat(nb):
        return nb[0, 0] + np.float32(0.1) * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1]
                                             - 4 * nb[0, 0])

    def gauss3(nb):
        return (nb[-1, -1] + 2 * nb[-1, 0] + nb[-1, 1] + 2 * nb[0, -1] + 4 * nb[0, 0]
                + 2 * nb[0, 1] + nb[1, -1] + 2 * nb[1, 0] + nb[1, 1]) * np.float32(1 / 16)

    def box5(nb):
        s = np.float32(0)
        for dr in range(-2, 3):
            for dc in range(-2, 3):
                s += nb[dr, dc]
        return s * np.float32(1 / 25)

    return [
        Case("map", False, 1, lambda: sk.Map(lambda x: x * x + np.float32(1)),
             lambda s, a: s(a[0])),
        Case("zip", False, 2, lambda: sk.Zip(lambda x, y: np.float32(2) * x + y),
             lambda s, a: s(a[0], a[1])),
        Case("reduce", False, 1, lambda: sk.Reduce(lambda x, y: x + y, identity=0),
             lambda s, a: s(a[0]), scalar=True),
        Case("scan", False, 1, lambda: sk.Scan(lambda x, y: x + y, identity=0),
             lambda s, a: s(a[0])),
        Case("allpairs", True, 2, lambda: sk.AllPairs(zip=lambda x, y: x * y,
                                                      reduce=lambda x, y: x + y, identity=0),
             lambda s, a: s(a[0], a[1])),
        Case("heat", True, 1, lambda: sk.Stencil(heat, border="nearest"), lambda s, a: s(a[0])),
        Case("gauss3x3", True, 1, lambda: sk.Stencil(gauss3, border="reflect"),
             lambda s, a: s(a[0])),
        Case("box5x5", True, 1, lambda: sk.Stencil(box5, border="nearest"),
             lambda s, a: s(a[0])),
    ]


class Bench:
    """Runs the cases on two devices and in auto mode."""

    def __init__(self, sk, devices, reps: int):
        from skelpy import runtime as R
        self.sk, self.R = sk, R
        self.devices = devices
        from skelpy.costmodel.choice import labels
        self.runtimes = [R.runtime_of(d) for d in devices]
        self.labels = labels(self.runtimes)             # as the choices name them
        self.auto = "auto:" + ",".join(str(R.devices().index(d)) for d in devices)
        self.reps = reps
        self.rng = np.random.default_rng(0)
        self.copy = {}                                 # device -> identity skeletons

    def arrays(self, case: Case, n: int) -> list[np.ndarray]:
        if case.name == "allpairs":
            side = max(1, round(math.sqrt(n)))
            return [self.rng.random((side, DEPTH), dtype=np.float32) for _ in range(2)]
        if case.matrix:
            side = max(1, round(math.sqrt(n)))
            return [self.rng.random((side, side), dtype=np.float32)]
        return [self.rng.random(n, dtype=np.float32) for _ in range(case.n_inputs)]

    def inputs(self, arrays, where: int | None) -> list:
        """Containers of ``arrays`` on the host (``where`` None) or only on device
        ``where`` (made there by a copy kernel, as a previous call's result would be)."""
        sk = self.sk
        if where is None:
            return [sk.Vector(a) if a.ndim == 1 else sk.Matrix(a) for a in arrays]
        sk.use(self.devices[where])
        ident = self.copy.setdefault(where, sk.Map(lambda x: x))
        out = [ident(a) for a in arrays]
        self.runtimes[where].finish()
        return out

    def once(self, case: Case, skel, arrays, where, device: int | None):
        """Seconds of one call (device None: auto mode) and its choice."""
        sk = self.sk
        ins = self.inputs(arrays, where)
        for r in self.runtimes:
            r.finish()
        sk.use(self.auto if device is None else self.devices[device])
        t0 = time.perf_counter()
        out = case.call(skel, ins)
        if case.scalar or where is None:
            np.asarray(out if case.scalar else out.to_numpy())
            choice = skel.last_launch.choice if device is None else None
        else:
            choice = skel.last_launch.choice if device is None else None
            (choice.runtime if choice is not None else self.runtimes[device]).finish()
        return time.perf_counter() - t0, choice

    def measure(self, case: Case, n: int, where: int | None) -> dict:
        arrays = self.arrays(case, n)
        forced = []
        for d in range(len(self.devices)):
            skel = case.make()
            self.once(case, skel, arrays, where, d)                  # builds, first sizes
            forced.append(statistics.median(self.once(case, skel, arrays, where, d)[0]
                                            for _ in range(self.reps)))
        # The last forced skeleton, its kernels built on every device: the first call in
        # auto mode makes the cold decision (predicts every device), the repeats reuse it.
        first_t, first = self.once(case, skel, arrays, where, None)
        runs = [self.once(case, skel, arrays, where, None) for _ in range(self.reps)]
        auto_t = statistics.median(t for t, _c in runs)
        chosen = [self.labels.index(c.device) for _t, c in runs]
        pick = max(set(chosen), key=chosen.count)
        preds = runs[0][1].predictions
        predicted = [preds[k].total if k in preds else None for k in self.labels]
        oracle = int(np.argmin(forced))
        return {
            "case": case.name, "n": n,
            "residency": "host" if where is None else self.labels[where],
            "forced_s": forced, "oracle": self.labels[oracle],
            "auto": self.labels[pick], "auto_first": first.device,
            "auto_s": auto_t, "auto_first_s": first_t, "predicted_s": predicted,
            "margin": runs[0][1].margin, "reason": runs[0][1].reason,
            "kernel_sources": [preds[k].kernel_source if k in preds else None
                               for k in self.labels],
        }


def repeat_overhead(bench: Bench, calls: int, blocks: int = 5) -> dict:
    """Auto mode's own time on repeated calls: a tiny Map (the repeat-call launcher) and a
    tiny Reduce (the full call path) on data resident where auto mode runs them, ``calls``
    calls per block, forced and auto blocks alternating; the median block per call."""
    sk, R = bench.sk, bench.R
    rng = np.random.default_rng(1)
    cases = {"Map": (sk.Map(lambda x: x * x + np.float32(1)), False),
             "Reduce": (sk.Reduce(lambda x, y: x + y, identity=0), True)}
    out = {}
    for name, (skel, scalar) in cases.items():
        data = sk.Vector(rng.random(1024, dtype=np.float32))
        sk.use(bench.auto)
        for _ in range(64):                        # decide, measure, settle
            skel(data)
        choice = skel.last_launch.choice
        rt, label = choice.runtime, choice.device
        times = {"forced": [], "auto": []}

        def block(mode):
            sk.use(mode)
            skel(data)
            rt.finish()
            t0 = time.perf_counter()
            for _ in range(calls):
                skel(data)
            rt.finish()
            return (time.perf_counter() - t0) / calls

        for _ in range(blocks):
            times["forced"].append(block(rt.device))
            times["auto"].append(block(bench.auto))
        out[name] = {"device": label, "calls": calls, "result_read": scalar,
                     "forced_us": statistics.median(times["forced"]) * 1e6,
                     "auto_us": statistics.median(times["auto"]) * 1e6}
    R.use(bench.auto)
    return out


def summarise(rows: list[dict], labels: list[str]) -> dict:
    def geo(xs):
        xs = [x for x in xs if x and math.isfinite(x)]
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None

    def slow(r, dev):
        return r["forced_s"][labels.index(dev)] / min(r["forced_s"])

    out = {"cases": len(rows)}
    if not rows:
        return out
    out["optimal"] = sum(r["auto"] == r["oracle"] for r in rows) / len(rows)
    out["optimal_or_tie"] = sum(slow(r, r["auto"]) <= TIE for r in rows) / len(rows)
    out["optimal_first_call"] = sum(r["auto_first"] == r["oracle"] for r in rows) / len(rows)
    out["slowdown_auto"] = geo(slow(r, r["auto"]) for r in rows)
    out["slowdown_auto_measured"] = geo(r["auto_s"] / min(r["forced_s"]) for r in rows)
    for dev in labels:
        out[f"slowdown_always[{dev}]"] = geo(slow(r, dev) for r in rows)
        ds = [max(p, m) / min(p, m) for r in rows
              for p, m in [(r["predicted_s"][labels.index(dev)],
                            r["forced_s"][labels.index(dev)])] if p]
        out[f"d_geomean[{dev}]"] = geo(ds)
        out[f"d_median[{dev}]"] = statistics.median(ds) if ds else None
        out[f"d_within_1.5[{dev}]"] = sum(d <= 1.5 for d in ds) / len(ds) if ds else None
        big = [max(p, m) / min(p, m) for r in rows if r["n"] >= LARGE
               for p, m in [(r["predicted_s"][labels.index(dev)],
                             r["forced_s"][labels.index(dev)])] if p]
        out[f"d_geomean_large[{dev}]"] = geo(big)
    # auto mode's own time per call: repeats of a call reuse its decision; the first call
    # of a signature predicts every device (its time also has the full call path's work)
    out["overhead_median_s"] = statistics.median(
        r["auto_s"] - r["forced_s"][labels.index(r["auto"])] for r in rows)
    firsts = [r["auto_first_s"] - r["forced_s"][labels.index(r["auto_first"])]
              for r in rows if "auto_first_s" in r]
    out["overhead_first_median_s"] = statistics.median(firsts) if firsts else None
    by_size = {}
    for r in rows:
        b = by_size.setdefault(r["n"], [0, 0, 0])
        s = slow(r, r["auto"])
        b[0 if r["auto"] == r["oracle"] else (1 if s <= TIE else 2)] += 1
    out["by_size"] = {str(n): {"optimal": v[0], "tie": v[1], "slowdown": v[2]}
                      for n, v in sorted(by_size.items())}
    out["targets"] = {"optimal >= 90%": out["optimal"] >= 0.9,
                      "geomean loss <= 5%": out["slowdown_auto"] <= 1.05}
    return out


def chart(rows: list[dict], labels: list[str], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    lo, hi = math.inf, 0.0
    for k, (dev, marker) in enumerate(zip(labels, ("o", "s", "^", "v"))):
        pts = [(r["forced_s"][k], r["predicted_s"][k]) for r in rows if r["predicted_s"][k]]
        if not pts:
            continue
        m, p = zip(*pts)
        lo, hi = min(lo, *m, *p), max(hi, *m, *p)
        ax.scatter(m, p, s=14, marker=marker, alpha=0.7, label=dev[:40])
    if hi > 0:
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        for f in (1.5, 1 / 1.5):
            ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured seconds (wall clock, forced device)")
    ax.set_ylabel("predicted seconds (cost model)")
    ax.set_title("device choice: predicted vs measured (dotted: 1.5x)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _x(x) -> str:
    return "–" if x is None else f"{x:.3f}x"


def markdown(results: Path, md_dir: Path) -> str:
    """The RESULTS.md section of every ``device_choice-*.json`` in ``results``."""
    import json
    docs = []
    for path in sorted(results.glob("device_choice-*.json")):
        try:
            docs.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    if not docs:
        return ""
    L = ["", "## Device choice: `sk.use(\"auto\")`", "",
         "Each call runs on the device with the lowest predicted time for it (transfers "
         "of inputs not resident there, launch, kernel, the download if the caller reads "
         "the result), switching only when the gain beats the predictions' measured error "
         "(issue 17; [Pöppl 2014], [Gaspar 2022] Table 8.5). Every (skeleton, size, data "
         "residency) is measured forced on each device (wall clock, median of repeats; "
         "the result read on the host when the data started there); the oracle is the "
         "faster. *Optimal*: auto mode chose the oracle's device; *tie*: its device was "
         "within 5% of the oracle; slowdowns are geometric means of the chosen (or always "
         "the same) device's time over the oracle's; *measured* includes auto mode's own "
         "overhead (deciding, moving inputs); *d* = max/min of predicted and measured time "
         "per device ([Pöppl 2014] App. A.1).", ""]
    for doc in docs:
        s, labels = doc["summary"], doc["devices"]
        L += [f"### {' + '.join(labels)} ({doc.get('time', '')}, {doc.get('host', '')})", "",
              f"Command: `{doc.get('command', '')}`; {s.get('cases', 0)} cases in "
              f"{s.get('elapsed_s', 0):.0f} s; sizes "
              + ", ".join(f"2^{int(math.log2(n))}" for n in doc.get("sizes", []))
              + (f" (not reached within the budget: {s['skipped_sizes']})"
                 if s.get("skipped_sizes") else "") + ".", ""]
        L += ["| measure | value | target |", "| --- | --- | --- |",
              f"| optimal choices | {_pct(s.get('optimal'))} | >= 90% |",
              f"| optimal or within 5% | {_pct(s.get('optimal_or_tie'))} | |",
              f"| optimal at the first call (static model) | "
              f"{_pct(s.get('optimal_first_call'))} | |",
              f"| geomean slowdown vs oracle, auto | {_x(s.get('slowdown_auto'))} | "
              "<= 1.05x |",
              f"| same, measured in auto mode (with its overhead) | "
              f"{_x(s.get('slowdown_auto_measured'))} | |"]
        for lab in labels:
            L.append(f"| geomean slowdown, always {lab} | "
                     f"{_x(s.get(f'slowdown_always[{lab}]'))} | |")
        for lab in labels:
            L.append(f"| prediction error d on {lab}: geomean / median / share <= 1.5; "
                     f"geomean at 2^18 and more | {_x(s.get(f'd_geomean[{lab}]'))} / "
                     f"{_x(s.get(f'd_median[{lab}]'))} / "
                     f"{_pct(s.get(f'd_within_1.5[{lab}]'))}; "
                     f"{_x(s.get(f'd_geomean_large[{lab}]'))} | |")
        ov = s.get("overhead_median_s")
        if ov is not None:
            L.append(f"| auto mode's own time per call, repeated calls (median over cases) | "
                     f"{ov * 1e6:.0f} µs | |")
        ov = s.get("overhead_first_median_s")
        if ov is not None:
            L.append(f"| same, the first call of a signature (cold decision) | "
                     f"{ov * 1e6:.0f} µs | |")
        for name, r in s.get("repeat_overhead", {}).items():
            L.append(f"| a tiny {name} called {r['calls']}x (on {r['device']}): per call "
                     f"forced / auto | {r['forced_us']:.1f} / {r['auto_us']:.1f} µs "
                     f"(+{r['auto_us'] - r['forced_us']:.1f}) | +<= 15 µs |")
        L += ["", "Per size (cases: optimal / within 5% / slower):", "",
              "| size | " + " | ".join(f"2^{int(math.log2(int(n)))}"
                                       for n in s.get("by_size", {})) + " |",
              "| --- |" + " --- |" * len(s.get("by_size", {})),
              "| choices | " + " | ".join(f"{v['optimal']} / {v['tie']} / {v['slowdown']}"
                                         for v in s.get("by_size", {}).values()) + " |", ""]
        worst = sorted(((r["forced_s"][labels.index(r["auto"])] / min(r["forced_s"]), r)
                        for r in doc.get("rows", []) if r["auto"] != r["oracle"]),
                       key=lambda x: -x[0])[:8]
        if worst:
            L += ["Worst choices (the chosen device's time over the oracle's):", "",
                  "| case | size | data on | chose | oracle | slowdown | reason |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
            L += [f"| {r['case']} | 2^{int(math.log2(r['n']))} | {r['residency']} | "
                  f"{r['auto']} | {r['oracle']} | {x:.2f}x | {r.get('reason', '')} |"
                  for x, r in worst]
            L.append("")
        if doc.get("chart"):
            try:
                rel = (results / doc["chart"]).relative_to(md_dir).as_posix()
            except ValueError:
                rel = (results / doc["chart"]).as_posix()
            L += [f"![predicted against measured]({rel})", ""]
    return "\n".join(L) + "\n"


def pick_devices(sk, names: str | None):
    devs = sk.devices()
    if names:
        from skelpy import runtime as R
        return [R.select(x.strip()) for x in names.split(",")]
    gpu = next((d for d in devs if d.kind == "gpu"), None)
    cpu = next((d for d in devs if d.kind == "cpu"), None)
    if gpu is not None and cpu is not None:
        return [gpu, cpu]
    if len(devs) < 2:
        raise SystemExit("device_choice needs two OpenCL devices (on a CPU-only machine: "
                         'POCL_DEVICES="basic pthread")')
    return devs[:2]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="sizes 2^10..2^20, 2 repeats")
    ap.add_argument("--sizes", default=None, metavar="LO:HI:STEP",
                    help="log2 sizes (default 10:26:2; --quick 10:20:2)")
    ap.add_argument("--reps", type=int, default=None, help="timed repeats per measurement")
    ap.add_argument("--only", default=None, help="comma list of case names")
    ap.add_argument("--devices", default=None, help="two device names (comma separated)")
    ap.add_argument("--budget-s", type=float, default=240.0,
                    help="stop starting new sizes when the next would end after this")
    ap.add_argument("--cache", default=None, help="cache folder (default: a fresh one)")
    ap.add_argument("--calls", type=int, default=2000,
                    help="calls per block of the repeated-call overhead measurement")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    os.environ["SKELPY_CACHE_DIR"] = args.cache or tempfile.mkdtemp(prefix="skelpy-dc-")
    import skelpy as sk
    from benchmarks.common import device_slug, print_table, write_json
    from skelpy import costmodel
    from skelpy.costmodel import auto

    lo, hi, step = (int(x) for x in (args.sizes or ("10:20:2" if args.quick else "10:26:2"))
                    .split(":"))
    sizes = [1 << k for k in range(lo, hi + 1, step)]
    reps = args.reps or (2 if args.quick else 3)
    devices = pick_devices(sk, args.devices)
    bench = Bench(sk, devices, reps)
    t_start = time.perf_counter()
    calib = {}
    for d, r in zip(devices, bench.runtimes):
        c = costmodel.coefficients(r)
        calib[d.name] = {"seconds": c.seconds_taken, **{k: round(v, 2) for k, v in
                                                         c.bandwidths().items()},
                         "launch_us": c.launch.latency * 1e6}
    todo = [c for c in cases(sk) if not args.only or c.name in args.only.split(",")]
    rows, skipped = [], []
    last = 0.0                            # seconds the previous size took
    for k, n in enumerate(sizes):
        growth = n / sizes[k - 1] if k else 1.0
        if time.perf_counter() - t_start + last * growth > args.budget_s:
            skipped.append(n)             # (costs grow about linearly with the size)
            continue
        t_size = time.perf_counter()
        for case in todo:
            for where in (None, *range(len(devices))):
                rows.append(bench.measure(case, n, where))
        last = time.perf_counter() - t_size
        auto.settle(wait=True)
        print(f"2^{int(math.log2(n))}: {len(rows)} rows, "
              f"{time.perf_counter() - t_start:.0f} s", flush=True)
    labels = bench.labels
    summary = summarise(rows, labels)
    summary["skipped_sizes"] = skipped
    summary["elapsed_s"] = time.perf_counter() - t_start
    summary["repeat_overhead"] = repeat_overhead(bench, args.calls)
    print("repeated calls, per call:", summary["repeat_overhead"], flush=True)
    slug = device_slug("-".join(device_slug(x)[:24] for x in labels))   # no '+' in names
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / f"device_choice-{slug}.png"
    charted = chart(rows, labels, png)
    doc = {"devices": labels, "sizes": sizes, "reps": reps, "calibration": calib,
           "summary": summary, "rows": rows, "chart": png.name if charted else None,
           "command": "python -m benchmarks.device_choice " + " ".join(argv or sys.argv[1:])}
    path = write_json("device_choice", slug, doc, directory=out_dir)
    print_table([{"case": r["case"], "n": r["n"], "data": r["residency"][:10],
                  **{lab[:10]: f"{t * 1e3:.3f}" for lab, t in zip(labels, r["forced_s"])},
                  "oracle": r["oracle"][:10], "auto": r["auto"][:10]} for r in rows])
    print({k: v for k, v in summary.items() if k != "by_size"})
    print(f"wrote {path}")
    return doc


if __name__ == "__main__":
    main()
