"""The exchange interface (:mod:`skelpy.distribution.exchange`) over MPI: each process drives
one rank, and every method is called by every process with the same arguments (collective).

Rows between ranks go device -> pinned host buffer (``CL_MEM_ALLOC_HOST_PTR``, mapped once) ->
MPI -> pinned host buffer -> device: no other copy (MPI reads and writes the pinned memory;
CUDA-aware MPI cannot see OpenCL buffers). A move with ``overlap`` returns at once: the
downloads wait on the device for the kernels that compute the rows, a progress thread sends
them when they are down and waits for the receives, and the uploads wait on an OpenCL user
event that the thread completes, so the interior kernels enqueued after the move run while
the rows travel. Small collectives gather the per-rank values (one ``Allgather``: a value of up
to 16 bytes rides in the status record below, downloaded straight into it, pinned) and fold or
scan them in rank order with the skeleton's own muscle (deterministic): a sum or product on the
host of every rank (the same bytes and code give every rank the same bits), any other muscle
on rank 0's device, its value shared by a second status collective (so that every rank gets the
same value whatever its device). A group's Reduce is then one collective per call, its Scan two
(the second closes the call: a scan kernel may fail on one rank).

Failures: a skeleton call on the group is a :meth:`call`; an exception inside it on one rank
is announced in the status collective that starts every exchange operation (and ends every
call), so every rank raises it, with the same class and message, instead of waiting forever.

Agreement: each status record also says what its rank is doing there (a digest of the call,
its containers' shapes and dtypes and its integer arguments, and of the step: which collective,
over which layout). Ranks that meet in one status collective while doing different things
(another skeleton, other shapes, other ``iterations``, one rank a round further, a container
built on some ranks only) all raise the same :class:`~skelpy.errors.CollectiveError` naming
what each rank does, instead of exchanging mismatched messages (a hang, or garbage). A read
(a gather) names the parts it reads (:meth:`stamp`) and the user's line. A rank whose program
ends says so in one last status collective (:meth:`program_finished`, an exit hook): ranks
still waiting in a collective raise instead of waiting for it forever.
"""

from __future__ import annotations

import atexit
import sys
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress

import numpy as np
import pyopencl as cl

from .. import errors
from ..array.expression import Where
from ..distribution.exchange import Exchange, Moved, Span, keep_until_done, value_buffer
from ..distribution.pinned import Pinned, PinnedPool
from .status import EXCHANGE, FINISHED, READ, STEPS, Call, describe, mismatch, rebuild, token

__all__ = ["MPIExchange"]

STATUS = 4                       # int64 words of a rank's status: failed, op, token, has a value
VALUE_BYTES = 16                 # a small value riding in the same record (accumulators: <= 8)
RECORD = STATUS + VALUE_BYTES // 8
TAGS = 32768                     # MPI promises tags below 32768


CHUNK = 1 << 30                  # bytes per MPI message (MPI counts are C ints)


def chunks(view: np.ndarray):
    """``view`` in messages MPI can count (at most CHUNK bytes each)."""
    for at in range(0, view.nbytes, CHUNK):
        yield view[at:at + CHUNK]


