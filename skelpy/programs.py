"""The in-memory cache of built OpenCL programs: an LRU bounded by count and bytes.

A runtime builds one program per (kernel source, build options). Without a bound, a process
that makes many distinct muscles keeps every program (and the device code the OpenCL
implementation holds for it) for ever. :class:`ProgramCache` keeps the most recently used ones
within :data:`MAX_CACHED_PROGRAMS` programs and :data:`MAX_CACHED_BYTES` bytes, and lets an
entry go as soon as every plan (owner) that used it has been collected.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass

import pyopencl as cl

#: Default bounds of a runtime's program cache.
MAX_CACHED_PROGRAMS = 256
MAX_CACHED_BYTES = 256 << 20


class ProgramCache:
    """Built programs by (source, options): an LRU bounded by count and by bytes (source
    text plus device binaries), thread-safe, whose entries also leave as soon as every plan
    that used them is gone (so dropping a skeleton lets its programs go).

    Defaults: :data:`MAX_CACHED_PROGRAMS` programs and :data:`MAX_CACHED_BYTES` bytes; set
    ``max_programs``/``max_bytes`` on ``runtime.programs`` to change them. An evicted program
    that a live plan still launches stays alive through that plan's kernel; it is rebuilt
    (from pyopencl's binary cache on disk) only when asked for again."""

    def __init__(self, max_programs: int = MAX_CACHED_PROGRAMS,
                 max_bytes: int = MAX_CACHED_BYTES):
        self.max_programs = max_programs
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._owned: dict[int, set] = {}         # owner id -> keys it used
        self._gone: deque[int] = deque()         # owners collected since the last call

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def cached(self) -> list[tuple[str, str]]:
        """The cached (source, options) keys, least recently used first."""
        with self._lock:
            self._collect()
            return list(self._entries)

    def get(self, key: tuple[str, str], owner: object | None = None) -> cl.Program | None:
        with self._lock:
            self._collect()
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            if owner is not None:
                self._own(owner, key, entry)
            return entry.program

    def put(self, key: tuple[str, str], program: cl.Program, nbytes: int,
            owner: object | None = None) -> None:
        with self._lock:
            self._collect()
            if key not in self._entries:
                self._entries[key] = _Entry(program, nbytes)
                self._bytes += nbytes
            entry = self._entries[key]
            if owner is not None:
                self._own(owner, key, entry)
            while len(self._entries) > 1 and (len(self._entries) > self.max_programs
                                              or self._bytes > self.max_bytes):
                self._drop(next(iter(self._entries)))

    def clear(self) -> None:
        with self._lock:
            for key in list(self._entries):
                self._drop(key)

    # -- owners (under the lock) -------------------------------------------------------------
    def _own(self, owner: object, key, entry: _Entry) -> None:
        oid = id(owner)
        keys = self._owned.get(oid)
        if keys is None:
            keys = self._owned[oid] = set()
            weakref.finalize(owner, self._gone.append, oid)
        if key not in keys:
            keys.add(key)
            entry.owners += 1

    def _collect(self) -> None:
        """Release the keys of owners collected since (finalizers only queue their id: they
        may run inside a locked section of this very thread)."""
        while self._gone:
            for key in self._owned.pop(self._gone.popleft(), ()):
                entry = self._entries.get(key)
                if entry is not None:
                    entry.owners -= 1
                    if entry.owners <= 0:
                        self._drop(key)

    def _drop(self, key) -> None:
        entry = self._entries.pop(key)
        self._bytes -= entry.nbytes


@dataclass
class _Entry:
    program: cl.Program
    nbytes: int
    owners: int = 0
