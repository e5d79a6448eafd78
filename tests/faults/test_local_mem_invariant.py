"""Issue 11 item 9: PoCL aborts the whole process when a work-group asks for more than the
device's local memory (1 MiB there), so no legal launch point may ask for more — over every
skeleton's parameter space — and a launch that would is refused by the runtime instead."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import skelpy as sk
from skelpy import runtime


def _pad_nearest(a, s):
    return np.pad(a, ((s.north, s.south), (s.west, s.east)), mode="edge")


def far_corners(nb):
    return nb[0, 0] + 2 * nb[-3, 2] - nb[1, -4]


STENCIL_CASES = [
    ("reach 1 float32", lambda nb: nb[-1, 0] + nb[1, 0] - nb[0, 1], None, np.float32),
    ("far corners int8", far_corners, None, np.int8),
    ("wide uint8", lambda nb: nb[0, -40] + nb[20, 3], None, np.uint8),
    ("declared reach 12 float64", lambda nb: nb[0, 0] * 2, 12, np.float64),
    ("reach 60 int32", lambda nb: nb[60, -60] - nb[0, 0], None, np.int32),
]


def _plan(skel):
    return next(iter(skel._plans.values()))


@pytest.mark.parametrize("name, muscle, shape, dtype", STENCIL_CASES,
                         ids=[c[0] for c in STENCIL_CASES])
def test_every_legal_stencil_point_fits_local_memory(rt, has_fp64, name, muscle, shape, dtype):
    if dtype == np.float64 and not has_fp64:
        pytest.skip("no fp64")
    limit = rt.device.local_mem_size
    st = sk.Stencil(muscle, shape=shape, border="nearest")
    a = (np.arange(37 * 41) % 13).astype(dtype).reshape(37, 41)
    st(a)
    plan = _plan(st)
    points = plan.space(rt).points()
    assert points
    needs = [plan.local_bytes(p) for p in points]
    assert max(needs) <= limit
    # The point asking the most, run: the runtime's own count of the kernel's local arrays
    # plus the staged tile stays within the device, and the result is right.
    worst = points[int(np.argmax(needs))]
    kernel = plan.kernel(rt, worst)
    assert rt.kernel_local_mem_size(kernel) + plan.local_bytes(worst) <= limit
    got = st(a, params=worst).to_numpy()
    assert st.last_launch.params == worst
    ref = st(a, params={"local": 0, "vec": 1, "cr": 1, "cc": 1}).to_numpy()
    np.testing.assert_array_equal(got, ref)


def test_the_largest_tiles_are_excluded_and_run_without_local_memory(rt):
    # a reach whose smallest tile does not fit: only local=0 is legal
    limit = rt.device.local_mem_size
    reach = int((limit / 4) ** 0.5) // 2 + 1
    st = sk.Stencil(lambda nb: nb[0, 0], shape=reach)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(st(a).to_numpy(), a)
    assert {p["local"] for p in _plan(st).space(rt).points()} == {0}


@pytest.mark.parametrize("make, args", [
    (lambda: sk.Map(lambda v: v * 2), (np.ones(50, np.float32),)),
    (lambda: sk.Zip(lambda v, w, t: v + w * t[1]),
     (np.ones(50, np.int8), np.ones(50, np.float32), np.arange(4.0, dtype=np.float32))),
    (lambda: sk.Map(lambda r, c: r * c), (sk.IndexMatrix((5, 7)),)),
])
def test_elementwise_kernels_ask_for_no_local_memory(rt, make, args):
    f = make()
    f(*args)
    plan = _plan(f)
    assert all(plan.local_bytes(p) == 0 for p in plan.space(rt).points())
    assert rt.kernel_local_mem_size(plan.kernel(rt, plan.space(rt).default)) == 0


_OVER_LIMIT = textwrap.dedent("""
    import numpy as np
    import pyopencl as cl
    from skelpy import runtime
    from skelpy.errors import RefusedParameters

    rt = runtime.current()
    prg = rt.build("__kernel void k(__global float* x, __local float* t) {"
                   " t[get_local_id(0)] = x[0]; barrier(CLK_LOCAL_MEM_FENCE);"
                   " x[get_global_id(0)] = t[0]; }")
    k = rt.kernel(prg, "k")
    buf = rt.allocate(64 * 4)
    ok = rt.launch(k, (64,), (64,), [buf, cl.LocalMemory(1024)], params={})
    ok.wait()
    try:
        rt.launch(k, (64,), (64,), [buf, cl.LocalMemory(rt.device.local_mem_size + 4)],
                  params={"over": 1})
    except RefusedParameters as exc:
        print("refused:", exc)
