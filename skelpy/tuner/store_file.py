"""The SQLite file behind the tuning store, opened so that a skeleton call never waits long for it.

Several processes may tune at once: the database runs in WAL mode, so reads never wait for a
writer; opening reads only; a write is one short transaction that waits at most
:data:`WRITE_WAIT_S` for the lock, and is queued (one warning) when another process holds it
longer. Measurements are only ever appended, so concurrent writers never overwrite each other.

The schema version is checked before anything else, and any value is understood: a file of
another version, with other columns, of another program, or not SQLite at all is *foreign*:
it is left untouched (never written) and tuning data is kept in memory, with one warning. So
is a store that cannot be opened or written (read-only or missing folder): the user's results
never depend on the store.

:class:`StoreFile` is this machinery alone (connections, locks, the queue of writes, falling
back to memory); :class:`~skelpy.tuner.store.Store` builds the tuning tables' records and
queries on its :meth:`~StoreFile.read` and :meth:`~StoreFile.write`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cache_dir import UnsafePath, check_file, create_file, ensure_dir
from .store_format import DB_NAME, SCHEMA_SQL, SCHEMA_VERSION, inspect_file

READ_WAIT_S = 0.05        # a read gives up (answers "nothing stored") after this
WRITE_WAIT_S = 0.04       # a write waits this long for the lock, then is queued
QUEUE_MAX_ROWS = 200_000  # queued rows beyond this are dropped (one warning)


class _Foreign(Exception):
    """The file turned out not to be ours (found under the write lock)."""


@dataclass
class _Queued:
    """A write waiting for the lock; ``overlay`` rows are what reads of this process see
    meanwhile: ("m", scenario, params_json, seconds, n) or ("r", scenario, params_json)."""

    fn: Callable[[sqlite3.Connection], Any]
    overlay: tuple = ()
    rows: int = 1


class _Busy(Exception):
    """Another process holds the database's write lock (or, rarely, blocks a read)."""


