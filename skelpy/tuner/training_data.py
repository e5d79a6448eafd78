"""Measurements as compact, data-only files: what a device taught the tuner, to ship with
the package and to train models for devices that were never measured.

One file holds one device: its queries (``Device.features``), and per scenario the kernel's
features, the data size, the launch-parameter space and every measured point with its time.
Features are recomputed from these ingredients when a model is trained, so a file outlives
changes to the feature set. The file is a NumPy ``.npz`` archive: one JSON document and
integer/float arrays (a point is stored as the indices of its values in the space's lists),
written compressed and read with ``allow_pickle=False``: at worst a bad file holds wrong
numbers, never code. Sets shipped in ``pretrained/`` (``data-*.npz``) load through the same
checks as the models beside them (``model_files``).

    skelpy tune --export FILE        this machine's measurements of its device
    python -m benchmarks.tuner_eval --collect --minutes 3     sweeps + the file, in one go
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .cache_dir import read_file
from .features import scenario_features
from .model import ScenarioData
from .store import params_json

FORMAT = "skelpy-training-data"
VERSION = 1
MAX_BYTES = 16 << 20
PREFIX = "data-"          # shipped sets: pretrained/data-<device>.npz


class BadData(ValueError):
    """A file that is not a valid training-data set."""


@dataclass
class DeviceData:
    """The measurements of one device."""

    device: str
    device_features: dict[str, float]
    scenarios: list[ScenarioData] = field(default_factory=list)
    source: str = ""                  # the file it came from

    @property
    def points(self) -> int:
        return sum(len(sd.times) for sd in self.scenarios)


# -- writing -------------------------------------------------------------------------------------


def from_store(store: Any, device: str, names: Mapping[str, str] | None = None,
               keys: Iterable[str] | None = None) -> DeviceData:
    """The measurements of ``device`` in ``store`` (only ``keys`` when given); ``names``
    labels scenarios (scenario key -> kernel name, e.g. ``gaussian_5x5``: evaluations leave
    kernels out by it)."""
    from .model import load_scenarios

    want = set(keys) if keys is not None else None
    feats = store.devices().get(device, {})
    scns = [sd for sd in load_scenarios(store, device) if want is None or sd.key in want]
    for sd in scns:
        sd.group = (names or {}).get(sd.key, sd.group or sd.kernel)
        sd.device = device
    return DeviceData(device, dict(feats), scns)


def to_bytes(data: DeviceData) -> bytes:
    """The archive: a JSON description and the points as value indices, compressed."""
    kernels: dict[str, int] = {}
    kern_list: list[dict] = []
    scen_list: list[dict] = []
    scen_idx, values, secs = [], [], []
    width = max((len(sd.names) for sd in data.scenarios), default=1)
    for sd in data.scenarios:
        kk = sd.kernel
        if kk not in kernels:
            kernels[kk] = len(kern_list)
            kern_list.append({"key": kk, "skeleton": sd.skeleton,
                              "features": dict(sd.kernel_features)})
        params = sd.space.get("params", [])
        lookup = [{json.dumps(v): i for i, v in enumerate(p["values"])} for p in params]
        n = 0
        for pj, t in sd.times.items():
            row = _encode(pj, params, lookup, width)
            if row is None or not (t > 0 and math.isfinite(t)):
                continue
            scen_idx.append(len(scen_list))
            values.append(row)
            secs.append(t)
            n += 1
        scen_list.append({"kernel": kernels[kk], "name": sd.group, "key": sd.key,
                          "dataset": dict(sd.dataset), "space": sd.space, "points": n,
                          "refused": [r for r in (_encode(pj, params, lookup, width)
                                                  for pj in sorted(sd.refused))
                                      if r is not None]})
    meta = {"format": FORMAT, "version": VERSION, "device": data.device,
            "device_features": data.device_features, "kernels": kern_list,
            "scenarios": scen_list}
    buf = io.BytesIO()
    np.savez_compressed(
        buf, meta=np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8),
        scenario=np.asarray(scen_idx, np.int32),
        values=np.asarray(values, np.int8).reshape(-1, width),
        seconds=np.asarray(secs, np.float32))
    return buf.getvalue()


def _encode(pj: str, params: list, lookup: list[dict], width: int) -> list[int] | None:
    """A params JSON as the indices of its values in the space's lists (None if a value is
    not listed)."""
    p = json.loads(pj)
    row = []
    for spec, table in zip(params, lookup):
        i = table.get(json.dumps(p.get(spec["name"])))
        if i is None:
            return None
        row.append(i)
    return row + [-1] * (width - len(row))


def _decode(row: Sequence[int], params: list) -> str:
    p = {}
    for j, spec in enumerate(params):
        v = int(row[j])
        if not 0 <= v < len(spec["values"]):
            raise BadData(f"value index {v} out of range for {spec['name']}")
        p[str(spec["name"])] = spec["values"][v]
    return params_json(p)


def save(data: DeviceData, path: Path | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(to_bytes(data))
    return path


# -- reading -------------------------------------------------------------------------------------


def from_bytes(blob: bytes, source: str = "") -> DeviceData:
    """Parse and validate an archive written by :func:`to_bytes`; raises :class:`BadData`."""
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        meta = json.loads(bytes(arrays["meta"]).decode())
    except (OSError, ValueError, EOFError, KeyError, UnicodeDecodeError) as exc:
        raise BadData(f"not a training-data archive ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise BadData("not a skelpy training-data file")
    if meta.get("version") != VERSION:
        raise BadData(f"training-data version {meta.get('version')!r}, expected {VERSION}")
    try:
        scen_of, values, secs = arrays["scenario"], arrays["values"], arrays["seconds"]
        if scen_of.dtype.kind not in "iu" or values.dtype.kind not in "iu" \
                or secs.dtype.kind != "f" or values.ndim != 2 \
                or not len(scen_of) == len(values) == len(secs):
            raise BadData("point arrays of inconsistent types or shapes")
        kernels = [(str(k["key"]), str(k["skeleton"]), _floats(k["features"]))
                   for k in meta["kernels"]]
        dev_feats = _floats(meta["device_features"])
        device = str(meta["device"])
        scns = meta["scenarios"]
        if len(scen_of) and (scen_of.min() < 0 or scen_of.max() >= len(scns)):
            raise BadData("point rows name scenarios that do not exist")
        rows_of: list[list[int]] = [[] for _ in scns]
        for i, s in enumerate(scen_of.tolist()):
            rows_of[s].append(i)
        out = DeviceData(device, dev_feats, source=source)
        for si, s in enumerate(scns):
            kkey, skel, kfeats = kernels[int(s["kernel"])]
            space = dict(s["space"])
            params = list(space["params"])
            if values.shape[1] < len(params):
                raise BadData("point rows narrower than the space")
            times = {}
            for i in rows_of[si]:
                t = float(secs[i])
                if t > 0 and math.isfinite(t):
                    times[_decode(values[i], params)] = t
            if not times:
                continue
            dataset = {str(k): v for k, v in dict(s["dataset"]).items()}
            feats = scenario_features(skel, dev_feats, kfeats, dataset, space)
            sd = ScenarioData(str(s.get("key") or f"{device}#{si}"), kkey, skel, feats, space,
                              times, {_decode(r, params) for r in s.get("refused", [])})
            sd.group = str(s.get("name") or kkey)
            sd.device = device
            sd.kernel_features = kfeats
            sd.dataset = dataset
            out.scenarios.append(sd)
        return out
    except BadData:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise BadData(f"malformed training data ({type(exc).__name__}: {exc})") from exc


def _floats(d: Mapping) -> dict[str, float]:
    out = {}
    for k, v in dict(d).items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        out[str(k)] = float(v)
    return out


def load(path: Path | str) -> DeviceData:
    """A training-data file (raises :class:`BadData` or ``OSError``)."""
    path = Path(path)
    return from_bytes(read_file(path, MAX_BYTES), str(path))


def shipped(directory: Path | None = None) -> list[DeviceData]:
    """The training data shipped with the package (``pretrained/data-*.npz``), sorted by
    file name; files that fail to load are skipped."""
    from .model_files import PRETRAINED_DIR

    d = directory or PRETRAINED_DIR
    out = []
    for f in sorted(d.glob(f"{PREFIX}*.npz")):
        try:
            out.append(load(f))
        except (BadData, OSError):
            continue
    return out