""")


def test_a_launch_over_local_memory_is_refused_not_aborted(tmp_path):
    # in a child process: without the runtime's check, PoCL aborts the process
    script = tmp_path / "over_limit.py"
    script.write_text(_OVER_LIMIT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=dict(os.environ, SKELPY_CACHE_DIR=str(tmp_path)), timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "refused:" in out.stdout and "bytes of local memory" in out.stdout


def test_runtime_refusal_of_local_memory_in_process(rt):
    prg = rt.build("__kernel void k2(__global float* x, __local float* t) {"
                   " t[0] = 1.0f; x[0] = t[0]; }")
    k = rt.kernel(prg, "k2")
    buf = rt.allocate(16)
    import pyopencl as cl

    with pytest.raises(sk.RefusedParameters, match="local memory"):
        rt.launch(k, (1,), (1,), [buf, cl.LocalMemory(rt.device.local_mem_size + 1)],
                  params={"x": 1})
    runtime.current().finish()


def _add(a, b):
    return a + b


def _keep_first(a, b):          # associative, not commutative: the order-keeping kernel
    return a


FOLD_CASES = [
    ("reduce float32 commutative", lambda: sk.Reduce(_add, 0), (np.ones(5000, np.float32),)),
    ("reduce float64 ordered", lambda: sk.Reduce(_keep_first, 0, commutative=False),
     (np.ones(5000, np.float64),)),
    ("reduce int64 axis", lambda: sk.Reduce(_add, 0, axis=1), (np.ones((40, 50), np.int64),)),
    ("mapreduce over an index", lambda: sk.MapReduce(lambda i: i * 2, _add, 0),
     (sk.IndexVector(3000),)),
    ("scan float64", lambda: sk.Scan(_add, 0), (np.ones(5000, np.float64),)),
    ("scan int8 to int64", lambda: sk.Scan(_add, 0, inclusive=True), (np.ones(5000, np.int8),)),
    ("allpairs float64", lambda: sk.AllPairs(zip=lambda a, b: a * b, reduce=_add),
     (np.ones((33, 17)), np.ones((20, 17)))),
    ("allpairs generic", lambda: sk.AllPairs(lambda a, b: a[0] * b[1]),
     (np.ones((9, 5), np.float32), np.ones((7, 5), np.float32))),
]


@pytest.mark.parametrize("name, make, args", FOLD_CASES, ids=[c[0] for c in FOLD_CASES])
def test_every_legal_fold_point_fits_local_memory(rt, has_fp64, name, make, args):
    if not has_fp64 and any(getattr(a, "dtype", None) == np.float64 for a in args):
        pytest.skip("no fp64")
    limit = rt.device.local_mem_size
    skel = make()
    first = skel(*args)
    plan = _plan(skel)
    points = plan.space(rt).points()
    needs = [plan.local_bytes(p) for p in points]
    assert points and max(needs) <= limit
    # the point asking the most: the runtime's count of the kernel's own local arrays stays
    # within the device too, and the point computes what the first call did
    worst = points[int(np.argmax(needs))]
    name0 = plan.source.kernel_names[0]
    k = plan.kernel(rt, worst, name0)
    assert rt.kernel_local_mem_size(k) <= limit
    again = skel(*args, params=worst)
    assert skel.last_launch.params == worst
    np.testing.assert_allclose(np.asarray(again), np.asarray(first), rtol=1e-6)


def test_generic_allpairs_rows_too_long_for_local_memory_are_refused_and_fall_back(rt):
    d = rt.device.local_mem_size // 4 // 2 + 8         # two staged rows do not fit
    a = np.ones((2, d), np.float32)
    ap = sk.AllPairs(lambda x, y: x[0] + y[d - 1])
    out = ap(a, a, params={"tm": 1, "tn": 1, "rm": 1, "rn": 1, "local_rows": 1})
    np.testing.assert_array_equal(out.to_numpy(), np.full((2, 2), 2, np.float32))
    assert ap.last_launch.params["local_rows"] == 0
    assert ap.last_launch.refused and ap.last_launch.refused[0]["local_rows"] == 1
