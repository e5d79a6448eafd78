"""A model trained from a new device's own measurements leaves the default only where it beat
the default on that device's own kernels, left out in turn (skelpy/tuner/validation.py)."""

from __future__ import annotations

import json
import math

import numpy as np

from skelpy.tuner import model as tmodel
from skelpy.tuner import model_files, validation, zero_shot
from skelpy.tuner.store import params_json
from skelpy.tuner.sweep import CHUNK, chunks

WG = [32, 64, 128, 256]
CO = [1, 2, 4]
SPACE = {"params": [{"name": "wg", "values": WG}, {"name": "coarsen", "values": CO}],
         "default": {"wg": 256, "coarsen": 1}}
DEFAULT = params_json(SPACE["default"])
OTHER = params_json({"wg": 32, "coarsen": 1})
SIG = "wg,coarsen"
FIT = {"n_estimators": 8}


def _scen(device, kernel, n, feats, times):
    return tmodel.ScenarioData(f"{device}-{kernel}-{n}", kernel, "map",
                               {"dev_is_gpu": 1.0, "log_n": math.log2(n), **feats},
                               SPACE, dict(times), device=device)


def _well_fed(device="New GPU", kernels=10):
    """Whole spaces measured; the best work-group grows with the kernel's ``ops``, and the
    default (256) is best only for ops 3: a model can learn it."""
    out = []
    for i in range(kernels):
        ops = i % 4
        for n in (1 << 16, 1 << 20):
            times = {params_json({"wg": w, "coarsen": c}):
                     1e-9 * n * (1 + abs(math.log2(w) - 5 - ops)) * (1 + 0.1 * math.log2(c))
                     for w in WG for c in CO}
            out.append(_scen(device, f"k{i}", n, {"ops": float(ops)}, times))
    return out


def _thin(device="New GPU", kernels=16, seed=0, points=2):
    """``points`` points per scenario (2: the default and one other, as a 2-minute ``skelpy
    tune`` measures; more: others like it): the other point wins 1.5x on some kernels
    and loses 3x on others, and nothing in the features says which."""
    rng = np.random.default_rng(seed)
    extra = [params_json({"wg": w, "coarsen": c}) for w in WG for c in CO]
    extra = [k for k in extra if k not in (DEFAULT, OTHER)][:max(0, points - 2)]
    out = []
    for i in range(kernels):
        wins = i % 2 == 0
        ops = float(rng.uniform(0, 4))
        for n in (1 << 16, 1 << 20):
            t = 1e-9 * n
            times = {DEFAULT: t, OTHER: t / 1.5 if wins else 3 * t}
            times.update({k: t / 1.5 if w else 3 * t
                          for k, w in zip(extra, rng.random(len(extra)) < 0.5)})
            out.append(_scen(device, f"t{i}", n, {"ops": ops}, times))
    return out


def _pick(m: tmodel.DeviceModel, sd: tmodel.ScenarioData) -> str:
    gm = m.groups[SIG]
    names = sd.names
    cand = tmodel.CandidateSet([dict(zip(names, (w, c))) for w in WG for c in CO], names,
                               tmodel.space_numeric(sd.space))
    i = tmodel.choose(gm, sd.features, cand, set(), approach="speedup",
                      default=cand.index_of(SPACE["default"]))
    return params_json(cand.points[i])


def test_too_few_points_per_scenario_are_no_evidence():
    # scored among 2 measured points a model looks better than it is (at run time it picks
    # among all): such scenarios do not count, and without evidence nothing changes
    checked = zero_shot.train_on(_thin(), "New GPU", shipped=[], **FIT)
    g = checked.groups[SIG]
    assert g.keeps_default and g.validation["use"] == "default"
    assert g.validation["scenarios"] == 0


