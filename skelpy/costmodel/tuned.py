"""The tuner's own measurements of a call, preferred over the static model.

The tuning store keeps, per scenario (device, kernel, data size bucketed by log2), the
measured kernel time of every launch point tried (``skelpy/tuner/store.py``). The tuner
launches the best measured point of a scenario when there is one, so that point's time is
what the call will take. Sizes the tuner measured near this one serve too, scaled by the
static model (see :func:`skelpy.costmodel.choice.kernel_prediction`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping

from .. import tuner
from ..tuner import store as _store
from . import decisions

_cache: dict[tuple, float | None] = {}
_near: dict[tuple, list[tuple[float, float]]] = {}
_lock = threading.Lock()


def _forget() -> None:
    with _lock:
        _cache.clear()
        _near.clear()
    decisions.measured()          # the store's times changed: a decision that used them


_store.on_store_change(_forget)


def scenario_seconds(device, kernel_key: str, dataset: Mapping[str, float]) -> float | None:
    """The best measured kernel time of this scenario on ``device``, None if unmeasured."""
    req = tuner.TuningRequest(skeleton="", kernel_key=kernel_key, device=device,
                              space=None, dataset=dict(dataset))
    sid = tuner.scenario_id(req)
    key = (device.key, sid)
    if key in _cache:
        return _cache[key]
    try:
        best = _store.get_store().best(sid)
    except Exception:  # noqa: BLE001 - the store degrades; the model does not need it
        best = None
    value = None if best is None else float(best[1])
    with _lock:
        if len(_cache) > 8192:
            _cache.clear()
        _cache[key] = value
    return value


def measured_sizes(device, kernel_key: str) -> list[tuple[float, float]]:
    """(n, best kernel seconds) of every scenario of this kernel the tuner measured."""
    key = (device.key, kernel_key)
    got = _near.get(key)
    if got is not None:
        return got
    out = []
    try:
        st = _store.get_store()
        scns = [s for s in st.scenarios(device.key) if s["kernel"] == kernel_key]
        for s in scns:
            best = st.best(s["key"])
            n = s["dataset"].get("n") if isinstance(s["dataset"], Mapping) else None
            if best is not None and isinstance(n, (int, float)) and n > 0 \
                    and math.isfinite(best[1]):
                out.append((float(n), float(best[1])))
    except Exception:  # noqa: BLE001 - as above
        out = []
    with _lock:
        _near[key] = out
    return out
