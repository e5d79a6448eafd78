"""CPU defaults (issue 18): the point ``off`` mode runs and ``model`` mode falls back to on a
CPU follows from the device's SIMD width and the muscle's static features, never from a
kernel's name; GPU defaults are unchanged. Pure functions on fixed features (no timing)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from skelpy.skeletons import stencil_plan
from skelpy.tuner import cpu_defaults

# Static features of the evaluation's kernels as the muscle translator reports them
# (benchmarks/tuner_eval.py, benchmarks/tuner_transfer.py), the parts the rules read.
REACH1 = {"north": 1.0, "south": 1.0, "west": 1.0, "east": 1.0}
REACH2 = {"north": 2.0, "south": 2.0, "west": 2.0, "east": 2.0}
REACH5 = {"north": 5.0, "south": 5.0, "west": 5.0, "east": 5.0}
HEAT = {**REACH1, "reads": 6.0, "reads_dyn": 6.0, "loops": 0.0, "branches": 0.0}
GAME_OF_LIFE = {**REACH1, "reads": 9.0, "reads_dyn": 9.0, "loops": 0.0, "branches": 1.0}
NMS = {**REACH1, "reads": 13.0, "reads_dyn": 13.0, "loops": 0.0, "branches": 4.0}
HYSTERESIS = {**REACH1, "reads": 2.0, "reads_dyn": 10.0, "loops": 2.0, "branches": 3.0}
LOG5 = {**REACH2, "reads": 13.0, "reads_dyn": 13.0, "loops": 0.0, "branches": 0.0}
GAUSS5 = {**REACH2, "reads": 2.0, "reads_dyn": 26.0, "loops": 2.0, "branches": 0.0,
          "ops_mul": 2.0}
BOX5 = {**REACH2, "reads": 1.0, "reads_dyn": 25.0, "loops": 2.0, "branches": 0.0,
        "ops_mul": 0.0}
GAUSS9 = {"north": 4.0, "south": 4.0, "west": 4.0, "east": 4.0, "reads": 2.0,
          "reads_dyn": 82.0, "loops": 2.0, "branches": 0.0, "ops_mul": 2.0}
GAUSS11 = {**REACH5, "reads": 2.0, "reads_dyn": 122.0, "loops": 2.0, "branches": 0.0}
SPARSE_FAR = {"north": 1.0, "south": 10.0, "west": 30.0, "east": 30.0, "reads": 40.0,
              "reads_dyn": 40.0, "loops": 0.0, "branches": 0.0}

BRIGHTEN = {"instructions": 5.0, "ops_math": 1.0, "libm_calls": 0.0}      # sqrt
SAXPY = {"instructions": 2.0, "ops_math": 0.0, "libm_calls": 0.0}
TRANSCENDENTAL = {"instructions": 9.0, "ops_math": 3.0, "libm_calls": 3.0}  # sin, exp, log
POLY8 = {"instructions": 18.0, "ops_math": 1.0, "libm_calls": 1.0}        # 8 FMAs and a sin
OLD_TRANSLATOR = {"instructions": 5.0, "ops_math": 1.0}                    # no libm count


def cpu(lanes: float | None = 16.0):
    feats = {"dev_is_gpu": 0.0} if lanes is None else {"dev_is_gpu": 0.0,
                                                       "dev_pref_vec_float": lanes}
    return SimpleNamespace(kind="cpu", features=feats)


def point(wg_r, wg_c, cr=1):
    return {"wg_r": wg_r, "wg_c": wg_c, "cr": cr, "cc": 1, "local": 0, "vec": 1}


@pytest.mark.parametrize("lanes,want", [(16.0, 16), (8.0, 8), (4.0, 4), (1.0, 16),
                                        (None, 16), (12.0, 8), (128.0, 64)])
def test_simd_lanes_come_from_the_devices_preferred_float_width(lanes, want):
    assert cpu_defaults.simd_lanes(cpu(lanes)) == want
    assert cpu_defaults.simd_lanes(SimpleNamespace(kind="cpu")) == 16   # no features at all


def test_light_stencils_take_rows_of_two_simd_widths():
    for feats in (HEAT, GAME_OF_LIFE, LOG5, SPARSE_FAR):
        assert cpu_defaults.stencil_point(cpu(16.0), feats) == point(4, 32)
    assert cpu_defaults.stencil_point(cpu(8.0), HEAT) == point(8, 16)      # AVX2: 8 x 16


def test_branchy_reads_count_by_the_cells_they_can_reach():
    # non-maximum suppression reads 13 times from a 3x3 neighbourhood: light, not heavy (the
    # former rule took it for heavy; its 2-rows-per-item point ran it 4.5-5x slower)
    assert cpu_defaults.distinct_reads(NMS) == 9.0
    assert cpu_defaults.stencil_point(cpu(), NMS) == point(4, 32)


def test_heavy_stencils_take_two_rows_per_work_item():
    assert cpu_defaults.stencil_point(cpu(), BOX5) == point(4, 16, cr=2)
    assert cpu_defaults.stencil_point(cpu(), GAUSS11) == point(4, 32)   # 12 x 11 window
    assert cpu_defaults.stencil_point(cpu(8.0), BOX5) == point(4, 8, cr=2)


def test_heavy_stencils_that_multiply_their_reads_take_the_vector_path():
    vector = {"wg_r": 1, "wg_c": 32, "cr": 4, "cc": 1, "local": 0, "vec": 2}
    assert cpu_defaults.stencil_point(cpu(), GAUSS5) == vector         # 8 x 6 window
    assert cpu_defaults.stencil_point(cpu(8.0), GAUSS5) == dict(vector, wg_c=16)
    reach3 = {**GAUSS5, "north": 3.0, "south": 3.0, "west": 3.0, "east": 3.0,
              "reads_dyn": 50.0}
    assert cpu_defaults.stencil_point(cpu(), reach3) == vector         # 10 x 8 = 80
    # a 9x9 one: neither 12 x 10 nor 10 x 12 fits the window, the scalar heavy point
    assert cpu_defaults.weighted_vector_point(16, GAUSS9) is None
    assert cpu_defaults.stencil_point(cpu(), GAUSS9) == point(4, 16, cr=2)
    for feats in (HEAT, LOG5, BOX5, GAUSS11):                          # light or no multiplies
        assert cpu_defaults.stencil_point(cpu(), feats)["vec"] == 1


def test_divergent_loops_take_one_row_groups():
    assert cpu_defaults.divergent_loop(HYSTERESIS)
    assert not cpu_defaults.divergent_loop(GAUSS5) and not cpu_defaults.divergent_loop(NMS)
    assert cpu_defaults.stencil_point(cpu(), HYSTERESIS) == point(1, 32)
    assert cpu_defaults.stencil_point(cpu(8.0), HYSTERESIS) == point(1, 16)


def test_the_stencil_default_delegates_cpus_and_keeps_the_gpu_points():
    gpu = SimpleNamespace(kind="gpu", features={"dev_is_gpu": 1.0, "dev_pref_vec_float": 1.0})
    light = {"wg_r": 4, "wg_c": 64, "cr": 2, "cc": 1, "local": 0, "vec": 2}
    heavy = {"wg_r": 8, "wg_c": 32, "cr": 2, "cc": 1, "local": 1, "vec": 1}
    for feats in (HEAT, GAME_OF_LIFE, NMS, HYSTERESIS, LOG5, GAUSS5, BOX5, SPARSE_FAR):
        assert stencil_plan.default_point(gpu, feats) == light
        assert stencil_plan.default_point(cpu(), feats) == \
            cpu_defaults.stencil_point(cpu(), feats)
    assert stencil_plan.default_point(gpu, GAUSS11) == heavy


@pytest.mark.parametrize("feats,want", [(BRIGHTEN, 1), (SAXPY, 1), ({}, 1),
                                        (TRANSCENDENTAL, 4), (POLY8, 4), (OLD_TRANSLATOR, 4)])
def test_muscles_without_library_math_run_scalar_work_items_on_a_cpu(feats, want):
    assert cpu_defaults.elementwise_vw(feats, 4) == want
    assert cpu_defaults.elementwise_vw(feats, 2) == (1 if want == 1 else 2)   # the dtype's width


def test_library_math_calls_are_told_from_vectorising_intrinsics():
    src = ("static inline float f(float x) { return sqrt(x * x + 1.0f) * fabs(x) + "
           "floor(x) + fmin(x, 1.0f) + fma(x, x, x) + skp_pow2(x) + native_exp(x); }")
    assert cpu_defaults.libm_calls(src) == 0
    assert cpu_defaults.libm_calls("return sin(x) * exp(-x * x) + log(1.0f + x) + "
                                   "pow (x, y) + atan2(x, y);") == 5


GROUPS = (1, 4, 16, 64, 256, 1024, 4096, 16384)   # reduce_plan.GROUPS_VALUES


@pytest.mark.parametrize("cu,groups", [(2, 16), (1, 4), (8, 64), (32, 256), (None, 4)])
def test_folds_take_small_groups_about_eight_per_compute_unit(cu, groups):
    dev = SimpleNamespace(kind="cpu", compute_units=cu)
    assert cpu_defaults.fold_point(dev, GROUPS, 4096) == {"wg": 4, "items": 2,
                                                          "groups": groups, "stages": 1}
    assert cpu_defaults.fold_point(dev, GROUPS, 2)["wg"] == 2      # the kernel's limit


def test_scans_take_tiles_of_eight_work_items():
    assert cpu_defaults.scan_point(4096) == {"wg": 8, "items": 64, "method": "lookback"}
    assert cpu_defaults.scan_point(4)["wg"] == 4
