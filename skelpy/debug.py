"""Debug mode: every read a muscle makes is bounds-checked, and a read outside its array,
row or stencil shape is a :class:`~skelpy.errors.BoundsError` naming the muscle's file and line,
the read and the offending index, instead of a crash or a silently wrong number.

``with sk.debug(): ...`` turns it on for a block, ``sk.debug(True)`` / ``sk.debug(False)`` for
the process, and ``SKELPY_DEBUG=1`` in the environment from the start. Like ``sk.tuning``, the
mode is the process's (not the thread's). What it costs is paid only while it is on: skeletons
build a *checked* program (another kernel, cached apart from the normal one), pass a small check
buffer to every launch and read it back after each call, and take the tuner's default launch
point without measuring (so that debug runs never enter the tuning store). With debug mode
off, the generated kernels are exactly the normal ones.
"""

from __future__ import annotations

import os

__all__ = ["debug", "enabled"]


class _State:
    """Whether debug mode is on (read on every skeleton call: one attribute)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = os.environ.get("SKELPY_DEBUG", "").strip().lower() in ("1", "true", "yes",
                                                                         "on")


STATE = _State()


def enabled() -> bool:
    """Whether debug mode is on."""
    return STATE.on


class debug:  # noqa: N801 - used like a function: sk.debug()
    """Bounds-checked reads: ``with sk.debug(): ...`` for a block (the previous mode comes back
    after it), ``sk.debug(True)`` or ``sk.debug(False)`` for the process."""

    def __init__(self, on: bool = True):
        self._previous = STATE.on
        STATE.on = bool(on)

    def __enter__(self) -> debug:
        return self

    def __exit__(self, *exc: object) -> None:
        STATE.on = self._previous

    def __repr__(self) -> str:
        return f"skelpy.debug({STATE.on})"
