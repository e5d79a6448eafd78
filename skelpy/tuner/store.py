"""The tuning store: devices, kernels, scenarios, measurements and refusals in SQLite.

Lives in ``platformdirs.user_cache_dir("skelpy")`` or ``$SKELPY_CACHE_DIR`` (read at first
use and again whenever it changes, so tests can point it at a temporary folder), a private
folder (``cache_dir.py``: 0700, files 0600, no symlinks followed, owner checked).

A skeleton call never waits long for the store, and a foreign or unusable file is never
written: how is :mod:`.store_file`'s (:class:`~skelpy.tuner.store_file.StoreFile`, the base of
:class:`Store`). This module holds what the store records and answers, and the process-wide
store.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .store_file import StoreFile
from .store_format import (  # noqa: F401 - DB_NAME, params_json, aggregate: the store's API
    DB_NAME,
    SCHEMA_VERSION,
    aggregate,
    params_json,
)


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


class Store(StoreFile):
    """One SQLite tuning database (or its in-memory stand-in after a failure): what is
    recorded and read in it (:class:`StoreFile`: how, without waiting long)."""

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
        self.write(fn, tuple(("m", k, p, sec, n) for k, p, sec, n, _t in data), len(data))

    def record_measurement(self, rec: ScenarioRecord, params: Mapping[str, Any],
                           seconds: float, n: int = 1) -> None:
        self.record_measurements(rec, [(params, seconds, n)])

    def record_refusal(self, rec: ScenarioRecord, params: Mapping[str, Any]) -> None:
        pj = params_json(params)

        def fn(conn):
            self._ensure(conn, rec)
            conn.execute("INSERT OR IGNORE INTO refusals VALUES (?, ?, ?)",
                         (rec.key, pj, time.time()))
        self.write(fn, (("r", rec.key, pj),))

    # -- reading --------------------------------------------------------------------------
    def refusals(self, scenario: str) -> list[dict]:
        have = [p for (p,) in
                self.read("SELECT params FROM refusals WHERE scenario=?", (scenario,))]
        have += [o[2] for o in self.queued_for(scenario, "r") if o[2] not in have]
        return [json.loads(p) for p in have]

    def measurements(self, scenario: str) -> dict[str, tuple[float, int]]:
        """Per parameter point (canonical JSON): (median seconds over rows, total samples)."""
        rows = self.read("SELECT params, seconds, n FROM measurements WHERE scenario=?",
                          (scenario,))
        rows += [o[2:] for o in self.queued_for(scenario, "m")]
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
            return self.count("SELECT COUNT(*) FROM measurements")
        return self.count(
            "SELECT COUNT(*) FROM measurements m JOIN scenarios s ON m.scenario = s.key "
            "WHERE s.device=?", (device,))

    def devices(self) -> dict[str, dict]:
        return {k: json.loads(f) for k, f in self.read("SELECT key, features FROM devices")}

    def scenarios(self, device: str | None = None) -> list[dict]:
        sql = ("SELECT s.key, s.device, s.kernel, s.skeleton, s.dataset, s.space, "
               "k.features, d.features FROM scenarios s LEFT JOIN kernels k ON s.kernel=k.key "
               "LEFT JOIN devices d ON s.device=d.key")
        rows = self.read(sql + (" WHERE s.device=?" if device else ""),
                          (device,) if device else ())
        return [{"key": r[0], "device": r[1], "kernel": r[2], "skeleton": r[3],
                 "dataset": json.loads(r[4]), "space": json.loads(r[5]),
                 "kernel_features": json.loads(r[6] or "{}"),
                 "device_features": json.loads(r[7] or "{}")} for r in rows]

    def all_measurements(self, device: str | None = None) -> dict[str, dict[str, tuple]]:
        """scenario key -> aggregated measurements, for training and reports."""
        sql = ("SELECT m.scenario, m.params, m.seconds, m.n FROM measurements m "
               "JOIN scenarios s ON m.scenario = s.key")
        rows = self.read(sql + (" WHERE s.device=?" if device else ""),
                          (device,) if device else ())
        by: dict[str, list] = {}
        for scn, p, s, n in rows:
            by.setdefault(scn, []).append((p, s, n))
        return {k: aggregate(v) for k, v in by.items()}

    def all_refusals(self, device: str | None = None) -> dict[str, set[str]]:
        sql = "SELECT r.scenario, r.params FROM refusals r JOIN scenarios s ON r.scenario=s.key"
        rows = self.read(sql + (" WHERE s.device=?" if device else ""),
                          (device,) if device else ())
        out: dict[str, set[str]] = {}
        for scn, p in rows:
            out.setdefault(scn, set()).add(p)
        return out

    def info(self) -> dict[str, Any]:
        counts = {t: self.count(f"SELECT COUNT(*) FROM {t}")  # noqa: S608
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
        self.drop_queue()
        self.write(fn)

    # -- export / import ------------------------------------------------------------------
    def export_data(self) -> dict[str, Any]:
        """All tuning data as plain JSON-able lists (OmniTune's "remote", done simply)."""
        def rows(sql):
            return self.read(sql)
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
        self.write(fn, (), max(1, len(data.get("measurements", []))))
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
