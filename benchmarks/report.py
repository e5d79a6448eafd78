"""``benchmarks/RESULTS.md`` and its charts, from the suite's device documents alone.

    python benchmarks/report.py [--results benchmarks/results] [--markdown benchmarks/RESULTS.md]

Reads every ``<device-slug>.json`` that ``skelpy bench`` wrote (documents whose ``schema`` is
the suite's; the parts' own files beside them are ignored) and writes the markdown plus PNG
charts (matplotlib, Agg) into the results folder: skelpy's speedup over each alternative,
the fraction of the copy bandwidth reached, and tuned vs default, per device, and the
fraction of the copy bandwidth of all devices side by side. Nothing is measured here: every
number in the report is a number of the JSON (or a geometric mean the suite stored there),
so re-running this after committing the JSON reproduces the report exactly.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

try:
    from benchmarks import report_multidev
except ImportError:                        # run as a script: benchmarks/ is on sys.path
    import report_multidev  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
RESULTS_DIR = HERE / "results"
MARKDOWN = HERE / "RESULTS.md"
SCHEMA_PREFIX = "skelpy-bench-suite/"

KIND_NAMES = {"opencl": "hand-written OpenCL", "pyopencl": "pyopencl kernels",
              "numpy": "NumPy (host)", "scipy": "SciPy (host)", "cupy": "CuPy (CUDA)",
              "other": "other"}
KIND_ORDER = ("opencl", "pyopencl", "numpy", "scipy", "cupy", "other")


# -- formatting (the tests format the JSON's numbers with these and look for them) ---------------


def fmt_ms(seconds) -> str:
    """Seconds as milliseconds, 4 significant digits."""
    return "–" if seconds is None else f"{seconds * 1e3:.4g}"


def fmt_x(ratio) -> str:
    return "–" if ratio is None else f"{ratio:.2f}x"


def fmt_pct(frac) -> str:
    return "–" if frac is None else f"{100 * frac:.1f}%"


def fmt_num(v) -> str:
    return "–" if v is None else f"{v:.4g}"


def fmt_value(t: dict) -> str:
    """A target's measured value in its unit."""
    v, unit = t.get("value"), t.get("unit", "")
    if v is None:
        return "not measured"
    if unit == "x":
        return fmt_x(v)
    if unit:
        return f"{fmt_num(v)} {unit}"
    return fmt_pct(v)


def fmt_threshold(t: dict) -> str:
    unit = t.get("unit", "")
    op = "<=" if t.get("better") == "lower" else ">="
    if unit == "x":
        v = fmt_x(t["threshold"])
    elif unit:
        v = f"{fmt_num(t['threshold'])} {unit}"
    else:
        v = fmt_pct(t["threshold"])
    return f"{op} {v}"


def _md_escape(text) -> str:
    return str(text).replace("|", "\\|")


def _params(p) -> str:
    if p is None:
        return ""
    if isinstance(p, dict):
        if p and all(isinstance(v, dict) for v in p.values()):
            return "; ".join(f"{k}: {_params(v)}" for k, v in p.items())
        return ",".join(f"{k}={v}" for k, v in p.items())
    return str(p)


# -- loading ----------------------------------------------------------------------------------------


