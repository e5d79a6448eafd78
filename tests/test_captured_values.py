"""Captured values are read again on every call (issue 10, item 11): a changed global, closure
value, module attribute or captured array is picked up by the next call of the same skeleton
and by any new skeleton, never frozen at the first translation; an unchanged value costs no
new translation and keeps the repeat-call path."""

from __future__ import annotations

import types

import numpy as np
import pytest

import skelpy as sk
from skelpy import tuner

A = np.arange(6, dtype=np.float32)
G = 2.0
TBL = np.array([1.0, 2.0, 3.0], np.float32)
LST = [1, 2, 3]
CFG = types.ModuleType("cfg")
CFG.scale = 2


def scale_by_g(x):
    return x * G


def test_changed_global_reaches_old_and_new_skeletons():
    global G
    G = 2.0
    f = scale_by_g
    np.testing.assert_array_equal(sk.Map(f)(A).to_numpy(), A * 2)
    G = 3.0
    np.testing.assert_array_equal(sk.Map(f)(A).to_numpy(), A * 3)     # a new skeleton
    m = sk.Map(f)
    m(A)
    G = 4.0
    np.testing.assert_array_equal(m(A).to_numpy(), A * 4)               # the same one
    G = 5                                                               # another type
    np.testing.assert_array_equal(m(A).to_numpy(), A * 5)
    G = 2.0


def test_captured_array_and_list_mutated_in_place():
    f = sk.Map(lambda x: x + TBL[1])
    np.testing.assert_array_equal(f(A).to_numpy(), A + 2)
    TBL[1] = 10
    try:
        np.testing.assert_array_equal(f(A).to_numpy(), A + 10)
    finally:
        TBL[1] = 2
    np.testing.assert_array_equal(f(A).to_numpy(), A + 2)
    g = sk.Map(lambda i: LST[i % 3])
    np.testing.assert_array_equal(g(sk.IndexVector(4)).to_numpy(), [1, 2, 3, 1])
    LST[0] = 7
    try:
        np.testing.assert_array_equal(g(sk.IndexVector(4)).to_numpy(), [7, 2, 3, 7])
    finally:
        LST[0] = 1


def test_closure_values_and_module_attributes():
    k = 1.0

    def add_k(x):
        return x + k

    f = sk.Map(add_k)
    np.testing.assert_array_equal(f(A).to_numpy(), A + 1)
    k = 6.0   # noqa: F841 - read by add_k
    np.testing.assert_array_equal(f(A).to_numpy(), A + 6)
    h = sk.Map(lambda x: x * CFG.scale)
    np.testing.assert_array_equal(h(A).to_numpy(), A * 2)
    CFG.scale = 7
    try:
        np.testing.assert_array_equal(h(A).to_numpy(), A * 7)
    finally:
        CFG.scale = 2


def helper_scale(x):
    return x * G


def other_helper(x):
    return x - 1


def test_changes_inside_called_functions():
    global G, helper_scale
    f = sk.Map(lambda x: helper_scale(x) + 1)
    np.testing.assert_array_equal(f(A).to_numpy(), A * 2 + 1)
    G = 3.0
    try:
        np.testing.assert_array_equal(f(A).to_numpy(), A * 3 + 1)
        original, helper_scale = helper_scale, other_helper
        try:
            np.testing.assert_array_equal(f(A).to_numpy(), A - 1 + 1)
        finally:
            helper_scale = original
    finally:
        G = 2.0


def combine(a, b):
    return a | b if G > 0 else a ^ b        # both associative, both with identity 0


def test_every_skeleton_picks_changes_up():
    global G
    bits = np.array([1, 3, 4, 6, 8, 9, 2], np.int32)
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    red = sk.Reduce(combine, 0)
    sc = sk.Scan(combine, 0, inclusive=True)
    st = sk.Stencil(lambda nb: nb[0, 0] * G)
    ap = sk.AllPairs(zip=lambda a, b: a * b * G, reduce=lambda a, b: a + b)
    mr = sk.MapReduce(lambda a: a * G, lambda a, b: a + b, 0)
    seq = st >> st

    def results():
        return (red(bits), sc(bits).to_numpy(), st(m).to_numpy(), ap(m, m).to_numpy(),
                mr(A), seq(m).to_numpy())

    before = results()
    assert before[0] == np.bitwise_or.reduce(bits)
    G = -1.0
    try:
        after = results()
    finally:
        G = 2.0
    assert after[0] == np.bitwise_xor.reduce(bits)
    np.testing.assert_array_equal(after[1], np.bitwise_xor.accumulate(bits))
    np.testing.assert_allclose(before[2] * -0.5, after[2])
    np.testing.assert_allclose(before[3] * -0.5, after[3])
    np.testing.assert_allclose(before[4] * -0.5, after[4])
    np.testing.assert_allclose(before[5] * 0.25, after[5])


def test_unchanged_values_keep_the_repeat_path(monkeypatch, rt):
    global G
    calls = []
    real = tuner.execute
    monkeypatch.setattr(tuner, "execute", lambda req: calls.append(req) or real(req))
    f = sk.Map(lambda x: x * G + TBL[2])
    v = sk.Vector(A)
    f(v)
    builds = rt.stats.builds
    G = float("2.0")                        # an equal value in a new object: no change
    for _ in range(3):
        np.testing.assert_array_equal(f(v).to_numpy(), A * 2 + 3)
    assert len(calls) == 1 and rt.stats.builds == builds
    G = 2.5
    try:
        np.testing.assert_array_equal(f(v).to_numpy(), A * 2.5 + 3)
    finally:
        G = 2.0
    assert len(calls) == 2


def test_a_value_that_stops_translating_is_reported():
    global G
    f = sk.Map(scale_by_g)
    f(A)
    G = "two"
    try:
        with pytest.raises(sk.TranslationError, match="'G'"):
            f(A)
    finally:
        G = 2.0
    np.testing.assert_array_equal(f(A).to_numpy(), A * 2)
