"""Each device's coefficients: in memory, else from its file, else calibrated now (once).

``skelpy calibrate`` measures every device ahead of time; a device that ``sk.use("auto")``
meets uncalibrated is calibrated at its first call (a few seconds, one message on stderr)
and the result is stored for every later process.
"""

from __future__ import annotations

import os
import sys
import threading

from . import decisions, files
from .calibrate import calibrate
from .terms import CoefficientError, DeviceCoefficients

_known: dict[tuple[str, str], DeviceCoefficients] = {}
_lock = threading.Lock()


def _key(device_key: str) -> tuple[str, str]:
    return (os.environ.get("SKELPY_CACHE_DIR", ""), device_key)


def stored(device_key: str) -> DeviceCoefficients | None:
    """The coefficients stored for a device (memory, then file), None if there are none."""
    c = _known.get(_key(device_key))
    if c is not None:
        return c
    data = files.load(device_key)
    if data is None:
        return None
    try:
        c = DeviceCoefficients.from_json(data)
    except CoefficientError:
        return None                                   # recalibrated (and rewritten) on use
    if c.device_key != device_key:
        return None
    _known[_key(device_key)] = c
    return c


def remember(c: DeviceCoefficients, *, save: bool = True) -> None:
    """Use ``c`` for its device from now on (and store it unless ``save`` is False)."""
    _known[_key(c.device_key)] = c
    decisions.changed()
    if save:
        files.save(c.device_key, c.to_json())


def coefficients(rt, *, quick: bool = False) -> DeviceCoefficients:
    """The coefficients of runtime ``rt``'s device, calibrating it now if none are stored."""
    key = rt.device.key
    c = stored(key)
    if c is not None:
        return c
    with _lock:
        c = _known.get(_key(key))
        if c is None:
            print(f"skelpy: calibrating the cost model for {rt.device.name} (once; "
                  "`skelpy calibrate` does it ahead of time)", file=sys.stderr)
            c = calibrate(rt, quick=quick)
            remember(c)
    return c


def forget() -> None:
    """Drop the coefficients held in memory (tests)."""
    _known.clear()
    decisions.changed()
