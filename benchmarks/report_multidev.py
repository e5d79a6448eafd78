"""The "Several devices" section of ``benchmarks/RESULTS.md`` and its scaling chart, from the
``multidev`` part of a suite document (``benchmarks/bench_multidev.py``), and the MPI section
(``bench_mpi.py`` runs and the weak-scaling model of ``weak_scaling.py``). Nothing is measured
here; every number is a JSON's (the model's table is computed from the measured terms)."""

from __future__ import annotations

import json
from pathlib import Path


def attach(doc: dict, results: Path) -> None:
    """Use the standalone ``multidev-<device>.json`` of this device (``python -m
    benchmarks.bench_multidev``, also written by the suite's part) when it is newer than the
    multidev part in the suite document."""
    path = results / f"multidev-{doc.get('device_slug', '')}.json"
    try:
        alone = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    mine = doc.get("multidev") or {}
    if alone.get("rows") and str(alone.get("time", "")) >= str(mine.get("time", "")):
        doc["multidev"] = alone


def _ms(v) -> str:
    return "–" if v is None else f"{v * 1e3:.3g}"


def _pct(v) -> str:
    return "" if v is None else f"{v:.1%}"


def _x(v) -> str:
    return "–" if v is None else f"{v:.2f}x"


def section(md: dict, chart: str | None) -> list[str]:
    """Markdown lines: one row per case, size and device count."""
    rows = md.get("rows") or []
    if not rows:
        return []
    group = ", ".join(md.get("group") or [])
    out = ["### Several devices (issue 13)", "",
           f"Group: {group}; scale {md.get('scale')}, stencils {md.get('iterations')} "
           "iterations. Kernel time = the longest per-device span of the call's profiling "
           "events (devices run at once); speedup = one device's time / the group's; "
           "exchange = device time of halo copies / summed device spans; stall = time the "
           "devices' compute queues ran no kernel within their spans (waiting for halos or "
           "for the host); both per step on average; enqueue = the host's time to make the "
           "call (median; near the kernel time, the devices waited for the host). Runs "
           "before a column existed leave it empty.", ""]
    if chart:
        out += [f"![scaling]({chart})", ""]
    out.append("| case | size | devices | kernel ms | wall ms | enqueue ms | speedup (kernel) | "
               "speedup (wall) | k | exchange | stall | target |")
    out.append("|" + "|".join(" --- " for _ in range(12)) + "|")
    for r in rows:
        if "error" in r:
            out.append(f"| {r['case']} | {r['size']} | {r['devices']} | {r['error']} "
                       "| | | | | | | | |")
            continue
        exch = r.get("exchange_fraction")
        target = r.get("target")
        met = "" if target is None else (" ✓" if (r.get("speedup_kernel") or 0) >= target
                                         else " ✗")
        out.append(f"| {r['case']} | {r['size']} | {r['devices']} | {_ms(r.get('kernel_s'))} | "
                   f"{_ms(r.get('wall_s'))} | {_ms(r.get('enqueue_s'))} | "
                   f"{_x(r.get('speedup_kernel'))} | "
                   f"{_x(r.get('speedup_wall'))} | {r.get('k', '')} | "
                   f"{'' if exch is None else f'{exch:.1%}'} | {_pct(r.get('stall_fraction'))} | "
                   f"{'' if target is None else f'≥ {target}x{met}'} |")
    out.append("")
    return out


