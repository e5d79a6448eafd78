"""Cost-model coefficients: fitting, JSON round trips and validation, the files they live in."""

from __future__ import annotations

import json
import math
import os
import stat
import warnings

import numpy as np
import pytest
from costmodel_support import coefficients
from hypothesis import given, settings
from hypothesis import strategies as st

from skelpy.costmodel import files, registry
from skelpy.costmodel.calibrate import COLUMNS, KERNEL_WORK, fit_classes, fit_line
from skelpy.costmodel.terms import CoefficientError, DeviceCoefficients, Line


def test_line_is_zero_for_nothing_and_linear_otherwise():
    line = Line(5e-6, 2e-10)
    assert line(0) == 0.0
    assert line(1000) == pytest.approx(5e-6 + 2e-7)
    assert line(2000) - line(1000) == pytest.approx(2e-7)


@given(lat=st.floats(1e-7, 1e-3), per=st.floats(1e-12, 1e-8),
       noise=st.lists(st.floats(-0.01, 0.01), min_size=6, max_size=6))
@settings(max_examples=40, deadline=None)
def test_fit_line_recovers_a_line_from_noisy_points(lat, per, noise):
    xs = [2.0 ** k for k in (10, 13, 16, 19, 22, 25)]
    ts = [(lat + per * x) * (1 + e) for x, e in zip(xs, noise)]
    fit = fit_line(xs, ts)
    # relative errors of 1% at each point: every fitted time within a few percent
    for x, t in zip(xs, ts):
        assert fit(x) == pytest.approx(t, rel=0.05)
    assert fit.latency >= 0 and fit.per_unit >= 0


def test_fit_line_never_goes_negative():
    fit = fit_line([1, 2, 3], [3.0, 2.0, 1.0])          # falling: noise, no slope
    assert fit.per_unit == 0.0 and fit.latency > 0
    fit = fit_line([1e3, 1e6], [1e-9, 1e-3])             # steep: no negative latency
    assert fit.latency >= 0 and fit.per_unit > 0


def test_fit_classes_recovers_known_costs_exactly():
    rng = np.random.default_rng(3)
    truth = {c: float(rng.uniform(1e-12, 1e-9)) for c in COLUMNS}
    slopes = {k: sum(truth[c] * u for c, u in w.items()) for k, w in KERNEL_WORK.items()}
    got = fit_classes(slopes)
    for c in COLUMNS:
        assert got[c] == pytest.approx(truth[c], rel=1e-3), c


def test_fit_classes_keeps_costs_non_negative_under_noise():
    # a copy that timed faster than a write (a busy CPU): no negative read cost
    truth = dict.fromkeys(COLUMNS, 1e-10)
    slopes = {k: sum(truth[c] * u for c, u in w.items()) for k, w in KERNEL_WORK.items()}
    slopes["copy"] = slopes["write"] * 0.8
    got = fit_classes(slopes)
    assert all(v >= 0 for v in got.values())
    assert got["alu32"] == pytest.approx(1e-10, rel=0.05)


def test_json_round_trip():
    c = coefficients(extra={"note": "x", "n": 3, "bad": [1, 2]})
    back = DeviceCoefficients.from_json(json.loads(json.dumps(c.to_json())))
    assert back.to_json() == c.to_json()
    assert "bad" not in back.extra
    bw = back.bandwidths()
    assert bw["h2d"] == pytest.approx(10.0) and bw["d2h_pinned"] == pytest.approx(1 / 0.9 * 10)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d.update(version=99), "version"),
    (lambda d: d.update(h2d=[1e-5]), "h2d"),
    (lambda d: d.update(h2d=["1", 2]), "h2d"),
    (lambda d: d.update(launch=[float("nan"), 0.0]), "not finite"),
    (lambda d: d.update(launch=[-1.0, 0.0]), "outside"),
    (lambda d: d["memory"].pop("gathered"), "missing gathered"),
    (lambda d: d["ops"].update(div=True), "ops.div"),
    (lambda d: d.update(overlap=1.5), "overlap"),
    (lambda d: d.update(device_key=None), "device_key"),
    (lambda d: d.update(work_item=[0.0, 1e9]), "outside"),
])
def test_malformed_coefficients_are_rejected(edit, message):
    d = coefficients().to_json()
    edit(d)
    with pytest.raises(CoefficientError, match=message):
        DeviceCoefficients.from_json(d)
    with pytest.raises(CoefficientError):
        DeviceCoefficients.from_json([1, 2, 3])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(tmp_path / "cache"))
    registry.forget()
    files._warned.clear()
    yield tmp_path / "cache"
    registry.forget()


def test_coefficients_are_stored_privately_and_read_back(cache):
    c = coefficients()
    registry.remember(c)
    path = files.path_of(c.device_key)
    assert path.parent == cache / "costmodel"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    registry.forget()
    back = registry.stored(c.device_key)
    assert back is not None and back.to_json() == c.to_json()
    assert registry.stored("another | device") is None


def test_damaged_or_foreign_files_are_ignored(cache):
    c = coefficients()
    registry.remember(c)
    path = files.path_of(c.device_key)
    registry.forget()
    path.write_text("{ not json")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert registry.stored(c.device_key) is None
    assert any("not read" in str(w.message) for w in caught)
    d = c.to_json()
    d["device_key"] = "someone | else"                 # a file of another device
    path.write_text(json.dumps(d))
    assert registry.stored(c.device_key) is None


def test_a_symlinked_file_is_not_followed(cache, tmp_path):
    c = coefficients()
    registry.remember(c)
    path = files.path_of(c.device_key)
    registry.forget()
    target = tmp_path / "planted.json"
    target.write_text(json.dumps(c.to_json()))
    path.unlink()
    path.symlink_to(target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert registry.stored(c.device_key) is None
    # writing replaces the link itself, never the file it points to
    registry.remember(coefficients(overlap=0.5))
    assert not path.is_symlink()
    assert json.loads(target.read_text())["overlap"] == 0.25


def test_an_unwritable_folder_degrades_to_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "file-not-folder"
    blocker.write_text("x")
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(blocker))
    registry.forget()
    files._warned.clear()
    c = coefficients()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry.remember(c)
    assert any("kept in memory" in str(w.message) for w in caught)
    assert registry.stored(c.device_key) is c
    registry.forget()


def test_bandwidth_of_a_free_transfer_is_infinite():
    c = coefficients(h2d=Line(0.0, 0.0))
    assert math.isinf(c.bandwidths()["h2d"])
