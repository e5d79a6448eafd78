"""A weak-scaling model of skelpy under MPI for 8 to 4096 GPUs, from measured terms (issue 14).

Measure (every rank; rank 0 writes ``results/weak-scaling-<device>-n<P>.json``)::

    mpiexec -n P python -m benchmarks.weak_scaling measure [--spec mpi:gpu] [--cols 4096]

- ``allreduce``: a raw ``MPI_Allreduce`` and a raw ``MPI_Allgather`` of 8 bytes per rank, and
  skelpy's ``Reduce`` (a sum) of one float per rank: each rank's fold kernel, the download of
  its partial into its pinned status record, ONE ``Allgather`` of the records (status and
  partial), the fold on every host (``skelpy/mpi/exchange.py``): median seconds of the whole
  call, so the term is what a program pays per Reduce, not MPI's part of it;
- ``halo``: one halo exchange between row neighbours (skelpy's exchange: device -> pinned host
  memory -> MPI -> pinned -> device, both neighbours at once) for rows of several widths, and
  its fit ``seconds = alpha + beta * bytes`` (bytes one rank sends per exchange);
- ``cell_s``: heat 5-point float32 on this rank's device alone (the tuner's choice of passes),
  seconds per cell and step at ``--rows`` x ``--cols`` cells.

Model (``python -m benchmarks.weak_scaling model [FILES...] [--chart PATH]``; no device
needed; with no files, every ``results/weak-scaling-*.json``): each GPU holds n x n cells
(``--cells-side``, default 16384) of a square global grid N x N, N = n sqrt(P), heat 5-point
(reach 1), ``--allreduce-every`` steps one Allreduce (a convergence test). Per step:

- compute ``C = cell_s * (n^2 + redundant cells)``: a k-deep halo recomputes (k - 1) rows of
  the halo width per step on average;
- 1-D row split (what skelpy does): each rank sends k rows of N cells to each of its 2
  neighbours every k steps: ``X = alpha + beta * 2 k N 4 bytes``;
- 2-D block split (not in skelpy; for comparison): sqrt(P) x sqrt(P) blocks, 4 neighbours,
  k x n cells each, plus a pack and an unpack kernel for the columns (``--launch``);
- overlapped (skelpy: boundary rows first, exchange behind the interior):
  ``T = max(C, X / k + C_border)``, not overlapped ``T = C + X / k``; k is chosen per P from
  (1, 2, 4, 8, 16) for the least T (the cost rule the tuner follows);
- Allreduce: ``A(P) = a + b log2 P`` fitted to the measured P (a tree); from one P only,
  b is MPI's own Allgather per level (measured; else its Allreduce; else 2 us assumed: the
  collective skelpy's Reduce makes) and a the rest (a kernel, a download, the host's work);
  the gathered records' P x 48 bytes (196 KB at 4096 ranks, ~8 us at 25 GB/s) are left out;
- beyond ``--gpus-per-node`` ranks the network adds ``--net-latency`` to alpha and its
  bandwidth ``--net-gbs`` caps 1/beta (assumptions: InfiniBand NDR-like, 2 us, 25 GB/s).

Efficiency = one GPU's step (``cell_s * n^2``, no exchange) / the predicted step.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import time_events  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SCHEMA = "skelpy-weak-scaling/1"
PS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
KS = (1, 2, 4, 8, 16)
ASSUMED_LEVEL_S = 2e-6       # an Allreduce tree level when only one P was measured, no raw MPI


def heat(u):
    return u[0, 0] + 0.1 * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4 * u[0, 0])


# -- measurement ---------------------------------------------------------------------------------


def _median_time(fn, reps: int, sync) -> float:
    out = []
    for i in range(reps + 1):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        if i:
            out.append(time.perf_counter() - t0)
    return statistics.median(out)


def measure(args) -> dict | None:
    from mpi4py import MPI

    import skelpy as sk
    from benchmarks.common import device_slug
    from skelpy import runtime
    from skelpy.containers.distributions import BLOCK
    from skelpy.distribution.exchange import Move
    from skelpy.distribution.parts import distributed
    from skelpy.distribution.stencil_rows import RowPlan

    comm = MPI.COMM_WORLD
    P, rank = comm.size, comm.rank
    sk.use(args.spec)
    rt = runtime.current()
    group = rt.group
    ex = group.exchange

    def slowest(seconds: float) -> float:
        return comm.allreduce(seconds, op=MPI.MAX)

    # Allreduce: raw MPI, and skelpy's Reduce of one value per rank
    x, y, every = np.ones(1), np.empty(1), np.empty(P)
    raw = _median_time(lambda: comm.Allreduce(x, y), args.reps * 20, comm.Barrier)
    raw_gather = _median_time(lambda: comm.Allgather(x, every), args.reps * 20, comm.Barrier)
    add = sk.Reduce(lambda a, b: a + b, identity=0)
    v = sk.Vector.from_local(np.ones(1, np.float32))
    red = slowest(_median_time(lambda: add(v), args.reps * 20, comm.Barrier))

    # halo exchange between row neighbours, through skelpy's exchange
    halo = []
    for cols in args.halo_cols:
        rows = max(2, args.rows // 4) * P
        m = sk.Matrix.from_local(np.zeros((rows // P, cols), np.float32))
        parts = distributed(m, group, sk.Overlap(1))
        plan = RowPlan(BLOCK.ranges(rows, P), rows, 1, 1, "nearest", 1)
        rb = parts.row_bytes
        moves = [Move(parts.span(parts.parts[t.src], t.src_row),
                      parts.span(parts.parts[t.dst], t.dst_row), t.count * rb)
                 for t in plan.halo_transfers(ghosts_too=False)]
        sent = sum(mv.nbytes for mv in moves if mv.src.rank == rank)

        def once(moves=moves):
            ex.move(moves)
            ex.finish()

        t = slowest(_median_time(once, args.reps * 4, comm.Barrier))
        halo.append({"cols": cols, "bytes": comm.allreduce(sent, op=MPI.MAX), "seconds": t})
    fit = _fit([h["bytes"] for h in halo], [h["seconds"] for h in halo]) if P > 1 else None

    # kernel time per cell and step, on this rank's device alone
    mine = rt.device
    sk.use(mine)
    step = sk.Stencil(heat, border="nearest")
    grid = np.random.default_rng(rank).random((args.rows, args.cols), dtype=np.float32)
    mat = sk.Matrix(grid)

    def run():
        step(mat, iterations=args.iterations)
        return step.last_launch.events

    # device time from the call's profiling events (a wall clock around a download timed
    # the 64 MB transfer and the host's per-step work, not the kernel: 76 ps against the
    # kernel's 3.5 ps per cell-step on an H200)
    cell = time_events(run, reps=args.reps, reduce="median") / (args.rows * args.cols
                                                                * args.iterations)
    params = dict(step.last_launch.params)
    sk.use(args.spec)
    cells = comm.gather(cell, root=0)
    if rank:
        return None
    doc = {"schema": SCHEMA, "device": mine.name, "device_kind": mine.kind, "ranks": P,
           "spec": args.spec, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "allreduce_mpi_s": raw, "allgather_mpi_s": raw_gather,
           "allreduce_skelpy_s": red, "halo": halo,
           "alpha_s": fit[0] if fit else None, "beta_s_per_byte": fit[1] if fit else None,
           "cell_s": statistics.median(cells), "cell_s_per_rank": cells,
           "cell_size": [args.rows, args.cols], "iterations": args.iterations,
           "stencil_params": params,
           "note": args.note or ("ranks share the host's cores" if mine.kind == "cpu" else "")}
    out = args.out or RESULTS / f"weak-scaling-{device_slug(mine.name)}-n{P}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"P={P}: Allreduce {raw * 1e6:.1f} us, Allgather {raw_gather * 1e6:.1f} us (MPI), "
          f"{red * 1e6:.1f} us (skelpy Reduce); "
          f"halo alpha {doc['alpha_s'] and doc['alpha_s'] * 1e6:.4} us, "
          f"cell {doc['cell_s'] * 1e12:.1f} ps; wrote {out}")
    return doc


def _fit(xs, ys) -> tuple[float, float]:
    """Least squares ``y = a + b x`` with a, b >= 0."""
    if len(xs) < 2 or len(set(xs)) < 2:
        return (float(ys[0]), 0.0)
    b, a = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return (max(float(a), 0.0), max(float(b), 0.0))


# -- the model ------------------------------------------------------------------------------------


class Terms:
    """The measured terms of one device kind (from one or more measurement files)."""

    def __init__(self, name: str, docs: list[dict], source: str):
        self.name, self.source = name, source
        docs = sorted(docs, key=lambda d: d["ranks"])
        self.ranks = [d["ranks"] for d in docs]
        self.cell_s = statistics.median(d["cell_s"] for d in docs)
        with_halo = [d for d in docs if d.get("alpha_s") is not None]
        self.alpha = statistics.median(d["alpha_s"] for d in with_halo) if with_halo else 0.0
        self.beta = statistics.median(d["beta_s_per_byte"] for d in with_halo) \
            if with_halo else 0.0
        multi = [d for d in docs if d["ranks"] > 1]
        xs = [math.log2(d["ranks"]) for d in multi]
        ys = [d["allreduce_skelpy_s"] for d in multi]
        if not multi:
            self.ar = (0.0, 0.0)
        elif len(set(xs)) < 2:
            # one P: the log term is MPI's own collective per tree level (the Allgather
            # skelpy's Reduce makes; older files: the Allreduce; or ASSUMED_LEVEL_S), the
            # rest a constant (the kernel, the download, the host's fold)
            raw = multi[0].get("allgather_mpi_s", multi[0].get("allreduce_mpi_s"))
            b = raw / xs[0] if raw is not None else ASSUMED_LEVEL_S
            self.ar = (max(ys[0] - b * xs[0], 0.0), b)
        else:
            self.ar = _fit(xs, ys)
        self.measured = {d["ranks"]: d for d in docs}

    def allreduce(self, P: int) -> float:
        return self.ar[0] + self.ar[1] * math.log2(P)


def predict(t: Terms, P: int, split: str, overlap: bool, a) -> dict:
    """One step's predicted seconds (best k) on P GPUs and its parts."""
    n = a.cells_side
    N = n * math.sqrt(P)
    alpha, beta = t.alpha, t.beta
    if a.gpus_per_node < P:
        alpha += a.net_latency
        beta = max(beta, 1 / (a.net_gbs * 1e9))
    best = None
    for k in KS:
        if split == "1-D rows":
            width, neighbours, extra = N, 2, 0.0
        else:
            width, neighbours, extra = n, 4, 2 * a.launch
        comp = t.cell_s * (n * n + (k - 1) * width * neighbours / 2)
        exch = alpha + extra + beta * neighbours * k * width * 4
        border = t.cell_s * neighbours * k * width
        step = max(comp, exch / k + border) if overlap else comp + exch / k
        step += t.allreduce(P) / a.allreduce_every
        if best is None or step < best["step_s"]:
            best = {"k": k, "compute_s": comp, "exchange_s": exch / k, "step_s": step,
                    "allreduce_s": t.allreduce(P)}
    best["efficiency"] = t.cell_s * n * n / best["step_s"]
    return best


