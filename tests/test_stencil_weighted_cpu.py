"""A CPU's default for a heavy stencil that multiplies its reads is the vector path
(``cpu_defaults.weighted_vector_point``): it must compute what the scalar point computes, bit
for bit, and what scipy.ndimage computes, in every border mode at awkward sizes."""

from __future__ import annotations

import numpy as np
import pytest

import skelpy as sk

ndi = pytest.importorskip("scipy.ndimage")

G5 = np.array([1, 4, 6, 4, 1], np.float32) / np.float32(16)
SCALAR = {"wg_r": 4, "wg_c": 16, "cr": 2, "cc": 1, "local": 0, "vec": 1}


def gauss5(nb):
    acc = np.float32(0)
    for dr in range(-2, 3):
        row = np.float32(0)
        for dc in range(-2, 3):
            row += G5[dc + 2] * nb[dr, dc]
        acc += G5[dr + 2] * row
    return acc


@pytest.fixture(scope="module")
def on_cpu():
    if sk.current_device().kind != "cpu":
        pytest.skip("the CPU default")


@pytest.mark.parametrize("border", ["nearest", "constant", "wrap", "reflect", "mirror"])
def test_the_weighted_5x5_default_is_the_vector_path_and_exact(on_cpu, border):
    rng = np.random.default_rng(5)
    st = sk.Stencil(gauss5, shape=2, border=border)
    for rows, cols in ((1, 1), (3, 2), (7, 5), (37, 70)):
        a = rng.random((rows, cols), dtype=np.float32)
        with sk.tuning("off"):
            got = st(sk.Matrix(a)).to_numpy()
        assert st.last_launch.params["vec"] > 1
        scalar = st(sk.Matrix(a), params=SCALAR).to_numpy()
        np.testing.assert_array_equal(got, scalar)
        ref = ndi.correlate(a.astype(np.float64), np.outer(G5, G5).astype(np.float64),
                            mode=border, cval=0.0)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
