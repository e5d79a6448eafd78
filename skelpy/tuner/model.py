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

Fitting and training live here; the settings measured per kind of device in
:mod:`.model_settings`, the forests' array form in :mod:`.packed_forest`, and choosing a point
with a fitted model in :mod:`.model_choice` (their public names are importable from here too).
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .features import Schema, cross_columns, point_columns, scenario_features

# Names read as model.X by the tuner, the CLI, tests and benchmarks are importable from here.
from .model_choice import CandidateSet, choose, rank, shortlist  # noqa: F401
from .model_settings import (  # noqa: F401
    APPROACHES,
    CLIFF_BY_KIND,
    COARSEN_STRATEGIES,
    DEFAULT_APPROACH,
    DEFAULT_COARSEN,
    DEFAULTS_BY_KIND,
    SEEN_BY_KIND,
    TIE_BY_KIND,
    default_method,
    device_kind,
    group_for,
    kind_key,
    robust_times,
)
from .packed_forest import PackedForest

MODEL_VERSION = 3          # 3: data-only files (model_files.py); 2 was pickles
RETRAIN_EVERY = 50         # new measurements of a device before its model is retrained
MIN_SCENARIOS = 2          # a signature needs this many measured scenarios to be modelled


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
