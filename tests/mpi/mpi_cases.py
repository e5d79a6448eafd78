"""Skeletons under MPI (issue 14), run by ``make test-mpi`` with ``mpiexec -n 1/2/3`` (each
rank one PoCL CPU device; see tests/mpi/run.py). Every result is compared with the same call
on this rank's device alone (bit for bit where that is bitwise: Map, Zip, Stencil, AllPairs,
integer folds) and with NumPy/SciPy, at awkward sizes (0, 1, primes, fewer rows than ranks).

Not collected by the normal test run (the file name does not start with test_)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi
from mpi4py import MPI

import skelpy as sk
from skelpy import runtime
from skelpy.containers import Overlap
from skelpy.containers.distributions import split

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.rank, COMM.size
SPEC = "mpi:cpu"
MODES = ["constant", "nearest", "wrap", "reflect", "mirror"]
SHAPES_2D = [(1, 1), (SIZE - 1 or 1, 5), (13, 5)]
LENGTHS = [0, 1, 13]


@pytest.fixture(autouse=True)
def mpi_group():
    sk.use(SPEC)
    yield
    sk.use(SPEC)


def alone(fn):
    """``fn()`` on this rank's device alone (the reference), then the MPI group again."""
    sk.use(runtime.current().device)
    try:
        return fn()
    finally:
        sk.use(SPEC)


