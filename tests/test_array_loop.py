"""The repeat path of array expressions (issue 15, a loop of small expressions): an operator
whose signature was seen before is built inline, and a plain tree whose structure ran
before goes straight to its kernel's repeat launcher, keyed by (structure id, ndim). These
tests check that nothing else changes: expressions that differ in any way the kernel
depends on never share a kernel, results equal NumPy's bit for bit, and a loop builds
nothing after its first iteration."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skelpy as sk
from skelpy import runtime
from skelpy.skeletons.elementwise import ZipN


@pytest.fixture
def relaunches(monkeypatch):
    """How many evaluations went through a kernel's repeat launcher (the fast path)."""
    count = [0]
    real = ZipN.repeat_launcher

    def counting(self):
        launch = real(self)
        if launch is None:
            return None

        def counted(*args):
            done = launch(*args)
            count[0] += done is not None
            return done

        return counted

    monkeypatch.setattr(ZipN, "repeat_launcher", counting)
    return count


def _twice(make, want):
    """Evaluate ``make()`` twice (the second time through the caches) against ``want``."""
    for _ in range(2):
        got = make().to_numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_a_loop_builds_nothing_and_takes_the_repeat_launcher(relaunches, rng):
    rt = runtime.current()
    a, b = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
    x, y = sk.Vector(a), sk.Vector(b)
    sk.evaluate(2.0 * x + y)
    builds = rt.stats.builds
    relaunches[0] = 0
    for k in range(30):
        z = float(k) * x + y
        sk.evaluate(z)
        np.testing.assert_array_equal(z.to_numpy(), np.float32(k) * a + b)
    assert rt.stats.builds == builds
    assert relaunches[0] == 30
    assert sk.array.last_skeleton().last_launch.source == "cache"


def test_leaf_dtypes_shapes_and_ndim_never_share_a_kernel(rng):
    """Structures that would collide if a plain tree's key left out the leaves' dtypes, the
    shape or the number of dimensions (each pair is evaluated in both orders)."""
    a = rng.standard_normal(7)
    x32, x64 = sk.Vector(a.astype(np.float32)), sk.Vector(a)
    y32, y64 = sk.Vector(a[::-1].astype(np.float32)), sk.Vector(a[::-1].copy())
    i32 = np.arange(-3, 4, dtype=np.int32)
    u32 = np.arange(7, dtype=np.uint32)
    I32, U32 = sk.Vector(i32), sk.Vector(u32)
    for _ in range(2):
        # float32 + float64 and float64 + float32: both float64 results
        _twice(lambda: x32 + y64, a.astype(np.float32) + a[::-1])
        _twice(lambda: x64 + y32, a + a[::-1].astype(np.float32))
        # int32 and uint32 leaves, both int64 results
        _twice(lambda: I32 + U32, i32 + u32)
        _twice(lambda: U32 + I32, u32 + i32)
    # one structure at other lengths (same ndim), alternating
    b = rng.standard_normal(11).astype(np.float32)
    v, w = sk.Vector(b), sk.Vector(b[::-1].copy())
    for _ in range(2):
        _twice(lambda: x32 * 1.5 + y32, a.astype(np.float32) * np.float32(1.5)
               + a[::-1].astype(np.float32))
        _twice(lambda: v * 1.5 + w, b * np.float32(1.5) + b[::-1])
    # the same 12 elements as 1-D and as 2-D
    c = rng.standard_normal(12).astype(np.float32)
    V, M = sk.Vector(c), sk.Matrix(c.reshape(3, 4))
    V2, M2 = sk.Vector(c[::-1].copy()), sk.Matrix(c[::-1].reshape(3, 4))
    for _ in range(2):
        _twice(lambda: V * 1.5 + V2, c * np.float32(1.5) + c[::-1])
        _twice(lambda: M * 1.5 + M2, (c * np.float32(1.5) + c[::-1]).reshape(3, 4))