def table(terms: list[Terms], a) -> list[dict]:
    rows = []
    for t in terms:
        for split in ("1-D rows", "2-D blocks"):
            for P in PS:
                for overlap in (True, False):
                    r = predict(t, P, split, overlap, a)
                    rows.append({"terms": t.name, "split": split, "P": P, "overlap": overlap,
                                 **r})
    return rows


def load_terms(files: list[str], results: Path = RESULTS) -> list[Terms]:
    """Terms per device from measurement files (every weak-scaling JSON by default); for a
    GPU never measured here, terms derived from ``mpi-*.json`` (bench_mpi) if present."""
    paths = files or sorted(glob.glob(str(results / "weak-scaling-*.json")))
    by_dev: dict[str, list] = {}
    for p in paths:
        try:
            d = json.loads(Path(p).read_text())
        except (OSError, ValueError):
            continue
        if d.get("schema") == SCHEMA:
            by_dev.setdefault(d["device"], []).append(d)
    out = [Terms(f"{dev} (measured, P={','.join(str(x['ranks']) for x in ds)})", ds,
                 "measured") for dev, ds in sorted(by_dev.items())]
    if not files and not any(d[0].get("device_kind") == "gpu" for d in by_dev.values()):
        derived = _derived_gpu(results)
        if derived is not None:
            out.append(derived)
    return out