def _is_busy(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


@contextlib.contextmanager
def _busy_raised():
    """A lock held by another process, inside, raised as :class:`_Busy`."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if _is_busy(exc):
            raise _Busy(str(exc)) from exc
        raise


class StoreFile:
    """One SQLite tuning database file (or its in-memory stand-in after a failure).

    Two connections: reads never wait for a writer (WAL) nor for this process's own writes,
    and give up after :data:`READ_WAIT_S`; writes wait at most :data:`WRITE_WAIT_S` for
    the lock. A write that finds the store busy (another process holding the lock) is queued
    and written by a background thread once the lock is free, with one warning; while
    queued, this process's reads of a scenario see it."""

    def __init__(self, directory: Path | str | None, *, memory: bool = False):
        self.directory = None if directory is None else Path(directory)
        self.path: Path | None = None if (memory or self.directory is None) \
            else self.directory / DB_NAME
        self.degraded = False
        self.reason = ""
        self.foreign = ""                        # why the file is not used, if foreign
        self._pid = os.getpid()
        self._rconn: sqlite3.Connection | None = None
        self._wconn: sqlite3.Connection | None = None
        self._rlock = threading.RLock()
        self._wlock = threading.RLock()
        self._ready = False                      # our tables exist in the file
        self._queue: list[_Queued] = []          # writes waiting for the lock
        self._qlock = threading.Lock()
        self._queued_rows = 0
        self._flusher: threading.Thread | None = None
        self._busy_warned = False
        self._full_warned = False
        self._open()

    # -- connection -----------------------------------------------------------------------
    def _open(self) -> None:
        if self.path is None:
            self._use_memory()
            return
        try:
            ensure_dir(self.path.parent)
            for suffix in ("", "-wal", "-shm", "-journal"):
                check_file(Path(str(self.path) + suffix))
            kind, why = inspect_file(self.path, READ_WAIT_S)
            if kind == "foreign":
                self.foreign = why
                self._degrade(UnsafePath(f"left untouched: {why}"))
                return
            if kind == "empty":
                create_file(self.path)           # 0600, not through a symlink
            self._rconn = self._connect(READ_WAIT_S)
            self._wconn = self._connect(WRITE_WAIT_S)
            self._ready = kind == "ours"
            if not self._ready:
                with contextlib.suppress(_Busy), self._wlock:   # someone else is: later
                    self._create_tables(self._wconn)
        except (sqlite3.Error, OSError) as exc:
            self._degrade(exc)

    def _connect(self, wait_s: float) -> sqlite3.Connection:
        assert self.path is not None
        conn = sqlite3.connect(str(self.path), timeout=wait_s, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _create_tables(self, conn: sqlite3.Connection) -> None:
        """Create our tables in an empty file: WAL first, then one transaction that checks
        again, under the lock, that the file is still empty (never into a foreign file)."""
        with _busy_raised():
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise sqlite3.OperationalError(f"cannot switch to WAL mode (got {mode})")
            conn.execute("BEGIN IMMEDIATE")
        try:
            assert self.path is not None
            kind, why = inspect_file(self.path, READ_WAIT_S)
            if kind == "foreign":
                raise _Foreign(why)
            if kind == "empty":
                for stmt in SCHEMA_SQL.split(";"):
                    if stmt.strip():
                        conn.execute(stmt)
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)",
                             (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        self._ready = True

    def _use_memory(self) -> None:
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.executescript(SCHEMA_SQL)
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        self._rconn = self._wconn = conn
        self._rlock = self._wlock                 # one connection: one lock
        self._ready = True

    def _degrade(self, exc: BaseException) -> None:
        """Switch to memory with one warning; tuning goes on, results are unaffected."""
        if self.degraded:
            return
        self.degraded = True
        self.reason = f"{type(exc).__name__}: {exc}"
        old = {id(c): c for c in (self._rconn, self._wconn) if c is not None}
        self._use_memory()
        for c in old.values():
            with contextlib.suppress(sqlite3.Error):
                c.close()
        with self._qlock:
            queued, self._queue, self._queued_rows = self._queue, [], 0
        for q in queued:                         # what waited for the file goes to memory
            with contextlib.suppress(sqlite3.Error):
                self._transaction(q.fn)
        warnings.warn(f"skelpy: the tuning store {self.path} cannot be used ({self.reason}); "
                      "tuning data is kept in memory for this process only", RuntimeWarning,
                      stacklevel=4)

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:      # forked: never share a connection across processes
            self._pid = os.getpid()
            self._rlock, self._wlock = threading.RLock(), threading.RLock()
            self._qlock = threading.Lock()
            self._queue, self._queued_rows, self._flusher = [], 0, None
            if self.degraded:
                self._use_memory()
            else:
                self._rconn = self._wconn = None
                self._open()

    def _conn(self, which: str) -> sqlite3.Connection:
        self._check_fork()
        if self._wconn is None:            # closed (the process moved to another store)
            if self.degraded:
                self._use_memory()
            else:
                self._open()
        conn = self._rconn if which == "r" else self._wconn
        assert conn is not None
        return conn

    def _transaction(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """``fn(conn)`` in one IMMEDIATE transaction; raises :class:`_Busy` when another
        process holds the lock for longer than :data:`WRITE_WAIT_S`."""
        conn = self._conn("w")
        if not self._ready:
            self._create_tables(conn)
        with _busy_raised():
            conn.execute("BEGIN IMMEDIATE")
        try:
            out = fn(conn)
            conn.execute("COMMIT")
            return out
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if _is_busy(exc):
                raise _Busy(str(exc)) from exc
            raise

    def write(self, fn: Callable[[sqlite3.Connection], Any], overlay: tuple = (),
               rows: int = 1) -> Any:
        """Write now if the lock can be had within :data:`WRITE_WAIT_S`, else queue."""
        self._check_fork()
        if self._queue or not self._wlock.acquire(timeout=WRITE_WAIT_S):
            self._enqueue(fn, overlay, rows)
            return None
        try:
            return self._transaction(fn)
        except _Busy:
            self._enqueue(fn, overlay, rows)
            return None
        except _Foreign as exc:
            self.foreign = str(exc)
            self._degrade(UnsafePath(f"left untouched: {exc}"))
            return self._transaction(fn)
        except (sqlite3.Error, OSError) as exc:
            self._degrade(exc)
            return self._transaction(fn)
        finally:
            self._wlock.release()

    def _enqueue(self, fn: Callable, overlay: tuple, rows: int) -> None:
        with self._qlock:
            if self._queued_rows + rows > QUEUE_MAX_ROWS:
                self._warn_busy(full=True)
                return
            # (the item keeps its row count: the count of the rows left is the sum over the
            # items left, whatever the writer has taken off the queue meanwhile)
            self._queue.append(_Queued(fn, overlay, rows))
            self._queued_rows += rows
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_loop, daemon=True,
                                                 name="skelpy-store-writer")
                self._flusher.start()
        self._warn_busy()

    def _warn_busy(self, full: bool = False) -> None:
        """One warning that the store is busy, and one more when the queue first drops
        data (which the first may not have said)."""
        if (self._full_warned if full else self._busy_warned):
            return
        self._busy_warned = True
        self._full_warned = self._full_warned or full
        what = ("its queue is full: newer tuning data is dropped" if full else
                "tuning data is queued and written when it is free (data still queued when "
                "the process ends is dropped)")
        warnings.warn(f"skelpy: the tuning store {self.path} is locked by another process; "
                      f"{what}. Calls go on with what the store had.", RuntimeWarning,
                      stacklevel=5)

    def _drain(self) -> bool:
        """Write queued items in order; True when the queue is empty."""
        with self._wlock:
            while True:
                with self._qlock:
                    if not self._queue:
                        return True
                    item = self._queue[0]
                try:
                    self._transaction(item.fn)
                except _Busy:
                    return False
                except (sqlite3.Error, OSError) as exc:
                    self._degrade(exc)
                    return True
                except Exception as exc:  # noqa: BLE001 - this write alone is broken
                    # dropped (with a warning): left first in the queue, it would fail
                    # again at every drain and hold back every write behind it for good
                    warnings.warn(f"skelpy: a queued write to the tuning store {self.path} "
                                  f"failed and is dropped ({type(exc).__name__}: {exc})",
                                  RuntimeWarning, stacklevel=2)
                with self._qlock:
                    if self._queue and self._queue[0] is item:
                        self._queue.pop(0)
                        self._queued_rows -= item.rows

    def _flush_loop(self) -> None:
        delay = 0.05
        while True:
            time.sleep(delay)
            try:
                self._drain()
                crashed = False
            except Exception:  # noqa: BLE001 - a background writer must never raise
                crashed = True
            with self._qlock:
                # (not "the drain said empty": a write queued since then, which saw this
                # thread running, would otherwise wait for the next write or flush)
                if crashed or not self._queue:
                    self._flusher = None
                    return
            delay = min(delay * 2, 2.0)

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait up to ``timeout`` seconds for queued writes; True when none is left."""
        end = time.monotonic() + timeout
        while True:
            if not self._queue or self._drain():
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.05)

    @property
    def queued(self) -> int:
        """Rows waiting for the lock."""
        return self._queued_rows

    def queued_for(self, scenario: str, kind: str) -> list[tuple]:
        """The overlay rows of ``kind`` ("m" or "r") of writes for ``scenario`` still queued:
        what this process's reads add to the file's rows meanwhile."""
        with self._qlock:
            return [o for q in self._queue for o in q.overlay
                    if o[0] == kind and o[1] == scenario]

    def drop_queue(self) -> None:
        """Forget the writes waiting for the lock (the store is being cleared)."""
        with self._qlock:
            self._queue, self._queued_rows = [], 0

    def read(self, sql: str, args: Iterable = ()) -> list[tuple]:
        """Rows of a query, or none when the store cannot answer within READ_WAIT_S."""
        with self._rlock:
            try:
                conn = self._conn("r")
                if not self._ready:           # created by another process meanwhile?
                    if self.path is None or inspect_file(self.path, READ_WAIT_S)[0] != "ours":
                        return []
                    self._ready = True
                return conn.execute(sql, tuple(args)).fetchall()
            except sqlite3.OperationalError as exc:
                if _is_busy(exc):
                    return []
                self._degrade(exc)
            except (sqlite3.Error, OSError) as exc:
                self._degrade(exc)
            return self._conn("r").execute(sql, tuple(args)).fetchall()

    def count(self, sql: str, args: Iterable = ()) -> int:
        """The number a ``SELECT COUNT(*)`` query answers (0 when the store cannot answer)."""
        rows = self.read(sql, args)
        return int(rows[0][0]) if rows else 0

    def close(self) -> None:
        with self._wlock, self._rlock:
            for c in {id(c): c for c in (self._rconn, self._wconn) if c is not None}.values():
                with contextlib.suppress(sqlite3.Error):
                    c.close()
            self._rconn = self._wconn = None
