"""The tuner's model settings per kind of device (GPU, CPU), each chosen by an evaluation cited
beside it, and how a device's kind is read from its features.

Training (:mod:`.model`) and choosing (:mod:`.model_choice`) both read these, and
:mod:`.validation` checks picks against them: one place holds the numbers measured on each
kind of device, apart from the code that uses them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .model import GroupModel


APPROACHES = ("classifier", "runtime", "speedup")
COARSEN_STRATEGIES = ("joint", "doubling")
# Chosen by benchmarks/tuner_eval.py (leave-one-kernel-out over 23 scenarios on an H200,
# benchmarks/results/tuner_eval_nvidia-h200.json): speedup/joint reached 96.3% of the oracle
# (geometric mean; 98.3% median), classifier 95.6%, runtime 95.4%; [Magni 2015]'s doubling
# scheme lost to choosing coarsening jointly (94.2% vs 96.3%).
DEFAULT_APPROACH = "speedup"
DEFAULT_COARSEN = "joint"
# On PoCL (2-core CPU, 50 scenarios of 19 kernels at 512^2-2048^2, ratios from a confirmation
# round; benchmarks/results/tuner_eval_pthread-haswell-amd-epyc.json) speedup/joint did best
# too: 82.1% of the oracle (geometric mean; 97.6% median), runtime/doubling 78.9%; and its
# decision stays under a millisecond (doubling scores a whole coarsening-1 plane: ~3 ms).
DEFAULTS_BY_KIND = {"gpu": (DEFAULT_APPROACH, DEFAULT_COARSEN), "cpu": ("speedup", "joint")}


# Risk aversion of the regressors' pick: score = predicted value - RISK * spread over the trees
# (a point that is best for one kernel can be 5x slower for a similar one on a CPU). On
# PoCL's sweeps (not confirmed), risk 0.5-2 moved speedup/joint by +2-3 points of the oracle
# and runtime/doubling by 0 to -23: no clear gain, so it is off.
RISK_BY_KIND = {"gpu": 0.0, "cpu": 0.0}
# The smallest predicted gain (log speedup over the default) for which the speedup regressor
# leaves the default. On PoCL's data, measured on a shared 2-core machine, smaller predicted
# gains were mostly noise: leave-one-kernel-out on this machine's data went from 66% to 70% of
# the oracle with 0.2 (1.22x); 0.5 undid it. GPUs' data is quiet: no threshold.
MIN_GAIN_BY_KIND = {"gpu": 0.0, "cpu": 0.2}


# Training labels of a kind of device: times within this share of a scenario's best count as
# ties (the best's). Re-measuring PoCL sweeps' best points interleaved
# (benchmarks/tuner_noise.py) found the sweep's fastest point within 5% of the confirmed
# fastest in only 62% of the scenarios: on a shared CPU the order at the top of a sweep is
# noise, and a model fitted to it learns that noise.
TIE_BY_KIND = {"gpu": 0.0, "cpu": 0.05}

# Candidates a kind's model may pick: on a CPU, a point measured anywhere in its training
# data at more than CLIFF times that scenario's best, or measured in fewer than SEEN
# scenarios, is left out (a defaults' point is always kept). PoCL has cliffs (a barrier
# splits the work-item loop, a local tile, a vector width that turns loads into gathers): a
# point that wins one kernel can run 2-14x slower on a similar one, and a model fitted on a
# few noisy scenarios cannot tell them apart. After `skelpy tune` on PoCL, a 4x8 local-tile
# point with 2x4 cells per work-item, best in one synthetic scenario and measured in one
# other (1.42x its best), ran Game of Life at 0.37-0.43 of the oracle (2026-11-23). GPUs'
# data is quiet and their picks well validated: no filter.
CLIFF_BY_KIND = {"gpu": math.inf, "cpu": 2.5}
SEEN_BY_KIND = {"gpu": 0, "cpu": 3}


def robust_times(t: np.ndarray, tie: float) -> np.ndarray:
    """``t`` with every time within ``tie`` of the fastest raised to that bound (ties)."""
    if tie <= 0 or not len(t):
        return t
    return np.maximum(t, float(t.min()) * (1.0 + tie))


def default_risk(scen_feats: Mapping[str, float]) -> float:
    kind = "gpu" if scen_feats.get("dev_is_gpu", 1.0) else "cpu"
    return RISK_BY_KIND.get(kind, 0.0)


def device_kind(features: Mapping[str, float]) -> str:
    """"gpu", "cpu" or "other" (an accelerator: no shipped data has one), from device (or
    scenario) features; a model predicts only for the kinds its training data ran on."""
    if features.get("dev_is_gpu", 1.0):
        return "gpu"
    return "other" if features.get("dev_is_other", 0.0) else "cpu"


def kind_key(sig: str, kind: str) -> str:
    """The key of a group trained on one kind of device only (the shipped model keeps one per
    kind: leave-one-device-out found a GPU's picks better from GPUs' data alone)."""
    return f"{sig}@{kind}"


def group_for(groups: Mapping[str, GroupModel], sig: str, kind: str) -> GroupModel | None:
    """The group of ``groups`` that predicts signature ``sig`` for a device of ``kind``: one
    trained for it (this device's own, keyed by ``sig``) before one trained on that kind of
    device (:func:`kind_key`); None if neither has seen that kind of device."""
    for key in (sig, kind_key(sig, kind)):
        g = groups.get(key)
        if g is not None and (not g.kinds or kind in g.kinds):
            return g
    return None


def default_method(device_features: Mapping[str, float]) -> tuple[str, str]:
    """The (approach, coarsening strategy) measured best for this kind of device."""
    kind = "gpu" if device_features.get("dev_is_gpu", 1.0) else "cpu"
    return DEFAULTS_BY_KIND.get(kind, (DEFAULT_APPROACH, DEFAULT_COARSEN))
