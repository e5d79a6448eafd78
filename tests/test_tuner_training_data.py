"""Training data as compact data-only files, and models across devices: a round trip keeps
every measurement, bad files are refused without running anything, this device's own
measurements are weighted over shipped ones and take over, old signatures are aligned."""

from __future__ import annotations

import io
import json
import math
import os
import pickle

import numpy as np
import pytest
from test_tuner_support import cache_dir, make_space  # noqa: F401

from skelpy.tuner import model as tmodel
from skelpy.tuner import store as tstore
from skelpy.tuner import training_data, zero_shot

SPACE = make_space(max_wg=256)


@pytest.fixture(autouse=True)
def _isolated(cache_dir):  # noqa: F811
    yield


def _fill(device, kernels, *, gpu=True, seed=0):
    rng = np.random.default_rng(seed)
    store = tstore.get_store()
    desc = dict(SPACE.describe(), limits={"wg": 256, "coarsen": 8})
    for ops in kernels:
        for n in (1e4, 1e6):
            rec = tstore.ScenarioRecord(f"{device}-{ops}-{n}", device,
                                        {"dev_is_gpu": 1.0 if gpu else 0.0,
                                         "dev_compute_units": 8.0}, f"k-{ops}", "map",
                                        {"ops_add": float(ops)}, {"n": n, "dtype_size": 4},
                                        desc)
            rows = [(p, 1e-9 * n * (1 + abs(math.log2(p["wg"]) - ops) + p["blocked"])
                     * (1 + 0.01 * rng.standard_normal()), 3) for p in SPACE.points()]
            store.record_measurements(rec, rows)
            store.record_refusal(rec, {"wg": 256, "coarsen": 4, "blocked": 1})
    store.flush()
    return store


def test_round_trip_keeps_every_measurement_refusal_and_feature(tmp_path):
    store = _fill("Dev A", [0, 2, 4])
    data = training_data.from_store(store, "Dev A", names={"Dev A-2-10000.0": "kernel two"})
    path = training_data.save(data, tmp_path / "data-a.npz")
    assert path.stat().st_size < 20_000                    # 6 scenarios x 50 points: compact
    back = training_data.load(path)
    assert back.device == "Dev A" and len(back.scenarios) == len(data.scenarios) == 6
    orig = {sd.key: sd for sd in data.scenarios}
    for sd in back.scenarios:
        o = orig[sd.key]
        assert set(sd.times) == set(o.times) and sd.refused == o.refused and sd.refused
        for k, t in o.times.items():
            assert sd.times[k] == pytest.approx(t, rel=1e-6)   # stored as float32
        assert sd.features == o.features and sd.skeleton == "map"
    assert {sd.group for sd in back.scenarios} >= {"kernel two", "k-0"}


def _archive(meta, **arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)
    return buf.getvalue()


def test_bad_files_are_refused_and_never_run_code(tmp_path):
    store = _fill("Dev A", [1])
    good = training_data.to_bytes(training_data.from_store(store, "Dev A"))
    with np.load(io.BytesIO(good)) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(bytes(arrays.pop("meta")).decode())
    bad_values = dict(arrays, values=np.full_like(arrays["values"], 100))
    bad_scen = dict(arrays, scenario=np.full_like(arrays["scenario"], 7))
    cases = [b"not an archive", _archive({"format": "other"}, **arrays),
             _archive(dict(meta, version=99), **arrays), _archive(meta, **bad_values),
             _archive(meta, **bad_scen), _archive(meta, **dict(arrays, seconds=arrays["values"]))]
    for blob in cases:
        with pytest.raises(training_data.BadData):
            training_data.from_bytes(blob)

    class Payload:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "owned"),))
    buf = io.BytesIO()
    np.savez(buf, meta=np.array([Payload()], dtype=object))
    with pytest.raises(training_data.BadData):
        training_data.from_bytes(buf.getvalue())
    assert not (tmp_path / "owned").exists()
    pickle.loads(pickle.dumps(Payload()))                       # the payload is real
    assert (tmp_path / "owned").exists()


