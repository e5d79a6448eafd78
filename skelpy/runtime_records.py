"""What the runtime records: host<->device traffic and launch counts (:class:`TransferStats`,
which tests read to prove laziness) and what one skeleton call ran (:class:`Launch`, its kernel
time read lazily from profiling events).

Plain records with no OpenCL state of their own: the runtime, the program builder and the
tuner's measuring share them without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyopencl as cl


@dataclass
class TransferStats:
    """Counts of host<->device traffic; tests use it to prove laziness."""

    uploads: int = 0
    downloads: int = 0
    upload_bytes: int = 0
    download_bytes: int = 0
    launches: int = 0
    builds: int = 0

    def reset(self) -> None:
        for f in ("uploads", "downloads", "upload_bytes", "download_bytes", "launches", "builds"):
            setattr(self, f, 0)


@dataclass
class Launch:
    """What one skeleton call ran: parameters, sizes and (lazily) the kernel time."""

    skeleton: str
    params: dict
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    events: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    source: str = "default"
    choice: Any = None      # in auto mode: the cost model's DeviceChoice (device, why, error)

    @property
    def kernel_time(self) -> float:
        """Seconds of device time of this call's kernels, from profiling events."""
        return sum(event_seconds(e) for e in self.events)

    def __repr__(self) -> str:
        where = "" if self.choice is None else f", device={self.choice.device!r}"
        return (f"Launch({self.skeleton}, params={self.params}, global={self.global_size}, "
                f"local={self.local_size}, source={self.source!r}{where})")


def event_seconds(event: cl.Event) -> float:
    event.wait()
    return (event.profile.end - event.profile.start) * 1e-9
