"""The tuning modes, one module each, all with one signature (as Kernel Tuner's strategies):

    tune(call: engine.Call) -> request.Outcome

``off`` launches the space's default; ``model`` (the default mode) takes the engine's
decision path (cache, store, model, default); ``online`` measures one candidate per call
until it settles; ``exhaustive`` measures every legal point on the first call of a scenario.
A strategy decides, launches through ``call.run`` (which survives refused parameters) and
returns the outcome; it never touches the process state except through ``call``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..request import Outcome
from . import exhaustive, model, off, online

STRATEGIES: dict[str, Callable[..., Outcome]] = {
    "off": off.tune,
    "model": model.tune,
    "online": online.tune,
    "exhaustive": exhaustive.tune,
}

__all__ = ["STRATEGIES"]
