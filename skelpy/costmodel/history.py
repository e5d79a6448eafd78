"""Predictions recorded next to measured times, per device: the model improves with use.

Every call that the cost model placed leaves one :class:`Record`: its kernel's predicted and
measured run time (profiling events) and its uploads' predicted and measured time (the wall
clock around the blocking transfers). Three things are read back:

- the measured kernel time of this kernel at this size (or the nearest size, scaled by the
  static model), preferred over the static model;
- the device's prediction error, as [Pöppl 2014] App. A.1's distance
  ``d = max(p, m) / min(p, m)`` (geometric mean over recent calls): the margin a switch of
  device must beat ([Gaspar 2022] §8.5);
- the device's correction of the static model (geometric mean of measured over predicted),
  for kernels it has not measured yet.
"""

from __future__ import annotations

import atexit
import math
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from . import decisions, files

MAX_RECORDS = 4000           # per device, oldest dropped first
RECENT = 64                  # records the error and the correction look at
DEFAULT_ERROR = 1.3          # before any measurement: [Pöppl 2014] §6.1's mean q of 1.26-1.28
NEAR_SIZE = 8.0             # sizes whose errors tell about this one
SAVE_EVERY = 1024            # write the file after this many new records (and at exit),
SAVE_INTERVAL_S = 60.0      # but not more often than this: a write merges the whole file
UPLOAD_MIN_S = 50e-6        # uploads this long tell about bandwidth, not Python work
PER_SIZE = 16               # measured times kept per kernel and size


@dataclass(frozen=True)
class Record:
    skeleton: str
    kernel: str              # the kernel's key (its source hash)
    n: float                 # elements (the tuner's dataset "n")
    kernel_predicted: float
    kernel_measured: float
    upload_predicted: float
    upload_measured: float
    source: str              # where the kernel prediction came from (Prediction.kernel_source)
    time: float

    @property
    def distance(self) -> float:
        """[Pöppl 2014]'s ``d`` of the measured parts of the call."""
        p = self.kernel_predicted + self.upload_predicted
        m = self.kernel_measured + self.upload_measured
        return max(p, m) / min(p, m) if min(p, m) > 0 else math.inf

    @classmethod
    def from_json(cls, d: Any) -> Record | None:
        """A record from stored JSON, None for anything malformed."""
        if not isinstance(d, Mapping):
            return None
        try:
            nums = {k: float(d[k]) for k in ("n", "kernel_predicted", "kernel_measured",
                                             "upload_predicted", "upload_measured", "time")}
            text = {k: d[k] for k in ("skeleton", "kernel", "source")}
        except (KeyError, TypeError, ValueError):
            return None
        if not all(math.isfinite(v) and v >= 0 for v in nums.values()):
            return None
        if not all(isinstance(v, str) and len(v) < 128 for v in text.values()):
            return None
        return cls(**text, **nums)


