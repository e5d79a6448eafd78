"""Models: packed forests equal scikit-learn's, training on synthetic measurements predicts
well for unseen kernels, fallbacks, coarsening strategies, persistence, prediction cost."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from test_tuner_support import FakeKernel, cache_dir, make_request, make_space  # noqa: F401

from skelpy import tuner
from skelpy.tuner import model as tmodel
from skelpy.tuner import model_choice, model_files
from skelpy.tuner import store as tstore
from skelpy.tuner.features import (
    Schema,
    cross_columns,
    point_columns,
    point_features,
    scenario_features,
)

DEV = "FakeCL | Fake Device | 1.0"


@pytest.fixture(autouse=True)
def _isolated(cache_dir):  # noqa: F811
    yield


def test_packed_forest_matches_sklearn():
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(0)
    X = rng.random((400, 6)).astype(np.float32)
    y = np.sin(4 * X[:, 0]) + X[:, 1] * X[:, 2]
    reg = RandomForestRegressor(n_estimators=7, max_depth=9, random_state=0).fit(X, y)
    Xt = rng.random((50, 6)).astype(np.float32)
    np.testing.assert_allclose(tmodel.PackedForest(reg).predict(Xt), reg.predict(Xt),
                               rtol=1e-6, atol=1e-9)
    labels = (X[:, 0] * 3).astype(int) + (X[:, 3] > 0.5)
    clf = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, labels)
    np.testing.assert_allclose(tmodel.PackedForest(clf, classifier=True).predict(Xt),
                               clf.predict_proba(Xt), atol=1e-9)
    tree = DecisionTreeClassifier(random_state=0).fit(X, labels)
    np.testing.assert_allclose(tmodel.PackedForest(tree, classifier=True).predict(Xt),
                               tree.predict_proba(Xt), atol=1e-9)


def test_schema_fixed_order_ignores_unknown_and_zero_fills():
    s = Schema.from_dicts([{"b": 1.0, "a": 2.0}, {"c": 3.0}])
    assert s.names == ("a", "b", "c")
    np.testing.assert_array_equal(s.vector({"c": 5.0, "zzz": 9.0}), [0, 0, 5])
    f = scenario_features("stencil", {"dev_is_gpu": 1.0}, {"north": 1, "name": "x"},
                          {"rows": 512, "cols": 256, "dtype_size": 4})
    assert f["sk_stencil"] == 1.0 and f["sk_map"] == 0.0 and f["k_north"] == 1.0
    assert "k_name" not in f and f["ds_log2_elements"] == 17.0
    p = point_features({"wg": 64, "coarsen": 2, "blocked": 1}, {"blocked": False})
    assert p == {"p_wg": 6.0, "p_coarsen": 1.0, "p_blocked=1": 1.0, "p_wg_total": 6.0,
                 "p_coarsen_total": 1.0, "p_items_per_group": 7.0}
    pts = [{"wg_r": 4, "wg_c": 32, "cr": 2, "local": 0}, {"wg_r": 1, "wg_c": 8, "cr": 1, "local": 1}]
    cols = point_columns(pts, ["wg_r", "wg_c", "cr", "local"], {"local": False})
    np.testing.assert_array_equal(cols["p_wg_total"], [7, 3])
    np.testing.assert_array_equal(cols["p_items_per_group"], [8, 3])
    np.testing.assert_array_equal(cols["p_local=1"], [0, 1])
    x = cross_columns({"ds_log2_elements": 20.0, "k_north": 1, "k_south": 1, "k_east": 2,
                       "k_west": 2}, cols)
    np.testing.assert_array_equal(x["x_log2_groups"], [12, 17])
    # tile 8x32 with a 2-row, 4-column halo
    assert x["x_log2_halo"][0] == pytest.approx(np.log2(10 * 36 / (8 * 32)))


# -- synthetic measurement data ------------------------------------------------------------------

SPACE = make_space(max_wg=256)


def _cost(ops: float, n: float, p) -> float:
    """Best work-group size 2**ops, best coarsening 4 for large data, blocked is slower."""
    best_c = 4 if n > 1e5 else 1
    return n * 1e-9 * (1 + 0.35 * abs(math.log2(p["wg"]) - ops)
                       + 0.25 * abs(math.log2(p["coarsen"]) - math.log2(best_c))
                       + 0.4 * p["blocked"])


def _fill_store(kernels, sizes=(1e4, 1e6), noise=0.02, seed=0):
    rng = np.random.default_rng(seed)
    store = tstore.get_store()
    desc = dict(SPACE.describe(), limits={"wg": 256, "coarsen": 8})
    for ops in kernels:
        for n in sizes:
            rec = tstore.ScenarioRecord(f"s-{ops}-{n}", DEV, {"dev_is_gpu": 1.0}, f"k-{ops}",
                                        "map", {"ops_add": float(ops)}, {"n": n, "dtype_size": 4},
                                        desc)
            rows = [(p, _cost(ops, n, p) * (1 + noise * rng.standard_normal()), 5)
                    for p in SPACE.points()]
            store.record_measurements(rec, rows)
    return store


def _perf(gm, ops, n, approach, coarsen="joint", refused=()):
    cand = tmodel.CandidateSet(SPACE.points(), SPACE.names, {p.name: p.numeric for p in
                                                             SPACE.params})
    feats = scenario_features("map", {"dev_is_gpu": 1.0}, {"ops_add": float(ops)},
                              {"n": n, "dtype_size": 4}, {"limits": {"wg": 256, "coarsen": 8}})
    ref = {cand.index_of(p) for p in refused}
    pick = tmodel.choose(gm, feats, cand, ref, approach=approach, coarsen=coarsen)
    p = cand.points[pick] if isinstance(pick, int) else SPACE.nearest(
        pick, exclude={SPACE.key(q) for q in refused})
    return min(_cost(ops, n, q) for q in SPACE.points()) / _cost(ops, n, p), p


@pytest.mark.parametrize("approach", tmodel.APPROACHES)
def test_models_trained_on_synthetic_data_predict_unseen_kernels(approach):
    store = _fill_store([0, 1, 2, 3, 5, 6, 7])               # 4 is never seen
    dm = tmodel.train(store, DEV, n_estimators=12)
    gm = dm.groups["wg,coarsen,blocked"]
    assert gm.n_scenarios == 14
    for n in (1e4, 1e6):
        # between the kernels seen (3 and 5), trees cannot interpolate: within one doubling
        perf, p = _perf(gm, 4, n, approach)
        assert perf >= 0.7, (approach, n, p)
        # features equal to a seen kernel's: its best point
        perf, p = _perf(gm, 5, n, approach)
        assert perf >= 0.95, (approach, n, p)
    default_perf = _cost(4, 1e6, {"wg": 16, "coarsen": 4, "blocked": 0}) / \
        _cost(4, 1e6, SPACE.default)
    perfs = [_perf(gm, ops, 1e6, approach)[0] for ops in (1, 4, 6)]
    assert np.exp(np.mean(np.log(perfs))) > default_perf


def test_classifier_prediction_refused_falls_back_to_the_nearest():
    gm = tmodel.train(_fill_store([1, 3, 5, 7]), DEV, n_estimators=8).groups[
        "wg,coarsen,blocked"]
    _, p = _perf(gm, 3, 1e6, "classifier")
    assert p == {"wg": 8, "coarsen": 4, "blocked": 0}
    _, q = _perf(gm, 3, 1e6, "classifier", refused=[p])
    assert q != p and SPACE.distance(p, q) == 1.0


def test_regressors_skip_refused_points():
    gm = tmodel.train(_fill_store([1, 3, 5, 7]), DEV, n_estimators=8).groups[
        "wg,coarsen,blocked"]
    _, p = _perf(gm, 3, 1e6, "speedup")
    _, q = _perf(gm, 3, 1e6, "speedup", refused=[p])
    assert q != p


def test_doubling_walks_coarsening_up_while_predicted_to_help():
    pts = [{"wg": w, "coarsen": c, "blocked": 0} for w in (32, 64) for c in (1, 2, 4, 8)]
    cand = tmodel.CandidateSet(pts, ("wg", "coarsen", "blocked"), {"blocked": False})
    assert cand.coarsen_names == ("coarsen",)
    score = {(32, 1): 1.0, (32, 2): 1.5, (32, 4): 1.4, (32, 8): 3.0,
             (64, 1): 0.5, (64, 2): 0.6, (64, 4): 0.7, (64, 8): 0.8}
    scores = np.array([score[(p["wg"], p["coarsen"])] for p in pts])
    scorer = lambda idx: scores[list(idx)]
    pick = model_choice._doubling(scorer, cand, set())
    assert pts[pick] == {"wg": 32, "coarsen": 2, "blocked": 0}     # stops at the first dip
    assert pts[int(np.argmax(scores))] == {"wg": 32, "coarsen": 8, "blocked": 0}  # joint
    refused = {cand.index_of({"wg": 32, "coarsen": 2, "blocked": 0})}
    assert pts[model_choice._doubling(scorer, cand, refused)]["coarsen"] == 1


def test_doubling_with_two_factors_takes_the_better_direction():
    pts = [{"cr": r, "cc": c} for r in (1, 2, 4) for c in (1, 2, 4)]
    cand = tmodel.CandidateSet(pts, ("cr", "cc"), {})
    assert cand.coarsen_names == ("cr", "cc")
    score = {(1, 1): 1.0, (2, 1): 1.2, (1, 2): 1.5, (2, 2): 1.4, (1, 4): 1.6, (4, 1): 9.0,
             (2, 4): 1.0, (4, 2): 1.0, (4, 4): 1.0}
    scores = np.array([score[(p["cr"], p["cc"])] for p in pts])
    assert pts[model_choice._doubling(lambda idx: scores[list(idx)], cand, set())] == \
        {"cr": 1, "cc": 4}


def test_persistence_round_trip_and_rejects_other_versions(tmp_path):
    import json
    import warnings
    import zipfile

    dm = tmodel.train(_fill_store([1, 3, 5]), DEV, n_estimators=4)
    path = tmp_path / "m.npz"
    model_files.save(dm, path)
    assert zipfile.is_zipfile(path)                              # arrays and JSON, no pickle
    back = model_files.load(path)
    assert back is not None and back.groups.keys() == dm.groups.keys()
    gm, gb = dm.groups["wg,coarsen,blocked"], back.groups["wg,coarsen,blocked"]
    for approach in tmodel.APPROACHES:
        assert _perf(gm, 3, 1e6, approach)[1] == _perf(gb, 3, 1e6, approach)[1]
    assert gb.classes == gm.classes and gb.plausible == gm.plausible
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.load(path) as z:                                 # another version
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(bytes(arrays["meta"]))
        meta["version"] = -1
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
        np.savez(path, **arrays)
        assert model_files.load(path) is None
        path.write_bytes(b"garbage")
        assert model_files.load(path) is None
        assert model_files.load(tmp_path / "missing.npz") is None


def test_a_model_with_out_of_range_indices_is_refused(tmp_path):
    """A crafted archive cannot make prediction read out of bounds."""
    dm = tmodel.train(_fill_store([1, 3, 5]), DEV, n_estimators=2)
    blob = model_files.to_bytes(dm)
    import io

    with np.load(io.BytesIO(blob)) as z:
        arrays = {k: z[k] for k in z.files}
    key = next(k for k in arrays if k.endswith(".children"))
    arrays[key] = arrays[key] + 10**6
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with pytest.raises(model_files.BadModel, match="out of range"):
        model_files.from_bytes(buf.getvalue())


def test_prediction_costs_less_than_a_millisecond():
    gm = tmodel.train(_fill_store([0, 1, 2, 3, 5, 6, 7]), DEV).groups["wg,coarsen,blocked"]
    cand = tmodel.CandidateSet(SPACE.points(), SPACE.names, {"blocked": False})
    feats = scenario_features("map", {"dev_is_gpu": 1.0}, {"ops_add": 4.0},
                              {"n": 1e6, "dtype_size": 4}, {"limits": {"wg": 256, "coarsen": 8}})
    for approach in tmodel.APPROACHES:
        tmodel.choose(gm, feats, cand, set(), approach=approach)          # warm the caches
        times = []
        for _ in range(30):
            t0 = time.perf_counter()
            tmodel.choose(gm, feats, cand, set(), approach=approach)
            times.append(time.perf_counter() - t0)
        assert np.median(times) < 1e-3, (approach, np.median(times))


def test_manager_retrains_after_enough_new_measurements(cache_dir):  # noqa: F811
    _fill_store([1, 2])
    mgr = tuner.manager()
    m = mgr.get(DEV)                        # no model yet, data exists: trains (sync policy)
    assert m is not None and m.n_measurements == 4 * len(SPACE.points())
    assert (cache_dir / "models").is_dir()
    gen = mgr.generation
    mgr.note_measurements(DEV, tmodel.RETRAIN_EVERY - 1)
    assert mgr.generation == gen
    _fill_store([3])
    mgr.note_measurements(DEV, 1)
    assert mgr.generation == gen + 1 and mgr.get(DEV).n_measurements == 6 * len(SPACE.points())
    # a new process loads the saved model instead of training
    tuner.reset()
    assert tuner.manager().get(DEV).n_measurements == 6 * len(SPACE.points())


def test_model_mode_uses_the_model_for_a_new_kernel():
    _fill_store([0, 1, 2, 3, 5, 6, 7])
    tuner.manager().retrain(DEV)
    kern = FakeKernel(n=int(1e6), best_wg=16)
    req = make_request(kern, kernel_key="unseen", features={"ops_add": 4.0})
    out = tuner.execute(req)
    assert out.source == "model"
    assert out.params["wg"] in (8, 16, 32) and out.params["blocked"] == 0
    np.testing.assert_array_equal(out.result, kern.expected)


def test_default_method_depends_on_the_device_kind():
    assert tmodel.default_method({"dev_is_gpu": 1.0}) == (tmodel.DEFAULT_APPROACH,
                                                         tmodel.DEFAULT_COARSEN)
    assert tmodel.default_method({"dev_is_gpu": 0.0}) == tmodel.DEFAULTS_BY_KIND["cpu"]
    for approach, coarsen in tmodel.DEFAULTS_BY_KIND.values():
        assert approach in tmodel.APPROACHES and coarsen in tmodel.COARSEN_STRATEGIES


def test_shortlist_is_best_first_skips_refused_and_contains_the_joint_pick():
    gm = tmodel.train(_fill_store([1, 3, 5, 7]), DEV, n_estimators=8).groups[
        "wg,coarsen,blocked"]
    cand = tmodel.CandidateSet(SPACE.points(), SPACE.names, {p.name: p.numeric for p in
                                                             SPACE.params})
    feats = scenario_features("map", {"dev_is_gpu": 1.0}, {"ops_add": 3.0},
                              {"n": 1e6, "dtype_size": 4}, {"limits": {"wg": 256, "coarsen": 8}})
    short = tmodel.shortlist(gm, feats, cand, set(), 3, approach="speedup")
    assert len(short) == 3 and len(set(short)) == 3
    assert short[0] == tmodel.choose(gm, feats, cand, set(), approach="speedup")
    again = tmodel.shortlist(gm, feats, cand, {short[0]}, 3, approach="speedup")
    assert short[0] not in again and again[:2] == short[1:]


def test_risk_penalises_points_the_trees_disagree_on():
    from sklearn.ensemble import RandomForestRegressor

    rng = np.random.default_rng(0)
    X = rng.random((300, 2)).astype(np.float32)
    y = np.where(X[:, 0] > 0.5, rng.normal(1.0, 2.0, 300), 0.8)   # right half: a gamble
    f = tmodel.PackedForest(RandomForestRegressor(n_estimators=16, max_depth=6,
                                                  random_state=0).fit(X, y))
    Xt = np.array([[0.9, 0.5], [0.1, 0.5]], np.float32)
    mean, sd = f.predict_spread(Xt)
    np.testing.assert_allclose(mean, f.predict(Xt), rtol=1e-9)
    assert sd[0] > 10 * sd[1]


def test_the_shipped_model_loads_for_any_device_and_compacts_without_changing_predictions(
        tmp_path, monkeypatch):
    pocl = "Portable Computing Language | pthread-haswell-Some CPU | 6.0"
    data = tmodel.load_scenarios(_fill_store([0, 1, 2, 3, 5, 7]), DEV)
    sig = "wg,coarsen,blocked"
    full = tmodel.DeviceModel(DEV, 0, {sig: tmodel.fit_group(sig, data, n_estimators=4)})
    monkeypatch.setattr(model_files, "PRETRAINED_DIR", tmp_path)
    assert model_files.load_pretrained(pocl) is None             # nothing shipped
    model_files.save(model_files.compact(full, "speedup"), tmp_path / model_files.SHIPPED_MODEL)
    for dev in (pocl, DEV):                                       # a CPU and a GPU alike
        m = model_files.load_pretrained(dev)
        assert m is not None and m.pretrained and m.n_measurements == 0 and m.device == dev
    g = m.groups[sig]
    assert g.origin == "shipped" and g.kinds == ["gpu"]
    assert g.classifier is None and g.runtime is None and g.speedup is not None
    # compacting narrows the arrays but predicts the same
    X = np.random.default_rng(0).random((20, g.speedup.feature.max() + 1)).astype(np.float32)
    np.testing.assert_allclose(g.speedup.predict(X), full.groups[sig].speedup.predict(X),
                               rtol=1e-6)
    monkeypatch.setenv("SKELPY_TUNE_PRETRAINED", "off")
    assert model_files.load_pretrained(pocl) is None


def test_a_model_never_predicts_for_a_kind_of_device_it_has_not_seen():
    """A forest trained on GPU measurements only gives no pick for a CPU (a CPU's best point
    is not a GPU's): the tuner falls back to the default there."""
    from test_tuner_support import FakeDevice

    _fill_store([0, 1, 2, 3, 5, 6, 7])
    tuner.manager().retrain(DEV)
    gpu = tuner.execute(make_request(FakeKernel(n=int(1e6)), kernel_key="unseen"))
    assert gpu.source == "model"
    cpu = FakeDevice()
    cpu.features = dict(cpu.features, dev_is_gpu=0.0)
    tuner.manager().set(cpu.key, tuner.manager().get(DEV))
    tuner.reset()
    tuner.manager().set(cpu.key, tmodel.train(tstore.get_store(), DEV, n_estimators=4))
    out = tuner.execute(make_request(FakeKernel(n=int(1e6)), kernel_key="unseen", device=cpu))
    assert out.source == "default"


def test_a_model_without_a_new_parameter_predicts_with_it_at_its_default(monkeypatch):
    """A model trained before a kernel grew a parameter still predicts: among points where
    that parameter keeps its default (the shipped model, which has the wider signature of
    a real Map, is off here)."""
    from skelpy.tuner.space import Param, ParamSpace

    monkeypatch.setenv("SKELPY_TUNE_PRETRAINED", "off")

    _fill_store([0, 1, 2, 3, 5, 6, 7])
    tuner.manager().retrain(DEV)
    wider = ParamSpace(list(SPACE.params) + [Param("vw", (1, 2, 4))],
                       dict(SPACE.default, vw=2),
                       constraint=lambda p: SPACE.is_legal({k: p[k] for k in SPACE.names}))
    kern = FakeKernel(n=int(1e6), best_wg=16)
    req = make_request(kern, space=wider, kernel_key="unseen-wider", features={"ops_add": 4.0})
    out = tuner.execute(req)
    assert out.source == "model" and out.params["vw"] == 2
    assert out.params["wg"] in (8, 16, 32) and out.params["blocked"] == 0
    # online mode measures the model's shortlist first: all of it at vw=2, best first
    from skelpy.tuner import engine

    call = engine.Call(req, engine.scenario(req), "online")
    short = call.shortlist(4)
    assert len(short) == 4 and all(p["vw"] == 2 for p in short)
    assert short[0] == out.params
