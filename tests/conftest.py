"""Shared fixtures: a private tuning store per test session and the OpenCL runtime."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

# Point the tuning store at a private folder before skelpy is imported anywhere, so that tests
# neither read nor write the user's cache.
_CACHE = tempfile.mkdtemp(prefix="skelpy-test-cache-")
os.environ.setdefault("SKELPY_CACHE_DIR", _CACHE)

import skelpy as sk  # noqa: E402
from skelpy import runtime  # noqa: E402


@pytest.fixture(scope="session")
def rt():
    return runtime.current()


@pytest.fixture(scope="session")
def has_fp64(rt):
    return rt.device.has_fp64


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture
def stats(rt):
    rt.finish()
    rt.stats.reset()
    return rt.stats


def pytest_report_header(config):
    try:
        d = sk.current_device()
        return f"skelpy device: {d.name} ({d.platform})"
    except sk.SkelpyError as exc:  # pragma: no cover - shown when no device exists
        return f"skelpy device: none ({exc})"
