"""Skeletons on a device group (issue 13), run by tests/test_multidev.py in a pytest session
of its own with several PoCL CPU devices (POCL_DEVICES="pthread pthread" or "basic basic
basic"): every skeleton, every distribution, every border mode, awkward sizes (1, 2, primes,
parts of no rows), k = 1..4, against the one-device result (bit for bit for Map, Zip,
Stencil; reductions within pairwise-summation tolerance) and against NumPy/SciPy.

Not collected by the normal test run (the file name does not start with test_)."""

from __future__ import annotations

import os

import numpy as np
import pyopencl as cl
import pytest
import scipy.ndimage as ndi

import skelpy as sk
from skelpy import runtime

GROUP = "cpu:*"
MODES = ["constant", "nearest", "wrap", "reflect", "mirror"]
PAD = {"constant": "constant", "nearest": "edge", "wrap": "wrap", "reflect": "symmetric",
       "mirror": "reflect"}


@pytest.fixture(scope="module", autouse=True)
def group():
    devs = sk.devices()
    expect = int(os.environ.get("SKELPY_EXPECT_DEVICES", "0"))
    if expect:
        assert len(devs) == expect, f"POCL_DEVICES gave {len(devs)} devices, not {expect}"
    elif len(devs) < 2:
        pytest.skip("one OpenCL device only")
    sk.use(GROUP)
    yield sk.current_devices()
    sk.use(GROUP)


def one_device(fn):
    """``fn()`` with the first device alone in use (the reference), then the group again."""
    sk.use(0)
    try:
        return fn()
    finally:
        sk.use(GROUP)


def ranks() -> int:
    return len(sk.current_devices())


# -- devices and distributions -------------------------------------------------------------------


def test_use_names_groups_and_single_devices():
    n = ranks()
    assert n >= 2 and runtime.current().group is not None
    sk.use(["cpu:0", "cpu:1"])
    assert len(sk.current_devices()) == 2
    assert sk.use("cpu:1") == sk.devices()[1] and runtime.current().group is None
    assert sk.current_devices() == [sk.devices()[1]]
    sk.use(["cpu:0"])                    # a group of one device is that device
    assert runtime.current().group is None
    with pytest.raises(sk.DeviceError):
        sk.use("gpu:*" if not any(d.kind == "gpu" for d in sk.devices()) else "cpu:99")
    sk.use(GROUP)
    keys = {d.key for d in sk.current_devices()}
    assert len(keys) == n                 # the tuner tells identical devices apart


@pytest.mark.parametrize("dist", ["single", "block", "copy", sk.Overlap(2)])
@pytest.mark.parametrize("shape", [(1,), (2,), (13,), (5, 3), (1, 1), (2, 7)])
def test_distributions_keep_the_data(dist, shape, rng):
    a = rng.standard_normal(shape).astype(np.float32)
    cls = sk.Vector if len(shape) == 1 else sk.Matrix
    c = cls(a, distribution=dist)
    assert c.distribution == dist
    np.testing.assert_array_equal(c.to_numpy(), a)
    for other in ["copy", "single", "block", sk.Overlap(1), dist]:
        c.redistribute(other)
        assert c.distribution == other
        np.testing.assert_array_equal(np.asarray(c), a)
    d = c.copy()
    assert d.distribution == c.distribution
    np.testing.assert_array_equal(d.to_numpy(), a)


def test_first_skeleton_picks_block_and_inputs_are_redistributed(rng):
    a = rng.standard_normal(11).astype(np.float32)
    v = sk.Vector(a)
    assert v.distribution is None
    inc = sk.Map(lambda x: x + 1)
    w = inc(v)
    assert v.distribution == "block" and w.distribution == "block"
    c = sk.Vector(a, distribution="copy")
    c.redistribute("copy")
    assert inc(c).distribution == "block" and c.distribution == "block"
    np.testing.assert_array_equal(inc(c).to_numpy(), a + 1)
    with pytest.raises(sk.ParameterError):
        sk.Vector(a, distribution="scattered")
    assert repr(sk.Overlap(3)) == "Overlap(3)" and sk.Overlap(3) == "overlap"


