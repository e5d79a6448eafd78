"""The ``skelpy`` command line, called through ``main([...])``."""

from __future__ import annotations

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


def test_devices_lists_the_opencl_devices(capsys):
    from skelpy import runtime

    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert runtime.devices()[0].name in out and "max wg" in out


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
    assert cli.main(["cache", "clear"]) == 0
    assert tstore.get_store().count_measurements() == 0
    assert cli.main(["cache", "import", str(f)]) == 0
    assert tstore.get_store().count_measurements() == n
    assert tstore.get_store().info()["refusals"] == 1
    assert "imported" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli.main(["cache", "import", str(bad)]) == 1
    assert cli.main(["cache", "export"]) == 2


def test_tune_trains_models_from_the_store(cache_dir, capsys):  # noqa: F811
    assert cli.main(["tune"]) == 0
    assert "nothing measured yet" in capsys.readouterr().out
    _sweep("kern-a")
    _sweep("kern-b")
    assert cli.main(["tune"]) == 0
    out = capsys.readouterr().out
    assert "trained FakeCL" in out and "[wg,coarsen,blocked] 2 scenarios" in out
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


def test_parser_rejects_unknown_commands():
    with pytest.raises(SystemExit):
        cli.main(["frobnicate"])
