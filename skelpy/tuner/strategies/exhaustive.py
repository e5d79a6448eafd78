"""Mode ``exhaustive``: the first call of a scenario sweeps its legal points
(``sweep.sweep``: the default first, then the untuned choice, the model's shortlist and the
rest in the model's predicted order), stores the measurements and keeps the point
``sweep.keep`` confirms, which is never slower than the untuned choice beyond a noise margin;
later calls take the ``model`` path, whose store step finds it.
``settings.sweep_deadline`` ends a sweep early (``skelpy tune --minutes``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import sweep as _sweep
from ..request import Outcome
from . import model

if TYPE_CHECKING:
    from ..engine import Call


def tune(call: Call) -> Outcome:
    if call.sc.swept:
        return model.tune(call)
    res = _sweep.sweep(call, deadline=call.settings.sweep_deadline)
    call.sc.swept = True
    choice = _sweep.keep(call)
    point = choice.point if choice is not None else call.fallback(dict(call.space.default))
    call.settle(point, "exhaustive")
    call.sc.converged = True
    # Run the winner once more: the result is the user's, and whatever the skeleton noted
    # about the launch (sizes) matches the parameters reported.
    out = call.run(point, "exhaustive")
    out.refused = res.refused + out.refused
    return out