def data(shape, dtype=np.float32, seed=0):
    """The same data on every rank."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# -- group and containers ----------------------------------------------------------------------


def test_every_rank_drives_one_device_and_sees_the_group():
    devs = sk.current_devices()
    assert len(devs) == SIZE
    assert devs[RANK] == runtime.current().device
    group = runtime.current().group
    assert group.runtimes[RANK] is runtime.current()
    assert all(group.runtimes[r] is None for r in range(SIZE) if r != RANK)
    assert all(d.kind == "cpu" for d in devs)


@pytest.mark.parametrize("shape", [(1,), (13,), (2, 7), (17, 3)])
@pytest.mark.parametrize("dist", ["block", "copy", "single", Overlap(2)])
def test_scatter_from_rank_0_gather_and_local_parts(shape, dist):
    a = data(shape, seed=len(shape))
    cls = sk.Vector if len(shape) == 1 else sk.Matrix
    c = cls(a if RANK == 0 else None, shape=shape, dtype=np.float32, distribution=dist)
    assert c.distribution == dist
    lo, hi = split(shape[0], SIZE)[RANK] if dist in ("block", Overlap(2)) \
        else ((0, shape[0]) if dist == "copy" or RANK == 0 else (shape[0], shape[0]))
    np.testing.assert_array_equal(c.local_numpy(), a[lo:hi])
    np.testing.assert_array_equal(c.to_numpy(), a)
    for other in ["copy", "block", Overlap(1), "single", dist]:
        c.redistribute(other)
        np.testing.assert_array_equal(np.asarray(c), a)


def test_every_rank_passing_the_array_keeps_it_and_uploads_its_rows():
    a = data((11, 4))
    m = sk.Matrix(a)
    lo, hi = split(11, SIZE)[RANK]
    np.testing.assert_array_equal(m.local_numpy(), a[lo:hi])
    np.testing.assert_array_equal(sk.Map(lambda x: x + 1)(m).to_numpy(), a + 1)


@pytest.mark.parametrize("counts", [lambda r: r + 1, lambda r: 2 if r == 0 else 0,
                                    lambda r: 3 * (SIZE - r), lambda r: 0])
def test_from_local_builds_from_every_ranks_rows(counts):
    rows = [counts(r) for r in range(SIZE)]
    start = sum(rows[:RANK])
    mine = (np.arange(rows[RANK] * 3, dtype=np.int32).reshape(-1, 3) + 100 * start)
    m = sk.Matrix.from_local(mine)
    whole = np.concatenate([np.arange(n * 3, dtype=np.int32).reshape(-1, 3)
                            + 100 * sum(rows[:r]) for r, n in enumerate(rows)])
    assert m.shape == whole.shape and m.distribution == "block"
    np.testing.assert_array_equal(m.to_numpy(), whole)
    lo, hi = split(whole.shape[0], SIZE)[RANK]
    np.testing.assert_array_equal(m.local_numpy(), whole[lo:hi])
    np.testing.assert_array_equal(sk.Map(lambda x: 2 * x)(m).to_numpy(), 2 * whole)
    v = sk.Vector.from_local(mine.ravel())
    np.testing.assert_array_equal(v.to_numpy(), whole.ravel())


def test_ranks_that_disagree_on_shapes_all_get_the_same_error():
    with pytest.raises(sk.ShapeError) as info:
        sk.Matrix(np.zeros((3 + (RANK == SIZE - 1) * (SIZE > 1), 2), np.float32))
    messages = COMM.allgather(str(info.value))
    if SIZE > 1:
        assert len(set(messages)) == 1 and "disagree" in messages[0]
    with pytest.raises(sk.ShapeError):
        sk.Matrix.from_local(np.zeros((1, 2 + RANK * (SIZE > 1)), np.float32)) \
            if SIZE > 1 else sk.Matrix.from_local(np.zeros(3, np.float32))


def test_a_failure_on_one_rank_raises_on_every_rank_with_the_same_message():
    x = sk.Vector(data((9,)))
    y = np.ones(9 + (RANK == SIZE - 1), np.float32)      # the last rank passes a wrong length
    saxpy = sk.Zip(lambda a, b: 2 * a + b)
    with pytest.raises(sk.ShapeError) as info:
        saxpy(x, y)
    assert len(set(COMM.allgather(str(info.value)))) == 1
    # nothing is left half-done: the next calls work on every rank
    np.testing.assert_array_equal(saxpy(x, np.ones(9, np.float32)).to_numpy(),
                                  2 * x.to_numpy() + 1)
    assert sk.Reduce(lambda a, b: a + b, identity=0)(sk.Vector(np.arange(5))) == 10


# -- writes through containers (collective) ---------------------------------------------------


def test_the_same_writes_on_every_rank_are_seen_by_the_skeletons():
    a = data((7, 3))
    double = sk.Map(lambda x: x * 2)
    m = double(sk.Matrix(a))                  # parts only: a write gathers first
    m[1, 2] = 5.0
    m[SIZE % 7][0] = -1.0                     # through a MatrixRow
    with m.host_edit() as h:
        h[-1] += 1
    ref = 2 * a
    ref[1, 2], ref[SIZE % 7, 0] = 5.0, -1.0
    ref[-1] += 1
    np.testing.assert_array_equal(double(m).to_numpy(), 2 * ref)
    lo, hi = split(7, SIZE)[RANK]
    np.testing.assert_array_equal(double(m).local_numpy(), 2 * ref[lo:hi])


@pytest.mark.skipif(SIZE == 1, reason="needs two ranks")
@pytest.mark.parametrize("held", ["parts", "host"])
def test_a_write_on_one_rank_only_raises_on_every_rank(held):
    a = data((7, 3))
    double = sk.Map(lambda x: x * 2)
    m = double(sk.Matrix(a)) if held == "parts" else sk.Matrix(2 * a)
    with pytest.raises(sk.errors.CollectiveError) as info:
        if RANK == 0:
            m[5, 1] = 9.0                     # a row another rank owns
        else:
            m.to_numpy()
            double(m)
    messages = COMM.allgather(str(info.value))
    assert len(set(messages)) == 1 and "rank 0 writes Matrix[7, 3][(5, 1)]" in messages[0]
    # the write did not happen anywhere, and the ranks go on together
    np.testing.assert_array_equal(double(m).to_numpy(), 4 * a)
    np.testing.assert_array_equal(m.to_numpy(), 2 * a)


@pytest.mark.skipif(SIZE == 1, reason="needs two ranks")
def test_different_writes_or_edits_raise_on_every_rank():
    a = data((5, 4))
    m = sk.Matrix(a)
    with pytest.raises(sk.errors.CollectiveError) as info:
        m[0, 0] = float(RANK)
    assert len(set(COMM.allgather(str(info.value)))) == 1
    with pytest.raises(sk.errors.CollectiveError), m.host_edit() as h:
        h[RANK % 5] = 3.0
    # local_numpy() is read-only: a write raises at once and changes nothing
    with pytest.raises(ValueError):
        m.local_numpy()[...] = 0
    np.testing.assert_array_equal(m.local_numpy(), m.to_numpy()[slice(*split(5, SIZE)[RANK])])


# -- Map, Zip ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", LENGTHS)
def test_map_zip_vector_equal_one_device_bitwise(n):
    a, b = data((n,), seed=1), data((n,), seed=2)
    f = sk.Zip(lambda x, y, s: s * x * x + y / (1 + x * x))
    out = f(sk.Vector(a), sk.Vector(b), 0.5)
    ref = alone(lambda: f(sk.Vector(a), sk.Vector(b), 0.5).to_numpy())
    np.testing.assert_array_equal(out.to_numpy(), ref)
    np.testing.assert_allclose(ref, 0.5 * a * a + b / (1 + a * a), rtol=1e-5)


@pytest.mark.parametrize("shape", SHAPES_2D)
def test_map_matrix_and_index_spaces(shape):
    a = data(shape, np.int32)
    m = sk.Matrix(a)
    np.testing.assert_array_equal(sk.Map(lambda x: x * 3 - 1)(m).to_numpy(), a * 3 - 1)
    idx = sk.Map(lambda i: i * 2, out_dtype=np.int64)(sk.IndexVector(shape[0] * 2))
    np.testing.assert_array_equal(idx.to_numpy(), np.arange(shape[0] * 2) * 2)


# -- Reduce, MapReduce, Scan -----------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 1009])
def test_reduce_and_mapreduce(n):
    a = data((n,), np.int32, seed=3)
    add = sk.Reduce(lambda x, y: x + y, identity=0)
    assert add(sk.Vector(a)) == a.sum()
    mx = sk.Reduce(lambda x, y: max(x, y), identity=-(2 ** 31))
    assert mx(sk.Vector(a)) == (a.max() if n else -(2 ** 31))
    f = data((n,), np.float32, seed=4)
    total = sk.Reduce(lambda x, y: x + y, identity=0)(sk.Vector(f))
    assert total == alone(lambda: sk.Reduce(lambda x, y: x + y, identity=0)(sk.Vector(f))) \
        or SIZE > 1
    np.testing.assert_allclose(total, f.sum(dtype=np.float64), rtol=1e-5, atol=1e-5)
    assert len(set(COMM.allgather(float(total)))) == 1      # one value on every rank
    dot = sk.MapReduce(lambda x, y: x * y, lambda x, y: x + y, identity=0)
    np.testing.assert_allclose(dot(sk.Vector(f), sk.Vector(f)), np.dot(f, f), rtol=1e-4)


class _Counting:
    """A communicator that records the collectives called on it."""

    def __init__(self, comm):
        self.comm, self.calls = comm, []

    def __getattr__(self, name):
        attr = getattr(self.comm, name)
        if not callable(attr):
            return attr

        def counted(*args, **kwargs):
            self.calls.append(name)
            return attr(*args, **kwargs)
        return counted


def test_a_sum_costs_one_collective_per_call_any_other_fold_two():
    """Reduce/MapReduce of a sum: one Allgather (the status of every rank and its partial,
    folded on every host; it also closes the call). A max folds on rank 0's device and
    shares the value in a second; Scan's second closes the call (its kernels follow)."""
    ex = runtime.current().group.exchange
    f = data((1009,), np.float32, seed=8)
    x = sk.Vector(f)
    add = lambda a, b: a + b  # noqa: E731
    calls = {"sum": (1, sk.Reduce(add, identity=0), lambda r: r(x)),
             "dot": (1, sk.MapReduce(lambda a, b: a * b, add, identity=0), lambda r: r(x, x)),
             "max": (2, sk.Reduce(lambda a, b: max(a, b), identity=-np.inf), lambda r: r(x)),
             "scan": (2, sk.Scan(add, identity=0, inclusive=True), lambda r: r(x))}
    for name, (expected, skel, call) in calls.items():
        first = call(skel)                 # built and tuned
        counting = _Counting(ex.comm)
        ex.comm = counting
        try:
            again = call(skel)
        finally:
            ex.comm = counting.comm
        assert counting.calls == ["Allgather"] * expected, (name, counting.calls)
        if name == "scan":
            np.testing.assert_array_equal(again.to_numpy(), first.to_numpy())
            np.testing.assert_allclose(again.to_numpy(), np.cumsum(f, dtype=np.float64),
                                       rtol=1e-4, atol=1e-4)
        else:
            assert again.tobytes() == first.tobytes()
            assert len(set(COMM.allgather(again.tobytes()))) == 1
    assert calls["max"][1](x) == f.max()
    np.testing.assert_allclose(calls["dot"][1](x, x), np.dot(f, f), rtol=1e-4)


