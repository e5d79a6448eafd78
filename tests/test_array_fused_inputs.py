"""Pending values as the input expression of Scan and AllPairs (issue 15): one kernel,
results equal bit for bit to the unfused path (the value computed first), and the cost rule
that materialises an expression a consumer would recompute too often."""

from __future__ import annotations

import numpy as np
import pytest

import skelpy as sk
from skelpy import runtime
from skelpy.array import inputs

CUMSUM = sk.Scan(lambda p, q: p + q, 0, inclusive=True)
EXCLUSIVE_MAX = sk.Scan(lambda p, q: max(p, q), -(2**15))
SQUARE = sk.Map(lambda v: v * v)
MATMUL = sk.AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b)
LEVELS = {"wg": 16, "items": 4, "method": "levels"}


@pytest.fixture
def rt():
    return runtime.current()


def _run(rt, fn):
    """(launches, builds, result as NumPy) of ``fn()``."""
    rt.finish()
    rt.stats.reset()
    out = fn()
    out = out.to_numpy() if isinstance(out, (sk.Vector, sk.Matrix)) else out
    rt.finish()
    return rt.stats.launches, rt.stats.builds, out


def _computed(x):
    sk.evaluate(x)
    return x


@pytest.mark.parametrize("n", [0, 1, 7, 1009])
def test_a_scanned_expression_is_one_kernel_equal_to_the_unfused_scan(rt, n, rng):
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    x, y = sk.Vector(a), sk.Vector(b)
    want = CUMSUM(_computed(x * 2.5 + y)).to_numpy()
    CUMSUM(x * 2.5 + y)                                       # builds
    launches, builds, _ = _run(rt, lambda: CUMSUM(x * 1.5 + y))
    assert builds == 0                      # another constant, the same kernel
    assert launches == (1 if n else 0)
    _, _, got = _run(rt, lambda: CUMSUM(x * 2.5 + y))
    np.testing.assert_array_equal(got, want)                  # bitwise
    if n:
        assert CUMSUM.last_launch.skeleton == "scan"
        assert "fused" in sk.array.last_skeleton().origin


def test_the_levels_method_reads_the_expression_without_a_temporary(rt, rng):
    a = rng.integers(-300, 300, 3001).astype(np.int16)
    x = sk.Vector(a)
    # levels over 3001 elements in tiles of 64: tile sums, their one-tile scan, the tiles
    launches, _, got = _run(rt, lambda: EXCLUSIVE_MAX(x * x - 7, params=LEVELS))
    assert launches == 3                                     # no elementwise kernel first
    with np.errstate(over="ignore"):
        sq = (a * a - 7).astype(np.int16)
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got[1:], np.maximum.accumulate(sq)[:-1])
    assert got[0] == -(2**15)


def test_a_lazy_map_result_and_a_transposed_view_are_scanned_in_one_kernel(rt, rng):
    a = rng.standard_normal((37, 53)).astype(np.float32)
    m = sk.Matrix(a)
    launches, _, got = _run(rt, lambda: CUMSUM(np.sin(m.T)))
    assert launches == 1 and got.shape == (53, 37)
    np.testing.assert_allclose(got.ravel(), np.cumsum(np.sin(a.T.astype(np.float64))),
                               rtol=1e-5, atol=1e-4)
    v = sk.Vector(np.arange(1, 200, dtype=np.int32))
    with sk.lazy():
        launches, _, got = _run(rt, lambda: CUMSUM(SQUARE(v)))
    assert launches == 1
    np.testing.assert_array_equal(got, np.cumsum(np.arange(1, 200, dtype=np.int64) ** 2))


@pytest.mark.parametrize("n, m, d", [(1, 1, 1), (37, 5, 61), (70, 130, 33)])
def test_allpairs_reads_cheap_expressions_as_it_fetches(rt, n, m, d, rng):
    A = sk.Matrix(rng.standard_normal((n, d)).astype(np.float32))
    Bt = sk.Matrix(rng.standard_normal((d, m)).astype(np.float32))
    want = MATMUL(_computed(A * 2 + 1), _computed(Bt.T - 0.5)).to_numpy()
    launches, _, got = _run(rt, lambda: MATMUL(A * 2 + 1, Bt.T - 0.5))
    assert launches == 1
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, (A.to_numpy() * 2 + 1) @ (Bt.to_numpy() - 0.5),
                               rtol=1e-4, atol=1e-4)


def test_allpairs_materialises_an_expression_it_would_recompute_too_often(rt, rng):
    A = sk.Matrix(rng.standard_normal((9, 8)).astype(np.float32))
    B = sk.Matrix(rng.standard_normal((64 * 4, 8)).astype(np.float32))
    assert not inputs.worth_fusing(sk.array.expression.node_of(np.exp(A)), 4)
    want = MATMUL(_computed(np.exp(A)), B).to_numpy()
    launches, _, got = _run(rt, lambda: MATMUL(np.exp(A), B * 1))
    assert launches == 2                      # exp(A) first; B * 1 (read twice) fused
    np.testing.assert_array_equal(got, want)


def test_the_cost_rule():
    x = sk.Vector(np.ones(4, np.float32))
    cheap = sk.array.expression.node_of(x * 2 + 1)
    heavy = sk.array.expression.node_of(np.exp(x) / x)
    shared = x * 3
    twice = sk.array.expression.node_of(shared * shared)
    assert inputs.cost(cheap) == 2 and inputs.cost(twice) == 2      # a shared node once
    assert inputs.cost(heavy) == 2 * inputs.HEAVY_OP
    assert inputs.worth_fusing(heavy, 1)                 # read once: always
    assert inputs.worth_fusing(cheap, 9) and not inputs.worth_fusing(cheap, 10)
