"""Fakes shared by the tuner tests: a device, a parameter space, and a kernel whose run
time is a known function of its parameters (reported through fake profiling events)."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import pytest

from skelpy import tuner
from skelpy.errors import RefusedParameters
from skelpy.tuner import Param, ParamSpace, TuningRequest, pow2_range
from skelpy.tuner import store as tstore


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A private tuning store and a clean tuner state for one test."""
    d = tmp_path / "cache"
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(d))
    monkeypatch.setenv("SKELPY_TUNE_RETRAIN", "sync")
    monkeypatch.delenv("SKELPY_TUNE", raising=False)
    tuner.set_mode(None)
    tstore.reset_store()
    yield d
    tuner.set_mode(None)
    tstore.reset_store()


class FakeDevice:
    def __init__(self, key: str = "FakeCL | Fake Device | 1.0", max_wg: int = 256):
        self.key = key
        self.name = "Fake Device"
        self.features = {"dev_is_gpu": 1.0, "dev_compute_units": 8.0, "dev_max_wg": float(max_wg),
                         "dev_local_mem": 65536.0}


class FakeEvent:
    """Quacks like a pyopencl event with profiling info."""

    def __init__(self, seconds: float):
        self.profile = SimpleNamespace(start=0, end=int(round(seconds * 1e9)))

    def wait(self) -> None:
        pass


def make_space(max_wg: int = 256) -> ParamSpace:
    return ParamSpace(
        [Param("wg", pow2_range(1, 1024)), Param("coarsen", (1, 2, 4, 8)),
         Param("blocked", (0, 1), numeric=False)],
        {"wg": 64, "coarsen": 1, "blocked": 0},
        constraint=lambda p: p["wg"] <= max_wg and p["wg"] * p["coarsen"] <= 1024)


class FakeKernel:
    """``run(point)`` returns 2*x and a fake event whose time is smallest at
    (best_wg, best_coarsen, blocked=0); chosen points can be refused or computed wrongly."""

    def __init__(self, n: int = 1000, best_wg: int = 32, best_coarsen: int = 2,
                 refuse=(), wrong=(), dtype=np.float32):
        self.x = np.arange(n, dtype=dtype)
        self.expected = self.x * 2
        self.best_wg, self.best_coarsen = best_wg, best_coarsen
        self.refuse = {tuple(sorted(p.items())) for p in refuse}
        self.wrong = {tuple(sorted(p.items())) for p in wrong}
        self.calls: list[dict] = []

    def seconds(self, p) -> float:
        return 1e-4 * (1.0 + 0.3 * abs(math.log2(p["wg"]) - math.log2(self.best_wg))
                       + 0.2 * abs(math.log2(p["coarsen"]) - math.log2(self.best_coarsen))
                       + 0.5 * p["blocked"])

    def run(self, p):
        self.calls.append(dict(p))
        key = tuple(sorted(p.items()))
        if key in self.refuse:
            raise RefusedParameters(f"refused {p}", params=dict(p))
        out = self.x * 2
        if key in self.wrong:
            out = out + 1
        return out, [FakeEvent(self.seconds(p))]


def make_request(kernel: FakeKernel, *, space: ParamSpace | None = None,
                 device: FakeDevice | None = None, kernel_key: str = "kern-a",
                 forced=None, features=None, n: int | None = None) -> TuningRequest:
    n = len(kernel.x) if n is None else n
    return TuningRequest(skeleton="map", kernel_key=kernel_key, device=device or FakeDevice(),
                         space=space or make_space(), dataset={"n": float(n), "dtype_size": 4.0},
                         features=features if features is not None else {"ops_add": 1.0},
                         forced=forced, run=kernel.run, origin="Map(fake)")


def key(p) -> tuple:
    return tuple(sorted(p.items()))


def DEFAULT_SPACE_SWEEP(kernel_key: str = "kern-a") -> FakeKernel:  # noqa: N802
    """An exhaustive sweep of the fake kernel's space (fills the store)."""
    kern = FakeKernel()
    with tuner.tuning("exhaustive"):
        out = tuner.execute(make_request(kern, kernel_key=kernel_key))
    np.testing.assert_array_equal(out.result, kern.expected)
    return kern


_LOCKER = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
if sys.argv[2]:
    c.execute(sys.argv[2])
print("locked", flush=True)
time.sleep(120)
"""


def hold_write_lock(path, sql: str = "") -> Callable[[], None]:
    """A child process holds the SQLite file ``path``'s write lock (``BEGIN IMMEDIATE``, then
    ``sql`` if given, then sleeps) until the returned function (idempotent) releases it."""
    child = subprocess.Popen([sys.executable, "-c", _LOCKER, str(path), sql],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "locked"

    def release():
        if child.poll() is None:
            child.kill()
            child.wait(10)
    return release
