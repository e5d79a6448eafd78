"""``sk.use("auto")``: the hook skeleton calls go through to get their device.

A skeleton call in auto mode calls :func:`place_call`, which looks its decision up by the
call's signature (:mod:`.decisions`) and only on a miss describes the call as a
:class:`~.choice.CallSpec` and predicts it on every device (:func:`~.choice.choose`); then
it moves the inputs there and times those moves. A skeleton's repeat-call launcher asks
:func:`repeat` instead (a dictionary lookup). After the launch, :func:`launched` keeps the
call's events; on the uses of a decision that are measured (sampled, see
:mod:`.decisions`) its measured time is put next to its prediction once the kernels finish
(without waiting for them: finished calls are recorded at later calls or at exit).

Whether the caller reads a result on the host is learnt per skeleton: the previous result
of the same skeleton, if it was read on the host by the time of the next call, says yes.
"""

from __future__ import annotations

import atexit
import functools
import threading
import time
import weakref
from typing import Any

from .. import runtime as _rt
from ..containers import Container, IndexMatrix, IndexVector
from ..muscle import IndexPoint
from . import decisions
from . import history as _history
from .access import extra_read_classes
from .choice import CallSpec, DeviceChoice, choose

MAX_PENDING = 256
SETTLE_EVERY = 8            # finished calls are recorded in batches of about this many

_pending: list[DeviceChoice] = []
_previous: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # skeleton -> runtime
_results: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()    # skeleton -> (ref, guess)
_lock = threading.Lock()
_warm: set[tuple[int, str]] = set()      # (runtime, kernel) that ran once in this process


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


def forget() -> None:
    """Drop remembered decisions and pending records (tests)."""
    with _lock:
        _pending.clear()
    decisions.forget()
    _warm.clear()
    _previous.clear()
    _results.clear()


class _LastResult:
    """A skeleton's latest result, to learn whether the caller reads results on the host:
    while it lives, its residence says; when it dies, its probe (dropped then) said. (The
    weak reference's callback holds ``state``, not this object: no reference cycle.)"""

    __slots__ = ("ref", "state")

    def __init__(self, result: Any, guess: bool):
        state = self.state = [guess, result.host_read_probe()]
        self.ref = weakref.ref(result, functools.partial(_result_gone, state))

    def read(self) -> bool:
        res = self.ref()
        return self.state[0] if res is None else res.residence[0]


def _result_gone(state: list, _ref) -> None:
    probe, state[1] = state[1], None
    if probe is not None:
        state[0] = probe()


def reads_result_guess(skeleton: Any) -> bool:
    """Whether the previous result of ``skeleton`` was read on the host (False at first)."""
    got = _results.get(skeleton)
    return False if got is None else got.read()


def unique(containers) -> list:
    """Each container once, in order (a call may pass one twice)."""
    if len(containers) < 2:
        return list(containers)
    seen, out = set(), []
    for c in containers:
        if id(c) not in seen:
            seen.add(id(c))
            out.append(c)
    return out


def tolerance(choice: DeviceChoice) -> float:
    """How far a measured repeat may be from the prediction before the decision is made
    again: the margin, or the chosen device's own measured error near this size."""
    return max(choice.margin, _history.history(choice.runtime.device.key).error(choice.n))


def _move(skeleton: Any, choice: DeviceChoice, containers) -> DeviceChoice:
    """Move the call's inputs to the chosen runtime (timed) and note the first call of its
    kernel there."""
    rt = choice.runtime
    moving = [c for c in containers if c.residence[1] is not rt]
    if moving:
        t0 = time.perf_counter()
        for c in moving:
            c.device_buffer(rt)
        choice.upload_measured = time.perf_counter() - t0
    if not choice.reused:
        warm = (id(rt), choice.kernel_key)
        if warm not in _warm:
            # The first call of a kernel on a device also pays for first allocations of its
            # sizes: its transfer time says nothing about the next calls.
            choice.cold = True
            _warm.add(warm)
    if _previous.get(skeleton) is not rt:
        _previous[skeleton] = rt
    return choice


def _reuse(entry: decisions.Entry) -> DeviceChoice:
    """A remembered decision for this call; finished measurements are recorded first when
    this one is measured too (so that a contradicted decision is seen soon)."""
    choice = entry.choice.again(entry)
    if (choice.sampled and _pending) or len(_pending) >= SETTLE_EVERY:
        settle()
    return choice


def _decide(spec: CallSpec, stem: tuple, key: tuple, runtimes, previous) -> DeviceChoice:
    """A new decision, remembered unless it explores a device once."""
    settle()
    choice = choose(spec, runtimes, previous)
    choice.stem = stem
    if not choice.reason.startswith("exploring"):
        choice.entry = decisions.remember(key, choice, tolerance(choice))
    return choice


