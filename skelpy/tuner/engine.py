"""The tuner's decision path: every skeleton launch goes through :func:`execute`.

:func:`execute` finds the call's *scenario* (device, kernel, data size bucketed by log2),
hands a :class:`Call` to the strategy of the current mode (``strategies/``), and returns its
:class:`~skelpy.tuner.request.Outcome`. A :class:`Call` is all a strategy needs: the decision
path, cheapest first (forced ``params=`` -> in-memory decision cache -> best measured point
of the scenario in the store -> model prediction -> the space's default), a launch that
survives parameters the OpenCL runtime refuses (recorded, never tried again, and retried at
once with the nearest legal point: the fallback [Cummins 2018] §5.5.1 found best; see
docs/references.md), and the store's measurements of the scenario.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import numbers
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import ParameterError, RefusedParameters, SkelpyError
from . import model as _model
from . import store as _store
from .features import scenario_features, space_limits
from .model_manager import ModelManager
from .modes import get_mode
from .request import Outcome, Ticket, TuningRequest
from .space import ParamSpace, Point
from .state import STATE, Scenario
from .strategies import STRATEGIES

# -- scenarios -----------------------------------------------------------------------------------


def _bucket(v: Any) -> Any:
    """Sizes by rounded log2 (512 and 600 share a scenario; 512 and 1024 do not)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return v if isinstance(v, (str, bool, type(None))) else str(v)
    v = float(v)
    if not math.isfinite(v):
        return str(v)
    if v >= 1:
        return int(round(math.log2(v)))
    return round(v, 3)


def scenario_key(req: TuningRequest) -> tuple:
    """The in-memory scenario identity: device, kernel, and the bucketed data size."""
    ds = req.dataset
    return (req.device.key, req.kernel_key,
            tuple(sorted((k, _bucket(v)) for k, v in ds.items())))


def _store_key(mkey: tuple) -> str:
    return hashlib.sha1(repr(mkey).encode()).hexdigest()[:24]


def scenario_id(req: TuningRequest) -> str:
    """The scenario's key in the store."""
    return _store_key(scenario_key(req))


def reset() -> None:
    """Forget every in-memory decision, refusal and model (the store is kept)."""
    STATE.reset()


_store.on_store_change(reset)


def manager() -> ModelManager:
    """The model manager of the current store."""
    store = _store.get_store()
    m = STATE.manager
    if m is None or m.store is not store:
        m = STATE.manager = ModelManager(store)
    return m


def scenario(req: TuningRequest) -> Scenario:
    """The in-memory state of this call's scenario (created on first use)."""
    if _store.store_changed():
        _store.get_store()                 # re-opens and resets the in-memory state
    raw = (req.device.key, req.kernel_key, tuple(req.dataset.items()))
    by_raw = STATE.by_raw
    sc = by_raw.get(raw)
    if sc is not None:
        return sc
    mkey = scenario_key(req)
    sc = STATE.scenarios.get(mkey)
    if sc is None:
        with STATE.lock:
            sc = STATE.scenarios.get(mkey)
            if sc is None:
                sc = STATE.scenarios[mkey] = Scenario(mkey, _store_key(mkey))
    if len(by_raw) > 4096:
        by_raw.clear()
    by_raw[raw] = sc
    return sc


def forget_space(space: ParamSpace) -> None:
    """Drop what the tuner derived from ``space`` (its description and model candidates),
    so that the next decision pays for them again (decision-time measurements)."""
    STATE.spaces.pop(space, None)


@contextlib.contextmanager
def sweep_deadline(deadline: float | None) -> Iterator[None]:
    """Within the block, exhaustive sweeps stop measuring new points after ``deadline``
    (a ``time.perf_counter()`` value); ``skelpy tune --minutes`` uses it."""
    s = STATE.settings
    prev, s.sweep_deadline = s.sweep_deadline, deadline
    try:
        yield
    finally:
        s.sweep_deadline = prev


def ticket_valid(t: Ticket) -> bool:
    """Cheap re-check of everything the decision cache's hit depends on."""
    sc = t.scenario
    if sc.decision is not t.point or _store.current_store() is not t.store \
            or _store.store_changed():
        return False
    if get_mode() != t.mode:
        return False
    g = sc.generation
    mgr = STATE.manager
    return g < 0 or (mgr is not None and g == mgr.generation)


def _store_problem(exc: BaseException) -> None:
    warnings.warn(f"skelpy: tuning store error ignored: {exc}", RuntimeWarning, stacklevel=3)


