"""The tuning store's queue of writes waiting for another process's lock: its row count
(``StoreFile.queued``, what ``skelpy cache`` shows and what bounds the queue) always equals the
rows of the writes still queued, while the background writer drains it, after a queued write
that fails, and after the queue is dropped; a failed write never blocks those behind it."""

from __future__ import annotations

import sqlite3
import threading
import time
import warnings

import pytest
from test_tuner_support import hold_write_lock

from skelpy.tuner import store_file
from skelpy.tuner.store_file import StoreFile


@pytest.fixture
def held(tmp_path):
    """A store file whose write lock a child process holds; yields (store, release)."""
    sf = StoreFile(tmp_path)
    release = hold_write_lock(sf.path)
    yield sf, release
    release()
    sf.close()


def insert(tag: str, rows: int, gate: threading.Event | None = None):
    """A write of ``rows`` measurement rows (scenario ``tag``), its overlay, its row count;
    with ``gate`` the write waits for it inside its transaction (the writer is then busy
    with it while the test looks at the queue)."""
    def fn(conn):
        if gate is not None:
            assert gate.wait(20)
        conn.executemany("INSERT INTO measurements (scenario, params, seconds, n, time) "
                         "VALUES (?, '{}', 1.0, 1, 0.0)", [(tag,)] * rows)
    return fn, tuple(("m", tag, "{}", 1.0, 1) for _ in range(rows)), rows


def overlay_rows(sf: StoreFile, tags) -> int:
    return sum(len(sf.queued_for(t, "m")) for t in tags)


def rows_in_file(sf: StoreFile) -> dict:
    conn = sqlite3.connect(str(sf.path))
    try:
        return dict(conn.execute("SELECT scenario, COUNT(*) FROM measurements "
                                 "GROUP BY scenario").fetchall())
    finally:
        conn.close()


def test_the_count_follows_the_queue_while_it_drains(held):
    # was: a queued write was recorded as one row whatever it held, so once the writer had
    # written the first (5 rows), the count fell to the number of writes left (2, not 10)
    sf, release = held
    gate = threading.Event()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)        # "locked by another process"
        for tag, g in (("a", None), ("b", gate), ("c", None)):
            fn, overlay, rows = insert(tag, 5, g)
            assert sf.write(fn, overlay, rows) is None         # queued, not written
    assert sf.queued == overlay_rows(sf, "abc") == 15
    release()
    for _ in range(400):                   # the writer has written "a" and waits inside "b"
        if sf.queued_for("a", "m") == []:
            break
        time.sleep(0.05)
    assert sf.queued == overlay_rows(sf, "abc") == 10
    gate.set()
    assert sf.flush(timeout=20)
    assert sf.queued == overlay_rows(sf, "abc") == 0
    assert rows_in_file(sf) == {"a": 5, "b": 5, "c": 5}


def test_the_queue_limit_counts_rows(held, monkeypatch):
    sf, release = held
    monkeypatch.setattr(store_file, "QUEUE_MAX_ROWS", 12)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for tag in "abc":
            sf.write(*insert(tag, 5))                          # "c" would make 15 > 12
    assert sf.queued == overlay_rows(sf, "abc") == 10 and sf.queued_for("c", "m") == []
    assert any("queue is full" in str(w.message) for w in caught)
    release()
    assert sf.flush(timeout=20) and sf.queued == 0
    assert rows_in_file(sf) == {"a": 5, "b": 5}


def test_a_queued_write_that_fails_is_dropped_and_the_rest_lands(held):
    # was: the failing write stayed first in the queue: every drain raised again (flush()
    # raised, the background writer stopped), so nothing behind it was ever written
    sf, release = held

    def broken(conn):
        raise ValueError("a bug in a queued write")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sf.write(broken, (("m", "x", "{}", 1.0, 1),), 1)
        sf.write(*insert("y", 3))
        assert sf.queued == overlay_rows(sf, "xy") == 4
        release()
        assert sf.flush(timeout=20)
    assert sf.queued == overlay_rows(sf, "xy") == 0
    assert rows_in_file(sf) == {"y": 3}
    assert any("a bug in a queued write" in str(w.message) for w in caught)
    assert not sf.degraded                     # the store itself is fine
    sf.write(*insert("z", 2))                  # and takes writes at once again
    assert rows_in_file(sf) == {"y": 3, "z": 2}


def test_dropping_the_queue_resets_the_count(held):
    sf, release = held
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sf.write(*insert("a", 4))
        sf.drop_queue()
        assert sf.queued == overlay_rows(sf, "a") == 0
        sf.write(*insert("b", 2))
        assert sf.queued == overlay_rows(sf, "ab") == 2
    release()
    assert sf.flush(timeout=20) and sf.queued == 0
    assert rows_in_file(sf) == {"b": 2}
