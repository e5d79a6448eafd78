"""Synthetic training programs: varied muscles that exercise the tuner ([Cummins 2018]
§5.2; see docs/references.md).

OmniTune trained on synthetic stencils generated from a template, parameterised by the
stencil's reach in four directions, the data type and a simple or complex body; real
programs were kept for testing. This module writes such muscles as Python source (so the
translator sees them exactly as user code) for Stencil, and Map/Zip/Reduce muscles of varied
arithmetic intensity, and runs them in exhaustive mode so the store fills with measurements.
The skeletons come in through a :class:`Toolkit` that the caller builds: this module sits
below them.
"""

from __future__ import annotations

import itertools
import linecache
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

KINDS = ("stencil", "map", "zip", "reduce", "mapreduce", "scan", "allpairs")
# [Cummins 2018] Table 6.3's shapes (north, south, east, west), plus common symmetric ones.
STENCIL_SHAPES = ((1, 1, 1, 1), (0, 0, 0, 0), (2, 2, 2, 2), (1, 10, 30, 30), (5, 5, 5, 5),
                  (10, 10, 10, 10), (0, 3, 0, 3), (3, 0, 3, 0), (1, 0, 1, 0), (0, 1, 1, 0),
                  (4, 4, 1, 1), (1, 1, 4, 4), (20, 10, 20, 10), (3, 3, 3, 3))
DTYPES = ("float32", "float64", "int32")

_counter = itertools.count()


def compile_muscle(src: str, name: str, env: dict[str, Any] | None = None) -> Callable:
    """Define ``name`` from ``src`` with its source registered in linecache, so the muscle
    translator can read it back like any function from a file."""
    filename = f"<skelpy-synthetic-{next(_counter)}>"
    lines = src.splitlines(keepends=True)
    linecache.cache[filename] = (len(src), None, lines, filename)
    ns: dict[str, Any] = {"math": math, "np": np}
    ns.update(env or {})
    exec(compile(src, filename, "exec"), ns)  # noqa: S102 - our own generated source
    return ns[name]


def stencil_source(north: int, south: int, east: int, west: int, *, complex_body: bool,
                   dtype: str = "float32", name: str = "synth") -> str:
    """Python source of a stencil muscle reading every cell of the N/S/E/W rectangle."""
    count = (north + south + 1) * (east + west + 1)
    is_int = dtype.startswith("int") or dtype.startswith("uint")
    # acc starts as the cell's own type: a float literal would widen float32 to double
    lines = [f"def {name}(nb):", "    acc = nb[0, 0] * 0"]
    loop_r = f"range({-north}, {south + 1})"
    loop_c = f"range({-west}, {east + 1})"
    if not complex_body:
        lines += [f"    for dr in {loop_r}:",
                  f"        for dc in {loop_c}:",
                  "            acc += nb[dr, dc]"]
        lines.append(f"    return acc // {count}" if is_int else f"    return acc / {count}.0")
    else:
        if is_int:
            lines += [f"    for dr in {loop_r}:",
                      f"        for dc in {loop_c}:",
                      "            v = nb[dr, dc]",
                      "            if v > nb[0, 0]:",
                      "                acc += v * 3 - dr",
                      "            else:",
                      "                acc += (v ^ dc) % 7",
                      f"    return acc // {count}"]
        else:
            lines += [f"    for dr in {loop_r}:",
                      f"        for dc in {loop_c}:",
                      "            v = nb[dr, dc]",
                      "            if v > nb[0, 0]:",
                      "                acc += math.sqrt(abs(v) + 1.0) * math.cos(v * 0.5)",
                      "            else:",
                      "                acc += math.exp(-abs(v)) - 0.25 * v",
                      f"    acc = acc / {count}.0",
                      "    if acc > nb[0, 0]:",
                      "        return acc * 0.5 - nb[0, 0]",
                      "    return math.tanh(acc) + nb[0, 0]"]
    return "\n".join(lines) + "\n"


def map_source(intensity: int, *, math_calls: int = 0, name: str = "synth") -> str:
    """A Map muscle with ``intensity`` multiply-adds and ``math_calls`` math functions."""
    lines = [f"def {name}(x):", "    y = x"]
    for k in range(intensity):
        lines.append(f"    y = y * {0.5 + 0.01 * k!r} + x")
    fns = ("math.sin", "math.exp", "math.sqrt", "math.cos")
    for k in range(math_calls):
        f = fns[k % len(fns)]
        arg = "abs(y) + 1.0" if f == "math.sqrt" else ("-abs(y)" if f == "math.exp" else "y")
        lines.append(f"    y = y + {f}({arg})")
    lines.append("    return y")
    return "\n".join(lines) + "\n"