class SpaceInfo:
    """Per-space data the tuner derives once: its description and model candidates."""

    def __init__(self, space: ParamSpace):
        self.desc = space.describe()
        self.legal = space.legal_points()
        self.desc["limits"] = space_limits(self.legal)
        self.numeric = {p.name: p.numeric for p in space.params}
        self.sig = _model.signature(space.names)
        self.names = space.names
        self._cand: _model.CandidateSet | None = None
        self.compat: dict[str, _model.CandidateSet] = {}   # see Call.model_view

    @property
    def candidates(self) -> _model.CandidateSet:
        if self._cand is None:
            self._cand = _model.CandidateSet(self.legal, self.names, self.numeric)
        return self._cand


def space_info(space: ParamSpace) -> SpaceInfo:
    info = STATE.spaces.get(space)
    if info is None:
        info = STATE.spaces[space] = SpaceInfo(space)
    return info


def _norm(space: ParamSpace, p: Mapping) -> Point:
    return {n: p[n] for n in space.names}


def _legal_point(space: ParamSpace, p: dict) -> bool:
    try:
        space.normalise(p)
        return set(p) == set(space.names)
    except ParameterError:
        return False


# -- one call ------------------------------------------------------------------------------------


class Call:
    """One call of a skeleton in one scenario: what every strategy works with."""

    __slots__ = ("req", "sc", "mode")

    def __init__(self, req: TuningRequest, sc: Scenario, mode: str):
        self.req, self.sc, self.mode = req, sc, mode

    @property
    def settings(self):
        return STATE.settings

    @property
    def space(self) -> ParamSpace:
        return self.req.space

    # -- what the store knows --------------------------------------------------------------
    def load(self) -> None:
        """First use of the scenario in this process: read its refusals from the store."""
        sc = self.sc
        if sc.loaded:
            return
        sc.loaded = True
        try:
            for p in _store.get_store().refusals(sc.key):
                with contextlib.suppress(KeyError):
                    sc.refused.add(self.req.space.key(p))
        except Exception as exc:  # noqa: BLE001 - the store must never break a call
            _store_problem(exc)

    def record(self) -> _store.ScenarioRecord:
        sc, req = self.sc, self.req
        if sc.record is None:
            info = space_info(req.space)
            sc.record = _store.ScenarioRecord(
                key=sc.key, device=req.device.key, device_features=dict(req.device.features),
                kernel=req.kernel_key, skeleton=req.skeleton,
                kernel_features=dict(req.features), dataset=dict(req.dataset),
                space=info.desc)
        return sc.record

    def features(self) -> dict[str, float]:
        sc, req = self.sc, self.req
        if sc.feats is None:
            sc.feats = scenario_features(req.skeleton, req.device.features, req.features,
                                         req.dataset, space_info(req.space).desc)
        return sc.feats

    def measured(self) -> dict[str, tuple[float, int]]:
        """The scenario's measurements: canonical params JSON -> (seconds, samples)."""
        try:
            return _store.get_store().measurements(self.sc.key)
        except Exception as exc:  # noqa: BLE001
            _store_problem(exc)
            return {}

    def save_rows(self, rows: list) -> None:
        """Store (params, seconds, samples) rows of this scenario; counts toward retraining."""
        if not rows:
            return
        try:
            _store.get_store().record_measurements(self.record(), rows)
            manager().note_measurements(self.req.device.key, len(rows))
        except Exception as exc:  # noqa: BLE001
            _store_problem(exc)

    # -- deciding ----------------------------------------------------------------------------
    def default(self) -> Point:
        """The request's (or else the space's) default, or the nearest legal point when it is
        not legal here."""
        d = dict(self.req.default if self.req.default is not None else self.req.space.default)
        if self.req.space.is_legal(d):
            return d
        return self.fallback(d)

    def fallback(self, params: Point) -> Point:
        """The nearest legal point that was not refused."""
        nxt = self.req.space.nearest(params, exclude=self.sc.refused)
        if nxt is None:
            req = self.req
            raise SkelpyError(f"{req.origin}: every launch parameter of {req.skeleton} was "
                              f"refused by {req.device.name}")
        return nxt

    def unrefused(self, point: Point, source: str) -> tuple[Point, str]:
        if self.req.space.key(point) in self.sc.refused:
            return self.fallback(point), source + "+fallback"
        return point, source

    def decide(self) -> tuple[Point, str]:
        """cache -> store's best -> model -> default, remembered in the decision cache."""
        sc, space = self.sc, self.req.space
        d = sc.decision
        if d is not None:
            mgr = STATE.manager
            if sc.generation < 0 or mgr is None or sc.generation == mgr.generation:
                return d, "cache"
        self.load()
        point, source = None, ""
        try:
            best = _store.get_store().best(sc.key)
        except Exception as exc:  # noqa: BLE001
            _store_problem(exc)
            best = None
        if best is not None:
            p = best[0]
            if space.index(p) is not None or _legal_point(space, p):
                point, source = _norm(space, p), "store"
        generation = -1
        if point is None:
            mgr = manager()
            generation = mgr.generation
            point = self.predict(mgr)
            source = "model" if point is not None else ""
        if point is None:
            point, source = self.default(), "default"
        point, source = self.unrefused(point, source)
        sc.decision, sc.source = point, source
        sc.generation = generation if source.startswith(("model", "default")) else -1
        return point, source

    def settle(self, point: Point, source: str) -> None:
        """Make ``point`` the scenario's decision (measured: no model generation)."""
        self.sc.decision, self.sc.source, self.sc.generation = point, source, -1

    # -- the model ---------------------------------------------------------------------------
    def model_view(self, mgr: ModelManager):
        """(group model, candidate set, parameters the model does not know with their fixed
        values) for this scenario, or None without a usable model.

        A model trained on a space that lacked some of today's parameters (an older kernel,
        or the PoCL model shipped with the package, which predates the stencil's ``vec``)
        still predicts: among the points where the parameters it never saw keep their
        default value, which is the kernel its training data measured."""
        req = self.req
        if not req.model_known:
            return None
        try:
            dm = mgr.get(req.device.key)
        except Exception:  # noqa: BLE001
            return None
        if dm is None:
            return None
        info = space_info(req.space)
        kind = _model.device_kind(req.device.features)
        gm = _model.group_for(dm.groups, info.sig, kind)
        if gm is not None:
            return gm, info.candidates, {}
        names = set(info.names)
        for g in dm.groups.values():
            sig = g.sig
            known = sig.split(",")
            if not set(known) < names or (g.kinds and kind not in g.kinds):
                continue
            fixed = {n: req.space.default[n] for n in info.names if n not in known}
            cand = info.compat.get(sig)
            if cand is None:
                pts = [{n: p[n] for n in known} for p in info.legal
                       if all(p[n] == v for n, v in fixed.items())]
                cand = info.compat[sig] = _model.CandidateSet(pts, known, {
                    n: info.numeric[n] for n in known})
            if cand.points:
                return g, cand, fixed
        return None

    def _refused_in(self, cand: _model.CandidateSet, fixed: dict) -> set[int]:
        if not fixed:
            return cand.indices(self.sc.refused)
        keys = []
        for k in self.sc.refused:
            p = self.req.space.from_key(k)
            if all(p[n] == v for n, v in fixed.items()):
                keys.append(tuple(p[n] for n in cand.names))
        return cand.indices(keys)

    def _full_point(self, p: Mapping, fixed: dict) -> Point:
        return {n: (p[n] if n in p else fixed[n]) for n in self.req.space.names}

    def predict(self, mgr: ModelManager, approach: str | None = None,
                coarsen: str | None = None) -> Point | None:
        """The model's point for this scenario, or None without a usable model."""
        view = self.model_view(mgr)
        if view is None:
            return None
        gm, cand, fixed = view
        refused = self._refused_in(cand, fixed)
        d_approach, d_coarsen = _model.default_method(self.req.device.features)
        d = self.default()
        pick = _model.choose(gm, self.features(), cand, refused,
                             approach=approach or d_approach, coarsen=coarsen or d_coarsen,
                             default=cand.index_of({n: d[n] for n in cand.names})
                             if all(d[n] == v for n, v in fixed.items()) else None)
        if pick is None:
            return None
        if isinstance(pick, int):
            return self._full_point(cand.points[pick], fixed)
        try:
            return self.req.space.nearest({**pick, **fixed}, exclude=self.sc.refused)
        except (KeyError, TypeError, ValueError):
            return None

    def untuned(self) -> tuple[Point, str]:
        """What this call would run without measuring anything: the model's pick when a model
        exists, else the space's default (what ``off`` mode runs)."""
        try:
            p = self.predict(manager())
        except Exception:  # noqa: BLE001 - a model problem must never break a call
            p = None
        if p is not None:
            return p, "model"
        return self.default(), "default"

    def ranking(self) -> list[Point]:
        """Every legal point the model can score, best predicted first (empty without a
        model): the order a sweep measures in."""
        view = self.model_view(manager())
        if view is None:
            return []
        gm, cand, fixed = view
        approach = _model.default_method(self.req.device.features)[0]
        if approach == "classifier":
            approach = _model.DEFAULT_APPROACH
        try:
            idx = _model.rank(gm, self.features(), cand, self._refused_in(cand, fixed),
                              approach=approach)
        except Exception:  # noqa: BLE001
            return []
        return [self._full_point(cand.points[i], fixed) for i in idx]

    def parse_point(self, pj: str) -> Point | None:
        """A stored params JSON as a point of this space (None if it is not one)."""
        p = json.loads(pj)
        try:
            if self.req.space.index(p) is None:
                return None
        except KeyError:
            return None
        return _norm(self.req.space, p)

    def shortlist(self, k: int) -> list[Point]:
        """The model's ``k`` most promising points, best first (what online mode measures)."""
        view = self.model_view(manager())
        if view is None:
            return []
        gm, cand, fixed = view
        approach = _model.default_method(self.req.device.features)[0]
        if approach == "classifier":
            approach = _model.DEFAULT_APPROACH
        try:
            idx = _model.shortlist(gm, self.features(), cand, self._refused_in(cand, fixed),
                                   k, approach=approach)
        except Exception:  # noqa: BLE001 - a model problem must never break a call
            return []
        return [self._full_point(cand.points[i], fixed) for i in idx]

    # -- running -----------------------------------------------------------------------------
    def refuse(self, params: Point) -> None:
        """Remember a refused point in memory and in the store: it is never tried again."""
        self.sc.refused.add(self.req.space.key(params))
        try:
            _store.get_store().record_refusal(self.record(), params)
        except Exception as exc:  # noqa: BLE001
            _store_problem(exc)

    def run(self, params: Point, source: str, *, remember: bool = True) -> Outcome:
        """Launch; on refusal record it and retry at once with the nearest legal point."""
        run = self.req.run
        assert run is not None
        tried: list = []
        while True:
            try:
                result, events = run(params)
            except RefusedParameters:
                self.refuse(params)
                tried.append(dict(params))
                params = self.fallback(params)
                source = source.split("+")[0] + "+fallback"
                continue
            if tried and remember:
                self.sc.decision = params      # the next call goes straight to the fallback
            return Outcome(result, params, events, tried, source)

    def ticket(self, out: Outcome) -> Outcome:
        """Attach a ticket when ``out`` used the scenario's settled decision."""
        if self.sc.decision is out.params and not out.refused:
            out.ticket = Ticket(self.sc, out.params, self.mode, _store.current_store())
        return out


