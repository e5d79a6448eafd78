"""Misuse and failures under MPI, each a regression of a bug found by a bug hunt: ranks that
do different things at a collective point must all raise the same error naming what each
rank does (never hang, never exchange mismatched messages), and then go on together; a
failure on one rank after a status collective must not leave its peers waiting for its
messages; a rank's sends must keep the order in which its peers post their receives.

Run by tests/mpi/run.py (``make test-mpi``: ``mpiexec -n 2`` and ``-n 3``) after
mpi_cases.py; not collected by the normal test run (the file name does not start with test_).
"""

from __future__ import annotations

import faulthandler
from contextlib import contextmanager

import numpy as np
import pytest
from mpi4py import MPI

import skelpy as sk
from skelpy import runtime
from skelpy.containers.distributions import split

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.rank, COMM.size
SPEC = "mpi:cpu"
LAST = SIZE - 1

pytestmark = pytest.mark.skipif(SIZE == 1, reason="ranks that disagree need two ranks")


@pytest.fixture(autouse=True)
def mpi_group():
    sk.use(SPEC)
    yield
    sk.use(SPEC)


def data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def heat(nb):
    return nb[0, 0] + 0.1 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


def heat_numpy(a, steps):
    u = a.astype(np.float64)
    for _ in range(steps):
        p = np.pad(u, 1, mode="edge")
        u = u + 0.1 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u)
    return u


ADD = sk.Reduce(lambda a, b: a + b, identity=0)
DOUBLE = sk.Map(lambda x: 2 * x)
STEP = sk.Stencil(heat, shape=1, border="nearest")


def raised_everywhere(exc_type, fn, *words):
    """``fn()`` raises ``exc_type`` on every rank, with one message naming ``words``."""
    with pytest.raises(exc_type) as info:
        fn()
    messages = COMM.allgather(str(info.value))
    assert len(set(messages)) == 1, messages
    for w in words:
        assert w in messages[0], messages[0]
    return messages[0]


def still_together():
    """The ranks go on together after an error: a gather and a reduction agree."""
    a = data((11, 3), seed=1)
    m = sk.Matrix(a)
    np.testing.assert_array_equal(DOUBLE(m).to_numpy(), 2 * a)
    assert ADD(sk.Vector(np.arange(7, dtype=np.int32))) == 21


# -- ranks doing different things meet at a status collective --------------------------------


def test_different_skeletons_on_the_ranks_raise_on_every_rank_instead_of_hanging():
    # was: the Map's closing collective met the Reduce's gather (both "an exchange"), then
    # the Map's rank gathered its result while the others had returned: a hang
    v = sk.Vector(data((13,)))

    def call():
        if RANK == 0:
            DOUBLE(v).to_numpy()
        else:
            ADD(v)

    message = raised_everywhere(sk.errors.CollectiveError, call, "rank 0: Map(", "rank 1: Reduce(",
                                "different points")
    assert "hunt_cases.py" in message            # the muscles' lines
    still_together()


def test_a_stencil_with_other_iterations_on_one_rank_raises_on_every_rank():
    # was: the ranks agreed on k and ran their rounds until one closed its call while the
    # other started another round's exchange: a hang in the halo messages
    a = data((17, 5), seed=2)
    m = sk.Matrix(a)
    raised_everywhere(sk.errors.CollectiveError,
                      lambda: STEP(m, iterations=4 + (RANK == LAST), params={"k": 1}),
                      "arguments or the rows they exchange differ", "Stencil(",
                      "Matrix[17, 5] float32, 4)", "Matrix[17, 5] float32, 5)")
    # a forced halo depth that differs: the rows the ranks exchange differ
    raised_everywhere(sk.errors.CollectiveError,
                      lambda: STEP(m, iterations=4, params={"k": 1 + RANK % 2, "t": 1}),
                      "the rows they exchange differ", "exchanging rows (")
    np.testing.assert_allclose(STEP(m, iterations=4, params={"k": 1}).to_numpy(),
                               heat_numpy(a, 4), rtol=1e-5, atol=1e-6)
    still_together()


