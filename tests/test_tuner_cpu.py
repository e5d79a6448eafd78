"""The tuner on CPUs (issues 16, 18): features in units of the device (SIMD width, compute
units, cache), training labels that treat a noisy top as ties, and sampled sweeps that leave
the points PoCL compiles slowest (many unrolled cells per work-item) for last. No kernels are
compiled here (fake devices and kernels)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from test_tuner_support import FakeDevice, FakeKernel, cache_dir, key, make_request  # noqa: F401

from skelpy.tuner import features as tfeatures
from skelpy.tuner import model as tmodel
from skelpy.tuner import sweep as tsweep
from skelpy.tuner.engine import Call, scenario
from skelpy.tuner.space import Param, ParamSpace
from skelpy.tuner.store import params_json


@pytest.fixture(autouse=True)
def _isolated(cache_dir):  # noqa: F811
    yield


def _stencil_cols(points):
    names = ["wg_r", "wg_c", "cr", "cc"]
    return tfeatures.point_columns(points, names)


def test_cpu_columns_are_relative_to_the_devices_simd_width_and_compute_units():
    pts = [{"wg_r": 4, "wg_c": 32, "cr": 1, "cc": 1}, {"wg_r": 1, "wg_c": 64, "cr": 2, "cc": 2}]
    scen = {"dev_is_gpu": 0.0, "dev_pref_vec_float": 16.0, "dev_compute_units": 2.0,
            "dev_global_cache": 2.0 ** 25,
            "ds_log2_elements": 18.0, "ds_dtype_size": 4.0,
            "k_north": 1.0, "k_south": 1.0, "k_east": 1.0, "k_west": 1.0}
    cols = _stencil_cols(pts)
    x = tfeatures.cross_columns(scen, cols)
    # work-items along x over the SIMD width: 32/16 and 64/16
    np.testing.assert_allclose(x["x_simd_fill"], [1.0, 2.0])
    # work-groups (2^18 cells / (128 or 256 cells per group)) per compute unit
    np.testing.assert_allclose(x["x_groups_per_cu"], [18 - 7 - 1, 18 - 8 - 1])
    # the tile with its halo against the cache: (4+2)*(32+2)*4 bytes of 32 MiB
    assert x["x_tile_cache"][0] == pytest.approx(math.log2(6 * 34 * 4 / 2.0 ** 25))
    # the same point on an AVX2 CPU (8 floats) fills twice the vectors: one unit more
    x8 = tfeatures.cross_columns({**scen, "dev_pref_vec_float": 8.0}, cols)
    np.testing.assert_allclose(x8["x_simd_fill"] - x["x_simd_fill"], [1.0, 1.0])
    # a 1-D space's work-group and explicit vector width
    cols1 = tfeatures.point_columns([{"wg": 256, "vw": 4, "coarsen": 1}], ["wg", "vw", "coarsen"])
    x1 = tfeatures.cross_columns(scen, cols1)
    np.testing.assert_allclose(x1["x_simd_fill"], [4.0])
    np.testing.assert_allclose(x1["x_vw_simd"], [-2.0])
    # the data against the cache is a scenario feature
    f = tfeatures.scenario_features("map", {"dev_is_gpu": 0.0, "dev_global_cache": 2.0 ** 20},
                                    {}, {"n": 2.0 ** 20, "dtype_size": 4.0})
    assert f["x_data_cache"] == pytest.approx(2.0)
    # a GPU's features are what its models were checked with
    assert "x_simd_fill" not in tfeatures.cross_columns({**scen, "dev_is_gpu": 1.0}, cols)
    assert "x_data_cache" not in tfeatures.scenario_features(
        "map", {"dev_is_gpu": 1.0, "dev_global_cache": 2.0 ** 20}, {}, {"n": 2.0 ** 20})


def test_the_model_sees_the_cpu_columns_when_it_scores_candidates():
    """A candidate's features at decision time include the same CPU columns as training."""
    pts = [{"wg": w, "vw": v, "coarsen": 1} for w in (16, 64, 256) for v in (1, 4)]
    scen = {"dev_is_gpu": 0.0, "dev_pref_vec_float": 8.0, "dev_compute_units": 2.0,
            "ds_log2_elements": 20.0}
    sd = tmodel.ScenarioData("s", "k", "map", scen, {"params": [
        {"name": "wg", "values": [16, 64, 256]}, {"name": "vw", "values": [1, 4]},
        {"name": "coarsen", "values": [1]}], "default": pts[0]},
        {params_json(p): 1e-3 * (1 + i) for i, p in enumerate(pts)})
    gm = tmodel.fit_group("wg,vw,coarsen", [sd, sd], n_estimators=2, approaches=("speedup",))
    assert {"x_simd_fill", "x_vw_simd", "x_groups_per_cu"} <= set(gm.point_schema.names)
    cand = tmodel.CandidateSet(pts, ["wg", "vw", "coarsen"], {})
    m = cand.matrix(gm, scen, [0, 5])
    j = gm.point_schema.index["x_simd_fill"]
    np.testing.assert_allclose(m[:, j], [math.log2(16) - 3, math.log2(256) - 3])


