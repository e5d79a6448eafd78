"""Time translating every muscle of ``tests/test_translator.py``; optionally dump the results.

    python scripts/time_translation.py [--reps 5] [--keep-parsed] [--dump FILE] [--tests FILE]

First runs ``tests/test_translator.py`` in this process (kernels are not built or run) and
records every top-level ``Muscle(...).specialise(kinds, out_dtype, c_name)`` the tests make,
errors included. Then, ``--reps`` times, empties the muscle caches (parsed files, muscles per
function, specialisations) and translates all of them again; prints the median and every
repetition's seconds. With ``--keep-parsed`` the parsed functions are kept and only what a
muscle caches per specialisation is emptied: the time of translation proper, without finding
and parsing the source. ``--dump FILE`` writes what each translation gives (C source, C
parameters, dtypes, features, accesses, or the error message) so that two versions of the
translator can be compared with ``diff``. ``--tests`` takes the muscles of another copy of the
test file (to time two versions of the translator on the same muscles).
"""

from __future__ import annotations

import argparse
import gc
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# module-level caches of skelpy.muscle.* emptied before each repetition
CACHE_NAMES = {"_BY_FN", "_PARSED", "_SYNTH"}
# what a Muscle caches per specialisation (the names before and after the redesign)
MUSCLE_CACHES = ("_cache", "_ret_cache", "_bodies", "_result_types")


def record_calls(tests: Path) -> list[tuple]:
    import pytest

    import skelpy.muscle as M

    muscle_cls = M.Muscle
    fn_of: dict[object, object] = {}     # muscle -> function (keeps muscles alive: no id reuse)
    calls: list[tuple] = []
    depth = [0]
    orig_new = muscle_cls.__new__
    orig_specialise = muscle_cls.specialise

    def new(cls, fn):
        m = orig_new(cls, fn)
        fn_of.setdefault(m, fn)
        return m

    def specialise(self, kinds, out_dtype=None, c_name="skelpy_f"):
        if depth[0] == 0 and self in fn_of:
            calls.append((fn_of[self], tuple(kinds), out_dtype, c_name))
        depth[0] += 1
        try:
            return orig_specialise(self, kinds, out_dtype=out_dtype, c_name=c_name)
        finally:
            depth[0] -= 1

    class NoRun:
        @staticmethod
        def pytest_collection_modifyitems(items):
            for item in items:
                batch = getattr(item.module, "Batch", None)
                if batch is not None:
                    batch.run = lambda self: None

    muscle_cls.__new__ = new
    muscle_cls.specialise = specialise
    try:
        pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                     "--rootdir", str(tests.parent), str(tests)], plugins=[NoRun()])
    finally:
        muscle_cls.__new__ = orig_new
        muscle_cls.specialise = orig_specialise
    seen, out = set(), []
    for fn, kinds, od, name in calls:
        key = (id(fn) if not isinstance(fn, str) else fn, kinds, str(od), name)
        if key not in seen:
            seen.add(key)
            out.append((fn, kinds, od, name))
    return out


def clear_caches(keep_parsed: bool = False) -> None:
    for name, mod in list(sys.modules.items()):
        if name.startswith("skelpy.muscle"):
            if keep_parsed:
                for m in list(getattr(mod, "_BY_FN", {}).values()):
                    for attr in MUSCLE_CACHES:
                        cache = getattr(m, attr, None)
                        if cache is not None:
                            cache.clear()
                continue
            for attr in CACHE_NAMES:
                cache = getattr(mod, attr, None)
                if cache is not None:
                    cache.clear()


def translate_all(calls) -> list:
    from skelpy.errors import SkelpyError
    from skelpy.muscle import Muscle

    out = []
    for fn, kinds, od, name in calls:
        try:
            out.append(Muscle(fn).specialise(kinds, out_dtype=od, c_name=name))
        except (SkelpyError, ValueError, TypeError) as e:
            out.append(e)
    return out


def _errors(results) -> dict[int, str]:
    return {k: f"{type(r).__name__}: {r}" for k, r in enumerate(results)
            if isinstance(r, Exception)}


def describe(calls, results) -> str:
    lines = []
    for k, ((fn, kinds, od, name), r) in enumerate(zip(calls, results)):
        label = fn if isinstance(fn, str) else getattr(fn, "__name__", repr(fn))
        lines.append(f"=== {k} {label!r} {kinds} out={od} c_name={name}")
        if isinstance(r, Exception):
            lines.append(f"ERROR {type(r).__name__}: {r}")
            continue
        for field in ("c_params", "out_dtype", "scalar_dtypes", "uses_fp64", "features",
                      "accesses", "access_bounds", "name", "param_names"):
            lines.append(f"{field}: {getattr(r, field)!r}")
        lines.append(r.source)
    text = "\n".join(lines) + "\n"
    return re.sub(r"/tmp/pytest-of-[^:]*/", "<tmp>/", text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--keep-parsed", action="store_true")
    ap.add_argument("--dump", default=None)
    ap.add_argument("--tests", type=Path, default=ROOT / "tests" / "test_translator.py")
    args = ap.parse_args(argv)
    calls = record_calls(args.tests.resolve())
    times, cpu = [], []
    first = _errors(translate_all(calls))
    for _ in range(args.reps):
        clear_caches(args.keep_parsed)
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        results = translate_all(calls)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        errors = _errors(results)
        for k in sorted(set(errors.items()) ^ set(first.items())):
            print(f"not the same in every repetition: call {k[0]}: {k[1]}")
    n_err = len(first)
    what = "translation only" if args.keep_parsed else "fresh caches"
    print(f"{len(calls)} translations ({n_err} end in an error), {what}, {args.reps} repetitions: "
          f"median {statistics.median(times):.3f} s; each {', '.join(f'{t:.3f}' for t in times)}"
          f" (CPU time: median {statistics.median(cpu):.3f} s)")
    if args.dump:
        clear_caches()
        Path(args.dump).write_text(describe(calls, translate_all(calls)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
