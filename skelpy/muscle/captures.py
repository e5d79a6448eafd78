"""Captured values: what a muscle read from its closure, its globals and modules, and whether
that still holds.

The translator writes captured numbers into the C source and captured sequences into
``__constant`` tables, so a translation is right only while those values are what they were.
Scopes record every name they resolve as a :class:`Capture` (how to read it again, and what it
was); a :class:`~.muscle.Muscle` asks its captures :meth:`Capture.holds` before it is used, and
translates again when one does not. The check is cheap where it runs on every call: reading a
name again is a dictionary look-up or two, the same object is accepted at once unless it is
mutable (a list or an array, whose contents are compared: at most
:data:`~.symbols.MAX_CONST_ARRAY` elements, or the translator would have refused it), and an
equal value in a new object (``G = 2.0`` again) is accepted and remembered.

What counts as equal is what the translation depends on: numbers of the same type and value
(``2`` and ``2.0`` differ: the C type changes; NaN equals NaN), sequences element by element,
arrays by dtype, shape and bytes; anything else (modules, functions, types) by identity.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .source import MISSING


def _content(obj) -> object:
    """What a mutable value holds (None for values whose identity says it all)."""
    if isinstance(obj, np.ndarray):
        return (obj.dtype, obj.shape, obj.tobytes())
    if isinstance(obj, list):
        return tuple(obj)
    return None


def _same_number(a, b) -> bool:
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b) or bool(a != a and b != b)     # NaN is NaN here
    except (TypeError, ValueError):                          # pragma: no cover - defensive
        return False


def same_value(a, b) -> bool:
    """Whether ``b`` translates exactly as ``a`` did."""
    if a is b:
        return True
    if isinstance(a, (bool, int, float, complex, np.generic)):
        return _same_number(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and _content(a) == _content(b)
    if isinstance(a, (tuple, list)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(same_value(x, y) for x, y in zip(a, b)))
    return False


class Capture:
    """One captured value: ``read()`` gives its current value; ``obj`` (and, for a mutable
    one, ``content``) is what the translation saw."""

    __slots__ = ("read", "obj", "content")

    def __init__(self, read: Callable[[], object], obj: object):
        self.read = read
        self.obj = obj
        self.content = _content(obj)

    def holds(self, now: object = MISSING) -> bool:
        """Whether the value (``now``, read when not given) is still what the translation
        saw."""
        if now is MISSING:
            now = self.read()
        if now is self.obj:
            content = self.content
            if content is None:
                return True
            if isinstance(now, np.ndarray):          # the cheap parts first
                return (now.shape == content[1] and now.dtype == content[0]
                        and now.tobytes() == content[2])
            return content == _content(now)
        if self.content is None and same_value(self.obj, now):
            self.obj = now                  # an equal value in a new object: keep it
            return True
        if self.content is not None and type(now) is type(self.obj) \
                and _content(now) == self.content:
            self.obj = now
            return True
        return False
