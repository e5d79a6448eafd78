"""Reduce's and MapReduce's kernel for one signature: :class:`ReducePlan` and its launch spaces.

A flat fold (all elements) tunes ``wg``, ``items`` (coarsening), ``groups`` (an upper bound on
the number of work-groups) and ``stages`` (1: the last work-group folds the partials; 2: a
second launch does); an axis fold tunes ``wg`` and ``lanes`` (work-items per output). Legal
points keep the work-group within the device's limits and the group's local arrays within its
local memory (``local_bytes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import runtime as _rt
from ..dtypes import storage_dtype
from ..tuner import cpu_defaults
from ..tuner.space import Param, ParamSpace, pow2_range
from .fold_common import (
    ITEMS_VALUES,
    device_options,
    local_rule,
    max_wg,
    one_launch_ok,
    power_of_two,
    work_group_rules,
)
from .limits import MAX_GROUPS, Legality, Rule, at_least, at_most
from .plan import Plan

GROUPS_VALUES = (1, 4, 16, 64, 256, 1024, 4096, 16384)
PAIRWISE_LEAVES = 1 << 15     # leaves one work-item folds pairwise (2^(SKP_LEVELS-1), reduce.cl)
PAIRWISE_LEAF = 16            # elements of a leaf, folded serially (SKP_LEAF, reduce.cl)


@dataclass(eq=False)
class ReducePlan(Plan):
    """A fold's kernel for one signature (input kinds, extras, axis)."""

    inputs: tuple                     # the input kinds (arguments.ContainerInput, ...)
    n_muscle_inputs: int              # map-muscle parameters the inputs fill (extras follow)
    ordered: bool                     # the group keeps element order (muscle not commutative)
    axis: int | None                  # None: all elements; 0/1: along that axis

    def macros(self, point: Mapping) -> tuple[str, ...]:
        if self.axis is None:
            return (f"-DSKP_WG={int(point['wg'])}", f"-DSKP_ITEMS={int(point['items'])}")
        return (f"-DSKP_WG={int(point['wg'])}", "-DSKP_AXIS_ONLY=1")

    def device_options(self, rt: _rt.Runtime) -> tuple[str, ...]:
        return device_options(rt)

    def local_bytes(self, point: Mapping) -> int:
        acc_size = storage_dtype(self.out_dtype).itemsize
        wg = int(point["wg"])
        if self.axis is not None:
            return wg * acc_size + 16
        items = int(point["items"])
        tile = wg * items + (wg * items >> 5) if self.ordered else 0
        return (wg + tile) * acc_size + 16

    def make_space(self, rt: _rt.Runtime) -> tuple[ParamSpace, Legality]:
        return self._flat_space(rt) if self.axis is None else self._axis_space(rt)

    def _flat_space(self, rt: _rt.Runtime) -> tuple[ParamSpace, Legality]:
        """Legal points: work-group within the device limits, local memory within budget."""
        wmax = max_wg(rt)
        acc_size = storage_dtype(self.out_dtype).itemsize
        params = [
            Param("wg", pow2_range(1, wmax), doc="work-group size"),
            Param("items", ITEMS_VALUES, doc="elements per work-item per step (coarsening)"),
            Param("groups", GROUPS_VALUES, doc="upper bound on the number of work-groups"),
            Param("stages", (1, 2), numeric=False,
                  doc="1: the last work-group folds the partials; 2: a second launch does"),
        ]
        stages = (1, 2) if one_launch_ok(rt) else (2,)
        rules = Legality([
            *work_group_rules(rt, wmax),
            at_least("items", 1),
            power_of_two("items"),
            at_least("groups", 1),
            at_most("groups", MAX_GROUPS, "skelpy's maximum MAX_GROUPS"),
            Rule(lambda p: p["stages"] in stages,
                 lambda p: f"stages={p['stages']!r}: {rt.device.name} offers only "
                           f"{list(stages)} (one launch needs a global fence it lacks)"),
            local_rule(self, rt),
        ])
        default = _flat_default(rt, acc_size, wmax, self.ordered)
        default["stages"] = stages[0]
        space = ParamSpace(params, default, rules, extra_values_ok=("groups",))
        if not space.is_legal(space.default):
            space.default = space.nearest(space.default) or space.default
        return space, rules

    def _axis_space(self, rt: _rt.Runtime) -> tuple[ParamSpace, Legality]:
        wmax = max_wg(rt)
        wgs = pow2_range(1, wmax)
        params = [Param("wg", wgs, doc="work-group size"),
                  Param("lanes", wgs, doc="work-items folding one output")]
        rules = Legality([
            *work_group_rules(rt, wmax),
            at_least("lanes", 1),
            power_of_two("lanes"),
            Rule(lambda p: int(p["lanes"]) <= int(p["wg"]),
                 lambda p: f"lanes={p['lanes']} is more than the work-group wg={p['wg']}"),
            local_rule(self, rt),
        ])
        gpu = rt.device.kind == "gpu"
        default = {"wg": min(256 if gpu else 64, wmax), "lanes": min(32 if gpu else 16, wmax)}
        return ParamSpace(params, default, rules), rules


def _flat_default(rt: _rt.Runtime, itemsize: int, wmax: int, ordered: bool) -> dict:
    """Starting points measured on an H200 (float32 sums of 2^26 elements: 95% of copy
    bandwidth interleaved, 56% order-preserving) and on PoCL."""
    dev = rt.device
    if dev.kind == "gpu":
        groups = min(GROUPS_VALUES, key=lambda g: abs(g - 8 * dev.compute_units))
        if ordered:
            return {"wg": min(128, wmax), "items": 32 if itemsize <= 4 else 16,
                    "groups": groups, "stages": 1}
        return {"wg": min(256, wmax), "items": 16 if itemsize <= 4 else 8,
                "groups": groups, "stages": 1}
    return cpu_defaults.fold_point(dev, GROUPS_VALUES, wmax)    # issue 18: re-measured on PoCL
