"""Bugs found by fuzzing a device group (issue 13), and the fuzzer itself; run by
tests/test_multidev_fuzz.py in a process of its own with several PoCL CPU devices
(POCL_DEVICES must be set before the OpenCL platform loads).

``python tests/multidev/fuzz_cases.py regressions``: the checks below, one process (few
kernels: the file must stay cheap cold). ``python tests/multidev/fuzz_cases.py fuzz SEED
STEPS``: random programs over a pool of containers (redistribute, Map, Zip, Reduce, Scan,
axis reductions, Stencil in every border mode and k, host writes, array expressions and
writes, views, copies, switching ``sk.use`` between the group, single devices and the group
in another order) checked after every step against a NumPy model, and every container's
``distribution`` against its parts. Prints ``ok`` and exits 0, or says what differed.

Not collected by the normal test run (the file name does not start with test_)."""

from __future__ import annotations

import random
import sys

import numpy as np

import skelpy as sk

GROUP = "cpu:*"
MODES = ["constant", "nearest", "wrap", "reflect", "mirror"]
PAD = {"constant": "constant", "nearest": "edge", "wrap": "wrap", "reflect": "symmetric",
       "mirror": "reflect"}
DISTS = ["single", "block", "copy", sk.Overlap(1), sk.Overlap(2), sk.Overlap(4)]


def inc_muscle(x):
    return x * 3 + 1


def lookup_muscle(i, t):
    return t[i % 5] + i


def zip_muscle(a, b):
    return a - 2 * b


def add(a, b):
    return a + b


def bigger(a, b):
    return max(a, b)


def skew(nb):
    """Reach 1 north, 2 south, 1 west, 1 east: a wrong halo or ghost row shows."""
    return nb[-1, 0] * 2 + nb[0, 1] - nb[2, -1] + nb[0, 0]


def skew_ref(a: np.ndarray, mode: str, iterations: int, cval: int = 3) -> np.ndarray:
    for _ in range(iterations):
        if a.size == 0:
            return a
        kw = {"constant_values": cval} if mode == "constant" else {}
        p = np.pad(a, 2, mode=PAD[mode], **kw)
        r, c = a.shape
        a = (p[1:1 + r, 2:2 + c] * 2 + p[2:2 + r, 3:3 + c] - p[4:4 + r, 1:1 + c]
             + p[2:2 + r, 2:2 + c]).astype(a.dtype)
    return a


def equal(got, want, what: str) -> None:
    got = np.asarray(got)
    if got.shape != np.shape(want) or got.dtype != np.asarray(want).dtype \
            or not np.array_equal(got, want):
        raise AssertionError(f"{what}: got {got!r}, want {np.asarray(want)!r}")


# -- regressions ---------------------------------------------------------------------------------


def pending_group_values_read_and_written() -> None:
    """An array expression on a group is computed into parts; reading or writing one element
    (or a basic slice) of it straight away went to a device copy it does not have
    (AttributeError: 'NoneType' object has no attribute 'copy_part')."""
    a = np.arange(20, dtype=np.int32).reshape(5, 4)
    m = sk.Matrix(a, distribution="block")
    equal((m + 1)[2, 3], a[2, 3] + 1, "element of a pending matrix")
    p = m + 1
    p[0, 0] = 50
    p = p + 0
    p[1:3, 0] = -1
    want = a + 1
    want[0, 0], want[1:3, 0] = 50, -1
    equal(p.to_numpy(), want, "writes into pending matrices")
    v = sk.Vector(np.arange(7, dtype=np.int32))
    equal((v * 3)[5], np.int32(15), "element of a pending vector")
    w = v * 3
    w[5:0:-2] = np.array([-1, -2, -3], np.int32)      # a reversed, strided basic slice
    want = np.arange(7, dtype=np.int32) * 3
    want[5:0:-2] = [-1, -2, -3]
    equal(w.to_numpy(), want, "reversed slice written into a pending vector")
    assert w.distribution == "block", w.distribution


def views_of_one_device_results_on_a_group() -> None:
    """A view of a result held by one device (made while that device was in use), used while
    a group is in use, recursed without end: its elements were copied by a kernel of the
    runtime in use, the group's, which spread the view again."""
    inc = sk.Map(inc_muscle)
    a = np.arange(6, dtype=np.int32)
    sk.use(1)
    c = inc(sk.Vector(a))
    sk.use(GROUP)
    want = a * 3 + 1
    equal(sk.Vector(c[1:3]).to_numpy(), want[1:3], "a copy of the view")
    equal(inc(c[1:4]).to_numpy(), want[1:4] * 3 + 1, "a Map of the view")
    equal((c[2:5] * 2).to_numpy(), want[2:5] * 2, "an array expression of the view")
    sk.use(0)                                  # another single device than the one it is on
    equal(sk.Vector(c[0:2]).to_numpy(), want[0:2], "a copy of the view on another device")
    sk.use(GROUP)


