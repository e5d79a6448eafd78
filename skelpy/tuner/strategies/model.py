"""Mode ``model`` (the default): the engine's decision path, cheapest first: the in-memory
decision cache, the best measured point of the scenario in the store, the device model's
prediction, the space's default. The decision is cached, and a settled one comes with a
ticket that lets the skeleton's next identical call skip the tuner."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..request import Outcome

if TYPE_CHECKING:
    from ..engine import Call


def tune(call: Call) -> Outcome:
    point, source = call.decide()
    return call.ticket(call.run(point, source))
