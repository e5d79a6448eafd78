"""The check buffer of a call whose kernel checks its reads (debug mode, and stencil offsets
that are not compile-time constants; see ``muscle/checks.py``).

A checked kernel takes the buffer as its last argument (the skeletons append
:data:`DEBUG_PARAM` to their generated parameter list); the first read out of range records
where and what in it and reads inside the range instead. After the call's launches the
skeleton reads the buffer back once (a blocking read of a few bytes) and raises
:class:`~skelpy.errors.BoundsError` with the muscle's line, the read and the offending index.
Unchecked kernels have neither the parameter nor the read.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from ..errors import BoundsError
from ..muscle.checks import CHECK_WORDS, DEBUG_PARAM, site

__all__ = ["DEBUG_PARAM", "CheckBuffer", "check_buffer"]


class CheckBuffer:
    """One call's check buffer: zeroed on the device at creation, read back by
    :meth:`raise_if_failed`."""

    __slots__ = ("rt", "buffer", "host")

    def __init__(self, rt: _rt.Runtime):
        self.rt = rt
        nbytes = CHECK_WORDS * 8
        self.buffer = rt.allocate(nbytes, "the check buffer")
        cl.enqueue_fill_buffer(rt.queue, self.buffer, np.int64(0), 0, nbytes)
        self.host = np.zeros(CHECK_WORDS, np.int64)

    def raise_if_failed(self, origin: str) -> None:
        """Raise BoundsError when a read of the call's kernels was out of range."""
        cl.enqueue_copy(self.rt.queue, self.host, self.buffer, is_blocking=True)
        flag, number, value, lo, hi = (int(v) for v in self.host[:5])
        if not flag:
            return
        where = site(number)
        if where is None:               # pragma: no cover - every site is registered
            text = f"a read at index {value} outside {lo}..{hi - 1} (site {number})"
        else:
            text = where.describe(value, lo, hi)
        raise BoundsError(f"{origin}: {text}")


def check_buffer(plan, rt: _rt.Runtime) -> CheckBuffer | None:
    """A fresh check buffer when ``plan``'s kernel checks its reads, else None."""
    return CheckBuffer(rt) if plan.checked else None

