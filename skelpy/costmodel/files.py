"""Where the cost model keeps its data: JSON files in ``costmodel/`` of the private cache
folder (the tuning store's folder, with its rules: 0700/0600, no symlinks followed, owner
checked; see ``skelpy/tuner/cache_dir.py``). Per device, ``<id>.json`` holds the calibrated
coefficients and ``<id>-history.json`` the predictions next to measured times. Only JSON,
validated on reading, never a pickle; a file that cannot be read or written is ignored with
one warning, and the model keeps working in memory.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any

from ..tuner.cache_dir import UnsafePath, ensure_dir, read_file, write_file
from ..tuner.store import default_cache_dir

MAX_BYTES = 4 << 20          # a cost-model file larger than this is not read
_warned: set[str] = set()


def device_id(device_key: str) -> str:
    return hashlib.sha1(device_key.encode()).hexdigest()[:16]


def folder() -> Path:
    return default_cache_dir() / "costmodel"


def path_of(device_key: str, suffix: str = "") -> Path:
    return folder() / f"{device_id(device_key)}{suffix}.json"


def _warn_once(what: str, exc: BaseException) -> None:
    if what not in _warned:
        _warned.add(what)
        warnings.warn(f"skelpy: cost model {what}: {exc}; kept in memory only",
                      RuntimeWarning, stacklevel=4)


def load(device_key: str, suffix: str = "") -> Any | None:
    """The JSON stored for a device, None when there is none or it cannot be used."""
    path = path_of(device_key, suffix)
    try:
        return json.loads(read_file(path, MAX_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnsafePath, UnicodeDecodeError, ValueError) as exc:
        _warn_once(f"file {path} not read", exc)
        return None


def save(device_key: str, data: Any, suffix: str = "") -> bool:
    """Write a device's JSON atomically; False (with one warning) when it cannot."""
    try:
        ensure_dir(default_cache_dir())         # the cache folder itself 0700 too
        ensure_dir(folder())
        write_file(path_of(device_key, suffix), json.dumps(data, sort_keys=True).encode())
        return True
    except (OSError, UnsafePath) as exc:
        _warn_once(f"folder {folder()} not writable", exc)
        return False
