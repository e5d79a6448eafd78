"""tests/multidev/hunt_cases.py (distributions on a device group, from a bug hunt) in a pytest
session of its own with three PoCL CPU devices: POCL_DEVICES must be set before the OpenCL
platform first loads, which this session has done already (as tests/test_multidev.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import skelpy as sk

CASES = Path(__file__).parent / "multidev" / "hunt_cases.py"


def _on_pocl() -> bool:
    try:
        return "portable computing language" in sk.current_device().platform.lower()
    except sk.SkelpyError:
        return False


def test_group_hunt_cases_on_three_devices(tmp_path):
    if not _on_pocl():
        pytest.skip("several devices are simulated with PoCL; the current device is not PoCL's")
    env = dict(os.environ, POCL_DEVICES="basic basic basic", SKELPY_EXPECT_DEVICES="3",
               SKELPY_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("SKELPY_DEVICE", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p",
           "no:xdist", "--rootdir", str(CASES.parents[2]), str(CASES)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    tail = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, tail
    summary = proc.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary, tail
