"""The tuning store: devices, kernels, scenarios, measurements and refusals in SQLite.

Lives in ``platformdirs.user_cache_dir("skelpy")`` or ``$SKELPY_CACHE_DIR`` (read at first
use and again whenever it changes, so tests can point it at a temporary folder), a private
folder (``cache_dir.py``: 0700, files 0600, no symlinks followed, owner checked).

A skeleton call never waits long for the store. Several processes may tune at once: the
database runs in WAL mode, so reads never wait for a writer; opening reads only; a write is
one short transaction that waits at most :data:`WRITE_WAIT_S` for the lock, and is queued
(one warning) when another process holds it longer. Measurements are only ever appended, so
concurrent writers never overwrite each other.

The schema version is checked before anything else, and any value is understood: a file of
another version, with other columns, of another program, or not SQLite at all is *foreign*:
it is left untouched (never written) and tuning data is kept in memory, with one warning. So
is a store that cannot be opened or written (read-only or missing folder): the user's results
never depend on the store.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cache_dir import UnsafePath, check_file, create_file, ensure_dir
from .store_format import (  # noqa: F401 - params_json, aggregate: part of the store's API
    DB_NAME,
    SCHEMA_SQL,
    SCHEMA_VERSION,
    aggregate,
    inspect_file,
    params_json,
)

READ_WAIT_S = 0.05        # a read gives up (answers "nothing stored") after this
WRITE_WAIT_S = 0.04       # a write waits this long for the lock, then is queued
QUEUE_MAX_ROWS = 200_000  # queued rows beyond this are dropped (one warning)


def default_cache_dir() -> Path:
    """``$SKELPY_CACHE_DIR`` if set, else the platform's per-user cache folder."""
    env = os.environ.get("SKELPY_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("skelpy"))


@dataclass
class ScenarioRecord:
    """Everything the store keeps about one scenario (written once, on its first datum)."""

    key: str
    device: str
    device_features: dict[str, float]
    kernel: str
    skeleton: str
    kernel_features: dict[str, float]
    dataset: dict[str, Any]
    space: dict[str, Any] = field(default_factory=dict)


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


class Store:
    """One SQLite tuning database (or its in-memory stand-in after a failure).

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
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise sqlite3.OperationalError(f"cannot switch to WAL mode (got {mode})")
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                raise _Busy(str(exc)) from exc
            raise
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
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                raise _Busy(str(exc)) from exc
            raise
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

    def _write(self, fn: Callable[[sqlite3.Connection], Any], overlay: tuple = (),
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
            self._queue.append(_Queued(fn, overlay))
            self._queued_rows += rows
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_loop, daemon=True,
                                                 name="skelpy-store-writer")
                self._flusher.start()
        self._warn_busy()

    def _warn_busy(self, full: bool = False) -> None:
        if self._busy_warned:
            return
        self._busy_warned = True
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
                with self._qlock:
                    if self._queue and self._queue[0] is item:
                        self._queue.pop(0)
                        self._queued_rows = sum(q.rows for q in self._queue)

    def _flush_loop(self) -> None:
        delay = 0.05
        while True:
            time.sleep(delay)
            try:
                done = self._drain()
            except Exception:  # noqa: BLE001 - a background writer must never raise
                done = True
            with self._qlock:
                if done or not self._queue:
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

    def _queued_for(self, scenario: str, kind: str) -> list[tuple]:
        with self._qlock:
            return [o for q in self._queue for o in q.overlay
                    if o[0] == kind and o[1] == scenario]

    def _read(self, sql: str, args: Iterable = ()) -> list[tuple]:
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

    def _count(self, sql: str, args: Iterable = ()) -> int:
        rows = self._read(sql, args)
        return int(rows[0][0]) if rows else 0

    def close(self) -> None:
        with self._wlock, self._rlock:
            for c in {id(c): c for c in (self._rconn, self._wconn) if c is not None}.values():
                with contextlib.suppress(sqlite3.Error):
                    c.close()
            self._rconn = self._wconn = None

    # -- writing --------------------------------------------------------------------------
    @staticmethod
    def _ensure(conn: sqlite3.Connection, rec: ScenarioRecord) -> None:
        conn.execute("INSERT OR REPLACE INTO devices VALUES (?, ?)",
                     (rec.device, json.dumps(rec.device_features, sort_keys=True)))
        conn.execute("INSERT OR REPLACE INTO kernels VALUES (?, ?, ?)",
                     (rec.kernel, rec.skeleton, json.dumps(rec.kernel_features, sort_keys=True)))
        conn.execute("INSERT OR IGNORE INTO scenarios VALUES (?, ?, ?, ?, ?, ?)",
                     (rec.key, rec.device, rec.kernel, rec.skeleton,
                      json.dumps(rec.dataset, sort_keys=True, default=str),
                      json.dumps(rec.space, sort_keys=True, default=str)))

    def record_measurements(self, rec: ScenarioRecord,
                            rows: Iterable[tuple[Mapping[str, Any], float, int]]) -> None:
        """Append (params, median seconds, sample count) rows for one scenario."""
        now = time.time()
        data = [(rec.key, params_json(p), float(s), int(n), now) for p, s, n in rows
                if s is not None and math.isfinite(float(s)) and float(s) > 0]
        if not data:
            return

        def fn(conn):
            self._ensure(conn, rec)
            conn.executemany("INSERT INTO measurements (scenario, params, seconds, n, time) "
                             "VALUES (?, ?, ?, ?, ?)", data)
        self._write(fn, tuple(("m", k, p, sec, n) for k, p, sec, n, _t in data), len(data))

    def record_measurement(self, rec: ScenarioRecord, params: Mapping[str, Any],
                           seconds: float, n: int = 1) -> None:
        self.record_measurements(rec, [(params, seconds, n)])

    def record_refusal(self, rec: ScenarioRecord, params: Mapping[str, Any]) -> None:
        pj = params_json(params)

        def fn(conn):
            self._ensure(conn, rec)
            conn.execute("INSERT OR IGNORE INTO refusals VALUES (?, ?, ?)",
                         (rec.key, pj, time.time()))
        self._write(fn, (("r", rec.key, pj),))

    # -- reading --------------------------------------------------------------------------
    def refusals(self, scenario: str) -> list[dict]:
        have = [p for (p,) in
                self._read("SELECT params FROM refusals WHERE scenario=?", (scenario,))]
        have += [o[2] for o in self._queued_for(scenario, "r") if o[2] not in have]
        return [json.loads(p) for p in have]

    def measurements(self, scenario: str) -> dict[str, tuple[float, int]]:
        """Per parameter point (canonical JSON): (median seconds over rows, total samples)."""
        rows = self._read("SELECT params, seconds, n FROM measurements WHERE scenario=?",
                          (scenario,))
        rows += [o[2:] for o in self._queued_for(scenario, "m")]
        return aggregate(rows)

    def best(self, scenario: str, exclude: Iterable[str] = ()) -> tuple[dict, float] | None:
        """The fastest measured point of a scenario that is not refused or excluded."""
        refused = {params_json(p) for p in self.refusals(scenario)} | set(exclude)
        meas = {k: v for k, v in self.measurements(scenario).items() if k not in refused}
        if not meas:
            return None
        k = min(meas, key=lambda p: meas[p][0])
        return json.loads(k), meas[k][0]

    def count_measurements(self, device: str | None = None) -> int:
        """Measurement rows stored (one per point and measuring run), of one device."""
        if device is None:
            return self._count("SELECT COUNT(*) FROM measurements")
        return self._count(
            "SELECT COUNT(*) FROM measurements m JOIN scenarios s ON m.scenario = s.key "
            "WHERE s.device=?", (device,))

    def devices(self) -> dict[str, dict]:
        return {k: json.loads(f) for k, f in self._read("SELECT key, features FROM devices")}

    def scenarios(self, device: str | None = None) -> list[dict]:
        sql = ("SELECT s.key, s.device, s.kernel, s.skeleton, s.dataset, s.space, "
               "k.features, d.features FROM scenarios s LEFT JOIN kernels k ON s.kernel=k.key "
               "LEFT JOIN devices d ON s.device=d.key")
        rows = self._read(sql + (" WHERE s.device=?" if device else ""),
                          (device,) if device else ())
        return [{"key": r[0], "device": r[1], "kernel": r[2], "skeleton": r[3],
                 "dataset": json.loads(r[4]), "space": json.loads(r[5]),
                 "kernel_features": json.loads(r[6] or "{}"),
                 "device_features": json.loads(r[7] or "{}")} for r in rows]

    def all_measurements(self, device: str | None = None) -> dict[str, dict[str, tuple]]:
        """scenario key -> aggregated measurements, for training and reports."""
        sql = ("SELECT m.scenario, m.params, m.seconds, m.n FROM measurements m "
               "JOIN scenarios s ON m.scenario = s.key")
        rows = self._read(sql + (" WHERE s.device=?" if device else ""),
                          (device,) if device else ())
        by: dict[str, list] = {}
        for scn, p, s, n in rows:
            by.setdefault(scn, []).append((p, s, n))
        return {k: aggregate(v) for k, v in by.items()}

    def all_refusals(self, device: str | None = None) -> dict[str, set[str]]:
        sql = "SELECT r.scenario, r.params FROM refusals r JOIN scenarios s ON r.scenario=s.key"
        rows = self._read(sql + (" WHERE s.device=?" if device else ""),
                          (device,) if device else ())
        out: dict[str, set[str]] = {}
        for scn, p in rows:
            out.setdefault(scn, set()).add(p)
        return out

    def info(self) -> dict[str, Any]:
        counts = {t: self._count(f"SELECT COUNT(*) FROM {t}")  # noqa: S608
                  for t in ("devices", "kernels", "scenarios", "measurements", "refusals")}
        size = 0
        if self.path is not None and not self.degraded:
            for suffix in ("", "-wal", "-shm"):
                p = Path(str(self.path) + suffix)
                if p.exists():
                    size += p.stat().st_size
        return {"path": str(self.path) if self.path else ":memory:",
                "degraded": self.degraded, "reason": self.reason, "foreign": self.foreign,
                "queued": self.queued, "bytes": size, **counts}

    def clear(self) -> None:
        def fn(conn):
            for t in ("measurements", "refusals", "scenarios", "kernels", "devices"):
                conn.execute(f"DELETE FROM {t}")  # noqa: S608
        with self._qlock:
            self._queue, self._queued_rows = [], 0
        self._write(fn)

    # -- export / import ------------------------------------------------------------------
    def export_data(self) -> dict[str, Any]:
        """All tuning data as plain JSON-able lists (OmniTune's "remote", done simply)."""
        def rows(sql):
            return self._read(sql)
        return {
            "format": "skelpy-tuning", "version": SCHEMA_VERSION,
            "devices": [{"key": k, "features": json.loads(f)}
                        for k, f in rows("SELECT key, features FROM devices")],
            "kernels": [{"key": k, "skeleton": s, "features": json.loads(f)}
                        for k, s, f in rows("SELECT key, skeleton, features FROM kernels")],
            "scenarios": [{"key": k, "device": d, "kernel": kn, "skeleton": s,
                           "dataset": json.loads(ds), "space": json.loads(sp)}
                          for k, d, kn, s, ds, sp in rows(
                              "SELECT key, device, kernel, skeleton, dataset, space "
                              "FROM scenarios")],
            "measurements": [{"scenario": s, "params": json.loads(p), "seconds": sec, "n": n,
                              "time": t}
                             for s, p, sec, n, t in rows(
                                 "SELECT scenario, params, seconds, n, time FROM measurements "
                                 "ORDER BY id")],
            "refusals": [{"scenario": s, "params": json.loads(p), "time": t}
                         for s, p, t in rows("SELECT scenario, params, time FROM refusals")],
        }

    def import_data(self, data: Mapping[str, Any]) -> dict[str, int]:
        """Merge exported data: rows already present (same scenario, params, time) are skipped."""
        if data.get("format") != "skelpy-tuning":
            raise ValueError("not a skelpy tuning export (missing format: skelpy-tuning)")
        added = {"measurements": 0, "refusals": 0, "scenarios": 0}

        def fn(conn):
            for d in data.get("devices", []):
                conn.execute("INSERT OR IGNORE INTO devices VALUES (?, ?)",
                             (d["key"], json.dumps(d["features"], sort_keys=True)))
            for k in data.get("kernels", []):
                conn.execute("INSERT OR IGNORE INTO kernels VALUES (?, ?, ?)",
                             (k["key"], k["skeleton"], json.dumps(k["features"], sort_keys=True)))
            for s in data.get("scenarios", []):
                cur = conn.execute("INSERT OR IGNORE INTO scenarios VALUES (?, ?, ?, ?, ?, ?)",
                                   (s["key"], s["device"], s["kernel"], s["skeleton"],
                                    json.dumps(s["dataset"], sort_keys=True),
                                    json.dumps(s["space"], sort_keys=True)))
                added["scenarios"] += cur.rowcount
            have = {(s, p, round(t, 6)) for s, p, t in
                    conn.execute("SELECT scenario, params, time FROM measurements")}
            for m in data.get("measurements", []):
                pj = params_json(m["params"])
                if (m["scenario"], pj, round(float(m["time"]), 6)) in have:
                    continue
                conn.execute("INSERT INTO measurements (scenario, params, seconds, n, time) "
                             "VALUES (?, ?, ?, ?, ?)",
                             (m["scenario"], pj, float(m["seconds"]), int(m["n"]),
                              float(m["time"])))
                added["measurements"] += 1
            for r in data.get("refusals", []):
                cur = conn.execute("INSERT OR IGNORE INTO refusals VALUES (?, ?, ?)",
                                   (r["scenario"], params_json(r["params"]), float(r["time"])))
                added["refusals"] += cur.rowcount
        self._write(fn, (), max(1, len(data.get("measurements", []))))
        return added


# -- the process-wide store ---------------------------------------------------------------

_store: Store | None = None
_store_env: str | None = None
_store_lock = threading.Lock()
_listeners: list = []


def on_store_change(fn) -> None:
    """Call ``fn()`` whenever the process switches to another store (cache folder)."""
    _listeners.append(fn)


def _flush_at_exit() -> None:
    s = _store
    if s is not None and s.queued:
        s.flush(timeout=1.0)


atexit.register(_flush_at_exit)


def get_store() -> Store:
    """The store for the current ``$SKELPY_CACHE_DIR`` (re-opened when it changes)."""
    global _store, _store_env
    env = os.environ.get("SKELPY_CACHE_DIR", "")
    s = _store
    if s is not None and env == _store_env:
        return s
    with _store_lock:
        if _store is None or env != _store_env:
            if _store is not None:
                _store.close()
            _store = Store(default_cache_dir())
            _store_env = env
            for fn in _listeners:
                fn()
        return _store


def current_store() -> Store | None:
    """The store open now, without opening one (None before the first use)."""
    return _store


def store_changed() -> bool:
    """True when ``$SKELPY_CACHE_DIR`` no longer matches the open store (cheap check)."""
    return _store is None or os.environ.get("SKELPY_CACHE_DIR", "") != _store_env


def reset_store() -> None:
    """Forget the open store (tests; ``skelpy cache clear``)."""
    global _store, _store_env
    with _store_lock:
        if _store is not None:
            _store.close()
        _store = None
        _store_env = None
        for fn in _listeners:
            fn()
