"""Reduce and MapReduce against NumPy: sums, products, min, max and user-defined associative
operators (commutative or not) over awkward sizes and four dtypes, the accuracy of float sums,
every point of a small launch-parameter grid, axis reductions, fusion into one launch, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import skelpy as sk
from skelpy import runtime
from skelpy.skeletons.fold_common import one_launch_ok
from skelpy.skeletons.fold_muscle import muscle_is_commutative

DTYPES = [np.int32, np.int64, np.float32, np.float64]
SIZES = [1, 2, 255, 256, 257, 4099, 2**20]


def add(a, b):
    return a + b


def mul(a, b):
    return a * b


def absmax(a, b):
    """Largest magnitude, ties to the larger value: associative and commutative."""
    return a if abs(a) > abs(b) or (abs(a) == abs(b) and a > b) else b


def last_nonzero(a, b):
    """The last non-zero element: associative but NOT commutative."""
    return b if b != 0 else a


def data(rng, dtype, n, kind="any"):
    dt = np.dtype(dtype)
    if kind == "prod":
        if dt.kind == "f":
            return (1 + 1e-3 * rng.standard_normal(n)).astype(dt)
        return rng.choice(np.array([1, 1, 1, 1, 1, 1, -1, 2, 3], dt), n)
    if kind == "sparse":
        x = rng.integers(-5, 6, n).astype(dt)
        x[rng.random(n) < 0.6] = 0
        return x
    if dt.kind == "f":
        return (rng.standard_normal(n) * 100).astype(dt)
    return rng.integers(-1000, 1001, n).astype(dt)


def ref_absmax(x):
    return x[np.lexsort((x, np.abs(x)))[-1]]


def ref_last_nonzero(x):
    nz = np.flatnonzero(x)
    return x[nz[-1]] if nz.size else x.dtype.type(0)


def check(got, want, x, dtype, op):
    dt = np.dtype(dtype)
    if op in ("sum", "prod"):        # np.sum's accumulator: narrow integers in int64
        dt = np.add.reduce(np.zeros(1, dt)).dtype
    assert isinstance(got, np.generic) and got.dtype == dt, (type(got), getattr(got, "dtype", 0))
    if dt.kind != "f" or op in ("min", "max", "absmax", "last"):
        assert got == want, (got, want)
    elif op == "sum":
        eps = np.finfo(dt).eps
        bound = 16 * eps * math.log2(x.size + 1) * float(np.abs(x.astype(np.float64)).sum())
        assert abs(float(got) - float(want)) <= bound + 1e-30, (got, want, bound)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-3 if dt == np.float32 else 1e-10)


def make(op, dtype):
    dt = np.dtype(dtype)
    if op == "sum":
        return sk.Reduce(add, 0), lambda x: (np.sum(x) if dt.kind != "f"
                                             else math.fsum(x.astype(np.float64))), "any"
    if op == "prod":
        return sk.Reduce(mul, 1), lambda x: (np.prod(x) if dt.kind != "f"
                                             else np.prod(x.astype(np.float64))), "prod"
    lo, hi = (-np.inf, np.inf) if dt.kind == "f" else (np.iinfo(dt).min, np.iinfo(dt).max)
    if op == "min":
        return sk.Reduce(lambda a, b: min(a, b), hi), np.min, "any"
    if op == "max":
        return sk.Reduce(lambda a, b: a if a > b else b, lo), np.max, "any"
    if op == "absmax":
        return sk.Reduce(absmax, 0), ref_absmax, "any"
    return sk.Reduce(last_nonzero, 0), ref_last_nonzero, "sparse"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "last"])
def test_reduce_against_numpy(op, dtype, rng, has_fp64):
    if dtype == np.float64 and not has_fp64:
        pytest.skip("no fp64")
    red, ref, kind = make(op, dtype)
    for n in SIZES:
        x = data(rng, dtype, n, kind)
        with np.errstate(over="ignore"):
            want = ref(x)
        check(red(sk.Vector(x)), want, x, dtype, op)


@pytest.mark.parametrize("dtype,op", [(np.int32, "sum"), (np.int64, "max"),
                                      (np.float64, "last"), (np.int32, "absmax")], ids=str)
def test_big_input(dtype, op, rng, has_fp64):
    if dtype == np.float64 and not has_fp64:
        pytest.skip("no fp64")
    red, ref, kind = make(op, dtype)
    for n in ([1, 257, 4099] if op == "absmax" else []) + [2**22 + 17]:
        x = data(rng, dtype, n, kind)
        check(red(x), ref(x), x, dtype, op)


def test_float32_sum_is_far_more_accurate_than_a_serial_loop(rng):
    x = rng.random(2**22 + 17, dtype=np.float32)
    exact = math.fsum(x.astype(np.float64))
    serial = float(np.cumsum(x, dtype=np.float32)[-1])   # the left-to-right float32 loop
    got = float(sk.Reduce(add, 0)(x))
    assert abs(serial - exact) > 100 * abs(got - exact), (serial - exact, got - exact)
    assert abs(got - exact) <= 1e-6 * exact


GRID = [  # (wg, items, groups, stages); only (wg, items) needs a build of its own
    (1, 1, 1, 1), (1, 1, 4096, 2), (8, 32, 4, 2), (8, 32, 16384, 1), (64, 16, 3, 2),
    (64, 16, 1, 1), (256, 4, 64, 1), (256, 4, 16, 2), (1024, 2, 256, 2), (1024, 2, 1, 1),
]


@pytest.mark.parametrize("op", ["sum", "last"])
def test_every_launch_parameter_of_a_grid(op, rng):
    red, ref, kind = make(op, np.int32)
    sizes = [1, 255, 257, 4099, 100_003]
    xs = [data(rng, np.int32, n, kind) for n in sizes]
    for wg, items, groups, stages in GRID:
        p = {"wg": wg, "items": items, "groups": groups, "stages": stages}
        for x in xs:
            assert red(x, params=p) == ref(x), (p, x.size)
            assert red.last_launch.params == p


def test_commutativity_detection():
    assert muscle_is_commutative(add, np.float32, 0)
    assert muscle_is_commutative(absmax, np.int32, 0)
    assert muscle_is_commutative(lambda a, b: max(a, b), np.float64, -np.inf)
    assert not muscle_is_commutative(last_nonzero, np.int32, 0)
    assert not muscle_is_commutative(lambda a, b: a - b, np.int32, 0)
    assert muscle_is_commutative(lambda a, b: a or b, np.bool_, False)
    x = np.arange(1000, dtype=np.int32)
    for commutative in (False, True, None):
        red = sk.Reduce(add, 0, commutative=commutative)
        assert red(x) == x.sum()
        assert next(iter(red._plans.values())).ordered == (commutative is False)


def test_matrix_all_elements_and_ndarray(rng):
    m = rng.integers(-9, 10, (37, 41)).astype(np.int64)
    red = sk.Reduce(add, 0)
    assert red(sk.Matrix(m)) == m.sum()
    assert red(m) == m.sum()


@pytest.mark.parametrize("axis", [1, 0])
def test_axis_reductions(axis, rng):
    m = rng.integers(-1000, 1001, (300, 129)).astype(np.int32)
    red = sk.Reduce(add, 0, axis=axis)
    for wg, lanes in [(1, 1), (64, 1), (64, 64), (64, 8), (256, 16)]:
        got = red(sk.Matrix(m), params={"wg": wg, "lanes": lanes})
        assert isinstance(got, sk.Vector)
        np.testing.assert_array_equal(got.to_numpy(), m.sum(axis=axis, dtype=np.int32))
    s = data(rng, np.int32, 300 * 129, "sparse").reshape(300, 129)
    got = sk.Reduce(last_nonzero, 0, axis=axis)(s).to_numpy()
    want = np.array([ref_last_nonzero(r) for r in (s if axis == 1 else s.T)], np.int32)
    np.testing.assert_array_equal(got, want)
    mx = sk.Reduce(lambda a, b: max(a, b), -np.inf, axis=axis)(m.astype(np.float32)[:1, :7])
    np.testing.assert_array_equal(mx.to_numpy(), m.astype(np.float32)[:1, :7].max(axis=axis))


def test_empty_input_gives_identity():
    assert sk.Reduce(add, 0)(np.zeros(0, np.float32)) == 0
    r = sk.Reduce(lambda a, b: min(a, b), np.inf)(np.zeros(0, np.float32))
    assert r == np.inf and r.dtype == np.float32
    assert sk.Reduce(add, 0, axis=1)(np.zeros((0, 5), np.int32)).shape == (0,)
    mx = sk.Reduce(lambda a, b: max(a, b), -5, axis=1)(np.zeros((3, 0), np.int32))
    np.testing.assert_array_equal(mx.to_numpy(), [-5] * 3)


def test_int_sums_accumulate_like_numpy_and_dtype_chooses(rng):
    x = rng.integers(0, 127, 10_000).astype(np.int8)
    got = sk.Reduce(add, 0)(x)
    assert got.dtype == np.int64 and got == np.sum(x)
    narrow = sk.Reduce(add, 0, dtype=np.int8)(x)           # wraps, as np.sum(x, dtype=int8)
    assert narrow.dtype == np.int8 and narrow == np.sum(x, dtype=np.int8)
    old = sk.Reduce(add, 0, out_dtype=np.int16)(x)          # the older name
    assert old.dtype == np.int16 and old == np.sum(x, dtype=np.int16)
    with pytest.raises(sk.DTypeError, match="disagree"):
        sk.Reduce(add, 0, dtype=np.int8, out_dtype=np.int16)


def test_bool_any_and_all():
    x = np.zeros(5000, bool)
    anyr = sk.Reduce(lambda a, b: a or b, False)
    allr = sk.Reduce(lambda a, b: a and b, True)
    assert anyr(x) == np.False_ and allr(~x) == np.True_
    x[4321] = True
    assert anyr(x) == np.True_ and allr(x) == np.False_


def test_opencl_c_muscle():
    red = sk.Reduce("float func(float a, float b) { return a + b; }", 0)
    x = np.arange(1000, dtype=np.float32)
    assert red(x) == x.sum()


# -- MapReduce ------------------------------------------------------------------------------------


def test_dot_product_is_one_kernel(rng, stats):
    x, y = rng.random(100_003, dtype=np.float32), rng.random(100_003, dtype=np.float32)
    dot = sk.MapReduce(mul, add, 0)
    vx, vy = sk.Vector(x), sk.Vector(y)
    dot(vx, vy)
    stats.reset()
    got = dot(vx, vy)
    one = one_launch_ok(runtime.current())   # NVIDIA GPUs and CPUs: the fused pass finishes too
    assert stats.launches == (1 if one else 2) and stats.uploads == 0 and stats.downloads == 1
    assert dot.last_launch.params["stages"] == (1 if one else 2)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.dot(x.astype(np.float64), y), rtol=1e-6)


def test_mapreduce_extras_index_space_and_input_rule(rng):
    x = rng.standard_normal(5000).astype(np.float32)
    sq = sk.MapReduce(lambda v, a: a * v * v, add, 0)
    np.testing.assert_allclose(sq(x, 2.0), 2 * np.sum(x.astype(np.float64) ** 2), rtol=1e-5)
    n = 100_000
    pi = sk.MapReduce(lambda i: 4.0 / (1.0 + ((i + 0.5) / n) ** 2), add, 0)(sk.IndexVector(n))
    assert pi.dtype == np.float64 and abs(pi / n - math.pi) < 1e-9
    w = rng.random(5000).astype(np.float32)
    lookup = np.arange(5000, dtype=np.float32)
    # A same-shaped container meant as an extra (read by index) needs inputs=1.
    f = sk.MapReduce(lambda v, t: v * t[0] + t[1], add, 0, inputs=1)
    assert f(w, lookup) == 5000.0
    g = sk.MapReduce(lambda a, b, c: a * b + c, add, 0)       # three inputs, by the rule
    np.testing.assert_allclose(g(w, w, w), np.sum(w.astype(np.float64) ** 2 + w), rtol=1e-5)


def test_reduce_of_a_map_is_lazy(rng, stats):
    x = rng.random(10_000, dtype=np.float32)
    v = sk.Vector(x)
    total = sk.Reduce(add, 0)(sk.Map(lambda a: a * 2)(v))
    assert stats.uploads == 1 and stats.downloads == 1
    np.testing.assert_allclose(total, 2 * x.sum(dtype=np.float64), rtol=1e-5)


def test_errors_name_the_muscle():
    with pytest.raises(sk.DTypeError, match="identity"):
        sk.Reduce(add, "zero")
    with pytest.raises(sk.DTypeError, match="test_reduce.py"):
        sk.Reduce(lambda a, b: max(a, b), -np.inf)(np.arange(5, dtype=np.int32))
    with pytest.raises(sk.ShapeError, match="axis"):
        sk.Reduce(add, 0, axis=2)
    with pytest.raises(sk.ShapeError, match="map muscle takes 2"):
        sk.MapReduce(mul, add, 0)(np.ones(3, np.float32))
    with pytest.raises(sk.ShapeError, match="different shapes"):
        sk.MapReduce(mul, add, 0, inputs=2)(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(sk.DTypeError):
        sk.Reduce(add, 0)(3.0)
    with pytest.raises(sk.ParameterError):
        sk.Reduce(add, 0)(np.ones(10, np.float32), params={"wg": 64, "bogus": 1})


def test_dot_product_example():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "dot_product.py"
    spec = importlib.util.spec_from_file_location("dot_product_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--quick"]) > 0
