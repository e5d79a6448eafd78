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
from ..containers import Container, IndexMatrix, IndexVector
from ..muscle import IndexPoint
from .access import extra_read_classes
from .choice import CallSpec, DeviceChoice, choose

MAX_PENDING = 256
REUSE = 32                  # repeats of a call that reuse its decision before a new one
SETTLE_EVERY = 8            # finished calls are recorded in batches of about this many

_pending: list[DeviceChoice] = []
_previous: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # skeleton -> runtime
_results: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()    # skeleton -> (ref, guess)
_decisions: dict[tuple, list] = {}      # call key -> [choice, times reused]
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
    _decisions.clear()
    _warm.clear()
    _previous.clear()
    _results.clear()


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


def _decide(skeleton: Any, spec: CallSpec) -> DeviceChoice:
    """:func:`choose`, or the same decision as the last identical call (kernel, size,
    where each input is, whether the result is read, where the previous call ran) for up
    to :data:`REUSE` repeats: the predictions change only with new measurements, and
    making them costs more than a small kernel."""
    runtimes = _rt.auto_runtimes()
    previous = _previous.get(skeleton)
    key = (spec.kernel_key, spec.dataset.get("n"), spec.reads_result, spec.iterations,
           id(runtimes), id(previous),
           tuple((h, id(r)) for h, r in (c.residence for c in spec.containers())))
    hit = _decisions.get(key)
    if hit is not None and hit[1] < REUSE:
        hit[1] += 1
        return hit[0].again()
    choice = choose(spec, runtimes, previous)
    if len(_decisions) > 4096:
        _decisions.clear()
    _decisions[key] = [choice, 0]
    return choice


def place(skeleton: Any, spec: CallSpec) -> DeviceChoice:
    """Choose the runtime for this call and move its inputs there (timed)."""
    if len(_pending) >= SETTLE_EVERY:
        settle()
    choice = _decide(skeleton, spec)
    rt = choice.runtime
    moving = [c for c in spec.containers() if c.residence[1] is not rt]
    if moving:
        t0 = time.perf_counter()
        for c in moving:
            c.device_buffer(rt)
        choice.upload_measured = time.perf_counter() - t0
    warm = (id(rt), spec.measure_key)
    if warm not in _warm:
        # The first call of a kernel on a device also pays for first allocations of its
        # sizes: its transfer time says nothing about the next calls.
        choice.cold = True
        _warm.add(warm)
    _previous[skeleton] = rt
    return choice


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
    :func:`place` it. ``reads_result`` None: learnt from the skeleton's previous result."""
    streamed = [c for c in inputs if isinstance(c, Container)]
    read_by_index = [c for c in extras if isinstance(c, Container)]
    kind = skeleton.kind
    spec = CallSpec(
        skeleton=kind, kernel_key=plan.kernel_key, features=plan.features,
        dataset=dataset, inputs=streamed, out_itemsize=plan.out_dtype.itemsize,
        out_bytes=int(out_bytes),
        reads_result=reads_result_guess(skeleton) if reads_result is None else reads_result,
        extras=read_by_index,
        extra_reads=extra_reads(skeleton, plan, inputs) if kind in ("map", "zip") else None,
        needs_fp64=bool(getattr(plan, "uses_fp64", False)), iterations=iterations)
    return place(skeleton, spec)


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
