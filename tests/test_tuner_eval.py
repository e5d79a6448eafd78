"""The evaluation script's bookkeeping: the confirmation round's ratios, its noise report,
and leave-one-kernel-out folds that never see the held-out kernel's measurements."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

pytest.importorskip("sklearn")
from benchmarks import tuner_eval as te  # noqa: E402
from skelpy.tuner import model as tmodel  # noqa: E402


def _pj(**p) -> str:
    return json.dumps(p, sort_keys=True)


def _scenario(key: str, times: dict[int, float], reads: float) -> tmodel.ScenarioData:
    space = {"default": {"wg": 4}, "params": [{"name": "wg", "numeric": True,
                                                "values": sorted(times)}]}
    feats = {"k_reads": reads, "ds_log2_elements": 20.0, "sk_map": 1.0}
    return tmodel.ScenarioData(key, "k" + key, "map", feats, space,
                               {_pj(wg=w): t for w, t in times.items()})


def test_confirmation_replaces_the_sweep_ratios_and_reports_the_noise():
    row = {"scenario": "s1", "oracle": {"wg": 8}, "oracle_seconds": 1.0,
           "runtime/joint": 0.5, "runtime/joint:point": {"wg": 16},
           "default": 0.8, "default:point": {"wg": 4}, "static": None,
           "static_hindsight": None, "expert": None, "runtime_choice": 0.4}
    sd = _scenario("s1", {4: 1.25, 8: 1.0, 16: 2.0, 32: 3.0}, 1.0)
    pts = te._confirm_points(sd, [row], top_k=2)
    assert pts[:2] == [_pj(wg=8), _pj(wg=4)] and _pj(wg=16) in pts and _pj(wg=32) not in pts
    # re-measured: the sweep's winner (8) was lucky; 16 is really as fast as 4
    conf = {"s1": {_pj(wg=8): 1.3, _pj(wg=4): 1.2, _pj(wg=16): 1.2, "runtime_choice": 2.4,
                   "_rounds": 5}}
    new = te.apply_confirmation([row], conf)[0]
    assert new["oracle"] == {"wg": 4} and new["oracle_seconds"] == 1.2
    assert new["runtime/joint"] == pytest.approx(1.0)
    assert new["default"] == pytest.approx(1.0)
    assert new["runtime_choice"] == pytest.approx(0.5)
    assert new["static"] is None
    assert new["sweep"]["runtime/joint"] == 0.5 and new["sweep"]["oracle"] == {"wg": 8}
    noise = te.noise_report([new])
    assert noise["sweep_oracle_still_best"] == 0.0
    assert noise["sweep_oracle_time_over_its_confirmed_time_geomean"] == pytest.approx(1 / 1.3)
    assert noise["methods"]["runtime/joint"] == {"sweep_geomean": 0.5,
                                                "confirmed_geomean": pytest.approx(1.0)}
    # a scenario without confirmation is left out rather than mixed in
    assert te.apply_confirmation([row], {}) == []


def test_leave_one_kernel_out_never_sees_the_held_out_kernel(monkeypatch):
    # three kernels whose best point follows the reads; the held-out one must not shape
    # the static choice or the model
    scns = [_scenario("a", {4: 2.0, 8: 1.0, 16: 3.0}, 1.0),
            _scenario("b", {4: 2.0, 8: 1.0, 16: 3.0}, 2.0),
            _scenario("c", {4: 3.0, 8: 2.0, 16: 1.0}, 9.0)]
    groups = {sd.key: sd.key for sd in scns}
    info = {sd.key: {"size": 512, "expert": None} for sd in scns}
    seen = []
    real_fit = tmodel.fit_group

    def spy(sig, train, **kw):
        seen.append({sd.key for sd in train})
        return real_fit(sig, train, **kw)
    monkeypatch.setattr(tmodel, "fit_group", spy)
    ev = te.evaluate(scns, groups, info, 4)
    assert sorted(map(sorted, seen)) == [["a", "b"], ["a", "c"], ["b", "c"]]
    row_c = next(r for r in ev["rows"] if r["scenario"] == "c")
    # the static point of c's fold comes from a and b only (wg 8), not from c's own best
    assert row_c["static:point"] == {"wg": 8} and row_c["static"] == pytest.approx(0.5)
    assert row_c["static_hindsight:point"] == {"wg": 8}


def _dev_scenario(device: str, key: str, best: int, reads: float, gpu: bool):
    sd = _scenario(key, {w: 1.0 + abs(w - best) / 4 for w in (4, 8, 16, 32)}, reads)
    sd.features = dict(sd.features, dev_is_gpu=1.0 if gpu else 0.0,
                       dev_compute_units=8.0 if gpu else 2.0)
    sd.device, sd.group = device, "k" + key
    return sd


def test_leave_one_device_out_trains_only_on_the_other_devices(monkeypatch):
    """The held-out device's scenarios never reach the model that picks for them, and a
    device of a kind the others are not gets the default (no CPU model for a GPU)."""
    from benchmarks import tuner_transfer as tt
    from skelpy.tuner import training_data, zero_shot

    def dev(name, gpu, n):
        return training_data.DeviceData(name, {}, [
            _dev_scenario(name, f"{name}{i}", 16, float(i), gpu) for i in range(n)])
    sets = [dev("cpu-a", False, 6), dev("cpu-b", False, 6), dev("gpu-c", True, 3)]
    seen = []
    real_fit = tmodel.fit_group

    def spy(sig, train, **kw):
        seen.append({sd.device for sd in train})
        return real_fit(sig, train, **kw)
    monkeypatch.setattr(zero_shot, "fit_group", spy)
    res = tt.lodo(sets, trees=4, depth=6)
    # one model per kind of device, on the devices of that kind left in: cpu-a's from cpu-b
    # (and gpu-c's group, for GPUs), gpu-c's from both CPUs
    assert {frozenset(s) for s in seen} == {frozenset({"cpu-b"}), frozenset({"cpu-a"}),
                                            frozenset({"gpu-c"}),
                                            frozenset({"cpu-a", "cpu-b"})}
    a = res["devices"]["cpu-a"]
    assert a["model_used"] == 6 and a["zero_shot_geomean"] == pytest.approx(1.0)  # b taught a
    assert a["default_geomean"] == pytest.approx(0.25)             # default wg 4: 4x slower
    g = res["devices"]["gpu-c"]                                    # only CPUs to learn from
    assert g["model_used"] == 0 and g["zero_shot_geomean"] == pytest.approx(g["default_geomean"])
    res = tt.lodo(sets, trees=4, depth=6, leave_kernels_out=True)
    assert res["devices"]["cpu-a"]["scenarios"] == 6