def test_views_broadcasts_and_aliasing_never_take_a_plain_kernel(rng):
    m = rng.standard_normal((6, 6)).astype(np.float32)
    n = rng.standard_normal((6, 6)).astype(np.float32)
    row = rng.standard_normal(6).astype(np.float32)
    M, N, R = sk.Matrix(m), sk.Matrix(n), sk.Vector(row)
    two = np.float32(2)
    for _ in range(2):
        _twice(lambda: M * 2.0 + N, m * two + n)              # plain
        _twice(lambda: M.T * 2.0 + N, m.T * two + n)          # a view of the same shape
        _twice(lambda: M * 2.0 + N.T, m * two + n.T)
        _twice(lambda: M.reshape(36).reshape(6, 6) * 2.0 + N, m * two + n)
        _twice(lambda: M * 2.0 + R, m * two + row)            # a broadcast row
        _twice(lambda: M * 2.0 + M, m * two + m)              # one leaf read twice
        _twice(lambda: M * 2.0 + M[:, :], m * two + m)
        _twice(lambda: M * N + N, m * n + n)
        _twice(lambda: M * M + N, m * m + n)                  # aliasing moves
        _twice(lambda: N * N + M, n * n + m)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([0.0, -1.5, 3.25, 1e30, float("inf"), float("nan"), 7, -2, True,
                        np.float32(0.75), np.float64(0.75), np.int32(-4), np.int8(3),
                        np.uint8(200)]),
       st.booleans())
def test_scalar_values_and_types_follow_numpy(s, left):
    """A scalar's value is a kernel argument (no recompilation), its type is part of the
    structure as NumPy 2 types it (NEP 50): Python scalars weak, NumPy scalars strong."""
    a = np.linspace(-3, 3, 9, dtype=np.float32)
    b = np.arange(9, dtype=np.int16)
    x, k = sk.Vector(a), sk.Vector(b)
    with np.errstate(all="ignore"):
        want_x = (s * a if left else a * s) + a
        want_k = (s * b if left else b * s) - b
    for _ in range(2):
        with np.errstate(all="ignore"):
            got = ((s * x if left else x * s) + x).to_numpy()
        assert got.dtype == want_x.dtype
        np.testing.assert_array_equal(got, want_x)
        got = ((s * k if left else k * s) - k).to_numpy()
        assert got.dtype == want_k.dtype
        np.testing.assert_array_equal(got, want_k)


def test_pending_values_on_the_repeat_path_never_see_later_writes(rng):
    a, b = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    x, y = sk.Vector(a), sk.Vector(b)
    sk.evaluate(3.0 * x + y)                      # the signature and the kernel: known
    for k in range(3):
        t = 3.0 * x                               # built inline, pending
        z = t + y
        y += 1.0                                  # a device write: z computed first
        x[k] = 100.0 + k                          # a host write: t computed first
        want_t = np.float32(3) * a
        np.testing.assert_array_equal(t.to_numpy(), want_t)
        np.testing.assert_array_equal(z.to_numpy(), want_t + b)
        a = x.to_numpy().copy()
        b = b + np.float32(1)
        np.testing.assert_array_equal(y.to_numpy(), b)
        np.testing.assert_array_equal((3.0 * x + y).to_numpy(), np.float32(3) * a + b)


def test_debug_mode_and_a_changed_tuning_mode_leave_the_repeat_path(relaunches, rng):
    a, b = (rng.standard_normal(33).astype(np.float32) for _ in range(2))
    x, y = sk.Vector(a), sk.Vector(b)
    want = np.float32(0.5) * a - b
    for _ in range(2):
        np.testing.assert_array_equal((0.5 * x - y).to_numpy(), want)
    relaunches[0] = 0
    with sk.tuning("off"):                     # the decision's ticket is no longer valid
        np.testing.assert_array_equal((0.5 * x - y).to_numpy(), want)
    with sk.debug():                           # checked kernels: always the full path
        np.testing.assert_array_equal((0.5 * x - y).to_numpy(), want)
    assert relaunches[0] == 0
    np.testing.assert_array_equal((0.5 * x - y).to_numpy(), want)



_NODE_FIELDS = ("op", "dtype", "shape", "n_ops", "shared", "plain", "sid", "fn", "uses")


def _same_node(fast, general):
    """Every field of two graphs built from equal operands, one inline (``binary``) and one
    by ``graph.Node`` (``expression.apply``): equal, leaves and their storages the same
    objects, constants bitwise equal and of one type."""
    for name in _NODE_FIELDS:
        assert getattr(fast, name) == getattr(general, name), name
    assert fast.args is fast.args          # nodes made on first use are kept: one graph
    assert len(fast.args) == len(general.args)
    for fa, ga in zip(fast.args, general.args, strict=True):
        for name in _NODE_FIELDS:
            assert getattr(fa, name) == getattr(ga, name), ("arg", name)
    assert len(fast.leaves) == len(general.leaves)
    for p, q in zip(fast.leaves, general.leaves, strict=True):   # views are made per call
        assert p is q or (p.storage is q.storage and p.layout == q.layout
                          and p.shape == q.shape and p.layout is not None)
    assert all(p is q for p, q in zip(fast.stores, general.stores, strict=True))
    assert [type(c) for c in fast.consts] == [type(c) for c in general.consts]
    assert [np.asarray(c).tobytes() for c in fast.consts] == \
        [np.asarray(c).tobytes() for c in general.consts]


