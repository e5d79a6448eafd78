"""How the parts of distributed containers talk: ONE small interface, and its in-process
implementation.

Skeletons on a device group never copy between devices themselves; they describe what must
move and call an :class:`Exchange`:

``move(moves)``            byte ranges from one device's buffer to another's (halo rows,
                           redistribution); every process passes the same list, each does its side
``to_host`` / ``from_host``  parts to a whole host array (every process gets all of it) and back
``start_move(moves)``      the same in two halves (sends now, receives later) for a halo
                           exchange hidden behind the interior kernels
``allgather(values)``      a small value per device -> all of them, in device order, on every device
``allreduce(values, fold)`` those values folded in device order (deterministic) -> a host value
``exscan(values, scan)``   for each device, the fold of the values of the devices before it

In the small collectives a device with nothing to contribute (no rows) passes no value: the
others' values are folded, in rank order. ``allreduce`` and ``exscan`` take a
:class:`~.host_fold.HostFold` where the muscle folds on the host bit for bit as on a device (a
sum or product): then each device's value makes one small download into a pinned host buffer
kept for the purpose, and the fold runs where the values arrive, with no kernel and no second
trip (per call: one wait in one process; one collective under MPI).

Ranks are the positions of the devices in the group. :class:`InProcessExchange` drives every rank
of a group in this process: device -> pinned host memory (``CL_MEM_ALLOC_HOST_PTR``, mapped
once) -> device, ordered by events across the devices' queues of the group's one context, never
a buffer used by two devices (the driver would migrate it: 1.4 GB/s between two H200s, against
55 GB/s each way through pinned memory). An MPI implementation (one rank per process, issue 14)
implements the same methods with point-to-point messages and ``Allgather`` on the ranks it
drives (``local``), so that the skeletons do not change.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl

from .host_fold import HostFold
from .pinned import Pinned, PinnedPool

__all__ = ["Span", "Move", "Moved", "Piece", "Exchange", "InProcessExchange", "exchange_of",
           "value_buffer", "keep_until_done"]


@dataclass(frozen=True)
class Span:
    """Bytes from ``offset`` of ``buffer`` on device ``rank`` (``buffer`` may be None on a
    process that does not drive that rank)."""

    rank: int
    buffer: Any
    offset: int = 0


@dataclass(frozen=True)
class Move:
    """``nbytes`` from ``src`` to ``dst``."""

    src: Span
    dst: Span
    nbytes: int


@dataclass(frozen=True)
class Moved:
    """The events of a :meth:`Exchange.move`: by receiving rank (its data has arrived) and by
    sending rank (its data has left: the source may be overwritten). ``ordered``: every event
    is on its device's own queue, so what is enqueued there later runs after it anyway."""

    received: dict[int, list]
    sent: dict[int, list]
    ordered: bool = False


@dataclass(frozen=True)
class Piece:
    """``nbytes`` of a device buffer at ``span`` and of a host array at ``host_offset``."""

    span: Span
    host_offset: int
    nbytes: int


