"""``skelpy tune``'s budgeted run: the programs a budget buys, every kind measured, a model
trained, and an interrupted run resumed without measuring anything twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from test_tuner_support import cache_dir  # noqa: F401

from skelpy import tuner
from skelpy.tuner import budget, synthetic
from skelpy.tuner import store as tstore


@pytest.fixture(autouse=True)
def _isolated(cache_dir):  # noqa: F811
    yield


def test_a_budget_buys_every_kind_and_more_programs_as_it_grows():
    for kind in ("gpu", "cpu"):
        small = budget.programs(kind, 0.1)
        assert {p.kind for p in small} == set(synthetic.KINDS)
        big = budget.programs(kind, budget.DEFAULT_MINUTES[kind] * 2)
        assert len(big) > len(small)
        assert [c.name for p in big for c in p.cases] == \
            [c.name for p in budget.programs(kind, budget.DEFAULT_MINUTES[kind] * 2)
             for c in p.cases]                                       # deterministic
        # every program at two sizes of one kernel (the second one costs little)
        for p in big:
            assert len(p.cases) == 2 and len({c.source for c in p.cases}) == 1
        # kinds interleave: the first programs cover every kind
        assert {p.kind for p in big[:len(synthetic.KINDS)]} == set(synthetic.KINDS)
    assert budget.programs("cpu", 0.1, kinds=["map", "scan"])[0].kind == "map"


def _kit():
    from skelpy import containers, skeletons

    return synthetic.Toolkit.from_modules(skeletons, containers)


def _tiny(monkeypatch, limits=(2,)):
    """Tiny data and at most ``limits[-1]`` points per scenario (every point of a space is
    its own program build: a cold PoCL compiles each for about a second). The budget's
    minutes stay an upper bound; a run whose rounds are all done ends early."""
    monkeypatch.setenv("SKELPY_TUNE_PRETRAINED", "off")
    monkeypatch.setattr(budget, "SIZES", {"cpu": ((64, 128), (1 << 12, 1 << 13), (32, 64)),
                                          "gpu": ((64, 128), (1 << 12, 1 << 13), (32, 64))})
    monkeypatch.setattr(budget, "ROUND_LIMITS", tuple(limits))


def test_a_small_budget_measures_each_kind_and_trains_a_model(monkeypatch):
    from skelpy import runtime

    _tiny(monkeypatch)
    dev = runtime.current_device()
    lines: list[str] = []
    t0 = time.perf_counter()
    rep = budget.run(_kit(), dev, minutes=2.0, progress=lines.append,
                     chosen=budget.programs("cpu", 0.1, kinds=["map", "scan"]))
    assert time.perf_counter() - t0 < 2.0 * 60
    assert rep.rounds >= 1 and lines and "round 1" in lines[0]
    assert set(rep.per_kind) == {"map", "scan"} and rep.scenarios == 4 and not rep.failed
    store = tstore.get_store()
    # a row per point swept, and one more per point measured again, interleaved, at the end
    assert rep.measured > 0 and 0 < rep.refined <= rep.measured
    assert store.count_measurements(dev.key) == rep.measured + rep.refined
    assert any("measured" in ln and "again" in ln for ln in lines)
    m = tuner.manager().get(dev.key)
    assert {"wg,coarsen,blocked,vw", "wg,items,method"} <= set(m.groups)
    assert all(g.origin == "local" for g in m.groups.values())


def _rows(path) -> list[tuple[str, str]]:
    import sqlite3

    conn = sqlite3.connect(str(path))
    try:
        return conn.execute("SELECT scenario, params FROM measurements ORDER BY id").fetchall()
    finally:
        conn.close()


def test_an_interrupted_tune_resumes_without_measuring_again(monkeypatch, cache_dir,  # noqa: F811
                                                            capsys):
    """``skelpy tune`` interrupted (KeyboardInterrupt, as Ctrl-C raises it) in the middle
    of its sweeps, then run again: the second run says what it has already, measures on,
    and measures no point the first one did (as Kernel Tuner's cache does). The real
    signal, in a subprocess: the SKELPY_HEAVY test below."""
    from skelpy import cli

    _tiny(monkeypatch, limits=(2, 4))
    sweeps = {"n": 0}
    real = budget.sweep

    def interrupted(*a, **kw):
        sweeps["n"] += 1
        if sweeps["n"] == 3:
            raise KeyboardInterrupt
        return real(*a, **kw)

    cmd = ["tune", "--synthetic", "2", "--kinds", "map", "--sizes-1d", "4096", "--minutes", "2",
           "--no-train", "--quiet"]
    monkeypatch.setattr(budget, "sweep", interrupted)
    assert cli.main(cmd) == 130
    assert "interrupted" in capsys.readouterr().out
    tstore.get_store().flush(timeout=30)
    db = cache_dir / tstore.DB_NAME
    first = _rows(db)
    assert first
    monkeypatch.setattr(budget, "sweep", real)
    assert cli.main(cmd) == 0
    assert "already: not taken again" in capsys.readouterr().out
    tstore.get_store().flush(timeout=30)
    second = _rows(db)[len(first):]
    assert second                                    # it went on measuring ...
    swept = {r for r in second if r not in first}
    assert swept and not set(first) & swept          # ... nothing it had measured before


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("SKELPY_HEAVY"), reason="SKELPY_HEAVY=1: a minute of "
                    "stencil builds in two subprocesses")
def test_an_interrupted_tune_resumes_after_a_real_sigint(tmp_path):
    """Ctrl-C in the middle of ``skelpy tune``, then ``skelpy tune`` again: the second run
    measures only points the first did not (as Kernel Tuner's cache does)."""
    env = dict(os.environ, SKELPY_CACHE_DIR=str(tmp_path / "cache"),
               SKELPY_TUNE_PRETRAINED="off", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "skelpy.cli", "tune", "--minutes", "0.6", "--kinds",
           "stencil", "--no-train", "--quiet"]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    db = tmp_path / "cache" / tstore.DB_NAME
    deadline = time.time() + 120
    while time.time() < deadline:                   # wait until it has measured something
        time.sleep(1.0)
        if db.exists() and len(_rows(db)) >= 5:
            break
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert "interrupted" in out, out
    first = _rows(db)
    assert first, out
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "already: not taken again" in r.stdout
    second = _rows(db)[len(first):]
    assert second, r.stdout                          # it went on measuring ...
    assert not set(first) & set(second)             # ... nothing it had measured before


def test_tune_synthetic_within_minutes_trains_a_model_inside_its_budget(capsys, monkeypatch):
    """Issue 18's first finding: ``skelpy tune --synthetic N --minutes M`` swept the first
    programs fully and trained nothing. Now the N programs are measured round-robin (every
    kind measured in the first round) and the model is trained, all within M minutes; the
    output says what was measured and trained."""
    from skelpy import cli, runtime

    monkeypatch.setattr(budget, "ROUND_LIMITS", (2, 3))      # a few builds: cold-cheap
    minutes = 0.4
    t0 = time.perf_counter()
    rc = cli.main(["tune", "--synthetic", "5", "--kinds", "map,scan,stencil", "--sizes-1d",
                   "4096,8192", "--sizes-2d", "48,64", "--minutes", str(minutes), "--quiet"])
    took = time.perf_counter() - t0
    out = capsys.readouterr().out
    assert rc == 0, out
    assert took < 60 * minutes + 10, out               # the slack: building the first points
    assert "training included" in out and "trained" in out and "budget" in out
    assert "map" in out and "scan" in out and "stencil" in out
    dev = runtime.current_device()
    m = tuner.manager().get(dev.key)
    assert m is not None and not m.pretrained and m.n_measurements > 0
    # every signature measured here was trained and checked on this device's own kernels
    # (a model from thin data leaves the default only where it beat it: validation.py)
    checked = [g for g in m.groups.values() if g.validation]
    assert checked and "checked on" in out
    assert all(g.validation["use"] in ("local", "shipped", "default") for g in checked)
