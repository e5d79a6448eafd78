"""The device-group tests (tests/multidev/group_cases.py) in pytest sessions of their own, with
several PoCL CPU devices: POCL_DEVICES must be set before the OpenCL platform first loads, which
this session has done already. Two devices ("pthread pthread") run every case; three ("basic
basic basic": another PoCL driver, and a group where a part may hold no rows) run the cases that
split data, the rest being the same code on more parts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import skelpy as sk

CASES = Path(__file__).parent / "multidev" / "group_cases.py"
HOST = Path(__file__).parent / "multidev" / "host_cases.py"     # the host's side, two devices

# The cases three devices also run: every skeleton, distribution and border mode, the awkward
# sizes; not the sequences, temporal passes and tuner cases (the same paths on two devices).
THREE = ("distributions or picks_block or map_zip or index_spaces or reduce or axis or scan "
         "or allpairs or every_border or life or empty or array or bench")


def _on_pocl() -> bool:
    try:
        return "portable computing language" in sk.current_device().platform.lower()
    except sk.SkelpyError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("pocl_devices, select", [("pthread pthread", None),
                                                  ("basic basic basic", THREE)],
                         ids=["2-pthread", "3-basic"])
def test_group_cases(pocl_devices, select, tmp_path):
    if not _on_pocl():
        pytest.skip("several devices are simulated with PoCL; the current device is not PoCL's")
    env = dict(os.environ, POCL_DEVICES=pocl_devices,
               SKELPY_EXPECT_DEVICES=str(len(pocl_devices.split())),
               SKELPY_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("SKELPY_DEVICE", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p",
           "no:xdist", "--rootdir", str(CASES.parents[2]), str(CASES)]
    if select:
        cmd += ["-k", select]
    else:
        cmd.append(str(HOST))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    tail = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, tail
    summary = proc.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary, tail