def failed_calls_keep_their_inputs_distribution() -> None:
    """A call on a group that failed after spreading its inputs left them redistributed
    (``v.distribution`` changed by a call that raised)."""
    a = np.arange(12, dtype=np.float32)
    x = sk.Vector(a, distribution="copy")
    x.redistribute("copy")
    try:
        sk.Map(inc_muscle)(x, params={"wg": -1})
    except sk.ParameterError:
        pass
    else:
        raise AssertionError("a Map with wg=-1 did not fail")
    assert x.distribution == "copy", x.distribution
    equal(x.to_numpy(), a, "the input after the failed call")
    m = sk.Matrix(a.reshape(4, 3), distribution="single")
    m.redistribute("single")
    try:
        sk.Stencil(skew, border="wrap")(m, iterations=2, params={"zz": 1})
    except sk.ParameterError:
        pass
    else:
        raise AssertionError("a Stencil with an unknown parameter did not fail")
    assert m.distribution == "single", m.distribution
    equal(m.to_numpy(), a.reshape(4, 3), "the stencil's input after the failed call")


def results_name_their_distribution_at_every_size() -> None:
    """Results of calls on a group say the distribution the call gives (block; single for
    an axis-0 reduction; an Overlap for a stencil), also when empty or when computed from an
    empty input (they said None), and a pending value says the one it is computed into."""
    e = np.zeros(0, np.float32)
    none = np.zeros((0, 3), np.float32)
    got = {
        "map": sk.Map(inc_muscle)(e), "zip": sk.Zip(zip_muscle)(e, e),
        "scan": sk.Scan(add, 0)(e), "rows": sk.Reduce(add, 0, axis=1)(none),
        "cols": sk.Reduce(add, 0, axis=0)(none),
        "allpairs": sk.AllPairs(zip=lambda p, q: p * q, reduce=add)(none, np.ones((2, 3),
                                                                                np.float32)),
        "array": sk.Vector(e) * 2,
    }
    want = {"cols": "single"}
    for name, res in got.items():
        assert res.distribution == want.get(name, "block"), (name, res.distribution)
    equal(got["cols"].to_numpy(), np.zeros(3, np.float32), "axis-0 sum of no rows")
    st = sk.Stencil(skew, border="nearest")(none, iterations=2)
    assert st.distribution == "overlap" and st.shape == (0, 3), st.distribution
    x = sk.Vector(np.arange(5, dtype=np.int32)) + 1
    assert x.is_pending and x.distribution == "block", x.distribution
    equal(x.to_numpy(), np.arange(1, 6, dtype=np.int32), "the pending value")


def widen(nb):
    return nb[0, 1] + nb[1, 0]


def stencil_that_changes_dtype_takes_k() -> None:
    """A stencil whose result has another dtype runs its first step as a call of its own; a
    forced ``k`` was passed to that one step too and refused ("legal: [1]") although the call's
    other steps can use it."""
    st = sk.Stencil(widen, out_dtype=np.float64, border="nearest")
    a = (np.arange(54, dtype=np.int32) % 7).reshape(9, 6)
    sk.use(0)
    want = st(a, iterations=4).to_numpy()
    sk.use(GROUP)
    got = st(a, iterations=4, params={"k": 3})
    assert st.last_launch.k == 3, st.last_launch.k
    equal(got.to_numpy(), want, "int32 -> float64 stencil, k = 3")


def stencil_of_a_view_of_an_overlap_matrix() -> None:
    """A stencil on a view (rows, columns, every other row, the transpose) of a matrix whose
    data already had an Overlap took the base's parts as its own: a result of the base's
    shape, and a heap overrun (``free(): invalid next size``)."""
    st = sk.Stencil(skew, border="nearest")
    a = (np.arange(63, dtype=np.int32) % 11).reshape(9, 7)
    m = sk.Matrix(a)
    st(m)
    assert m.distribution == "overlap", m.distribution
    for key in [(slice(1, 4),), (slice(None), slice(1, 5)), (slice(None, None, 2),)]:
        equal(st(m[key], iterations=2).to_numpy(), skew_ref(a[key], "nearest", 2),
              f"a stencil of m[{key}]")
    equal(st(m.T).to_numpy(), skew_ref(a.T, "nearest", 1), "a stencil of m.T")
    equal(m.to_numpy(), a, "the base")


def strided_column(nb, d):
    s = nb[0, 0]
    for i in range(1, 3):
        s += nb[i * d, 0] - nb[-i * d, 0]
    return s


