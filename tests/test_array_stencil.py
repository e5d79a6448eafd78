"""A pending value read by Stencil at each neighbour, in the stencil's own kernel (issue 15):
one launch, bit for bit the unfused result (the value computed first, then the stencil) for
every border mode, dtype, awkward size, ``iterations=`` and extra arguments; the cost rule
computes first what the stencil would recompute too often."""

from __future__ import annotations

import ast
import os

import numpy as np
import pytest

import skelpy as sk
from skelpy import runtime
from skelpy.array import stencils

SIZES = [(1, 1), (1, 7), (7, 1), (13, 17)]
HEAVY = os.environ.get("SKELPY_HEAVY") == "1"     # every size and dtype with every border
# The default run reads each border mode at one size (two for "constant") and each size at
# least once: a new size is a new local size, which PoCL compiles again (cold CI time).
DEFAULT_SIZES = {"constant": [(1, 1), (13, 17)], "nearest": [(7, 1)], "wrap": [(13, 17)],
                 "reflect": [(1, 7)], "mirror": [(13, 17)]}


def heat(nb):
    return nb[0, 0] + 0.25 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


def mix(nb):
    return nb[-1, 0] ^ nb[0, 1] ^ nb[1, 1]           # integers: every bit counts


def weighted(nb, w, other):
    return nb[0, -1] * w + nb[1, 0] + other[0, 1]    # a scalar and a matrix read around


@pytest.fixture(autouse=True)
def fuse_two_inputs_on_cpus_too(monkeypatch):
    """The bitwise tests fuse expressions over several inputs whatever the device (on a CPU
    the cost rule computes those first; tested below)."""
    monkeypatch.setitem(stencils.INPUT_COST, "cpu", 1)


def _fused_and_unfused(st, make, *extras, iterations=1):
    """(fused result, launches of the fused call or None when it did not fuse, unfused
    result) of ``st(make(), ...)``."""
    rt = runtime.current()
    rt.finish()
    rt.stats.reset()
    fused = st(make(), *extras, iterations=iterations)
    launches = rt.stats.launches if _is_fused() else None
    fused = fused.to_numpy()
    z = make()
    sk.evaluate(z)
    return fused, launches, st(z, *extras, iterations=iterations).to_numpy()


def _is_fused() -> bool:
    return sk.array.last_skeleton().muscle.name == "skp_stencil"


@pytest.mark.parametrize("border", ["constant", "nearest", "wrap", "reflect", "mirror"])
def test_float_expression_read_at_each_neighbour_equals_the_unfused_stencil(border, rng):
    st = sk.Stencil(heat, border=border, cval=0.75)
    for shape in SIZES if HEAVY else DEFAULT_SIZES[border]:
        a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        x, y = sk.Matrix(a), sk.Matrix(b)
        fused, launches, unfused = _fused_and_unfused(st, lambda: 2.0 * x + y)
        assert launches == 1
        np.testing.assert_array_equal(fused, unfused)


@pytest.mark.parametrize("dtype,border", [
    (np.int32, "constant"), (np.uint8, "reflect"),
    *([(np.int32, "wrap"), (np.uint8, "constant")] if HEAVY else [])])
def test_integer_expressions_and_the_constant_border_value_itself(dtype, border, rng):
    # cval 1 in constant mode: the indicator's inside value must be another one
    st = sk.Stencil(mix, border=border, cval=1)
    shapes = ((1, 1), (5, 1), (11, 13))
    for shape in shapes if HEAVY else shapes[::2] if border == "constant" else shapes[1:2]:
        a, b = (rng.integers(0, 100, shape).astype(dtype) for _ in range(2))
        x, y = sk.Matrix(a), sk.Matrix(b)
        fused, launches, unfused = _fused_and_unfused(st, lambda: x * 3 + (y & 7))
        assert launches == 1
        np.testing.assert_array_equal(fused, unfused)
    if border == "constant":            # outside: the constant, not the expression of it
        x = sk.Matrix(np.zeros((1, 1), dtype))
        assert st(x + 5).to_numpy()[0, 0] == (1 ^ 1 ^ 1)