def test_results_stay_on_the_devices_and_host_writes_are_seen(rng):
    rt = runtime.current()
    a = rng.integers(0, 100, 1001).astype(np.int32)
    v = sk.Vector(a, distribution="block")
    inc = sk.Map(lambda x: x + 1)
    inc(v)
    for r in rt.group.runtimes:
        r.finish()
        r.stats.reset()
    w = inc(inc(v))
    assert sum(r.stats.downloads + r.stats.uploads for r in rt.group.runtimes) == 0
    assert w[500] == a[500] + 2 and list(w[3:6]) == list(a[3:6] + 2)
    w[7] = -5
    with w.host_edit() as h:
        h[8] = -6
    want = a + 2
    want[7], want[8] = -5, -6
    np.testing.assert_array_equal(inc(w).to_numpy(), want + 1)


# -- Map and Zip --------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 7, 97, 1000])
def test_map_zip_equal_one_device_bit_for_bit(n, rng):
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    lut = rng.standard_normal(17).astype(np.float32)
    f = sk.Map(lambda a, t: a * 1.5 + t[int(abs(a) * 7) % 17])
    z = sk.Zip(lambda a, b, s: a * b + s)
    got_f = f(x, sk.Vector(lut)).to_numpy()
    got_z = z(sk.Vector(x), y, 0.25).to_numpy()
    ref_f, ref_z = one_device(lambda: (f(x, lut).to_numpy(), z(x, y, 0.25).to_numpy()))
    np.testing.assert_array_equal(got_f, ref_f)
    np.testing.assert_array_equal(got_z, ref_z)
    np.testing.assert_allclose(got_z, x * y + np.float32(0.25), rtol=1e-6)


def test_map_over_matrices_and_index_spaces():
    rows = sk.Map(lambda r, c: r * 1000 + c)(sk.IndexMatrix((7, 3))).to_numpy()
    np.testing.assert_array_equal(rows, np.arange(7)[:, None] * 1000 + np.arange(3))
    idx = sk.Map(lambda i: i * 3)(sk.IndexVector(13)).to_numpy()
    np.testing.assert_array_equal(idx, np.arange(13) * 3)
    m = np.arange(15, dtype=np.int16).reshape(5, 3)
    out = sk.Map(lambda v: v * 2)(sk.Matrix(m))
    assert out.shape == (5, 3) and out.distribution == "block"
    np.testing.assert_array_equal(out.to_numpy(), m * 2)
    empty = sk.Map(lambda v: v * 2)(np.zeros(0, np.float32))
    assert empty.shape == (0,) and empty.to_numpy().size == 0


def test_empty_containers_on_the_group():
    add = lambda a, b: a + b  # noqa: E731
    e = np.zeros(0, np.float32)
    assert sk.Reduce(add, 0)(e) == 0 and sk.MapReduce(lambda a, b: a * b, add, 0)(e, e) == 0
    assert sk.Scan(add, 0)(e).to_numpy().shape == (0,)
    assert sk.Zip(add)(e, e).to_numpy().shape == (0,)
    none = np.zeros((0, 3), np.float32)
    assert sk.Reduce(add, 0, axis=1)(none).to_numpy().shape == (0,)
    np.testing.assert_array_equal(sk.Reduce(add, 0, axis=0)(none).to_numpy(), np.zeros(3))
    pairs = sk.AllPairs(zip=lambda a, b: a * b, reduce=add)(none, np.ones((2, 3), np.float32))
    assert pairs.to_numpy().shape == (0, 2)
    st = sk.Stencil(lambda nb: nb[-1, 0] + nb[0, 1], border="wrap")
    assert st(np.zeros((0, 4), np.float32), iterations=3).to_numpy().shape == (0, 4)
    for dist in ["single", "block", "copy", sk.Overlap(1)]:
        assert sk.Vector(e, distribution=dist).to_numpy().shape == (0,)


# -- reductions -----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 7, 1013, 100003])
def test_reduce_and_mapreduce(n, rng):
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    add = lambda a, b: a + b  # noqa: E731
    s = sk.Reduce(add, 0)(x)
    ref = one_device(lambda: sk.Reduce(add, 0)(x))
    exact = x.astype(np.float64).sum()
    tol = 4 * np.finfo(np.float32).eps * np.abs(x).astype(np.float64).sum() + 1e-30
    assert abs(float(s) - exact) <= tol and abs(float(s) - float(ref)) <= 2 * tol
    dot = sk.MapReduce(lambda a, b: a * b, add, 0)(x, y)
    assert abs(float(dot) - float(x.astype(np.float64) @ y)) <= 4 * tol + 1e-5
    ints = rng.integers(-1000, 1000, n).astype(np.int32)
    assert sk.Reduce(add, 0)(ints) == ints.sum()
    assert sk.Reduce("int f(int a, int b) { return max(a, b); }", -2**31)(ints) == ints.max()