def chart(md: dict, path: Path, plt) -> bool:
    """Bars: kernel-time speedup over one device per case and size, one bar per group size."""
    rows = [r for r in md.get("rows") or [] if r.get("speedup_kernel") is not None]
    if not rows:
        return False
    labels = list(dict.fromkeys(f"{r['case']} {r['size']}" for r in rows))
    counts = sorted({r["devices"] for r in rows})
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(labels) * len(counts) + 1.5))
    h = 0.8 / len(counts)
    for j, c in enumerate(counts):
        for i, lab in enumerate(labels):
            r = next((r for r in rows if f"{r['case']} {r['size']}" == lab
                      and r["devices"] == c), None)
            if r is None:
                continue
            y = i + j * h
            ax.barh(y, r["speedup_kernel"], h, color=f"C{j}",
                    label=f"{c} devices" if i == 0 else None)
            ax.text(r["speedup_kernel"], y, f" {r['speedup_kernel']:.2f}x", va="center",
                    fontsize=7)
    for c in counts:
        ax.axvline(c, color="grey", lw=0.6, ls="--")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_yticks([i + 0.4 - h / 2 for i in range(len(labels))], labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speedup over one device (kernel time; dashed: linear)")
    ax.set_title("skelpy on several devices: " + ", ".join(md.get("group") or [])[:80],
                 fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


WEAK_CMD = ("mpiexec -n P python -m benchmarks.weak_scaling measure --spec mpi:gpu "
            "--rows 4096 --cols 4096 --iterations 20")


def mpi_section(results: Path, md_dir: Path) -> list[str]:
    """Issue 14: bench_mpi's runs (``mpi-*.json``) and the weak-scaling model with its chart
    (``results/weak-scaling.png``) from the measured terms (``weak-scaling-*.json``)."""
    import argparse
    import sys

    runs = []
    for f in sorted(results.glob("mpi-*.json")):
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if str(d.get("schema", "")).startswith("skelpy-bench-mpi"):
            runs.append((f, d))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks import weak_scaling as ws

    terms = ws.load_terms([], results)
    if not runs and not terms:
        return []
    out = ["## Beyond one host: MPI (issue 14)", ""]
    for f, d in runs:
        group = d.get("mode") == "group"
        what = (f"{d.get('ranks')} devices of one process (the in-process group, "
                "`bench_mpi --group`)" if group else f"{d.get('ranks')} MPI ranks")
        timing = ("wall time around the call and a finish of every queue" if group else
                  "wall time from barrier to barrier")
        out += [f"**{d.get('device')}**, {what} (`{f.name}`): {timing}, best of the "
                "repeats.", "",
                f"| case | {'devices' if group else 'ranks'} | ms | one device ms | speedup | "
                "efficiency |",
                "| --- | --- | --- | --- | --- | --- |"]
        for r in d.get("rows", []):
            out.append(f"| {r['case']} | {r['ranks']} | {_ms(r.get('seconds'))} | "
                       f"{_ms(r.get('one_device_seconds'))} | {_x(r.get('speedup'))} | "
                       f"{_pct(r.get('efficiency'))} |")
        out.append("")
    if not terms:
        return out
    parser = argparse.ArgumentParser()
    ws.add_model_options(parser)
    a = parser.parse_args([])
    rows = ws.table(terms, a)
    chart = results / "weak-scaling.png"
    have_chart = ws.chart(rows, chart)
    out += ["### Weak scaling to 4096 GPUs (a model from measured terms)", "",
            "`python -m benchmarks.weak_scaling model` predicts one heat 5-point step per GPU "
            f"holding {a.cells_side}² float32 cells of a square global grid, from the terms "
            "measured by `" + WEAK_CMD + "` (here: PoCL CPU devices, mpiexec -n 2..8 on a "
            "2-core VM shared with other jobs: the terms are noisy and the CPU's halo latency "
            "is a CPU's). Assumptions: compute time per cell is constant (the measured "
            "cell_s); one halo exchange costs alpha + beta x bytes (fitted to exchanges of "
            "three row widths), beyond "
            f"{a.gpus_per_node} GPUs per node plus {a.net_latency * 1e6:.0f} us and at most "
            f"{a.net_gbs:.0f} GB/s (a network assumed, not measured); one Allreduce (skelpy's "
            f"Reduce) every {a.allreduce_every} steps costs a + b log2 P, fitted to the "
            "measured P; k (steps per exchange) is chosen per P for the least time; the 2-D "
            "block split (not in skelpy) adds a pack and an unpack kernel per exchange; "
            "overlap = the exchange hidden behind the interior, as skelpy does it (on the "
            "2×H200 the in-process group's heat 4096² spends 2.8% of device time in halo "
            "copies and its queues stall 5% of their span; 16384² 1.2% and 0.4%). "
            "Efficiency = one GPU's step / the predicted step.", ""]
    for t in terms:
        out.append(f"- {t.name}: {t.cell_s * 1e12:.2f} ps per cell-step, halo alpha "
                   f"{t.alpha * 1e6:.1f} us, 1/beta "
                   f"{(1 / t.beta / 1e9) if t.beta else float('inf'):.3g} GB/s, Allreduce "
                   f"{t.ar[0] * 1e6:.1f} + {t.ar[1] * 1e6:.1f} log2(P) us"
                   + (" (derived from the 2-rank bench_mpi run: heat 16384² excess over half "
                      "the one-GPU time per round of 4 steps, Reduce 2^28 excess; 1/beta "
                      "assumed 55 GB/s, the pinned copy rate; replace by running the command "
                      "above on the GPU host)" if t.source == "derived" else ""))
    out.append("")
    if have_chart:
        try:
            rel = chart.relative_to(md_dir).as_posix()
        except ValueError:
            rel = chart.as_posix()
        out += [f"![weak scaling]({rel})", ""]
    out += ["| terms | split | P | k (overlap) | step ms | exchange ms/step | Allreduce us | "
            "efficiency (overlap) | efficiency (no overlap) |",
            "|" + "|".join(" --- " for _ in range(9)) + "|"]
    for r in rows:
        if not r["overlap"] or r["P"] not in (8, 64, 512, 4096):
            continue
        other = next(x for x in rows if x["terms"] == r["terms"] and x["split"] == r["split"]
                     and x["P"] == r["P"] and not x["overlap"])
        out.append(f"| {r['terms']} | {r['split']} | {r['P']} | {r['k']} | "
                   f"{r['step_s'] * 1e3:.3g} | {r['exchange_s'] * 1e3:.3g} | "
                   f"{r['allreduce_s'] * 1e6:.3g} | {r['efficiency']:.1%} | "
                   f"{other['efficiency']:.1%} |")
    out.append("")
    return out