class Exchange:
    """The communication a device group's skeletons use (see the module docstring).

    ``size``: devices in the group; ``local``: the ranks this process drives; ``runtimes``:
    their runtimes by rank (None for ranks driven elsewhere). Every process calls every method
    with the same arguments, in the same order (a collective)."""

    size: int
    local: tuple[int, ...]
    runtimes: tuple
    #: What a halo exchange round costs beyond the in-process one's (seconds), for the halo
    #: depth rule (:meth:`skelpy.distribution.stencil._Job.best_k`): 0 in one process.
    round_latency: float = 0.0
    #: Bytes per second of a halo's extra trip in a round (MPI's, between download and
    #: upload); infinite in one process (the copies are the round's own).
    round_bandwidth: float = math.inf

    def move(self, moves: Sequence[Move], *, after: Mapping[int, list] | None = None,
             overlap: bool = False) -> Moved:
        """Do the moves. ``after[rank]``: events the rank's sends wait for. With ``overlap``
        the copies run on separate copy queues, concurrently with kernels, and the returned
        events say when they are done; otherwise they are ordered in the devices' queues
        before anything enqueued later."""
        raise NotImplementedError

    def start_move(self, moves: Sequence[Move], *,
                   after: Mapping[int, list] | None = None) -> Callable[[], Moved]:
        """The moves in two halves, for a halo exchange hidden behind the interior: the
        sends are started now, the returned function starts the receives and returns the
        events. The caller enqueues the interior kernels between the two, so that a device's
        queue runs: boundary kernels, their download, interior, the halo's upload. The
        default is :meth:`move` with ``overlap`` at once (an implementation with a progress
        thread, like MPI's, needs no split)."""
        moved = self.move(moves, after=after, overlap=True)
        return lambda: moved

    def to_host(self, pieces: Sequence[Piece], host: np.ndarray, source=None) -> None:
        """Fill ``host`` (bytes) from the pieces (of the parts ``source``, when known);
        blocks until done."""
        raise NotImplementedError

    def stamp(self):
        """A name for parts made now, the same on every process that makes them at the same
        point (None: no process but this one reads them)."""
        return None

    def from_host(self, host: np.ndarray, pieces: Sequence[Piece]) -> None:
        """Copy the pieces of ``host`` (the same array on every process) to the devices."""
        raise NotImplementedError

    def allgather(self, values: Mapping[int, Span], nbytes: int,
                  out: Mapping[int, Any]) -> None:
        """The ``nbytes`` at ``values[r]`` of every rank r that has one, in rank order, into
        the buffer ``out[q]`` of every local rank q."""
        raise NotImplementedError

    def allreduce(self, values: Mapping[int, Span], nbytes: int,
                  fold: Callable[[Any, Any, int], Any], *, host: HostFold | None = None,
                  closes_call: bool = False) -> np.ndarray:
        """Fold the ranks' values in rank order: ``fold(runtime, buffer, count)`` folds
        ``count`` gathered values on a device and returns a buffer of one value; returns its
        bytes on the host (every process gets them). With ``host`` the values are folded on
        the host instead (the same bits, see :mod:`.host_fold`). ``closes_call``: the caller
        does nothing after this that could fail on one rank only, so that (under MPI) this
        collective also closes the skeleton call (:meth:`call`)."""
        raise NotImplementedError

    def exscan(self, values: Mapping[int, Span], nbytes: int,
               scan: Callable[[Any, Any, int], Any], *,
               host: HostFold | None = None) -> dict[int, Span]:
        """For each local rank r with a value, where the fold of the values of the ranks
        before it lies on its device: ``scan(runtime, buffer, count)`` scans ``count``
        gathered values exclusively on a device and returns the buffer of the results; with
        ``host`` the scan runs on the host and each device gets its one value."""
        raise NotImplementedError

    def finish(self) -> None:
        """Wait for everything this exchange started."""
        raise NotImplementedError

    # Several processes (MPI) must take the same decisions and fail together; in one process
    # these are trivial.
    def agree(self, value):
        """The value every process uses: the first rank's (a tuner's choice, say)."""
        return value

    def call(self, label=None, args: tuple = ()):
        """A context around one skeleton call on the group: under MPI a failure inside it on
        one rank raises on every rank (with the same message) instead of a hang, and ranks
        that call different things (``label``: the skeleton, or words; ``args``: what must
        agree, see :mod:`skelpy.mpi.exchange`) raise together instead of mismatching."""
        return nullcontext()


def keep_until_done(pending: deque, events: list, objects: tuple) -> None:
    """Append (events, objects) to ``pending``, first dropping the oldest entries whose
    events are complete (from the oldest, up to the first still running: exchanges complete
    about in order, so this asks about one or two events, not every one kept)."""
    done = cl.command_execution_status.COMPLETE
    while pending and all(e.command_execution_status == done for e in pending[0][0]):
        pending.popleft()
    pending.append((events, objects))


STAGING_MAX = 64 << 20    # moves of up to this many bytes keep pinned memory of their own
STAGINGS_KEPT = 16        # shapes of moves kept


