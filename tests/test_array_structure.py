"""Structure ids built with each node (issue 15, per-expression overhead): a tree-shaped graph
seen before runs without walking it, and graphs that share nodes or leaves never take
another graph's program."""

from __future__ import annotations

import numpy as np
import pytest

import skelpy as sk
from skelpy import runtime
from skelpy.array import expression, fusion, graph


@pytest.fixture
def walks(monkeypatch):
    """How many times a graph was walked (the path a repeated structure must skip)."""
    count = [0]
    real = fusion._walk

    def counting(*args):
        count[0] += 1
        return real(*args)

    monkeypatch.setattr(fusion, "_walk", counting)
    return count


def test_a_repeated_structure_is_neither_walked_nor_retyped(walks, rng, monkeypatch):
    rt = runtime.current()
    a, b = (rng.standard_normal(37).astype(np.float32) for _ in range(2))
    x, y = sk.Vector(a), sk.Vector(b)
    sk.evaluate(1.5 * x + y)                       # the first time: walked, typed, built
    typed = [0]
    real = graph.numpy_dtype

    def counting(*args):
        typed[0] += 1
        return real(*args)

    monkeypatch.setattr(graph, "numpy_dtype", counting)
    walks[0] = 0
    builds = rt.stats.builds
    for k in range(20):
        u = sk.Vector(a + k)                       # other containers, other values
        z = float(k) * u + y
        np.testing.assert_array_equal(z.to_numpy(),
                                      np.float32(k) * (a + np.float32(k)) + b)
    assert walks[0] == 0 and typed[0] == 0 and rt.stats.builds == builds


def test_shared_nodes_and_leaves_never_take_a_tree_program(walks, rng):
    a, b = (rng.standard_normal(29).astype(np.float32) for _ in range(2))
    x, y = sk.Vector(a), sk.Vector(b)
    two, three = np.float32(2), np.float32(3)
    # a tree first: x*c0 + x*c1 (two constants, x read once)
    np.testing.assert_array_equal((x * 2.0 + x * 3.0).to_numpy(), a * two + a * three)
    # the same operations sharing one node: t computed once, its constant passed once
    t = x * 2.0
    assert (t + t).storage.pending.node.shared
    np.testing.assert_array_equal((t + t).to_numpy(), a * two + a * two)
    # a node shared two levels down: u and v both read t
    t = x + y
    u, v = t * 2.0, t * 3.0
    r = u + v
    assert r.storage.pending.node.shared
    np.testing.assert_array_equal(r.to_numpy(), (a + b) * two + (a + b) * three)
    # the same leaf read twice vs two leaves: different structures
    np.testing.assert_array_equal((x * x + y).to_numpy(), a * a + b)
    np.testing.assert_array_equal((x * y + y).to_numpy(), a * b + b)
    np.testing.assert_array_equal((y * y + x).to_numpy(), b * b + a)
    walked = walks[0]
    np.testing.assert_array_equal((y * x + x).to_numpy(), b * a + a)   # a tree seen before
    assert walks[0] == walked


def test_broadcast_and_view_leaves_are_part_of_the_structure(rng):
    m = rng.standard_normal((5, 7)).astype(np.float32)
    row = rng.standard_normal(7).astype(np.float32)
    M, R, M2 = sk.Matrix(m), sk.Vector(row), sk.Matrix(m[::-1].copy())
    np.testing.assert_array_equal((M * 2.0 + M2).to_numpy(), m * np.float32(2) + m[::-1])
    np.testing.assert_array_equal((M * 2.0 + R).to_numpy(), m * np.float32(2) + row)
    np.testing.assert_array_equal((M * 2.0 + M2.T.T).to_numpy(), m * np.float32(2) + m[::-1])
    np.testing.assert_array_equal((M[1:4, ::2] * 2.0 + M2[0:3, 0::2]).to_numpy(),
                                  m[1:4, ::2] * np.float32(2) + m[::-1][0:3, 0::2])
    np.testing.assert_array_equal((M * 2.0 + M2[:, 3:4]).to_numpy(),
                                  m * np.float32(2) + m[::-1][:, 3:4])


def test_a_graph_over_the_limits_is_still_computed_in_parts(rng):
    a = rng.standard_normal(11).astype(np.float32)
    x = sk.Vector(a)
    z, want = x, a
    for k in range(graph.MAX_OPS + 5):
        z = z + float(k % 3)
        want = want + np.float32(k % 3)
    assert z.storage.pending.node.n_ops <= graph.MAX_OPS
    np.testing.assert_array_equal(z.to_numpy(), want)
    expression.evaluate(z)


def test_python_ints_are_typed_by_the_dtypes_that_hold_them(monkeypatch):
    typed = [0]
    real = graph.numpy_dtype

    def counting(*args):
        typed[0] += 1
        return real(*args)

    monkeypatch.setattr(graph, "numpy_dtype", counting)
    a = np.arange(-3, 4, dtype=np.int8)
    x = sk.Vector(a)
    for k in (64, 100, 127, 90):                   # one bit length, all in int8: typed once
        np.testing.assert_array_equal((x + k).to_numpy(), a + np.int8(k))
    assert typed[0] == 1
    for k in (128, 300):                           # NumPy's OverflowError, each time
        with pytest.raises(sk.DTypeError):
            x + k
    for k in (-128, -129, 1000):                   # out of range: NumPy compares exactly
        np.testing.assert_array_equal((x == k).to_numpy(), a == k)
        np.testing.assert_array_equal((x < k).to_numpy(), a < k)
    u = sk.Vector(np.arange(5, dtype=np.uint8))
    np.testing.assert_array_equal((u > -1).to_numpy(), np.ones(5, bool))
    np.testing.assert_array_equal((u * 255).to_numpy(), np.arange(5, dtype=np.uint8) * 255)
