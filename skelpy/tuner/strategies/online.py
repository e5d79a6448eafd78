"""Mode ``online`` ([Cummins 2018] Alg. 4 as a guide; see docs/references.md): each call
measures one candidate not measured yet and returns its (checked) result: the space's
default first, then the model's shortlist (on the PoCL evaluation, measuring the best 8 of it
reached 95% of the oracle where the model's single pick reached 82%), then neighbours of the
best point so far, until none is left or ``settings.online_candidates`` calls were spent.
The scenario then settles on the point ``sweep.keep`` confirms (its best measured ones and the
untuned choice re-measured interleaved: never slower than the untuned choice beyond a noise
margin) and takes the ``model`` path."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...errors import RefusedParameters
from .. import measure
from .. import sweep as _sweep
from ..request import Outcome
from ..space import Point
from . import model

if TYPE_CHECKING:
    from ..engine import Call


def tune(call: Call) -> Outcome:
    if call.sc.converged:
        return model.tune(call)
    call.load()
    sc, space = call.sc, call.req.space
    times = {}
    for pj, (t, _n) in call.measured().items():
        try:
            k = space.key(json.loads(pj))
        except KeyError:
            continue
        if k not in sc.refused:
            times[k] = t
    default = dict(space.default)
    cand = _next_candidate(call, times, default)
    if cand is None:
        sc.converged = True
        choice = _sweep.keep(call)
        if choice is None:
            sc.decision = None
            point, source = call.decide()
        else:
            call.settle(choice.point, "online")
            point, source = choice.point, "online"
        return call.run(point, source)
    sc.online_tries += 1
    return _measure_candidate(call, cand, default)


def _next_candidate(call: Call, times: dict, default: Point) -> Point | None:
    sc, space, settings = call.sc, call.req.space, call.settings
    dkey = space.key(default)
    if dkey not in times and dkey not in sc.refused:
        return default
    if sc.online_tries >= settings.online_candidates:
        return None
    for sugg in call.shortlist(settings.online_shortlist):
        k = space.key(sugg)
        if k not in times and k not in sc.refused:
            return sugg
    if times:
        best_k = min(times, key=times.__getitem__)
        for nb in space.neighbours(space.from_key(best_k)):
            k = space.key(nb)
            if k not in times and k not in sc.refused:
                return nb
    return None


def _measure_candidate(call: Call, cand: Point, default: Point) -> Outcome:
    space, run = call.req.space, call.req.run
    assert run is not None
    rows: list = []
    ref = None
    if space.key(cand) != space.key(default) and space.key(default) not in call.sc.refused:
        # the default on the same inputs: the reference the candidate must equal (and a
        # paired timing); run first, so the user's call ends with the candidate's launch
        try:
            ref_res, _ev, ref_secs = measure.run_seconds(run, default)
            ref = measure.as_array(ref_res)
            rows.append((default, ref_secs, 1))
        except RefusedParameters:
            call.refuse(default)
    try:
        result, events, secs = measure.run_seconds(run, cand)
    except RefusedParameters:
        call.refuse(cand)
        call.save_rows(rows)
        out = call.run(call.fallback(cand), "online+fallback", remember=False)
        out.refused.insert(0, dict(cand))
        return out
    if ref is not None:
        measure.check_same(ref, result, cand, default, call.req.origin)
    rows.append((dict(cand), secs, 1))
    call.save_rows(rows)
    return Outcome(result, cand, events, [], "online")