def zip_source(intensity: int, *, name: str = "synth") -> str:
    lines = [f"def {name}(x, y, a):", "    r = a * x + y"]
    for k in range(intensity):
        lines.append(f"    r = r * x + {0.25 + 0.01 * k!r} * y")
    lines.append("    return r")
    return "\n".join(lines) + "\n"


REDUCE_OPS = {
    "sum": "def {name}(a, b):\n    return a + b\n",
    "max": "def {name}(a, b):\n    return max(a, b)\n",
    "min": "def {name}(a, b):\n    return min(a, b)\n",
}
REDUCE_IDENTITY = {"sum": 0, "max": -math.inf, "min": math.inf}


@dataclass(frozen=True)
class Toolkit:
    """The skeletons and containers synthetic programs are built from. This module sits
    below them (skeletons import the tuner), so a caller above both hands them in (the
    command line: ``Toolkit.from_modules(skelpy.skeletons, skelpy.containers)``)."""

    Map: Callable[..., Any]
    Zip: Callable[..., Any]
    Reduce: Callable[..., Any]
    Stencil: Callable[..., Any]
    Shape: Callable[..., Any]
    Vector: Callable[..., Any]
    Matrix: Callable[..., Any]
    MapReduce: Callable[..., Any] | None = None
    Scan: Callable[..., Any] | None = None
    AllPairs: Callable[..., Any] | None = None

    @classmethod
    def from_modules(cls, skeletons: Any, containers: Any) -> Toolkit:
        """From the ``skelpy.skeletons`` and ``skelpy.containers`` modules."""
        return cls(skeletons.Map, skeletons.Zip, skeletons.Reduce, skeletons.Stencil,
                   skeletons.Shape, containers.Vector, containers.Matrix,
                   getattr(skeletons, "MapReduce", None), getattr(skeletons, "Scan", None),
                   getattr(skeletons, "AllPairs", None))


@dataclass
class Case:
    """One synthetic program at one size: ``prepare(kit)()`` makes one skeleton call."""

    name: str
    kind: str
    size: tuple[int, ...]
    dtype: str
    source: str
    make: Callable[[Toolkit], Callable[[], Any]] = field(repr=False)

    def prepare(self, kit: Toolkit) -> Callable[[], Any]:
        """Build the skeleton and its inputs; returns a zero-argument call."""
        return self.make(kit)