@pytest.mark.parametrize("shape", [(1, 1), (2, 5), (13, 4), (3, 17)])
def test_axis_reductions(shape, rng):
    a = rng.integers(-9, 9, shape).astype(np.int32)
    add = lambda p, q: p + q  # noqa: E731
    rows = sk.Reduce(add, 0, axis=1)(a)
    assert rows.distribution == "block"
    np.testing.assert_array_equal(rows.to_numpy(), a.sum(1))
    cols = sk.Reduce(add, 0, axis=0)(a)
    np.testing.assert_array_equal(cols.to_numpy(), a.sum(0))


@pytest.mark.parametrize("n", [1, 2, 5, 97, 4099])
def test_scan(n, rng):
    add = lambda a, b: a + b  # noqa: E731
    ints = rng.integers(-50, 50, n).astype(np.int32)
    got = sk.Scan(add, 0)(ints).to_numpy()
    np.testing.assert_array_equal(got, np.concatenate([[0], np.cumsum(ints)[:-1]]))
    inc = sk.Scan(add, 0, inclusive=True)
    np.testing.assert_array_equal(inc(ints, params={"method": "levels"}).to_numpy(),
                                  np.cumsum(ints))
    f = rng.standard_normal(n).astype(np.float32)
    exact = np.cumsum(f.astype(np.float64))
    bound = 8 * np.finfo(np.float32).eps * np.cumsum(np.abs(f.astype(np.float64))) + 1e-30
    assert (np.abs(inc(f).to_numpy() - exact) <= bound).all()
    m = rng.integers(0, 9, (7, 3)).astype(np.int16)
    np.testing.assert_array_equal(inc(m).to_numpy(), np.cumsum(m).reshape(7, 3))


def test_reduce_dot_and_scan_cost_one_small_download_per_device(monkeypatch):
    """A group's Reduce, MapReduce and Scan of a sum fold the devices' partials on the host:
    per call one kernel per device (no fold kernel; for Scan its own scan), one download of
    one value per device, ONE wait on the host, no copy between devices, no build."""
    add = lambda a, b: a + b  # noqa: E731
    x = (np.arange(1000) % 13).astype(np.float32)     # every fold exact in float32
    v = sk.Vector(x)
    red, dot, scan = sk.Reduce(add, 0), sk.MapReduce(lambda a, b: a * b, add, 0), sk.Scan(add, 0)
    group = runtime.current().group
    real_wait, real_copy = cl.wait_for_events, cl.enqueue_copy
    for name, call in {"reduce": lambda: red(v), "dot": lambda: dot(v, v),
                       "scan": lambda: scan(v)}.items():
        call()                                # built and tuned
        group.exchange.finish()
        counts: dict[str, int] = {}

        def count(what):
            counts[what] = counts.get(what, 0) + 1

        def copy(*args, **kwargs):
            if kwargs.get("is_blocking", True):
                count("blocking copy")
            return real_copy(*args, **kwargs)

        monkeypatch.setattr(cl, "wait_for_events", lambda evs: (count("wait"), real_wait(evs)))
        monkeypatch.setattr(cl, "enqueue_copy", copy)
        for rt in group.runtimes:
            rt.stats.reset()
        moves = group.exchange.stats["moves"]
        out = call()
        monkeypatch.undo()
        # one wait on the host: the last device's download blocks (the others are waited
        # for one by one after it, done by then as a rule)
        assert counts == {"blocking copy": 1}, name
        assert group.exchange.stats["moves"] == moves, name
        for rt in group.runtimes:
            s = rt.stats
            assert (s.downloads, s.download_bytes, s.builds) == (1, 4, 0), (name, s)
            if name != "scan":
                assert s.launches == 1, (name, s)
        if name == "scan":
            np.testing.assert_array_equal(out.to_numpy(), np.concatenate([[0], np.cumsum(x[:-1])]))
        else:
            assert out == (x.astype(np.float64) ** (2 if name == "dot" else 1)).sum()


