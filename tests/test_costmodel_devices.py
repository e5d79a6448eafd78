"""``sk.use("auto")`` on two real OpenCL devices of different speeds: PoCL's ``basic``
(one thread) and ``pthread`` devices, in a subprocess (POCL_DEVICES must be set before the
platform loads).

With coefficients given to the cost model, the choice must flip where their predictions
cross; data resident on a device stays there unless moving it pays; results are the same
whichever device runs. With coefficients ``skelpy calibrate`` measured, every call follows
the decision rule on its own predictions and leaves its measurement in the history.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

COMMON = '''
import math
import numpy as np
import skelpy as sk
from skelpy import costmodel as cm
from skelpy import runtime as R
from skelpy.costmodel.terms import MEMORY_CLASSES, OP_CLASSES, DeviceCoefficients, Line

devs = sk.devices()
basic = next(d for d in devs if d.name.startswith("basic"))
pth = next(d for d in devs if d.name.startswith("pthread"))
rt_b, rt_p = R.runtime_of(basic), R.runtime_of(pth)
rng = np.random.default_rng(5)


def follows_rule(ch):
    """The choice is the lowest prediction, unless that beats the incumbent by no more
    than the margin (then the incumbent)."""
    best = min(ch.predictions, key=lambda k: ch.predictions[k].total)
    if ch.reason.startswith("exploring"):          # a kernel's first run on a device
        return ch.predictions[ch.device].total <= cm.settings.explore * min(
            p.total for p in ch.predictions.values()) * ch.margin
    gain = ch.predictions[ch.incumbent].total / ch.predictions[best].total
    want = best if gain > ch.margin else ch.incumbent
    return ch.device == want
'''

STATIC = COMMON + '''
PER_OP = {"basic": 20e-9, "pthread": 1e-9}
LATENCY = {"basic": 5e-6, "pthread": 200e-6}


def coefficients(dev, tag):
    line = Line(2e-6, 1e-10)
    return DeviceCoefficients(
        dev.key, dev.name, "cpu", h2d=line, d2h=line, h2d_pinned=line, d2h_pinned=line,
        launch=Line(LATENCY[tag], 0.0), work_item=Line(0.0, 0.0),
        memory=dict.fromkeys(MEMORY_CLASSES, 0.0), ops=dict.fromkeys(OP_CLASSES, PER_OP[tag]))


cm.remember(coefficients(basic, "basic"), save=False)
cm.remember(coefficients(pth, "pthread"), save=False)
cm.settings.measurements = False
# three operations per element (two math calls, one addition): the predictions meet at
N_STAR = (LATENCY["pthread"] - LATENCY["basic"]) / (3 * (PER_OP["basic"] - PER_OP["pthread"]))

try:
    sk.use("auto:no-such-device")
    raise AssertionError("an unknown device was accepted")
except sk.DeviceError as exc:
    assert "no-such-device" in str(exc)
f = sk.Map(lambda x: math.sqrt(x) + math.sin(x))
sk.use("auto")
flips = []
for k in range(6, 17):
    n = 1 << k
    a = rng.random(n).astype(np.float32)
    got = f(a).to_numpy()
    ch = f.last_launch.choice
    assert follows_rule(ch), ch
    pb, pp = ch.predictions[basic.name], ch.predictions[pth.name]
    # the kernel term counts the muscle's three operations per element
    assert abs(pb.kernel - 3 * PER_OP["basic"] * n) < 1e-12 * n, pb
    assert abs(pp.kernel - 3 * PER_OP["pthread"] * n) < 1e-12 * n, pp
    assert (pb.total < pp.total) == (n < N_STAR), (n, N_STAR)
    flips.append((n, ch.device))
    # the same result whichever device runs
    for d in (basic, pth):
        sk.use(d)
        assert np.array_equal(f(a).to_numpy(), got), (n, d.name)
    sk.use("auto")
    assert np.allclose(got, np.sqrt(a) + np.sin(a), rtol=1e-5, atol=1e-6)
names = [d for _n, d in flips]
# well below the break-even size basic runs, well above pthread, and it flips once
assert all(d == basic.name for n, d in flips if n * 4 < N_STAR), flips
assert all(d == pth.name for n, d in flips if n > 4 * N_STAR), flips
assert sum(1 for x, y in zip(names, names[1:]) if x != y) == 1, flips
first_p = next(n for n, d in flips if d == pth.name)
assert N_STAR < first_p < 4 * N_STAR, (first_p, N_STAR)

# resident data stays where it is: on pthread above the break-even size
n = int(N_STAR * 8)
sk.use(pth)
v = sk.Map(lambda x: x + np.float32(1))(rng.random(n).astype(np.float32))
host_copy = v.to_numpy().copy()
v = sk.Map(lambda x: x * np.float32(1))(v)           # device-only again
assert v.residence == (False, rt_p)
sk.use("auto")
for r in (rt_b, rt_p):
    r.finish()
    r.stats.reset()
out = f(v)
ch = f.last_launch.choice
assert ch.device == pth.name and ch.incumbent == pth.name, ch
assert ch.predictions[pth.name].upload == 0.0
assert ch.predictions[basic.name].moves == ((4 * n, pth.name),)
assert v.residence == (False, rt_p)
assert rt_p.stats.uploads == 0 and rt_p.stats.downloads == 0
assert rt_b.stats.uploads == 0 and rt_b.stats.launches == 0
assert np.allclose(out.to_numpy(), np.sqrt(host_copy) + np.sin(host_copy), rtol=1e-5)

# small data resident on pthread moves to basic when that pays clearly (via the host)
n = int(N_STAR / 64)
sk.use(pth)
w = sk.Map(lambda x: x * np.float32(2))(np.arange(n, dtype=np.float32))
sk.use("auto")
out = f(w)
ch = f.last_launch.choice
assert ch.device == basic.name and ch.incumbent == pth.name, ch
assert w.residence[1] is rt_b
assert np.allclose(out.to_numpy(), np.sqrt(2 * np.arange(n)) + np.sin(2 * np.arange(n)),
                   rtol=1e-5)

# near the break-even size the data stays on the device that holds it
n = int(N_STAR * 1.2)
sk.use(basic)
u = sk.Map(lambda x: x * np.float32(1))(rng.random(n).astype(np.float32))
sk.use("auto")
f(u)
ch = f.last_launch.choice
assert ch.incumbent == basic.name and ch.device == basic.name, ch
assert "stays" in ch.reason, ch

# every skeleton: the same result on either device and in auto mode (integers: exact)
ai = rng.integers(0, 100, 5000).astype(np.int32)
bi = rng.integers(0, 100, 5000).astype(np.int32)
A = rng.integers(0, 9, (37, 13)).astype(np.int32)
B = rng.integers(0, 9, (29, 13)).astype(np.int32)
calls = {
    "zip": (sk.Zip(lambda x, y: x * y + 3), lambda s: s(ai, bi).to_numpy()),
    "reduce": (sk.Reduce(lambda x, y: x + y, identity=0), lambda s: s(ai)),
    "scan": (sk.Scan(lambda x, y: x + y, identity=0), lambda s: s(ai).to_numpy()),
    "allpairs": (sk.AllPairs(zip=lambda x, y: x * y, reduce=lambda x, y: x + y, identity=0),
                 lambda s: s(A, B).to_numpy()),
}
M = rng.integers(0, 9, (23, 31)).astype(np.int32)
heat = sk.Stencil(lambda nb: nb[-1, 0] + nb[1, 0] + 2 * nb[0, 0], border="nearest")
calls["stencil"] = (heat, lambda s: s(M).to_numpy())
calls["stencil x3"] = (heat, lambda s: s(M, iterations=3).to_numpy())
calls["sequence"] = (heat >> heat, lambda s: s(M).to_numpy())


def heat_ref(a):
    p = np.pad(a, 1, mode="edge")
    return p[:-2, 1:-1] + p[2:, 1:-1] + 2 * a


want = {"zip": ai * bi + 3, "reduce": ai.sum(), "scan": np.concatenate([[0], np.cumsum(ai)[:-1]]),
        "allpairs": A @ B.T, "stencil": heat_ref(M),
        "stencil x3": heat_ref(heat_ref(heat_ref(M))), "sequence": heat_ref(heat_ref(M))}
for name, (skel, call) in calls.items():
    results = []
    for d in (basic, pth, "auto"):
        sk.use(d)
        results.append(np.asarray(call(skel)))
    assert skel.last_launch.choice is not None, name
    for r in results:
        assert np.array_equal(r, want[name]), name
print("AUTO-STATIC-OK", flips)
'''

CALIBRATED = COMMON + '''
from skelpy.costmodel import history

# SKELPY_DEVICE=auto:pthread,basic (set by the test): no sk.use() call
assert R.auto() and R.fixed() is None
assert [r.device for r in R.auto_runtimes()] == [pth, basic]
g = sk.Map(lambda x: x * np.float32(2) + np.float32(1))
red = sk.Reduce(lambda x, y: x + y, identity=0)
choices = []
for rep in range(2):
    for k in (8, 12, 16, 20):
        a = rng.integers(0, 50, 1 << k).astype(np.int32)
        out = g(a).to_numpy()
        assert np.array_equal(out, a * 2 + 1)
        choices.append(g.last_launch.choice)
        assert red(a) == a.sum()
        choices.append(red.last_launch.choice)
for ch in choices:
    assert follows_rule(ch), ch
    assert set(ch.predictions) == {basic.name, pth.name}
    assert all(p.total > 0 for p in ch.predictions.values())
    assert ch.measured > 0 and math.isfinite(ch.error), ch
    assert f"d = {ch.error:.2f}" in repr(ch), repr(ch)
from skelpy.costmodel import auto
auto.settle(wait=True)
recorded = sum(len(history.history(d.key).records) for d in (basic, pth))
assert recorded == len(choices), (recorded, len(choices))
history.save_all()
kinds = {r.source for d in (basic, pth) for r in history.history(d.key).records}
assert "history" in kinds or "nearby" in kinds, kinds   # measured times were used
print("AUTO-CALIBRATED-OK", len(choices), sorted(kinds))
'''


def _run(args, tmp_path, timeout=600, **extra_env):
    env = dict(os.environ)
    env["POCL_DEVICES"] = "basic pthread"
    env["SKELPY_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("SKELPY_DEVICE", None)
    env.update(extra_env)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=tmp_path)


def test_choice_flips_at_the_predicted_break_even_and_resident_data_stays(tmp_path):
    script = tmp_path / "static.py"
    script.write_text(textwrap.dedent(STATIC))
    proc = _run([str(script)], tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "AUTO-STATIC-OK" in proc.stdout
    assert "calibrating" not in proc.stderr        # the given coefficients were used


@pytest.mark.slow
def test_calibrated_choices_follow_their_predictions_and_are_recorded(tmp_path):
    proc = _run(["-m", "skelpy.cli", "calibrate", "--quick"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("measuring (quick)") == 2, proc.stdout
    assert "transfers GB/s" in proc.stdout
    files = list((tmp_path / "cache" / "costmodel").glob("*.json"))
    assert len(files) == 2
    again = _run(["-m", "skelpy.cli", "calibrate"], tmp_path)
    assert again.stdout.count("stored (--force measures again)") == 2, again.stdout
    script = tmp_path / "calibrated.py"
    script.write_text(textwrap.dedent(CALIBRATED))
    proc = _run([str(script)], tmp_path, SKELPY_DEVICE="auto:pthread,basic")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "AUTO-CALIBRATED-OK" in proc.stdout
    assert "calibrating" not in proc.stderr         # `skelpy calibrate` stored them
    history_files = list((tmp_path / "cache" / "costmodel").glob("*-history.json"))
    assert history_files, "the history is kept for later processes"
