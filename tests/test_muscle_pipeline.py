"""The muscle translator's passes seen from outside: the typed body, weak-scalar resolution
(then one emission), the constant loops a skeleton may unroll, the read sites of accessors,
and the package's shape (no import cycle).

Generated code is checked for correctness in ``test_translator.py`` (against NumPy on a
device); here the structure each pass hands to the next is checked against what the muscle's
source says.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import skelpy as sk
import skelpy.muscle.translate as translate_mod
from skelpy.errors import TranslationError
from skelpy.muscle import Muscle, TypedMuscle
from skelpy.muscle.dtyping import WEAK_INT, Ty
from skelpy.muscle.inference import result_dtypes
from skelpy.muscle.params import Accessor, IndexPoint, Scalar, global_array
from skelpy.muscle.typed import (
    AccessorRead,
    CastCall,
    FunctionCall,
    HelperCall,
    Loop,
)
from skelpy.muscle.typed_muscle import ReadSite
from skelpy.muscle.weak import resolve_weak

ROOT = Path(__file__).resolve().parent.parent
F32 = np.dtype(np.float32)


def nb_kind(dtype=np.float32) -> Accessor:
    """A 2-D neighbourhood read from global memory around (nb_r, nb_c)."""
    return Accessor(dtype, 2, ("__global const {stype}* restrict {name}", "long {name}_r",
                               "long {name}_c", "long {name}_cols"),
                    "(({ctype}){name}[({name}_r + {i0}) * {name}_cols + ({name}_c + {i1})])",
                    kind="neighbourhood")


def line_of(fn, text: str) -> int:
    src, start = inspect.getsourcelines(fn)
    return start + next(k for k, s in enumerate(src) if text in s)


def where(fn, text: str) -> str:
    return f"tests/test_muscle_pipeline.py:{line_of(fn, text)} ({fn.__name__})"


# ---------------------------------------------------------------------------------------------
# the typed body
# ---------------------------------------------------------------------------------------------


def typed_example(nb, k):
    s = 0.0
    for dr in range(-1, 2):
        s += nb[dr, 0] * np.float32(0.5)
    return np.sqrt(s) + k


def test_every_expression_of_the_typed_body_carries_its_type():
    body = Muscle(typed_example).typed_body((nb_kind(), Scalar(np.int16)))
    assert body.var_types == {"s": Ty(F32), "dr": WEAK_INT, "k": Ty(np.dtype(np.int16))}
    assert body.ret_ty == Ty(F32)
    nodes = {ast.unparse(n): n for n in ast.walk(typed_example_node())
             if isinstance(n, ast.expr)}  # (each of these spellings occurs once)
    read = body.notes[nodes["nb[dr, 0]"]]
    assert read.ty == Ty(F32) and isinstance(read.meaning, AccessorRead)
    assert read.meaning.param.name == "nb" and len(read.meaning.indices) == 2
    half = body.notes[nodes["np.float32(0.5)"]]
    assert isinstance(half.meaning, CastCall) and half.const == np.float32(0.5)
    assert half.const.dtype == F32
    sqrt = body.notes[nodes["np.sqrt(s)"]]
    assert isinstance(sqrt.meaning, FunctionCall) and sqrt.meaning.spec.canonical == "sqrt"
    assert sqrt.meaning.rule == Loop((F32,))
    total = body.notes[nodes["np.sqrt(s) + k"]]
    assert total.ty == Ty(F32) and total.meaning == Loop((F32, F32))   # NumPy: f32 + i16
    assert body.notes[nodes["-1"]].const == -1 and body.notes[nodes["-1"]].ty == WEAK_INT
    # every value the body computes is annotated: what is not is a name of a function,
    # module or accessor, the range() of a loop, or the index tuple of a read
    missing = {ast.unparse(n) for n in ast.walk(typed_example_node())
               if isinstance(n, ast.expr) and n not in body.notes
               and not isinstance(getattr(n, "ctx", None), ast.Store)}
    assert missing == {"np", "np.sqrt", "np.float32", "range", "range(-1, 2)", "nb", "(dr, 0)"}


def typed_example_node():
    return Muscle(typed_example).function.node


def sq(v):
    return v * v


def test_typed_body_is_cached_per_kinds_and_shared_by_specialisations(monkeypatch):
    m = Muscle(lambda x: sq(x) + 1)
    kinds = (Scalar(np.float32),)
    calls = []
    real = translate_mod.translate

    def counting(body, out, c_name, *checks):
        if body.function is m.function:   # (sq is translated too, as a helper)
            calls.append(body)
        return real(body, out, c_name, *checks)

    monkeypatch.setattr("skelpy.muscle.muscle.translate", counting)
    a = m.specialise(kinds, c_name="one")
    b = m.specialise(kinds, c_name="two")
    c = m.specialise(kinds, out_dtype=np.float64, c_name="three")
    assert len(calls) == 3 and calls[0] is calls[1] is calls[2] is m.typed_body(kinds)
    assert "one_sq" in a.source and "two_sq" in b.source and c.out_dtype == np.float64
    helper = calls[0].notes[calls[0].function.node.body.left]
    assert isinstance(helper.meaning, HelperCall) and helper.meaning.muscle is Muscle(sq)


# ---------------------------------------------------------------------------------------------
# weak scalars: a fixed point before emission, then one emission
# ---------------------------------------------------------------------------------------------


def chained_weak(x):
    a = 0.5          # resolved to float32 only once b is: a's context comes through b
    b = a * 2.0
    return x * b


def test_weak_resolution_is_a_fixed_point_and_emission_runs_once(monkeypatch):
    emitted = []
    real = translate_mod.emit_body

    def counting(*args, **kw):
        emitted.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(translate_mod, "emit_body", counting)
    kinds = (Scalar(np.float32),)
    tm = Muscle(chained_weak).specialise(kinds, c_name="chained")
    assert len(emitted) == 1
    assert "float a = " in tm.source and "float b = " in tm.source
    assert not tm.uses_fp64 and "double" not in tm.source
    body = Muscle(chained_weak).typed_body(kinds)
    wt = resolve_weak(body, "chained", result_dtypes(body.ret_ty, None)[1])
    assert wt.resolved == {"a": F32, "b": F32}
    # a weak parameter passed as float32: the caller converts, the muscle computes in float32
    tm = Muscle(lambda x, s: x * s).specialise((Scalar(np.float32), Scalar(float, weak=True)))
    assert tm.scalar_dtypes[1] == F32 and not tm.uses_fp64


def test_an_out_of_range_python_int_is_an_error_in_its_context():
    with pytest.raises(TranslationError, match="300 out of bounds for int8"):
        Muscle(lambda x: x + 300).specialise((Scalar(np.int8),))
    tm = Muscle(lambda x: x + 300).specialise((Scalar(np.int16),))
    assert "300" in tm.source


# ---------------------------------------------------------------------------------------------
# constant loops (unroll hints)
# ---------------------------------------------------------------------------------------------


def helper_loop(nb):
    t = 0.0
    for k in range(3):
        t += nb[k, 0]
    return t


def looping(nb, n):
    s = 0.0
    for dr in range(-2, 3):
        for dc in range(-1, 2):
            s += nb[dr, dc]
    for i in range(n):
        for j in range(4):
            s += j * i
    while s > 100.0:
        s = s / 2
    return s + helper_loop(nb)


def test_constant_loops_are_recorded_with_their_nesting():
    tm = Muscle(looping).specialise((nb_kind(), Scalar(np.int32)), c_name="lp")
    loops = tm.constant_loops
    assert [lp.trips for lp in loops] == [3, 5, 3, 4]      # the helper's comes first in source
    assert [lp.parent for lp in loops] == [None, None, 1, None]
    offsets = [lp.offset for lp in loops]
    assert offsets == sorted(offsets)
    for lp in loops:
        line = tm.source[lp.offset:].split("\n", 1)[0]
        assert line.lstrip().startswith("for (long _sk_i") and line.startswith("    ")
    helper_at = tm.source.index("lp_helper_loop(")
    assert helper_at < loops[0].offset < tm.source.index("static inline float lp(")
    # the loop over range(n) is not constant, so the inner range(4) loop has no parent
    assert tm.source.count("for (long") == 5


def test_unroll_pragmas_go_before_the_chosen_loops(ocl_context):
    tm = Muscle(looping).specialise((nb_kind(), Scalar(np.int32)), c_name="lpu")
    src = tm.with_unroll_pragmas([2, 0])
    lines = src.split("\n")
    pragmas = [k for k, ln in enumerate(lines) if ln.strip() == "#pragma unroll"]
    assert len(pragmas) == 2
    for k, lp in zip(pragmas, (tm.constant_loops[0], tm.constant_loops[2])):
        nxt = lines[k + 1]
        assert nxt == tm.source[lp.offset:].split("\n", 1)[0]       # right before the loop
        assert lines[k] == nxt[: len(nxt) - len(nxt.lstrip())] + "#pragma unroll"  # same indent
    assert "\n".join(ln for ln in lines if ln.strip() != "#pragma unroll") == tm.source
    assert tm.with_unroll_pragmas([]) == tm.source
    build(ocl_context, src, tm)


def test_c_muscles_have_no_constant_loops_or_read_sites():
    tm = Muscle("float func(nb_t nb) { float s = 0; for (long i = 0L; i < 3L; i += 1L) "
                "{ s += SKELPY_GET2(nb, i, 0); } return s; }").specialise([nb_kind()])
    assert tm.constant_loops == () and tm.read_sites == {}
    assert tm.with_unroll_pragmas([]) == tm.source


@pytest.fixture(scope="module")
def ocl_context():
    cl = pytest.importorskip("pyopencl")
    for p in cl.get_platforms():
        devs = p.get_devices()
        if devs:
            return cl.Context(devices=[devs[0]])
    pytest.skip("no OpenCL device")


def build(ctx, src: str, tm: TypedMuscle) -> None:
    """Compile ``src`` with a kernel that calls the muscle, so the compiler sees it all."""
    import pyopencl as cl

    args = ", ".join(["__global float* out"] + [f"{d}" for d in tm.c_params])
    names = [tm.param_names[i] for i in range(len(tm.kinds))]
    kernel = f"__kernel void k({args}) {{ out[0] = {tm.call(names)}; }}\n"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cl.Program(ctx, src + kernel).build()


# ---------------------------------------------------------------------------------------------
# read sites
# ---------------------------------------------------------------------------------------------

REACH = 2


def get_right(nb):
    return nb[0, 3]


def reading(nb, k):
    up = nb[-1, 0]
    far = nb[REACH, 0]
    s = 0.0
    for d in range(1, 3):
        s += nb[0, d]
    return up + far + s + get_right(nb) + nb[k, 0]


def test_read_sites_give_offsets_and_lines_in_source_order():
    tm = Muscle(reading).specialise((nb_kind(), Scalar(np.int32)))
    assert tm.read_sites[0] == (
        ReadSite((-1, 0), where(reading, "up = nb[-1, 0]")),
        ReadSite((2, 0), where(reading, "far = nb[REACH, 0]")),
        ReadSite((0, 1), where(reading, "s += nb[0, d]")),
        ReadSite((0, 2), where(reading, "s += nb[0, d]")),
        ReadSite(None, where(reading, "nb[k, 0]")),
        ReadSite((0, 3), where(get_right, "return nb[0, 3]")),
    )
    assert tm.accesses[0] is None and tm.access_bounds[0] is None
    tm = Muscle(lambda p, x: x[p[0]]).specialise((IndexPoint(), global_array(np.int32)))
    assert tm.read_sites[1] == (ReadSite(None, tm.read_sites[1][0].where),)
    assert tm.read_sites[1][0].where.startswith("tests/test_muscle_pipeline.py:")


def loop_reach(nb):
    s = 0.0
    for d in range(-3, 4):
        s += nb[d, 0]
    return s


def reach_via_helper(nb):
    return nb[0, 0] + get_right(nb)


def test_shape_errors_name_the_line_of_reads_in_loops_and_helpers():
    with pytest.raises(sk.ShapeError) as info:
        sk.Stencil(loop_reach, shape=1)
    msg = str(info.value)
    assert f"test_muscle_pipeline.py:{line_of(loop_reach, 's += nb[d, 0]')}" in msg
    assert "[-3, 0]" in msg and "[3, 0]" in msg
    with pytest.raises(sk.ShapeError) as info:
        sk.Stencil(reach_via_helper, shape=2)
    assert f"test_muscle_pipeline.py:{line_of(get_right, 'return nb[0, 3]')}" in str(info.value)


# ---------------------------------------------------------------------------------------------
# calls between muscles
# ---------------------------------------------------------------------------------------------


def ping(n):
    return pong(n - 1) if n > 0 else 0


def pong(n):
    return ping(n - 1) if n > 0 else 1


def test_mutual_recursion_is_an_error():
    with pytest.raises(TranslationError, match="recursive call"):
        Muscle(ping).specialise((Scalar(np.int32),))


def test_result_type_of_c_and_python_muscles():
    assert Muscle("double func(float x) { return x; }").result_type(
        (Scalar(np.float32),)) == Ty(np.dtype(np.float64))
    assert Muscle(lambda x: x * 2.5).result_type((Scalar(np.int8),)) == Ty(np.dtype(np.float64))
    assert Muscle(lambda x: x * 2.5).result_type((Scalar(float, weak=True),)).weak


# ---------------------------------------------------------------------------------------------
# the package's shape
# ---------------------------------------------------------------------------------------------


def run_cycle_check(*folders) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "check_import_cycles.py"),
                           *map(str, folders)], capture_output=True, text=True, cwd=ROOT)


def test_the_muscle_package_has_no_import_cycle(tmp_path):
    res = run_cycle_check("skelpy/muscle")
    assert res.returncode == 0, res.stdout
    assert " 0 cycle(s)" in res.stdout
    # the check does see a cycle, also one through a function-level import
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import g\n\ndef f():\n    return g()\n")
    (pkg / "b.py").write_text("def g():\n    from .a import f\n    return f\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from .a import f\n")
    res = run_cycle_check(pkg)
    assert res.returncode == 1 and "pkg.a <-> pkg.b" in res.stdout and "pkg.c" not in res.stdout


def test_no_module_of_the_package_is_over_600_lines():
    sizes = {p.name: len(p.read_text().splitlines())
             for p in (ROOT / "skelpy" / "muscle").glob("*.py")}
    assert max(sizes.values()) <= 600, sizes
