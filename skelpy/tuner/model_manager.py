"""Loading, caching and retraining the device models of one store.

The first decision for a device loads its model from the cache folder (or the one shipped
with the package); after :data:`~skelpy.tuner.model.RETRAIN_EVERY` new measurements the
model is retrained, in a background thread by default (``$SKELPY_TUNE_RETRAIN``:
``background``, ``sync`` or ``off``), saved next to the store, and used from the next
decision on (``generation`` tells decision caches to drop).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from .model import RETRAIN_EVERY, DeviceModel
from .model_files import load, load_pretrained, model_path, save

# Retrains under way: the interpreter's exit waits for them (up to this long each) rather than
# tearing down the modules a daemon thread is still using (a crash at exit was seen on PoCL).
EXIT_WAIT_S = 30.0
_running: set[threading.Thread] = set()


@atexit.register
def _wait_for_retrains() -> None:
    for t in list(_running):
        t.join(EXIT_WAIT_S)


class ModelManager:
    """Loads, caches and retrains the device models of one store."""

    def __init__(self, store: Any):
        self.store = store
        self._models: dict[str, DeviceModel | None] = {}
        self._checked: set[str] = set()
        self._new: dict[str, int] = {}
        self._lock = threading.Lock()
        self._training: set[str] = set()
        self._failed: set[str] = set()            # devices whose background retrain failed
        self.generation = 0          # bumped when a model changes: decision caches drop

    @property
    def policy(self) -> str:
        return os.environ.get("SKELPY_TUNE_RETRAIN", "background")

    def _path(self, device: str) -> Path | None:
        if self.store.degraded or self.store.directory is None:
            return None
        return model_path(self.store.directory, device)

    def get(self, device: str) -> DeviceModel | None:
        if device in self._checked:
            return self._models.get(device)
        with self._lock:
            if device not in self._checked:
                path = self._path(device)
                m = load(path) if path is not None else None
                if m is None:
                    m = load_pretrained(device)
                self._models[device] = m
                self._checked.add(device)
                have = m.n_measurements if m is not None else 0
                try:
                    now = self.store.count_measurements(device)
                except Exception:  # noqa: BLE001 - a broken store must not break a call
                    now = have
                self._new[device] = now - have
        if self._new.get(device, 0) >= (RETRAIN_EVERY if self._models.get(device) else 1):
            self.maybe_retrain(device, force=self._models.get(device) is None)
        return self._models.get(device)

    def note_measurements(self, device: str, count: int) -> None:
        """Called after new measurements; retrains once enough accumulated."""
        self._new[device] = self._new.get(device, 0) + count
        if self._new[device] >= RETRAIN_EVERY:
            self.maybe_retrain(device)

    def maybe_retrain(self, device: str, force: bool = False) -> None:
        policy = self.policy
        if policy == "off" or device in self._training:
            return
        if not force and self._new.get(device, 0) < RETRAIN_EVERY:
            return
        if policy == "sync":
            self.retrain(device)
            return
        self._training.add(device)
        t = threading.Thread(target=self._retrain_bg, args=(device,), daemon=True,
                             name="skelpy-retrain")
        _running.add(t)
        t.start()

    def _retrain_bg(self, device: str) -> None:
        try:
            self.retrain(device)
        except Exception as exc:  # noqa: BLE001 - background training must not stop a program
            if device not in self._failed:          # say so once per device, then keep going
                self._failed.add(device)
                warnings.warn(f"skelpy: retraining the tuning model of {device} failed "
                              f"({type(exc).__name__}: {exc}); decisions keep the previous "
                              "model", RuntimeWarning, stacklevel=1)
        finally:
            self._training.discard(device)
            _running.discard(threading.current_thread())

    def retrain(self, device: str, **kw: Any) -> DeviceModel:
        """Train now (this device's measurements with the shipped ones of every device,
        ``zero_shot.train``), save next to the store, and use it from the next decision on."""
        from .zero_shot import train

        m = train(self.store, device, base=load_pretrained(device), **kw)
        path = self._path(device)
        if path is not None:
            with contextlib.suppress(OSError):
                save(m, path)
        with self._lock:
            self._models[device] = m
            self._checked.add(device)
            self._new[device] = 0
            self.generation += 1
        return m

    def set(self, device: str, model: DeviceModel | None) -> None:
        """Install a model (tests, evaluation)."""
        with self._lock:
            self._models[device] = model
            self._checked.add(device)
            self._new[device] = 0
            self.generation += 1
