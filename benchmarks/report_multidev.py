"""The "Several devices" section of ``benchmarks/RESULTS.md`` and its scaling chart, from the
``multidev`` part of a suite document (``benchmarks/bench_multidev.py``). Nothing is measured
here; every number is the JSON's."""

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
           "for the host); both per step on average (runs before the stall column existed "
           "leave it empty).", ""]
    if chart:
        out += [f"![scaling]({chart})", ""]
    out.append("| case | size | devices | kernel ms | wall ms | speedup (kernel) | "
               "speedup (wall) | k | exchange | stall | target |")
    out.append("|" + "|".join(" --- " for _ in range(11)) + "|")
    for r in rows:
        if "error" in r:
            out.append(f"| {r['case']} | {r['size']} | {r['devices']} | {r['error']} "
                       "| | | | | | | |")
            continue
        exch = r.get("exchange_fraction")
        target = r.get("target")
        met = "" if target is None else (" ✓" if (r.get("speedup_kernel") or 0) >= target
                                         else " ✗")
        out.append(f"| {r['case']} | {r['size']} | {r['devices']} | {_ms(r.get('kernel_s'))} | "
                   f"{_ms(r.get('wall_s'))} | {_x(r.get('speedup_kernel'))} | "
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