def _scen(device, i, sig_names=("wg",), gpu=True):
    return tmodel.ScenarioData(f"{device}-{i}", f"k{i}", "map", {"dev_is_gpu": float(gpu)},
                               {"params": [{"name": n, "values": [1, 2]} for n in sig_names],
                                "default": {n: 1 for n in sig_names}},
                               {json.dumps({n: 1 for n in sig_names}): 1.0}, device=device)


def test_local_scenarios_count_at_least_as_much_as_all_shipped_ones_then_take_over():
    theirs = [_scen("B", i) for i in range(30)]
    mine = [_scen("A", i) for i in range(3)]
    data, w = zero_shot.training_set(mine, theirs, "A")["wg"]
    assert len(data) == 33
    local_w = sum(wi for sd, wi in zip(data, w) if sd.device == "A")
    assert local_w >= sum(wi for sd, wi in zip(data, w) if sd.device != "A")
    # shipped data of this very device counts as its own
    data, w = zero_shot.training_set(mine, theirs + [_scen("A", 9)], "A")["wg"]
    assert sum(1 for sd in data if sd.device == "A") == 4
    # enough of its own: the others are left out
    many = [_scen("A", i) for i in range(zero_shot.LOCAL_TAKES_OVER)]
    for sd in many:                 # (swept whole: a scenario counts by what it measured)
        sd.times[json.dumps({"wg": 2})] = 2.0
    data, w = zero_shot.training_set(many, theirs, "A")["wg"]
    assert all(sd.device == "A" for sd in data) and set(w) == {1.0}
    # signatures it never measured are not trained (the shipped model's group serves)
    assert set(zero_shot.training_set(mine, theirs + [_scen("B", 99, ("tm",))], "A")) == {"wg"}


def test_scenarios_from_before_a_parameter_existed_are_aligned_to_the_new_signature():
    old = _scen("Old CPU", 1, ("wg",), gpu=False)
    new = _scen("New CPU", 2, ("wg", "vec"), gpu=False)
    gpu_old = _scen("GPU", 3, ("wg",), gpu=True)
    out = zero_shot.align([old, new, gpu_old])
    assert out[0].names == ["wg", "vec"] and out[0].space["default"]["vec"] == 1
    assert list(out[0].times) == [tmodel_json({"wg": 1, "vec": 1})]
    assert out[1] is new and out[2].names == ["wg"]        # no GPU scenario has vec


def tmodel_json(p):
    return tstore.params_json(p)


def test_a_device_starts_from_the_others_and_its_training_weights_its_own(tmp_path):
    """Zero-shot: a model built from device B's data predicts for device A (same kind);
    training A with its few scenarios and B's shipped data keeps B's scenarios in."""
    store = _fill("Dev B", [0, 1, 2, 3, 5, 6])
    b = training_data.from_store(store, "Dev B")
    shipped = zero_shot.build([b], trees=4, depth=8)
    # one group per signature and kind of device (Dev B's kind only)
    assert list(shipped.groups) == [tmodel.kind_key("wg,coarsen,blocked", "gpu")]
    g = tmodel.group_for(shipped.groups, "wg,coarsen,blocked", "gpu")
    assert g is not None and tmodel.group_for(shipped.groups, "wg,coarsen,blocked", "cpu") is None
    assert g.origin == "shipped" and g.n_scenarios == 12 and g.speedup is not None
    assert not g.validation and not g.keeps_default      # one device: nothing to check
    _fill("Dev A", [4])
    m = zero_shot.train(tstore.get_store(), "Dev A", shipped=[b], base=shipped,
                        n_estimators=4, validate=False)
    mine = m.groups["wg,coarsen,blocked"]
    assert mine.origin == "local" and mine.n_local == 2 and mine.n_scenarios == 14