def test_allpairs(rng):
    mm = sk.AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b)
    gen = sk.AllPairs(lambda a, b: a[0] - b[a.size - 1])
    for n, m, d in [(1, 1, 1), (2, 3, 5), (13, 7, 33)]:
        A = rng.standard_normal((n, d)).astype(np.float32)
        B = rng.standard_normal((m, d)).astype(np.float32)
        Bc = sk.Matrix(B)
        C = mm(A, Bc)
        assert C.distribution == "block" and Bc.distribution == "copy"
        np.testing.assert_allclose(C.to_numpy(), A.astype(np.float64) @ B.T, rtol=1e-4,
                                   atol=1e-4)
        ref = one_device(lambda A=A, B=B: mm(A, B).to_numpy())
        np.testing.assert_allclose(C.to_numpy(), ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(gen(A, B).to_numpy(), A[:, :1] - B[:, d - 1][None, :])


# -- stencils -------------------------------------------------------------------------------------


def skewed(nb):
    """Reach 2 north, 1 south, 1 west, 2 east: not symmetric, so a wrong halo shows."""
    return 0.5 * nb[-2, 0] + nb[-1, 1] - 0.25 * nb[0, 0] + 0.125 * nb[1, -1] + nb[0, 2]


def scipy_skewed(a: np.ndarray, mode: str, cval: float) -> np.ndarray:
    kw = {"constant_values": cval} if mode == "constant" else {}
    p = np.pad(a.astype(np.float64), 2, mode=PAD[mode], **kw)
    r, c = a.shape
    return (0.5 * p[0:r, 2:2 + c] + p[1:1 + r, 3:3 + c] - 0.25 * p[2:2 + r, 2:2 + c]
            + 0.125 * p[3:3 + r, 1:1 + c] + p[2:2 + r, 4:4 + c])


SHAPES = [(1, 1), (2, 3), (3, 2), (5, 7), (13, 11), (31, 6)]


@pytest.mark.parametrize("mode", MODES)
def test_stencil_every_border_mode_and_k(mode, rng):
    st = sk.Stencil(skewed, border=mode, cval=-1.5)
    for shape in SHAPES:
        a = rng.standard_normal(shape).astype(np.float32)
        one = st(a)
        assert one.distribution.name == "overlap"
        np.testing.assert_allclose(one.to_numpy(), scipy_skewed(a, mode, -1.5), rtol=1e-5,
                                   atol=1e-5)
        refs = one_device(lambda a=a: {it: st(a, iterations=it, params={"t": 1}).to_numpy()
                                       for it in (1, 4)})
        np.testing.assert_array_equal(one.to_numpy(), refs[1])
        for k in (1, 2, 3, 4):
            # both routes of the halo exchange (in order on the devices' queues; copy queues)
            for route in ("queue", "copy"):
                try:
                    got = st(a, iterations=4, params={"k": k, "t": 1, "route": route})
                except sk.ParameterError:
                    assert k > 1          # k = 1 is always possible
                    continue
                assert st.last_launch.k == k
                np.testing.assert_array_equal(got.to_numpy(), refs[4],
                                              err_msg=f"{shape} k={k} route={route}")


@pytest.mark.parametrize("mode", MODES)
def test_stencil_temporal_passes_on_the_group(mode, rng):
    heat = sk.Stencil(lambda u: u[0, 0] + 0.2 * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1]
                                                 - 4 * u[0, 0]), border=mode, cval=0.5)
    for shape in [(1, 1), (4, 9), (29, 13)]:
        a = rng.random(shape).astype(np.float32)
        ref = one_device(lambda a=a: heat(a, iterations=5, params={"t": 1}).to_numpy())
        for route in ("queue", "copy"):
            got = heat(a, iterations=5, params={"t": 2, "tb_wc": 64, "route": route})
            np.testing.assert_array_equal(got.to_numpy(), ref, err_msg=f"{shape} {route}")
        # several passes between exchanges (k = m t; the halo m t deep, recomputed)
        for k in (2, 4):
            got = heat(a, iterations=5, params={"t": 2, "tb_wc": 64, "k": k})
            assert heat.last_launch.k == k
            np.testing.assert_array_equal(got.to_numpy(), ref, err_msg=f"{shape} k={k}")
    with pytest.raises(sk.ParameterError, match="multiple of t"):
        heat(a, iterations=5, params={"t": 2, "tb_wc": 64, "k": 3})