def _typical(xs: list[float]) -> float:
    """The lower quartile of measured times: interference from other work on the machine
    only ever adds time, so one disturbed run among few must not move the estimate (a
    median of two takes the larger)."""
    ys = sorted(xs)
    return ys[len(ys) // 4]


def _bucket(n: float) -> int:
    return int(round(math.log2(n))) if n >= 1 else 0


class History:
    """The records of one device, loaded from its file on first use, with an index of the
    measured kernel times by kernel and size (queries run on every call in auto mode)."""

    def __init__(self, device_key: str, *, persistent: bool = True):
        self.device_key = device_key
        self.persistent = persistent
        self.records: deque[Record] = deque(maxlen=MAX_RECORDS)
        self._unsaved = 0
        self._saved_at = time.monotonic()
        self._lock = threading.Lock()
        # kernel -> log2 size -> [size, recent measured times]
        self._times: dict[str, dict[int, list]] = {}
        self._version = 0
        self._cached: dict[tuple, tuple[int, float]] = {}
        if persistent:
            for r in _parse(files.load(device_key, "-history")):
                self._append(r)

    def _append(self, rec: Record) -> None:
        self.records.append(rec)
        self._version += 1
        if rec.kernel_measured > 0:
            sizes = self._times.setdefault(rec.kernel, {})
            slot = sizes.get(_bucket(rec.n))
            if slot is None:
                # the first measured time of a kernel at a size: predictions of it change
                slot = sizes[_bucket(rec.n)] = [rec.n, []]
                decisions.measured()
            slot[0] = rec.n
            slot[1].append(rec.kernel_measured)
            del slot[1][:-PER_SIZE]

    def add(self, rec: Record) -> None:
        with self._lock:
            self._append(rec)
            self._unsaved += 1
            due = self.persistent and self._unsaved >= SAVE_EVERY \
                and time.monotonic() - self._saved_at >= SAVE_INTERVAL_S
        if due:
            self.save()

    # -- queries ----------------------------------------------------------------------------
    def kernel_time(self, kernel: str, n: float) -> float | None:
        """The typical recent measured time of ``kernel`` at sizes of ``n``'s log2 bucket."""
        slot = self._times.get(kernel, {}).get(_bucket(n))
        return _typical(slot[1]) if slot else None

    def measured_sizes(self, kernel: str) -> list[tuple[float, float]]:
        """(size, typical recent measured time) of ``kernel`` per log2 size bucket."""
        return [(n, _typical(ts)) for n, ts in self._times.get(kernel, {}).values()]

    def _memo(self, key: tuple, compute) -> float:
        """``compute()``, recomputed only after a few new records (it scans many)."""
        got = self._cached.get(key)
        if got is None or self._version - got[0] >= 4:
            got = self._cached[key] = (self._version, compute())
        return got[1]

    def error(self, n: float | None = None) -> float:
        """Geometric mean of ``d`` over the recent calls of sizes within a factor of
        :data:`NEAR_SIZE` of ``n`` (prediction errors differ between a latency-bound small
        call and a bandwidth-bound large one), else over all recent calls;
        ``DEFAULT_ERROR`` before three calls."""
        b = _bucket(n) if n else None
        return self._memo(("error", b), lambda: self._error(n))

    def _error(self, n: float | None) -> float:
        recent = list(self.records)[-4 * RECENT:]
        if n is not None and n > 0:
            near = [r for r in recent if r.n > 0 and 1 / NEAR_SIZE <= r.n / n <= NEAR_SIZE]
            if len(near) >= 3:
                recent = near
        ds = [r.distance for r in recent[-RECENT:]]
        ds = [d for d in ds if math.isfinite(d)]
        if len(ds) < 3:
            return DEFAULT_ERROR
        return math.exp(sum(math.log(d) for d in ds) / len(ds))

    def correction(self) -> float:
        """Measured over predicted kernel time of the static model on this device (1.0
        before three such calls)."""
        return self._memo(("correction",), self._correction)

    def _correction(self) -> float:
        rs = [r for r in list(self.records)[-4 * RECENT:] if r.source == "model"
              and r.kernel_predicted > 0 and r.kernel_measured > 0][-RECENT:]
        if len(rs) < 3:
            return 1.0
        return math.exp(sum(math.log(r.kernel_measured / r.kernel_predicted) for r in rs)
                        / len(rs))

    def upload_correction(self) -> float:
        """Measured over predicted upload time on this device, from recent calls whose
        uploads were predicted to take at least :data:`UPLOAD_MIN_S` (1.0 before three)."""
        return self._memo(("upload",), self._upload_correction)

    def _upload_correction(self) -> float:
        rs = [r for r in list(self.records)[-4 * RECENT:]
              if r.upload_predicted >= UPLOAD_MIN_S and r.upload_measured > 0][-RECENT:]
        if len(rs) < 3:
            return 1.0
        return math.exp(sum(math.log(r.upload_measured / r.upload_predicted) for r in rs)
                        / len(rs))

    # -- the file ---------------------------------------------------------------------------
    def save(self) -> None:
        """Write the records, merged with what other processes wrote meanwhile."""
        if not self.persistent:
            return
        with self._lock:
            mine = list(self.records)
            self._unsaved = 0
            self._saved_at = time.monotonic()
        theirs = _parse(files.load(self.device_key, "-history"))
        merged = {(r.time, r.kernel, r.n): r for r in theirs}
        merged.update({(r.time, r.kernel, r.n): r for r in mine})
        keep = sorted(merged.values(), key=lambda r: r.time)[-MAX_RECORDS:]
        files.save(self.device_key, {"format": "skelpy-costmodel-history", "version": 1,
                                     "device_key": self.device_key,
                                     "records": [_row(r) for r in keep]}, "-history")

    @property
    def unsaved(self) -> int:
        return self._unsaved


def _row(r: Record) -> dict[str, Any]:
    return {f: getattr(r, f) for f in _FIELDS}


_FIELDS = tuple(f.name for f in fields(Record))


def _parse(data: Any) -> Iterable[Record]:
    if not isinstance(data, Mapping) or data.get("format") != "skelpy-costmodel-history":
        return []
    rows = data.get("records")
    if not isinstance(rows, list):
        return []
    out = [r for r in (Record.from_json(x) for x in rows[-MAX_RECORDS:]) if r is not None]
    return out


_histories: dict[tuple[str, str], History] = {}
_lock = threading.Lock()


def history(device_key: str) -> History:
    """The history of a device in the current cache folder (one per process)."""
    key = (os.environ.get("SKELPY_CACHE_DIR", ""), device_key)
    h = _histories.get(key)
    if h is None:
        with _lock:
            h = _histories.get(key)
            if h is None:
                h = _histories[key] = History(device_key)
    return h


def record(device_key: str, rec: Record) -> None:
    history(device_key).add(rec)


def save_all() -> None:
    for h in list(_histories.values()):
        if h.unsaved:
            h.save()


def forget() -> None:
    """Drop the in-memory histories (tests; a changed cache folder)."""
    with _lock:
        _histories.clear()
    decisions.changed()


atexit.register(save_all)
