"""The tuning store: devices, kernels, scenarios, measurements and refusals in SQLite.

Lives in ``platformdirs.user_cache_dir("skelpy")`` or ``$SKELPY_CACHE_DIR`` (read at first
use and again whenever it changes, so tests can point it at a temporary folder). Several
processes may tune at once: the database runs in WAL mode, every write is one short
transaction retried while another process holds the lock, and measurements are only ever
appended, so concurrent writers never overwrite each other. A store that cannot be opened or
written (corrupt file, read-only or missing folder) degrades to an in-memory database with
exactly one warning: the user's results never depend on the store.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
DB_NAME = "tuning.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS devices (key TEXT PRIMARY KEY, features TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS kernels (key TEXT PRIMARY KEY, skeleton TEXT NOT NULL,
                                    features TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS scenarios (key TEXT PRIMARY KEY, device TEXT NOT NULL,
                                      kernel TEXT NOT NULL, skeleton TEXT NOT NULL,
                                      dataset TEXT NOT NULL, space TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS measurements (id INTEGER PRIMARY KEY AUTOINCREMENT,
                                         scenario TEXT NOT NULL, params TEXT NOT NULL,
                                         seconds REAL NOT NULL, n INTEGER NOT NULL,
                                         time REAL NOT NULL);
CREATE INDEX IF NOT EXISTS measurements_scenario ON measurements (scenario);
CREATE TABLE IF NOT EXISTS refusals (scenario TEXT NOT NULL, params TEXT NOT NULL,
                                     time REAL NOT NULL, PRIMARY KEY (scenario, params));
CREATE INDEX IF NOT EXISTS scenarios_device ON scenarios (device);
"""

_RETRIES = 40
_BUSY_MS = 10_000


def params_json(params: Mapping[str, Any]) -> str:
    """Canonical JSON of a parameter point (sorted keys, plain Python values)."""
    return json.dumps({k: _plain(v) for k, v in params.items()}, sort_keys=True)


def _plain(v: Any) -> Any:
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            return v.item()
        except (AttributeError, ValueError):
            pass
    return v


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