def test_the_shipped_model_predicts_for_gpus_and_cpus_but_never_for_an_unseen_kind():
    """The zero-shot model shipped with the package (trained on GPUs and CPUs) picks a point
    for a GPU and a CPU it has never measured, and none for an accelerator (neither): that
    device runs its default until its own measurements train a model."""
    from test_tuner_support import FakeDevice, FakeKernel, make_request

    from skelpy import tuner
    from skelpy.tuner.model_files import load_pretrained
    from skelpy.tuner.space import Param, ParamSpace

    space = ParamSpace([*SPACE.params, Param("vw", (1, 2, 4))], {**SPACE.default, "vw": 1})
    shipped = load_pretrained("Some | New Device | 1.0")
    assert shipped is not None and shipped.pretrained
    assert {k for g in shipped.groups.values() for k in g.kinds} == {"cpu", "gpu"}
    sources = {}
    for name, feats in {"gpu": {"dev_is_gpu": 1.0},
                        "cpu": {"dev_is_gpu": 0.0},
                        "accelerator": {"dev_is_gpu": 0.0, "dev_is_other": 1.0}}.items():
        dev = FakeDevice(key=f"NewCL | {name} | 1.0")
        dev.features = dict(dev.features, **feats)
        tuner.reset()
        kern = FakeKernel()
        out = tuner.execute(make_request(kern, space=space, device=dev,
                                         kernel_key=f"new-{name}"))
        np.testing.assert_array_equal(out.result, kern.expected)
        sources[name] = out.source
    assert sources == {"gpu": "model", "cpu": "model", "accelerator": "default"}
    assert tmodel.device_kind({"dev_is_gpu": 0.0, "dev_is_other": 1.0}) == "other"
    assert tmodel.device_kind({"dev_is_gpu": 0.0}) == "cpu"       # data from before the flag


def _kind_scenario(device: str, i: int, best: int, *, gpu: bool) -> tmodel.ScenarioData:
    """A scenario of 8 work-group sizes (enough to count as evidence): ``best`` fastest, the
    default (4) second, every other size 3x slower."""
    sizes = (1, 2, 4, 8, 16, 32, 64, 128)
    times = {tstore.params_json({"wg": w}): 1.0 if w == best else 1.2 if w == 4 else 3.0
             for w in sizes}
    space = {"default": {"wg": 4}, "params": [{"name": "wg", "numeric": True,
                                                "values": list(sizes)}]}
    sd = tmodel.ScenarioData(f"{device}{i}", f"k{i}", "map",
                             {"dev_is_gpu": 1.0 if gpu else 0.0, "k_reads": float(i),
                              "ds_log2_elements": 20.0, "sk_map": 1.0}, space, times)
    sd.device = device
    return sd


def test_the_shipped_model_keeps_the_default_for_a_kind_whose_devices_disagree():
    """Leave-one-device-out within each kind of device decides whether the shipped model
    may leave the default for that kind: two CPUs whose best points differ (each one's picks
    from the other's data lose to the default) keep it; two GPUs that agree do not."""
    def data(device, best, gpu):
        return training_data.DeviceData(device, {}, [
            _kind_scenario(device, i, best, gpu=gpu) for i in range(6)])
    sets = [data("cpu-a", 16, False), data("cpu-b", 128, False),
            data("gpu-a", 16, True), data("gpu-b", 16, True)]
    m = zero_shot.build(sets, trees=4, depth=6)
    cpu = tmodel.group_for(m.groups, "wg", "cpu")
    gpu = tmodel.group_for(m.groups, "wg", "gpu")
    assert cpu.kinds == ["cpu"] and gpu.kinds == ["gpu"]
    assert cpu.keeps_default and cpu.validation["use"] == "default"
    assert cpu.validation["scores"]["devices"] < 1.0            # the picks lost
    assert not gpu.keeps_default and gpu.validation["scores"]["devices"] > 1.1
    # a device never measured: the GPU model picks the best point, the CPU one the default
    for g, want in ((gpu, 16), (cpu, 4)):
        sd = _kind_scenario("new", 9, 16, gpu=g is gpu)
        cand = tmodel.CandidateSet([json.loads(k) for k in sd.times], ["wg"], {"wg": True})
        i = tmodel.choose(g, sd.features, cand, set(), default=cand.index_of({"wg": 4}))
        assert cand.points[i]["wg"] == want
    # and the verdicts survive the model file
    from skelpy.tuner import model_files

    back = model_files.from_bytes(model_files.to_bytes(m))
    assert set(back.groups) == set(m.groups)
    assert tmodel.group_for(back.groups, "wg", "cpu").keeps_default