def stencil_with_checked_reads() -> None:
    """A stencil whose reads are checked at run time (offsets that are not constants, or
    debug mode) failed on every group call (LaunchError: INVALID_KERNEL_ARGS): the group's
    kernels were not given their check buffer. Now each device has one, read after the
    call: results as on one device, and a read out of the shape is the BoundsError one
    device raises."""
    st = sk.Stencil(strided_column, shape=2, border="reflect")
    a = (np.arange(45, dtype=np.int32) % 13).reshape(9, 5)
    want = a.copy()
    for _ in range(2):
        p = np.pad(want, 2, mode="symmetric")[:, 2:7]
        want = (want + p[3:12] - p[1:10] + p[4:13] - p[0:9]).astype(np.int32)
    equal(st(a, 1, iterations=2).to_numpy(), want, "a stencil with offsets i * d, d = 1")
    try:
        st(a, 2)
    except sk.BoundsError as exc:
        assert "nb[i * d, 0]" in str(exc) and "fuzz_cases.py" in str(exc), exc
    else:
        raise AssertionError("a read at offset 4 outside shape=2 was not reported")


def stencil_k_measured_by_the_tuner() -> None:
    """In the tuner's measuring modes (online, exhaustive) a group stencil measures its legal
    k and compares their results; it compared the parts objects, always unequal: every call
    with two legal k raised "launch parameters {'k': 3} compute a different result"."""
    st = sk.Stencil(skew, border="mirror")
    a = (np.arange(21 * 6, dtype=np.int32) % 9).reshape(21, 6)
    st(a, iterations=4, params={"t": 1})
    point = dict(st.last_launch.per_device[0].params)      # the devices' kernels fixed:
    point.pop("k", None)                                   # only k is measured (no builds)
    for mode in ("online", "exhaustive"):
        with sk.tuning(mode):
            for _ in range(2):
                got = st(a, iterations=4, params={**point, "t": 1})
                equal(got.to_numpy(), skew_ref(a, "mirror", 4), f"k measured ({mode})")


REGRESSIONS = [pending_group_values_read_and_written, views_of_one_device_results_on_a_group,
               failed_calls_keep_their_inputs_distribution,
               results_name_their_distribution_at_every_size, stencil_that_changes_dtype_takes_k,
               stencil_of_a_view_of_an_overlap_matrix, stencil_with_checked_reads,
               stencil_k_measured_by_the_tuner]


# -- the fuzzer ----------------------------------------------------------------------------------