def test_a_container_built_on_one_rank_only_raises_on_every_rank():
    # was: rank 0's construction met the others' Map and then exchanged mismatched messages:
    # an IndexError (or a hang), never a SkelpyError
    w = sk.Vector(data((5,), seed=3))

    def call():
        if RANK == 0:
            sk.Vector(np.arange(4, dtype=np.float32))
        DOUBLE(w).to_numpy()

    raised_everywhere(sk.errors.CollectiveError, call, "Vector(...) (construction)",
                      "Map(")
    still_together()


def test_a_skeleton_on_arrays_of_other_shapes_per_rank_raises_on_every_rank():
    # no rank fails alone (each array is fine), but each rank's block would be of another
    # split: the results of the ranks would not fit together
    a = np.arange(6 + RANK, dtype=np.float32)
    raised_everywhere(sk.errors.CollectiveError, lambda: DOUBLE(a).to_numpy(),
                      "ndarray[6] float32", "ndarray[7] float32")
    still_together()


def test_ranks_asking_for_different_distributions_raise_on_every_rank():
    # was: accepted; with data on rank 0 only, each rank laid out the parts of its own
    # distribution, so the scattered rows landed in the wrong places (or were lost)
    a = data((7, 3), seed=4)
    dist = "block" if RANK == 0 else "copy"
    raised_everywhere(sk.errors.CollectiveError,
                      lambda: sk.Matrix(a if RANK == 0 else None, shape=(7, 3), dtype=np.float32,
                                        distribution=dist),
                      "disagree on the distribution", "rank 0: shape (7, 3)")
    raised_everywhere(sk.errors.CollectiveError, lambda: sk.Matrix(a, distribution=dist),
                      "disagree on the distribution")
    raised_everywhere(sk.errors.CollectiveError,
                      lambda: sk.Matrix.from_local(a[RANK:RANK + 1], distribution=dist),
                      "disagree on the distribution")
    # a rank that names none takes the one the others name
    m = sk.Matrix(a if RANK == 0 else None, shape=(7, 3), dtype=np.float32,
                  distribution="copy" if RANK == 0 else None)
    assert m.distribution == "copy"
    np.testing.assert_array_equal(m.local_numpy(), a)
    m = sk.Matrix(a, distribution=None if RANK == 0 else sk.Overlap(1))
    assert m.distribution == sk.Overlap(1)
    m = sk.Matrix.from_local(a[RANK:RANK + 1], distribution="copy" if RANK == LAST else None)
    assert m.distribution == "copy"
    np.testing.assert_array_equal(m.local_numpy(), a[:SIZE])
    m = sk.Matrix(a)
    raised_everywhere(sk.errors.CollectiveError, lambda: m.redistribute(dist), "redistribute")
    m.redistribute("copy")
    np.testing.assert_array_equal(m.local_numpy(), a)
    still_together()


def scaled(nb, s):
    return nb[0, 0] * s + 0.25 * (nb[-1, 0] + nb[1, 0])


def triple(x):
    return 3 * x


def times(x, s):
    return x * s


def test_a_stencil_with_another_border_or_cval_on_one_rank_raises_on_every_rank():
    # was: accepted: each rank applied its own border rule at the grid's edge rows it holds
    # (the first rank the top's, the last the bottom's): a result no single rule gives
    a = data((13, 4), seed=8)
    m = sk.Matrix(a)
    other = sk.Stencil(heat, shape=1, border="reflect" if RANK == LAST else "nearest")
    raised_everywhere(sk.errors.CollectiveError,
                      lambda: other(m, iterations=2, params={"k": 1}).to_numpy(),
                      "border='nearest'", "border='reflect'", "rank 0: Stencil(")
    const = sk.Stencil(heat, shape=1, border="constant", cval=1.0 if RANK == LAST else 0.0)
    raised_everywhere(sk.errors.CollectiveError, lambda: const(m).to_numpy(),
                      "cval=0.0", "cval=1.0")
    # another declared reach: another halo (the rows exchanged would differ too)
    wide = sk.Stencil(heat, shape=2 if RANK == LAST else 1, border="nearest")
    raised_everywhere(sk.errors.CollectiveError, lambda: wide(m, iterations=2).to_numpy(),
                      "Stencil(")
    # a cval that no border reads is no difference
    unread = sk.Stencil(heat, shape=1, border="nearest", cval=float(RANK))
    np.testing.assert_allclose(unread(m, iterations=2, params={"k": 1}).to_numpy(),
                               heat_numpy(a, 2), rtol=1e-5, atol=1e-6)
    still_together()


