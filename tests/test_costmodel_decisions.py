"""Remembered decisions (``skelpy.costmodel.decisions``): a repeated auto-mode call reuses
its decision instead of predicting every device again; the decision is made again when
anything it depends on changes (residency, shape, whether the result is read, the devices,
the model) or a measured use contradicts it. On two real PoCL devices (a subprocess: PoCL
reads POCL_DEVICES once) the repeats compute far fewer predictions, go through the
skeletons' repeat-call launchers, and give the same results as either device forced.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from costmodel_support import FakeContainer, FakeDevice, FakeRuntime, coefficients

from skelpy import costmodel
from skelpy.costmodel import decisions, history, registry
from skelpy.tuner import store as _store

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(tmp_path / "cache"))
    costmodel.reset()
    _store.reset_store()
    yield
    costmodel.reset()
    _store.reset_store()


class Choice:
    """What an entry keeps (only compared by identity here)."""


def test_the_key_names_everything_the_decision_depends_on(fresh):
    near = FakeRuntime(FakeDevice("t | near", "near"))
    far = FakeRuntime(FakeDevice("t | far", "far"))
    rts = [near, far]
    stem = ("kernel", (("n", 64.0),), 256)
    base = decisions.call_key(stem, [FakeContainer(64)], False, rts, None)
    # equal calls, other container objects: the same key
    assert decisions.call_key(stem, [FakeContainer(64)], False, rts, None) == base
    # another list of the same devices (sk.use("auto:...") makes a new one each time)
    assert decisions.call_key(stem, [FakeContainer(64)], False, list(rts), None) == base
    others = [
        decisions.call_key(("other", (("n", 64.0),), 256), [FakeContainer(64)], False, rts,
                           None),
        decisions.call_key(stem, [FakeContainer(65)], False, rts, None),       # shape
        decisions.call_key(stem, [FakeContainer(64, on=far)], False, rts, None),  # resident
        decisions.call_key(stem, [FakeContainer(64, on=far, host=False)], False, rts, None),
        decisions.call_key(stem, [FakeContainer(64)], True, rts, None),        # result read
        decisions.call_key(stem, [FakeContainer(64)], False, [far, near], None),  # devices
        decisions.call_key(stem, [FakeContainer(64)], False, rts, far),        # previous
        decisions.call_key(stem, [FakeContainer(64), FakeContainer(64)], False, rts, None),
    ]
    assert len({base, *others}) == len(others) + 1
    # with an input on a candidate device the previous call's device does not matter
    on = [FakeContainer(64, on=near)]
    assert decisions.call_key(stem, on, False, rts, far) == \
        decisions.call_key(stem, on, False, rts, None)
    # ... but it does when the input is on a device that is not a candidate
    elsewhere = FakeRuntime(FakeDevice("t | other", "other"))
    off = [FakeContainer(64, on=elsewhere)]
    assert decisions.call_key(stem, off, False, rts, far) != \
        decisions.call_key(stem, off, False, rts, None)


def test_lookup_reuses_then_revisits_after_contradiction_model_change_or_many_uses(fresh):
    key = ("k",)
    assert decisions.lookup(key) is None
    c = Choice()
    e = decisions.remember(key, c, tolerance=1.5)
    assert e.tolerance == 1.5 and decisions.remember(("low",), c, 1.0).tolerance \
        == decisions.NOISE
    got = decisions.lookup(key)
    assert got is e and got.choice is c and e.uses == 1
    # faster than predicted, or slower within the tolerance: the decision stands
    e.check(predicted=1e-3, measured=1e-5)
    e.check(predicted=1e-3, measured=1.4e-3)
    assert decisions.lookup(key) is e
    # slower than predicted by more than the tolerance: made again
    e.check(predicted=1e-3, measured=1.6e-3)
    assert decisions.lookup(key) is None and decisions.stats()["contradicted"] == 1
    # every model change invalidates: settings, coefficients, a kernel's first measurement
    # at a size, the history forgotten
    changes = [
        lambda: setattr(costmodel.settings, "explore", costmodel.settings.explore),
        lambda: registry.remember(coefficients("t | x"), save=False),
        lambda: history.history("t | x").add(history.Record(
            "map", "kk", 1024.0, 1e-5, 2e-5, 0.0, 0.0, "model", 1.0)),
        history.forget,
    ]
    for change in changes:
        e = decisions.remember(key, c, 1.5)
        assert decisions.lookup(key) is e
        change()
        assert decisions.lookup(key) is None, change
    # another measured time of a size already measured is not a model change
    h = history.history("t | x")
    h.add(history.Record("map", "kk", 1024.0, 1e-5, 2e-5, 0.0, 0.0, "model", 1.0))
    e = decisions.remember(key, c, 1.5)
    h.add(history.Record("map", "kk", 1100.0, 1e-5, 2e-5, 0.0, 0.0, "history", 2.0))
    assert decisions.lookup(key) is e
    # after REVISIT uses the history's newer measurements are consulted
    e.uses = decisions.REVISIT
    assert decisions.lookup(key) is None
    # predictions from the coefficients alone: a first measured time changes nothing
    costmodel.settings.measurements = False
    try:
        e = decisions.remember(key, c, 1.5)
        h.add(history.Record("map", "kk", 1 << 20, 1e-5, 2e-5, 0.0, 0.0, "model", 3.0))
        assert decisions.lookup(key) is e
    finally:
        costmodel.settings.measurements = True
    h.add(history.Record("map", "kk", 1 << 24, 1e-5, 2e-5, 0.0, 0.0, "model", 4.0))
    assert decisions.lookup(key) is None


def test_repeats_are_measured_by_sampling(fresh):
    e = decisions.remember(("s",), Choice(), 2.0)
    sampled = []
    for _ in range(200):
        sampled.append(e.sampled())
        decisions.lookup(("s",))
    assert sampled[:decisions.SAMPLE_FIRST] == [True] * decisions.SAMPLE_FIRST
    assert sum(sampled) == decisions.SAMPLE_FIRST + len(
        [u for u in range(decisions.SAMPLE_FIRST, 200) if u % decisions.SAMPLE_EVERY == 0])


SCRIPT = '''
import math
import numpy as np
import skelpy as sk
from skelpy import costmodel as cm
from skelpy import runtime as R
from skelpy.costmodel import auto, decisions
from skelpy.costmodel.terms import MEMORY_CLASSES, OP_CLASSES, DeviceCoefficients, Line

devs = sk.devices()
basic = next(d for d in devs if d.name.startswith("basic"))
pth = next(d for d in devs if d.name.startswith("pthread"))
rt_b, rt_p = R.runtime_of(basic), R.runtime_of(pth)
# basic: no latency, slow per operation; pthread: high latency, fast (break-even n ~ 3400)
PER_OP = {"basic": 20e-9, "pthread": 1e-9}
LATENCY = {"basic": 5e-6, "pthread": 200e-6}


def coefficients(dev, tag, per_op=None):
    line = Line(2e-6, 1e-10)
    return DeviceCoefficients(
        dev.key, dev.name, "cpu", h2d=line, d2h=line, h2d_pinned=line, d2h_pinned=line,
        launch=Line(LATENCY[tag], 0.0), work_item=Line(0.0, 0.0),
        memory=dict.fromkeys(MEMORY_CLASSES, 0.0),
        ops=dict.fromkeys(OP_CLASSES, per_op or PER_OP[tag]))


cm.remember(coefficients(basic, "basic"), save=False)
cm.remember(coefficients(pth, "pthread"), save=False)
cm.settings.explore = 0.0
rng = np.random.default_rng(3)


def predictions():
    return decisions.stats()["predictions"]


# -- a repeated Map: one decision, then lookups through the repeat-call launcher ----------
f = sk.Map(lambda x: math.sqrt(x) + math.sin(x))
host = rng.random(1024).astype(np.float32)
a = sk.Vector(host)
sk.use("auto")
first = f(a).to_numpy()                     # decides with a on the host
assert np.allclose(first, np.sqrt(host) + np.sin(host), rtol=1e-5, atol=1e-6)
f(a).to_numpy()                             # a is on basic now: another signature
before = predictions()
hits = decisions.stats()["hits"]
REPEATS = 200
launcher = 0
for _ in range(REPEATS):
    r = f(a)
    ch = f.last_launch.choice
    assert ch.device == basic.name, ch
    launcher += f.last_launch.source == "cache"     # the repeat-call launcher ran it
    assert ch.predictions[basic.name].download > 0  # results are read on the host
    assert np.array_equal(r.to_numpy(), first)
made = predictions() - before
# without remembered decisions: 2 predictions per call; with them, a few re-decisions (the
# first measured time, a noisy measurement that contradicts its prediction)
assert made <= 40, (made, decisions.stats())
assert decisions.stats()["hits"] - hits >= REPEATS - 20, decisions.stats()
assert launcher >= REPEATS - 20, launcher
assert ch.measured > 0 and f"d = {ch.error:.2f}" in repr(ch), repr(ch)
auto.settle(wait=True)

# -- residency changed: decided again, and the data stays on pthread where it now is ------
# (from here on the predictions come from the coefficients alone: the decisions are known)
cm.settings.measurements = False
# Generous per-operation times on both devices for this part: a remembered decision is made
# again when a measured kernel takes longer than its prediction, and PoCL's pthread kernel
# time varies with the machine's cores and load (pthread still wins, 20x faster per op).
PER_OP.update(basic=2e-6, pthread=1e-7)
cm.remember(coefficients(basic, "basic"), save=False)
cm.remember(coefficients(pth, "pthread"), save=False)
n = 8192                                            # well above the break-even size
sk.use(pth)
big = rng.random(n).astype(np.float32)
v = sk.Map(lambda x: x * np.float32(1))(big)        # on pthread only
sk.use("auto")
want = np.sqrt(big) + np.sin(big)
before = predictions()
out = f(v)
assert predictions() == before + 2                  # a new signature: predicted again
ch = f.last_launch.choice
assert ch.device == pth.name and ch.incumbent == pth.name and not ch.reused, ch
assert np.allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-6)
for _ in range(5):
    again = f(v)
assert f.last_launch.choice.reused and f.last_launch.choice.device == pth.name
assert np.allclose(again.to_numpy(), want, rtol=1e-5, atol=1e-6)
assert v.residence == (False, rt_p)
PER_OP.update(basic=20e-9, pthread=1e-9)
cm.remember(coefficients(basic, "basic"), save=False)
cm.remember(coefficients(pth, "pthread"), save=False)

# -- results never read on the host: no download predicted; a Reduce's scalar always ------
g = sk.Map(lambda x: x * np.float32(0.5) + np.float32(1))
u = sk.Vector(rng.random(512).astype(np.float32))
ref = u.to_numpy().copy()
for _ in range(6):
    u = g(u)
    ref = ref * np.float32(0.5) + np.float32(1)
    assert g.last_launch.choice.predictions[basic.name].download == 0
assert np.allclose(u.to_numpy(), ref, rtol=1e-6)
red = sk.Reduce(lambda x, y: x + y, identity=0)
ints = rng.integers(0, 100, 3000).astype(np.int32)
for _ in range(3):
    assert red(ints) == ints.sum()
    assert all(p.download > 0 for p in red.last_launch.choice.predictions.values())

# -- a measurement that contradicts the prediction: the decision is made again -----------
# basic predicted almost free: its measured time is far above, so the first measured use
# marks the decision stale and the next call predicts again
cm.remember(coefficients(basic, "basic", per_op=1e-15), save=False)
h = sk.Map(lambda x: x + np.float32(3))
w = sk.Vector(rng.random(256).astype(np.float32))
h(w)
h(w)
h(w).to_numpy()
contradicted = decisions.stats()["contradicted"]
auto.settle(wait=True)
assert decisions.stats()["contradicted"] > contradicted, decisions.stats()
before = predictions()
h(w)
assert predictions() == before + 2 and not h.last_launch.choice.reused
cm.remember(coefficients(basic, "basic"), save=False)

# -- the same results whichever device runs: forced on each, and auto through both -------
M = rng.random((37, 53)).astype(np.float32)
heat = sk.Stencil(lambda nb: nb[0, 0] + np.float32(0.25) * (nb[-1, 0] + nb[1, 0]
                  + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0]), border="nearest")
z = sk.Zip(lambda x, y: x * y + np.float32(1))
xs, ys = rng.random(3001).astype(np.float32), rng.random(3001).astype(np.float32)
forced = {}
for d in (basic, pth):
    sk.use(d)
    forced[d.name] = (heat(M).to_numpy(), z(xs, ys).to_numpy())
assert np.array_equal(forced[basic.name][0], forced[pth.name][0])
assert np.array_equal(forced[basic.name][1], forced[pth.name][1])
sk.use("auto")
for where in (None, basic, pth, None):
    if where is None:
        m, x, y = sk.Matrix(M), sk.Vector(xs), sk.Vector(ys)
    else:
        sk.use(where)
        ident = sk.Map(lambda q: q)
        m, x, y = ident(M), ident(xs), ident(ys)
        sk.use("auto")
    reused = set()
    for _ in range(4):                              # decided, then remembered
        assert np.array_equal(heat(m).to_numpy(), forced[basic.name][0]), where
        assert np.array_equal(z(x, y).to_numpy(), forced[basic.name][1]), where
        reused |= {k for k, s in (("heat", heat), ("zip", z)) if s.last_launch.choice.reused}
    assert reused == {"heat", "zip"}, where
print("DECISIONS-OK", decisions.stats())
'''


def test_repeats_reuse_the_decision_on_two_pocl_devices(tmp_path):
    script = tmp_path / "decisions.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = dict(os.environ)
    env["POCL_DEVICES"] = "basic pthread"
    env["SKELPY_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("SKELPY_DEVICE", None)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "DECISIONS-OK" in proc.stdout
    assert "calibrating" not in proc.stderr