def repeat(skeleton: Any, stem: tuple, containers, rt) -> DeviceChoice | None:
    """For a skeleton's repeat-call launcher made for runtime ``rt`` (the stem of the
    call it was made from): the remembered decision of this call if it is still ``rt``,
    with the inputs moved there; None sends the call down the full path."""
    containers = unique(containers)
    key = decisions.call_key(stem, containers, reads_result_guess(skeleton),
                             _rt.auto_runtimes(), _previous.get(skeleton))
    entry = decisions.lookup(key, count_miss=False)
    if entry is None or entry.choice.runtime is not rt:
        return None
    return _move(skeleton, _reuse(entry), containers)


def _roles(kinds: tuple, inputs) -> dict[int, str]:
    """What each muscle parameter fed by an input carries, for the access analysis."""
    roles, p = {}, 0
    for c in inputs:
        if isinstance(c, IndexVector):
            roles[p], p = "id", p + 1
        elif isinstance(c, IndexMatrix):
            if p < len(kinds) and isinstance(kinds[p], IndexPoint):
                roles[p], p = "point", p + 1
            else:
                roles[p], roles[p + 1], p = "row", "col", p + 2
        else:
            roles[p], p = "data", p + 1
    return roles


_reads_cache: dict[str, dict] = {}


def extra_reads(skeleton: Any, plan: Any, inputs) -> dict[str, float] | None:
    """The access classes of a Map/Zip muscle's reads of extra arrays (cached per kernel)."""
    key = plan.kernel_key
    got = _reads_cache.get(key)
    if got is None:
        tm = plan.muscle
        extras = [k for k in getattr(tm, "kinds", ()) if getattr(k, "kind", "") == "array"]
        itemsize = extras[0].dtype.itemsize if extras else 4
        got = extra_read_classes(skeleton.muscle, tuple(getattr(tm, "kinds", ())),
                                 _roles(tuple(getattr(tm, "kinds", ())), inputs),
                                 plan.features, itemsize) if extras else {}
        if len(_reads_cache) > 4096:
            _reads_cache.clear()
        _reads_cache[key] = got
    return got


def place_call(skeleton: Any, plan: Any, dataset: dict, inputs, extras=(), *,
               out_bytes: int, reads_result: bool | None = None,
               iterations: int = 1) -> DeviceChoice:
    """Build the :class:`CallSpec` of a skeleton call from its plan and arguments, and
    :func:`place` it. ``reads_result`` None: learnt from the skeleton's previous result.
    A remembered decision is looked up before anything else is built."""
    streamed = [c for c in inputs if isinstance(c, Container)]
    read_by_index = [c for c in extras if isinstance(c, Container)]
    reads = reads_result_guess(skeleton) if reads_result is None else bool(reads_result)
    measure_key = plan.kernel_key if iterations == 1 else f"{plan.kernel_key}*{iterations}"
    stem = (measure_key, tuple(dataset.items()), int(out_bytes))
    containers = unique(streamed + read_by_index)
    runtimes = _rt.auto_runtimes()
    previous = _previous.get(skeleton)
    key = decisions.call_key(stem, containers, reads, runtimes, previous)
    entry = decisions.lookup(key)
    if entry is not None:
        return _move(skeleton, _reuse(entry), containers)
    kind = skeleton.kind
    spec = CallSpec(
        skeleton=kind, kernel_key=plan.kernel_key, features=plan.features,
        dataset=dataset, inputs=streamed, out_itemsize=plan.out_dtype.itemsize,
        out_bytes=int(out_bytes), reads_result=reads, extras=read_by_index,
        extra_reads=extra_reads(skeleton, plan, inputs) if kind in ("map", "zip") else None,
        needs_fp64=bool(getattr(plan, "uses_fp64", False)), iterations=iterations)
    return _move(skeleton, _decide(spec, stem, key, runtimes, previous), containers)


def launched(skeleton: Any, choice: DeviceChoice, events, result: Any = None) -> None:
    """The call ran: keep its events (for ``last_launch`` and, when this use of the
    decision is measured, for the history), and its result to learn whether results of
    this skeleton are read on the host."""
    choice.events = events if type(events) is list else list(events)
    if result is not None and hasattr(result, "host_read_probe"):
        _results[skeleton] = _LastResult(result, reads_result_guess(skeleton))
    if not choice.sampled:
        return
    with _lock:
        _pending.append(choice)
        full = len(_pending) > MAX_PENDING
    if full:
        settle(wait=True)


atexit.register(lambda: settle(wait=True))