def test_numbers_among_the_extras_that_differ_by_rank_raise_on_every_rank():
    # was: accepted: a stencil's halo rows are computed for k - 1 steps by both neighbours,
    # each with its own number, so the result depended on the tuned halo depth k
    a = data((3 * SIZE + 4, 5), seed=9)
    m = sk.Matrix(a)
    step = sk.Stencil(scaled, shape=1, border="nearest")
    raised_everywhere(sk.errors.CollectiveError,
                      lambda: step(m, 0.5 + (RANK == LAST), iterations=3).to_numpy(),
                      "0.5", "1.5", "arguments")
    out = step(m, np.float32(0.5), iterations=1).to_numpy()      # the same number: fine
    p = np.pad(a, ((1, 1), (0, 0)), mode="edge")
    np.testing.assert_allclose(out, a * 0.5 + 0.25 * (p[:-2] + p[2:]), rtol=1e-6)
    v = sk.Vector(data((11,), seed=10))
    raised_everywhere(sk.errors.CollectiveError,
                      lambda: sk.Map(times)(v, 2.0 if RANK == 0 else 3.0).to_numpy(),
                      "Map(", "2.0", "3.0")
    still_together()


def test_other_muscles_or_settings_of_one_skeleton_kind_raise_on_every_rank():
    # was: the digest named the skeleton's class only: a Map of another muscle on one rank,
    # another out_dtype or another Reduce identity, ran and mixed the ranks' results
    v = sk.Vector(data((9,), seed=11))
    raised_everywhere(sk.errors.CollectiveError,
                      lambda: (DOUBLE if RANK == 0 else sk.Map(triple))(v).to_numpy(),
                      "different points", "(triple)")
    wider = sk.Map(triple, out_dtype=np.float64 if RANK == LAST else None)
    raised_everywhere(sk.errors.CollectiveError, lambda: wider(v).to_numpy(),
                      "out_dtype=float64")
    add = sk.Reduce(lambda a, b: a + b, identity=1 if RANK == LAST else 0)
    raised_everywhere(sk.errors.CollectiveError, lambda: add(v), "identity=0", "identity=1")
    still_together()


@contextmanager
def watchdog(seconds: float = 20):
    """A hang inside ends this rank with its traceback (mpiexec then ends the others): the
    test fails instead of stalling the run."""
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def test_local_numpy_of_a_pending_value_on_one_rank_needs_no_other_rank():
    # was: the pending value was computed by a collective call on the one rank that asked,
    # which then waited forever for the others
    rows = 4 * SIZE + 3
    a, b = data((rows, 5), seed=12), data((rows, 5), seed=13)
    x = DOUBLE(sk.Matrix(a))                  # block parts on every rank
    y = sk.Matrix(b)                          # every rank's host copy
    e = x * 3 + y                             # elementwise: each rank has what its rows read
    w = np.abs(sk.Vector(np.arange(rows, dtype=np.int32)) - 7)
    shifted = x[1:] - x[:-1]                  # views (making them read x to every rank)
    spread = DOUBLE(sk.Vector(data((5,), seed=14)))      # a Vector in blocks over the ranks
    with sk.lazy():
        deferred = sk.Map(triple)(x)          # a deferred call: pending too
    lo, hi = split(rows, SIZE)[RANK]
    mine = mine_w = mine_s = mine_d = None
    with watchdog():
        if RANK == 0:
            mine = e.local_numpy()
            mine_d = deferred.local_numpy()
            with pytest.raises(sk.errors.CollectiveError) as info:
                (y + spread).local_numpy()    # each row reads the whole Vector: other ranks'
            message = str(info.value)
            assert "local_numpy()" in message and "other ranks" in message, message
            assert "hunt_cases.py" in message                 # the line that asked
        if RANK == LAST:
            mine_w = w.local_numpy()
            mine_s = shifted.local_numpy()
    assert e.is_pending and w.is_pending      # nothing was kept on one rank only
    whole = e.to_numpy()
    np.testing.assert_allclose(whole, 2 * a * 3 + b, rtol=1e-6)
    if RANK == 0:
        np.testing.assert_array_equal(mine, whole[lo:hi])       # the same kernel's bits
        assert mine.shape == (hi - lo, 5) and not mine.flags.writeable
        np.testing.assert_array_equal(mine_d, deferred.to_numpy()[lo:hi])
    else:
        deferred.to_numpy()
    if RANK == LAST:
        np.testing.assert_array_equal(mine_w, np.abs(np.arange(rows) - 7)[lo:hi])
        slo, shi = split(rows - 1, SIZE)[RANK]
        np.testing.assert_array_equal(mine_s, (2 * a[1:] - 2 * a[:-1])[slo:shi])
    np.testing.assert_array_equal(e.local_numpy(), whole[lo:hi])  # every rank: the same
    np.testing.assert_array_equal((y + spread).to_numpy(), b + spread.to_numpy())
    still_together()