def load(results: Path) -> list[dict]:
    """The suite's device documents in ``results``, GPUs first, then by name."""
    docs = []
    for path in sorted(results.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and str(doc.get("schema", "")).startswith(SCHEMA_PREFIX):
            doc["_file"] = path.name
            _attach_tuner_eval(doc, results)
            report_multidev.attach(doc, results)
            docs.append(doc)
    docs.sort(key=lambda d: (d.get("device_kind") != "gpu", d.get("device", "")))
    return docs


def _attach_tuner_eval(doc: dict, results: Path) -> None:
    """Use the standalone ``benchmarks/tuner_eval.py`` result of this device (the full run,
    which takes longer than a suite's budget) when it is newer than what the suite ran, and
    re-derive the targets from it."""
    path = results / f"tuner_eval_{doc.get('device_slug', '')}.json"
    try:
        te = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    have = doc.get("tuner_eval") or {}
    if have.get("summary") and str(have.get("when", "")) >= str(te.get("when", "")):
        return
    te["_file"] = path.name
    doc["tuner_eval"] = te
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks import suite

    doc["targets"] = suite.targets(doc)


def _largest_rows(doc: dict) -> list[dict]:
    """The largest size of each benchmark, in the document's order."""
    best: dict[str, dict] = {}
    for r in doc.get("rows") or []:
        cur = best.get(r["benchmark"])
        if cur is None or (r.get("elements") or 0) > (cur.get("elements") or 0):
            best[r["benchmark"]] = r
    return list(best.values())


# -- charts -----------------------------------------------------------------------------------------


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def chart_speedup(doc: dict, path: Path) -> bool:
    """Horizontal bars, grouped by benchmark: skelpy's speedup over the first alternative of
    each kind that benchmark has (log scale; the value is written beside each bar)."""
    rows = _largest_rows(doc)
    bars = []          # (y, value, kind)
    groups = []        # (y centre, label)
    y = 0.0
    for r in rows:
        first = {}
        for a in r["alternatives"]:
            first.setdefault(a["kind"], a)
        kinds = [k for k in KIND_ORDER if k in first]
        if not kinds:
            continue
        ys = [y + i for i in range(len(kinds))]
        bars += [(yy, first[k]["speedup"], k) for yy, k in zip(ys, kinds)]
        groups.append(((ys[0] + ys[-1]) / 2, f"{r['benchmark']} {r['size']}"))
        y = ys[-1] + 1.8
    if not bars:
        return False
    plt = _plt()
    colors = dict(zip(KIND_ORDER, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    fig, ax = plt.subplots(figsize=(9, 0.24 * y + 1.4))
    seen = set()
    for yy, v, k in bars:
        ax.barh(yy, v, 0.85, color=colors[k], label=None if k in seen else KIND_NAMES[k])
        seen.add(k)
        ax.text(v, yy, f" {fmt_x(v)}", va="center", fontsize=7)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks([g[0] for g in groups], [g[1] for g in groups], fontsize=8)
    ax.set_ylim(y - 1.0, -1.0)
    lo = min(v for _, v, _ in bars)
    hi = max(v for _, v, _ in bars)
    ax.set_xlim(min(lo, 1.0) / 1.5, max(hi, 1.0) * 3)
    ax.set_xlabel("speedup of skelpy = alternative time / skelpy time (log; > 1: skelpy faster)")
    ax.set_title(f"skelpy vs alternatives on {doc['device']}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def chart_bandwidth(doc: dict, path: Path) -> bool:
    """Bars: the fraction of the device's copy bandwidth each memory-bound benchmark reaches
    (skelpy's figure, and the best of the part's parameter sweep where it has one)."""
    rows = [r for r in _largest_rows(doc) if r.get("fraction_of_copy") is not None]
    if not rows:
        return False
    plt = _plt()
    import numpy as np

    fig, ax = plt.subplots(figsize=(9, 0.42 * len(rows) + 1.6))
    y = np.arange(len(rows))
    vals = [100 * r["fraction_of_copy"] for r in rows]
    ax.barh(y, vals, 0.7, label="skelpy")
    for yy, v, r in zip(y, vals, rows):
        ax.text(v, yy, f" {fmt_pct(r['fraction_of_copy'])} ({fmt_num(r.get('GB/s'))} GB/s)",
                va="center", fontsize=7)
    ax.axvline(100, color="k", lw=0.8, label="copy bandwidth")
    ax.set_xlim(0, max(115.0, max(vals) * 1.25))
    ax.set_yticks(y, [f"{r['benchmark']} {r['size']}" for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"% of the measured copy bandwidth (suite: "
                  f"{fmt_num(doc.get('copy_bandwidth_GBs'))} GB/s)")
    ax.set_title(f"distance to the memory limit on {doc['device']}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def chart_tuning(doc: dict, path: Path) -> bool:
    """Bars: speedup over the defaults (tuning off) of model, online and the final tuned
    decision, per benchmark."""
    rows = [t for t in doc.get("tuning") or [] if "error" not in t]
    if not rows:
        return False
    plt = _plt()
    import numpy as np

    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.6))
    y = np.arange(len(rows))
    series = (("model", lambda t: t["model_speedup"]),
              ("online", lambda t: t["online_speedup"]),
              ("tuned (online + sampled exhaustive)", lambda t: t["speedup"]))
    h = 0.8 / len(series)
    for j, (label, fn) in enumerate(series):
        ax.barh(y + (j - 1) * h, [fn(t) for t in rows], h, label=label)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_yticks(y, [f"{t['benchmark']} {t['size']}" for t in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speedup over the default launch parameters (tuning off)")
    ax.set_title(f"tuned vs default on {doc['device']}", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def chart_devices(docs: list[dict], path: Path) -> bool:
    """Fraction of copy bandwidth per benchmark, all devices side by side."""
    per = [(d, {r["benchmark"]: r for r in _largest_rows(d)
                if r.get("fraction_of_copy") is not None}) for d in docs]
    benches = list(dict.fromkeys(b for _, rows in per for b in rows))
    if not benches or len(docs) < 1:
        return False
    plt = _plt()
    import numpy as np

    fig, ax = plt.subplots(figsize=(9, 0.45 * len(benches) * max(1, len(docs)) ** 0.5 + 1.6))
    y = np.arange(len(benches))
    h = 0.8 / len(per)
    for j, (d, rows) in enumerate(per):
        vals = [100 * rows[b]["fraction_of_copy"] if b in rows else np.nan for b in benches]
        ax.barh(y + (j - (len(per) - 1) / 2) * h, vals, h, label=d["device"])
    ax.axvline(100, color="k", lw=0.8)
    ax.set_yticks(y, benches, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("% of the device's measured copy bandwidth (largest size)")
    ax.set_title("distance to the memory limit, all devices", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# -- markdown ---------------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: list[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(_md_escape(c) if "<br>" not in str(c) else str(c) for c in r)
            + " |" for r in rows]
    return out


def _rate(r: dict) -> str:
    if r.get("GFLOP/s") is not None:
        return f"{fmt_num(r['GFLOP/s'])} GFLOP/s"
    if r.get("GB/s") is not None:
        return f"{fmt_num(r['GB/s'])} GB/s"
    return "–"


def _alt_cell(r: dict) -> str:
    return "<br>".join(f"{_md_escape(a['name'])} ({a['where']}): {fmt_ms(a['seconds'])} ms, "
                       f"**{fmt_x(a['speedup'])}**" for a in r["alternatives"]) or "–"


def _headline(doc: dict) -> str:
    s = doc.get("summary") or {}
    parts = []
    for k in KIND_ORDER:
        g = (s.get("speedup_geomean_by_kind") or {}).get(k)
        if g is not None:
            parts.append(f"vs {KIND_NAMES[k]} {fmt_x(g)} (geometric mean of "
                         f"{s['speedup_count_by_kind'][k]})")
    if s.get("best_fraction_of_copy") is not None:
        parts.append(f"best fraction of copy bandwidth {fmt_pct(s['best_fraction_of_copy'])} "
                     f"({s.get('best_fraction_of_copy_benchmark')})")
    if s.get("tuned_over_default_geomean") is not None:
        parts.append(f"tuned over default {fmt_x(s['tuned_over_default_geomean'])} geometric "
                     f"mean, up to {fmt_x(s.get('tuned_over_default_max'))}")
    return f"- **{doc['device']}** ({doc.get('device_kind')}): " + "; ".join(parts)


def _closing_rows(doc: dict) -> list[list[str]]:
    """One line per benchmark (largest size): skelpy's speedup against each alternative."""
    out = []
    for r in _largest_rows(doc):
        cells = []
        for k in KIND_ORDER[:-1]:
            alts = [a for a in r["alternatives"] if a["kind"] == k]
            cells.append("<br>".join(f"{fmt_x(a['speedup'])}" + (f" ({_md_escape(a['name'])})"
                                                                  if len(alts) > 1 else "")
                                     for a in alts) or "–")
        out.append([r["label"], r["size"], *cells])
    return out


def device_section(doc: dict, charts: dict[str, str]) -> list[str]:
    slug = doc.get("device_slug", "device")
    L = [f"## {doc['device']}", ""]
    L.append(f"{doc.get('device_kind')} · {doc.get('platform')} · {doc.get('compute_units')} "
             f"compute units · copy bandwidth **{fmt_num(doc.get('copy_bandwidth_GBs'))} GB/s** "
             f"(device-to-device copy, read + write, this run) · run {doc.get('time')} on "
             f"{doc.get('host')} · skelpy {doc.get('skelpy')} ({doc.get('git') or 'no git'}) · "
             f"pyopencl {doc.get('pyopencl')} · budget {fmt_num(doc.get('budget_s'))} s, used "
             f"{fmt_num(doc.get('elapsed_s'))} s · tuning store: {doc.get('store')} · "
             f"source: `results/{doc.get('_file', slug + '.json')}`")
    L.append("")
    L.append("### Benchmarks")
    L.append("")
    L.append("skelpy's kernel time at the parameters it chooses by itself; `% of copy` is its "
             "GB/s over the copy bandwidth measured by the same part (column `copy GB/s`); "
             "`best skelpy point` is the fastest of the parameter points or variants "
             "(ordered reduce, scan method) that the part also measured.")
    L.append("")
    rows = []
    for r in doc.get("rows") or []:
        rows.append([r["label"], r["size"], fmt_ms(r["skelpy_s"]), _rate(r),
                     fmt_num(r.get("copy_GBs")), fmt_pct(r.get("fraction_of_copy")),
                     fmt_ms(r.get("skelpy_best_s")), _alt_cell(r)])
    L += _table(["benchmark", "size", "skelpy ms", "achieved", "copy GB/s", "% of copy",
                 "best skelpy point ms", "alternatives: time, speedup of skelpy"], rows)
    L.append("")
    for key, title in (("speedup", "speedup over the alternatives"),
                       ("bandwidth", "fraction of the copy bandwidth")):
        if key in charts:
            L += [f"![{title}, {doc['device']}]({charts[key]})", ""]
    tun = doc.get("tuning") or []
    if tun:
        L.append("### Tuned vs default")
        L.append("")
        setup = doc.get("tuning_setup") or {}
        L.append("Each benchmark in one process on a fresh tuning store: `off` runs the "
                 "space's default parameters, `model` what the model mode picks with no "
                 "measurements yet, `online` after the online mode settled (at most "
                 f"{setup.get('online_candidates', '?')} candidates), `tuned` after an "
                 f"exhaustive sweep of a sample of at most {setup.get('max_points', '?')} "
                 "legal points per kernel (plus the default and online's choice). The modes "
                 "run in that order on one store, shared by the benchmarks (Canny's stages "
                 "can profit from the Gaussian's measurements). Each ratio is over the "
                 "defaults timed in alternating rounds with that mode (a busy machine slows "
                 "both alike); `default ms` is the one timed alongside the tuned decision.")
        L.append("")
        trs = []
        for t in tun:
            if "error" in t:
                trs.append([t["benchmark"], t["size"], "error", "", "", "", "", t["error"], ""])
                continue
            trs.append([t["label"], t["size"], fmt_ms(t.get("tuned_default_s")),
                        fmt_ms(t["tuned_s"]), f"**{fmt_x(t['speedup'])}**",
                        fmt_x(t.get("model_speedup")), fmt_x(t.get("online_speedup")),
                        _params(t.get("tuned_params")),
                        f"{t.get('sampled_points')} of {t.get('space_points')}"
                        + (" (cut by time)" if t.get("sweep_cut_by_time") else "")])
        L += _table(["benchmark", "size", "default ms", "tuned ms", "tuned / default",
                     "model / default", "online / default", "tuned parameters",
                     "points swept"], trs)
        L.append("")
        if "tuning" in charts:
            L += [f"![tuned vs default, {doc['device']}]({charts['tuning']})", ""]
    ov = doc.get("overhead")
    if ov:
        L.append("### Call overhead")
        L.append("")
        L += _table(["raw pyopencl enqueue+wait µs", "skelpy call+wait µs", "ratio"],
                    [[fmt_num(ov.get("raw_enqueue_wait_us")),
                      fmt_num(ov.get("skelpy_call_wait_us")), fmt_x(ov.get("ratio"))]])
        L.append("")
    te = doc.get("tuner_eval")
    if te and te.get("summary"):
        L.append("### Autotuner evaluation ([Cummins 2018] ch. 7, leave-one-kernel-out)")
        L.append("")
        trs = []
        for name, s in te["summary"].items():
            trs.append([name, fmt_pct(s.get("perf_geomean")), fmt_pct(s.get("perf_median")),
                        fmt_x(s.get("speedup_over_static")), fmt_x(s.get("speedup_over_expert")),
                        fmt_x(s.get("speedup_over_default")),
                        fmt_x(s.get("speedup_over_runtime_choice"))])
        L += _table(["method", "of oracle (geomean)", "median", "vs best static",
                     "vs expert 32x4/128", "vs default", "vs local_size=None"], trs)
        oh = te.get("overhead") or {}
        L.append("")
        sizes = sorted({int(r["size"]) for r in te.get("rows") or [] if "size" in r})
        L.append(f"{te.get('scenarios')} scenarios, {te.get('kernels')} kernels"
                 + (f" at sizes {', '.join(f'{s}²' for s in sizes)}" if sizes else "")
                 + f"; refused fraction {fmt_pct(te.get('refused_fraction'))}; model decision "
                 f"{fmt_num(oh.get('model_decision_ms_median'))} ms (median), cache hit "
                 f"{fmt_num(oh.get('cache_hit_us_median'))} µs"
                 + ("; ratios from a confirmation round that re-measures the candidates "
                    "interleaved" if te.get("confirmed") else "")
                 + (f" (source: `results/{te['_file']}`)" if te.get("_file") else "") + ".")
        L.append("")
    L += report_multidev.section(doc.get("multidev") or {}, charts.get("multidev"))
    L.append("### Targets")
    L.append("")
    L += _table(["issue", "target", "measured", "threshold", "status"],
                [[str(t["issue"]), t["target"] + (f" ({t['where']})" if t.get("where") else ""),
                  fmt_value(t), fmt_threshold(t), _status(t)] for t in doc.get("targets") or []])
    L.append("")
    L.append("### Parts of this run")
    L.append("")
    prs = []
    for name, p in (doc.get("parts") or {}).items():
        if p.get("status") == "not selected":
            continue
        note = p.get("reason") or p.get("error", "") or p.get("warning", "")
        if p.get("kept_from"):
            note = f"kept from the run of {p['kept_from']} " + note
        prs.append([name, p.get("status", "?"), p.get("scale", ""),
                    fmt_num(p.get("seconds")), " ".join(p.get("argv") or []), note.strip()])
    L += _table(["part", "status", "scale", "seconds", "arguments", "note"], prs)
    notes = list(doc.get("extras_notes") or [])
    if doc.get("merge_errors"):
        notes += [f"{k}: could not read its result ({v})" for k, v in doc["merge_errors"].items()]
    if notes:
        L.append("")
        L += [f"- {n}" for n in notes]
    L.append("")
    return L


def _status(t: dict) -> str:
    if not t.get("applies", True):
        return "n/a on this device"
    if t.get("met") is None:
        return "not measured"
    return "met" if t["met"] else "**not met**"


def render(docs: list[dict], charts: dict[str, dict[str, str]], combined: str | None,
           results_dir: Path | None = None) -> str:
    L = ["# skelpy benchmark results", "",
         "_Generated by `python benchmarks/report.py` from the device documents in "
         "`benchmarks/results/` that `skelpy bench` (`make bench`) wrote; do not edit by "
         "hand._", "",
         "How to read it: every figure compares skelpy with an alternative measured **in the "
         "same run on the same device**. Speedup = alternative's time / skelpy's time (above "
         "1: skelpy is faster). OpenCL kernel times (skelpy, hand-written, pyopencl) come from "
         "profiling events, minimum of repeats; NumPy/SciPy times are host wall-clock; CuPy "
         "times are CUDA events. GB/s counts the bytes the operation must read and write; "
         "`% of copy` divides it by the device's copy bandwidth (a device-to-device buffer "
         "copy, read + write, measured in the same run), so the distance to the hardware "
         "limit is visible. Host-side alternatives (NumPy, SciPy) run on the host CPU, which "
         "on a GPU machine is a different processor from the device.", ""]
    if not docs:
        L += ["No device results yet: run `make bench` (or `skelpy bench`).", ""]
        return "\n".join(L)
    L += ["## Devices", ""]
    L += _table(["device", "kind", "platform", "copy GB/s", "run", "budget s", "used s",
                 "parts done", "not done"],
                [[d["device"], d.get("device_kind", ""), d.get("platform", ""),
                  fmt_num(d.get("copy_bandwidth_GBs")), d.get("time", ""),
                  fmt_num(d.get("budget_s")), fmt_num(d.get("elapsed_s")),
                  ", ".join(k for k, p in (d.get("parts") or {}).items()
                            if p.get("status") == "done"),
                  ", ".join(f"{k} ({p.get('status')})" for k, p in (d.get("parts") or {}).items()
                            if p.get("status") not in ("done", "not selected")) or "–"]
                 for d in docs])
    L += ["", "## Headline", ""]
    L += [_headline(d) for d in docs]
    L.append("")
    if combined:
        L += [f"![fraction of copy bandwidth, all devices]({combined})", ""]
    L += ["## Closing note: skelpy's ratio against each alternative", "",
          "Per benchmark (largest size measured) and device: speedup of skelpy over each "
          "alternative (alternative time / skelpy time).", ""]
    for d in docs:
        L += [f"**{d['device']}**", ""]
        L += _table(["benchmark", "size", *[KIND_NAMES[k] for k in KIND_ORDER[:-1]]],
                    _closing_rows(d))
        L.append("")
    L += ["## Targets from the earlier issues not yet met", ""]
    unmet = [(d, t) for d in docs for t in d.get("targets") or []
             if t.get("applies", True) and t.get("met") is False]
    unmeasured = [(d, t) for d in docs for t in d.get("targets") or []
                  if t.get("applies", True) and t.get("met") is None]
    if unmet:
        L += _table(["device", "issue", "target", "measured", "threshold"],
                    [[d["device"], str(t["issue"]), t["target"], fmt_value(t),
                      fmt_threshold(t)] for d, t in unmet])
    else:
        L.append("Every applicable target that was measured is met.")
    L.append("")
    if unmeasured:
        L.append("Not measured in these runs: " + "; ".join(
            f"{t['target']} on {d['device']}" for d, t in unmeasured) + ".")
        L.append("")
    for d in docs:
        L += device_section(d, charts.get(d.get("device_slug", ""), {}))
    if results_dir is not None:
        L += report_multidev.mpi_section(results_dir, MARKDOWN.parent)
    L += new_machine_section(results_dir)
    return "\n".join(L).rstrip() + "\n"


# -- the tuner on a new machine (issue 18) --------------------------------------------------------

NEW_DEVICE_CMD = ("python -m benchmarks.tuner_eval --new-device` (about 6 minutes; "
                  "`--unseen` leaves the device's own shipped data out) and "
                  "`python -m benchmarks.sweep_rate` (about 2.5 minutes), then on any machine "
                  "`python -m benchmarks.tuner_eval --leave-kernels-out --lodo "
                  "benchmarks/results/data-*.npz && python -m benchmarks.report")


def _json_files(results: Path, pattern: str) -> list[tuple[Path, dict]]:
    out = []
    for f in sorted(results.glob(pattern)):
        try:
            out.append((f, json.loads(f.read_text())))
        except (OSError, ValueError):
            continue
    return out


def new_machine_section(results: Path | None) -> list[str]:
    """Sweep rates, the zero-shot (leave-one-device-out) evaluation and the run of
    ``skelpy tune`` on a fresh store, from their JSON files; a device without them gets the
    command that produces them."""
    if results is None:
        return []
    L = ["## The tuner on a new machine (issue 18)", "",
         "_From `sweep_rate_<device>.json` (`python -m benchmarks.sweep_rate`), "
         "`tuner_lodo.json` (`python -m benchmarks.tuner_eval --lodo`) and "
         "`tuner_newdevice_<device>.json` (`python -m benchmarks.tuner_eval --new-device`)._",
         ""]
    rates = _json_files(results, "sweep_rate_*.json")
    L += ["### Sweep rate: launch points measured per second", "",
          "Time-boxed exhaustive sweeps of kernels never built before (fresh store, pyopencl's "
          "and PoCL's caches off). Before: the median of 3-20 repeats per point, each program "
          "built at its first launch; after: the device kind's budget (the minimum of 3-4 "
          "repeats on a CPU, whose noise only adds; the interleaved confirmation of the "
          "winners makes up the precision) and programs built ahead of their measurement "
          "(on a GPU in parallel threads, the next chunk while this one is measured). On "
          "PoCL the rate is set by PoCL's compiler: every kernel variant and every local "
          "size is compiled once (a work-group function at its first launch, ~0.2 s), and "
          "PoCL serialises its compiles (two build threads measured no faster), so neither "
          "the budget nor building ahead changes it there; `skelpy tune` gets twice the "
          "points per compile by measuring each program at two data sizes.", ""]
    rrows = []
    for _f, d in rates:
        for k, v in (d.get("summary") or {}).items():
            b, a = v.get("before"), v.get("after")
            rrows.append([d.get("device", "?"), k, fmt_num(b), fmt_num(a),
                          fmt_x(a / b) if a and b else "–"])
    if rrows:
        L += _table(["device", "kernel", "before points/s", "after points/s", "gain"], rrows)
    L += ["", "GPUs not listed here: run `python -m benchmarks.sweep_rate` on them "
          "(it writes `results/sweep_rate_<device>.json`; part of the command below).", ""]
    L += ["### Zero-shot: leave one device out", "",
          "A model trained on the other devices' shipped data only picks, for each scenario "
          "of the held-out device, one of the points measured there; performance is the best "
          "measured point's time over the pick's (the sweep's oracle: no confirmation round "
          "for data from other machines, so the ratios are conservative). A model never "
          "predicts for a kind of device it has no data of: then the default runs.", ""]
    lodo = _json_files(results, "tuner_lodo.json")
    if lodo:
        doc = lodo[0][1]
        for key, title in (("same_kernels", "other devices' data of every kernel"),
                           ("kernels_left_out", "the held-out scenario's kernel left out "
                            "on every device")):
            res = doc.get(key)
            if not res:
                continue
            L += [f"Trained on {title}:", ""]
            L += _table(["held-out device", "scenarios", "zero-shot (geomean)", "median",
                         "default (geomean)", "model used for", "trained on"],
                        [[dev, str(r["scenarios"]), fmt_pct(r["zero_shot_geomean"]),
                          fmt_pct(r["zero_shot_median"]), fmt_pct(r["default_geomean"]),
                          str(r["model_used"]), str(len(r["trained_on"])) + " devices"]
                         for dev, r in res["devices"].items()])
            L.append("")
    else:
        L += ["Not run yet: `python -m benchmarks.tuner_eval --lodo`.", ""]
    L += ["### After `skelpy tune` on a fresh store", "",
          "Fresh store; `skelpy tune` with its default budget (2 min on a GPU, 8 on a CPU); "
          "then kernels it never saw (the evaluation's real kernels and issue 18's six, "
          "left out of the shipped data too) swept on a sample for their oracle and every "
          "method's pick re-measured interleaved with the best few; % of that oracle, "
          "geometric mean. `zero_shot`: the shipped model alone, before any measurement; "
          "`tuned`: after `skelpy tune`; `default`: no tuning.", ""]
    nd = _json_files(results, "tuner_newdevice_*.json")
    nrows = []
    for _f, d in nd:
        s = d.get("summary") or {}
        t = d.get("tune") or {}
        who = d.get("device", "?") + (" (its shipped data left out)" if d.get("unseen") else "")
        nrows.append([who, str(len(d.get("rows") or [])),
                      fmt_pct((s.get("default") or {}).get("perf_geomean")),
                      fmt_pct((s.get("zero_shot") or {}).get("perf_geomean")),
                      fmt_pct((s.get("tuned") or {}).get("perf_geomean")),
                      f"{fmt_num(t.get('total_seconds'))} s",
                      f"{t.get('points', '?')} points, {t.get('scenarios', '?')} scenarios",
                      ", ".join(sorted(t.get("per_kind") or {}))])
    if nrows:
        L += _table(["device", "held-out scenarios", "default", "zero-shot", "tuned",
                     "tune took", "tune measured", "kinds measured"], nrows)
        L.append("")
    L += ["GPUs not listed here: run, on a machine with the GPU, "
          f"`{NEW_DEVICE_CMD}`; the first also writes "
          "`results/data-<device>.npz`, the device's training data to ship "
          "(see the README's autotuner section).", ""]
    return L


def _device_choice(results: Path, md_dir: Path) -> str:
    """The section of ``benchmarks/device_choice.py``'s results (written by that script)."""
    try:
        from benchmarks import device_choice
    except ImportError:                       # run as a script from benchmarks/
        import device_choice
    return device_choice.markdown(results, md_dir)


def main(argv: Sequence[str] | None = None) -> Path:
    """Write the markdown (and charts); returns its path."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=str(RESULTS_DIR), help="folder of device JSON files")
    ap.add_argument("--markdown", default=None, help="output (default benchmarks/RESULTS.md, "
                    "or RESULTS.md in --results when that is not the default folder)")
    ap.add_argument("--no-charts", action="store_true")
    args = ap.parse_args(argv)
    results = Path(args.results).resolve()
    md = Path(args.markdown) if args.markdown else (
        MARKDOWN if results == RESULTS_DIR.resolve() else results / "RESULTS.md")
    md = md.resolve()
    docs = load(results)
    charts: dict[str, dict[str, str]] = {}
    combined = None

    def rel(p: Path) -> str:
        try:
            return p.relative_to(md.parent).as_posix()
        except ValueError:
            return p.as_posix()

    if not args.no_charts and docs:
        try:
            for d in docs:
                slug = d.get("device_slug", "device")
                got = {}
                for key, fn in (("speedup", chart_speedup), ("bandwidth", chart_bandwidth),
                                ("tuning", chart_tuning)):
                    path = results / f"bench-{slug}-{key}.png"
                    if fn(d, path):
                        got[key] = rel(path)
                path = results / f"bench-{slug}-multidev.png"
                if d.get("multidev") and report_multidev.chart(d["multidev"], path, _plt()):
                    got["multidev"] = rel(path)
                charts[slug] = got
            path = results / "bench-devices-fraction-of-copy.png"
            if chart_devices(docs, path):
                combined = rel(path)
        except ImportError:
            print("(no charts: matplotlib is missing; pip install 'skelpy[plot]')",
                  file=sys.stderr)
    md.write_text(render(docs, charts, combined, results) + _device_choice(results, md.parent))
    print(f"wrote {md} ({len(docs)} device(s)"
          + (f", {sum(len(c) for c in charts.values()) + bool(combined)} charts" if charts
             else "") + ")")
    return md


if __name__ == "__main__":
    main()
