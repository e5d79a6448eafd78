"""Per-device models that predict launch parameters ([Cummins 2018] §5.5,
[Magni 2015] ch. 7; sources in docs/references.md).

Three approaches, all trained on the store's measurements of one device and one parameter
signature (the names of a kernel's launch parameters):

``classifier``
    a random forest (or one decision tree, like OmniTune's J48) labels each scenario with its
    fastest measured point; a prediction that is illegal here or refused falls back to the
    nearest legal point ([Cummins 2018] §5.5.1: nearest-neighbour was the best fallback).
``runtime``
    a random-forest regressor of log run time from scenario and point features; every legal
    candidate is scored and the fastest predicted one taken, refused points skipped.
``speedup``
    the same, regressing log speedup over the space's default point ([Cummins 2018]'s best).

Coarsening is chosen jointly with the other parameters (argmax over the whole grid) or by
[Magni 2015]'s scheme (§7.6): pick the best point at coarsening 1, then keep doubling the
factor while the model predicts that it helps.

Fitted forests are packed into plain NumPy arrays (:class:`PackedForest`): prediction needs
no scikit-learn import, scores all candidates in one vectorised walk, and a model is saved as
data only (``model_files.py``: arrays and JSON, no pickle), independent of scikit-learn's
version.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .features import Schema, cross_columns, is_coarsening, point_columns, scenario_features

MODEL_VERSION = 3          # 3: data-only files (model_files.py); 2 was pickles
APPROACHES = ("classifier", "runtime", "speedup")
COARSEN_STRATEGIES = ("joint", "doubling")
# Chosen by benchmarks/tuner_eval.py (leave-one-kernel-out over 23 scenarios on an H200,
# benchmarks/results/tuner_eval_nvidia-h200.json): speedup/joint reached 96.3% of the oracle
# (geometric mean; 98.3% median), classifier 95.6%, runtime 95.4%; [Magni 2015]'s doubling
# scheme lost to choosing coarsening jointly (94.2% vs 96.3%).
DEFAULT_APPROACH = "speedup"
DEFAULT_COARSEN = "joint"
# On PoCL (2-core CPU, 50 scenarios of 19 kernels at 512^2-2048^2, ratios from a confirmation
# round; benchmarks/results/tuner_eval_pthread-haswell-amd-epyc.json) speedup/joint did best
# too: 82.1% of the oracle (geometric mean; 97.6% median), runtime/doubling 78.9%; and its
# decision stays under a millisecond (doubling scores a whole coarsening-1 plane: ~3 ms).
DEFAULTS_BY_KIND = {"gpu": (DEFAULT_APPROACH, DEFAULT_COARSEN), "cpu": ("speedup", "joint")}


# Risk aversion of the regressors' pick: score = predicted value - RISK * spread over the trees
# (a point that is best for one kernel can be 5x slower for a similar one on a CPU). On
# PoCL's sweeps (not confirmed), risk 0.5-2 moved speedup/joint by +2-3 points of the oracle
# and runtime/doubling by 0 to -23: no clear gain, so it is off.
RISK_BY_KIND = {"gpu": 0.0, "cpu": 0.0}
# The smallest predicted gain (log speedup over the default) for which the speedup regressor
# leaves the default. On PoCL's data, measured on a shared 2-core machine, smaller predicted
# gains were mostly noise: leave-one-kernel-out on this machine's data went from 66% to 70% of
# the oracle with 0.2 (1.22x); 0.5 undid it. GPUs' data is quiet: no threshold.
MIN_GAIN_BY_KIND = {"gpu": 0.0, "cpu": 0.2}


# Training labels of a kind of device: times within this share of a scenario's best count as
# ties (the best's). Re-measuring PoCL sweeps' best points interleaved
# (benchmarks/tuner_noise.py) found the sweep's fastest point within 5% of the confirmed
# fastest in only 62% of the scenarios: on a shared CPU the order at the top of a sweep is
# noise, and a model fitted to it learns that noise.
TIE_BY_KIND = {"gpu": 0.0, "cpu": 0.05}

# Candidates a kind's model may pick: on a CPU, a point measured anywhere in its training
# data at more than CLIFF times that scenario's best, or measured in fewer than SEEN
# scenarios, is left out (a defaults' point is always kept). PoCL has cliffs (a barrier
# splits the work-item loop, a local tile, a vector width that turns loads into gathers): a
# point that wins one kernel can run 2-14x slower on a similar one, and a model fitted on a
# few noisy scenarios cannot tell them apart. After `skelpy tune` on PoCL, a 4x8 local-tile
# point with 2x4 cells per work-item, best in one synthetic scenario and measured in one
# other (1.42x its best), ran Game of Life at 0.37-0.43 of the oracle (2026-11-23). GPUs'
# data is quiet and their picks well validated: no filter.
CLIFF_BY_KIND = {"gpu": math.inf, "cpu": 2.5}
SEEN_BY_KIND = {"gpu": 0, "cpu": 3}


def robust_times(t: np.ndarray, tie: float) -> np.ndarray:
    """``t`` with every time within ``tie`` of the fastest raised to that bound (ties)."""
    if tie <= 0 or not len(t):
        return t
    return np.maximum(t, float(t.min()) * (1.0 + tie))


def default_risk(scen_feats: Mapping[str, float]) -> float:
    kind = "gpu" if scen_feats.get("dev_is_gpu", 1.0) else "cpu"
    return RISK_BY_KIND.get(kind, 0.0)


def device_kind(features: Mapping[str, float]) -> str:
    """"gpu", "cpu" or "other" (an accelerator: no shipped data has one), from device (or
    scenario) features; a model predicts only for the kinds its training data ran on."""
    if features.get("dev_is_gpu", 1.0):
        return "gpu"
    return "other" if features.get("dev_is_other", 0.0) else "cpu"


def kind_key(sig: str, kind: str) -> str:
    """The key of a group trained on one kind of device only (the shipped model keeps one per
    kind: leave-one-device-out found a GPU's picks better from GPUs' data alone)."""
    return f"{sig}@{kind}"


def group_for(groups: Mapping[str, GroupModel], sig: str, kind: str) -> GroupModel | None:
    """The group of ``groups`` that predicts signature ``sig`` for a device of ``kind``: one
    trained for it (this device's own, keyed by ``sig``) before one trained on that kind of
    device (:func:`kind_key`); None if neither has seen that kind of device."""
    for key in (sig, kind_key(sig, kind)):
        g = groups.get(key)
        if g is not None and (not g.kinds or kind in g.kinds):
            return g
    return None


def default_method(device_features: Mapping[str, float]) -> tuple[str, str]:
    """The (approach, coarsening strategy) measured best for this kind of device."""
    kind = "gpu" if device_features.get("dev_is_gpu", 1.0) else "cpu"
    return DEFAULTS_BY_KIND.get(kind, (DEFAULT_APPROACH, DEFAULT_COARSEN))
RETRAIN_EVERY = 50         # new measurements of a device before its model is retrained
MIN_SCENARIOS = 2          # a signature needs this many measured scenarios to be modelled


# -- a forest as NumPy arrays -------------------------------------------------------------------


class PackedForest:
    """A fitted scikit-learn tree ensemble (or single tree) flattened into arrays."""

    def __init__(self, estimator: Any, *, classifier: bool = False):
        trees = getattr(estimator, "estimators_", None) or [estimator]
        feats, thrs, kids, vals, roots = [], [], [], [], []
        offset = 0
        depth = 0
        self.classifier = classifier
        for t in trees:
            tr = t.tree_
            n = tr.node_count
            left = tr.children_left.astype(np.int64)
            right = tr.children_right.astype(np.int64)
            leaf = left < 0
            idx = np.arange(n, dtype=np.int64)
            ch = np.stack([np.where(leaf, idx, left), np.where(leaf, idx, right)], axis=1)
            kids.append(ch + offset)
            feats.append(np.where(leaf, 0, tr.feature).astype(np.int64))
            thrs.append(np.where(leaf, np.inf, tr.threshold).astype(np.float64))
            v = tr.value[:, 0, :].astype(np.float64)
            if classifier:
                s = v.sum(axis=1, keepdims=True)
                v = v / np.where(s > 0, s, 1.0)
            else:
                v = v[:, 0]
            vals.append(v)
            roots.append(offset)
            offset += n
            depth = max(depth, int(tr.max_depth))
        self.feature = np.concatenate(feats)
        self.threshold = np.concatenate(thrs)
        self.children = np.concatenate(kids).reshape(-1)
        self.value = np.concatenate(vals)
        self.roots = np.asarray(roots, np.int64)
        self.depth = depth
        self.is_leaf = np.isinf(self.threshold)
        self.classes = list(getattr(estimator, "classes_", []))

    @classmethod
    def from_arrays(cls, feature: np.ndarray, threshold: np.ndarray, children: np.ndarray,
                    value: np.ndarray, roots: np.ndarray, depth: int, *,
                    classifier: bool = False, classes: Sequence[Any] = ()) -> PackedForest:
        """A forest from its arrays (as ``model_files`` reads them back)."""
        f = cls.__new__(cls)
        f.feature, f.threshold, f.children, f.value, f.roots = (
            feature, threshold, children, value, roots)
        f.depth, f.classifier, f.classes = int(depth), bool(classifier), list(classes)
        f.is_leaf = np.isinf(threshold)
        return f

    def leaves(self, X: np.ndarray) -> np.ndarray:
        """Leaf node of every tree for every row: shape (trees, rows)."""
        X = np.ascontiguousarray(X, dtype=np.float32)
        n, m = X.shape
        flat = X.T.reshape(-1)                      # feature-major: flat[f * n + row]
        rows = np.arange(n, dtype=np.int64)[None, :]
        nodes = np.repeat(self.roots[:, None], n, axis=1)
        feat, thr, kids, leaf = self.feature, self.threshold, self.children, self.is_leaf
        for level in range(self.depth):
            x = flat[feat[nodes] * n + rows]
            nodes = kids[2 * nodes + (x > thr[nodes])]
            if level % 4 == 3 and leaf[nodes].all():
                break
        return nodes

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Mean leaf value: shape (rows,) for regressors, (rows, classes) for classifiers."""
        return self.value[self.leaves(X)].mean(axis=0)

    def predict_spread(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation over the trees (regressors): the trees disagree where
        the training kernels disagree, which is where a pick is a gamble."""
        v = self.value[self.leaves(X)].astype(np.float64)
        return v.mean(axis=0), v.std(axis=0)


# -- training data ------------------------------------------------------------------------------


def signature(names: Sequence[str]) -> str:
    """Models are per device and per set of launch-parameter names."""
    return ",".join(names)


def space_numeric(space_desc: Mapping[str, Any]) -> dict[str, bool]:
    return {p["name"]: bool(p.get("numeric", True)) for p in space_desc.get("params", [])}


@dataclass
class ScenarioData:
    """One scenario's features and measurements, as training and evaluation see it."""

    key: str
    kernel: str
    skeleton: str
    features: dict[str, float]
    space: dict[str, Any]
    times: dict[str, float]                 # canonical params JSON -> median seconds
    refused: set[str] = field(default_factory=set)
    # what the features were computed from (training-data files store these, not features)
    kernel_features: dict[str, float] = field(default_factory=dict)
    dataset: dict[str, Any] = field(default_factory=dict)
    device: str = ""
    group: str = ""                         # the kernel's name, where known (evaluations)

    @property
    def names(self) -> list[str]:
        return [p["name"] for p in self.space.get("params", [])]

    @property
    def default_key(self) -> str:
        return json.dumps(self.space.get("default", {}), sort_keys=True)

    def best(self) -> tuple[str, float]:
        k = min(self.times, key=self.times.__getitem__)
        return k, self.times[k]


def load_scenarios(store: Any, device: str) -> list[ScenarioData]:
    """Every scenario of ``device`` in the store with at least one measurement."""
    meas = store.all_measurements(device)
    refused = store.all_refusals(device)
    out = []
    for s in store.scenarios(device):
        m = meas.get(s["key"])
        if not m:
            continue
        ref = refused.get(s["key"], set())
        times = {p: v[0] for p, v in m.items() if p not in ref}
        if not times:
            continue
        feats = scenario_features(s["skeleton"], s["device_features"], s["kernel_features"],
                                  s["dataset"], s["space"])
        out.append(ScenarioData(s["key"], s["kernel"], s["skeleton"], feats, s["space"], times,
                                set(ref), dict(s["kernel_features"]), dict(s["dataset"]),
                                device, s["kernel"]))
    return out


def static_ranking(data: Sequence[ScenarioData]) -> list[str]:
    """Points measured in every scenario, best geometric-mean performance relative to each
    scenario's best first ([Cummins 2018] §7.3.3's "best static" choice is the first)."""
    if not data:
        return []
    common = set.intersection(*(set(sd.times) for sd in data))
    best = [sd.best()[1] for sd in data]

    def score(p: str) -> float:
        return sum(math.log(b / sd.times[p]) for b, sd in zip(best, data))
    return sorted(common, key=score, reverse=True)


def risky_points(data: Sequence[ScenarioData]) -> set[str]:
    """Points the kind's model may not pick (:data:`CLIFF_BY_KIND`, :data:`SEEN_BY_KIND`):
    measured somewhere in ``data`` at more than the cliff times that scenario's best, or in
    fewer than the kind's number of scenarios (only where every scenario ran on one kind of
    device: shipped groups mix none)."""
    kinds = {device_kind(sd.features) for sd in data}
    kind = kinds.pop() if len(kinds) == 1 else None
    limit, seen = CLIFF_BY_KIND.get(kind, math.inf), SEEN_BY_KIND.get(kind, 0)
    if not math.isfinite(limit) and seen <= 1:
        return set()
    count = Counter(k for sd in data for k in sd.times)
    out = {k for k, n in count.items() if n < seen}
    for sd in data:
        bar = min(sd.times.values(), default=0.0) * limit
        out.update(k for k, t in sd.times.items() if t > bar)
    return out


def _baseline(sd: ScenarioData) -> float:
    """The space default's time when measured, else the geometric mean of the scenario.
    (The scenario's median point as the reference was measured on PoCL too: 79.5% of the
    oracle against 81.6% with the default, so the default stays.)"""
    t = sd.times.get(sd.default_key)
    if t is not None:
        return t
    return math.exp(sum(math.log(v) for v in sd.times.values()) / len(sd.times))


# -- one model per parameter signature ----------------------------------------------------------


@dataclass
class GroupModel:
    """The three fitted approaches for one device and one parameter signature."""

    sig: str
    scen_schema: Schema
    point_schema: Schema
    classifier: PackedForest | None = None
    classes: list[dict] = field(default_factory=list)
    runtime: PackedForest | None = None
    speedup: PackedForest | None = None
    # Points worth scoring: the best few of every training scenario, and the default.
    # Regressors score only these (and coarsening steps from them), which keeps a decision
    # well under a millisecond on spaces of thousands of points.
    plausible: list[str] = field(default_factory=list)
    n_scenarios: int = 0
    n_rows: int = 0
    origin: str = "local"       # "local": trained on this machine; "shipped": package data
    n_local: int = 0            # of the scenarios, this device's own (the rest: shipped data)
    # kinds of device ("gpu", "cpu") the training scenarios ran on; a model never predicts
    # for a kind it has not seen (a CPU's best point says nothing about a GPU's)
    kinds: list[str] = field(default_factory=list)
    # validated on this device's own scenarios (validation.py) and found no better than the
    # default: the model keeps the default and only orders the points sweeps measure
    keeps_default: bool = False
    validation: dict[str, Any] = field(default_factory=dict)   # what validation found

    def classify(self, scen: np.ndarray) -> dict | None:
        if self.classifier is None or not self.classes:
            return None
        proba = self.classifier.predict(scen[None, :])[0]
        return dict(self.classes[int(np.argmax(proba))])


def _block(sd: ScenarioData, numeric: Mapping[str, bool]) -> tuple[list[str], dict]:
    keys = list(sd.times)
    pts = [json.loads(k) for k in keys]
    cols = point_columns(pts, sd.names, numeric)
    cols.update(cross_columns(sd.features, cols))
    return keys, cols


def fit_group(sig: str, data: Sequence[ScenarioData], *, n_estimators: int = 24,
              max_depth: int = 14, classifier_kind: str = "forest", seed: int = 0,
              approaches: Sequence[str] = APPROACHES, max_rows: int = 60_000,
              plausible_top: int = 1, n_jobs: int = 1,
              weights: Sequence[float] | None = None, min_samples_leaf: int = 1) -> GroupModel:
    """Fit the approaches on scenarios sharing one parameter signature; ``weights`` (one
    per scenario) weigh its rows (this machine's measurements over shipped ones)."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
    from sklearn.tree import DecisionTreeClassifier

    scen_schema = Schema.from_dicts(sd.features for sd in data)
    numeric = space_numeric(data[0].space) if data else {}
    blocks = [_block(sd, numeric) for sd in data]
    point_schema = Schema(name for _, cols in blocks for name in cols)
    plausible: dict[str, None] = dict.fromkeys(static_ranking(data)[:plausible_top])
    for sd in data:
        ranked = sorted(sd.times, key=sd.times.__getitem__)
        plausible.update(dict.fromkeys(ranked[:plausible_top]))
    risky = risky_points(data)
    plausible = {k: None for k in plausible if k not in risky}
    for sd in data:
        plausible[sd.default_key] = None
    gm = GroupModel(sig, scen_schema, point_schema, n_scenarios=len(data),
                    plausible=list(plausible),
                    kinds=sorted({device_kind(sd.features) for sd in data}))
    S = scen_schema.matrix([sd.features for sd in data])

    if "classifier" in approaches:
        labels = [sd.best()[0] for sd in data]
        classes = sorted(set(labels))
        y = np.asarray([classes.index(lb) for lb in labels])
        if classifier_kind == "tree":
            clf = DecisionTreeClassifier(max_depth=max_depth, random_state=seed)
        else:
            clf = RandomForestClassifier(n_estimators=n_estimators, max_depth=max_depth,
                                         random_state=seed, n_jobs=n_jobs)
        clf.fit(S, y, sample_weight=None if weights is None else np.asarray(weights, float))
        gm.classifier = PackedForest(clf, classifier=True)
        gm.classes = [json.loads(classes[int(c)]) for c in clf.classes_]

    if "runtime" in approaches or "speedup" in approaches:
        Xs, y_rt, y_sp, ws = [], [], [], []
        for i, (sd, (keys, cols)) in enumerate(zip(data, blocks)):
            n = len(keys)
            P = point_schema.from_columns(cols, n)
            Xs.append(np.hstack([np.repeat(S[i:i + 1], n, axis=0), P]))
            base = _baseline(sd)
            t = robust_times(np.asarray([sd.times[k] for k in keys]),
                             TIE_BY_KIND.get(device_kind(sd.features), 0.0))
            y_rt.append(np.log(t))
            y_sp.append(np.log(base / t))
            ws.append(np.full(n, 1.0 if weights is None else float(weights[i])))
        X = np.vstack(Xs)
        yr, ys, w = np.concatenate(y_rt), np.concatenate(y_sp), np.concatenate(ws)
        if len(X) > max_rows:
            idx = np.random.default_rng(seed).choice(len(X), max_rows, replace=False)
            X, yr, ys, w = X[idx], yr[idx], ys[idx], w[idx]
        gm.n_rows = len(X)
        for name, target in (("runtime", yr), ("speedup", ys)):
            if name not in approaches:
                continue
            reg = RandomForestRegressor(n_estimators=n_estimators, max_depth=max_depth,
                                        random_state=seed, n_jobs=n_jobs, max_features=0.6,
                                        min_samples_leaf=min_samples_leaf)
            reg.fit(X, target, sample_weight=None if weights is None else w)
            setattr(gm, name, PackedForest(reg))
    return gm


@dataclass
class DeviceModel:
    device: str
    n_measurements: int
    groups: dict[str, GroupModel]
    trained_at: float = 0.0
    version: int = MODEL_VERSION
    pretrained: bool = False          # shipped with the package, not trained on this machine


def train(store: Any, device: str, **kw: Any) -> DeviceModel:
    """Fit every signature of ``device`` that has enough measured scenarios."""
    n = store.count_measurements(device)
    data = load_scenarios(store, device)
    by: dict[str, list[ScenarioData]] = {}
    for sd in data:
        by.setdefault(signature(sd.names), []).append(sd)
    groups = {sig: fit_group(sig, sds, **kw) for sig, sds in by.items()
              if len(sds) >= MIN_SCENARIOS}
    return DeviceModel(device, n, groups, time.time())


# -- choosing a point with a model --------------------------------------------------------------


def choose(gm: GroupModel, scen_feats: Mapping[str, float], cand: CandidateSet,
           refused: set[int], *, approach: str = DEFAULT_APPROACH,
           coarsen: str = DEFAULT_COARSEN, risk: float | None = None,
           default: int | None = None, min_gain: float | None = None) -> int | dict | None:
    """The model's pick among ``cand``: an index into it, or (classifier) a point dict that
    the caller must map to the nearest legal, unrefused point. ``risk`` (default: per device
    kind, :data:`RISK_BY_KIND`) penalises the regressors' disagreement between trees. With
    ``default`` (its index), the speedup regressor keeps the default unless it predicts at
    least ``min_gain`` (log speedup; default per device kind, :data:`MIN_GAIN_BY_KIND`), and a group
    that validation found no better than the default (``keeps_default``) keeps it."""
    if gm.keeps_default and default is not None and default not in refused:
        return default
    scen = gm.scen_schema.vector(scen_feats)
    if approach == "classifier":
        pred = gm.classify(scen)
        if pred is None:
            return None
        i = cand.index_of(pred)
        return i if i is not None and i not in refused else pred
    forest = gm.runtime if approach == "runtime" else gm.speedup
    if forest is None:
        return None
    scorer = _Scorer(gm, forest, scen, scen_feats, cand, sign=-1.0 if approach == "runtime"
                     else 1.0, risk=default_risk(scen_feats) if risk is None else risk)
    if coarsen == "doubling" and cand.coarsen_names:
        return _doubling(scorer, cand, refused)
    idx = [i for i in cand.plausible(gm) if i not in refused]
    if not idx:
        idx = [i for i in range(len(cand.points)) if i not in refused]
    if not idx:
        return None
    sc = scorer(idx)
    best = idx[int(np.argmax(sc))]
    gain = MIN_GAIN_BY_KIND.get(device_kind(scen_feats), 0.0) if min_gain is None else min_gain
    if approach == "speedup" and default is not None and default not in refused and gain > 0 \
            and best != default and float(np.max(sc)) - float(scorer([default])[0]) < gain:
        return default
    return best


def shortlist(gm: GroupModel, scen_feats: Mapping[str, float], cand: CandidateSet,
              refused: set[int], k: int, *, approach: str = DEFAULT_APPROACH,
              risk: float | None = None) -> list[int]:
    """The regressor's ``k`` best-scored candidates (indices into ``cand``), best first: what
    an online tuner should measure first when one prediction is not trusted (CPUs)."""
    forest = gm.runtime if approach == "runtime" else gm.speedup
    if forest is None:
        return []
    scen = gm.scen_schema.vector(scen_feats)
    scorer = _Scorer(gm, forest, scen, scen_feats, cand, sign=-1.0 if approach == "runtime"
                     else 1.0, risk=default_risk(scen_feats) if risk is None else risk)
    idx = [i for i in cand.plausible(gm) if i not in refused]
    if not idx:
        return []
    sc = scorer(idx)
    return [idx[j] for j in np.argsort(-sc, kind="stable")[:k]]


def rank(gm: GroupModel, scen_feats: Mapping[str, float], cand: CandidateSet,
         refused: set[int], *, approach: str = DEFAULT_APPROACH) -> list[int]:
    """Every unrefused candidate (indices into ``cand``), best predicted first: the order in
    which a sweep measures."""
    forest = gm.runtime if approach == "runtime" else gm.speedup
    if forest is None:
        return []
    scen = gm.scen_schema.vector(scen_feats)
    scorer = _Scorer(gm, forest, scen, scen_feats, cand, sign=-1.0 if approach == "runtime"
                     else 1.0, risk=0.0)
    idx = [i for i in range(len(cand.points)) if i not in refused]
    if not idx:
        return []
    sc = scorer(idx)
    return [idx[j] for j in np.argsort(-sc, kind="stable")]


class _Scorer:
    """Scores candidate indices for one scenario, remembering what it has scored."""

    def __init__(self, gm: GroupModel, forest: PackedForest, scen: np.ndarray,
                 scen_feats: Mapping[str, float], cand: CandidateSet, sign: float,
                 risk: float = 0.0):
        self.gm, self.forest, self.scen, self.cand, self.sign = gm, forest, scen, cand, sign
        self.risk = risk
        self.scen_feats = scen_feats
        self.known: dict[int, float] = {}

    def __call__(self, idx: Sequence[int]) -> np.ndarray:
        todo = [i for i in idx if i not in self.known]
        if todo:
            P = self.cand.matrix(self.gm, self.scen_feats, todo)
            X = np.empty((len(todo), self.scen.shape[0] + P.shape[1]), np.float32)
            X[:, :self.scen.shape[0]] = self.scen
            X[:, self.scen.shape[0]:] = P
            if self.risk:
                mean, sd = self.forest.predict_spread(X)
                sc = self.sign * mean - self.risk * sd
            else:
                sc = self.sign * self.forest.predict(X)
            for i, v in zip(todo, sc):
                self.known[i] = float(v)
        return np.asarray([self.known[i] for i in idx])


def _doubling(score: Callable[[Sequence[int]], np.ndarray], cand: CandidateSet,
              refused: set[int]) -> int | None:
    """[Magni 2015] §7.6: the best point without coarsening, then double a coarsening factor (the
    most promising one, when there are several) while the model predicts that it helps."""
    names = cand.coarsen_names
    lo = {n: min(p[n] for p in cand.points) for n in names}
    base = [i for i, p in enumerate(cand.points)
            if all(p[n] == lo[n] for n in names) and i not in refused]
    if not base:
        base = [i for i in range(len(cand.points)) if i not in refused]
        if not base:
            return None
    sc = score(base)
    cur, cur_s = base[int(np.argmax(sc))], float(np.max(sc))
    while True:
        steps = []
        for n in names:
            p = dict(cand.points[cur])
            p[n] = p[n] * 2
            nxt = cand.index_of(p)
            if nxt is not None and nxt not in refused:
                steps.append(nxt)
        if not steps:
            return cur
        sc = score(steps)
        j = int(np.argmax(sc))
        if not sc[j] > cur_s:
            return cur
        cur, cur_s = steps[j], float(sc[j])


class CandidateSet:
    """The legal points of one space with their feature columns, cached per model group."""

    def __init__(self, points: Sequence[Mapping[str, Any]], names: Sequence[str],
                 numeric: Mapping[str, bool]):
        self.points = [dict(p) for p in points]
        self.names = tuple(names)
        self.numeric = dict(numeric)
        self._index = {tuple(p[n] for n in self.names): i for i, p in enumerate(self.points)}
        self.cols = point_columns(self.points, self.names, numeric) if self.points else {}
        self._base: dict[int, tuple[GroupModel, np.ndarray]] = {}
        self._plausible: dict[int, tuple[GroupModel, list[int]]] = {}
        self.coarsen_names = tuple(n for n in self.names if is_coarsening(n)
                                   and self.numeric.get(n, True))

    def index_of(self, point: Mapping[str, Any]) -> int | None:
        try:
            return self._index.get(tuple(point[n] for n in self.names))
        except (KeyError, TypeError):
            return None

    def indices(self, keys: Iterable[tuple]) -> set[int]:
        """Positions of points given as key tuples (values in ``names`` order)."""
        return {i for i in (self._index.get(k) for k in keys) if i is not None}

    def matrix(self, gm: GroupModel, scen_feats: Mapping[str, float],
               idx: Sequence[int]) -> np.ndarray:
        """Point features (with the scenario's cross features) of candidates ``idx``."""
        hit = self._base.get(id(gm))
        if hit is None or hit[0] is not gm:
            hit = self._base[id(gm)] = (gm, gm.point_schema.from_columns(self.cols,
                                                                          len(self.points)))
        sel = np.asarray(idx, dtype=np.int64)
        m = hit[1][sel]
        sub = {k: v[sel] for k, v in self.cols.items()
               if k in ("p_items_per_group", "p_wg_r", "p_wg_c", "p_cr", "p_cc", "p_wg",
                        "p_vw")}
        for k, v in cross_columns(scen_feats, sub).items():
            j = gm.point_schema.index.get(k)
            if j is not None:
                m[:, j] = v
        return m

    def plausible(self, gm: GroupModel) -> list[int]:
        hit = self._plausible.get(id(gm))
        if hit is None or hit[0] is not gm:
            idx = []
            for k in gm.plausible:
                i = self.index_of(json.loads(k))
                if i is not None:
                    idx.append(i)
            hit = self._plausible[id(gm)] = (gm, idx)
        return hit[1]