def test_stencil_loop_reuses_the_overlap(rng):
    st = sk.Stencil(skewed, border="wrap")
    a = rng.standard_normal((23, 9)).astype(np.float32)
    u = sk.Matrix(a)
    for _ in range(4):
        u = st(u)
    assert u.distribution == sk.Overlap(2)
    want = a
    for _ in range(4):
        want = one_device(lambda w=want: st(w).to_numpy())
    np.testing.assert_array_equal(u.to_numpy(), want)
    total = sk.Reduce(lambda p, q: p + q, 0)(u)      # a reduction after the loop
    assert abs(float(total) - want.astype(np.float64).sum()) < 1e-3


def test_stencil_steps_are_one_launch_per_device(rng):
    """Between exchanges each device enqueues one kernel per step, whatever the round's
    windows (issue 13: the group's steps were host-bound at 4096^2 on 2 x H200)."""
    st = sk.Stencil(skewed, border="wrap")
    a = rng.standard_normal((40, 23)).astype(np.float32)
    ref = one_device(lambda: st(a, iterations=12, params={"t": 1}).to_numpy())
    params = {"k": 4, "t": 1, "overlap": False}
    st(a, iterations=12, params=params)               # the devices' tuners settle
    rts = runtime.current().group.runtimes
    before = [rt.stats.launches for rt in rts]
    got = st(a, iterations=12, params=params)
    assert [rt.stats.launches - b for rt, b in zip(rts, before, strict=True)] == [12] * ranks()
    assert sum(len(ln.events) for ln in st.last_launch.per_device) == 12 * ranks()
    np.testing.assert_array_equal(got.to_numpy(), ref)


def test_stencil_extras_sequences_and_dtypes(rng):
    def g(nb, o, w, s):
        return nb[-1, 0] + o[0, 1] * s + w[2] - nb[1, 1]

    for mode in ["constant", "reflect"]:     # every mode: test_stencil_every_border_mode_and_k
        st = sk.Stencil(g, border=mode, cval=2.0)
        for shape in [(1, 1), (4, 3), (17, 5)]:
            a, o = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
            w = rng.standard_normal(4).astype(np.float32)
            ref = one_device(lambda a=a, o=o: st(a, o, w, 0.5, iterations=3).to_numpy())
            got = st(sk.Matrix(a), sk.Matrix(o), sk.Vector(w), 0.5, iterations=3)
            np.testing.assert_array_equal(got.to_numpy(), ref)
    s1 = sk.Stencil(lambda nb: 0.5 * nb[-1, 0] + 0.5 * nb[1, 0], border="reflect")
    s2 = sk.Stencil(lambda nb: nb[0, -2] - nb[0, 2], border="wrap")
    seq = s1 >> s2
    for shape in [(1, 3), (9, 8)]:
        a = rng.standard_normal(shape).astype(np.float32)
        ref = one_device(lambda a=a: seq(a, iterations=2).to_numpy())
        np.testing.assert_array_equal(seq(a, iterations=2).to_numpy(), ref)
    widen = sk.Stencil(lambda nb: nb[0, 1] + nb[1, 0], out_dtype=np.float64, border="nearest")
    a = rng.integers(0, 9, (9, 6)).astype(np.int32)
    ref = one_device(lambda: widen(a, iterations=3).to_numpy())
    np.testing.assert_array_equal(widen(a, iterations=3).to_numpy(), ref)


def test_game_of_life_wrap_matches_scipy(rng):
    def life(nb):
        n = (nb[-1, -1] + nb[-1, 0] + nb[-1, 1] + nb[0, -1] + nb[0, 1] + nb[1, -1] + nb[1, 0]
             + nb[1, 1])
        return 1 if (n == 3 or (n == 2 and nb[0, 0] == 1)) else 0

    gol = sk.Stencil(life, border="wrap", out_dtype=np.uint8)
    a = (rng.random((37, 19)) < 0.35).astype(np.uint8)
    got = gol(a, iterations=6).to_numpy()
    want = a.copy()
    k = np.ones((3, 3), int)
    k[1, 1] = 0
    for _ in range(6):
        n = ndi.correlate(want.astype(int), k, mode="wrap")
        want = ((n == 3) | ((n == 2) & (want == 1))).astype(np.uint8)
    np.testing.assert_array_equal(got, want)