def _derived_gpu(results: Path) -> Terms | None:
    """GPU terms from bench_mpi's 2-rank run (``mpi-*.json``): cell time from the one-GPU
    heat 16384^2, the exchange latency from the two-rank excess over half of it (per round
    of 4 steps, the t the tuner took there), the Allreduce from the Reduce 2^28 excess."""
    for p in sorted(results.glob("mpi-*.json")):
        try:
            d = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        rows = {r["case"].split(" x")[0]: r for r in d.get("rows", [])}
        heat = rows.get("heat 16384^2")
        red = next((r for c, r in rows.items() if c.startswith("reduce")), None)
        if d.get("mode") != "mpi" or heat is None or not heat.get("one_device_seconds"):
            continue
        its = d.get("iterations", 100)
        P = d["ranks"]
        cell = heat["one_device_seconds"] / (16384 ** 2 * its)
        alpha = max(heat["seconds"] - heat["one_device_seconds"] / P, 0.0) / (its / 4)
        ar = max(red["seconds"] - red["one_device_seconds"] / P, 0.0) if red else 0.0
        doc = {"ranks": P, "cell_s": cell, "alpha_s": alpha, "beta_s_per_byte": 1 / 55e9,
               "allreduce_skelpy_s": ar, "device": d["device"], "device_kind": "gpu"}
        return Terms(f"{d['device']} (derived from {p.name}, P={P})", [doc], "derived")
    return None


