"""What a successful build's compiler log says, as a :class:`~skelpy.errors.BuildWarning`.

pyopencl reports a non-empty log of a successful build only as "non-empty compiler output"
(and PoCL prints a bare "2 warnings generated" to stderr); a warning about generated code is
useless without the code. :func:`build_warning` turns the log into a warning whose text is the
log and the numbered source, as a BuildError's is: when the log has warnings, and in debug
mode when it says anything. Notes that a compiler could not follow one of skelpy's own
``#pragma unroll`` hints are left out: they are about performance, not about the program; so
are notes on the generated code's style: "self-comparison always evaluates to ..." (``x != x``
is Python's NaN test, and a muscle written for every dtype, the array style's argmin or a
user's ``x == x``, compiles it for integers too, where the constant answer is the right one)
and "equality comparison with extraneous parentheses" (``if ((i == 2L))``: every comparison is
emitted in parentheses); and NVIDIA's "Function skelpy_... is a kernel, so overriding noinline
attribute", which its compiler says of every kernel in some builds (seen on an H100).
"""

from __future__ import annotations

import re

import pyopencl as cl

from .debug import STATE as DEBUG
from .errors import BuildWarning, build_report

_UNROLL_NOTE = re.compile(r"loop not unrolled", re.IGNORECASE)
_STYLE_NOTES = re.compile(r"self-comparison always evaluates to|"
                          r"equality comparison with extraneous parentheses|"
                          r"is a kernel, so overriding noinline attribute", re.IGNORECASE)


def build_warning(program: cl.Program, device, source: str, options: str,
                  origin: str = "") -> BuildWarning | None:
    """The warning to show for ``program`` built from ``source`` for ``device`` (a
    skelpy Device), or None when its log has nothing worth showing."""
    try:
        log = program.get_build_info(device.cl_device, cl.program_build_info.LOG)
    except cl.Error:
        return None
    lines = [ln for ln in str(log).splitlines()
             if ln.strip() and not _UNROLL_NOTE.search(ln) and not _STYLE_NOTES.search(ln)]
    warned = [ln for ln in lines if "warning" in ln.lower()]
    if not warned and not (lines and DEBUG.on):
        return None
    where = f"{origin}: " if origin else ""
    what = f"{len(warned)} warning(s)" if warned else "a build log"
    return BuildWarning(build_report(
        f"{where}the OpenCL compiler for {device.name} accepted the generated kernel with "
        f"{what}", source, "\n".join(lines), options))