class Fuzz:
    """A random program over a pool of [container, NumPy model] pairs."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)
        self.rng = np.random.default_rng(seed)
        n = len(sk.current_devices())
        self.specs = [GROUP, 0, 1, [f"cpu:{d}" for d in reversed(range(n))]]
        self.spec = GROUP
        self.pool: list[list] = []
        self.log: list[str] = []
        self.inc, self.zip = sk.Map(inc_muscle), sk.Zip(zip_muscle)
        self.red, self.max = sk.Reduce(add, 0), sk.Reduce(bigger, -2**31)
        self.scan = sk.Scan(add, 0)
        self.axis = {ax: sk.Reduce(add, 0, axis=ax) for ax in (0, 1)}
        self.stencils = {m: sk.Stencil(skew, border=m, cval=3) for m in MODES}
        self.lookup = sk.Map(lookup_muscle)
        for _ in range(4):
            self.new()

    def new(self) -> None:
        shape = self.r.choice([(0,), (1,), (2,), (3,), (5,), (11,), (0, 3), (1, 1), (1, 4),
                               (4, 1), (2, 3), (3, 5), (7, 2), (13, 3)])
        a = self.rng.integers(-50, 50, shape).astype(np.int32)
        cls = sk.Vector if len(shape) == 1 else sk.Matrix
        self.pool.append([cls(a, distribution=self.r.choice([None, *DISTS])), a])

    def rows(self, a: np.ndarray) -> slice:
        lo = self.r.randrange(a.shape[0])
        return slice(lo, self.r.randrange(lo, a.shape[0] + 1))

    def step(self, op: str, c, a: np.ndarray, i: int) -> None:   # noqa: C901 - one op each
        r, pool = self.r, self.pool
        if op == "new":
            self.new()
        elif op == "redistribute":
            d = r.choice(DISTS)
            c.redistribute(d)
            assert c.distribution == d, f"redistribute({d}) left {c.distribution}"
        elif op == "map":
            pool.append([self.inc(c), a * 3 + 1])
        elif op == "zip":
            o, b = r.choice([p for p in pool if p[1].shape == a.shape])
            pool.append([self.zip(c, o), a - 2 * b])
        elif op == "reduce":
            equal(self.red(c), a.sum(), "Reduce")
            if a.size:
                equal(self.max(c), a.max(), "Reduce(max)")
        elif op == "scan":
            flat = a.reshape(-1)
            want = np.concatenate([[0], np.cumsum(flat)[:-1]]).astype(np.cumsum(flat).dtype)
            pool.append([self.scan(c), want[:a.size].reshape(a.shape)])
        elif op == "axis" and a.ndim == 2:
            ax = r.choice((0, 1))
            pool.append([self.axis[ax](c), a.sum(ax)])
        elif op == "stencil" and a.ndim == 2:
            mode, it, k = r.choice(MODES), r.choice([1, 2, 3, 5]), r.choice([0, 1, 2, 3, 4])
            grouped = not isinstance(self.spec, int)
            try:
                out = self.stencils[mode](c, iterations=it,
                                          params={"k": k} if k and grouped else {})
            except sk.ParameterError as exc:
                assert f"k={k}" in str(exc), exc         # only a k this call cannot use
                return
            pool.append([out, skew_ref(a, mode, it)])
        elif op == "write" and a.size:
            idx = tuple(r.randrange(s) for s in a.shape)
            c[idx] = value = r.randrange(-9, 9)
            pool[i][1] = a = a.copy()
            a[idx] = value
        elif op == "slice_write" and a.size:
            s = self.rows(a)
            c[s] = value = r.randrange(-9, 9)
            pool[i][1] = a = a.copy()
            a[s] = value
        elif op == "array_write" and a.size:
            s = self.rows(a)
            c[s] = c[s] * 2 + 1
            pool[i][1] = a = a.copy()
            a[s] = a[s] * 2 + 1
        elif op == "use":
            self.spec = r.choice(self.specs)
            sk.use(self.spec)
        elif op == "copy":
            cc = c.copy()
            assert cc.distribution == c.distribution, (cc.distribution, c.distribution)
            pool.append([cc, a])
        elif op == "array":
            pool.append([(c + 1) * 2 - c, (a + 1) * 2 - a])
        elif op == "view" and a.size:
            s = self.rows(a)
            pool.append([self.inc(c[s]), a[s] * 3 + 1])
        elif op == "stencil_view" and a.ndim == 2 and a.size:
            s, mode = self.rows(a), r.choice(MODES)
            view, want = (c.T, a.T) if r.random() < 0.3 else (c[s], a[s])
            pool.append([self.stencils[mode](view, iterations=2), skew_ref(want, mode, 2)])
        elif op == "lookup" and a.ndim == 1 and a.size >= 5:
            n = r.choice([1, 3, 8])
            got = self.lookup(sk.IndexVector(n), c).to_numpy()
            equal(got, (a[np.arange(n) % 5] + np.arange(n)).astype(got.dtype), "lookup")
        elif op == "read":
            equal(c.to_numpy(), a, "read")
        elif op == "drop" and len(pool) > 3:
            pool.pop(i)

    def run(self, steps: int) -> None:
        ops = ["new", "redistribute", "map", "zip", "reduce", "scan", "axis", "stencil",
               "write", "slice_write", "array_write", "use", "copy", "array", "view", "stencil_view",
               "lookup",
               "read", "drop"]
        for n in range(steps):
            op = self.r.choice(ops)
            i = self.r.randrange(len(self.pool))
            c, a = self.pool[i]
            self.log.append(f"{n}: {op} on [{i}] {a.shape} {c.distribution} under {self.spec}")
            self.step(op, c, a, i)
            if len(self.pool) > 12:
                self.pool.pop(self.r.randrange(len(self.pool)))
            for k, (ck, _a) in enumerate(self.pool):
                s = ck.storage
                if ck.layout is None and s.parts is not None:
                    assert s.distribution == s.parts.dist, (k, s.distribution, s.parts.dist)
            j = self.r.randrange(len(self.pool))
            equal(self.pool[j][0].to_numpy(), self.pool[j][1], f"pool[{j}]")
        for k, (c, a) in enumerate(self.pool):
            equal(c.to_numpy(), a, f"pool[{k}] at the end")


def main(argv: list[str]) -> int:
    sk.use(GROUP)
    assert len(sk.current_devices()) >= 2, "several OpenCL devices are needed"
    if argv[0] == "regressions":
        for check in REGRESSIONS:
            check()
            sk.use(GROUP)
        print("ok", len(REGRESSIONS))
        return 0
    seed, steps = int(argv[1]), int(argv[2])
    fuzz = Fuzz(seed)
    try:
        fuzz.run(steps)
    except Exception:
        print(f"seed {seed}, the last steps:\n  " + "\n  ".join(fuzz.log[-12:]))
        raise
    print("ok", seed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
