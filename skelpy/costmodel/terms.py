"""The fitted terms of one device's cost model, as plain data ([Pöppl 2014] §5, §6.2.1).

Every term is a line ``t(x) = latency + per_unit * x`` ([Pöppl 2014] eq. 5.2/5.3 write it
``x/b + l``) or a cost per counted unit. :class:`DeviceCoefficients` holds one device's
terms and converts to and from JSON with every value checked (finite, non-negative, within
a sane range), so a damaged or planted file can only be rejected, never executed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FORMAT = "skelpy-costmodel"
VERSION = 1

# Memory access classes ([Pöppl 2014] §5.5, [Joshi & Omar 2011] §2.3), costs per access of
# one element except the two byte-wise coalesced ones.
MEMORY_CLASSES = ("read_byte", "write_byte", "strided", "gathered", "constant", "cached")
# Operation classes ([Pöppl 2014] eq. 5.8, with add/sub/mul/compare/logic merged: their
# costs differ by less than the noise of one measurement there too).
OP_CLASSES = ("alu32", "alu64", "int", "div", "math")

_MAX_SECONDS = 1e3          # no single term of a call may claim more than this


class CoefficientError(ValueError):
    """Stored coefficients that are not usable (wrong format, version or values)."""


@dataclass(frozen=True)
class Line:
    """``t(x) = latency + per_unit * x`` for x > 0, and 0 for nothing to do."""

    latency: float
    per_unit: float

    def __call__(self, x: float) -> float:
        return self.latency + self.per_unit * x if x > 0 else 0.0

    def to_json(self) -> list[float]:
        return [self.latency, self.per_unit]

    @classmethod
    def from_json(cls, value: Any, what: str) -> Line:
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise CoefficientError(f"{what}: expected [latency, per_unit], got {value!r}")
        return cls(_seconds(value[0], what), _seconds(value[1], what))


@dataclass(frozen=True)
class DeviceCoefficients:
    """One device's calibrated terms.

    ``h2d``/``d2h``: transfers per direction, per byte, from pageable host memory (what
    containers use) and from pinned memory (``*_pinned``, reported; [Gaspar 2022] Table 6.3
    found the two differ by up to 30%). ``launch``: the wall-clock time a call waits
    beyond its kernels' own run time (enqueue, scheduling, completion), for its first
    kernel and for each further one. ``work_item``: the kernel's own time (profiling
    events) of an empty kernel, per kernel and per work-item ([Pöppl 2014] §5.2).
    ``memory`` and ``ops``: costs per unit of each class. ``overlap``: the
    share of the smaller of memory and arithmetic time that does not hide behind the larger
    (0: perfect overlap, a roofline; 1: they add up)."""

    device_key: str
    device_name: str
    kind: str
    h2d: Line
    d2h: Line
    h2d_pinned: Line
    d2h_pinned: Line
    launch: Line
    work_item: Line
    memory: Mapping[str, float]
    ops: Mapping[str, float]
    overlap: float = 0.0
    seconds_taken: float = 0.0
    created: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "version": VERSION, "device_key": self.device_key,
            "device_name": self.device_name, "kind": self.kind,
            "h2d": self.h2d.to_json(), "d2h": self.d2h.to_json(),
            "h2d_pinned": self.h2d_pinned.to_json(), "d2h_pinned": self.d2h_pinned.to_json(),
            "launch": self.launch.to_json(), "work_item": self.work_item.to_json(),
            "memory": dict(self.memory), "ops": dict(self.ops), "overlap": self.overlap,
            "seconds_taken": self.seconds_taken, "created": self.created,
            "extra": {k: v for k, v in self.extra.items()
                      if isinstance(v, (int, float, str))},
        }

    @classmethod
    def from_json(cls, data: Any) -> DeviceCoefficients:
        if not isinstance(data, Mapping):
            raise CoefficientError("coefficients must be a JSON object")
        if data.get("format") != FORMAT:
            raise CoefficientError(f"not {FORMAT} data (format {data.get('format')!r})")
        if data.get("version") != VERSION:
            raise CoefficientError(f"version {data.get('version')!r}; this skelpy reads "
                                   f"version {VERSION}")
        memory = _classes(data.get("memory"), MEMORY_CLASSES, "memory")
        ops = _classes(data.get("ops"), OP_CLASSES, "ops")
        overlap = _seconds(data.get("overlap", 0.0), "overlap")
        if overlap > 1.0:
            raise CoefficientError(f"overlap {overlap} is above 1")
        extra = data.get("extra", {})
        return cls(
            device_key=_text(data.get("device_key"), "device_key"),
            device_name=_text(data.get("device_name"), "device_name"),
            kind=_text(data.get("kind"), "kind"),
            h2d=Line.from_json(data.get("h2d"), "h2d"),
            d2h=Line.from_json(data.get("d2h"), "d2h"),
            h2d_pinned=Line.from_json(data.get("h2d_pinned"), "h2d_pinned"),
            d2h_pinned=Line.from_json(data.get("d2h_pinned"), "d2h_pinned"),
            launch=Line.from_json(data.get("launch"), "launch"),
            work_item=Line.from_json(data.get("work_item"), "work_item"),
            memory=memory, ops=ops, overlap=overlap,
            seconds_taken=_seconds(data.get("seconds_taken", 0.0), "seconds_taken"),
            created=float(_number(data.get("created", 0.0), "created")),
            extra={str(k): v for k, v in (extra.items() if isinstance(extra, Mapping) else ())
                   if isinstance(v, (int, float, str)) and len(str(k)) < 64},
        )

    def bandwidths(self) -> dict[str, float]:
        """Transfer bandwidths in GB/s, for reports."""
        return {name: (1e-9 / line.per_unit if line.per_unit > 0 else math.inf)
                for name, line in (("h2d", self.h2d), ("d2h", self.d2h),
                                   ("h2d_pinned", self.h2d_pinned),
                                   ("d2h_pinned", self.d2h_pinned))}


def _number(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise CoefficientError(f"{what}: expected a number, got {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise CoefficientError(f"{what}: {v} is not finite")
    return v


def _seconds(v: Any, what: str) -> float:
    v = _number(v, what)
    if not 0.0 <= v <= _MAX_SECONDS:
        raise CoefficientError(f"{what}: {v} is outside [0, {_MAX_SECONDS}]")
    return v


def _text(v: Any, what: str) -> str:
    if not isinstance(v, str) or len(v) > 512:
        raise CoefficientError(f"{what}: expected a short text, got {v!r}")
    return v


def _classes(v: Any, names: tuple[str, ...], what: str) -> dict[str, float]:
    if not isinstance(v, Mapping):
        raise CoefficientError(f"{what}: expected an object of {', '.join(names)}")
    missing = [k for k in names if k not in v]
    if missing:
        raise CoefficientError(f"{what}: missing {', '.join(missing)}")
    return {k: _seconds(v[k], f"{what}.{k}") for k in names}