def print_table(rows: list[dict]) -> None:
    print(f"{'terms':<48} {'split':<11} {'P':>5} {'k':>3} {'compute ms':>11} "
          f"{'exchange ms':>12} {'Allreduce us':>13} {'eff. overlap':>13} {'eff. none':>10}")
    for r in rows:
        if not r["overlap"]:
            continue
        other = next(x for x in rows if x["terms"] == r["terms"] and x["split"] == r["split"]
                     and x["P"] == r["P"] and not x["overlap"])
        print(f"{r['terms'][:48]:<48} {r['split']:<11} {r['P']:>5} {r['k']:>3} "
              f"{r['compute_s'] * 1e3:>11.3f} {r['exchange_s'] * 1e3:>12.4f} "
              f"{r['allreduce_s'] * 1e6:>13.1f} {r['efficiency']:>12.1%} "
              f"{other['efficiency']:>10.1%}")


def chart(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = list(dict.fromkeys(r["terms"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        for i, split in enumerate(("1-D rows", "2-D blocks")):
            for overlap, ls in ((True, "-"), (False, "--")):
                pts = [r for r in rows if r["terms"] == name and r["split"] == split
                       and r["overlap"] == overlap]
                ax.plot([r["P"] for r in pts], [r["efficiency"] for r in pts], ls,
                        color=f"C{i}", marker="o", ms=3,
                        label=f"{split}{'' if overlap else ', no overlap'}")
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("GPUs (ranks)")
        ax.set_ylabel("predicted weak-scaling efficiency")
        ax.set_title(name, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def model(args) -> list[dict]:
    terms = load_terms(args.files)
    if not terms:
        print("no measurements: run `mpiexec -n P python -m benchmarks.weak_scaling measure` "
              "first")
        return []
    for t in terms:
        print(f"{t.name}: cell {t.cell_s * 1e12:.2f} ps/cell-step, halo alpha "
              f"{t.alpha * 1e6:.1f} us, 1/beta {1 / t.beta / 1e9 if t.beta else math.inf:.3g}"
              f" GB/s, Allreduce {t.ar[0] * 1e6:.1f} + {t.ar[1] * 1e6:.1f} log2(P) us")
    rows = table(terms, args)
    print_table(rows)
    if args.chart and chart(rows, Path(args.chart)):
        print(f"chart: {args.chart}")
    return rows


def add_model_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--cells-side", type=int, default=16384, help="n: n x n cells per GPU")
    ap.add_argument("--allreduce-every", type=int, default=10)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--net-latency", type=float, default=2e-6)
    ap.add_argument("--net-gbs", type=float, default=25.0)
    ap.add_argument("--launch", type=float, default=5e-6, help="a pack/unpack kernel's cost")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("measure", help="under mpiexec: measure the terms")
    m.add_argument("--spec", default="mpi", help="sk.use() spec (mpi, mpi:gpu, mpi:cpu)")
    m.add_argument("--rows", type=int, default=512)
    m.add_argument("--cols", type=int, default=512)
    m.add_argument("--halo-cols", type=lambda s: [int(x) for x in s.split(",")],
                   default=[256, 4096, 65536])
    m.add_argument("--iterations", type=int, default=10)
    m.add_argument("--reps", type=int, default=5)
    m.add_argument("--note", default="")
    m.add_argument("--out", type=Path)
    p = sub.add_parser("model", help="the predicted efficiency table (and chart)")
    p.add_argument("files", nargs="*")
    p.add_argument("--chart", default=None)
    add_model_options(p)
    args = ap.parse_args(argv)
    return measure(args) if args.mode == "measure" else model(args)


if __name__ == "__main__":
    main()