class Store:
    """One SQLite tuning database (or its in-memory stand-in after a failure)."""

    def __init__(self, directory: Path | str | None, *, memory: bool = False):
        self.directory = None if directory is None else Path(directory)
        self.path: Path | None = None if (memory or self.directory is None) \
            else self.directory / DB_NAME
        self.degraded = False
        self.reason = ""
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._conn: sqlite3.Connection | None = None
        self._known: set[str] = set()          # scenario keys already written
        self._open()

    # -- connection -----------------------------------------------------------------------
    def _open(self) -> None:
        if self.path is None:
            self._conn = self._memory_conn()
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=_BUSY_MS / 1000,
                                   isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
            self._retry(lambda: self._init_file(conn))
            self._conn = conn
        except (sqlite3.Error, OSError) as exc:
            self._degrade(exc)

    @staticmethod
    def _init_file(conn: sqlite3.Connection) -> None:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            raise sqlite3.OperationalError(f"cannot switch to WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if row is None or int(row[0]) != SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"tuning store has schema {row}, expected "
                                        f"{SCHEMA_VERSION}")

    @staticmethod
    def _memory_conn() -> sqlite3.Connection:
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.executescript(_SCHEMA)
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        return conn

    def _degrade(self, exc: BaseException) -> None:
        """Switch to memory with one warning; tuning goes on, results are unaffected."""
        if self.degraded:
            return
        self.degraded = True
        self.reason = f"{type(exc).__name__}: {exc}"
        old = self._conn
        self._conn = self._memory_conn()
        self._known.clear()
        if old is not None:
            with contextlib.suppress(sqlite3.Error):
                old.close()
        warnings.warn(f"skelpy: the tuning store {self.path} cannot be used ({self.reason}); "
                      "tuning data is kept in memory for this process only", RuntimeWarning,
                      stacklevel=3)

    def _conn_now(self) -> sqlite3.Connection:
        if os.getpid() != self._pid:      # forked: never share a connection across processes
            self._pid = os.getpid()
            self._known.clear()
            if not self.degraded:
                self._conn = None
                self._open()
            else:
                self._conn = self._memory_conn()
        if self._conn is None:          # closed (the process moved to another store): reopen
            self._open()
        assert self._conn is not None
        return self._conn

    @staticmethod
    def _retry(fn):
        delay = 0.002
        for attempt in range(_RETRIES):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                msg = str(exc).lower()
                if ("locked" not in msg and "busy" not in msg) or attempt == _RETRIES - 1:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
        return None

    def _write(self, fn) -> Any:
        """Run ``fn(conn)`` in one short IMMEDIATE transaction, retrying while locked."""
        with self._lock:
            def attempt():
                conn = self._conn_now()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    out = fn(conn)
                    conn.execute("COMMIT")
                    return out
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
            try:
                return self._retry(attempt)
            except (sqlite3.Error, OSError) as exc:
                self._degrade(exc)
                return self._retry(attempt)

    def _read(self, sql: str, args: Iterable = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._retry(lambda: self._conn_now().execute(sql, tuple(args)).fetchall())
            except (sqlite3.Error, OSError) as exc:
                self._degrade(exc)
                return self._conn_now().execute(sql, tuple(args)).fetchall()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
                self._conn = None

    # -- writing --------------------------------------------------------------------------
    def _ensure(self, conn: sqlite3.Connection, rec: ScenarioRecord) -> None:
        if rec.key in self._known:
            return
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

        def fn(conn):
            self._ensure(conn, rec)
            conn.executemany("INSERT INTO measurements (scenario, params, seconds, n, time) "
                             "VALUES (?, ?, ?, ?, ?)", data)
        self._write(fn)
        self._known.add(rec.key)

    def record_measurement(self, rec: ScenarioRecord, params: Mapping[str, Any],
                           seconds: float, n: int = 1) -> None:
        self.record_measurements(rec, [(params, seconds, n)])

    def record_refusal(self, rec: ScenarioRecord, params: Mapping[str, Any]) -> None:
        def fn(conn):
            self._ensure(conn, rec)
            conn.execute("INSERT OR IGNORE INTO refusals VALUES (?, ?, ?)",
                         (rec.key, params_json(params), time.time()))
        self._write(fn)
        self._known.add(rec.key)

    # -- reading --------------------------------------------------------------------------
    def refusals(self, scenario: str) -> list[dict]:
        return [json.loads(p) for (p,) in
                self._read("SELECT params FROM refusals WHERE scenario=?", (scenario,))]

    def measurements(self, scenario: str) -> dict[str, tuple[float, int]]:
        """Per parameter point (canonical JSON): (median seconds over rows, total samples)."""
        rows = self._read("SELECT params, seconds, n FROM measurements WHERE scenario=?",
                          (scenario,))
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
        if device is None:
            return int(self._read("SELECT COUNT(*) FROM measurements")[0][0])
        return int(self._read(
            "SELECT COUNT(*) FROM measurements m JOIN scenarios s ON m.scenario = s.key "
            "WHERE s.device=?", (device,))[0][0])

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
        counts = {t: int(self._read(f"SELECT COUNT(*) FROM {t}")[0][0])  # noqa: S608
                  for t in ("devices", "kernels", "scenarios", "measurements", "refusals")}
        size = 0
        if self.path is not None and not self.degraded:
            for suffix in ("", "-wal", "-shm"):
                p = Path(str(self.path) + suffix)
                if p.exists():
                    size += p.stat().st_size
        return {"path": str(self.path) if self.path else ":memory:",
                "degraded": self.degraded, "reason": self.reason, "bytes": size, **counts}

    def clear(self) -> None:
        def fn(conn):
            for t in ("measurements", "refusals", "scenarios", "kernels", "devices"):
                conn.execute(f"DELETE FROM {t}")  # noqa: S608
        self._write(fn)
        self._known.clear()

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
        self._write(fn)
        return added


def aggregate(rows: Iterable[tuple[str, float, int]]) -> dict[str, tuple[float, int]]:
    """Combine measurement rows of one scenario: per point, the median of the row medians
    (weighted by their sample counts) and the total number of samples."""
    by: dict[str, list[tuple[float, int]]] = {}
    for p, s, n in rows:
        by.setdefault(p, []).append((float(s), int(n)))
    out = {}
    for p, vals in by.items():
        vals.sort()
        total = sum(n for _, n in vals)
        acc, med = 0, vals[-1][0]
        for s, n in vals:
            acc += n
            if acc * 2 >= total:
                med = s
                break
        out[p] = (med, total)
    return out


# -- the process-wide store ---------------------------------------------------------------

_store: Store | None = None
_store_env: str | None = None
_store_lock = threading.Lock()
_listeners: list = []


def on_store_change(fn) -> None:
    """Call ``fn()`` whenever the process switches to another store (cache folder)."""
    _listeners.append(fn)


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
