"""The tuning mode: ``off``, ``model`` (the default), ``online`` or ``exhaustive``.

Set for the process with :func:`set_mode` or ``sk.tuning("online")``, for a block with
``with sk.tuning("off"): ...``, or through ``$SKELPY_TUNE``.
"""

from __future__ import annotations

import os
import warnings

from ..errors import ParameterError
from .state import MODES, STATE


def get_mode() -> str:
    """The current mode: set by :func:`tuning`/:func:`set_mode`, else ``$SKELPY_TUNE``,
    else ``model``."""
    m = STATE.mode
    if m is not None:
        return m
    env = os.environ.get("SKELPY_TUNE")
    if not env:
        return "model"
    env = env.strip().lower()
    if env in MODES:
        return env
    if env not in STATE.bad_env_warned:
        STATE.bad_env_warned.add(env)
        warnings.warn(f"SKELPY_TUNE={env!r} is not one of {', '.join(MODES)}; using 'model'",
                      RuntimeWarning, stacklevel=3)
    return "model"


def set_mode(mode: str | None) -> None:
    """Set the mode for the whole process (None: back to ``$SKELPY_TUNE``/``model``)."""
    if mode is not None:
        mode = str(mode).strip().lower()
        if mode not in MODES:
            raise ParameterError(f"tuning mode {mode!r} is not one of {', '.join(MODES)}")
    STATE.mode = mode


class tuning:  # noqa: N801 - used like a function: sk.tuning("off")
    """Set the tuning mode: ``sk.tuning("online")`` sets it for the process;
    ``with sk.tuning("off"): ...`` sets it for the block and restores the previous one."""

    def __init__(self, mode: str | None):
        self._previous = STATE.mode
        set_mode(mode)
        self.mode = get_mode()

    def __enter__(self) -> tuning:
        return self

    def __exit__(self, *exc: object) -> None:
        STATE.mode = self._previous

    def __repr__(self) -> str:
        return f"skelpy.tuning({self.mode!r})"