def test_inline_nodes_equal_the_nodes_graph_builds(rng):
    """The operators' inline path (a signature seen before) builds the very node that
    ``graph.Node`` builds from the same operands: leaves, constants, structure id, plain,
    shared and uses (so a later walk, tree key or kernel cannot tell them apart), for fresh
    leaves and constants, pending operands, a leaf read twice, broadcasts, views and the
    constants that take graph.const's slower path."""
    from skelpy.array import expression

    m = rng.standard_normal((4, 5)).astype(np.float32)
    n = rng.standard_normal((4, 5)).astype(np.float32)
    r = rng.standard_normal(5).astype(np.float32)
    M, N, R = sk.Matrix(m), sk.Matrix(n), sk.Vector(r)
    X = sk.Vector(rng.standard_normal(5))                 # float64
    K = sk.Vector(np.arange(5, dtype=np.int16))
    S = sk.Matrix(m[:, :4].copy())
    cases = {   # name: (operand a, operand b) made fresh each time; the op is "add"
        "const+leaf": lambda: (1.5, M),
        "leaf+const": lambda: (M, 1.5),
        "leaf+leaf": lambda: (M, N),
        "leaf+same leaf": lambda: (M, M),
        "pending+leaf": lambda: (M * 2.0, N),
        "leaf+pending": lambda: (N, M * 2.0),
        "pending+pending": lambda: (M * 2.0, N * 3.0),
        "pending+its own leaf": lambda: (M * 2.0, M),
        "pending sharing a leaf": lambda: (M * 2.0, M * N),
        "broadcast row": lambda: (M, R),
        "row first": lambda: (R * 2.0, M),
        "view": lambda: (M.T.T, N),
        "transposed": lambda: (M[:, :4].T, S),
        "float64 leaf": lambda: (X, 0.25),
        "huge float into float32": lambda: (M, 1e39),
        "int constant": lambda: (K, 3),
        "numpy constant": lambda: (np.float32(0.5), M),
        "chain": lambda: (((M * 2.0) + N) * 0.5, (N - M) * 3.0),
    }
    for name, make in cases.items():
        a, b = make()
        warm = a + b                                        # the signature is known now
        a, b = make()
        fast = (a + b).storage.pending.node
        a, b = make()
        general = expression.apply("add", [a, b]).storage.pending.node
        _same_node(fast, general)
        want = warm.to_numpy()
        a, b = make()
        np.testing.assert_array_equal((a + b).to_numpy(), want, err_msg=name)


def test_leaf_reader_lists_stay_short_and_keep_live_readers(rng):
    """A loop of pending values over one container: its list of readers is pruned (values
    gone or computed dropped) and stays short, while the values still pending and alive
    keep their place: a write afterwards computes each of them first."""
    from skelpy.containers.storage import MAX_READERS

    a, b = (rng.standard_normal(9).astype(np.float32) for _ in range(2))
    x, y = sk.Vector(a), sk.Vector(b)
    for k in range(3 * MAX_READERS):
        sk.evaluate(2.0 * x + y)                 # computed, then dropped
        t = float(k) * x                         # dropped while pending
        assert len(x.storage.readers) <= MAX_READERS
    kept = []
    for k in range(6 * MAX_READERS):
        sk.evaluate(2.0 * x + y)
        t = float(k) * x
        if k % 4 == 0:
            kept.append((k, t + y))              # alive and pending
        # each live reader once, at most; the others dropped at each power of two
        assert len(x.storage.readers) <= 2 * (len(kept) + 1) + MAX_READERS
    assert len(kept) > MAX_READERS               # more than a list holds without pruning
    x[0] = 1000.0                                # a host write: every kept value first
    y += 1.0                                     # a device write
    for k, z in kept:
        np.testing.assert_array_equal(z.to_numpy(), np.float32(k) * a + b)
    np.testing.assert_array_equal((x + y).to_numpy(),
                                  np.concatenate([[1000.0], a[1:]]).astype(np.float32)
                                  + (b + np.float32(1)))


