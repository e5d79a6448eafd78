"""Models across devices: a device never measured starts from what others taught, and its own
measurements take over as they come (issue 18's anchors: the BAT study carried tuned points
from one GPU to another, MTL-TLP transferred models across hardware with a little of the
target's data).

The features of a scenario include the device's queries (``Device.features``: compute units,
work-group and local-memory limits, cache, vector width, ...), so one forest trained on the
measurements of several devices predicts for a new one from its queries. The package ships
those measurements as data (``pretrained/data-*.npz``, :mod:`training_data`) and the model
trained on all of them (``pretrained/zero-shot.npz``, data-only like every model).

Training for one device (:func:`train`) fits, per launch-parameter signature the device has
measured, its own scenarios together with the shipped ones, its own weighted so that they
count at least as much as all the others together; from :data:`LOCAL_TAKES_OVER` scenarios
of a signature on (a scenario counting by how much of it was measured, :func:`coverage`),
the other devices' data is left out. The fitted model is then validated on the device's own
scenarios (:mod:`validation`) and leaves the default only where it beat it. Signatures it
has not measured keep the shipped model's group. Shipped data of the same device counts as
its own.

    python -m skelpy.tuner.zero_shot       rebuild pretrained/zero-shot.npz from the data
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import training_data, validation
from .model import (
    MIN_SCENARIOS,
    DeviceModel,
    GroupModel,
    ScenarioData,
    default_method,
    device_kind,
    fit_group,
    group_for,
    kind_key,
    load_scenarios,
    signature,
)
from .store import params_json

LOCAL_TAKES_OVER = 12     # this device's scenarios of a signature from which it trains alone
VALIDATION_TREES = 8      # trees of each refit that validation makes
FULL_POINTS = 16          # measured points from which a scenario counts fully towards it
SHIPPED_MODEL = "zero-shot.npz"
TREES = 16                # trees of the shipped model (its file stays a few hundred KiB)
DEPTH = 12
MIN_LEAF = 3              # rows per leaf of the shipped model's trees


def align(scenarios: Sequence[ScenarioData],
          targets: Sequence[ScenarioData] | None = None) -> list[ScenarioData]:
    """Scenarios measured before a launch parameter existed (the stencil's ``vec``), moved
    to today's signature: the kernel they measured ran that parameter at its default, which
    is the one value every newer scenario of the same skeleton and kind of device agrees on
    as default (on CPUs the stencil's ``vec`` is always 1). The signatures aligned to are
    those of ``targets`` (default: of ``scenarios`` themselves)."""
    sigs: dict[tuple[str, str, str], dict[str, Any]] = {}
    for sd in (scenarios if targets is None else targets):
        k = (sd.skeleton, device_kind(sd.features), signature(sd.names))
        if k not in sigs:
            sigs[k] = {"names": sd.names, "defaults": {}, "params": {}}
        for p in sd.space.get("params", []):
            d = sd.space.get("default", {}).get(p["name"])
            sigs[k]["defaults"].setdefault(p["name"], set()).add(json.dumps(d))
            sigs[k]["params"].setdefault(p["name"], p)
    out = []
    for sd in scenarios:
        names = set(sd.names)
        kind = device_kind(sd.features)
        wider = [v for (skel, knd, _s), v in sigs.items() if skel == sd.skeleton
                 and knd == kind and names < set(v["names"])
                 and all(len(v["defaults"][n]) == 1 for n in set(v["names"]) - names)]
        if not wider:
            out.append(sd)
            continue
        target = max(wider, key=lambda v: len(v["names"]))
        extra = {n: json.loads(next(iter(target["defaults"][n])))
                 for n in target["names"] if n not in names}
        order = list(target["names"])
        space = dict(sd.space)
        params = {p["name"]: p for p in space.get("params", [])}
        for n, v in extra.items():
            params[n] = {**target["params"][n], "values": [v]}
        space["params"] = [params[n] for n in order]
        space["default"] = {**space.get("default", {}), **extra}

        new = copy.copy(sd)
        new.space = space
        new.times = {params_json({**json.loads(k), **extra}): t for k, t in sd.times.items()}
        new.refused = {params_json({**json.loads(k), **extra}) for k in sd.refused}
        out.append(new)
    return out


def coverage(sd: ScenarioData) -> float:
    """How much of a scenario counts towards :data:`LOCAL_TAKES_OVER`: a scenario with a
    couple of points measured (``skelpy tune``'s first minutes) teaches less than a swept one
    (a space smaller than :data:`FULL_POINTS` counts fully when it was swept whole)."""
    size = math.prod(len(p.get("values", ())) for p in sd.space.get("params", [])) or 1
    return min(1.0, len(sd.times) / min(FULL_POINTS, size))


def training_set(local: Sequence[ScenarioData], others: Sequence[ScenarioData],
                 device: str) -> dict[str, tuple[list[ScenarioData], list[float]]]:
    """Per signature that ``local`` measured: the scenarios to fit and their weights."""
    mine_keys = {sd.key for sd in local}
    own = list(local) + [sd for sd in others if sd.device == device and sd.key not in mine_keys]
    foreign = [sd for sd in others if sd.device != device]
    kinds = {device_kind(sd.features) for sd in own}
    if len(kinds) == 1 and any(device_kind(sd.features) in kinds for sd in foreign):
        # devices of the same kind only (leave-one-device-out: a GPU's picks were better
        # from GPUs' data alone, 97.1% of the oracle on an H200 against 93.1% with CPUs')
        foreign = [sd for sd in foreign if device_kind(sd.features) in kinds]
    by_own: dict[str, list[ScenarioData]] = {}
    for sd in own:
        by_own.setdefault(signature(sd.names), []).append(sd)
    out = {}
    for sig, mine in by_own.items():
        theirs = [sd for sd in foreign if signature(sd.names) == sig]
        if sum(coverage(sd) for sd in mine) >= LOCAL_TAKES_OVER or not theirs:
            out[sig] = (mine, [1.0] * len(mine))
            continue
        w = max(1.0, len(theirs) / len(mine))
        out[sig] = (mine + theirs, [w] * len(mine) + [1.0] * len(theirs))
    return out


def train(store: Any, device: str, *, shipped: Sequence[training_data.DeviceData] | None = None,
          base: DeviceModel | None = None, approaches: Sequence[str] | None = None,
          **kw: Any) -> DeviceModel:
    """The model of ``device`` from its measurements in ``store`` (:func:`train_on`)."""
    return train_on(load_scenarios(store, device), device, store.count_measurements(device),
                    shipped=shipped, base=base, approaches=approaches, **kw)


def train_on(local: Sequence[ScenarioData], device: str, n_measurements: int = 0, *,
             shipped: Sequence[training_data.DeviceData] | None = None,
             base: DeviceModel | None = None, approaches: Sequence[str] | None = None,
             validate: bool = True, **kw: Any) -> DeviceModel:
    """The model of ``device``: its measured signatures fitted on its scenarios ``local`` and
    the shipped ones (weighted), every other signature from ``base`` (the shipped model).
    A fitted signature is validated on the device's own scenarios (:mod:`validation`): it is
    used only where it beat the default (and the shipped group); else the shipped group where
    that beat the default, else the default (the fitted model then only orders sweeps); with
    too little evidence, the shipped group or the default (as before tuning)."""
    from .model_files import pretrained_enabled

    if shipped is None:
        shipped = training_data.shipped() if pretrained_enabled() else []
    # other devices' scenarios measured before a parameter existed, in today's signatures
    others = align([sd for d in shipped for sd in d.scenarios], targets=local)
    feats = local[0].features if local else {}
    if approaches is None:
        approaches = (default_method(feats or {"dev_is_gpu": 1.0})[0],)
        if "classifier" in approaches:
            approaches = ("speedup", "classifier")
    kind = device_kind(feats) if feats else None
    groups = {}
    for sig, (data, weights) in training_set(local, others, device).items():
        if len(data) < MIN_SCENARIOS:
            continue

        def refit(d: Sequence[ScenarioData], w: Sequence[float], sig: str = sig) -> GroupModel:
            """Validation's refits: the speedup regressor alone, with fewer trees (a CPU
            retrains in the background of its sweeps)."""
            trees = min(int(kw.get("n_estimators", VALIDATION_TREES)), VALIDATION_TREES)
            return fit_group(sig, d, weights=w, approaches=("speedup",),
                             **{**kw, "n_estimators": trees})

        g = fit_group(sig, data, weights=weights, approaches=approaches, **kw)
        g.n_local = sum(1 for sd in data if sd.device == device)
        if not validate:
            groups[sig] = g
            continue
        ship = group_for(base.groups, sig, kind) if base is not None and kind else None
        mine = [sd for sd in data if sd.device == device]
        v = validation.validate(mine, data, weights, refit, ship)
        if v.use == "shipped" and ship is not None:
            g = copy.copy(ship)
        elif v.use != "local":
            g.keeps_default = True
        g.validation = {"use": v.use, "scenarios": v.scenarios, "scores": dict(v.scores)}
        groups[sig] = g
    if base is not None:
        for sig, g in base.groups.items():
            groups.setdefault(sig, g)
    return DeviceModel(device, n_measurements, groups, time.time())


def across_devices(data: Sequence[ScenarioData], *, depth: int = DEPTH) -> float | None:
    """Leave-one-device-out within ``data`` (one signature, one kind of device): the mean
    log speedup over the default of the picks, per held-out device, of a model fitted on the
    other devices. None with fewer than two devices (nothing to check against). The shipped
    model keeps the default for a kind where this is below ``validation.margin`` (the two
    PoCL CPUs: each one's picks from the other's data lose to the default), so a new device
    is never started from a model that did not carry from one device of its kind to another."""
    devices = sorted({sd.device for sd in data})
    if len(devices) < 2:
        return None
    gains, every = [], []
    for dev in devices:
        train = [sd for sd in data if sd.device != dev]
        held = [sd for sd in data if sd.device == dev and validation.evidence(sd)]
        if len(train) < MIN_SCENARIOS or not held:
            continue
        gm = fit_group(train[0] and signature(train[0].names), train,
                       n_estimators=VALIDATION_TREES, max_depth=depth, n_jobs=-1,
                       approaches=("speedup",), min_samples_leaf=MIN_LEAF)
        g = [validation.gain_of(gm, sd) for sd in held]
        every += g
        gains.append(sum(g) / len(g))
    if every and not validation.losses_ok(every, device_kind(data[0].features)):
        return -math.inf         # much slower than the default too often (validation.py)
    return sum(gains) / len(gains) if gains else None


def build(sets: Sequence[training_data.DeviceData], *, trees: int = TREES, depth: int = DEPTH,
          device: str = "shipped") -> DeviceModel:
    """The speedup regressor (compacted) per signature and kind of device, each trained on
    the scenarios of that kind of device in ``sets`` (keyed :func:`~.model.kind_key`)."""
    from .model_files import compact

    by: dict[str, list[ScenarioData]] = {}
    sigs: dict[str, str] = {}
    for sd in align([sd for d in sets for sd in d.scenarios]):
        key = kind_key(signature(sd.names), device_kind(sd.features))
        by.setdefault(key, []).append(sd)
        sigs[key] = signature(sd.names)
    groups = {key: fit_group(sigs[key], sds, n_estimators=trees, max_depth=depth, n_jobs=-1,
                             approaches=("speedup",), min_samples_leaf=MIN_LEAF)
              for key, sds in by.items() if len(sds) >= MIN_SCENARIOS}
    for key, g in groups.items():
        score = across_devices(by[key], depth=depth)
        if score is not None:
            bar = validation.margin(device_kind(by[key][0].features))
            g.validation = {"use": "shipped" if score >= bar else "default",
                            "scenarios": len(by[key]), "scores": {"devices": math.exp(score)}}
            g.keeps_default = score < bar
    for g in groups.values():
        g.origin = "shipped"
    return compact(DeviceModel(device, 0, groups, time.time()), "speedup")


def main(argv: Sequence[str] | None = None) -> int:
    from .model_files import PRETRAINED_DIR, save

    ap = argparse.ArgumentParser(prog="python -m skelpy.tuner.zero_shot",
                                 description="rebuild the shipped cross-device model from the "
                                 "shipped training data (pretrained/data-*.npz)")
    ap.add_argument("--dir", default=str(PRETRAINED_DIR))
    ap.add_argument("--trees", type=int, default=TREES)
    ap.add_argument("--depth", type=int, default=DEPTH)
    args = ap.parse_args(argv)
    d = Path(args.dir)
    sets = training_data.shipped(d)
    if not sets:
        print(f"no {training_data.PREFIX}*.npz in {d}")
        return 1
    for s in sets:
        print(f"  {Path(s.source).name}: {s.device}: {len(s.scenarios)} scenarios, "
              f"{s.points} points")
    m = build(sets, trees=args.trees, depth=args.depth)
    path = d / SHIPPED_MODEL
    save(m, path)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB; signatures "
          + ", ".join(f"[{s}] {g.n_scenarios} scenarios" for s, g in m.groups.items()) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
