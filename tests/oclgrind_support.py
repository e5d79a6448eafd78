"""Running a test script under the oclgrind simulator, shared by the oclgrind tests: the
script runs in a fresh process (oclgrind wraps the interpreter), and the test fails on a
non-zero exit, a missing success line, or any line of oclgrind's report that names an
invalid access, a race or an error."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# what oclgrind prints for an invalid access, a race or a fault
ERROR_MARKERS = ("Invalid read", "Invalid write", "data race", "Uninitialized", "FATAL",
                 "out of bounds", "Oclgrind - ")
# the same plus any error line (scripts whose expected errors are caught in Python)
STRICT_MARKERS = ERROR_MARKERS + ("error", "Error")


def run_under_oclgrind(tmp_path: Path, name: str, script: str, ok: str, *,
                       markers: Iterable[str] = STRICT_MARKERS,
                       drop_env: Iterable[str] = ()) -> subprocess.CompletedProcess:
    """Run ``script`` (saved as ``name``) under ``oclgrind --data-races`` with tuning off
    and a private cache; assert it exits 0, prints ``ok`` and oclgrind reports nothing."""
    oclgrind = shutil.which("oclgrind")
    if oclgrind is None:
        pytest.skip("oclgrind is not installed")
    path = tmp_path / name
    path.write_text(script)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["SKELPY_CACHE_DIR"] = str(tmp_path / "cache")
    env["SKELPY_TUNE"] = "off"
    env["PYOPENCL_NO_CACHE"] = "1"   # oclgrind programs rebuilt from cached binaries lose kernels
    for key in ("SKELPY_DEVICE", *drop_env):
        env.pop(key, None)
    proc = subprocess.run([oclgrind, "--data-races", sys.executable, str(path)],
                          capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert ok in proc.stdout, out[-4000:]
    markers = tuple(markers)
    bad = [ln for ln in proc.stderr.splitlines() if any(m in ln for m in markers)]
    assert not bad, "\n".join(bad[:40])
    return proc