def test_a_model_from_thin_local_data_cannot_override_a_good_default():
    local = _thin(points=validation.MIN_POINTS)
    unchecked = zero_shot.train_on(local, "New GPU", shipped=[], validate=False, **FIT)
    checked = zero_shot.train_on(local, "New GPU", shipped=[], **FIT)
    g = checked.groups[SIG]
    assert g.keeps_default and g.validation["use"] == "default"
    assert g.validation["scenarios"] == len(local) and g.validation["scores"]["local"] < 1.0
    fresh = [_scen("New GPU", f"f{i}", 1 << 18, {"ops": o}, {DEFAULT: 1.0})
             for i, o in enumerate(np.linspace(0, 4, 17))]
    # the unchecked model leaves the default somewhere; the checked one never does
    assert any(_pick(unchecked, sd) != DEFAULT for sd in fresh)
    assert all(_pick(checked, sd) == DEFAULT for sd in fresh)


def test_a_well_fed_local_model_leaves_the_default_where_it_learnt_better():
    local = _well_fed()
    m = zero_shot.train_on(local, "New GPU", shipped=[], **FIT)
    g = m.groups[SIG]
    assert g.validation["use"] == "local" and not g.keeps_default and g.origin == "local"
    assert g.validation["scores"]["local"] > 1.5
    new = _scen("New GPU", "new", 1 << 18, {"ops": 0.0}, {})
    assert json.loads(_pick(m, new))["wg"] == 32


def test_the_shipped_group_serves_where_it_validates_better_than_the_local_model():
    """Other devices' well-fed data (the shipped model) beats a local model that learnt
    nothing on this device's scenarios: the shipped group is the one used."""
    ship = zero_shot.build([_device_data("Old GPU", _well_fed("Old GPU", kernels=12))],
                           trees=8, depth=10).groups[tmodel.kind_key(SIG, "gpu")]
    # this device behaves like the old one but measured only the default, wg=32 and a few
    keys = [DEFAULT, OTHER] + [k for k in _well_fed(kernels=1)[0].times
                               if k not in (DEFAULT, OTHER)][:validation.MIN_POINTS - 2]
    local = [_scen("New GPU", sd.kernel, int(2 ** sd.features["log_n"]),
                   {"ops": sd.features["ops"]}, {k: sd.times[k] for k in keys})
             for sd in _well_fed(kernels=8)]
    guess = zero_shot.train_on(_thin(seed=3), "New GPU", shipped=[], validate=False,
                               **FIT).groups[SIG]
    v = validation.validate(local, local, [1.0] * len(local), lambda d, w: guess, ship)
    assert v.use == "shipped" and v.scores["shipped"] > max(v.scores["local"], 1.03)
    # and a local model as good as the shipped one is preferred (its own measurements)
    v = validation.validate(local, local, [1.0] * len(local), lambda d, w: ship, ship)
    assert v.use == "local"


def test_too_little_evidence_changes_nothing():
    local = _thin(kernels=1)                        # 2 scenarios: below MIN_EVIDENCE
    assert len(local) < validation.MIN_EVIDENCE
    ship = zero_shot.build([_device_data("Old GPU", _well_fed("Old GPU", kernels=6))],
                           trees=4, depth=8)
    m = zero_shot.train_on(local, "New GPU", shipped=[], base=ship, **FIT)
    assert m.groups[SIG].origin == "shipped" and not m.groups[SIG].keeps_default
    alone = zero_shot.train_on(local, "New GPU", shipped=[], **FIT)
    assert alone.groups[SIG].keeps_default       # no shipped model: the default, as before


def test_the_verdict_survives_a_saved_model(tmp_path):
    m = zero_shot.train_on(_thin(points=validation.MIN_POINTS), "New GPU", shipped=[], **FIT)
    model_files.save(m, tmp_path / "m.npz")
    back = model_files.load(tmp_path / "m.npz")
    assert back is not None
    g = back.groups[SIG]
    assert g.keeps_default and g.validation["use"] == "default"
    assert math.isclose(g.validation["scores"]["local"],
                        m.groups[SIG].validation["scores"]["local"])


