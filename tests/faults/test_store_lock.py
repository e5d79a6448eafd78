"""A store whose write lock another process holds (``BEGIN IMMEDIATE`` then sleep) never
stalls a skeleton call: opening reads only, reads never wait for the writer, and writes are
queued (one warning) and land once the lock is free."""

from __future__ import annotations

import sqlite3
import time
import warnings

import numpy as np
import pytest
from test_tuner_support import FakeKernel, cache_dir, hold_write_lock, make_request  # noqa: F401

from skelpy import tuner
from skelpy.tuner import store as tstore


@pytest.fixture
def locked(cache_dir):  # noqa: F811
    """The store of ``cache_dir`` (with our tables), its write lock held by a child process;
    yields a function that releases it."""
    tstore.get_store().record_measurement(
        tstore.ScenarioRecord("other", "dev", {}, "k", "map", {}, {"n": 1.0}), {"wg": 1}, 1e-3)
    tstore.reset_store()
    release = hold_write_lock(
        cache_dir / tstore.DB_NAME,
        "INSERT OR REPLACE INTO meta VALUES ('locker', 'holding the write lock')")
    yield release
    release()


def _rows_in_file(path, scenario=None) -> int:
    conn = sqlite3.connect(str(path))
    try:
        if scenario is None:
            return conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
        return conn.execute("SELECT COUNT(*) FROM measurements WHERE scenario=?",
                            (scenario,)).fetchone()[0]
    finally:
        conn.close()


def test_opening_a_locked_store_does_not_wait(locked, cache_dir):  # noqa: F811
    t0 = time.perf_counter()
    s = tstore.get_store()
    assert s.count_measurements() == 1                   # reads go on under the lock
    assert time.perf_counter() - t0 < 1.0
    assert not s.degraded and not s.foreign


@pytest.mark.parametrize("mode", ["off", "model", "online"])
def test_a_skeleton_call_returns_within_a_second(mode, locked, cache_dir, tmp_path,  # noqa: F811
                                                  monkeypatch):
    import skelpy as sk

    x = np.arange(10_007, dtype=np.float32)
    f = sk.Map(lambda v: v * 2 + 1)
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(tmp_path / "warm-up"))
    f(x)                                           # builds the program, elsewhere
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(cache_dir))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tuner.tuning(mode):
            t0 = time.perf_counter()
            out = f(x)
            elapsed = time.perf_counter() - t0
    np.testing.assert_array_equal(out.to_numpy(), x * 2 + 1)
    assert elapsed < 1.0, f"{mode}: the call took {elapsed:.2f} s under a held lock"
    busy = [w for w in caught if "locked by another process" in str(w.message)]
    store = tstore.get_store()
    if mode == "online":                           # it measured: its rows wait in the queue
        assert len(busy) == 1 and store.queued >= 1
        scn = store.scenarios()                    # the file does not have them yet ...
        assert all(s["device"] == "dev" for s in scn)
        locked()
        assert store.flush(timeout=10)             # ... and gets them once the lock is free
        assert _rows_in_file(cache_dir / tstore.DB_NAME) >= 2
    else:
        assert busy == [] and store.queued == 0


def test_an_exhaustive_sweep_under_a_held_lock_queues_and_lands(locked, cache_dir):  # noqa: F811
    kern = FakeKernel()
    req = make_request(kern)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        with tuner.tuning("exhaustive"):
            out = tuner.execute(req)
        elapsed = time.perf_counter() - t0
        np.testing.assert_array_equal(out.result, kern.expected)
        # a second call sees its own queued measurements: the sweep's best, not a new sweep
        kern.calls.clear()
        out2 = tuner.execute(req)
    assert out2.params == {"wg": 32, "coarsen": 2, "blocked": 0} and len(kern.calls) == 1
    assert elapsed < 5.0
    assert len([w for w in caught if "locked by another process" in str(w.message)]) == 1
    points = len(req.space.points())
    # a row per point from the sweep, one more per point its confirmation round re-measured
    queued = tstore.get_store().queued
    assert points <= queued <= points + 3
    locked()
    assert tstore.get_store().flush(timeout=10)
    assert _rows_in_file(cache_dir / tstore.DB_NAME, tuner.scenario_id(req)) == queued
