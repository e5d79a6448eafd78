"""Decisions remembered per call signature: a repeated call costs a dictionary lookup.

Predicting a call on every device takes tens of microseconds of Python, more than a small
kernel runs. The choice depends only on the call's *signature*, so it is remembered under
a key made of everything it depends on:

- the stem: the kernel (its key names the muscle, the skeleton and the argument types),
  the data set (sizes) and how many steps a call runs;
- each input's shape and where it is valid (host copy, runtime holding a device copy);
- whether the caller reads the result on the host;
- the candidate devices, and where the previous call of the skeleton ran (the incumbent
  when no input is on a device).

A remembered decision is made again (:func:`lookup` misses) when

- the model changed (:func:`changed`: coefficients, settings, the tuning store, a kernel's
  first measured time on a device at a size), which advances a generation number;
- a measured use took longer than its prediction by more than the decision's tolerance
  (:meth:`Entry.check`: the margin, or the chosen device's own measured error, and at least
  :data:`NOISE`);
- it served :data:`REVISIT` calls: the history has newer measurements by then.

Repeats are measured by sampling (:meth:`Entry.sampled`): the first :data:`SAMPLE_FIRST`
uses, then one in :data:`SAMPLE_EVERY`, so that a hot loop neither pays for reading its
profiling events on every call nor floods the history with one kernel.
"""

from __future__ import annotations

import threading
from typing import Any

REVISIT = 1024              # uses of a remembered decision before it is made again
SAMPLE_FIRST = 4            # the first uses of a decision are all measured
SAMPLE_EVERY = 32           # then one use in this many
NOISE = 1.25                # repeats of one call vary this much on a busy machine
MAX_ENTRIES = 4096

_generation = 0
_entries: dict[tuple, Entry] = {}
_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0, "contradicted": 0, "predictions": 0}
_devices: list = [None, ()]      # [the candidates list last seen, its key]


class Entry:
    """One remembered decision: the :class:`~.choice.DeviceChoice` and its use count."""

    __slots__ = ("choice", "generation", "stale", "tolerance", "uses")

    def __init__(self, choice: Any, tolerance: float):
        self.choice = choice
        self.tolerance = max(tolerance, NOISE)
        self.generation = _generation
        self.uses = 0
        self.stale = False

    def sampled(self) -> bool:
        """Whether this use is measured (see module doc)."""
        u = self.uses
        return u < SAMPLE_FIRST or u % SAMPLE_EVERY == 0

    def check(self, predicted: float, measured: float) -> None:
        """A measured use: when it took longer than predicted by more than the tolerance,
        the decision is made again at the next call. (Faster than predicted cannot make
        another device the fastest: the decision stands.)"""
        if measured > predicted * self.tolerance:
            self.stale = True
            _stats["contradicted"] += 1


def devices_key(runtimes: list) -> tuple:
    """The candidates as a key (``sk.use("auto:...")`` makes a new list each time)."""
    if runtimes is _devices[0]:
        return _devices[1]
    key = tuple(map(id, runtimes))
    _devices[0], _devices[1] = runtimes, key
    return key


def call_key(stem: tuple, containers, reads_result: bool, runtimes: list,
             previous: Any) -> tuple:
    """The key of a call's decision (see module doc). ``containers``: each once. The
    previous call's device counts only when no input is on a candidate device."""
    devs = devices_key(runtimes)
    where = tuple([(c.shape, *c.residence) for c in containers])
    for _shape, _host, holder in where:
        if holder is not None and id(holder) in devs:
            return (stem, reads_result, devs, None, where)
    return (stem, reads_result, devs, id(previous), where)


def lookup(key: tuple, *, count_miss: bool = True) -> Entry | None:
    """The remembered decision of ``key`` if it still holds, its use counted
    (``count_miss`` False: a miss that the caller's full path will look up again)."""
    e = _entries.get(key)
    if e is None or e.stale or e.generation != _generation or e.uses >= REVISIT:
        if count_miss:
            _stats["misses"] += 1
        return None
    e.uses += 1
    _stats["hits"] += 1
    return e


def remember(key: tuple, choice: Any, tolerance: float) -> Entry:
    """Remember ``choice`` for ``key``; returns its entry (uses 0)."""
    e = Entry(choice, tolerance)
    with _lock:
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()
        _entries[key] = e
    return e


def changed() -> None:
    """Something the predictions depend on changed: every remembered decision is made again."""
    global _generation
    _generation += 1


_follow_measurements = [True]     # whether predictions use measured times (the settings')


def follow_measurements(on: bool) -> None:
    """Whether predictions use measured times (``costmodel.settings.measurements``)."""
    _follow_measurements[0] = bool(on)


def measured() -> None:
    """A kernel's first measured time at a size: the predictions change only where they use
    measured times (otherwise the decisions stand)."""
    if _follow_measurements[0]:
        changed()


def counted_predictions(k: int) -> None:
    """``k`` more predictions were computed (one per candidate device of a decision)."""
    _stats["predictions"] += k


def stats() -> dict[str, int]:
    """Hits, misses, contradicted decisions and predictions computed since :func:`forget`
    (tests, benchmarks)."""
    return dict(_stats)


def forget() -> None:
    """Drop every remembered decision and the counts (tests)."""
    changed()
    with _lock:
        _entries.clear()
    _devices[0], _devices[1] = None, ()
    for k in _stats:
        _stats[k] = 0