def test_bad_k_is_named():
    st = sk.Stencil(skewed, border="nearest")
    with pytest.raises(sk.ParameterError, match="k=5"):
        st(np.ones((9, 4), np.float32), iterations=2, params={"k": 5, "t": 1})
    with pytest.raises(sk.ParameterError, match="route='host'"):
        st(np.ones((9, 4), np.float32), iterations=2, params={"route": "host", "t": 1})


# -- the tuner, per device --------------------------------------------------------------------


def test_a_refusal_on_one_device_leaves_the_others(rng):
    rt = runtime.current()
    group = rt.group
    f = sk.Map(lambda x: x * 3 + 1)
    x = rng.standard_normal(4096).astype(np.float32)
    f(x)
    first = [ln.params for ln in f.last_launch.per_device]
    refused = dict(first[1])
    victim = group.runtimes[1]
    victim.refuse_hook = lambda kind, params, g, loc: kind == "map" and params == refused
    try:
        np.testing.assert_array_equal(f(x).to_numpy(), x * np.float32(3) + np.float32(1))
        after = f.last_launch.per_device
        assert after[0].params == first[0] and after[0].refused == []
        assert after[1].params != refused and after[1].refused == [refused]
        f(x)
        assert f.last_launch.per_device[0].params == first[0]
    finally:
        victim.refuse_hook = None


