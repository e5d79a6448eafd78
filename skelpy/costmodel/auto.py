"""``sk.use("auto")``: the hook skeleton calls go through to get their device.

A skeleton call in auto mode describes itself as a :class:`~.choice.CallSpec` and calls
:func:`place`, which picks the device (:func:`~.choice.choose`), moves the inputs there and
times those moves; after the launch, :func:`launched` keeps the call's events so that its
measured time is put next to its prediction once the kernels finish (without waiting for
them: finished calls are recorded at the next placement or at exit).

Whether the caller reads a result on the host is learnt per skeleton: the previous result
of the same skeleton, if it was read on the host by the time of the next call, says yes.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from typing import Any

from .. import runtime as _rt
from .choice import CallSpec, DeviceChoice, choose

MAX_PENDING = 256

_pending: list[DeviceChoice] = []
_previous: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # skeleton -> runtime
_results: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()    # skeleton -> (ref, guess)
_lock = threading.Lock()


def settle(wait: bool = False) -> None:
    """Record the calls whose kernels have finished (all of them with ``wait``)."""
    with _lock:
        todo = list(_pending)
    done = [c for c in todo if wait or c.done()]
    for c in done:
        try:
            c.record()
        except Exception:  # noqa: BLE001 - a lost measurement must not break a call
            c.recorded = True
    if done:
        with _lock:
            _pending[:] = [c for c in _pending if not c.recorded]


def reads_result_guess(skeleton: Any) -> bool:
    """Whether the previous result of ``skeleton`` was read on the host (False at first)."""
    got = _results.get(skeleton)
    if got is None:
        return False
    ref, guess = got
    res = ref()
    if res is not None:
        guess = bool(res.residence[0])
        _results[skeleton] = (ref, guess)
    return guess


def place(skeleton: Any, spec: CallSpec) -> DeviceChoice:
    """Choose the runtime for this call and move its inputs there (timed)."""
    settle()
    runtimes = _rt.auto_runtimes()
    choice = choose(spec, runtimes, _previous.get(skeleton))
    rt = choice.runtime
    moving = [c for c in spec.containers() if c.residence[1] is not rt]
    if moving:
        t0 = time.perf_counter()
        for c in moving:
            c.device_buffer(rt)
        choice.upload_measured = time.perf_counter() - t0
    _previous[skeleton] = rt
    return choice


def launched(skeleton: Any, choice: DeviceChoice, events, result: Any = None) -> None:
    """The call ran: keep its events for the history, and its result to learn whether
    results of this skeleton are read on the host."""
    choice.events = list(events)
    if result is not None and hasattr(result, "residence"):
        prev = _results.get(skeleton)
        _results[skeleton] = (weakref.ref(result), prev[1] if prev else False)
    with _lock:
        _pending.append(choice)
        full = len(_pending) > MAX_PENDING
    if full:
        settle(wait=True)


atexit.register(lambda: settle(wait=True))