# -- the entry points ----------------------------------------------------------------------------


@contextlib.contextmanager
def capture_requests() -> Iterator[list[TuningRequest]]:
    """Within the block, every skeleton call records its tuning requests in the list this
    yields and runs its space's default (``off``), so that the caller can sweep them
    itself (``skelpy tune``, the evaluations)."""
    got: list[TuningRequest] = []
    prev, STATE.capturing = STATE.capturing, got
    try:
        yield got
    finally:
        STATE.capturing = prev


def execute(req: TuningRequest) -> Outcome:
    """Decide, run, and on refusal fall back to the nearest legal point not yet refused."""
    assert req.run is not None
    mode = get_mode()
    if STATE.capturing is not None and not req.forced:
        STATE.capturing.append(req)
        mode = "off"
    call = Call(req, scenario(req), mode)
    if req.forced:
        point = req.space.normalise(req.forced)
        call.load()
        return call.run(*call.unrefused(point, "forced"), remember=False)
    return STRATEGIES[mode](call)


def new_call(req: TuningRequest, mode: str | None = None) -> Call:
    """The :class:`Call` of a captured request (what ``sweep`` works on)."""
    return Call(req, scenario(req), mode or get_mode())


def choose_params(req: TuningRequest) -> tuple[Point, str]:
    """Pick the launch parameters for this call and say where they came from (no launch)."""
    if req.forced:
        return req.space.normalise(req.forced), "forced"
    mode = get_mode()
    call = Call(req, scenario(req), mode)
    if mode == "off":
        call.load()
        return call.unrefused(call.default(), "off")
    return call.decide()


def refused_points(req: TuningRequest) -> set[tuple]:
    """The refused points (space keys) of this call's scenario, as this process knows them."""
    call = Call(req, scenario(req), get_mode())
    call.load()
    return call.sc.refused
