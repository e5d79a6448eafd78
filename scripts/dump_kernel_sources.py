"""Dump the exact OpenCL sources that the benchmark set and the examples build.

    python scripts/dump_kernel_sources.py OUT_DIR

Runs ``benchmarks/bench_{map,reduce_scan_allpairs,stencil}.py`` and every example at small
sizes through the public skeleton API, with tuning off and a throw-away tuning store, and
records every ``Runtime.build(source, options)``. Each distinct source is written to
``OUT_DIR/<part>-<nn>.cl`` (numbered in build order per part) and ``OUT_DIR/index.txt`` lists
them with their build options. Run it before and after a change to the translator or the
skeletons and ``diff -r`` the two folders: same folders, same kernels.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="skelpy-dump-"))
    os.environ["SKELPY_TUNE"] = "off"
    os.environ["SKELPY_CACHE_DIR"] = str(scratch / "cache")

    import benchmarks.common as common
    from skelpy import runtime

    common.RESULTS_DIR = scratch / "results"
    builds: list[tuple[str, str, tuple[str, ...]]] = []
    part = ["?"]
    original = runtime.Runtime.build

    def recording_build(self, source, options=(), **kw):
        builds.append((part[0], source, tuple(options)))
        return original(self, source, options, **kw)

    runtime.Runtime.build = recording_build

    pics = str(scratch / "pictures")
    runs = [
        ("bench_map", "benchmarks.bench_map", ["--quick", "--n", "4096"]),
        ("bench_rsa", "benchmarks.bench_reduce_scan_allpairs",
         ["--quick", "--n", "4096", "--mm", "32", "--out", str(scratch / "results")]),
        ("bench_stencil", "benchmarks.bench_stencil",
         ["--sizes", "64", "--no-sweep", "--no-scipy", "--reps", "1", "--out",
          str(scratch / "results")]),
        ("ex_demo", "examples.demo", None),
        ("ex_canny", "examples.canny", ["--quick", "--out", pics]),
        ("ex_dot_product", "examples.dot_product", ["--quick"]),
        ("ex_game_of_life", "examples.game_of_life", ["--quick", "--out", pics]),
        ("ex_gaussian_blur", "examples.gaussian_blur",
         ["--radii", "1-10", "--size", "64", "--out", pics]),
        ("ex_heat", "examples.heat", ["--quick", "--out", pics]),
        ("ex_mandelbrot", "examples.mandelbrot",
         ["--size", "64x48", "--iterations", "50", "--out", str(scratch / "m.png")]),
        ("ex_matmul", "examples.matmul", ["--quick"]),
    ]
    failed = []
    for name, module, args in runs:
        part[0] = name
        print(f"-- {name}", flush=True)
        try:
            mod = __import__(module, fromlist=["main"])
            for extra in ("examples.canny", "examples.game_of_life"):
                if extra in sys.modules:
                    sys.modules[extra].OUT_DIR = pics
            with contextlib.redirect_stdout(io.StringIO()):
                mod.main() if args is None else mod.main(args)
        except Exception:  # noqa: BLE001 - report and go on with the other parts
            failed.append(name)
            traceback.print_exc()

    seen: dict[str, str] = {}
    counts: dict[str, int] = {}
    index = []
    for name, source, options in builds:
        digest = hashlib.sha1(source.encode()).hexdigest()[:12]
        if digest not in seen:
            counts[name] = counts.get(name, 0) + 1
            fname = f"{name}-{counts[name]:02d}.cl"
            seen[digest] = fname
            (out / fname).write_text(source)
        index.append(f"{seen[digest]}  {digest}  {' '.join(options)}")
    (out / "index.txt").write_text("\n".join(dict.fromkeys(index)) + "\n")
    print(f"{len(builds)} builds, {len(seen)} distinct sources -> {out}"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