# -- a read of a distributed container made on one rank only --------------------------------


READS_ARE_COLLECTIVE = "reads of distributed containers (to_numpy(), x[i], x[a:b], m[r, c]...) " \
    "are collective: every rank must make them"


def test_a_read_on_one_rank_raises_on_every_rank_when_the_others_go_on():
    # was: rank 0's gather waited forever for ranks gone on to another call, or met another
    # read of the same layout and took that container's rows (v[7] gave w[7], silently)
    rows = 3 * SIZE + 2
    a, b = data((rows, 5), seed=15), data((13,), seed=16)
    m = DOUBLE(sk.Matrix(a))                  # rows in blocks over the ranks: reads gather
    v = DOUBLE(sk.Vector(b))
    w = DOUBLE(v)

    def view_or_call():
        if RANK == 0:
            m[1:].to_numpy()
        else:
            ADD(v)

    def elements():
        return v[7] if RANK == 0 else w[7]

    def cell_or_whole():
        return m[2, 3] if RANK == LAST else m.to_numpy()

    with watchdog():
        message = raised_everywhere(sk.errors.CollectiveError, view_or_call,
                                    READS_ARE_COLLECTIVE, "rank 0: a read of a distributed "
                                    f"container of shape [{rows}, 5] at ", "rank 1: Reduce(")
        line = view_or_call.__code__.co_firstlineno + 2          # the user's line of the read
        assert f"hunt_cases.py:{line} (read)" in message, message
        raised_everywhere(sk.errors.CollectiveError, elements, READS_ARE_COLLECTIVE,
                          "read different containers", "shape [13]")
        # another part of the same container: one gather of it on every rank, right on each
        got = cell_or_whole()
        np.testing.assert_array_equal(got, 2 * a[2, 3] if RANK == LAST else 2 * a)
    # the same reads on every rank: collective, and right
    np.testing.assert_array_equal(m[1:].to_numpy(), 2 * a[1:])
    assert w[7] == 4 * b[7] and v[-1] == 2 * b[-1]
    assert DOUBLE(m)[rows - 1, 4] == 4 * a[rows - 1, 4]
    np.testing.assert_array_equal(m.to_numpy(), 2 * a)
    still_together()


def test_a_read_on_one_rank_raises_when_the_other_ranks_finish_the_program(capfd):
    # was: rank 0 waited forever in its gather for ranks that had ended (in MPI_Finalize).
    # Here the other ranks call the exit hook themselves (the atexit one does the same;
    # tests/mpi/run.py ends with the real thing), then all forget it and go on.
    ex = runtime.current().group.exchange
    b = data((11,), seed=17)
    v = DOUBLE(sk.Vector(b))
    with watchdog():
        if RANK == 0:
            with pytest.raises(sk.errors.CollectiveError) as info:
                v[3]
            message = str(info.value)
            for words in (READS_ARE_COLLECTIVE, "rank 1 has finished the program",
                          "rank 0 still waits for it in a read of a distributed container "
                          "of shape [11] at ", "hunt_cases.py:"):
                assert words in message, message
            with pytest.raises(sk.errors.CollectiveError, match="which have finished"):
                ADD(v)                        # no rank is there: raised at once
        else:
            ex.program_finished()
            assert "rank 0 still waits for it in a read" in capfd.readouterr().err
    assert ex._gone == list(range(1, SIZE))       # (every rank knows who has ended)
    ex._gone = []                             # (only a test goes on after the hook)
    # every rank ending together: one status collective, nothing said
    ex.program_finished()
    assert capfd.readouterr().err == "" and not ex._gone
    assert v[3] == 2 * b[3]
    still_together()