def test_a_failure_inside_a_reduction_on_one_rank_raises_on_every_rank():
    x = sk.Vector(data((9,)))
    y = np.ones(9 + (RANK == SIZE - 1), np.float32)      # the last rank passes a wrong length
    dot = sk.MapReduce(lambda a, b: a * b, lambda a, b: a + b, identity=0, inputs=2)
    with pytest.raises(sk.ShapeError) as info:
        dot(x, y)
    assert len(set(COMM.allgather(str(info.value)))) == 1
    assert dot(x, np.ones(9, np.float32)) == pytest.approx(float(x.to_numpy().sum()), rel=1e-5)
    # a failure in the last rank's own fold, after every input is in place: the others meet
    # it in the collective that gathers the partials
    add = sk.Reduce(lambda a, b: a + b, identity=0)

    def broken(*_args, **_kwargs):
        raise sk.DeviceError(f"rank {RANK}'s device failed")

    add.reduce_on = broken if RANK == SIZE - 1 else add.reduce_on
    with pytest.raises(sk.DeviceError) as info:
        add(x)
    assert set(COMM.allgather(str(info.value))) == {f"rank {SIZE - 1}'s device failed"}
    del add.__dict__["reduce_on"]
    assert add(x) == pytest.approx(float(x.to_numpy().sum()), rel=1e-5)


