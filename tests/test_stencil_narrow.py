"""The stencil's vector path for 1- and 2-byte elements: ``vec`` counts 4-byte words, so a
uint8 work-item reads and writes 16-byte vectors (stencil_plan.vector_columns). Bit for bit
against NumPy (the same wrapping integer arithmetic on np.pad'ed slices) for every border
mode, uint8/int8/int16/bool, at sizes around the vector width (1xN, Nx1, primes, widths not
a multiple of 16, matrices smaller than one work-item's window), where the work-items at the
border take the edge path and the others the vector loads; and the launch geometry and the
GPU default that the widening implies."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import skelpy as sk
from skelpy.skeletons import stencil_plan
from skelpy.skeletons.stencil_launch import geometry

HEAVY = os.environ.get("SKELPY_HEAVY") == "1"
MODES = ("constant", "nearest", "wrap", "reflect", "mirror")
PAD = {"constant": "constant", "nearest": "edge", "wrap": "wrap", "reflect": "symmetric",
       "mirror": "reflect"}
# 2 rows by 4 words per work-item, groups of 2 x 4: a uint8 group spans 64 columns
WIDE = {"wg_r": 2, "wg_c": 4, "cr": 2, "cc": 1, "local": 0, "vec": 4}
SHAPES = [(1, 1), (1, 97), (97, 1), (2, 18), (3, 17), (5, 16), (7, 33), (31, 64), (29, 131),
          (4, 200)]


def skew(nb):
    """Every offset with its own weight (a column or row slip changes the result); the
    products and sums wrap in the element type, as NumPy's do."""
    return (nb[-1, -1] + 2 * nb[-1, 0] + 3 * nb[-1, 1] + 5 * nb[0, -1] + 7 * nb[0, 0]
            + 11 * nb[0, 1] + 13 * nb[1, -1] + 17 * nb[1, 0] + 19 * nb[1, 1])


def skew_ref(a: np.ndarray, mode: str, cval=0) -> np.ndarray:
    kw = {"constant_values": cval} if mode == "constant" else {}
    p = np.pad(a, 1, mode=PAD[mode], **kw)
    r, c = a.shape

    def at(dr, dc):
        return p[1 + dr:1 + dr + r, 1 + dc:1 + dc + c]

    with np.errstate(over="ignore"):
        return (at(-1, -1) + 2 * at(-1, 0) + 3 * at(-1, 1) + 5 * at(0, -1) + 7 * at(0, 0)
                + 11 * at(0, 1) + 13 * at(1, -1) + 17 * at(1, 0) + 19 * at(1, 1))


def life(nb):
    n = (nb[-1, -1] + nb[-1, 0] + nb[-1, 1] + nb[0, -1] + nb[0, 1]
         + nb[1, -1] + nb[1, 0] + nb[1, 1])
    return (n == 3) | ((n == 2) & (nb[0, 0] == 1))


def life_ref(g: np.ndarray) -> np.ndarray:
    p = np.pad(g, 1, mode="wrap")
    r, c = g.shape
    n = sum(p[i:i + r, j:j + c] for i in range(3) for j in range(3)) - g
    return ((n == 3) | ((n == 2) & (g == 1))).astype(g.dtype)


def _sample(rng, shape, dtype):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


# -- what the widening means: columns, geometry, legality, the GPU default -----------------------


def test_vec_counts_four_byte_words():
    cols = stencil_plan.vector_columns
    assert [cols({"vec": v}, 1) for v in (1, 2, 4)] == [1, 8, 16]
    assert [cols({"vec": v}, 2) for v in (1, 2, 4)] == [1, 4, 8]
    assert [cols({"vec": v}, 4) for v in (1, 2, 4)] == [1, 2, 4]
    assert [cols({"vec": v}, 8) for v in (1, 2, 4)] == [1, 2, 4]
    # the launch covers the columns with work-items of 16 uint8 columns each: 1000 columns
    # are 63 work-items, rounded up to groups of 4
    point = dict(WIDE)
    assert geometry(point, 9, 1000, 1) == ((64, 6), (4, 2))
    assert geometry(point, 9, 1000, 4) == ((252, 6), (4, 2))
    assert geometry({**point, "vec": 1, "cc": 2}, 9, 1000, 1) == ((500, 6), (4, 2))


def skew_called(nb):
    """skew through a call: per cell (the packed form of one-byte muscles takes no calls)."""
    return skew(nb)


def test_window_rule_counts_columns():
    """A uint8 work-item at vec=4 holds 16 columns: 4 rows make a 6 x 18 window, over the
    limit of 96 elements that int32 (6 x 6) stays far below. A packed muscle's window counts
    32-bit words (6 x (4 + 2)): the same point is legal for it."""
    u8 = sk.Stencil(skew_called, border="wrap", cval=3)
    with pytest.raises(sk.ParameterError, match="16 columns"):
        u8(np.zeros((8, 40), np.uint8), params={**WIDE, "cr": 4})
    g = np.random.default_rng(4).integers(0, 256, (8, 40)).astype(np.uint8)
    got = sk.Stencil(skew, border="wrap")(g, params={**WIDE, "cr": 4}).to_numpy()
    assert np.array_equal(got, skew_ref(g, "wrap"))
    shape = sk.Shape(north=1, south=1, east=1, west=1)
    assert stencil_plan.window_elements(shape, {**WIDE, "cr": 4}, 1) == 6 * 18
    assert stencil_plan.window_elements(shape, {**WIDE, "cr": 4}, 4) == 6 * 6
    assert stencil_plan.window_elements(shape, {**WIDE, "cr": 4}, 1, packed=True) == 6 * 6


