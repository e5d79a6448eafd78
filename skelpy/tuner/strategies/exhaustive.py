"""Mode ``exhaustive``: the first call of a scenario measures every legal point (the space's
default first, as the reference every other point's result must equal), stores the
measurements and keeps the fastest; later calls take the ``model`` path, whose store step
finds that point. ``settings.sweep_deadline`` ends a sweep early (``skelpy tune --minutes``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ...errors import RefusedParameters
from .. import measure
from ..request import Outcome
from ..store import params_json
from . import model

if TYPE_CHECKING:
    from ..engine import Call

SAVE_EVERY = 16      # measurements per store write during a sweep


def tune(call: Call) -> Outcome:
    if call.sc.swept:
        return model.tune(call)
    return sweep(call)


def _bar(total: int, label: str, show: bool | None):
    from tqdm.auto import tqdm

    # show=None: only on a terminal, and only for a sweep that lasts more than a second
    return tqdm(total=total, desc=label, unit="point", leave=show is True,
                delay=1.0 if show is None else 0.0, disable=None if show is None else not show)


def sweep(call: Call, budget: measure.Budget | None = None) -> Outcome:
    """Measure every legal, unrefused, not yet measured point of the scenario once."""
    call.load()
    req, sc, settings = call.req, call.sc, call.settings
    space = req.space
    have = call.measured()
    dkey = space.key(space.default)
    points = [p for p in space.legal_points() if space.key(p) not in sc.refused
              and params_json(p) not in have]
    points.sort(key=lambda p: space.key(p) != dkey)        # the default first: the reference
    ref_res, ref_point = None, None
    best_t = min((t for t, _n in have.values()), default=None)
    rows: list = []
    refused: list = []
    deadline = settings.sweep_deadline
    bar = _bar(len(points), f"sweep {req.skeleton} {req.kernel_key[:8]}", settings.progress)
    try:
        for p in points:
            if deadline is not None and ref_res is not None and time.perf_counter() > deadline:
                break
            try:
                m = measure.measure(req.run, dict(p), budget or settings.sweep_budget, best_t)
            except RefusedParameters:
                call.refuse(p)
                refused.append(dict(p))
                bar.update(1)
                continue
            bar.update(1)
            if ref_res is None:
                ref_res, ref_point = measure.as_array(m.result), p
            else:
                measure.check_same(ref_res, m.result, p, ref_point, req.origin)
            rows.append((dict(p), m.seconds, m.n))
            if best_t is None or m.seconds < best_t:
                best_t = m.seconds
            if len(rows) >= SAVE_EVERY:
                call.save_rows(rows)
                rows = []
    finally:
        bar.close()
    call.save_rows(rows)
    sc.swept = True
    choice = call.best_measured()
    if choice is None:
        choice = call.fallback(dict(space.default))
    call.settle(choice, "exhaustive")
    sc.converged = True
    # Run the winner once more: the result is the user's, and whatever the skeleton noted
    # about the launch (sizes) matches the parameters reported.
    out = call.run(choice, "exhaustive")
    out.refused = refused + out.refused
    return out
