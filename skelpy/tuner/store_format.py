"""What a tuning store file holds, and recognising one: the schema and its version, the
expected columns, canonical parameter JSON, and how rows of one point are combined."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

SCHEMA_VERSION = 1
DB_NAME = "tuning.sqlite"

SCHEMA_SQL = """
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

# Expected columns per table: a file with the right version number but other columns is
# foreign too.
COLUMNS = {
    "meta": ("key", "value"),
    "devices": ("key", "features"),
    "kernels": ("key", "skeleton", "features"),
    "scenarios": ("key", "device", "kernel", "skeleton", "dataset", "space"),
    "measurements": ("id", "scenario", "params", "seconds", "n", "time"),
    "refusals": ("scenario", "params", "time"),
}


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


def inspect_file(path: Path, wait_s: float = 0.05) -> tuple[str, str]:
    """What the file at ``path`` is, without writing to it: ``("empty", "")`` (missing, empty,
    or an SQLite database without tables: skelpy may create its tables), ``("ours", "")`` (a
    store of this schema version with the expected columns) or ``("foreign", why)``."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except FileNotFoundError:
        return "empty", ""
    if not head:
        return "empty", ""
    if head != b"SQLite format 3\x00":
        return "foreign", "not an SQLite database"
    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True,
                           timeout=wait_s, check_same_thread=False)
    try:
        tables = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables - {"sqlite_sequence"}:
            return "empty", ""
        if "meta" not in tables:
            return "foreign", ("an SQLite database of another program (tables: "
                               + ", ".join(sorted(tables)[:6]) + ")")
        if _columns(conn, "meta") != COLUMNS["meta"]:
            return "foreign", "its meta table has other columns"
        row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        version = None if row is None else row[0]
        if version is None or str(version).strip() != str(SCHEMA_VERSION):
            return "foreign", (f"schema version {version!r}; this skelpy reads and writes "
                               f"version {SCHEMA_VERSION}")
        for table, cols in COLUMNS.items():
            have = _columns(conn, table)
            if have != cols:
                return "foreign", (f"table {table} has columns ({', '.join(have) or 'none'})"
                                   f", expected ({', '.join(cols)})")
        return "ours", ""
    finally:
        conn.close()


def _columns(conn: sqlite3.Connection, table: str) -> tuple[str, ...]:
    return tuple(r[1] for r in conn.execute(f"PRAGMA table_info({table})"))  # noqa: S608


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