def test_a_computed_pending_value_is_written_and_read_as_any_container(rng):
    """A pending container's storage starts with most fields as its class's defaults; once
    computed it is written (host and device, whole and in part), copied and read by other
    pending values as any container is, and its own readers are computed before it
    changes."""
    from skelpy.containers.storage import Storage

    a, b = (rng.standard_normal(10).astype(np.float32) for _ in range(2))
    x, y = sk.Vector(a), sk.Vector(b)
    z = 2.0 * x + y
    assert z.is_pending and isinstance(z.storage, Storage) and "pending" in repr(z)
    base = np.float32(2) * a + b
    w = z * 3.0                                  # reads z while z is pending
    z += 1.0                                     # z is computed, then w, then z written
    np.testing.assert_array_equal(w.to_numpy(), base * np.float32(3))
    want = base + np.float32(1)
    np.testing.assert_array_equal(z.to_numpy(), want)
    v = z - 1.0
    z[3] = -7.0                                  # a host-side write of one element
    with z.host_edit() as h:
        h[0] = 42.0
    want[3], want[0] = -7.0, 42.0
    c = z.copy()
    want_c = want.copy()
    z[1:3] = y[1:3]                              # a device write through a view
    want[1:3] = b[1:3]
    np.testing.assert_array_equal(z.to_numpy(), want)
    np.testing.assert_array_equal(v.to_numpy(), base + np.float32(1) - np.float32(1))
    np.testing.assert_array_equal(c.to_numpy(), want_c)


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def test_float_constants_keep_their_value_sign_and_dtype(rng):
    """The operators keep the latest float constant's NumPy scalar: equal floats that are
    other objects (0.0 and -0.0), NaN, and one float object in float32 then float64 each
    give NumPy's result bit for bit."""
    a = np.array([1.0, -2.0, 3.0, 0.1], np.float32)
    x32, x64 = sk.Vector(a), sk.Vector(a.astype(np.float64))
    zero, minus_zero, third, nan = float("0.0"), float("-0.0"), float("0.1"), float("nan")
    for _ in range(2):
        for c in (zero, minus_zero, zero, third, nan):
            for x, h in ((x32, a), (x64, a.astype(np.float64)), (x32, a)):
                want = c * h                     # a signed zero shows
                got = (c * x).to_numpy()
                if c != c:                       # a NaN's payload is the device's (NVIDIA:
                    assert got.dtype == want.dtype and np.isnan(got).all()  # 0x7fffffff)
                    continue
                assert got.dtype == want.dtype and _bits(got) == _bits(want), (c, h.dtype)


def test_reflected_operators_on_the_repeat_path(rng):
    """``2.0 - x`` and the other reflected operators (a float first) equal NumPy's, also
    once their signature is known (the second round)."""
    a = rng.uniform(0.5, 4.0, 13).astype(np.float32)
    x = sk.Vector(a)
    two = np.float32(2.0)
    cases = [(lambda v: 2.0 - v, lambda h: two - h), (lambda v: 2.0 / v, lambda h: two / h),
             (lambda v: 2.0 // v, lambda h: two // h), (lambda v: 2.0 % v, lambda h: two % h),
             (lambda v: 2.0 < v, lambda h: two < h),            # noqa: SIM300 - v.__gt__
             (lambda v: 2.0 >= v, lambda h: two >= h)]          # noqa: SIM300
    for _ in range(2):
        for mine, numpy_s in cases:
            want = numpy_s(a)
            got = mine(x).to_numpy()
            assert got.dtype == want.dtype
            assert _bits(got) == _bits(want)


def test_a_container_subclass_is_a_container_on_the_repeat_path(rng):
    """A subclass of Vector has the signature of a Vector of its dtype and shape: once that
    signature is known, it is still read as a container (not taken for a scalar)."""

    class Mine(sk.Vector):
        __slots__ = ()

    a, b = (rng.standard_normal(6).astype(np.float32) for _ in range(2))
    x, m = sk.Vector(a), Mine(b)
    for _ in range(2):
        np.testing.assert_array_equal((x + x).to_numpy(), a + a)
        np.testing.assert_array_equal((x + m).to_numpy(), a + b)
        np.testing.assert_array_equal((m + x).to_numpy(), b + a)