@pytest.mark.parametrize("shape", SHAPES_2D + [(0, 3)])
def test_reduce_axes(shape):
    a = data(shape, np.int64, seed=5)
    m = sk.Matrix(a)
    for axis in (0, 1):
        out = sk.Reduce(lambda x, y: x + y, identity=0, axis=axis)(m)
        np.testing.assert_array_equal(out.to_numpy(), a.sum(axis=axis))


@pytest.mark.parametrize("n", [0, 1, 997])
@pytest.mark.parametrize("inclusive", [False, True])
def test_scan(n, inclusive):
    a = data((n,), np.int32, seed=6)
    out = sk.Scan(lambda x, y: x + y, identity=0, inclusive=inclusive)(sk.Vector(a))
    ref = np.cumsum(a, dtype=out.dtype)
    if not inclusive:
        ref = np.concatenate([[0], ref[:-1]]).astype(out.dtype) if n else ref
    np.testing.assert_array_equal(out.to_numpy(), ref)
    f = data((n,), np.float32, seed=7)
    fs = sk.Scan(lambda x, y: x + y, identity=0, inclusive=True)(sk.Vector(f)).to_numpy()
    np.testing.assert_allclose(fs, np.cumsum(f, dtype=np.float64), rtol=1e-4, atol=1e-4)


# -- AllPairs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n,m,d", [(1, 1, 1), (SIZE - 1 or 1, 5, 3), (13, 7, 11), (0, 3, 2)])
def test_allpairs_matmul_and_distances(n, m, d):
    a, b = data((n, d), seed=8), data((m, d), seed=9)
    mm = sk.AllPairs(zip=lambda x, y: x * y, reduce=lambda x, y: x + y)
    out = mm(sk.Matrix(a), sk.Matrix(b))
    ref = alone(lambda: mm(sk.Matrix(a), sk.Matrix(b)).to_numpy())
    np.testing.assert_array_equal(out.to_numpy(), ref)
    np.testing.assert_allclose(ref, a @ b.T, rtol=1e-4, atol=1e-5)


# -- Stencil ---------------------------------------------------------------------------------------


def heat(nb):
    return nb[0, 0] + 0.1 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


def gauss5(nb):
    s = 0.0
    for i in range(-2, 3):
        for j in range(-2, 3):
            s += nb[i, j]
    return s / 25


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(1, 1), (SIZE, 4), (17, 3)])
def test_stencil_iterations_all_modes(mode, shape):
    a = data(shape, seed=10)
    step = sk.Stencil(heat, shape=1, border=mode, cval=0.5)
    for iterations in (1, 4):
        out = step(sk.Matrix(a), iterations=iterations).to_numpy()
        ref = alone(lambda: step(sk.Matrix(a), iterations=iterations).to_numpy())
        np.testing.assert_array_equal(out, ref)
    ref = a.astype(np.float64)
    kern = np.array([[0, .1, 0], [.1, .6, .1], [0, .1, 0]])
    for _ in range(4):
        ref = ndi.correlate(ref, kern, mode=mode, cval=0.5)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("mode", ["wrap", "reflect", "constant"])
def test_stencil_k_deep_halos_reach_2(k, mode):
    a = data((23, 6), seed=11)
    step = sk.Stencil(gauss5, border=mode)
    rows_per_rank = 23 // SIZE
    if k > 1 and 2 * k > rows_per_rank and mode == "reflect":
        pytest.skip("parts too small for k > 1 with a copied border")
    out = step(sk.Matrix(a), iterations=6, params={"k": k, "t": 1})
    assert out.__class__ is sk.Matrix and step.last_launch.k == k
    ref = alone(lambda: step(sk.Matrix(a), iterations=6, params={"t": 1}).to_numpy())
    np.testing.assert_array_equal(out.to_numpy(), ref)
    r = a.astype(np.float64)
    for _ in range(6):
        r = ndi.uniform_filter(r, 5, mode=mode)
    np.testing.assert_allclose(out.to_numpy(), r, rtol=1e-4, atol=1e-5)