# -- a failure on one rank in the middle of an exchange ------------------------------------


def test_a_failure_after_the_status_collective_of_a_halo_exchange_leaves_no_rank_waiting(
        monkeypatch):
    # was: the last rank failed enqueueing its uploads after it had posted its receives but
    # before its sends were queued: its neighbours waited for its rows forever (and their
    # progress thread with them, so that every later exchange hung too)
    from skelpy.mpi import exchange as mpi_exchange

    a = data((23, 6), seed=5)
    m = sk.Matrix(a)
    copy = mpi_exchange.cl.enqueue_copy
    uploads = []

    def failing(*args, **kwargs):
        if any(isinstance(e, mpi_exchange.cl.UserEvent) for e in kwargs.get("wait_for") or ()):
            uploads.append(1)                  # an upload of received rows
            if RANK == LAST and len(uploads) > 1:
                raise sk.DeviceError(f"rank {RANK}: the upload failed")
        return copy(*args, **kwargs)

    for route in ("copy", "queue"):
        uploads.clear()
        monkeypatch.setattr(mpi_exchange.cl, "enqueue_copy", failing)
        raised_everywhere(sk.DeviceError,
                          lambda: STEP(m, iterations=6, params={"k": 1, "t": 1,
                                                                "route": route}).to_numpy(),
                          f"rank {LAST}: the upload failed")
        monkeypatch.undo()
        out = STEP(m, iterations=6, params={"k": 1, "t": 1, "route": route})
        np.testing.assert_allclose(out.to_numpy(), heat_numpy(a, 6), rtol=1e-5, atol=1e-6)
    runtime.current().group.exchange.finish()       # no message is left waiting
    still_together()


# -- message order ---------------------------------------------------------------------------


def test_a_scatter_right_after_a_stencil_does_not_take_its_halo_rows(monkeypatch):
    # was: the scatter sent its rows from the main thread at once, while the stencil's last
    # halo rows (the same tag, to the same rank) still waited on the progress thread for
    # their download: the receiving rank took the scatter's rows as halo rows (an MPI
    # truncation error, or wrong halo rows), and the halo rows as the scatter's. A slow
    # device is simulated: the progress thread's waits for downloads take 0.2 s longer.
    import threading
    import time

    from skelpy.mpi import exchange as mpi_exchange

    wait = mpi_exchange.cl.wait_for_events

    def slow(events):
        if threading.current_thread().name.startswith("skelpy-mpi"):
            time.sleep(0.2)
        return wait(events)

    a = data((9 * SIZE, 4), seed=6)
    monkeypatch.setattr(mpi_exchange.cl, "wait_for_events", slow)
    out = STEP(sk.Matrix(a), iterations=3, params={"k": 1, "t": 1, "route": "queue"})
    v = sk.Vector(np.arange(2 * SIZE, dtype=np.float32) if RANK == 0 else None,
                  shape=(2 * SIZE,), dtype=np.float32)
    w = sk.Matrix(a if RANK == 0 else None, shape=a.shape, dtype=np.float32,
                  distribution="copy")
    monkeypatch.undo()
    np.testing.assert_array_equal(v.to_numpy(), np.arange(2 * SIZE))
    np.testing.assert_array_equal(w.local_numpy(), a)
    np.testing.assert_allclose(out.to_numpy(), heat_numpy(a, 3), rtol=1e-5, atol=1e-6)


def test_repeated_calls_keep_no_requests_threads_or_staging():
    import threading

    ex = runtime.current().group.exchange
    a = data((5 * SIZE + 2, 4), seed=7)

    def calls():
        m = sk.Matrix(a if RANK == 0 else None, shape=a.shape, dtype=np.float32)
        out = STEP(m, iterations=3, params={"k": 1, "t": 1})
        ADD(sk.Vector(out.to_numpy().ravel()))
        m.redistribute("copy")

    calls()
    ex.finish()
    kept = (len(ex._pool), threading.active_count())
    for _ in range(12):
        calls()
    ex.finish()
    assert (len(ex._pool), threading.active_count()) == kept
    assert not ex._jobs and not ex._pending and not ex._calls and ex.depth == 0
