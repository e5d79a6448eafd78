"""Stencil offsets that are not compile-time constants (issue 10, item 7) are checked at run
time against the declared shape, in every mode: an offset outside it is a BoundsError naming
the muscle's line and the offset (it used to be clamped into the shape silently); inside it,
the result is scipy.ndimage's."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

import skelpy as sk

MODES = ["constant", "nearest", "wrap", "reflect", "mirror"]


def column(nb, c):
    return nb[0, c]


def shifted(a: np.ndarray, dr: int, dc: int, mode: str, cval: float = 0.0) -> np.ndarray:
    """``out[r, c] = a[r + dr, c + dc]`` with scipy.ndimage's border rule."""
    k = np.zeros((2 * abs(dr) + 1, 2 * abs(dc) + 1))
    k[abs(dr) + dr, abs(dc) + dc] = 1
    return ndi.correlate(a.astype(np.float64), k, mode=mode, cval=cval)


@pytest.mark.parametrize("mode", MODES)
def test_parameter_offset_outside_the_shape_is_an_error(mode):
    a = np.arange(35, dtype=np.float32).reshape(5, 7)
    st = sk.Stencil(column, shape=2, border=mode, cval=-1)
    for c in (-2, 0, 1, 2):
        np.testing.assert_array_equal(st(a, c).to_numpy(), shifted(a, 0, c, mode, -1))
    for c in (5, 3, -3):
        with pytest.raises(sk.BoundsError) as info:
            st(a, c)
        msg = str(info.value)
        line = column.__code__.co_firstlineno + 1
        assert f"test_stencil_offsets.py:{line} (column)" in msg
        assert f"column offset {c} of `nb[0, c]`" in msg and "-2..2" in msg


def test_data_dependent_offsets():
    # the offset comes from an extra matrix of the input's shape
    a = np.arange(30, dtype=np.float32).reshape(5, 6)
    offsets = np.tile(np.array([-1, 0, 1], np.int32), 10).reshape(5, 6)
    st = sk.Stencil(lambda nb, o: nb[o[0, 0], 0], shape=1, border="nearest")
    want = np.empty_like(a)
    for r in range(5):
        for c in range(6):
            want[r, c] = a[min(max(r + offsets[r, c], 0), 4), c]
    np.testing.assert_array_equal(st(a, offsets).to_numpy(), want)
    bad = offsets.copy()
    bad[3, 4] = 2
    with pytest.raises(sk.BoundsError, match="row offset 2 of `nb\\[o\\[0, 0\\], 0\\]`"):
        st(a, bad)


def test_loop_bounds_from_a_parameter():
    def box(nb, r):
        s = 0.0
        for dr in range(-r, r + 1):
            for dc in range(-r, r + 1):
                s += nb[dr, dc]
        return s

    a = np.random.default_rng(3).random((9, 11)).astype(np.float32)
    st = sk.Stencil(box, shape=2, border="reflect")
    for r in (1, 2):
        want = ndi.correlate(a.astype(np.float64), np.ones((2 * r + 1, 2 * r + 1)),
                             mode="reflect")
        np.testing.assert_allclose(st(a, r).to_numpy(), want, rtol=1e-5)
    with pytest.raises(sk.BoundsError, match="row offset -3"):
        st(a, 3)


def test_opencl_c_loop_offsets():
    src = """
    float func(float* nb, int r) {
        float s = 0.0f;
        for (int d = -r; d <= r; ++d)
            s += SKELPY_GET2(nb, 0, d);
        return s;
    }"""
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    st = sk.Stencil(src, shape=2, border="wrap")
    want = ndi.correlate(a, np.ones((1, 5)), mode="wrap")
    np.testing.assert_allclose(st(a, np.int32(2)).to_numpy(), want)
    with pytest.raises(sk.BoundsError, match=r"C line 5\): column offset -3 of "
                                             r"`SKELPY_GET2\(nb, 0, d\)`"):
        st(a, np.int32(3))


def test_iterations_and_sequences_check_too():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    st = sk.Stencil(column, shape=1)
    with pytest.raises(sk.BoundsError, match="column offset 4"):
        st(a, 4, iterations=3)
    np.testing.assert_array_equal(st(a, 1, iterations=2).to_numpy(),
                                  shifted(shifted(a, 0, 1, "nearest"), 0, 1, "nearest"))
    ok = sk.Stencil(lambda nb: nb[0, 0] * 2)
    seq = ok >> st
    with pytest.raises(sk.BoundsError, match="column offset -2"):
        seq(a, -2)
    np.testing.assert_array_equal(seq(a, -1).to_numpy(), shifted(2 * a, 0, -1, "nearest"))


def test_constant_offsets_beside_unknown_ones_are_checked_at_construction():
    def mixed(nb, c):
        return nb[0, c] + nb[3, 0]

    with pytest.raises(sk.ShapeError) as info:
        sk.Stencil(mixed, shape=1)(np.zeros((4, 4), np.float32), 0)
    assert f"test_stencil_offsets.py:{mixed.__code__.co_firstlineno + 1}" in str(info.value)
    assert "[3, 0]" in str(info.value)


def test_constant_offsets_run_unchecked():
    a = np.zeros((8, 8), np.float32)
    const = sk.Stencil(lambda nb: nb[-1, 0] + nb[0, 2], border="wrap")
    assert "skp_check" not in const.source(a)
    runtime = sk.Stencil(column, shape=2)
    text = runtime.source(a, 1)
    assert "skp_check" in text and "skp_dbg" in text