def test_stencil_tuned_temporal_path_and_sequence():
    a = data((29, 8), seed=12)
    step = sk.Stencil(heat, shape=1, border="nearest")
    out = step(sk.Matrix(a), iterations=9, params={"t": 3})     # passes of 3 steps per rank
    ks = COMM.allgather(step.last_launch.k)
    assert len(set(ks)) == 1                          # every rank took the same halo depth
    np.testing.assert_array_equal(out.to_numpy(),
                                  alone(lambda: step(sk.Matrix(a), iterations=9,
                                                     params={"t": 3}).to_numpy()))
    blur = sk.Stencil(gauss5, border="mirror")
    seq = blur >> step
    got = seq(sk.Matrix(a)).to_numpy()
    ref = alone(lambda: seq(sk.Matrix(a)).to_numpy())
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("route", ["queue", "copy"])
@pytest.mark.parametrize("mode", ["wrap", "nearest"])
def test_stencil_passes_both_exchange_routes(route, mode):
    # "copy" is the GPUs' default route (copy queue, progress thread, uploads behind a user
    # event), "queue" the CPUs'; both with passes of t steps and a k-deep halo
    a = data((31, 9), seed=13)
    step = sk.Stencil(heat, shape=1, border=mode)
    out = step(sk.Matrix(a), iterations=10, params={"t": 2, "k": 4, "route": route})
    ref = alone(lambda: step(sk.Matrix(a), iterations=10, params={"t": 1}).to_numpy())
    np.testing.assert_array_equal(out.to_numpy(), ref)
    u = a.astype(np.float64)                  # NumPy, independently
    for _ in range(10):
        p = np.pad(u, 1, mode="wrap" if mode == "wrap" else "edge")
        u = u + 0.1 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u)
    np.testing.assert_allclose(out.to_numpy(), u, rtol=1e-4, atol=1e-5)


def test_a_steady_state_round_never_waits_for_a_device():
    """Per round of k steps a rank enqueues its passes and the copies of the edges it sends and
    receives, meets the other ranks in one status collective (none alone) and never waits on
    its main thread for a device: the progress thread waits for the downloads and the
    messages (issue 14: the host's share of a round, counted rather than timed)."""
    import sys
    from collections import Counter
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.host_rounds import ApiCounter

    a = data((11 * SIZE + 4, 9), seed=14)
    step = sk.Stencil(heat, shape=1, border="nearest")
    params, n, k = {"t": 2, "k": 4, "route": "copy"}, 8, 4
    m = sk.Matrix(a)
    ex = runtime.current().group.exchange

    def finish():
        runtime.current().finish()
        ex.finish()

    out = None
    for _ in range(2):                       # builds, kernel copies, pinned staging
        for it in (n, 2 * n):
            out = step(m, iterations=it, params=params)
            finish()
    counter, calls = ApiCounter(), {}
    with counter.installed():
        for it in (n, 2 * n):
            counter.reset()
            before = ex.collectives
            out = step(m, iterations=it, params=params)
            calls[it] = Counter(counter.calls)
            calls[it]["collectives"] = ex.collectives - before
            finish()
    rounds = 2 * n // k - n // k
    extra = Counter(calls[2 * n])
    extra.subtract(calls[n])
    edges = 0 if SIZE == 1 else (1 if RANK in (0, SIZE - 1) else 2)   # sent = received
    for it in (n, 2 * n):
        waits = ("CommandQueue.finish", "Event.wait", "wait_for_events", "blocking enqueue_copy")
        assert sum(calls[it][w] for w in waits) == 0, calls[it]
        assert calls[it]["Kernel()"] == calls[it]["CommandQueue()"] == 0, calls[it]
        assert calls[it]["Kernel.set_arg"] + calls[it]["Kernel._set_arg_buf"] == 0, calls[it]
        # a round's collective, and the call's: the agreed t and its close
        exchanges = -(-it // k) - 1 if SIZE > 1 else 0
        assert calls[it]["collectives"] == exchanges + 2, calls[it]
    assert extra["enqueue_nd_range_kernel"] == (k // 2 + edges) * rounds, extra
    assert extra["enqueue_copy"] == 2 * edges * rounds, extra
    ref = alone(lambda: step(sk.Matrix(a), iterations=2 * n, params={"t": 2}).to_numpy())
    np.testing.assert_array_equal(out.to_numpy(), ref)
