"""Helpers of the cost-model tests: coefficients made to order, stand-ins for devices and
containers (the decision itself only reads their keys, names, sizes and residence)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from skelpy.costmodel.terms import MEMORY_CLASSES, OP_CLASSES, DeviceCoefficients, Line


def coefficients(key="dev | test | 1", **changes) -> DeviceCoefficients:
    base = dict(
        device_key=key, device_name="test device", kind="cpu",
        h2d=Line(10e-6, 1e-10), d2h=Line(8e-6, 1.2e-10), h2d_pinned=Line(9e-6, 0.8e-10),
        d2h_pinned=Line(7e-6, 0.9e-10), launch=Line(20e-6, 5e-6),
        work_item=Line(1e-6, 1e-11),
        memory={k: (i + 1) * 1e-11 for i, k in enumerate(MEMORY_CLASSES)},
        ops={k: (i + 1) * 1e-12 for i, k in enumerate(OP_CLASSES)},
        overlap=0.25, seconds_taken=2.0, created=1.0)
    base.update(changes)
    return DeviceCoefficients(**base)


@dataclass(eq=False)
class FakeDevice:
    key: str
    name: str
    has_fp64: bool = True


@dataclass(eq=False)
class FakeRuntime:
    device: FakeDevice


class FakeContainer:
    """A container of ``n`` float32 values valid on the host and/or on runtime ``on``."""

    def __init__(self, n: int, on=None, host: bool = True):
        self.dtype = np.dtype(np.float32)
        self.shape = (n,)
        self.nbytes = 4 * n
        self.residence = (host, on)
