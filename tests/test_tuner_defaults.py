"""Issue 18's 5x5 Laplacian-of-Gaussian: ``off`` mode runs exactly what ``model`` mode falls
back to without a model, and that is the stencil default meant for the device: the light one
on a GPU (its local tile ran this kernel 2.5x slower on an H200) and on a CPU (13 reads: one
SIMD width of columns by 8 rows, confirmed 1.15-1.2x faster on PoCL than the 2-rows-per-item
groups of heavy stencils, which the 5x5 Gaussian keeps)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.ndimage as ndi
from test_tuner_support import cache_dir  # noqa: F401

import skelpy as sk
from skelpy import tuner
from skelpy.skeletons import stencil_plan
from skelpy.tuner import cpu_defaults

LOG5 = np.array([[0, 0, 1, 0, 0], [0, 1, 2, 1, 0], [1, 2, -16, 2, 1], [0, 1, 2, 1, 0],
                 [0, 0, 1, 0, 0]], np.float32)

GPU_LIGHT = {"wg_r": 4, "wg_c": 64, "cr": 2, "cc": 1, "local": 0, "vec": 2}
GPU_HEAVY = {"wg_r": 8, "wg_c": 32, "cr": 2, "cc": 1, "local": 1, "vec": 1}
CPU_LIGHT = {"wg_r": 4, "wg_c": 32, "cr": 1, "cc": 1, "local": 0, "vec": 1}   # 16 float lanes
# a heavy stencil that multiplies its reads: the vector path (cpu_defaults.weighted_vector_point)
CPU_WEIGHTED = {"wg_r": 1, "wg_c": 32, "cr": 4, "cc": 1, "local": 0, "vec": 2}


def log5(nb):
    return (nb[-2, 0] + nb[2, 0] + nb[0, -2] + nb[0, 2] + nb[-1, -1] + nb[-1, 1] + nb[1, -1]
            + nb[1, 1] + 2 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1]) - 16 * nb[0, 0])


def make_gaussian(radius):
    w = np.exp(-0.5 * (np.arange(-radius, radius + 1) / 2.0) ** 2)
    W = (w / w.sum()).astype(np.float32)

    def gaussian(nb):
        acc = nb[0, 0] * 0
        for dr in range(-radius, radius + 1):
            for dc in range(-radius, radius + 1):
                acc += W[dr + radius] * W[dc + radius] * nb[dr, dc]
        return acc
    return gaussian


@pytest.fixture(autouse=True)
def _isolated(cache_dir, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SKELPY_TUNE_PRETRAINED", "off")      # the untrained fallback
    yield


def _features(fn, reach):
    st = sk.Stencil(fn, shape=reach, border="constant")
    with tuner.capture_requests() as reqs:
        st(sk.Matrix(np.zeros((64, 64), np.float32)))
    return reqs[0].features


def test_off_runs_what_model_mode_falls_back_to_for_the_5x5_log():
    a = np.random.default_rng(5).random((300, 257)).astype(np.float32)
    st = sk.Stencil(log5, shape=2, border="constant")
    m = sk.Matrix(a)
    with tuner.tuning("off"):
        out_off = st(m).to_numpy()
    off = st.last_launch
    tuner.reset()
    with tuner.tuning("model"):
        out_model = st(m).to_numpy()
    model = st.last_launch
    assert (off.source, model.source) == ("off", "default")
    assert off.params == model.params
    want = ndi.correlate(a.astype(np.float64), LOG5, mode="constant", cval=0.0)
    np.testing.assert_allclose(out_off, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(out_off, out_model)
    # the default the stencil code means for this kind of device
    dev = sk.current_device()
    lanes = cpu_defaults.simd_lanes(dev)          # 16 here (AVX-512): CPU_LIGHT
    cpu = {**CPU_LIGHT, "wg_r": 128 // (2 * lanes), "wg_c": 2 * lanes}
    assert off.params == (GPU_LIGHT if dev.kind == "gpu" else cpu)


@pytest.mark.parametrize("kind", ["gpu", "cpu"])
def test_the_5x5_log_is_light_and_the_gaussians_are_not_everywhere(kind):
    dev = SimpleNamespace(kind=kind)        # no SIMD width: a CPU's default assumes 16 lanes
    log = _features(log5, 2)
    g11 = _features(make_gaussian(5), 5)
    g5 = _features(make_gaussian(2), 2)
    point = stencil_plan.default_point
    if kind == "gpu":
        assert point(dev, log) == GPU_LIGHT
        assert point(dev, g5) == GPU_LIGHT              # 26 reads: the tile lost on an H200
        assert point(dev, g11) == GPU_HEAVY             # 121 reads: the tile won
    else:
        assert point(dev, log) == CPU_LIGHT
        assert point(dev, g5) == CPU_WEIGHTED           # 25 distinct weighted reads
        assert point(dev, g11) == CPU_LIGHT             # two rows' window: 12 x 11 cells
    heat = _features(lambda nb: nb[0, 0] + 0.1 * (nb[-1, 0] + nb[1, 0] - 2 * nb[0, 0]), 1)
    assert point(dev, heat) == (GPU_LIGHT if kind == "gpu" else CPU_LIGHT)
