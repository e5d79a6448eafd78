"""A tuning store skelpy does not understand (another schema version, other columns, another
program's database, not SQLite at all) is left untouched: every call works in every mode,
with one warning, tuning data stays in memory, and ``skelpy cache info`` says what it found."""

from __future__ import annotations

import hashlib
import sqlite3
import warnings

import numpy as np
import pytest
from test_tuner_support import FakeKernel, cache_dir, make_request  # noqa: F401

from skelpy import cli, tuner
from skelpy.tuner import store as tstore
from skelpy.tuner.store_format import SCHEMA_SQL


def _our_schema_with(conn: sqlite3.Connection, version) -> None:
    conn.executescript(SCHEMA_SQL)
    conn.execute("INSERT INTO meta VALUES ('schema', ?)", (version,))
    conn.commit()


def _versioned(version):
    def make(conn):
        _our_schema_with(conn, version)
    return make


def _other_columns(conn):
    _our_schema_with(conn, "1")
    conn.execute("DROP TABLE measurements")
    conn.execute("CREATE TABLE measurements (id INTEGER PRIMARY KEY, scenario TEXT, "
                 "params TEXT, seconds REAL)")            # no n, no time
    conn.commit()


def _other_program(conn):
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)")
    conn.execute("INSERT INTO photos (path) VALUES ('holiday.jpg')")
    conn.commit()


FOREIGN = {
    "version 2.0": (_versioned("2.0"), "'2.0'"),
    "version v2-beta": (_versioned("v2-beta"), "'v2-beta'"),
    "version empty": (_versioned(""), "''"),
    "version NULL": (_versioned(None), "None"),
    "version integer 7": (_versioned(7), "7"),
    "same version, other columns": (_other_columns, "table measurements has columns"),
    "another program's database": (_other_program, "another program"),
}


def _make(cache_dir, build):  # noqa: F811
    cache_dir.mkdir(parents=True, mode=0o700)
    path = cache_dir / tstore.DB_NAME
    if callable(build):
        conn = sqlite3.connect(str(path))
        build(conn)
        conn.close()
    else:
        path.write_bytes(build)
    tstore.reset_store()
    return path


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tables(path) -> set[str]:
    conn = sqlite3.connect(str(path))
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()


@pytest.mark.parametrize("case", list(FOREIGN))
def test_a_foreign_store_is_left_untouched_and_every_mode_works(case, cache_dir,  # noqa: F811
                                                                capsys):
    build, why = FOREIGN[case]
    path = _make(cache_dir, build)
    before, tables = _digest(path), _tables(path)
    kern = FakeKernel(refuse=[{"wg": 64, "coarsen": 1, "blocked": 0}])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for mode in ("off", "model", "online", "exhaustive", "model"):
            with tuner.tuning(mode):
                out = tuner.execute(make_request(kern))
            np.testing.assert_array_equal(out.result, kern.expected)
    ours = [str(w.message) for w in caught if "tuning store" in str(w.message)]
    assert len(ours) == 1 and why in ours[0], ours
    store = tstore.get_store()
    assert store.degraded and why in store.foreign
    assert store.count_measurements() > 10                 # tuning went on, in memory
    assert _digest(path) == before and _tables(path) == tables
    assert cli.main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "not used" in out and why in out


def test_a_file_that_is_not_sqlite_is_reported_not_crashed_on(cache_dir, capsys):  # noqa: F811
    path = _make(cache_dir, b"PK\x03\x04 definitely not a database" * 50)
    before = _digest(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(["cache", "info"]) == 0
        assert cli.main(["cache", "clear", "--yes"]) == 0
    assert "not an SQLite database" in capsys.readouterr().out
    assert _digest(path) == before


def test_an_sqlite_file_without_tables_becomes_a_store(cache_dir):  # noqa: F811
    path = _make(cache_dir, lambda conn: conn.execute("PRAGMA user_version=0"))
    kern = FakeKernel()
    with tuner.tuning("exhaustive"):
        tuner.execute(make_request(kern))
    store = tstore.get_store()
    assert not store.degraded and store.count_measurements() > 10
    assert {"meta", "measurements", "refusals"} <= _tables(path)
