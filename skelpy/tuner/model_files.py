"""Model files as data only, loaded only from places this user controls; the shipped models.

A :class:`~skelpy.tuner.model.DeviceModel` is saved as a NumPy ``.npz`` archive: the forests'
arrays plus one JSON document (schemas, classes, counts). Loading uses
``allow_pickle=False`` and checks every array's type, shape and index range, so a file can at
worst hold a bad model (whose choices are still checked for legality and correct results),
never code. On top of that, as SSH does, a file is read only when it is a regular file (not a
symlink) owned by this user or root and not writable by others, in a folder of the same kind
(``cache_dir.py``). The starting models shipped in ``pretrained/`` load through the same
path.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .cache_dir import UnsafePath, check_dir, ensure_dir, read_file, write_file
from .features import Schema
from .model import APPROACHES, MODEL_VERSION, DeviceModel, GroupModel, PackedForest

FORMAT = "skelpy-model"
SUFFIX = ".npz"
MAX_BYTES = 64 << 20          # a model file larger than this is refused
MAX_DEPTH = 64

_warned: set[str] = set()


def model_path(directory: Path, device: str) -> Path:
    """Where the model of ``device`` lives in the cache folder ``directory``."""
    h = hashlib.sha1(device.encode()).hexdigest()[:16]
    return directory / "models" / f"{h}{SUFFIX}"


# -- writing ---------------------------------------------------------------------------------------


def to_bytes(model: DeviceModel) -> bytes:
    """The model as an ``.npz`` archive: arrays and a JSON document, nothing executable."""
    arrays: dict[str, np.ndarray] = {}
    groups = []
    for i, (sig, g) in enumerate(model.groups.items()):
        forests = {}
        for name in APPROACHES:
            f: PackedForest | None = getattr(g, name)
            if f is None:
                continue
            forests[name] = {"depth": int(f.depth), "classifier": bool(f.classifier),
                             "classes": [_plain(c) for c in f.classes]}
            for part in ("feature", "threshold", "children", "value", "roots"):
                arrays[f"g{i}.{name}.{part}"] = np.ascontiguousarray(getattr(f, part))
        groups.append({"sig": g.sig, "key": sig, "scen_schema": list(g.scen_schema.names),
                       "point_schema": list(g.point_schema.names), "classes": g.classes,
                       "plausible": list(g.plausible), "n_scenarios": int(g.n_scenarios),
                       "n_rows": int(g.n_rows), "origin": g.origin, "n_local": int(g.n_local),
                       "kinds": list(g.kinds), "keeps_default": bool(g.keeps_default),
                       "validation": _validation(g.validation),
                       "forests": forests})
    meta = {"format": FORMAT, "version": MODEL_VERSION, "device": model.device,
            "n_measurements": int(model.n_measurements), "trained_at": float(model.trained_at),
            "groups": groups}
    arrays["meta"] = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def save(model: DeviceModel, path: Path) -> None:
    """Write atomically, mode 0600, in a 0700 folder, never through a symlink."""
    ensure_dir(path.parent)
    write_file(path, to_bytes(model))


def _validation(v: dict) -> dict:
    """A group's validation record with finite numbers only (JSON)."""
    out: dict[str, Any] = {}
    for k, x in v.items():
        if isinstance(x, dict):
            out[str(k)] = {str(a): float(b) for a, b in x.items() if math.isfinite(b)}
        elif isinstance(x, str) or (isinstance(x, (int, float)) and math.isfinite(x)):
            out[str(k)] = x
    return out


def _plain(v: Any) -> Any:
    item = getattr(v, "item", None)
    return item() if callable(item) else v


# -- reading ---------------------------------------------------------------------------------------


class BadModel(ValueError):
    """A model file whose content is not a valid model."""


