"""Checked reads: what a muscle translated with checks reads through ``skp_check``.

A skeleton asks for a checked specialisation in two cases: debug mode (``sk.debug()``: every
array, row and neighbourhood read, and computed indices into captured tables — level
:data:`ALL`) and stencils whose offsets are not compile-time constants (only those neighbourhood
reads — level :data:`OFFSETS`, in every mode). A checked function takes a first parameter
``__global long* skp_dbg`` (the skeleton's check buffer) and is followed by a macro that passes
it on, ``#define f(...) f(skp_dbg, __VA_ARGS__)``, so that callers written for the unchecked
function (the skeletons' kernels, translated callers) compile unchanged wherever ``skp_dbg`` is
in scope. Unchecked specialisations are exactly what they were: normal-mode kernels do not
change.

Each checked index gets a *site*: a number that names the read (file, line, expression and
which index) in :data:`_SITES`. Sites are hashes of what they describe, so that a program's text
is the same in every process (and pyopencl's binary cache keeps working); the host turns the
site a kernel recorded back into a message with :func:`site`.

The buffer (``CHECK_WORDS`` longs): word 0 is a flag set by the first failing read (an atomic
compare-and-swap: the first failure wins), words 1-4 its site, index and the valid range
``[lo, hi)``. The failing read reads inside the range instead, so a kernel never touches memory
outside what it may read.
"""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass

#: Levels of :meth:`~skelpy.muscle.Muscle.specialise`'s ``checks``.
ALL = "all"
OFFSETS = "offsets"
LEVELS = (None, OFFSETS, ALL)

#: The check buffer's size in longs, and its first parameter's declaration in a checked function.
CHECK_WORDS = 8
DEBUG_PARAM = "__global long* skp_dbg"


@dataclass(frozen=True)
class Site:
    """One checked index of one read: where it is written, the read's source text, which index
    of it (``"index"``, ``"row index"``, ``"column offset"``...), and what it reads (``"the
    neighbourhood"``, ``"extra argument 't'"``...)."""

    where: str
    expression: str
    index: str
    reads: str
    offsets: bool = False           # the range is a stencil shape, not an array's extent

    def describe(self, value: int, lo: int, hi: int) -> str:
        """The message of a failed check with the recorded index and range."""
        if self.offsets:
            span = f"{lo}..{hi - 1}" if hi > lo else "empty"
            return (f"{self.where}: {self.index} {value} of `{self.expression}` is outside the "
                    f"stencil shape ({span}: north/south = negative/positive row offsets, "
                    f"west/east = negative/positive column offsets); widen shape= to read "
                    "that far")
        if hi <= lo:
            where = f"{self.reads}, which is empty" if lo == 0 else f"an empty range {lo}..{hi}"
        elif lo == 0:
            where = f"{self.reads} with valid indices 0..{hi - 1}"
        else:
            where = f"{self.reads} with valid indices {lo}..{hi - 1}"
        return f"{self.where}: {self.index} {value} of `{self.expression}` is out of range for " \
               f"{where}"


_SITES: dict[int, Site] = {}
_LOCK = threading.Lock()


def register(site: Site) -> int:
    """The number of ``site`` (stable across processes; 1 ... 2**31 - 1)."""
    text = "\x1f".join((site.where, site.expression, site.index, site.reads,
                        str(site.offsets)))
    number = zlib.crc32(text.encode("utf-8", "surrogatepass")) & 0x7FFFFFFF or 1
    with _LOCK:
        while _SITES.get(number, site) != site:    # a collision: take the next free number
            number = number % 0x7FFFFFFF + 1
        _SITES[number] = site
    return number


def site(number: int) -> Site | None:
    """The site a kernel recorded, or None when this process never registered it."""
    return _SITES.get(int(number))


def check_call(index: str, lo: str, hi: str, site: int | str) -> str:
    """C for ``index`` checked against ``[lo, hi)`` at ``site`` (a number, or C code)."""
    if isinstance(site, int):
        site = f"{site}L"
    return f"skp_check(skp_dbg, {index}, {lo}, {hi}, {site})"


def redirect(c_name: str, n_params: int) -> str:
    """The macro after a checked function that passes the check buffer on: callers of
    ``c_name(...)`` then call ``c_name(skp_dbg, ...)``. (A function-like macro is not expanded
    again inside its own expansion, so the name can stay.)"""
    if n_params == 0:
        return f"#define {c_name}() {c_name}(skp_dbg)\n"
    return f"#define {c_name}(...) {c_name}(skp_dbg, __VA_ARGS__)\n"