# -- the array style on a group (skelpy.array) ---------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 13])
def test_array_style_on_distributed_containers(n, rng):
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    x, y = sk.Vector(a, distribution="block"), sk.Vector(b, distribution="copy")
    z = 2 * x + y
    sk.evaluate(z)
    assert z.distribution == "block"                 # the fused kernel ran on the group
    np.testing.assert_allclose(z.to_numpy(), 2 * a + b, rtol=1e-6)
    assert abs(float(np.sum((x - y) ** 2)) - float(((a - b).astype(np.float64) ** 2).sum())) \
        < 1e-4 * n
    assert int(x.argmax()) == int(a.argmax())
    np.testing.assert_array_equal((x[1:] + 1).to_numpy(), a[1:] + np.float32(1))
    x += 1                                           # in place: the parts are stale after it
    np.testing.assert_array_equal(x.to_numpy(), a + np.float32(1))
    np.testing.assert_array_equal(sk.Map(lambda v: v * 2)(x).to_numpy(),
                                  (a + np.float32(1)) * 2)
    view = x[::2]
    assert view.distribution is None
    with pytest.raises(sk.ParameterError, match="view"):
        view.redistribute("copy")


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (7, 5)])
def test_array_views_and_writes_on_distributed_matrices(shape, rng):
    a = rng.standard_normal(shape).astype(np.float32)
    m = sk.Matrix(a, distribution=sk.Overlap(1))
    double = sk.Map(lambda v: v * 2)
    np.testing.assert_array_equal(double(m.T).to_numpy(), a.T * 2)     # a view on the group
    np.testing.assert_array_equal(double(m[:, 1:]).to_numpy(), a[:, 1:] * 2)
    np.testing.assert_allclose((m @ m.T).to_numpy(), a.astype(np.float64) @ a.T, rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(m.sum(axis=0).to_numpy(), a.sum(0), rtol=1e-5, atol=1e-5)
    r = double(m)                                    # a result on the group only
    r[0, :] = 0                                      # a write: the parts go stale
    r[-1:, :1] = sk.Matrix(np.full((1, 1), 7, np.float32))
    want = a * 2
    want[0, :] = 0
    want[-1:, :1] = 7
    np.testing.assert_array_equal(r.to_numpy(), want)
    np.testing.assert_array_equal(double(r).to_numpy(), want * 2)
    assert m.distribution == "block"                 # Map redistributed it (SkelCL's rule)
    np.testing.assert_array_equal(m.to_numpy(), a)


def test_heat_example_on_the_group(tmp_path):
    from examples import heat

    sk.use(sk.devices()[0])
    try:
        res = heat.main(["--quick", "--devices", "2", "--out", str(tmp_path)])
    finally:
        sk.use(GROUP)
    assert res["max_err"] < 1e-3 and res["vs_one_device"] < 1e-4
    assert res["cuts"] == [64] and os.path.exists(res["png"])


def test_bench_multidev_measures_one_and_two_devices(tmp_path, monkeypatch):
    import benchmarks.common as bcommon
    from benchmarks import bench_multidev, report_multidev

    monkeypatch.setattr(bcommon, "RESULTS_DIR", tmp_path)
    try:
        data = bench_multidev.main(["--scale", "tiny", "--reps", "1", "--iterations", "3",
                                    "--cases", "reduce,heat", "--group", GROUP,
                                    "--max-devices", "2"])
    finally:
        sk.use(GROUP)
    rows = {(r["case"], r["devices"]): r for r in data["rows"]}
    assert set(rows) == {("reduce", 1), ("reduce", 2), ("heat", 1), ("heat", 2)}
    assert all(r["kernel_s"] > 0 and r["wall_s"] > 0 for r in rows.values())
    assert rows[("heat", 2)]["k"] >= 1 and rows[("reduce", 2)]["speedup_kernel"] > 0
    lines = report_multidev.section(data, None)
    assert any(line.startswith("| heat | 128x128 | 2 |") for line in lines)
    assert list(tmp_path.glob("multidev-*.json"))


def test_suite_runs_the_multidev_part_by_itself_on_a_group(tmp_path, monkeypatch):
    """``skelpy bench`` with a group of several devices in use: the multidev part joins the
    default parts, on that group (the others on its first device), and its JSON and section
    land in the results (the other parts are not run here: they have their own tests)."""
    import json

    from benchmarks import suite

    seen = {}
    real = suite.run_part

    def run_part(part, argv, *, dump, parts_dir, env, timeout_s, log, progress):
        seen[part] = (list(argv), env.get("SKELPY_DEVICE"))
        if part != "multidev":
            return {"status": "failed", "seconds": 0.0, "error": "not run in this test"}
        # the calls of the test above (its kernels are built): fast also on a cold cache
        argv = argv + ["--cases", "reduce,heat", "--iterations", "3"]
        return real(part, argv, dump=dump, parts_dir=parts_dir,
                    env=env, timeout_s=timeout_s, log=log, progress=progress)

    monkeypatch.setattr(suite, "run_part", run_part)
    monkeypatch.delenv("SKELPY_DEVICE", raising=False)
    assert suite.multidev_group(None) is None            # CPUs only: never by itself
    assert suite.multidev_group("cpu:0") is None
    try:
        doc = suite.main(["--device", GROUP, "--scale", "tiny", "--budget-minutes", "20",
                          "--out", str(tmp_path), "--quiet"])
    finally:
        monkeypatch.delenv("SKELPY_DEVICE", raising=False)
        sk.use(GROUP)
    assert list(seen) == [*suite.DEFAULT_PARTS, "multidev"]
    argv, device = seen["multidev"]
    assert argv[:2] == ["--group", GROUP]
    assert all(dev == "0" for _, dev in seen.values())   # the others: the first device
    assert doc["parts"]["multidev"]["status"] == "done", doc["parts"]["multidev"]
    (path,) = tmp_path.glob("multidev-*.json")
    rows = {(r["case"], r["devices"]): r for r in json.loads(path.read_text())["rows"]}
    assert {("reduce", 1), ("reduce", 2), ("heat", 1), ("heat", 2)} <= set(rows)
    heat = rows[("heat", 2)]
    assert 0 <= heat["exchange_fraction"] < 1 and 0 <= heat["stall_fraction"] < 1
    md = (tmp_path / "RESULTS.md").read_text()
    assert "### Several devices" in md and "| heat | 128x128 | 2 |" in md


def test_tall_parts_run_at_the_whole_matrix_point():
    # parts of >= 1024 rows take the point the tuner's model gives the whole matrix (model
    # mode); the result is the single device's, bit for bit
    from skelpy.distribution import stencil as dstencil

    rows = dstencil.WHOLE_MIN_ROWS * ranks() + 3
    a = np.random.default_rng(21).random((rows, 9), dtype=np.float32)
    st = sk.Stencil(lambda nb: nb[-1, 0] + 0.5 * nb[0, 1] - nb[1, -1], border="reflect")
    ref = one_device(lambda: st(a).to_numpy())
    with sk.tuning("model"):
        got = st(a)
    np.testing.assert_array_equal(got.to_numpy(), ref)
    assert {ln.source for ln in st.last_launch.per_device} == {"forced"}
    p = np.pad(a.astype(np.float64), 1, mode=PAD["reflect"])
    want = p[:-2, 1:-1] + 0.5 * p[1:-1, 2:] - p[2:, :-2]      # NumPy, independently
    np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-5, atol=1e-6)
