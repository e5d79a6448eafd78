"""The predicted time of one call on one device, in [Pöppl 2014]'s form (§6.2.1):

    t = T_h2d(bytes not resident there) + T_launch(kernels) + T_kernel(work) + T_d2h(read back)

with ``T_h2d``/``T_d2h`` lines per direction (§5.1), ``T_launch`` the wall-clock cost of
enqueueing and waiting, and ``T_kernel`` the base cost per kernel and work-item (§5.2) plus
the costs of the counted operations and memory accesses (§5.4-5.5). Where the thesis
multiplies each class by a saturation factor M(x) (the first operations hide behind memory
latency, §5.4.1), this model takes the larger of memory and arithmetic time plus a fitted
share (``overlap``) of the smaller: the same effect with one coefficient per device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .features import Work
from .terms import DeviceCoefficients


@dataclass(frozen=True)
class Prediction:
    """The predicted seconds of one call on one device, term by term. ``kernel_source``
    says where the kernel term came from: ``model`` (static), ``history`` (this kernel's
    measured times at this size), ``nearby`` (at another size, scaled by the model),
    ``tuner`` (the tuning store's measurements of this scenario)."""

    device: str
    upload: float
    launch: float
    kernel: float
    download: float
    kernel_source: str = "model"
    moves: tuple = field(default=())        # (bytes, from-device name) of each input moved

    @property
    def total(self) -> float:
        return self.upload + self.launch + self.kernel + self.download

    def describe(self) -> str:
        return (f"{self.total * 1e3:.3f} ms = upload {self.upload * 1e3:.3f} + launch "
                f"{self.launch * 1e3:.3f} + kernel {self.kernel * 1e3:.3f} "
                f"({self.kernel_source}) + download {self.download * 1e3:.3f}")


def kernel_seconds(c: DeviceCoefficients, work: Work) -> float:
    """The kernels' own run time (what profiling events measure)."""
    mem = sum(units * c.memory.get(cls, 0.0) for cls, units in work.memory.items())
    ops = sum(count * c.ops.get(cls, 0.0) for cls, count in work.ops.items())
    base = work.kernels * c.work_item.latency + work.work_items * c.work_item.per_unit
    return base + max(mem, ops) + c.overlap * min(mem, ops)


def launch_seconds(c: DeviceCoefficients, kernels: int) -> float:
    """What a caller waits beyond the kernels' run time."""
    return c.launch.latency + max(kernels - 1, 0) * c.launch.per_unit


def upload_seconds(c: DeviceCoefficients, nbytes: float) -> float:
    return c.h2d(nbytes)


def download_seconds(c: DeviceCoefficients, nbytes: float) -> float:
    return c.d2h(nbytes)
