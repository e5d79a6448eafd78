"""Fused and streamed stencil sequences (``a >> b >> c`` as one kernel) against the same
sequence staged.

    python -m benchmarks.bench_sequence [--quick] [--sizes 1024,4096] [--cases canny,canny_sep,blur_lap]
                                        [--reps 10]

Cases (the issue's showcase is Canny, smoothing -> Sobel -> non-maximum suppression):

- ``canny``: Gaussian 5x5 (sigma 1, float32, reflect) >> Sobel (float32 -> int32: the gradient
  magnitude times 16 with the gradient direction in 4 bins, as OpenCV's integer Canny keeps
  them, reflect) >> non-maximum suppression with the double threshold (int32 -> uint8: 2
  strong, 1 weak, 0 none; constant 0);
- ``canny_sep``: the same with the Gaussian as two 1-D stencils (rows >> columns), 4 stages;
- ``blur_lap``: Gaussian 3x3 >> Laplacian (float32, nearest), two light stages.

For each case and size it times, with OpenCL profiling events (minimum over ``--reps`` rounds
that run every variant once, all launches of a call summed): ``staged`` (``params={"fuse": 0}``:
one kernel per stage, each at the parameters skelpy chooses), ``fused`` (``params={"fuse":
1}``: the fused tile skelpy chooses) and a few other fused tiles, ``streamed`` (``params={"fuse":
2}``: one streaming pass at the GPU's default stream tile) and a few other stream tiles, and
``default`` (no params: what the tuner decides: staged, fused or streamed). Every result is
compared bit for bit with the staged one (``equal``). ``speedup`` = staged / variant time.
The issue's target: Canny at 4096^2 on the H200 with fused or streamed >= 1.3x staged.
``split`` rows (Canny cases): the smoothing staged, then Sobel >> NMS as one fused (or
streamed) kernel, as two calls whose kernel times are summed: the measurement behind a
partial fusion, which the sequence's decision does not make yet.

On the H200 the lead runs::

    python -m benchmarks.bench_sequence --quick --cases canny,canny_sep

(4096^2, 5 rounds; about a minute) and reads the ``streamed`` rows and the summary line
``best streamed / staged``; the exit status is 1 when any variant differs from staged.

Runs: on a GPU the full mode is 1024^2, 4096^2 and 8192^2; ``--quick`` 4096^2 (about a
minute). On a CPU (PoCL) ``--quick`` is 512^2. Results: a table on stdout and
``benchmarks/results/sequence-<device>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import skelpy as sk  # noqa: E402
from benchmarks.common import print_table, write_json  # noqa: E402

G5 = np.array([0.054489, 0.244201, 0.402620, 0.244201, 0.054489], np.float32)  # sigma 1
G3 = np.array([0.25, 0.5, 0.25], np.float32)
TAN22 = np.float32(0.41421356)
LOW, HIGH = np.int32(16 * 20), np.int32(16 * 60)     # thresholds on the magnitude x 16
TILES = ({"fu_wc": 32, "fu_wr": 8, "fu_cr": 4, "fu_cc": 1, "fu_flat": 2},
         {"fu_wc": 32, "fu_wr": 8, "fu_cr": 4, "fu_cc": 1, "fu_flat": 1},
         {"fu_wc": 32, "fu_wr": 8, "fu_cr": 4, "fu_cc": 1, "fu_flat": 0},
         {"fu_wc": 64, "fu_wr": 4, "fu_cr": 4, "fu_cc": 2, "fu_flat": 1},
         {"fu_wc": 32, "fu_wr": 8, "fu_cr": 2, "fu_cc": 2, "fu_flat": 1},
         {"fu_wc": 16, "fu_wr": 16, "fu_cr": 2, "fu_cc": 2, "fu_flat": 1},
         {"fu_wc": 32, "fu_wr": 4, "fu_cr": 8, "fu_cc": 2, "fu_flat": 1},
         {"fu_wc": 64, "fu_wr": 4, "fu_cr": 8, "fu_cc": 1, "fu_flat": 2})
# --quick: runs of 4 and 8 (flat 2: register windows), 4 dealt one by one, and the 16x16 tile
# of 2 x 2 cells (the fused default before runs shared their windows)
QUICK_TILES = (TILES[0], TILES[1],
               {"fu_wc": 32, "fu_wr": 4, "fu_cr": 8, "fu_cc": 1, "fu_flat": 2},
               {"fu_wc": 16, "fu_wr": 16, "fu_cr": 2, "fu_cc": 2, "fu_flat": 2})
# stream tiles beside the default (windows from the ring, the walk a loop, 128 x 128)
STREAM_TILES = ({"tb_ring": 1, "tb_unroll": 1},
                {"tb_ring": 0, "tb_unroll": 1},
                {"tb_wc": 256, "tb_rows": 256},
                {"tb_wc": 64, "tb_wr": 2},
                {"tb_rows": 64},
                {"tb_rows": 512},
                {"tb_wc": 256, "tb_ring": 1, "tb_unroll": 1})
STREAM_KEYS = ("tb_wc", "tb_wr", "tb_rows", "tb_vec", "tb_ring", "tb_unroll", "tb_pre")


def gauss5(nb):
    acc = np.float32(0)
    for dr in range(-2, 3):
        row = np.float32(0)
        for dc in range(-2, 3):
            row += G5[dc + 2] * nb[dr, dc]
        acc += G5[dr + 2] * row
    return acc


def gauss5_rows(nb):
    acc = np.float32(0)
    for dc in range(-2, 3):
        acc += G5[dc + 2] * nb[0, dc]
    return acc


def gauss5_cols(nb):
    acc = np.float32(0)
    for dr in range(-2, 3):
        acc += G5[dr + 2] * nb[dr, 0]
    return acc


def sobel_code(nb):
    """The gradient as one int32: magnitude x 16 (truncated) x 4 + direction bin (0: compare
    left/right, 1: the main diagonal, 2: up/down, 3: the other diagonal)."""
    gi = (nb[1, -1] + 2 * nb[1, 0] + nb[1, 1]) - (nb[-1, -1] + 2 * nb[-1, 0] + nb[-1, 1])
    gj = (nb[-1, 1] + 2 * nb[0, 1] + nb[1, 1]) - (nb[-1, -1] + 2 * nb[0, -1] + nb[1, -1])
    ai = abs(gi)
    aj = abs(gj)
    d = np.int32(0)
    if ai > TAN22 * aj:
        if aj <= TAN22 * ai:
            d = np.int32(2)
        elif (gi > 0) == (gj > 0):
            d = np.int32(1)
        else:
            d = np.int32(3)
    mag = np.int32(np.sqrt(gi * gi + gj * gj) * np.float32(16))
    return mag * 4 + d


def nms(nb):
    """Non-maximum suppression along the direction bin, then the double threshold."""
    c = nb[0, 0]
    m = c // 4
    d = c - m * 4
    a = nb[0, -1]
    b = nb[0, 1]
    if d == 1:
        a = nb[-1, -1]
        b = nb[1, 1]
    elif d == 2:
        a = nb[-1, 0]
        b = nb[1, 0]
    elif d == 3:
        a = nb[-1, 1]
        b = nb[1, -1]
    keep = (m >= a // 4) & (m > b // 4)
    return np.uint8(2) if keep and m >= HIGH else (np.uint8(1) if keep and m >= LOW
                                                   else np.uint8(0))


def gauss3(nb):
    acc = np.float32(0)
    for dr in range(-1, 2):
        row = np.float32(0)
        for dc in range(-1, 2):
            row += G3[dc + 1] * nb[dr, dc]
        acc += G3[dr + 1] * row
    return acc


def laplace(nb):
    return nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0]


def make_case(name: str) -> sk.StencilSequence:
    sobel = sk.Stencil(sobel_code, border="reflect", out_dtype=np.int32)
    suppress = sk.Stencil(nms, border="constant", cval=0, out_dtype=np.uint8)
    if name == "canny":
        return sk.Stencil(gauss5, border="reflect") >> sobel >> suppress
    if name == "canny_sep":
        return (sk.Stencil(gauss5_rows, border="reflect")
                >> sk.Stencil(gauss5_cols, border="reflect") >> sobel >> suppress)
    if name == "blur_lap":
        return (sk.Stencil(gauss3, border="nearest")
                >> sk.Stencil(laplace, border="nearest"))
    raise SystemExit(f"unknown case {name}")


def image(n: int) -> np.ndarray:
    """A test picture with edges: a few discs and bars on a smooth gradient, plus noise."""
    rng = np.random.default_rng(1)
    y, x = np.mgrid[0:n, 0:n].astype(np.float32) / n
    img = 60 * x + 40 * y
    for cy, cx, r in ((0.3, 0.3, 0.15), (0.7, 0.6, 0.2), (0.4, 0.8, 0.1)):
        img += 120 * (((y - cy) ** 2 + (x - cx) ** 2) < r * r)
    img += 80 * ((np.floor(x * 16) % 2) * (y > 0.85))
    return (img + rng.normal(0, 4, (n, n))).astype(np.float32)


def bench_case(name: str, n: int, reps: int, tiles, stream_tiles=()) -> list[dict]:
    """Every variant once per round, ``reps`` rounds (so that a drifting load on a shared
    machine colours all variants alike); each variant's minimum kernel time."""
    seq = make_case(name)
    m = sk.Matrix(image(n))
    variants = [("staged", {"fuse": 0}), ("fused", {"fuse": 1})]
    variants += [("fused tile", dict(t, fuse=1)) for t in tiles]
    variants.append(("streamed", {"fuse": 2}))
    variants += [("stream tile", dict(t, fuse=2)) for t in stream_tiles]
    variants.append(("default", None))
    # the head stages staged, the last two (Sobel >> NMS, light) as one fused or streamed
    # kernel: two calls, their kernel times summed (what a split decision would run)
    head, tail = seq.stages[:-2], None
    if head:
        head = sk.StencilSequence(*head) if len(head) > 1 else head[0]
        tail = sk.StencilSequence(*seq.stages[-2:])
        variants += [("split fused", {"split": 1}), ("split streamed", {"split": 2})]
        variants += [("split fused tile", dict(t, split=1)) for t in tiles[:2]]
    best: dict[int, float] = {}
    outs: dict[int, object] = {}
    launches: dict[int, object] = {}
    errors: dict[int, str] = {}
    for rnd in range(reps + 1):                # round 0 builds and tunes
        for i, (_run, params) in enumerate(variants):
            if i in errors:
                continue
            try:
                if params is not None and "split" in params:
                    mid = head(m, params={"fuse": 0}) if isinstance(head, sk.StencilSequence) \
                        else head(m)
                    t_head = head.last_launch.kernel_time
                    tp = {k: v for k, v in params.items() if k != "split"}
                    out = tail(mid, params=dict(tp, fuse=params["split"]))
                    secs, launch = t_head + tail.last_launch.kernel_time, tail.last_launch
                else:
                    out = seq(m, params=params)
                    secs, launch = seq.last_launch.kernel_time, seq.last_launch
            except sk.SkelpyError as exc:      # a tile the device refuses
                errors[i] = str(exc)[:80]
                continue
            if rnd:
                best[i] = min(best.get(i, float("inf")), secs)
            outs[i], launches[i] = out, launch
    ref = outs[0].to_numpy()
    t_staged = best[0]
    rows = []
    for i, (run, params) in enumerate(variants):
        if i in errors:
            rows.append({"case": name, "size": n, "run": run, "params": params,
                         "error": errors[i]})
            continue
        ln = launches[i]
        streamed = bool(getattr(ln, "streamed", False))
        row = {"case": name, "size": n, "run": run, "ms": best[i] * 1e3,
               "speedup": t_staged / best[i], "fused": bool(ln.fused) and not streamed,
               "streamed": streamed,
               "equal": bool(np.array_equal(outs[i].to_numpy(), ref))}
        if streamed:
            row["tile"] = {k: ln.params[k] for k in STREAM_KEYS}
        elif ln.fused:
            row["tile"] = {k: ln.params[k] for k in ("fu_wc", "fu_wr", "fu_cr", "fu_cc",
                                                     "fu_flat")}
        rows.append(row)
    return rows


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", default=None, help="comma-separated matrix sizes (square)")
    ap.add_argument("--cases", default="canny,canny_sep,blur_lap")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--out", default=None, help="folder for the JSON (default results/)")
    args = ap.parse_args(argv)
    dev = sk.current_device()
    gpu = dev.kind == "gpu"
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]
    elif gpu:
        sizes = [4096] if args.quick else [1024, 4096, 8192]
    else:
        sizes = [512] if args.quick else [512, 1024]
    reps = args.reps or (5 if args.quick else 10)
    tiles = QUICK_TILES if args.quick else TILES
    stream_tiles = STREAM_TILES[:4] if args.quick else STREAM_TILES
    rows = []
    for name in args.cases.split(","):
        for n in sizes:
            rows.extend(bench_case(name, n, reps, tiles, stream_tiles))
    print_table([{k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in r.items()}
                 for r in rows],
                ["case", "size", "run", "tile", "ms", "speedup", "fused", "streamed",
                 "equal"],
                title=f"Fused and streamed vs staged stencil sequences on {dev.name}")
    best: dict[str, dict[str, float]] = {"fused": {}, "streamed": {}, "split": {}}
    for r in rows:
        kind = "split" if str(r.get("run", "")).startswith("split") and "ms" in r else \
            "streamed" if r.get("streamed") else "fused" if r.get("fused") else None
        if kind and "ms" in r and r["run"] != "default":
            key = f"{r['case']}@{r['size']}"
            best[kind][key] = max(best[kind].get(key, 0.0), r["speedup"])
    summary = {"best_fused_speedup": best["fused"], "best_streamed_speedup": best["streamed"],
               "best_split_speedup": best["split"],
               "default": {f"{r['case']}@{r['size']}": "streamed" if r["streamed"] else
                           "fused" if r["fused"] else "staged"
                           for r in rows if r["run"] == "default" and "ms" in r},
               "all_equal": all(r.get("equal", True) for r in rows),
               "target": "canny 4096^2 on the H200: fused or streamed >= 1.3x staged"}
    for kind in ("fused", "streamed", "split"):
        print(f"best {kind} / staged:",
              ", ".join(f"{k} {v:.2f}x" for k, v in best[kind].items()) or "-")
    print("default runs:", ", ".join(f"{k} {v}" for k, v in summary["default"].items()))
    print("every variant equals staged bit for bit:", summary["all_equal"])
    data = {"sizes": sizes, "reps": reps, "quick": args.quick, "rows": rows,
            "summary": summary}
    path = write_json("sequence", dev.name, data,
                      directory=Path(args.out) if args.out else None)
    print(f"results: {path}")
    return data


if __name__ == "__main__":
    sys.exit(0 if main()["summary"]["all_equal"] else 1)
