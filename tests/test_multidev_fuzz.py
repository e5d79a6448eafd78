"""Device groups under fuzzing (issue 13): the bugs a fuzzer found (tests/multidev/fuzz_cases.py
``regressions``), in a process of its own with two PoCL CPU devices (POCL_DEVICES must be set
before the OpenCL platform first loads); with SKELPY_HEAVY=1 also the fuzzer's random
programs on two and three devices, checked step by step against a NumPy model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import skelpy as sk

CASES = Path(__file__).parent / "multidev" / "fuzz_cases.py"
HEAVY = os.environ.get("SKELPY_HEAVY") == "1"


def _on_pocl() -> bool:
    try:
        return "portable computing language" in sk.current_device().platform.lower()
    except sk.SkelpyError:
        return False


def _run(pocl_devices: str, args: list[str], tmp_path) -> str:
    if not _on_pocl():
        pytest.skip("several devices are simulated with PoCL; the current device is not PoCL's")
    env = dict(os.environ, POCL_DEVICES=pocl_devices,
               SKELPY_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("SKELPY_DEVICE", None)
    proc = subprocess.run([sys.executable, str(CASES), *args], env=env, capture_output=True,
                          text=True, timeout=900, cwd=CASES.parents[2])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return proc.stdout


def test_fuzzer_found_bugs_stay_fixed(tmp_path):
    assert _run("pthread pthread", ["regressions"], tmp_path).split() == ["ok", "8"]


@pytest.mark.skipif(not HEAVY, reason="random programs: set SKELPY_HEAVY=1")
@pytest.mark.parametrize("pocl_devices, seeds", [("pthread pthread", range(0, 6)),
                                                 ("basic basic basic", range(100, 106))],
                         ids=["2-pthread", "3-basic"])
def test_random_programs_match_numpy(pocl_devices, seeds, tmp_path):
    for seed in seeds:
        assert _run(pocl_devices, ["fuzz", str(seed), "300"], tmp_path).split() == \
            ["ok", str(seed)]


def test_distributions_hash_as_the_names_they_equal():
    """A distribution equals its name, so a set or dict of names finds it (its hash was that
    of (name, halo): ``v.distribution in {"block", "copy"}`` was False for block)."""
    from skelpy.containers.distributions import BLOCK, COPY, SINGLE, as_distribution
    assert BLOCK in {"block", "copy"} and COPY in {"copy"} and SINGLE in {"single": 1}
    assert sk.Overlap(3) in {"overlap"} and {"block": 1}[as_distribution("Block")] == 1
    assert len({sk.Overlap(1), sk.Overlap(2), sk.Overlap(1), BLOCK}) == 3
    assert sk.Overlap(2) != sk.Overlap(3) and sk.Overlap(2) == sk.Overlap(2) != "block"


def test_overlap_takes_any_integer_and_names_the_rest():
    import numpy as np
    assert sk.Overlap(np.int64(2)) == sk.Overlap(2) and sk.Overlap(np.uint8(0)).halo == 0
    for bad in (True, np.bool_(True), 2.0, "2", None, -1, np.int32(-3)):
        with pytest.raises(sk.ParameterError, match="halo of rows"):
            sk.Overlap(bad)
