"""Mode ``off``: always the space's default (or the nearest legal point when the default is
refused or illegal here); nothing is remembered, measured or predicted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..request import Outcome

if TYPE_CHECKING:
    from ..engine import Call


def tune(call: Call) -> Outcome:
    call.load()
    point, source = call.unrefused(call.default(), "off")
    return call.run(point, source, remember=False)
