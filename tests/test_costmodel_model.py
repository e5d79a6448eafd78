"""The static side of the cost model: access classes of muscle reads, operation counts of a
call, and the prediction built from them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from costmodel_support import coefficients

from skelpy.costmodel import model
from skelpy.costmodel.access import extra_read_classes, read_classes
from skelpy.costmodel.features import Work, call_work, muscle_ops
from skelpy.costmodel.terms import Line
from skelpy.muscle import Muscle, Scalar, global_array

I64 = Scalar(np.dtype(np.int64))
F32 = Scalar(np.dtype(np.float32))
WEAK_INT = Scalar(np.dtype(np.int64), weak=True)
A = global_array(np.float32, 1)
M2 = global_array(np.float32, 2)


def _loop_affine(i, a):
    s = 0.0
    for k in range(8):
        s += a[i + k] * a[k]
    return s


def _loop_runtime(i, a, n):
    s = 0.0
    for k in range(n):
        s += a[k]
    j = i + 1
    return s + a[j]


def _branchy(i, a, x):
    j = i
    if x > 0:
        j = i * 2
    return a[j]


def _nested(r, c, m):
    t = 0.0
    for dr in range(3):
        for dc in range(2):
            t += m[r + dr, c + dc]
    return t


CASES = [
    (lambda i, a: a[i], [I64, A], {0: "id"}, {"coalesced": 1}),
    (lambda i, a: a[i + 3] + a[i - 1], [I64, A], {0: "id"}, {"coalesced": 2}),
    (lambda i, a: a[3 - i], [I64, A], {0: "id"}, {"coalesced": 1}),
    (lambda i, a: a[2 * i], [I64, A], {0: "id"}, {"strided": 1}),
    (lambda i, a, k: a[i * k], [I64, A, WEAK_INT], {0: "id"}, {"strided": 1}),
    (lambda i, a: a[0] + a[5], [I64, A], {0: "id"}, {"constant": 2}),
    (lambda i, a, k: a[k + 1], [I64, A, WEAK_INT], {0: "id"}, {"constant": 1}),
    (lambda x, a: a[int(x)], [F32, A], {0: "data"}, {"gathered": 1}),
    (lambda i, a: a[i * i], [I64, A], {0: "id"}, {"gathered": 1}),
    (lambda i, a: a[i // 2], [I64, A], {0: "id"}, {"gathered": 1}),
    (lambda i, a: a[int(a[i])], [I64, A], {0: "id"}, {"coalesced": 1, "gathered": 1}),
    (lambda r, c, m: m[r, c] + m[c, r], [I64, I64, M2], {0: "row", 1: "col"},
     {"coalesced": 1, "strided": 1}),
    (_loop_affine, [I64, A], {0: "id"}, {"coalesced": 8, "constant": 8}),
    (_loop_runtime, [I64, A, WEAK_INT], {0: "id"}, {"constant": 1, "coalesced": 1}),
    (_branchy, [I64, A, F32], {0: "id", 2: "data"}, {"gathered": 1}),
    (_nested, [I64, I64, M2], {0: "row", 1: "col"}, {"coalesced": 6}),
]


@pytest.mark.parametrize("fn, kinds, roles, want", CASES)
def test_access_classes_of_reads(fn, kinds, roles, want):
    got = read_classes(Muscle(fn).typed_body(tuple(kinds)), roles)
    assert {k: v for k, v in got.items() if v} == want


def test_reads_the_analysis_cannot_see_count_as_gathered():
    m = Muscle("float func(long i, __global const float* a, long a_n) { return a[i]; }")
    got = extra_read_classes(m, (I64, A), {0: "id"}, {"reads_dyn": 2.0})
    assert got == {"gathered": 2.0}
    m = Muscle(lambda i, a: a[i] + a[0])
    got = extra_read_classes(m, (I64, A), {0: "id"}, {"reads_dyn": 2.0}, itemsize=4)
    assert got == {"coalesced": 4.0, "constant": 1.0}


def _features(fn, kinds):
    return Muscle(fn).specialise(kinds, c_name="f").features


def test_muscle_operations_by_type():
    ops = muscle_ops(_features(lambda x: x * np.float32(2) + np.float32(1), [F32]))
    assert ops["alu32"] == 2 and ops["alu64"] == 0 and ops["div"] == 0
    ops = muscle_ops(_features(lambda x: math.sqrt(x) / x, [F32]))
    assert ops["math"] == 1 and ops["div"] == 1
    ops = muscle_ops(_features(lambda x: x * 2.5 + 1.0, [Scalar(np.dtype(np.float64))]))
    assert ops["alu64"] == 2 and ops["alu32"] == 0
    ops = muscle_ops(_features(lambda x: x * 3 + 1, [Scalar(np.dtype(np.int32))]))
    assert ops["int"] == 2 and ops["alu32"] == 0


def test_loops_weigh_their_operations():
    def f(x):
        s = x
        for _ in range(10):
            s = s * x + np.float32(1)
        return s
    ops = muscle_ops(_features(f, [F32]))
    assert ops["alu32"] >= 20
    # a loop whose trip count is known only at run time: counted loop_trip times
    def g(x, n):
        s = x
        for _ in range(n):
            s = s * x
        return s
    feats = _features(g, [F32, WEAK_INT])
    assert muscle_ops(feats, loop_trip=50)["alu32"] == pytest.approx(
        50 * muscle_ops(feats)["alu32"])


MUL_ADD = {"ops_add": 1.0, "ops_mul": 1.0, "ops_float": 2.0, "instructions": 2.0,
           "instructions_dyn": 2.0, "reads": 0.0}


@pytest.mark.parametrize("n", [0, 1, 1000, 12345])
def test_map_and_zip_work_is_linear_in_the_size(n):
    w = call_work("map", MUL_ADD, {"n": n}, input_itemsizes=[4], out_itemsize=4)
    assert w.kernels == 1 and w.work_items == n
    assert w.memory["read_byte"] == 4 * n and w.memory["write_byte"] == 4 * n
    assert w.ops["alu32"] == 2 * n
    z = call_work("zip", MUL_ADD, {"n": n}, input_itemsizes=[4, 8], out_itemsize=8)
    assert z.memory["read_byte"] == 12 * n and z.memory["write_byte"] == 8 * n


def test_work_of_the_other_skeletons():
    r = call_work("reduce", {**MUL_ADD, "map_ops_mul": 1.0, "map_instructions": 1.0,
                             "map_instructions_dyn": 1.0, "map_ops_float": 1.0},
                  {"n": 100.0}, input_itemsizes=[4], out_itemsize=4)
    assert r.kernels == 2 and r.ops["alu32"] == 300 and r.memory["write_byte"] == 0
    s = call_work("scan", MUL_ADD, {"n": 100.0}, input_itemsizes=[4], out_itemsize=4)
    assert s.memory["write_byte"] == 400 and s.ops["alu32"] == 400
    st = call_work("stencil", {**MUL_ADD, "reads_dyn": 5.0}, {"n": 64.0},
                   input_itemsizes=[4], out_itemsize=4, iterations=3,
                   extra_reads={"gathered": 7.0})
    assert st.kernels == 3 and st.memory["cached"] == 3 * 64 * 4
    assert st.memory["gathered"] == 0            # neighbourhood reads are the stencil's own
    ap = call_work("allpairs", {**MUL_ADD, "reduce_ops_add": 1.0, "reduce_instructions": 1.0,
                                "reduce_instructions_dyn": 1.0, "reduce_ops_float": 1.0},
                   {"n": 6.0, "rows": 2.0, "cols": 3.0, "depth": 10.0},
                   input_itemsizes=[4, 4], out_itemsize=4)
    assert ap.work_items == 6 and ap.ops["alu32"] == 6 * 10 * 3
    assert ap.memory["cached"] == 2 * 6 * 10


def test_extra_reads_join_the_memory_terms():
    w = call_work("map", MUL_ADD, {"n": 10.0}, input_itemsizes=[4], out_itemsize=4,
                  extra_reads={"coalesced": 8.0, "strided": 1.0, "gathered": 2.0})
    assert w.memory["read_byte"] == 10 * (4 + 8)
    assert w.memory["strided"] == 10 and w.memory["gathered"] == 20


def test_kernel_time_is_a_roofline_with_overlap():
    c = coefficients(memory=dict.fromkeys(("read_byte", "write_byte", "strided", "gathered",
                                           "constant", "cached"), 1e-9),
                     ops=dict.fromkeys(("alu32", "alu64", "int", "div", "math"), 1e-9),
                     work_item=Line(2e-6, 1e-12), overlap=0.5)
    w = Work(1000.0, 2, {"read_byte": 3000.0}, {"alu32": 1000.0})
    mem, ops = 3000e-9, 1000e-9
    want = 2 * 2e-6 + 1000 * 1e-12 + max(mem, ops) + 0.5 * min(mem, ops)
    assert model.kernel_seconds(c, w) == pytest.approx(want)
    assert model.kernel_seconds(c, w.at_size(2.0)) - 2 * 2e-6 == pytest.approx(
        2 * (want - 2 * 2e-6))
    assert model.launch_seconds(c, 1) == c.launch.latency
    assert model.launch_seconds(c, 3) == pytest.approx(c.launch.latency + 2 * c.launch.per_unit)

