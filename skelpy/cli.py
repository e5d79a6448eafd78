"""The ``skelpy`` command: devices, tuning, and the tuning cache.

    skelpy devices                         list OpenCL devices; which one skelpy uses
    skelpy tune                            measure synthetic programs of every skeleton kind
                                           within the default budget, then train
    skelpy tune --minutes M                ... within M minutes (interrupted: run it again)
    skelpy tune --train-only               retrain the models from the stored measurements
    skelpy tune --export FILE              also write this device's measurements as a
                                           training-data file (data only, compressed)
    skelpy tune --synthetic N              sweep N synthetic programs fully, then train
    skelpy tune --synthetic N --minutes M  ... round-robin within M minutes, training included
    skelpy tune --report KERNEL [--out D]  table + heatmap of a kernel's measured space
    skelpy cache info | clear [--yes] | export FILE | import FILE
    skelpy bench                           the benchmark suite of a source checkout
    skelpy calibrate [--device D] [--force] the cost model's coefficients per device

Long work shows tqdm progress bars on stderr (``--quiet`` turns them off).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .tuner import model as _model
from .tuner import store as _store


def _print(*a: Any) -> None:
    print(*a, flush=True)


def _confirm(question: str) -> bool:
    """Ask on the terminal; no terminal (a script, CI) answers no."""
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _cache_info(store: _store.Store) -> int:
    info = store.info()
    if store.foreign:
        _print(f"tuning store: {info['path']}: not used: {store.foreign}")
        _print("  skelpy never writes into it and keeps tuning data in memory; move it away "
               "or set SKELPY_CACHE_DIR to use a store")
    elif info["degraded"]:
        _print(f"tuning store: {info['path']}  (not usable: {info['reason']}; tuning data "
               "is kept in memory)")
    else:
        _print(f"tuning store: {info['path']}")
    _print(f"  {info['bytes'] / 1024:.1f} KiB; devices {info['devices']}, kernels "
           f"{info['kernels']}, scenarios {info['scenarios']}, measurements "
           f"{info['measurements']}, refusals {info['refusals']}"
           + (f"; {info['queued']} rows queued (store locked)" if info["queued"] else ""))
    models = sorted((store.directory / "models").glob("*.npz")) \
        if store.directory and not store.degraded else []
    _print(f"  models: {len(models)}")
    by_kernel: dict[tuple[str, str], int] = {}
    for s in store.scenarios():
        k = (s["kernel"], s["skeleton"])
        by_kernel[k] = by_kernel.get(k, 0) + 1
    if by_kernel:
        _print("  kernels (key, skeleton, scenarios):")
        for (k, sk), n in sorted(by_kernel.items(), key=lambda kv: -kv[1])[:20]:
            _print(f"    {k}  {sk:<9} {n}")
    return 0


# -- devices -------------------------------------------------------------------------------------


def cmd_devices(args: argparse.Namespace) -> int:
    from . import runtime

    found = runtime.devices()
    if not found:
        _print("no OpenCL device found: install an OpenCL runtime (Debian: "
               "apt-get install pocl-opencl-icd) and check `clinfo -l`")
        return 1
    from .errors import DeviceError

    store = _store.get_store()
    chosen = os.environ.get("SKELPY_DEVICE", "")
    try:
        used = runtime.current_device()          # what a program started here would use
        problem = ""
    except DeviceError as exc:
        used, problem = None, str(exc)
    _print(f"   {'#':>2}  {'kind':<5} {'CUs':>4} {'max wg':>6} {'local':>7} {'fp64':<4} "
           f"{'measured':>8}  name / platform")
    for i, d in enumerate(found):
        n = store.count_measurements(d.key)
        mark = " *" if d == used else "  "
        _print(f"{mark} {i:>2}  {d.kind:<5} {d.compute_units:>4} {d.max_work_group_size:>6} "
               f"{d.local_mem_size // 1024:>5}Ki {'yes' if d.has_fp64 else 'no':<4} "
               f"{n:>8}  {d.name} / {d.platform}")
    _print("")
    if used is None:
        _print(f"SKELPY_DEVICE={chosen!r} matches no device: {problem}")
        return 1
    idx = found.index(used)
    if chosen:
        why = f"SKELPY_DEVICE={chosen!r} picks it"
    elif used.kind == "gpu":
        why = "the first GPU"
    else:
        why = f"no GPU here: the first {used.kind.upper()} device"
    _print(f"* skelpy uses #{idx} {used.name} ({why}); set SKELPY_DEVICE (gpu, cpu, an index "
           "or a name part) or call sk.use() to pick another")
    return 0


# -- tune ----------------------------------------------------------------------------------------


def cmd_tune(args: argparse.Namespace) -> int:
    if args.report:
        out = Path(args.out) if args.out else _store.default_cache_dir() / "reports"
        return report(args.report, out)
    store = _store.get_store()
    kinds = args.kinds.split(",") if args.kinds else None
    if kinds:
        from .tuner import synthetic

        unknown = sorted(set(kinds) - set(synthetic.KINDS))
        if unknown:
            _print(f"unknown kinds {', '.join(unknown)}: choose from "
                   f"{', '.join(synthetic.KINDS)}")
            return 2
    if args.train_only:
        devices_to_train = list(store.devices())
        if not devices_to_train:
            _print("nothing measured yet: run `skelpy tune` (it measures synthetic programs "
                   "first) or use sk.tuning('exhaustive') in a program")
            return 0
    elif args.synthetic and args.minutes is None:
        devices_to_train = [_sweep_synthetic(store, args, kinds)]
    else:
        return _budgeted(store, args, kinds)
    if not args.no_train:
        for dk in devices_to_train:
            _train(store, dk)
    if args.export:
        _export(store, devices_to_train[0] if devices_to_train else None, args.export)
    return 0


def _sweep_synthetic(store: _store.Store, args: argparse.Namespace, kinds) -> str:
    """``--synthetic N`` without a budget: sweep N synthetic programs fully, one by one."""
    from . import containers, runtime, skeletons
    from .tuner import synthetic

    dev = runtime.current_device()
    cases = synthetic.generate(args.synthetic, seed=args.seed,
                               sizes_2d=args.sizes_2d, sizes_1d=args.sizes_1d, kinds=kinds)
    _print(f"sweeping {len(cases)} synthetic programs on {dev.name} (exhaustive mode); "
           f"store: {store.path or ':memory:'}")
    before = store.count_measurements(dev.key)
    kit = synthetic.Toolkit.from_modules(skeletons, containers)
    res = synthetic.run_cases(cases, kit, progress=False if args.quiet else None)
    store.flush(timeout=10)
    added = store.count_measurements(dev.key) - before
    _print(f"swept {len(res['done'])}, failed {len(res['failed'])}, "
           f"skipped for time {len(res['skipped'])}: {added} new measurements "
           "(one per launch-parameter point measured)")
    for name, why in res["failed"][:10]:
        _print(f"  failed: {name}: {why}")
    return dev.key


def _budgeted(store: _store.Store, args: argparse.Namespace, kinds) -> int:
    """The default: synthetic programs of every kind (or ``--synthetic N`` of them) measured
    round-robin, then the model trained, all within the time budget."""
    import time

    from . import containers, runtime, skeletons
    from .tuner import budget, synthetic

    t0 = time.perf_counter()
    dev = runtime.current_device()
    kind = "gpu" if dev.features.get("dev_is_gpu", 1.0) else "cpu"
    minutes = args.minutes if args.minutes is not None else budget.DEFAULT_MINUTES[kind]
    if args.synthetic:
        cases = synthetic.generate(args.synthetic, seed=args.seed, sizes_2d=args.sizes_2d,
                                   sizes_1d=args.sizes_1d, kinds=kinds,
                                   max_area=budget.MAX_AREA)
        chosen = list({c.name: budget.Program(c.kind, [c]) for c in cases}.values())
        what = f"{len(chosen)} synthetic programs (--synthetic {args.synthetic})"
    else:
        chosen = budget.programs(kind, minutes, seed=args.seed, kinds=kinds)
        what = f"{len(chosen)} synthetic programs, 2 sizes each"
    have = store.count_measurements(dev.key)
    _print(f"tuning {dev.name} for {minutes:g} min, training included: {what} of "
           f"{len({p.kind for p in chosen})} skeleton kinds, measured round-robin"
           f"; store: {store.path or ':memory:'}"
           + (f" ({have} measurements of this device already: not taken again)"
              if have else ""))
    kit = synthetic.Toolkit.from_modules(skeletons, containers)
    train = not args.no_train
    rep = budget.run(kit, dev, minutes=minutes, seed=args.seed, kinds=kinds, chosen=chosen,
                     train=train, progress=None if args.quiet else _print)
    store.flush(timeout=10)
    kinds_done = ", ".join(f"{k} {n}" for k, n in sorted(rep.per_kind.items()))
    _print(f"measured {rep.measured} new points of {rep.scenarios} scenarios ({kinds_done}) "
           f"in {rep.sweep_seconds:.0f} s ({rep.rounds} rounds; "
           f"{'every sampled point done' if rep.stopped == 'done' else 'budget used'})")
    for name, why in rep.failed[:10]:
        _print(f"  failed: {name}: {why}")
    if train:
        _train(store, dev.key, rep.model, rep.train_seconds)
    _print(f"done in {time.perf_counter() - t0:.0f} s of a {60 * minutes:.0f} s budget")
    if args.export:
        _export(store, dev.key, args.export)
    return 0


def _export(store: _store.Store, device: str | None, path: str) -> None:
    from .tuner import training_data

    if device is None:
        _print("nothing to export: no device measured")
        return
    data = training_data.from_store(store, device)
    out = training_data.save(data, path)
    _print(f"wrote {out}: {len(data.scenarios)} scenarios, {data.points} points of {device} "
           f"({out.stat().st_size / 1024:.0f} KiB)")


def _train(store: _store.Store, device: str, model: Any = None,
           seconds: float | None = None) -> None:
    """Retrain one device's model (unless ``model`` was trained already, in ``seconds``) and
    say, per parameter signature, what it rests on."""
    import time

    from .tuner import manager
    from .tuner.zero_shot import LOCAL_TAKES_OVER

    local: dict[str, int] = {}
    for sd in _model.load_scenarios(store, device):
        sig = _model.signature(sd.names)
        local[sig] = local.get(sig, 0) + 1
    t0 = time.perf_counter()
    m = model if model is not None else manager().retrain(device)
    if seconds is None:
        seconds = time.perf_counter() - t0
    n = sum(local.values())
    _print(f"trained {device} in {seconds:.0f} s: {n} measured "
           f"scenario{'' if n == 1 else 's'}, {m.n_measurements} measurements on this machine")
    kind = _model.device_kind(store.devices().get(device, {}))
    for sig in sorted(set(local) | {g.sig for g in m.groups.values()
                                    if not g.kinds or kind in g.kinds}):
        g = _model.group_for(m.groups, sig, kind)
        mine = local.get(sig, 0)
        if g is None:
            _print(f"  [{sig}] {mine} scenario(s): not modelled (a model needs "
                   f"{_model.MIN_SCENARIOS})")
        elif g.origin == "shipped":
            _print(f"  [{sig}] the model shipped with skelpy (trained on {g.n_scenarios} "
                   "scenarios of other devices): "
                   + (f"{mine} scenario(s) measured here" if g.validation
                      else "nothing of this kind measured here"))
        else:
            best = (f", {len(g.classes)} distinct best points" if g.classifier is not None
                    else "")
            others = g.n_scenarios - g.n_local
            mix = (f" ({g.n_local} of this device, {others} shipped from others, this "
                   "device's weighted to count at least as much)" if others else
                   f" (this device's only{'' if mine < LOCAL_TAKES_OVER else ': enough'})")
            _print(f"  [{sig}] {g.n_scenarios} scenarios{mix}, {g.n_rows} training rows "
                   f"(measured points){best}")
        v = g.validation if g is not None else {}
        if v:
            sc = ", ".join(f"{k} {x:.2f}x" for k, x in v.get("scores", {}).items())
            _print(f"    checked on {v.get('scenarios', 0)} scenario(s) of this device's own "
                   f"kernels, each left out (speedup over the default: {sc or 'too few'}): "
                   + {"local": "this device's model is used",
                      "shipped": "the shipped model is used",
                      "default": "the default is kept (the model orders sweeps only)"}
                   .get(v.get("use", ""), ""))


def _axes(space: dict) -> tuple[str | None, str | None]:
    """The two parameters a heatmap shows: work-group dimensions first, then factors."""
    names = [p["name"] for p in space.get("params", []) if p.get("numeric", True)]
    ranked = sorted(names, key=lambda n: (not (n.startswith("wg") or "local" in n),
                                          "coarsen" not in n,
                                          not (n.endswith("_c") or "col" in n),
                                          names.index(n)))
    if not ranked:
        return None, None
    return ranked[0], (ranked[1] if len(ranked) > 1 else None)


def report(prefix: str, out_dir: Path) -> int:
    """Print each scenario of the kernels matching ``prefix`` and draw its heatmap."""
    store = _store.get_store()
    scns = [s for s in store.scenarios() if s["kernel"].startswith(prefix)
            or s["skeleton"] == prefix]
    if not scns:
        _print(f"no measured kernel matches {prefix!r}; `skelpy cache info` lists kernels")
        return 1
    meas = store.all_measurements()
    refused = store.all_refusals()
    plots = []
    for s in scns:
        m = meas.get(s["key"], {})
        ref = refused.get(s["key"], set())
        ds = ", ".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}"
                       for k, v in sorted(s["dataset"].items()))
        _print(f"\n{s['skeleton']} kernel {s['kernel']} scenario {s['key'][:10]}  ({ds})")
        _print(f"  device: {s['device']}")
        if not m:
            _print("  no measurements")
            continue
        best_t = min(v[0] for v in m.values())
        default = json.dumps(s["space"].get("default", {}), sort_keys=True)
        rows = sorted(m.items(), key=lambda kv: kv[1][0])
        _print(f"  {len(m)} points measured, {len(ref)} refused; oracle {best_t * 1e3:.4f} ms")
        _print(f"  {'rank':>4} {'ms':>10} {'perf':>6} {'n':>4}  params")
        shown = rows[:10]
        if default in m and all(k != default for k, _ in shown):
            shown.append((default, m[default]))
        for k, (t, n) in shown:
            rank = [r[0] for r in rows].index(k) + 1
            tag = "  (default)" if k == default else ""
            _print(f"  {rank:>4} {t * 1e3:>10.4f} {best_t / t:>6.1%} {n:>4}  {k}{tag}")
        plots.append((s, m, ref, best_t))
    _heatmaps(prefix, plots, out_dir)
    return 0


def _heatmaps(prefix: str, plots: list, out_dir: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError:
        _print("\n(no heatmap: matplotlib is missing; install the `plot` extra: "
               "pip install 'skelpy[plot]')")
        return
    plots = [p for p in plots if _axes(p[0]["space"])[0] is not None][:6]
    if not plots:
        return
    cols = min(3, len(plots))
    rows = math.ceil(len(plots) / cols)
    fig, axs = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.4 * rows), squeeze=False)
    for ax, (s, m, ref, best_t) in zip(axs.flat, plots, strict=False):
        xa, ya = _axes(s["space"])
        pts = [(json.loads(k), v[0]) for k, v in m.items()]
        xs = sorted({p[xa] for p, _ in pts})
        ys = sorted({p[ya] for p, _ in pts}) if ya else [None]
        grid = np.full((len(ys), len(xs)), np.nan)
        for p, t in pts:
            i = ys.index(p[ya]) if ya else 0
            j = xs.index(p[xa])
            perf = best_t / t
            if np.isnan(grid[i, j]) or perf > grid[i, j]:
                grid[i, j] = perf          # best over the other parameters
        im = ax.imshow(grid, origin="lower", cmap="viridis", vmin=0, vmax=1, aspect="auto")
        for k in ref:
            p = json.loads(k)
            if p.get(xa) in xs and (not ya or p.get(ya) in ys):
                i = ys.index(p[ya]) if ya else 0
                if np.isnan(grid[i, xs.index(p[xa])]):
                    ax.text(xs.index(p[xa]), i, "x", ha="center", va="center", color="red")
        ax.set_xticks(range(len(xs)), [str(x) for x in xs], rotation=90)
        ax.set_xlabel(xa)
        if ya:
            ax.set_yticks(range(len(ys)), [str(y) for y in ys])
            ax.set_ylabel(ya)
        ax.set_title(f"{s['skeleton']} {s['kernel'][:8]} "
                     + " ".join(f"{k}={v:g}" for k, v in sorted(s["dataset"].items())
                                if k in ("n", "rows", "cols") and isinstance(v, (int, float))),
                     fontsize=9)
        fig.colorbar(im, ax=ax, label="performance relative to the oracle")
    for ax in list(axs.flat)[len(plots):]:
        ax.axis("off")
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() else "_" for c in prefix)[:32]
    path = out_dir / f"skelpy-report-{safe}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    _print(f"\nheatmap written to {path.resolve()}")


# -- cache ---------------------------------------------------------------------------------------


def cmd_cache(args: argparse.Namespace) -> int:
    store = _store.get_store()
    if args.action == "info":
        return _cache_info(store)
    if args.action == "clear":
        if store.foreign:
            _print(f"{store.path} is not a skelpy tuning store ({store.foreign}): skelpy "
                   "leaves it alone; move it away yourself if you want it gone")
            return 0
        if not args.yes and not _confirm(
                f"delete every measurement, refusal and model in {store.path or ':memory:'}?"):
            _print("nothing deleted (pass --yes to skip this question)")
            return 1
        store.clear()
        if store.directory is not None and not store.degraded:
            shutil.rmtree(store.directory / "models", ignore_errors=True)
        if not store.flush(timeout=10):
            _print("the store is locked by another process: try again later")
            return 1
        from . import tuner

        tuner.reset()
        _print(f"cleared {store.path or ':memory:'}")
        return 0
    if not args.file:
        _print(f"skelpy cache {args.action} needs a FILE")
        return 2
    if args.action == "export":
        data = store.export_data()
        text = json.dumps(data, indent=1, sort_keys=True)
        if args.file == "-":
            sys.stdout.write(text + "\n")
        else:
            Path(args.file).write_text(text)
            _print(f"exported {len(data['measurements'])} measurements and "
                   f"{len(data['refusals'])} refusals to {args.file}")
        return 0
    # import
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        data = json.loads(text)
        added = store.import_data(data)
        if not store.flush(timeout=10):
            raise OSError("the store is locked by another process: try again later")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _print(f"cannot import {args.file}: {exc}")
        return 1
    from . import tuner

    tuner.reset()
    _print(f"imported {added['measurements']} measurements, {added['refusals']} refusals, "
           f"{added['scenarios']} new scenarios from {args.file}")
    return 0


# -- bench -------------------------------------------------------------------------------------


def _find_benchmarks() -> Path | None:
    """The checkout holding benchmarks/suite.py (it is not installed with the package)."""
    cwd = Path.cwd()
    for root in (cwd, *cwd.parents, Path(__file__).resolve().parents[1]):
        if (root / "benchmarks" / "suite.py").is_file():
            return root
    return None


def cmd_bench(args: argparse.Namespace) -> int:
    root = _find_benchmarks()
    if root is None:
        _print("skelpy bench runs the benchmark suite of a source checkout "
               "(benchmarks/suite.py): run it inside the skelpy repository")
        return 1
    sys.path.insert(0, str(root))
    from benchmarks import suite

    argv = ["--budget-minutes", str(args.budget_minutes)]
    argv += ["--quick"] if args.quick else []
    argv += ["--only", args.only] if args.only else []
    argv += ["--device", args.device] if args.device else []
    argv += ["--out", args.out] if args.out else []
    doc = suite.main(argv)
    return 1 if any(p.get("status") == "failed" for p in doc.get("parts", {}).values()) else 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from .costmodel import command

    return command.run(args.device, force=args.force, quick=args.quick, show=args.show,
                       out=_print)


# -- entry point ---------------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x.strip()]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="skelpy", description="skelpy: algorithmic skeletons "
                                "for OpenCL with an embedded autotuner")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("devices", help="list OpenCL devices")
    d.set_defaults(func=cmd_devices)

    t = sub.add_parser("tune", help="measure synthetic programs within a time budget and "
                       "train the tuner's model")
    t.add_argument("--minutes", type=float, default=None, metavar="M",
                   help="time budget (default: 2 on a GPU, 8 on a CPU); with --synthetic: "
                   "stop starting new sweeps after M minutes")
    t.add_argument("--train-only", action="store_true",
                   help="measure nothing: retrain the models from the stored measurements")
    t.add_argument("--export", metavar="FILE", default=None,
                   help="then write this device's measurements as a training-data file "
                   "(.npz, data only) to ship or to evaluate")
    t.add_argument("--synthetic", type=int, default=0, metavar="N",
                   help="these N synthetic programs instead of the budget's: with "
                   "--minutes, round-robin within the budget; without, each swept fully")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--kinds", default="", help="comma list of stencil,map,zip,reduce,"
                   "mapreduce,scan,allpairs")
    t.add_argument("--sizes-2d", type=_ints, default=[512, 1024], metavar="A,B",
                   help="matrix sizes (square) for synthetic stencils")
    t.add_argument("--sizes-1d", type=_ints, default=[1 << 18, 1 << 22], metavar="A,B",
                   help="vector lengths for synthetic Map/Zip/Reduce")
    t.add_argument("--no-train", action="store_true", help="measure only")
    t.add_argument("--quiet", action="store_true", help="no progress bars")
    t.add_argument("--report", metavar="KERNEL", default=None,
                   help="show the measured space of kernels whose key starts with KERNEL")
    t.add_argument("--out", default=None, metavar="DIR",
                   help="folder for --report's PNG (default: reports/ in the cache folder)")
    t.set_defaults(func=cmd_tune)

    c = sub.add_parser("cache", help="the tuning store")
    c.add_argument("action", choices=("info", "clear", "export", "import"))
    c.add_argument("file", nargs="?", help="JSON file for export/import ('-': stdio)")
    c.add_argument("--yes", "-y", action="store_true", help="clear without asking")
    c.set_defaults(func=cmd_cache)

    b = sub.add_parser("bench", help="run the benchmark suite within a time budget and "
                       "regenerate benchmarks/RESULTS.md")
    b.add_argument("--budget-minutes", type=float, default=10.0, metavar="M",
                   help="time budget of the whole suite (default 10)")
    b.add_argument("--quick", action="store_true", help="at most the quick sizes")
    b.add_argument("--only", default=None, metavar="NAMES",
                   help="comma list of parts: map, reduce_scan_allpairs, stencil, extras, "
                        "tuning, tuner_eval (default: all but tuner_eval)")
    b.add_argument("--device", default=None, help="sk.use() spec: gpu, cpu, a name part")
    b.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    b.set_defaults(func=cmd_bench)

    k = sub.add_parser("calibrate", help="measure the cost model's coefficients of each "
                       "device (sk.use('auto') picks a device per call from them)")
    k.add_argument("--device", default=None, help="only this device (gpu, cpu, a name part)")
    k.add_argument("--force", action="store_true", help="measure again even if stored")
    k.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    k.add_argument("--show", action="store_true", help="print what is stored, measure nothing")
    k.set_defaults(func=cmd_calibrate)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        _print("\ninterrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