def test_gpu_default_takes_eight_byte_vectors_for_narrow_elements():
    gpu, cpu = SimpleNamespace(kind="gpu"), SimpleNamespace(kind="cpu")
    light = {"reads": 9.0, "north": 1.0, "south": 1.0, "east": 1.0, "west": 1.0}
    point = stencil_plan.default_point
    for itemsize in (1, 2):
        p = point(gpu, light, itemsize)
        assert (p["vec"], p["local"], p["cc"], p["cr"]) == (2, 0, 1, 4)
        assert stencil_plan.vector_columns(p, itemsize) * itemsize == 8
    assert point(gpu, light, 4) == point(gpu, light) == {
        "wg_r": 4, "wg_c": 64, "cr": 2, "cc": 1, "local": 0, "vec": 2}
    assert point(cpu, light, 1) == point(cpu, light)         # CPUs: unchanged
    heavy = {**light, "reads": 121.0, "north": 5.0, "south": 5.0, "east": 5.0, "west": 5.0}
    assert point(gpu, heavy, 1)["local"] == 1                # heavy stencils keep the tile


# -- results ------------------------------------------------------------------------------------


# reflect and mirror run on int8/int16 and bool below (every mode once; all five here with
# SKELPY_HEAVY=1): the edge path's border rule is the scalar path's, tested in
# test_stencil_borders; new here is which work-items take it
@pytest.mark.parametrize("mode", MODES if HEAVY else ("constant", "nearest", "wrap"))
def test_uint8_16_byte_vectors(mode):
    rng = np.random.default_rng(7)
    st = sk.Stencil(skew, border=mode, cval=3)
    assert "#define SKP_VEC 16" in st.source(np.zeros((4, 4), np.uint8), params=WIDE)
    for shape in SHAPES:
        a = _sample(rng, shape, np.uint8)
        got = st(a, params=WIDE).to_numpy()
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, skew_ref(a, mode, cval=3), err_msg=str(shape))


@pytest.mark.parametrize("dtype, point", [
    (np.int8, {**WIDE, "vec": 2, "cr": 3}),        # 8 columns, 3 rows
    (np.int16, WIDE),                              # 8 columns (a short8)
])
def test_other_narrow_integers(dtype, point):
    rng = np.random.default_rng(11)
    st = sk.Stencil(skew, border="reflect")
    for shape in SHAPES[::2] + [(6, 9), (11, 40)]:
        a = _sample(rng, shape, dtype)
        got = st(a, params=point).to_numpy()
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, skew_ref(a, "reflect"), err_msg=str(shape))


def test_bool_cells():
    """bool is stored as uchar: 16 cells per work-item."""
    rng = np.random.default_rng(3)
    st = sk.Stencil(lambda nb: (nb[-1, 1] & nb[1, 0]) | (nb[0, -1] != nb[0, 0]),
                    border="mirror")
    for shape in [(1, 40), (3, 17), (9, 33), (17, 64)]:
        a = rng.random(shape) < 0.5
        p = np.pad(a, 1, mode="reflect")
        r, c = shape
        want = (p[0:r, 2:c + 2] & p[2:r + 2, 1:c + 1]) | (p[1:r + 1, 0:c] != a)
        got = st(a, params=WIDE).to_numpy()
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, want, err_msg=str(shape))


def test_life_uint8_iterations_on_the_wide_path():
    """Game of Life, five single steps at the forced wide point (the temporal path is not
    taken where single-step parameters are forced), against NumPy step by step."""
    rng = np.random.default_rng(5)
    st = sk.Stencil(life, shape=1, border="wrap", out_dtype=np.uint8)
    for shape in [(1, 33), (19, 48), (23, 37)]:
        g = (rng.random(shape) < 0.35).astype(np.uint8)
        want = g
        for _ in range(5):
            want = life_ref(want)
        got = st(g, iterations=5, params=WIDE).to_numpy()
        np.testing.assert_array_equal(got, want, err_msg=str(shape))


@settings(max_examples=60 if HEAVY else 12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(rows=hs.integers(1, 40), cols=hs.integers(1, 150), seed=hs.integers(0, 2**16),
)
def test_uint8_wide_shapes(rows, cols, seed):
    """Any shape (the program is the one of the wrap test above: sizes are launch
    arguments)."""
    a = _sample(np.random.default_rng(seed), (rows, cols), np.uint8)
    st = _WRAP.setdefault("st", sk.Stencil(skew, border="wrap", cval=3))
    got = st(a, params=WIDE).to_numpy()
    np.testing.assert_array_equal(got, skew_ref(a, "wrap"))


_WRAP: dict = {}
