"""The SQLite tuning store: round trips, several processes at once, corrupt and unwritable
stores (one warning, results unaffected), export/import."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sqlite3
import warnings

import numpy as np
import pytest
from test_tuner_support import FakeKernel, cache_dir, make_request  # noqa: F401

from skelpy import tuner
from skelpy.tuner import store as tstore


@pytest.fixture(autouse=True)
def _isolated(cache_dir):  # noqa: F811
    yield


def _rec(key="scn-1", device="dev-1", kernel="k-1"):
    return tstore.ScenarioRecord(key, device, {"dev_is_gpu": 1.0}, kernel, "map",
                                 {"ops_add": 2.0}, {"n": 1024.0}, {"params": [], "default": {}})


def test_round_trip_best_and_aggregation(cache_dir):  # noqa: F811
    s = tstore.get_store()
    assert s.path == cache_dir / "tuning.sqlite" and not s.degraded
    rec = _rec()
    s.record_measurements(rec, [({"wg": 32}, 2e-3, 5), ({"wg": 64}, 1e-3, 5)])
    s.record_measurement(rec, {"wg": 64}, 3e-3, 1)        # a noisy single sample
    s.record_measurement(rec, {"wg": 64}, 1.2e-3, 3)
    meas = s.measurements("scn-1")
    assert meas[tstore.params_json({"wg": 32})] == (2e-3, 5)
    med, n = meas[tstore.params_json({"wg": 64})]
    assert n == 9 and med == pytest.approx(1e-3)   # weighted median (5 of 9 samples), not the mean
    assert s.best("scn-1") == ({"wg": 64}, pytest.approx(1e-3))
    s.record_refusal(rec, {"wg": 64})
    s.record_refusal(rec, {"wg": 64})                       # idempotent
    assert s.refusals("scn-1") == [{"wg": 64}]
    assert s.best("scn-1") == ({"wg": 32}, pytest.approx(2e-3))
    assert s.count_measurements("dev-1") == 4 and s.count_measurements("other") == 0
    assert s.devices() == {"dev-1": {"dev_is_gpu": 1.0}}
    [scn] = s.scenarios("dev-1")
    assert scn["kernel_features"] == {"ops_add": 2.0} and scn["dataset"] == {"n": 1024.0}
    # non-finite or non-positive times are not measurements
    s.record_measurements(rec, [({"wg": 8}, float("nan"), 1), ({"wg": 8}, 0.0, 1)])
    assert tstore.params_json({"wg": 8}) not in s.measurements("scn-1")


def test_env_change_reopens_the_store(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(a))
    tstore.get_store().record_measurement(_rec(), {"wg": 1}, 1e-3)
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(b))
    assert tstore.get_store().path == b / "tuning.sqlite"
    assert tstore.get_store().count_measurements() == 0
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(a))
    assert tstore.get_store().count_measurements() == 1


def _writer(directory: str, worker: int, count: int) -> None:
    os.environ["SKELPY_CACHE_DIR"] = directory
    tstore.reset_store()
    s = tstore.get_store()
    assert not s.degraded, s.reason
    rec = _rec(key=f"scn-{worker % 2}")          # two workers share each scenario
    for i in range(count):
        s.record_measurement(rec, {"worker": worker, "i": i}, 1e-3 + i * 1e-6, 1)
        if i % 10 == 0:
            s.record_refusal(rec, {"worker": worker, "i": i})
    assert s.flush(timeout=30)        # writes queued behind the others' locks are written


def test_several_processes_writing_at_once_lose_nothing(cache_dir):  # noqa: F811
    ctx = mp.get_context("fork")
    workers, count = 4, 40
    tstore.reset_store()
    procs = [ctx.Process(target=_writer, args=(str(cache_dir), w, count))
             for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    s = tstore.get_store()
    assert s.count_measurements() == workers * count
    assert s.info()["refusals"] == workers * (count // 10)
    got = {(json.loads(p)["worker"], json.loads(p)["i"])
           for scn in ("scn-0", "scn-1") for p in s.measurements(scn)}
    assert got == {(w, i) for w in range(workers) for i in range(count)}
    conn = sqlite3.connect(str(cache_dir / "tuning.sqlite"))
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def _run_twice_expecting_one_warning():
    kern = FakeKernel()
    req = make_request(kern)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for mode in ("model", "exhaustive", "model"):
            with tuner.tuning(mode):
                out = tuner.execute(req)
            np.testing.assert_array_equal(out.result, kern.expected)
        tstore.get_store().record_refusal(_rec(), {"wg": 1})
    ours = [w for w in caught if "tuning store" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert tstore.get_store().degraded
    # tuning still works, in memory: a row per point, and one more per point the sweep's
    # confirmation round re-measured
    rows = tstore.get_store().count_measurements()
    assert len(req.space.points()) <= rows <= len(req.space.points()) + 3
    assert len(tstore.get_store().measurements(tuner.scenario_id(req))) == \
        len(req.space.points())
    return out


def test_corrupt_store_degrades_to_memory_with_one_warning(cache_dir):  # noqa: F811
    cache_dir.mkdir(parents=True)
    (cache_dir / "tuning.sqlite").write_bytes(b"this is not a database" * 100)
    tstore.reset_store()
    out = _run_twice_expecting_one_warning()
    assert out.source == "cache"


def test_unwritable_cache_dir_degrades_with_one_warning(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(blocker / "cache"))   # mkdir must fail
    tstore.reset_store()
    _run_twice_expecting_one_warning()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root ignores file permissions")
def test_read_only_store_degrades_with_one_warning(cache_dir):  # noqa: F811
    tstore.get_store().record_measurement(_rec(), {"wg": 1}, 1e-3)
    tstore.reset_store()
    os.chmod(cache_dir, 0o500)
    try:
        _run_twice_expecting_one_warning()
    finally:
        os.chmod(cache_dir, 0o700)


def test_export_import_round_trip_merges(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(a))
    kern = FakeKernel(refuse=[{"wg": 8, "coarsen": 1, "blocked": 0}])
    with tuner.tuning("exhaustive"):
        tuner.execute(make_request(kern))
    data = tstore.get_store().export_data()
    json.dumps(data)                                       # plain JSON
    assert data["refusals"] and len(data["measurements"]) > 10
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(b))
    sb = tstore.get_store()
    sb.record_measurement(_rec(key="local"), {"wg": 2}, 1e-3)     # b has data of its own
    added = sb.import_data(data)
    assert added["measurements"] == len(data["measurements"]) and added["refusals"] == 1
    again = sb.import_data(data)                          # importing twice adds nothing
    assert again == {"measurements": 0, "refusals": 0, "scenarios": 0}
    out = sb.export_data()
    assert len(out["measurements"]) == len(data["measurements"]) + 1
    key = data["scenarios"][0]["key"]
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(a))
    assert tstore.get_store().measurements(key) == sb.measurements(key)
    with pytest.raises(ValueError):
        sb.import_data({"devices": []})


def test_clear_empties_everything(cache_dir):  # noqa: F811
    s = tstore.get_store()
    s.record_measurement(_rec(), {"wg": 1}, 1e-3)
    s.record_refusal(_rec(), {"wg": 2})
    s.clear()
    info = s.info()
    assert info["measurements"] == info["refusals"] == info["scenarios"] == 0