class _Staging:
    """Pinned memory for one shape of moves, move i's bytes at ``views[i]``. ``last[i]``: the
    last copy out of them (an upload); the next download into them waits for it on the
    device, so the memory is reused without the host asking whether it is free."""

    __slots__ = ("pinned", "views", "last")

    def __init__(self, pinned: Pinned, remote):
        self.pinned, self.views, at = pinned, [], 0
        for m in remote:
            self.views.append(pinned.host[at:at + m.nbytes])
            at += m.nbytes
        self.last: list = [None] * len(remote)

    def wait(self, i: int, after) -> list | None:
        """What the download into move i's bytes waits for: ``after`` and the last upload."""
        prev = self.last[i]
        if prev is None:
            return after or None
        return [*after, prev] if after else [prev]

    def read(self, uploads: list) -> None:
        """``uploads[i]`` copies move i's bytes out (after its download): the memory is free
        once they are done."""
        self.last = list(uploads)
        self.pinned.busy = list(uploads)


class InProcessExchange(Exchange):
    """Every rank of a group in this process; see the module docstring."""

    MAX_IDLE_BYTES = 256 << 20        # pinned memory kept for reuse when idle

    def __init__(self, group):
        self.group = group
        self.size = group.size
        self.local = tuple(range(group.size))
        self.runtimes = tuple(group.runtimes)
        ctx = group.context
        prof = cl.command_queue_properties.PROFILING_ENABLE
        self.copy_queues = tuple(cl.CommandQueue(ctx, d.cl_device, properties=prof)
                                 for d in group.devices)
        # new pinned buffers are mapped here: a blocking map on a queue with copies in it
        # would wait for them, and so for the kernels they wait for (a host stall mid-loop)
        self._map_queue = cl.CommandQueue(ctx, group.devices[0].cl_device)
        self._pool = PinnedPool(ctx, self._map_queue, self.MAX_IDLE_BYTES)
        # (events, objects) that must live until the events complete (pyopencl waits, holding
        # the GIL, for a pending host copy when its event is collected: keep them until they
        # are done), oldest first
        self._pending: deque[tuple[list, tuple]] = deque()
        self._small: Pinned | None = None    # the small collectives' values, kept for reuse
        self._stagings: dict[tuple, _Staging] = {}
        self.stats = {"moves": 0, "bytes": 0}

    def _keep(self, events: list, *objects) -> None:
        keep_until_done(self._pending, events, objects)

    # -- moves -------------------------------------------------------------------------------
    def _copy_within_devices(self, moves, moved: Moved, after: dict) -> list:
        """Enqueue the moves within one device (a copy on its queue, after ``after``'s events
        of that device); the others, which cross devices, are returned."""
        for m in moves:
            if m.nbytes and m.src.rank == m.dst.rank:
                ev = cl.enqueue_copy(self.runtimes[m.src.rank].queue, m.dst.buffer,
                                     m.src.buffer, byte_count=m.nbytes,
                                     src_offset=m.src.offset, dst_offset=m.dst.offset,
                                     wait_for=after.get(m.src.rank) or None)
                moved.received.setdefault(m.dst.rank, []).append(ev)
        return [m for m in moves if m.nbytes and m.src.rank != m.dst.rank]

    def _count(self, remote) -> None:
        self.stats["moves"] += len(remote)
        self.stats["bytes"] += sum(m.nbytes for m in remote)

    def _staging(self, remote) -> _Staging:
        """Pinned memory for the moves ``remote``: kept for their shape (who sends how many
        bytes to whom: a halo exchange meets the same one every round, and reuses it with
        no host poll and no new buffer), or over ``STAGING_MAX`` bytes an idle pool buffer."""
        key = tuple((m.src.rank, m.dst.rank, m.nbytes) for m in remote)
        staging = self._stagings.get(key)
        if staging is None:
            total = sum(m.nbytes for m in remote)
            if total > STAGING_MAX:
                return _Staging(self._pool.get(total), remote)
            staging = _Staging(Pinned(self.group.context, self._map_queue, max(4096, total)),
                               remote)
            self._stagings[key] = staging
            while len(self._stagings) > STAGINGS_KEPT:   # (copies in flight keep theirs)
                self._stagings.pop(next(iter(self._stagings)))
        return staging

    def move(self, moves, *, after=None, overlap=False):
        after = after or {}
        moved = Moved({}, {})
        remote = self._copy_within_devices(moves, moved, after)
        if not remote:
            return moved
        staging = self._staging(remote)
        queues = self.copy_queues if overlap else tuple(rt.queue for rt in self.runtimes)
        downloads = []
        for i, m in enumerate(remote):   # device -> pinned, on the sending device
            ev = cl.enqueue_copy(queues[m.src.rank], staging.views[i], m.src.buffer,
                                 src_offset=m.src.offset, is_blocking=False,
                                 wait_for=staging.wait(i, after.get(m.src.rank)))
            moved.sent.setdefault(m.src.rank, []).append(ev)
            downloads.append(ev)
        uploads = []
        for i, (m, ev) in enumerate(zip(remote, downloads, strict=True)):
            rev = cl.enqueue_copy(queues[m.dst.rank], m.dst.buffer, staging.views[i],
                                  dst_offset=m.dst.offset, is_blocking=False, wait_for=[ev])
            moved.received.setdefault(m.dst.rank, []).append(rev)
            uploads.append(rev)
        staging.read(uploads)
        self._keep(downloads + uploads, staging, [m.src.buffer for m in remote],
                   [m.dst.buffer for m in remote])
        # submit now: a queue waited on by another must be flushed (OpenCL 1.2, 5.13), or its
        # commands may start late (the copies' queues; in order, the receivers', whose
        # uploads the next download of this staging waits for)
        for q in (queues if overlap else {queues[m.dst.rank] for m in remote}):
            q.flush()
        self._count(remote)
        return moved

    def start_move(self, moves, *, after=None):
        """In order on the devices' own queues (no copy queue, so no event between queues of
        one device): each sending device downloads the rows to pinned memory right after the
        kernels that computed them, and each receiving device uploads them after what the
        caller enqueues before calling the returned function (its interior), waiting for
        the sender's download: one event between devices per move (and the download waits
        for the last upload out of its staging, on another device)."""
        moved = Moved({}, {}, ordered=True)
        remote = self._copy_within_devices(moves, moved, {})   # in order: no event to wait
        if not remote:
            return lambda: moved
        staging = self._staging(remote)
        downloads = []
        for i, m in enumerate(remote):   # device -> pinned, in order on the sending device
            ev = cl.enqueue_copy(self.runtimes[m.src.rank].queue, staging.views[i],
                                 m.src.buffer, src_offset=m.src.offset, is_blocking=False,
                                 wait_for=staging.wait(i, None))
            moved.sent.setdefault(m.src.rank, []).append(ev)
            downloads.append(ev)
        staging.pinned.busy = list(downloads)
        for r in {m.src.rank for m in remote}:
            self.runtimes[r].queue.flush()     # the downloads start now, not at a later flush

        def receive() -> Moved:
            uploads = []
            for i, (m, ev) in enumerate(zip(remote, downloads, strict=True)):
                rev = cl.enqueue_copy(self.runtimes[m.dst.rank].queue, m.dst.buffer,
                                      staging.views[i], dst_offset=m.dst.offset,
                                      is_blocking=False, wait_for=[ev])
                moved.received.setdefault(m.dst.rank, []).append(rev)
                uploads.append(rev)
            staging.read(uploads)
            self._keep(downloads + uploads, staging, [m.src.buffer for m in remote],
                       [m.dst.buffer for m in remote])
            for r in {m.dst.rank for m in remote}:
                self.runtimes[r].queue.flush()
            self._count(remote)
            return moved

        return receive

    # -- host ----------------------------------------------------------------------------------
    def to_host(self, pieces, host, source=None):
        events = []
        flat = host.reshape(-1).view(np.uint8)
        for p in pieces:
            if p.nbytes:
                rt = self.runtimes[p.span.rank]
                rt.stats.downloads += 1
                rt.stats.download_bytes += p.nbytes
                events.append(cl.enqueue_copy(rt.queue,
                                              flat[p.host_offset:p.host_offset + p.nbytes],
                                              p.span.buffer, src_offset=p.span.offset,
                                              is_blocking=False))
        if events:
            cl.wait_for_events(events)

    def from_host(self, host, pieces):
        events = []
        flat = host.reshape(-1).view(np.uint8)
        for p in pieces:
            if p.nbytes:
                rt = self.runtimes[p.span.rank]
                rt.stats.uploads += 1
                rt.stats.upload_bytes += p.nbytes
                events.append(cl.enqueue_copy(rt.queue, p.span.buffer,
                                              flat[p.host_offset:p.host_offset + p.nbytes],
                                              dst_offset=p.span.offset, is_blocking=False))
        if events:
            cl.wait_for_events(events)

    # -- small collectives ---------------------------------------------------------------------
    def _gather(self, values, nbytes: int, ranks: Sequence[int]) -> dict[int, Any]:
        """The values (rank order) into a fresh device buffer on each of ``ranks``."""
        out = {r: self.runtimes[r].allocate(nbytes * max(len(values), 1)) for r in ranks}
        self.allgather(values, nbytes, out)
        return out

    def _download_values(self, values, nbytes: int) -> tuple[list[int], np.ndarray]:
        """The ranks with a value and their values' bytes, back to back in rank order: one
        small download per device into the pinned buffer kept for small values, one wait."""
        ranks = sorted(values)
        need = len(ranks) * nbytes
        if self._small is None or self._small.nbytes < need:
            self._small = Pinned(self.group.context, self._map_queue, max(4096, need))
        host = self._small.host
        events = []
        for k, r in enumerate(ranks):
            rt, span = self.runtimes[r], values[r]
            rt.stats.downloads += 1
            rt.stats.download_bytes += nbytes
            # the last download blocks (a blocking read returns as soon as it is done; on 2 x
            # H200 a clWaitForEvents over both devices' events cost ~0.13 ms more per call),
            # then the others, done by then as a rule, are waited for
            events.append(cl.enqueue_copy(rt.queue, host[k * nbytes:(k + 1) * nbytes],
                                          span.buffer, src_offset=span.offset,
                                          is_blocking=k == len(ranks) - 1))
        for ev in events[:-1]:
            ev.wait()
        return ranks, host[:need]

    def allgather(self, values, nbytes, out):
        moves = [Move(values[s], Span(r, out[r], k * nbytes), nbytes)
                 for r in out for k, s in enumerate(sorted(values))]
        self.move(moves)

    def allreduce(self, values, nbytes, fold, *, host=None, closes_call=False):
        if host is not None:
            ranks, data = self._download_values(values, nbytes)
            return host.fold(data, len(ranks))
        # one process drives every rank: the fold runs once, on the first device with a value
        root = min(values)
        gathered = self._gather(values, nbytes, [root])[root]
        rt = self.runtimes[root]
        result = fold(rt, gathered, len(values))
        out = np.empty(nbytes, np.uint8)
        rt.download(out, result)
        return out

    def exscan(self, values, nbytes, scan, *, host=None):
        ranks = sorted(values)
        if host is not None:
            _ranks, data = self._download_values(values, nbytes)
            carries = host.exclusive(data, len(ranks))
            return {r: Span(r, value_buffer(self.runtimes[r],
                                            carries[k * nbytes:(k + 1) * nbytes]))
                    for k, r in enumerate(ranks)}
        gathered = self._gather(values, nbytes, ranks)
        return {r: Span(r, scan(self.runtimes[r], gathered[r], len(ranks)), k * nbytes)
                for k, r in enumerate(ranks)}

    def finish(self):
        for rt in self.runtimes:
            rt.queue.finish()
        for q in self.copy_queues:
            q.finish()
        self._pending.clear()


def value_buffer(rt, value: np.ndarray):
    """A device buffer on ``rt`` holding ``value`` (the bytes of one small value), written
    by a fill on the device's queue: nothing on the host must outlive the call."""
    buf = rt.allocate(value.nbytes)
    cl.enqueue_fill_buffer(rt.queue, buf, np.array(value, np.uint8), 0, value.nbytes)
    return buf


def exchange_of(group) -> Exchange:
    """The group's exchange (an in-process one, made on first use)."""
    ex = group.exchange
    if ex is None:
        ex = group.exchange = InProcessExchange(group)
    return ex