def from_bytes(data: bytes) -> DeviceModel:
    """Parse and validate an archive written by :func:`to_bytes`; raises :class:`BadModel`."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, KeyError) as exc:
        raise BadModel(f"not a model archive ({exc})") from exc
    try:
        meta = json.loads(bytes(arrays.pop("meta")).decode())
    except (KeyError, ValueError, TypeError) as exc:
        raise BadModel("no model description in the archive") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise BadModel("not a skelpy model")
    if meta.get("version") != MODEL_VERSION:
        raise BadModel(f"model version {meta.get('version')!r}, expected {MODEL_VERSION}")
    try:
        groups = {}
        for i, gd in enumerate(meta["groups"]):
            g = GroupModel(str(gd["sig"]), Schema(map(str, gd["scen_schema"])),
                           Schema(map(str, gd["point_schema"])),
                           classes=[dict(c) for c in gd["classes"]],
                           plausible=[str(p) for p in gd["plausible"]],
                           n_scenarios=int(gd["n_scenarios"]), n_rows=int(gd["n_rows"]),
                           origin=str(gd.get("origin", "local")),
                           n_local=int(gd.get("n_local", 0)),
                           kinds=[str(k) for k in gd.get("kinds", [])],
                           keeps_default=bool(gd.get("keeps_default", False)),
                           validation=dict(gd.get("validation", {})))
            n_features = len(g.scen_schema) + len(g.point_schema)
            for name, fd in dict(gd["forests"]).items():
                if name not in APPROACHES:
                    raise BadModel(f"unknown approach {name!r}")
                parts = {p: arrays[f"g{i}.{name}.{p}"]
                         for p in ("feature", "threshold", "children", "value", "roots")}
                setattr(g, name, _forest(parts, fd, n_features,
                                         len(g.scen_schema) if name == "classifier" else None))
            groups[str(gd.get("key", g.sig))] = g
        return DeviceModel(str(meta["device"]), int(meta["n_measurements"]), groups,
                           float(meta["trained_at"]))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, BadModel):
            raise
        raise BadModel(f"malformed model ({type(exc).__name__}: {exc})") from exc


def _forest(parts: dict[str, np.ndarray], fd: dict, n_features: int,
            classifier_features: int | None) -> PackedForest:
    """A forest from untrusted arrays: types, shapes and every index checked, so prediction
    can neither read out of bounds nor loop."""
    feature, threshold, children, value, roots = (
        parts["feature"], parts["threshold"], parts["children"], parts["value"], parts["roots"])
    for a, kind in ((feature, "iu"), (children, "iu"), (roots, "iu"), (threshold, "f"),
                    (value, "f")):
        if a.dtype.kind not in kind:
            raise BadModel(f"array of type {a.dtype} where {kind} was expected")
    n = feature.shape[0] if feature.ndim == 1 else -1
    depth = int(fd["depth"])
    classifier = bool(fd["classifier"])
    if (n <= 0 or threshold.shape != (n,) or children.shape != (2 * n,) or roots.ndim != 1
            or value.shape[0] != n or value.ndim != (2 if classifier else 1)
            or not 0 <= depth <= MAX_DEPTH or len(roots) == 0):
        raise BadModel("forest arrays of inconsistent shapes")
    limit = classifier_features if classifier_features is not None else n_features
    if (feature.min() < 0 or feature.max() >= max(limit, 1) or children.min() < 0
            or children.max() >= n or roots.min() < 0 or roots.max() >= n
            or np.isnan(threshold).any()):
        raise BadModel("forest indices out of range")
    return PackedForest.from_arrays(feature.astype(np.int64), threshold.astype(np.float64),
                                    children.astype(np.int64), value, roots.astype(np.int64),
                                    depth, classifier=classifier, classes=fd.get("classes", ()))


def load(path: Path) -> DeviceModel | None:
    """The model at ``path``, or None when it is missing, invalid, of another version, or in
    a place another user could have written (that is said once, as a warning)."""
    try:
        check_dir(path.parent)
        data = read_file(path, MAX_BYTES)
        return from_bytes(data)
    except FileNotFoundError:
        return None
    except UnsafePath as exc:
        _warn_once(str(path), f"skelpy: not loading the tuning model {path}: {exc}")
    except BadModel as exc:
        _warn_once(str(path), f"skelpy: ignoring the tuning model {path}: {exc}")
    except OSError:
        pass
    return None


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


# -- the starting model shipped with the package -------------------------------------------------

# pretrained/zero-shot.npz: the speedup regressor trained on the measurements of every device
# shipped in pretrained/data-*.npz, whose features include the device's queries, so that a
# device never measured starts from it (zero_shot.py builds it; benchmarks/tuner_eval.py
# --lodo measures how well it transfers to a device left out).
PRETRAINED_DIR = Path(__file__).with_name("pretrained")
SHIPPED_MODEL = "zero-shot" + SUFFIX


def pretrained_enabled() -> bool:
    """False when ``SKELPY_TUNE_PRETRAINED=off``: neither the shipped model nor the shipped
    training data is used (a device learns from its own measurements only)."""
    return os.environ.get("SKELPY_TUNE_PRETRAINED", "on").lower() not in ("off", "0", "no")


def load_pretrained(device: str) -> DeviceModel | None:
    """The shipped starting model, as ``device``'s (see :func:`pretrained_enabled`)."""
    if not pretrained_enabled():
        return None
    m = load(PRETRAINED_DIR / SHIPPED_MODEL)
    if m is None:
        return None
    for g in m.groups.values():
        g.origin = "shipped"
    return DeviceModel(device, 0, dict(m.groups), m.trained_at, pretrained=True)


def compact(model: DeviceModel, approach: str) -> DeviceModel:
    """A copy keeping only ``approach``'s forests, with narrower integer and value arrays
    (the shipped file stays small; predictions are unchanged: thresholds keep float64)."""
    out = copy.deepcopy(model)
    for g in out.groups.values():
        for name in APPROACHES:
            if name != approach:
                setattr(g, name, None)
                if name == "classifier":
                    g.classes = []
        for name in APPROACHES:
            f = getattr(g, name)
            if f is None:
                continue
            f.feature = f.feature.astype(np.int32)
            f.children = f.children.astype(np.int32)
            f.roots = f.roots.astype(np.int32)
            f.value = f.value.astype(np.float32)
    return out
