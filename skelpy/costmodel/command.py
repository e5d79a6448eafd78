"""``skelpy calibrate``: measure each device's cost-model coefficients once, ahead of time."""

from __future__ import annotations

from collections.abc import Callable

from .. import runtime as _rt
from . import files, registry
from .calibrate import calibrate
from .terms import DeviceCoefficients


def describe(c: DeviceCoefficients) -> list[str]:
    """A few readable lines of one device's coefficients."""
    bw = c.bandwidths()
    us = 1e6
    lines = [
        f"  transfers GB/s  host->device {bw['h2d']:.1f} (pinned {bw['h2d_pinned']:.1f}), "
        f"device->host {bw['d2h']:.1f} (pinned {bw['d2h_pinned']:.1f}); latency "
        f"{c.h2d.latency * us:.1f} / {c.d2h.latency * us:.1f} us",
        f"  launch {c.launch.latency * us:.1f} us (+{c.launch.per_unit * us:.1f} us per "
        f"further kernel); kernel base {c.work_item.latency * us:.2f} us + "
        f"{c.work_item.per_unit * 1e12:.1f} ps per work-item",
        "  memory  " + ", ".join(f"{k} {v * 1e12:.2f}" for k, v in c.memory.items())
        + " ps (per byte for read/write_byte, per access otherwise)",
        "  ops     " + ", ".join(f"{k} {v * 1e12:.2f}" for k, v in c.ops.items())
        + f" ps per operation; overlap {c.overlap:.2f}",
        f"  measured in {c.seconds_taken:.1f} s",
    ]
    return lines


def run(spec: str | None = None, *, force: bool = False, quick: bool = False,
        show: bool = False, out: Callable[[str], None] = print) -> int:
    """Calibrate the devices matching ``spec`` (every device when None) that have no stored
    coefficients (all of them with ``force``); ``show`` only prints what is stored."""
    devs = [_rt.select(spec)] if spec is not None else _rt.devices()
    if not devs:
        out("no OpenCL device found")
        return 1
    out(f"cost-model coefficients: {files.folder()}")
    missing = 0
    for dev in devs:
        have = registry.stored(dev.key)
        if show or (have is not None and not force):
            if have is None:
                out(f"{dev.name}: not calibrated")
                missing += 1
                continue
            out(f"{dev.name}: stored" + ("" if show else " (--force measures again)"))
            for line in describe(have):
                out(line)
            continue
        out(f"{dev.name}: measuring ({'quick' if quick else 'a few seconds'})")
        c = calibrate(_rt.runtime_of(dev), quick=quick)
        registry.remember(c)
        for line in describe(c):
            out(line)
    return 1 if show and missing == len(devs) else 0