def _cliff_scenarios(is_gpu: float):
    """Three scenarios measuring wg 16, 64, 256 (wg=64 wins the third and runs 20x slower
    than the best in the second) and wg=1024 in the first only (where it wins)."""
    pts = [{"wg": w, "vw": 1, "coarsen": 1} for w in (16, 64, 256, 1024)]
    space = {"params": [{"name": "wg", "values": [16, 64, 256, 1024]},
                        {"name": "vw", "values": [1]}, {"name": "coarsen", "values": [1]}],
             "default": pts[0]}
    scen = {"dev_is_gpu": is_gpu, "dev_pref_vec_float": 8.0, "ds_log2_elements": 20.0}
    times = [(2e-3, 1e-3, 2e-3, 0.9e-3), (2e-3, 20e-3, 1.5e-3), (2e-3, 1e-3, 1.8e-3)]
    return pts, [tmodel.ScenarioData(f"s{i}", f"k{i}", "map", dict(scen, ds_log2_elements=20.0 + i),
                                     space, {params_json(p): x for p, x in zip(pts, t)})
                 for i, t in enumerate(times)]


def test_a_cpu_model_never_picks_a_point_with_a_cliff_or_little_evidence():
    """On a CPU a point that wins one scenario but runs 13x slower than the best in
    another, or that only one scenario measured, is no candidate (the defaults' point always
    is); a GPU's model keeps both."""
    def parsed(keys):
        return sorted((json.loads(k) for k in keys), key=lambda p: p["wg"])

    pts, data = _cliff_scenarios(0.0)
    assert parsed(tmodel.risky_points(data)) == [pts[1], pts[3]]
    gm = tmodel.fit_group("wg,vw,coarsen", data, n_estimators=2, approaches=("speedup",))
    assert parsed(gm.plausible) == [pts[0], pts[2]]
    pts, data = _cliff_scenarios(1.0)
    assert tmodel.risky_points(data) == set()
    gm = tmodel.fit_group("wg,vw,coarsen", data, n_estimators=2, approaches=("speedup",))
    assert pts[1] in parsed(gm.plausible) and pts[3] in parsed(gm.plausible)


def test_cpu_training_labels_treat_times_within_the_noise_of_the_best_as_ties():
    t = np.array([1.00, 1.03, 1.10, 2.0])
    r = tmodel.robust_times(t, 0.05)
    np.testing.assert_allclose(r, [1.05, 1.05, 1.10, 2.0])
    assert tmodel.robust_times(t, 0.0) is t
    assert tmodel.TIE_BY_KIND["gpu"] == 0.0 and tmodel.TIE_BY_KIND["cpu"] > 0


def test_unroll_tiers():
    assert tsweep.unroll_tier({"wg_r": 64, "wg_c": 64, "cr": 2, "cc": 2}) == 0
    assert tsweep.unroll_tier({"cr": 4, "cc": 4, "local": 1}) == 1
    assert tsweep.unroll_tier({"cr": 8, "cc": 4}) == 2
    assert tsweep.unroll_tier({"wg": 1024, "coarsen": 32, "blocked": 1}) == 2


@pytest.mark.parametrize("cpu", [True, False])
def test_a_cpus_sampled_sweep_measures_the_cheaply_compiled_points_first(cpu):
    space = ParamSpace([Param("wg", (16, 64, 256)), Param("coarsen", (1, 2, 4, 8, 16, 32)),
                        Param("blocked", (0, 1), numeric=False)],
                       {"wg": 64, "coarsen": 1, "blocked": 0})
    dev = FakeDevice()
    dev.features = dict(dev.features, dev_is_gpu=0.0 if cpu else 1.0)
    req = make_request(FakeKernel(), space=space, device=dev)
    call = Call(req, scenario(req), "exhaustive")
    order = tsweep.ordered(call, space.points(), order="sample")
    assert order[0] == {"wg": 64, "coarsen": 1, "blocked": 0}
    assert sorted(map(key, order)) == sorted(map(key, space.points()))
    tiers = [tsweep.unroll_tier(p) for p in order[1:]]
    if cpu:
        assert tiers == sorted(tiers)
    else:                       # a GPU compiles in parallel threads: an unbiased sample
        assert tiers != sorted(tiers)
    assert order == tsweep.ordered(call, space.points(), order="sample")   # deterministic