def test_iterations_and_extra_arguments(rng):
    a, b, o = (rng.standard_normal((9, 11)).astype(np.float32) for _ in range(3))
    x, y, other = sk.Matrix(a), sk.Matrix(b), sk.Matrix(o)
    st = sk.Stencil(heat, border="reflect", cval=0.75)     # the programs of the test above
    fused, launches, unfused = _fused_and_unfused(st, lambda: 2.0 * x + y, iterations=3)
    assert launches is not None
    np.testing.assert_array_equal(fused, unfused)
    # single steps (a CPU) or passes of several steps (a GPU's default)
    assert st.last_launch.iterations == 3 and len(st.last_launch.events) >= 1
    st = sk.Stencil(weighted, border="wrap")
    fused, launches, unfused = _fused_and_unfused(st, lambda: x * y + 1.0, 0.5, other)
    assert launches == 1
    np.testing.assert_array_equal(fused, unfused)
    with sk.lazy():                     # a lazy Map result is read at each neighbour too
        fused, launches, unfused = _fused_and_unfused(
            st, lambda: sk.Map(lambda v: v * v - 1.0)(x), 0.5, other)
    assert launches == 1
    np.testing.assert_array_equal(fused, unfused)


def test_last_launch_and_source_show_the_fusion(rng):
    # the programs of the mirror case above (a stencil program is compiled per border mode)
    x, y = (sk.Matrix(rng.standard_normal((6, 5)).astype(np.float32)) for _ in range(2))
    st = sk.Stencil(heat, border="mirror", cval=0.75)
    out = st(2.0 * x + y)
    fused = sk.array.last_skeleton()
    assert st.last_launch is fused.last_launch and len(st.last_launch.events) == 1
    text = fused.source(x, y, np.float32(2))
    # the expression's muscle is defined once and called at each of heat's six reads
    assert "skelpy_stencil" in text and text.count("skp_muscle_fast_fused(") == 7
    z = 2.0 * x + y
    sk.evaluate(z)
    np.testing.assert_array_equal(out.to_numpy(), st(z).to_numpy())
    with pytest.raises(sk.SkelpyError, match="test_array_stencil"):
        st(2.0 * x + y, 3.0)                        # the user's error, at the user's muscle
    assert st(2.0 * x + y) is not None and _is_fused()


def test_the_cost_rule_computes_an_expensive_expression_first(rng):
    a = rng.standard_normal((8, 9)).astype(np.float32)
    x = sk.Matrix(a)
    st = sk.Stencil(heat, border="nearest", cval=0.75)
    assert stencils._neighbour_reads(st) == 6       # nb[0, 0] twice, as written
    z = np.exp(x) * np.sin(x)                       # 17 operations: recomputed 9 times? no
    out = st(z)
    assert not _is_fused()
    out = out.to_numpy()
    sk.evaluate(z)
    np.testing.assert_array_equal(out, st(z).to_numpy())
    y, w = sk.Matrix(a * 2), sk.Matrix(a * 3)
    st(x + y + w)                                   # three inputs read at 6 neighbours: no
    assert not _is_fused()
    st(x + y * 2.0)                                 # two: (2 + 1) * (6 - 1) <= 16
    assert _is_fused()


def test_on_a_cpu_an_expression_over_two_inputs_is_computed_first(rng, monkeypatch):
    monkeypatch.setitem(stencils.INPUT_COST, "cpu", 8)
    monkeypatch.setitem(stencils.INPUT_COST, "gpu", 8)    # the rule, whatever the device
    a = rng.standard_normal((8, 9)).astype(np.float32)
    x, y = sk.Matrix(a), sk.Matrix(a * 2)
    st = sk.Stencil(heat, border="nearest", cval=0.75)
    st(x + y * 2.0)
    assert not _is_fused()
    st(x * 2.0)                                     # one input: fused
    assert _is_fused()


def test_a_neighbourhood_used_other_than_subscripted_is_not_rewritten():
    with pytest.raises(stencils._Unfusable):
        stencils._Rewrite("nb", ["skp_l0"], [], []).visit(ast.parse("helper(nb)"))
    tree = stencils._Rewrite("nb", ["skp_l0", "skp_l1"], [], ["skp_c0"]).visit(
        ast.parse("nb[-1, 0] + nb[0, 1]"))
    assert ast.unparse(tree) == ("skp_at(skp_l0[-1, 0], skp_l1[-1, 0], skp_c0) + "
                                 "skp_at(skp_l0[0, 1], skp_l1[0, 1], skp_c0)")
