"""A fitted scikit-learn forest packed into plain NumPy arrays.

Prediction then needs no scikit-learn import, scores all candidates in one vectorised walk
over the trees, and a model is saved as data only (``model_files.py``: arrays and JSON, no
pickle), independent of scikit-learn's version.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


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
