"""The plan bag Reduce, Scan and AllPairs use until they move to declared plans (plan.py).

Temporary: removed when those skeletons are ported (their accumulator work lands first)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from ..errors import DeviceError
from ..tuner.space import ParamSpace


@dataclass
class Plan:
    """Everything a skeleton needs to launch one call signature again quickly."""

    source: str
    kernel_name: str
    kernel_key: str
    out_dtype: np.dtype
    typed: Any
    features: dict[str, float]
    space_factory: Callable[[Any], ParamSpace]
    macros: Callable[[Mapping], tuple[str, ...]]
    programs: dict[tuple, cl.Kernel] = field(default_factory=dict)
    spaces: dict[int, ParamSpace] = field(default_factory=dict)

    def space(self, rt: _rt.Runtime) -> ParamSpace:
        sp = self.spaces.get(id(rt))
        if sp is None:
            sp = self.spaces[id(rt)] = self.space_factory(rt)
        return sp


def fp64_check(rt: _rt.Runtime, uses_fp64: bool, origin: str) -> None:
    if uses_fp64 and not rt.device.has_fp64:
        raise DeviceError(f"{origin}: this muscle needs double precision (float64) but "
                          f"{rt.device.name} has no fp64 support; use float32 data, or "
                          "out_dtype=np.float32, or pick another device with sk.use()")
