"""Choosing a launch point with a fitted model: the pick of one approach (:func:`choose`),
the shortlist an online tuner measures first (:func:`shortlist`), the order a sweep measures in
(:func:`rank`), over the legal points of one space (:class:`CandidateSet`).

Coarsening is chosen jointly with the other parameters (argmax over the whole grid) or by
[Magni 2015]'s scheme (§7.6): pick the best point at coarsening 1, then keep doubling the
factor while the model predicts that it helps. Apart from :mod:`.model` (training): a
decision runs on every tuned call and must stay well under a millisecond.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .features import cross_columns, is_coarsening, point_columns
from .model_settings import (
    DEFAULT_APPROACH,
    DEFAULT_COARSEN,
    MIN_GAIN_BY_KIND,
    default_risk,
    device_kind,
)

if TYPE_CHECKING:
    from .model import GroupModel
    from .packed_forest import PackedForest


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