def random_data(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Inputs for a synthetic program: integers in [0, 100) or floats in [0, 1)."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return rng.integers(0, 100, size=shape).astype(dt)
    return rng.random(shape).astype(dt)


def stencil_case(shape4: Sequence[int], *, complex_body: bool, dtype: str,
                 size: tuple[int, int], border: str = "nearest", seed: int = 0) -> Case:
    n, s, e, w = (int(v) for v in shape4)
    tag = f"stencil_{n}_{s}_{e}_{w}_{'complex' if complex_body else 'simple'}_{dtype}"
    if border != "nearest":
        tag += f"_{border}"
    src = stencil_source(n, s, e, w, complex_body=complex_body, dtype=dtype, name="muscle")

    def make(kit: Toolkit):
        fn = compile_muscle(src, "muscle")
        st = kit.Stencil(fn, shape=kit.Shape(north=n, south=s, east=e, west=w), border=border)
        m = kit.Matrix(random_data(size, dtype, np.random.default_rng(seed)))
        return lambda: st(m)
    return Case(f"{tag}@{size[0]}x{size[1]}", "stencil", size, dtype, src, make)


def map_case(intensity: int, math_calls: int, *, dtype: str, size: int, seed: int = 0) -> Case:
    src = map_source(intensity, math_calls=math_calls, name="muscle")

    def make(kit: Toolkit):
        sk_map = kit.Map(compile_muscle(src, "muscle"))
        v = kit.Vector(random_data((size,), dtype, np.random.default_rng(seed)))
        return lambda: sk_map(v)
    return Case(f"map_i{intensity}_m{math_calls}_{dtype}@{size}", "map", (size,), dtype, src,
                make)


def zip_case(intensity: int, *, dtype: str, size: int, seed: int = 0) -> Case:
    src = zip_source(intensity, name="muscle")

    def make(kit: Toolkit):
        z = kit.Zip(compile_muscle(src, "muscle"))
        rng = np.random.default_rng(seed)
        x = kit.Vector(random_data((size,), dtype, rng))
        y = kit.Vector(random_data((size,), dtype, rng))
        return lambda: z(x, y, 0.5)
    return Case(f"zip_i{intensity}_{dtype}@{size}", "zip", (size,), dtype, src, make)


def reduce_case(op: str, *, dtype: str, size: int, seed: int = 0) -> Case:
    src = REDUCE_OPS[op].format(name="muscle")

    def make(kit: Toolkit):
        fn = compile_muscle(src, "muscle")
        ident = REDUCE_IDENTITY[op]
        if np.dtype(dtype).kind in "iu" and not math.isfinite(ident):
            info = np.iinfo(np.dtype(dtype))
            ident = info.min if ident < 0 else info.max
        r = kit.Reduce(fn, identity=ident)
        v = kit.Vector(random_data((size,), dtype, np.random.default_rng(seed)))
        return lambda: r(v)
    return Case(f"reduce_{op}_{dtype}@{size}", "reduce", (size,), dtype, src, make)


SCAN_OPS = {"sum": ("def {name}(a, b):\n    return a + b\n", 0),
            "max": ("def {name}(a, b):\n    return max(a, b)\n", -math.inf)}


def mapreduce_case(intensity: int, *, dtype: str, size: int, seed: int = 0) -> Case:
    msrc = map_source(intensity, name="muscle")

    def make(kit: Toolkit):
        if kit.MapReduce is None:
            raise RuntimeError("this skelpy has no MapReduce")
        mr = kit.MapReduce(compile_muscle(msrc, "muscle"),
                           compile_muscle(REDUCE_OPS["sum"].format(name="add"), "add"), 0)
        v = kit.Vector(random_data((size,), dtype, np.random.default_rng(seed)))
        return lambda: mr(v)
    return Case(f"mapreduce_i{intensity}_{dtype}@{size}", "mapreduce", (size,), dtype, msrc,
                make)


def scan_case(op: str, *, dtype: str, size: int, inclusive: bool, seed: int = 0) -> Case:
    src, ident = SCAN_OPS[op]
    src = src.format(name="muscle")

    def make(kit: Toolkit):
        if kit.Scan is None:
            raise RuntimeError("this skelpy has no Scan")
        i = ident
        if np.dtype(dtype).kind in "iu" and not math.isfinite(i):
            i = int(np.iinfo(np.dtype(dtype)).min)
        sc = kit.Scan(compile_muscle(src, "muscle"), i, inclusive=inclusive)
        v = kit.Vector(random_data((size,), dtype, np.random.default_rng(seed)))
        return lambda: sc(v)
    return Case(f"scan_{op}_{'inc' if inclusive else 'exc'}_{dtype}@{size}", "scan", (size,),
                dtype, src, make)


ALLPAIRS_KINDS = ("dot", "l1", "generic")


def allpairs_case(variant: str, *, dtype: str, size: int, depth: int, seed: int = 0) -> Case:
    """An all-pairs program: ``dot`` (zip multiply, reduce add: a matrix product), ``l1``
    (zip |a-b|, reduce add) or ``generic`` (a row-accessor muscle); ``size`` rows of A and
    of B, ``depth`` columns."""
    if variant == "generic":
        src = ("def muscle(a, b):\n    acc = a[0] * 0\n    for k in range(a.size):\n"
               "        d = a[k] - b[k]\n        acc += d * d\n    return acc\n")
    elif variant == "l1":
        src = "def muscle(a, b):\n    return abs(a - b)\n"
    else:
        src = "def muscle(a, b):\n    return a * b\n"

    def make(kit: Toolkit):
        if kit.AllPairs is None:
            raise RuntimeError("this skelpy has no AllPairs")
        fn = compile_muscle(src, "muscle")
        if variant == "generic":
            ap = kit.AllPairs(fn)
        else:
            ap = kit.AllPairs(zip=fn, reduce=compile_muscle(
                REDUCE_OPS["sum"].format(name="add"), "add"))
        rng = np.random.default_rng(seed)
        a = kit.Matrix(random_data((size, depth), dtype, rng))
        b = kit.Matrix(random_data((size, depth), dtype, rng))
        return lambda: ap(a, b)
    return Case(f"allpairs_{variant}_{dtype}@{size}x{depth}", "allpairs", (size, depth), dtype,
                src, make)


def stencil_area(shape4: Sequence[int]) -> int:
    """Cells a stencil of extents (up, down, left, right) reads per output cell."""
    return (shape4[0] + shape4[1] + 1) * (shape4[2] + shape4[3] + 1)


def generate(count: int, *, seed: int = 0, sizes_2d: Sequence[int] = (512, 1024),
             sizes_1d: Sequence[int] = (1 << 18, 1 << 22),
             kinds: Iterable[str] | None = None, max_area: int | None = None) -> list[Case]:
    """``count`` synthetic cases, stencils first (as [Cummins 2018]), then the 1-D kinds, drawn
    deterministically from ``seed``; names that are not one of :data:`KINDS` are ignored.
    ``max_area``: no stencil reads more cells than this (a time-boxed run on a CPU: PoCL
    compiles one point of a 21x21 body for minutes)."""
    want = (set(kinds) if kinds is not None else set(KINDS)) & set(KINDS)
    rng = np.random.default_rng(seed)
    pool: list[Case] = []
    order = [k for k in KINDS if k in want]
    if not order:
        return []
    i = 0
    others = [k for k in order if k != "stencil"]
    turn = 0
    while len(pool) < count:
        # every other program is a stencil (when asked for); the rest take turns
        if "stencil" in want and (i % 2 == 0 or not others):
            kind = "stencil"
        else:
            kind = others[turn % len(others)]
            turn += 1
        i += 1
        if kind == "stencil":
            if i // 2 < len(STENCIL_SHAPES) and rng.random() < 0.7:
                shape4 = STENCIL_SHAPES[(i // 2) % len(STENCIL_SHAPES)]
            else:
                shape4 = tuple(int(v) for v in rng.integers(0, 6, size=4))
            if max_area is not None and stencil_area(shape4) > max_area:
                shape4 = (1, 1, 1, 1)
            size = int(rng.choice(sizes_2d))
            pool.append(stencil_case(shape4, complex_body=bool(rng.random() < 0.5),
                                     dtype=str(rng.choice(DTYPES, p=(0.6, 0.2, 0.2))),
                                     size=(size, size), seed=i))
        elif kind == "map":
            pool.append(map_case(int(rng.integers(0, 24)), int(rng.integers(0, 4)),
                                 dtype=str(rng.choice(("float32", "float64"), p=(0.8, 0.2))),
                                 size=int(rng.choice(sizes_1d)), seed=i))
        elif kind == "zip":
            pool.append(zip_case(int(rng.integers(0, 16)),
                                 dtype=str(rng.choice(("float32", "float64"), p=(0.8, 0.2))),
                                 size=int(rng.choice(sizes_1d)), seed=i))
        elif kind == "reduce":
            pool.append(reduce_case(str(rng.choice(tuple(REDUCE_OPS))),
                                    dtype=str(rng.choice(DTYPES, p=(0.6, 0.2, 0.2))),
                                    size=int(rng.choice(sizes_1d)), seed=i))
        elif kind == "mapreduce":
            pool.append(mapreduce_case(int(rng.integers(0, 12)),
                                       dtype=str(rng.choice(("float32", "float64"),
                                                            p=(0.8, 0.2))),
                                       size=int(rng.choice(sizes_1d)), seed=i))
        elif kind == "scan":
            pool.append(scan_case(str(rng.choice(tuple(SCAN_OPS))),
                                  dtype=str(rng.choice(("float32", "int32"), p=(0.6, 0.4))),
                                  size=int(rng.choice(sizes_1d)),
                                  inclusive=bool(rng.random() < 0.5), seed=i))
        else:
            side = int(rng.choice(sizes_2d)) // 2
            pool.append(allpairs_case(str(rng.choice(ALLPAIRS_KINDS)), dtype="float32",
                                      size=side, depth=int(rng.choice((16, 64, 256))),
                                      seed=i))
    return pool[:count]


def run_cases(cases: Sequence[Case], kit: Toolkit, *, minutes: float | None = None,
              progress: bool | None = None,
              on_case: Callable[[Case, Any], None] | None = None) -> dict[str, Any]:
    """Run every case once in exhaustive mode (each sweeps its space into the store) until
    the time budget ends; returns the cases done, failed (with why) and skipped for time.
    ``progress``: tqdm bars on stderr, one over the cases
    and one over the points of the sweep running (None: when stderr is a terminal)."""
    from tqdm.auto import tqdm

    from .engine import sweep_deadline
    from .modes import tuning
    from .state import STATE

    deadline = None if minutes is None else time.perf_counter() + 60.0 * minutes
    done, failed, skipped = [], [], []
    settings = STATE.settings
    old_progress, settings.progress = settings.progress, progress
    bar = tqdm(total=len(cases), desc="programs", unit="program",
               disable=None if progress is None else not progress)
    try:
        for case in cases:
            if deadline is not None and time.perf_counter() >= deadline:
                skipped.append(case.name)
                bar.update(1)
                continue
            bar.set_postfix_str(case.name[:40])
            try:
                call = case.prepare(kit)
                with tuning("exhaustive"), sweep_deadline(deadline):
                    out = call()
                if on_case is not None:
                    on_case(case, out)
                done.append(case.name)
            except Exception as exc:  # noqa: BLE001 - report and go on with the others
                failed.append((case.name, f"{type(exc).__name__}: {str(exc)[:300]}"))
            bar.update(1)
    finally:
        bar.close()
        settings.progress = old_progress
    return {"done": done, "failed": failed, "skipped": skipped}
