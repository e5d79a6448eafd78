"""The ``skelpy`` command line, called through ``main([...])``."""

from __future__ import annotations

import io
import json

import pytest
from test_tuner_support import FakeKernel, cache_dir, make_request  # noqa: F401

from skelpy import cli, tuner
from skelpy.tuner import store as tstore


@pytest.fixture(autouse=True)
def _isolated(cache_dir):  # noqa: F811
    yield


def _sweep(kernel_key="kern-a", refuse=()):
    kern = FakeKernel(refuse=refuse)
    with tuner.tuning("exhaustive"):
        tuner.execute(make_request(kern, kernel_key=kernel_key))


def test_devices_lists_the_opencl_devices_and_names_the_one_used(capsys):
    from skelpy import runtime

    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert runtime.devices()[0].name in out and "max wg" in out
    used = runtime.current_device()
    [marked] = [ln for ln in out.splitlines() if ln.startswith(" *")]
    assert used.name in marked
    assert f"skelpy uses #{runtime.devices().index(used)} {used.name}" in out
    if not any(d.kind == "gpu" for d in runtime.devices()):
        assert "GPU" not in out.replace("no GPU here", "")


def test_devices_reports_a_device_spec_that_matches_nothing():
    import os
    import subprocess
    import sys

    env = dict(os.environ, SKELPY_DEVICE="no-such-device-anywhere")
    r = subprocess.run([sys.executable, "-m", "skelpy.cli", "devices"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "matches no device" in r.stdout


def test_cache_info_export_clear_import(tmp_path, capsys):
    _sweep(refuse=[{"wg": 8, "coarsen": 1, "blocked": 0}])
    n = tstore.get_store().count_measurements()
    assert cli.main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"measurements {n}" in out and "refusals 1" in out and "kern-a" in out
    f = tmp_path / "export.json"
    assert cli.main(["cache", "export", str(f)]) == 0
    data = json.loads(f.read_text())
    assert len(data["measurements"]) == n and len(data["refusals"]) == 1
    assert cli.main(["cache", "clear", "--yes"]) == 0
    assert tstore.get_store().count_measurements() == 0
    assert cli.main(["cache", "import", str(f)]) == 0
    assert tstore.get_store().count_measurements() == n
    assert tstore.get_store().info()["refusals"] == 1
    assert "imported" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli.main(["cache", "import", str(bad)]) == 1
    assert cli.main(["cache", "export"]) == 2


def test_cache_clear_asks_first(capsys, monkeypatch):
    _sweep()
    n = tstore.get_store().count_measurements()
    for answer in ("n\n", ""):                     # "no", and no terminal at all
        monkeypatch.setattr("sys.stdin", io.StringIO(answer))
        assert cli.main(["cache", "clear"]) == 1
        assert tstore.get_store().count_measurements() == n
        assert "nothing deleted" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert cli.main(["cache", "clear"]) == 0
    assert tstore.get_store().count_measurements() == 0


def test_tune_trains_models_from_the_store_and_counts_honestly(cache_dir, capsys,  # noqa: F811
                                                                monkeypatch):
    monkeypatch.setenv("SKELPY_TUNE_PRETRAINED", "off")     # this machine's data only
    assert cli.main(["tune", "--train-only"]) == 0
    assert "nothing measured yet" in capsys.readouterr().out
    _sweep("kern-a")
    _sweep("kern-b")
    rows = tstore.get_store().count_measurements()
    points = len(make_request(FakeKernel()).space.points())
    assert cli.main(["tune", "--train-only"]) == 0
    out = capsys.readouterr().out
    assert "trained FakeCL | Fake Device | 1.0 in " in out
    assert f": 2 measured scenarios, {rows} measurements" in out
    # one training row per measured point of each scenario
    assert f"[wg,coarsen,blocked] 2 scenarios (this device's only), {2 * points} training " \
        "rows" in out
    assert list((cache_dir / "models").glob("*.npz"))


def test_tune_report_prints_a_table_and_draws_a_heatmap(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    _sweep("kern-a", refuse=[{"wg": 256, "coarsen": 1, "blocked": 0}])
    assert cli.main(["tune", "--report", "kern", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "oracle" in out and "(default)" in out and "1 refused" in out
    assert '{"blocked": 0, "coarsen": 2, "wg": 32}' in out.splitlines()[5]   # rank 1 first
    pngs = list(tmp_path.glob("skelpy-report-*.png"))
    assert len(pngs) == 1 and pngs[0].stat().st_size > 1000
    assert cli.main(["tune", "--report", "no-such-kernel"]) == 1


def test_tune_report_writes_into_the_cache_folder_by_default(cache_dir, capsys,  # noqa: F811
                                                             tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    _sweep("kern-a")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["tune", "--report", "kern"]) == 0
    assert not list(tmp_path.glob("*.png"))           # not the current folder
    [png] = list((cache_dir / "reports").glob("skelpy-report-*.png"))
    assert f"heatmap written to {png}" in capsys.readouterr().out


def test_parser_rejects_unknown_commands():
    with pytest.raises(SystemExit):
        cli.main(["frobnicate"])
