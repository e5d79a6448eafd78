"""Synthetic training programs, and the tuner driving a real skeleton end to end."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from test_tuner_support import cache_dir, key  # noqa: F401

from skelpy import tuner
from skelpy.tuner import store as tstore
from skelpy.tuner import synthetic


@pytest.fixture(autouse=True)
def _isolated(cache_dir):  # noqa: F811
    yield


class Window:
    """``nb[dr, dc]`` over a NumPy array around (r, c), clamped at the edges."""

    def __init__(self, a, r, c):
        self.a, self.r, self.c = a, r, c

    def __getitem__(self, rc):
        dr, dc = rc
        rr = min(max(self.r + dr, 0), self.a.shape[0] - 1)
        cc = min(max(self.c + dc, 0), self.a.shape[1] - 1)
        return self.a[rr, cc]


@pytest.mark.parametrize("shape4", [(1, 1, 1, 1), (0, 2, 3, 0), (1, 10, 30, 30)])
def test_simple_stencil_source_is_the_window_mean(shape4):
    n, s, e, w = shape4
    fn = synthetic.compile_muscle(synthetic.stencil_source(n, s, e, w, complex_body=False), "synth")
    a = np.random.default_rng(0).random((40, 70)).astype(np.float32)
    r, c = 20, 35
    want = a[r - n:r + s + 1, c - w:c + e + 1].mean()
    assert fn(Window(a, r, c)) == pytest.approx(want, rel=1e-5)


def test_complex_and_integer_bodies_run():
    a = np.random.default_rng(1).random((9, 9)).astype(np.float32)
    fn = synthetic.compile_muscle(synthetic.stencil_source(2, 2, 2, 2, complex_body=True), "synth")
    assert math.isfinite(fn(Window(a, 4, 4)))
    src = synthetic.stencil_source(1, 1, 1, 1, complex_body=True, dtype="int32")
    assert "//" in src and "math." not in src
    ai = (a * 100).astype(np.int64)
    assert isinstance(synthetic.compile_muscle(src, "synth")(Window(ai, 4, 4)), (int, np.integer))


def test_generated_sources_are_readable_by_inspect():
    import inspect

    fn = synthetic.compile_muscle(synthetic.map_source(3, math_calls=2), "synth")
    assert "math.sin" in inspect.getsource(fn)
    assert fn(np.float32(0.5)) == pytest.approx(fn(0.5))
    z = synthetic.compile_muscle(synthetic.zip_source(2), "synth")
    assert z(1.0, 2.0, 0.5) == pytest.approx(((0.5 + 2) * 1 + 0.25 * 2) * 1 + 0.26 * 2)


def test_generate_is_deterministic_and_keeps_to_the_kinds_asked_for():
    a = synthetic.generate(12, seed=3)
    b = synthetic.generate(12, seed=3)
    assert [c.name for c in a] == [c.name for c in b]
    assert len(a) == 12 and {c.kind for c in a} == set(synthetic.KINDS)
    assert [c.name for c in synthetic.generate(12, seed=4)] != [c.name for c in a]
    assert {c.kind for c in synthetic.generate(6, kinds=["map", "zip"])} == {"map", "zip"}
    assert synthetic.generate(5, kinds=["nothing"]) == []


def test_synthetic_module_does_not_import_skelpy_from_below():
    """The tuner sits below the skeletons: synthetic programs get them handed in."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(synthetic))
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m == "skelpy" or m.startswith(("skelpy.", "..."))]


def _kit():
    from skelpy import containers, skeletons

    return synthetic.Toolkit.from_modules(skeletons, containers)


def test_run_cases_shows_progress_over_programs_and_points(capsys):
    cases = synthetic.generate(2, kinds=["map", "zip"], sizes_1d=(4096,))
    # a budget that ends in the first program's sweep: the second is skipped for time (every
    # point is a program build; a cold PoCL compiles each for about a second)
    res = synthetic.run_cases(cases, _kit(), progress=True, minutes=0.1)
    assert res["done"] + [n for n, _ in res["failed"]] + res["skipped"] == [c.name for c in cases]
    assert res["done"] and not res["failed"]
    err = capsys.readouterr().err
    assert "programs: 100%" in err and "2/2" in err
    # the sweep's own bar counts points: "sweep map <kernel>: ... n/total"
    assert "sweep map" in err and "point" in err
    assert tstore.get_store().count_measurements() >= 2


# -- end to end with a real skeleton ---------------------------------------------------------------


def test_map_end_to_end_refusal_from_the_runtime_hook():
    import skelpy as sk
    from skelpy import runtime

    x = np.arange(5000, dtype=np.float32)
    f = sk.Map(lambda v: v * 3 + 1)
    rt = runtime.current()
    f(x)
    first = dict(f.last_launch.params)
    rt.refuse_hook = lambda skel, params, g, local: params["wg"] == first["wg"]
    try:
        tuner.reset()                          # a new process would decide the same
        out = f(x)
    finally:
        rt.refuse_hook = None
    np.testing.assert_allclose(out.to_numpy(), x * 3 + 1)
    assert f.last_launch.params["wg"] != first["wg"]
    assert first in f.last_launch.refused
    assert f.last_launch.source.endswith("+fallback")
    stored = [r["params"] for r in tstore.get_store().export_data()["refusals"]]
    assert first in stored


def test_map_exhaustive_with_a_deadline_and_online_stay_correct():
    import time

    import skelpy as sk

    x = np.linspace(0, 1, 3000, dtype=np.float32)
    f = sk.Map(lambda v: v * v + 0.5)
    with tuner.tuning("exhaustive"), tuner.sweep_deadline(time.perf_counter() + 0.5):
        out = f(x)
    np.testing.assert_allclose(out.to_numpy(), x * x + 0.5, rtol=1e-6)
    assert f.last_launch.source == "exhaustive"
    assert tstore.get_store().count_measurements() >= 1
    y = np.linspace(0, 1, 200_000, dtype=np.float32)          # another scenario
    with tuner.tuning("online"):
        for _ in range(3):
            np.testing.assert_allclose(f(y).to_numpy(), y * y + 0.5, rtol=1e-6)
    assert tstore.get_store().count_measurements() >= 3


def test_cli_tune_synthetic_runs_and_trains(capsys, monkeypatch):
    from skelpy import cli
    from skelpy.tuner import budget

    monkeypatch.setattr(budget, "ROUND_LIMITS", (3,))       # a few builds: cold-cheap
    monkeypatch.setenv("SKELPY_TUNE_PRETRAINED", "off")      # trains on this run's data only

    rc = cli.main(["tune", "--synthetic", "1", "--kinds", "map", "--sizes-1d", "4096",
                   "--minutes", "0.3", "--quiet"])
    assert rc == 0
    out = capsys.readouterr().out
    found = re.search(r"measured (\d+) new points of 1 scenarios", out)
    assert found and int(found.group(1)) >= 2 and "trained" in out
    assert tstore.get_store().count_measurements() >= int(found.group(1))
