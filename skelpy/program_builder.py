"""Building OpenCL programs and their kernel objects for one device, each once.

A :class:`ProgramBuilder` (one per runtime) caches programs in memory by (source, options) in
a :class:`~skelpy.programs.ProgramCache`, an LRU bounded by count and bytes whose entries also
go when the last plan that used them is dropped; beneath that, pyopencl caches binaries on
disk. A program is compiled once however many threads ask for it at once; the compiler's
warnings of a successful build come out once, as a :class:`~skelpy.errors.BuildWarning`.
Kernel objects are created once per program and name because looking them up on every launch
is slow (pyopencl#830). Kept apart from :mod:`skelpy.runtime`, which owns the context and the
queue and launches what is built here.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Sequence

import pyopencl as cl

from .build_log import build_warning
from .device import Device
from .errors import BuildError
from .programs import ProgramCache
from .runtime_records import TransferStats

# The build option that lets oclgrind run skelpy's kernels (see ProgramBuilder.__init__).
_NO_RESTRICT = "-Drestrict="
# ... and tells device code it runs there (what oclgrind cannot run has another form)
_SIMULATOR = "-DSKP_SIMULATOR=1"


class _QuietBuilds:
    """``warnings.catch_warnings`` (ignore) around builds that may overlap in threads: it
    changes process-wide state and must not overlap itself, so the first build to start
    enters one scope and the last to finish leaves it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._scope: warnings.catch_warnings | None = None

    def __enter__(self) -> None:
        with self._lock:
            if self._count == 0:
                self._scope = warnings.catch_warnings()
                self._scope.__enter__()
                warnings.simplefilter("ignore")
            self._count += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._count -= 1
            if self._count == 0 and self._scope is not None:
                self._scope.__exit__(None, None, None)
                self._scope = None


class ProgramBuilder:
    """The programs and kernel objects of one device in ``context``: built on first use,
    then cached (``programs``, a :class:`~skelpy.programs.ProgramCache`). ``build_for``
    names the devices to build for (a group's context spans several: only this one);
    ``stats`` counts the builds."""

    def __init__(self, device: Device, context: cl.Context, stats: TransferStats,
                 build_for: list[cl.Device] | None = None):
        self.device = device
        self.context = context
        self.stats = stats
        self._build_for = build_for
        self.programs = ProgramCache()
        self._warned_sources: set[str] = set()
        # oclgrind cannot run kernels whose inlined functions take restrict pointers (clang
        # marks them with llvm.experimental.noalias.scope.decl, which it does not know)
        self._simulator = "oclgrind" in device.platform.lower()
        # PoCL builds a program's device binary only when asked for it: asking for its size
        # (for the cache's byte bound) cost a second compile there, so its size is estimated
        self._estimate_binary = "portable computing language" in device.platform.lower()
        # program -> {kernel name: kernel}; an entry goes with its program
        self._kernels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        # one lock per program being built (see build); the warnings filter of overlapping
        # builds is set once for all of them (_QuietBuilds)
        self._building: dict[tuple[str, str], threading.Lock] = {}
        self._quiet = _QuietBuilds()

    def build(self, source: str, options: Sequence[str] = (), *, origin: str = "",
              owner: object | None = None) -> cl.Program:
        """The program for (source, options), from the cache or built now. ``origin`` (the
        skeleton and its muscle's file and line) starts any BuildError's message; ``owner``
        (a plan) keeps the entry while it lives (see :class:`ProgramCache`)."""
        if self._simulator:
            options = (*options, _NO_RESTRICT, _SIMULATOR)
        opts = " ".join(options)
        key = (source, opts)
        prg = self.programs.get(key, owner)
        if prg is not None:
            return prg
        # One build per program: a second thread asking for the same one waits for it and
        # finds it cached (its lock goes only once the program is in the cache); different
        # programs build at once (a sweep builds a chunk of points ahead, in threads on a GPU).
        with self._lock:
            lock = self._building.setdefault(key, threading.Lock())
        with lock:
            try:
                prg = self.programs.get(key, owner)
                if prg is not None:
                    return prg
                with self._lock:
                    self.stats.builds += 1
                try:
                    with self._quiet:              # pyopencl's "build succeeded with log"
                        prg = cl.Program(self.context, source).build(
                            options=list(options), devices=self._build_for)
                except cl.Error as exc:
                    where = f"{origin}: " if origin else ""
                    raise BuildError(f"{where}the OpenCL compiler for {self.device.name} "
                                     "rejected the generated kernel", source=source,
                                     log=str(exc), options=opts) from None
                binary = (estimated_binary_bytes(source) if self._estimate_binary
                          else _binary_bytes(prg))
                self.programs.put(key, prg, len(source) + binary, owner)
            finally:
                with self._lock:
                    self._building.pop(key, None)
        self._warn_build_log(prg, source, opts, origin)
        return prg

    def _warn_build_log(self, program: cl.Program, source: str, opts: str, origin: str) -> None:
        """Compiler warnings of a successful build, once per program (build_log.py)."""
        if source not in self._warned_sources:
            warning = build_warning(program, self.device, source, opts, origin)
            if warning is not None:
                self._warned_sources.add(source)
                # the frame that called Runtime.build's caller (Runtime.build delegates here)
                warnings.warn(warning, stacklevel=5)

    def kernel(self, program: cl.Program, name: str, *, origin: str = "") -> cl.Kernel:
        """The kernel ``name`` of ``program`` (one object per program and name)."""
        with self._lock:
            kernels = self._kernels.get(program)
            if kernels is None:
                kernels = self._kernels[program] = {}
            k = kernels.get(name)
            if k is None:
                try:
                    k = kernels[name] = cl.Kernel(program, name)
                except cl.Error as exc:
                    where = f"{origin}: " if origin else ""
                    raise BuildError(
                        f"{where}the OpenCL runtime of {self.device.name} could not create "
                        f"kernel {name!r} from the built program ({exc}); a muscle's source "
                        "must not redefine or hide skelpy's kernels",
                        source=_program_source(program), log=str(exc)) from None
        return k


def estimated_binary_bytes(source: str) -> int:
    """A program's binary size where it is not asked for (PoCL, measured: 48 KB for an empty
    kernel, 309 KB for a 21 KB Reduce program)."""
    return (48 << 10) + 12 * len(source)


def _binary_bytes(program: cl.Program) -> int:
    try:
        return int(sum(program.binary_sizes))
    except (cl.Error, TypeError):
        return 0


def _program_source(program: cl.Program) -> str:
    try:
        return str(program.get_info(cl.program_info.SOURCE))
    except cl.Error:
        return ""