class MPIExchange(Exchange):
    """One rank per process over ``comm``; see the module docstring."""

    MAX_IDLE_BYTES = 256 << 20
    # A round through MPI adds the halo's trip through MPI between the download and the
    # upload: alpha ~130 us and 1/beta ~3.96 GB/s between 2 ranks on one 2 x H200 host
    # (benchmarks.weak_scaling, 2026-11-23); the halo depth rule adds the latency to the
    # round's and the part of the trip an interior pass does not hide (at heat 4096^2 x100
    # the trip of an 88-row halo was exposed: 2.47 ms against the group's 2.24).
    round_latency = 130e-6
    round_bandwidth = 3.96e9

    def __init__(self, group, comm):
        from mpi4py import MPI
        self.MPI = MPI
        self.group = group
        self.comm = comm.Dup()            # collectives (the user's traffic stays apart)
        self.p2p = comm.Dup()             # point-to-point, also from the progress thread
        self.size, self.rank = comm.size, comm.rank
        self.local = (self.rank,)
        self.runtimes = tuple(group.runtimes)
        self.rt = group.runtimes[self.rank]
        prof = cl.command_queue_properties.PROFILING_ENABLE
        self.copy_queue = cl.CommandQueue(self.rt.context, self.rt.device.cl_device,
                                          properties=prof)
        # new pinned buffers are mapped on a queue of their own (a blocking map behind the
        # copy queue's copies would wait for the kernels they wait for)
        self._map_queue = cl.CommandQueue(self.rt.context, self.rt.device.cl_device)
        self._pool = PinnedPool(self.rt.context, self._map_queue, self.MAX_IDLE_BYTES)
        self._pending: deque[tuple[list, tuple]] = deque()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="skelpy-mpi")
        self._jobs: list = []
        self._worker_error: BaseException | None = None
        self.depth = 0                    # nesting of call(): containers built inside are local
        self._record: Pinned | None = None   # this rank's status record, pinned (see check)
        self.collectives = 0              # status collectives so far
        self._closed_at = -1              # the one that closed the current call, if any
        self._calls: list[Call] = []     # the calls this rank is in (nested), innermost last
        self._by_itself: list[str] = []  # the sections of this rank alone (see by_itself)
        self._made = 0                    # parts made since the last status collective (stamp)
        self._gone: list[int] = []        # ranks known to have finished their program
        self.stats = {"moves": 0, "bytes": 0, "messages": 0}
        atexit.register(self.program_finished)

    # -- failures ------------------------------------------------------------------------------
    def check(self, failure: BaseException | None = None, *, op: int = EXCHANGE,
              token: int = 0, what: str = "", has_value: bool = False, step: str = "end",
              detail=None) -> np.ndarray:
        """Collective: every rank says whether it failed and what it is doing (``op``, with a
        ``token``: a digest of a host write; for an exchange the digest of the call this rank
        is in, of the ``step`` (a key of ``STEPS``) and of its ``detail``, the layout of what
        the step then sends). If any failed, every rank but the first that failed raises that
        rank's exception (the first returns, to raise its own). If the ranks are not doing the
        same (a host write on some ranks only, or different ones; different calls, arguments
        or steps), every rank raises the same :class:`~skelpy.errors.CollectiveError`.

        Every rank's record is the same size whatever it does, so a rank that failed can meet
        the others in any status collective. ``has_value``: this rank's small value is in its
        record's value bytes (:meth:`_value_bytes`); returns every rank's record, rank order
        (:meth:`_gathered` reads the values). Ranks that meet ranks whose program has finished
        (``op`` FINISHED) raise (a finished one gets the error returned), and from then on
        raise at once."""
        if self._by_itself:
            self._alone_error(step)
        if self._gone:
            exc = errors.CollectiveError(
                f"{self._doing(step, detail) if op == EXCHANGE else what} on rank "
                f"{self.rank} needs ranks {self._gone}, which have finished the program")
            exc._skelpy_shared = True
            raise exc
        from_worker = failure is None and self._worker_error is not None
        if from_worker:
            failure, self._worker_error = self._worker_error, None
        if op == EXCHANGE:
            token = self._token(step, detail)
        mine = self._mine()
        mine[:STATUS] = (failure is not None, op, token, has_value and failure is None)
        every = np.empty((self.size, RECORD), np.int64)
        self.comm.Allgather(mine, every)
        self.collectives += 1
        self._made = 0
        finished = every[:, 1] == FINISHED
        if finished.any() and not finished.all():     # a rank waits for ranks that ended
            whats = self.comm.allgather(self._doing(step, detail) if op == EXCHANGE else what)
            self._gone = np.flatnonzero(finished).tolist()
            exc = errors.CollectiveError(mismatch(every[:, :3], whats))
            exc._skelpy_shared = True
            if op == FINISHED:
                return exc
            raise exc
        flags = every[:, 0]
        if flags.any():
            first = int(np.flatnonzero(flags)[0])
            info = self.comm.bcast(describe(failure) if self.rank == first else None,
                                   root=first)
            if self.rank != first:
                raise rebuild(info)
            if from_worker:                   # (the caller has no exception of its own)
                failure._skelpy_shared = True
                raise failure
            return every
        if (every[:, 1:3] != every[0, 1:3]).any():
            whats = self.comm.allgather(self._doing(step, detail) if op == EXCHANGE else what)
            exc = errors.CollectiveError(mismatch(every[:, :3], whats))
            exc._skelpy_shared = True
            raise exc
        return every

    def stamp(self) -> tuple[int, int]:
        """Parts are named by the status collective before them and their order since (the
        same on every rank: the ranks make the same parts between the same collectives)."""
        self._made += 1
        return self.collectives, self._made

    def program_finished(self) -> None:
        """The exit hook: tell the other ranks that this one's program has ended. Ranks that
        all end meet here and go (one status collective); a rank still waiting in a
        collective (a read made on it alone) meets this one's record there and raises
        :class:`~skelpy.errors.CollectiveError` instead of waiting forever."""
        if self._gone or self._by_itself or self.MPI.Is_finalized():
            return
        with suppress(Exception):             # (its peers still wait for its record)
            self.finish()
        try:
            exc = self.check(op=FINISHED, what="has finished the program")
        except Exception as failure:  # noqa: BLE001 - a failure of the others: not this rank's
            exc = failure
        if exc is not None and not isinstance(exc, np.ndarray):
            print(f"skelpy (rank {self.rank}, at exit): {exc}", file=sys.stderr, flush=True)

    @contextmanager
    def by_itself(self, what: str):
        """A section that this rank runs without the others (``what``, in words: the
        operation, naming the user's line): containers built in it stay local, and a
        collective reached in it raises :class:`~skelpy.errors.CollectiveError` at once,
        on this rank (no other rank is there to meet it: it would wait forever)."""
        self._by_itself.append(what)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            self._by_itself.pop()

    def _alone_error(self, step: str):
        exc = errors.CollectiveError(
            f"{self._by_itself[-1]} would need the other ranks ({STEPS.get(step, step)}), "
            f"which do not take part: it is made by this rank alone")
        exc._skelpy_shared = True             # (no status collective may announce it)
        raise exc

    def _token(self, step: str, detail) -> int:
        """The digest an exchange's status record carries (:func:`.status.token`) for the
        innermost call this rank is in."""
        return token(self._calls[-1] if self._calls else None, step, detail)

    def _doing(self, step: str, detail=None) -> str:
        """What this rank is doing at a status collective, in words (for a mismatch)."""
        doing = STEPS.get(step, step)
        if step == "move" and detail:
            doing += " (" + ", ".join(f"{a}->{b}: {n} B" for a, b, n in detail[:6]) + \
                (", ..." if len(detail) > 6 else "") + ")"
        called = self._calls[-1].describe() if self._calls else ""
        return f"{called}: {doing}" if called else doing

    def _mine(self) -> np.ndarray:
        """This rank's status record (int64 words), in pinned memory kept for it."""
        if self._record is None:
            self._record = Pinned(self.rt.context, self._map_queue, 4096)
        return self._record.host[:RECORD * 8].view(np.int64)

    def _value_bytes(self, nbytes: int) -> np.ndarray:
        """Where this rank's small value goes in its record (a value is downloaded there)."""
        return self._mine().view(np.uint8)[STATUS * 8:STATUS * 8 + nbytes]

    @staticmethod
    def _gathered(every: np.ndarray, nbytes: int) -> tuple[list[int], np.ndarray]:
        """The ranks whose records carry a value, and those values' bytes back to back."""
        ranks = [r for r in range(every.shape[0]) if every[r, 3]]
        values = every.view(np.uint8).reshape(every.shape[0], -1)[ranks,
                                                                   STATUS * 8:STATUS * 8 + nbytes]
        return ranks, np.ascontiguousarray(values).reshape(-1)

    @contextmanager
    def call(self, label="a collective call", args: tuple = (), where=None):
        self._calls.append(Call(label, tuple(args), where))
        self.depth += 1
        try:
            yield
        except Exception as exc:
            if not getattr(exc, "_skelpy_shared", False):
                exc._skelpy_shared = True
                self.check(exc)
            raise
        else:
            if self.depth == 1 and self._closed_at != self.collectives:
                self.check(step="end")
        finally:
            self.depth -= 1
            self._calls.pop()

    def agree(self, value):
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
                and -(1 << 63) <= int(value) < 1 << 63:
            # an integer (a tuner's t or k) rides in rank 0's status record: one collective
            if self.rank == 0:
                self._value_bytes(8).view(np.int64)[0] = int(value)
            every = self.check(has_value=self.rank == 0, step="agree")
            return int(every[0, STATUS])
        self.check(step="agree", detail="object")
        return self.comm.bcast(value, root=0)

    def allgather_objects(self, value, step: str = "objects") -> list:
        """Every rank's (small, picklable) ``value``, in rank order, on every rank."""
        self.check(step=step)
        return self.comm.allgather(value)

    def _keep(self, events: list, *objects) -> None:
        keep_until_done(self._pending, events, objects)

    # -- moves -------------------------------------------------------------------------------
    def move(self, moves, *, after=None, overlap=False):
        # every process has the same list: one with no message (ghost-row refreshes, copies
        # within each rank) is no collective, and nobody waits for the others
        me, rt = self.rank, self.rt
        wait = (after or {}).get(me) or None
        moved = Moved({}, {})
        sends, recvs, crossing = [], [], False
        for i, m in enumerate(moves):
            if not m.nbytes:
                continue
            crossing = crossing or m.src.rank != m.dst.rank
            if m.src.rank == me and m.dst.rank == me:
                ev = cl.enqueue_copy(rt.queue, m.dst.buffer, m.src.buffer, byte_count=m.nbytes,
                                     src_offset=m.src.offset, dst_offset=m.dst.offset,
                                     wait_for=wait)
                moved.received.setdefault(me, []).append(ev)
            elif m.src.rank == me:
                sends.append((i, m))
            elif m.dst.rank == me:
                recvs.append((i, m))
        if not crossing:
            return moved
        # this rank's side is prepared before the status collective (a failure here reaches
        # the others there); after it, nothing may leave a peer's message unmatched
        staging = queue = None
        downloads, outgoing = [], []
        if sends or recvs:
            arrived = cl.UserEvent(rt.context)
            done = cl.UserEvent(rt.context)
            staging = self._pool.get(sum(m.nbytes for _, m in sends + recvs))
            queue = self.copy_queue if overlap else rt.queue
            at = 0
            for i, m in sends:              # device -> pinned, after the rows are computed
                view = staging.host[at:at + m.nbytes]
                at += m.nbytes
                downloads.append(cl.enqueue_copy(queue, view, m.src.buffer,
                                                 src_offset=m.src.offset, is_blocking=False,
                                                 wait_for=wait))
                outgoing.append((view, m.dst.rank, i % TAGS))
            staging.busy = list(downloads)
            self._keep(downloads, staging, [m.src.buffer for _, m in sends])
        self.check(step="move", detail=self._layout(moves))
        if staging is None:
            return moved
        MPI = self.MPI
        requests, uploads, views = [], [], []
        at = sum(m.nbytes for _, m in sends)
        try:
            for i, m in recvs:              # MPI -> pinned -> device once it has arrived
                view = staging.host[at:at + m.nbytes]
                at += m.nbytes
                views.append(view)
                requests += [self.p2p.Irecv([c, MPI.BYTE], source=m.src.rank, tag=i % TAGS)
                             for c in chunks(view)]
            for (_i, m), view in zip(recvs, views, strict=True):
                uploads.append(cl.enqueue_copy(queue, m.dst.buffer, view,
                                               dst_offset=m.dst.offset, is_blocking=False,
                                               wait_for=[arrived]))
            if downloads:
                moved.sent[me] = list(downloads)
            if uploads:
                moved.received.setdefault(me, []).extend(uploads)
            rt.queue.flush()
            queue.flush()
        finally:
            # even when this rank failed above: its peers passed the status collective and
            # wait for its messages (they learn of the failure at the next one)
            job = (downloads, outgoing, requests, arrived, done, {queue, rt.queue})
            future = self._in_order(self._progress, *job)
            if not overlap:
                future.result()
            staging.busy = [*downloads, *uploads, done]
            self._keep(staging.busy, staging, views, [m.src.buffer for _, m in sends],
                       [m.dst.buffer for _, m in recvs])
        self.stats["moves"] += len(sends) + len(recvs)
        self.stats["bytes"] += sum(m.nbytes for _, m in sends + recvs)
        return moved

    @staticmethod
    def _layout(moves) -> tuple:
        """Who sends how many bytes to whom: what the ranks must agree on before a move."""
        return tuple((m.src.rank, m.dst.rank, m.nbytes) for m in moves
                     if m.nbytes and m.src.rank != m.dst.rank)

    def _in_order(self, fn, *args):
        """Run ``fn`` (which sends) on the progress thread, after the sends queued before it.
        Every rank then sends in program order, as it posts its receives (on the main
        thread): the messages between two ranks with one tag match their receives in
        order. (A send made on the main thread could overtake a halo row of an earlier
        round still waiting there for its download, and land in that round's receive.)"""
        self._jobs = [f for f in self._jobs if not f.done()]
        future = self._worker.submit(fn, *args)
        self._jobs.append(future)
        return future

    def _progress(self, downloads, outgoing, requests, arrived, done, queues) -> None:
        """Send the rows once they are down, wait for everything, release the uploads (and
        flush ``queues``, where they and what waits for them sit: a driver may hold commands
        behind a user event until their queue is flushed again, which in a loop would be
        the next round's)."""
        MPI = self.MPI
        complete = cl.command_execution_status.COMPLETE
        try:
            try:
                if downloads:
                    cl.wait_for_events(downloads)
            except BaseException as exc:  # noqa: BLE001 - still send: the peers wait for it
                self._worker_error = exc
            sent = [self.p2p.Isend([c, MPI.BYTE], dest=dest, tag=tag)
                    for view, dest, tag in outgoing for c in chunks(view)]
            MPI.Request.Waitall(requests)
            arrived.set_status(complete)      # the uploads go now, not after the sends too
            for q in queues:
                q.flush()
            MPI.Request.Waitall(sent)
            self.stats["messages"] += len(requests) + len(sent)
        except BaseException as exc:  # noqa: BLE001 - reported at the next collective
            self._worker_error = self._worker_error or exc
        finally:
            if arrived.command_execution_status != complete:
                arrived.set_status(complete)
            done.set_status(complete)

    # -- host ------------------------------------------------------------------------------------
    @contextmanager
    def _alone(self, closes: bool = True, read=None):
        """A collective made outside any skeleton call (``to_numpy``, an upload) as a call of
        its own, so that a failure on one rank reaches the others; with ``closes`` its last
        collective closes it (nothing after it can fail on one rank: no second one). ``read``:
        (parts, shape, the user's line) of a container read (a gather)."""
        if self.depth:
            yield
            return
        label, where = None, None
        if read is not None:
            parts, shape, where = read
            label = f"{READ} of shape {list(getattr(parts, 'shape', shape))}"
        with self.call(label, where=where):
            yield
            if closes:
                self._closed_at = self.collectives

    def to_host(self, pieces, host, source=None):
        with self._alone(read=(source, host.shape, Where("read") if not self.depth else None)):
            flat = host.reshape(-1).view(np.uint8)
            events = []                      # this rank's pieces first (a failure: below)
            for p in pieces:
                if p.nbytes and p.span.rank == self.rank:
                    self.rt.stats.downloads += 1
                    self.rt.stats.download_bytes += p.nbytes
                    events.append(cl.enqueue_copy(self.rt.queue,
                                                  flat[p.host_offset:p.host_offset + p.nbytes],
                                                  p.span.buffer, src_offset=p.span.offset,
                                                  is_blocking=False))
            if events:
                cl.wait_for_events(events)
            self.check(step="gather", detail=(getattr(source, "stamp", None), tuple(
                (p.span.rank, p.host_offset, p.nbytes) for p in pieces if p.nbytes)))
            by_rank: dict[int, list] = {}
            for p in pieces:
                if p.nbytes:
                    by_rank.setdefault(p.span.rank, []).append(p)
            one_each = all(len(v) == 1 for v in by_rank.values())
            if one_each and all(p.host_offset + p.nbytes < 1 << 31 for p in pieces):
                counts, displs = [0] * self.size, [0] * self.size
                for r, (p,) in by_rank.items():
                    counts[r], displs[r] = p.nbytes, p.host_offset
                self.comm.Allgatherv(self.MPI.IN_PLACE, [flat, counts, displs, self.MPI.BYTE])
                return
            for p in pieces:                 # large or several pieces: one broadcast each
                if p.nbytes:
                    for c in chunks(flat[p.host_offset:p.host_offset + p.nbytes]):
                        self.comm.Bcast([c, self.MPI.BYTE], root=p.span.rank)

    def from_host(self, host, pieces):
        with self._alone(closes=False):         # (the uploads follow the collective)
            shapes = self.allgather_objects((tuple(host.shape), host.dtype.str), step="upload")
            if len(set(shapes)) > 1:
                raise errors.ShapeError("the ranks passed different data for one container: "
                                        + ", ".join(f"rank {r}: shape {s} ({d})"
                                                    for r, (s, d) in enumerate(shapes)))
            flat = host.reshape(-1).view(np.uint8)
            events = []
            for p in pieces:
                if p.nbytes and p.span.rank == self.rank:
                    self.rt.stats.uploads += 1
                    self.rt.stats.upload_bytes += p.nbytes
                    events.append(cl.enqueue_copy(self.rt.queue, p.span.buffer,
                                                  flat[p.host_offset:p.host_offset + p.nbytes],
                                                  dst_offset=p.span.offset, is_blocking=False))
            if events:
                cl.wait_for_events(events)

    def scatter(self, host, pieces, root: int) -> None:
        """Like :meth:`from_host`, but only rank ``root`` has ``host`` (None elsewhere): it
        sends every other rank the bytes of that rank's pieces."""
        MPI, me = self.MPI, self.rank
        inbox = []                           # (buffers first: nothing fails between the
        if me == root:                       # status collective and the messages)
            flat = host.reshape(-1).view(np.uint8)
            inbox = [(p, flat[p.host_offset:p.host_offset + p.nbytes]) for p in pieces
                     if p.nbytes and p.span.rank == me]
        else:
            inbox = [(p, np.empty(p.nbytes, np.uint8)) for p in pieces
                     if p.nbytes and p.span.rank == me]
        self.check(step="scatter", detail=(root, tuple((p.span.rank, p.host_offset, p.nbytes)
                                                       for p in pieces if p.nbytes)))
        if me == root:
            def send() -> None:
                MPI.Request.Waitall([
                    self.p2p.Isend([c, MPI.BYTE], dest=p.span.rank, tag=i % TAGS)
                    for i, p in enumerate(pieces) if p.nbytes and p.span.rank != me
                    for c in chunks(flat[p.host_offset:p.host_offset + p.nbytes])])
            self._in_order(send).result()
        else:
            tags = {id(p): i % TAGS for i, p in enumerate(pieces)}
            MPI.Request.Waitall([self.p2p.Irecv([c, MPI.BYTE], source=root, tag=tags[id(p)])
                                 for p, buf in inbox for c in chunks(buf)])
        events = [cl.enqueue_copy(self.rt.queue, p.span.buffer, buf, dst_offset=p.span.offset,
                                  is_blocking=False) for p, buf in inbox]
        if events:
            cl.wait_for_events(events)

    # -- small collectives ---------------------------------------------------------------------
    def _gather_values(self, values, nbytes: int) -> tuple[list[int], np.ndarray]:
        """The ranks with a value (rank order) and their values, back to back, on the host:
        this rank's value downloaded into its pinned status record, one status collective
        (two, with a second Allgather, for a value over VALUE_BYTES)."""
        span = values.get(self.rank)
        small = nbytes <= VALUE_BYTES
        mine = self._value_bytes(nbytes) if small else np.zeros(nbytes + 1, np.uint8)
        if span is not None:
            self.rt.stats.downloads += 1
            self.rt.stats.download_bytes += nbytes
            cl.enqueue_copy(self.rt.queue, mine if small else mine[1:], span.buffer,
                            src_offset=span.offset, is_blocking=True)
        if small:
            return self._gathered(self.check(has_value=span is not None, step="values",
                                             detail=nbytes), nbytes)
        self.check(step="values", detail=nbytes)
        mine[0] = span is not None
        every = np.empty((self.size, nbytes + 1), np.uint8)
        self.comm.Allgather(mine, every)
        ranks = [r for r in range(self.size) if every[r, 0]]
        return ranks, np.ascontiguousarray(every[ranks, 1:]).reshape(-1)

    def _on_device(self, data: np.ndarray):
        buf = self.rt.allocate(max(data.nbytes, 1))
        if data.nbytes:
            cl.enqueue_copy(self.rt.queue, buf, data, is_blocking=True)
        return buf

    def allgather(self, values, nbytes, out):
        _ranks, data = self._gather_values(values, nbytes)
        dst = out.get(self.rank)
        if dst is not None and data.nbytes:
            cl.enqueue_copy(self.rt.queue, dst, data, is_blocking=True)

    def allreduce(self, values, nbytes, fold, *, host=None, closes_call=False):
        ranks, data = self._gather_values(values, nbytes)
        if host is not None:               # every rank folds the same bytes the same way
            out = host.fold(data, len(ranks))
        else:                              # folded once, on rank 0, its value shared: every
            out = np.zeros(nbytes, np.uint8)   # rank gets the same, whatever its device
            if self.rank == 0:             # (a failure here reaches the others in the check)
                self.rt.download(out, fold(self.rt, self._on_device(data), len(ranks)))
            if nbytes <= VALUE_BYTES:
                if self.rank == 0:
                    self._value_bytes(nbytes)[:] = out
                out = self._gathered(self.check(has_value=self.rank == 0, step="share"),
                                     nbytes)[1].copy()
            else:
                self.check(step="share")
                self.comm.Bcast([out, self.MPI.BYTE], root=0)
        if closes_call and self.depth == 1:
            self._closed_at = self.collectives   # its last collective closes the call
        return out

    def exscan(self, values, nbytes, scan, *, host=None):
        ranks, data = self._gather_values(values, nbytes)
        if self.rank not in ranks:
            return {}
        k = ranks.index(self.rank)
        if host is not None:
            carry = host.exclusive(data, len(ranks))[k * nbytes:(k + 1) * nbytes]
            return {self.rank: Span(self.rank, value_buffer(self.rt, carry))}
        res = scan(self.rt, self._on_device(data), len(ranks))
        return {self.rank: Span(self.rank, res, k * nbytes)}

    def finish(self):
        for f in self._jobs:
            f.result()
        self._jobs.clear()
        self.rt.queue.finish()
        self.copy_queue.finish()
        self._pending.clear()