def test_coverage_counts_a_scenario_by_how_much_of_it_was_measured():
    theirs = _well_fed("Old GPU", kernels=4)
    thin = _thin(kernels=zero_shot.LOCAL_TAKES_OVER)      # 24 scenarios of 2 points each
    data, _w = zero_shot.training_set(thin, theirs, "New GPU")[SIG]
    assert any(sd.device == "Old GPU" for sd in data)     # too thin to train alone
    full = _well_fed(kernels=zero_shot.LOCAL_TAKES_OVER)
    assert all(zero_shot.coverage(sd) == 1.0 for sd in full)
    data, _w = zero_shot.training_set(full, theirs, "New GPU")[SIG]
    assert all(sd.device == "New GPU" for sd in data)


def test_a_gpu_sweep_builds_the_untuned_choices_alone_first_then_growing_chunks():
    for n in range(0, 80):
        for head in (0, 1, 2):
            b = chunks(n, head)
            assert [i for s, e in b for i in range(s, e)] == list(range(n))
            if n:
                assert b[0] == (0, min(max(head, 1), n))
            sizes = [e - s for s, e in b]
            assert all(s <= CHUNK for s in sizes)
            assert all(x <= y for x, y in zip(sizes[1:-1], sizes[2:-1]))
    assert [e - s for s, e in chunks(40, 2)] == [2, 4, 8, 16, 10]


def _device_data(device, scns):
    from skelpy.tuner.training_data import DeviceData

    return DeviceData(device, {"dev_is_gpu": 1.0}, list(scns))


def _mixed(kind: str, kernels: int) -> list:
    """Scenarios of a device of ``kind`` whose model (see the patched ``gain_of`` below) wins
    3.3x on even kernels and loses 2.7x on odd ones: a good mean, bad losses."""
    out = []
    for i in range(kernels):
        times = {params_json({"wg": w, "coarsen": c}): 1.0 for w in WG for c in CO}
        out.append(tmodel.ScenarioData(f"{kind}-m{i}", f"m{i}", "map",
                                       {"dev_is_gpu": 1.0 if kind == "gpu" else 0.0},
                                       SPACE, times, device=kind))
    return out


def test_on_a_cpu_a_model_that_often_loses_much_keeps_the_default(monkeypatch):
    monkeypatch.setattr(validation, "gain_of",
                        lambda gm, sd: 1.2 if int(sd.kernel[1:]) % 2 == 0 else -1.0)
    fit = lambda data, weights: object()          # noqa: E731 - the patched gain_of scores it
    n = validation.MIN_EVIDENCE_BY_KIND["cpu"]
    for kind, use in (("gpu", "local"), ("cpu", "default")):
        local = _mixed(kind, n)
        v = validation.validate(local, local, [1.0] * n, fit, None)
        assert v.use == use and math.isclose(v.scores["local"], math.exp(0.1))
        assert ("local_losses" in v.scores) == (kind == "cpu")
    # fewer CPU scenarios than the CPU's evidence: the device's data decides nothing
    few = _mixed("cpu", n - 1)
    assert validation.validate(few, few, [1.0] * (n - 1), fit, None).scores == {}
    assert validation.losses([0.5, -0.2, 0.0, -0.2]) == 0.1
    assert validation.losses_ok([0.5, 0.01, -0.01], "cpu")
    assert not validation.losses_ok([0.5, -0.2], "cpu") and validation.losses_ok([-5.0], "gpu")


def test_a_model_leaves_a_cpus_default_only_beyond_its_timing_noise(monkeypatch):
    """A model that gains 3% on every validation scenario (and loses nowhere) replaces the
    default on a GPU, but not on a CPU, whose confirmed timings differ by up to 5%."""
    monkeypatch.setattr(validation, "gain_of", lambda gm, sd: math.log(1.03))
    fit = lambda data, weights: object()          # noqa: E731 - the patched gain_of scores it
    n = validation.MIN_EVIDENCE_BY_KIND["cpu"]
    for kind, use in (("gpu", "local"), ("cpu", "default")):
        local = _mixed(kind, n)
        v = validation.validate(local, local, [1.0] * n, fit, None)
        assert v.use == use and math.isclose(v.scores["local"], 1.03)
