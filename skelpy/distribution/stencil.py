"""Stencil and StencilSequence on a device group: row blocks with halo rows, exchanged every
k steps, the exchange overlapped with the interior.

The matrix takes an ``Overlap(h)`` distribution, h = k x the stencil's vertical reach
(:mod:`.stencil_rows` says which rows each step computes, reads and exchanges). Each device runs
the single-device stencil kernel on its part, restricted to a window of rows
(``SKP_ROW_WINDOW`` in ``kernels/stencil.cl``): every read inside the part, so the border rule
only remaps columns, and the five border modes stay exact across the cuts. Every k steps the
halo rows travel through pinned host memory (:class:`~.exchange.InProcessExchange`); in the
last step of a round each device first computes the rows its neighbours need, starts sending
them, then computes its interior while they travel (``overlap``). The halo depth ``k`` is a
tuned parameter of the call (``params={"k": 2}`` forces it); each device's kernel parameters
are tuned for that device and part as on one device.

Iterations take the temporal path where one device would (``stencil_temporal``, t steps per
pass, chosen by each device's tuner; :mod:`.stencil_passes`): then a round is m passes of t
steps per device over its part (k = m t, the halo k x the reach deep; m from the same cost rule
as k, or a forced k that is a multiple of t), the passes before the last computing the halo
rows the later ones read, the pass's window kernel applying the border rule itself where a part
reaches the first or last row of the matrix; otherwise each device runs single steps of the
window kernel between exchanges.

Between exchanges a device costs the host one enqueue per step or pass: kernels, sizes and
arguments are prepared once per call (:mod:`.stencil_repeats`), the halo's moves planned once
per buffer; only the exchange steps split boundary and interior and copy through pinned memory.
"""

from __future__ import annotations

import math

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from .. import tuner
from ..containers import Matrix, Overlap, empty_like_shape
from ..containers.distributions import BLOCK, COPY
from ..dtypes import storage_dtype
from ..errors import ParameterError
from ..skeletons import stencil_temporal as _temporal
from ..skeletons.arguments import ScalarArg, scalar_value
from ..skeletons.check_buffer import check_buffer
from ..skeletons.stencil_launch import geometry, local_memory
from ..skeletons.stencil_plan import MatrixExtra, tile_bytes
from ..tuner.space import Param, ParamSpace
from .common import collective, group_launch, named
from .exchange import Move, exchange_of
from .parts import Parts, allocate, distributed, parts_of
from .stencil_passes import Temporal
from .stencil_repeats import Repeats, arg_key, copy_of
from .stencil_rows import RowPlan

__all__ = ["run", "run_sequence", "K_VALUES", "GROUP_PARAMS"]

K_VALUES = (1, 2, 3, 4, 6, 8, 12, 16)
GROUP_PARAMS = ("k", "overlap", "route", "flush")
ROUTES = ("queue", "copy")
TEMPORAL_NAMES = _temporal.NAMES          # t and the pass's tile
WINDOW = ("-DSKP_ROW_WINDOW=1",)
# What one halo exchange round costs beyond its copies (events, launches, the host): on 2 x
# H200 heat 4096^2/16384^2 lost ~150-190 us per round of 4 steps against half of one GPU's
# time (bench_multidev/bench_mpi, 2026-11-23, third session); in the fourth, with the host's
# round cheaper, the deeper halos still won at both sizes (4096^2 x100: k = 100 1.607x against
# the rule's 88 1.584x; 16384^2: k = 64 1.896x against 44 1.891x), which a round's latency of
# ~300 us puts at the rule's optimum. PoCL CPU devices, a guess.
ROUND_LATENCY_GPU = 300e-6
WHOLE_MIN_ROWS = 1024            # parts this tall take the whole matrix's point (_whole_point)
WINDOW_COPIES_KEPT = 1024        # kernel copies kept per kernel (windows x buffers) across calls
ROUND_LATENCY_CPU = 400e-6


def default_route(group) -> str:
    """``copy`` on GPUs, ``queue`` elsewhere. On 2 x H200 once a pass's host work was cached
    (2026-11-23), heat 100 steps: 16384^2 18.09 ms by copy queues vs 18.37 in order (the
    in-order upload of a 44-row halo, ~55 us, stalled each device's next pass), 4096^2 2.08
    vs 2.13 ms; the in-order route had won while the host was the bottleneck."""
    return "copy" if all(d.kind == "gpu" for d in group.devices) else ROUTES[0]


@collective
def run(skel, src: Matrix, extras, iterations: int, forced, out_dtype) -> Matrix:
    """``skel(src, *extras, iterations=...)`` (a Stencil) on the device group in use."""
    group = _rt.current().group
    forced = dict(forced or {})
    wanted = {k: forced.pop(k) for k in GROUP_PARAMS if k in forced}
    passes = {k: forced.pop(k) for k in TEMPORAL_NAMES if k in forced}
    if passes and passes.get("t") != 1 and forced:
        # as on one device: a pass takes no single-step parameters (they went unnoticed)
        raise ParameterError(f"{skel.origin}: unknown launch parameter {next(iter(forced))!r} "
                             f"beside the passes' {sorted(passes)}; a pass takes "
                             f"{', '.join(TEMPORAL_NAMES)} (single steps: t=1)")
    bound = skel.bind(src, extras, out_dtype)
    if bound.out_dtype != src.dtype and iterations > 1:
        # the first step changes the dtype: a call of its own, one step (so k = 1: a k
        # asked for is the rest's)
        first = run(skel, src, extras, 1, {**forced, **wanted, "k": 1}, out_dtype)
        return run(skel, first, extras, iterations - 1, {**forced, **wanted}, out_dtype)
    rows, cols = src.shape
    if rows * cols == 0:
        skel.last_launch = _rt.Launch(skel.kind, {}, (0, 0), None, source="empty")
        reach = max(bound.plan.shape.north, bound.plan.shape.south)
        return named(empty_like_shape(src.shape, bound.out_dtype, _rt.current()), Overlap(reach))
    job = _Job(skel, bound, group, src, iterations, forced or None)
    job.overlap = bool(wanted.get("overlap", True))
    job.flush = bool(wanted.get("flush", False))
    job.route = wanted.get("route", default_route(group))
    if job.route not in ROUTES:
        raise ParameterError(f"{skel.origin}: route={job.route!r}: the halo exchange goes "
                             f"{' or '.join(map(repr, ROUTES))}")
    if iterations > 1 or passes:
        temporal = Temporal.of(job, out_dtype, passes, wanted.get("k"))
        if temporal is not None:
            return Matrix.from_parts(temporal.run())
    out = job.decide_and_run(wanted.get("k"))
    job.raise_if_failed()
    return Matrix.from_parts(out)


@collective
def run_sequence(seq, src: Matrix, extras, iterations: int, stage_params) -> Matrix:
    """A StencilSequence on the device group in use: stage after stage, each on the parts the
    previous one left (a halo exchange per stage)."""
    cur = src
    per_stage: list[list] = [[] for _ in seq.stages]
    for _ in range(iterations):
        for i, stage in enumerate(seq.stages):
            n_extra = max(stage.muscle.n_params - 1, 0)
            cur = run(stage, cur, extras[:n_extra], 1, stage_params[i], None)
            per_stage[i].append(stage.last_launch)
    return cur, per_stage


class _Measured:
    """A run's parts as the tuner's measuring modes see a result: they compare the runs of
    the k they measure by ``to_numpy()`` (the parts themselves are distinct objects)."""

    __slots__ = ("parts",)

    def __init__(self, parts: Parts):
        self.parts = parts

    def to_numpy(self):
        return self.parts.gather()


class _Job:
    """One call: its row plan, buffers, per-device kernels and the steps."""

    def __init__(self, skel, bound, group, src, iterations, forced):
        self.skel, self.bound, self.group = skel, bound, group
        self.plan = bound.plan
        self.src, self.iterations, self.forced = src, iterations, forced
        self.rows, self.cols = src.shape
        shape = self.plan.shape
        self.north, self.south = shape.north, shape.south
        self.reach = max(shape.north, shape.south)
        self.mode = skel.border
        self.ranges = BLOCK.ranges(self.rows, group.size)
        self.ex = exchange_of(group)
        self.overlap = True
        self.route = default_route(group)
        # flush each device's queue after each of its passes (a diagnosis: whether the devices
        # wait for the driver to submit what the host has enqueued, rather than for the host)
        self.flush = False
        self.points: dict[int, dict] = {}
        self.launches: dict[int, list] = {}
        self.exchange_events: list = []
        self.checks: list = []            # check buffers of a kernel that checks its reads

    # -- k ----------------------------------------------------------------------------------
    def legal_ks(self) -> list[int]:
        """Halo depths this call can use: k <= iterations, the ghost rows refreshable on the
        devices for k > 1, and a halo no deeper than the matrix."""
        if self.reach == 0:
            return [1]
        out = []
        for k in K_VALUES:
            if k > 1 and (k > self.iterations or k * self.reach > self.rows):
                continue
            if k > 1 and not self._rows(k).local_ghosts_ok(k):
                continue
            out.append(k)
        return out

    def default_k(self, legal: list[int]) -> int:
        """Halo depth from a small cost model: an exchange costs ``latency`` (copies, events,
        launches), recomputing the overlap (k - 1)/2 x the halo rows per step; balance them
        (k* = sqrt(2 latency / cost of the halo rows per step)). The tuner measures the
        legal k in its online and exhaustive modes."""
        best = self.best_k()
        return min(legal, key=lambda k: abs(math.log(k / best)))

    def best_k(self) -> float:
        """The k of :meth:`default_k`'s cost rule before it is rounded to a legal one."""
        halo = max(self.north + self.south, 1) * self._per_row()
        return math.sqrt(2 * self._round_latency() / max(halo, 1e-12))

    def call_cost(self, k: int, reach: int) -> float:
        """Predicted seconds a call spends on its halo at depth ``k`` (rows ``reach`` per
        step): ``ceil(iterations / k) - 1`` exchanges, each the round's latency plus what an
        interior pass does not hide of the halo's extra trip (MPI's; nothing in one
        process), and ``(k - 1) / 2`` halo rows per step recomputed. The temporal passes
        take the k that minimises it (:mod:`.stencil_passes`)."""
        return self.cost_of(self.cost_terms(reach), k)

    def cost_terms(self, reach: int) -> tuple[float, float, float, float]:
        """What :meth:`call_cost` reads of the call, computed once for many k: the round's
        latency, the extra trip's seconds per row of depth, the seconds an interior pass
        hides, the recomputed halo's seconds per step and row of depth."""
        per_row = self._per_row()
        trip = reach * self.cols * self.src.dtype.itemsize / self.ex.round_bandwidth
        parts = (self.ranges[r] for r in range(self.group.size))
        hidden = max((hi - lo for lo, hi in parts), default=0) * per_row
        return (self._round_latency(), trip, hidden,
                max(self.north + self.south, 1) * per_row)

    def cost_of(self, terms: tuple[float, float, float, float], k: int) -> float:
        """:meth:`call_cost` at depth ``k`` from :meth:`cost_terms`."""
        latency, trip, hidden, recompute = terms
        rounds = -(-self.iterations // k)
        return ((rounds - 1) * (latency + max(0.0, k * trip - hidden))
                + self.iterations * (k - 1) / 2 * recompute)

    def _round_latency(self) -> float:
        gpu = self.group.devices[0].kind == "gpu"
        return (ROUND_LATENCY_GPU if gpu else ROUND_LATENCY_CPU) + self.ex.round_latency

    def _per_row(self) -> float:
        """Seconds per row and step at the device kind's bandwidth (the rule's unit)."""
        bandwidth = 3e12 if self.group.devices[0].kind == "gpu" else 2e10
        item = self.src.dtype.itemsize + self.bound.out_dtype.itemsize
        return self.cols * item * (1 + self.plan.features.get("reads", 1.0) / 8) / bandwidth

    def decide_and_run(self, forced_k) -> Parts:
        """Run with the forced k, the only legal one, or the tuner's (which in its online and
        exhaustive modes measures the legal k on real calls, by wall time)."""
        legal = self.legal_ks()
        if forced_k is not None:
            if isinstance(forced_k, bool) or forced_k not in legal:
                raise ParameterError(
                    f"{self.skel.origin}: k={forced_k!r} is not legal for this call on "
                    f"{self.group.size} devices (legal: {legal}; k <= iterations, "
                    "k x reach <= rows, and beyond k = 1 every device must hold the rows its "
                    "ghost rows copy)")
            return self.run(int(forced_k))
        if len(legal) == 1:
            return self.run(legal[0])
        space = ParamSpace([Param("k", tuple(legal), doc="steps between halo exchanges")],
                           {"k": self.default_k(legal)})

        def run(point):
            out = self.run(int(point["k"]))
            if tuner.get_mode() in ("online", "exhaustive"):
                self.ex.finish()           # measured by wall time: the whole call
            return _Measured(out), []

        req = tuner.TuningRequest(
            skeleton="stencil_group", kernel_key=self.plan.kernel_key + "/group",
            device=_rt.current().device, space=space,
            dataset={"rows": float(self.rows), "cols": float(self.cols),
                     "iterations": float(self.iterations), "devices": float(self.group.size),
                     "dtype_size": float(self.plan.in_dtype.itemsize)},
            features=self.plan.features, run=run, origin=self.skel.origin)
        if len(self.ex.local) < self.group.size:
            # ranks in other processes (MPI): every rank takes the first rank's decision
            point, _source = tuner.choose_params(req)
            return self.run(int(self.ex.agree(int(point["k"]))))
        return tuner.execute(req).result.parts

    def _rows(self, k: int) -> RowPlan:
        return RowPlan(self.ranges, self.rows, self.north, self.south, self.mode,
                       k * self.reach)

    # -- the call -------------------------------------------------------------------------------
    def run(self, k: int) -> Parts:
        """All the iterations with a k-deep halo; the result's parts (stale halo)."""
        skel, group = self.skel, self.group
        self.launches, self.exchange_events = {}, []
        self.repeats = Repeats(skel.kind, skel.origin)
        h = k * self.reach
        with skel._naming_errors():
            inp = parts_of(self.src)
            if inp is None or inp.group is not group or inp.dist.name != "overlap" \
                    or inp.dist.halo < h:
                inp = distributed(self.src, group, Overlap(h))
            h = inp.dist.halo
            self.rp = rp = RowPlan(self.ranges, self.rows, self.north, self.south, self.mode, h)
            self.local_ghosts = rp.local_ghosts_ok(k)
            self.extra_args = self.extras(rp)
            bufs = [allocate(group, inp.dist, inp.shape, self.bound.out_dtype) for _ in range(2)]
        for parts in (inp, *bufs):
            self._fill_constant(parts, rp)
        # the ghost rows the exchange brings (wrap; the rule's copies when not refreshed here)
        key = (self.mode, self.skel.cval) if self.mode == "wrap" or not self.local_ghosts \
            else None
        if not inp.halo_valid or (key is not None and inp.ghosts != key):
            self.exchange(inp)
        inp.halo_valid, inp.ghosts = True, key
        cur, spare = inp, bufs
        done = 0
        nxt = 0
        while done < self.iterations:
            kk = min(k, self.iterations - done)
            more = done + kk < self.iterations
            for j in range(1, kk + 1):
                dst = spare[nxt]
                nxt ^= 1
                if self.local_ghosts:
                    self._refresh_ghosts(cur, j, kk)
                self._step(cur, dst, j, kk, exchange_after=(j == kk and more))
                cur = dst
            done += kk
        self.submit()
        self.add_repeats("repeat")
        skel.last_launch = group_launch(skel.kind, [ln for r in sorted(self.launches)
                                                    for ln in self.launches[r]])
        skel.last_launch.iterations = self.iterations
        skel.last_launch.k = k
        skel.last_launch.exchange_events = list(self.exchange_events)
        cur.halo_valid, cur.ghosts = False, None
        return cur

    def submit(self) -> None:
        """Flush every device's queue once the call is enqueued. Only an exchange flushes
        during a call, and a caller that then waits for the devices one after the other
        (finish on the first, then the second) would leave the second's last passes
        unsubmitted while it waits for the first: one device alone is flushed by its wait
        at once."""
        for rt in self.group.runtimes:
            if rt is not None:                # (None: a device of another process)
                rt.queue.flush()

    def add_repeats(self, source: str) -> None:
        """The call's repeated launches into its per-device Launch records."""
        for r, ln in self.repeats.records(source).items():
            self.launches.setdefault(r, []).append(ln)

    def _step(self, cur: Parts, dst: Parts, j: int, kk: int, exchange_after: bool) -> None:
        """Step j of kk on every device, cur -> dst; with ``exchange_after``, dst's halo is
        exchanged at the end (started as soon as the rows it needs are computed)."""
        rp = self.rp
        split = exchange_after and self.overlap and self.rp.h > 0
        after: dict[int, list] = {}
        interiors = []
        for r in rp.active:
            a, b = rp.computed(r, j, kk)
            lo, hi = self.ranges[r]
            if split and hi - lo > 2 * rp.h:
                evs = [self._launch(r, cur, dst, a, lo + rp.h),
                       self._launch(r, cur, dst, hi - rp.h, b)]
                interiors.append((r, lo + rp.h, hi - rp.h))
            else:
                evs = [self._launch(r, cur, dst, a, b)]
            after[r] = [e for e in evs if e is not None]
        if not exchange_after:
            return
        if not split:
            self.exchange(dst)
            return
        moves = self.repeats.memo(("halo", id(dst)),
                                  lambda: self.moves(dst, self._transfers()))
        self.exchange_behind(moves, after,
                             lambda: [self._launch(r, cur, dst, a, b) for r, a, b in interiors])

    def exchange_behind(self, moves, after: dict, interior) -> None:
        """The halo moves hidden behind ``interior()`` (which enqueues the interior kernels):
        route ``queue``: downloads in order after the boundary kernels, the interior, then
        the uploads, all on each device's queue; route ``copy``: the copies on copy queues
        and a barrier on each device's queue before the next step."""
        for r in after:
            rt = self.group.runtimes[r]
            if rt is not None:
                rt.queue.flush()              # the boundary kernels start now
        if self.route == "queue":
            receive = self.ex.start_move(moves, after=after)
            interior()
            moved = receive()
        else:
            moved = self.ex.move(moves, after=after, overlap=True)
            interior()
        if not moved.ordered:                 # copies on other queues: wait for them
            for r in self.rp.active:
                waits = moved.received.get(r, []) + moved.sent.get(r, [])
                if waits:
                    cl.enqueue_barrier(self.group.runtimes[r].queue, wait_for=waits)
        self.exchange_events += [e for evs in moved.received.values() for e in evs]
        self.exchange_events += [e for evs in moved.sent.values() for e in evs]

    def _transfers(self):
        return self.rp.halo_transfers(ghosts_too=not self.local_ghosts)

    def exchange(self, parts: Parts) -> None:
        moved = self.ex.move(self.moves(parts, self._transfers()))
        self.exchange_events += [e for evs in moved.received.values() for e in evs]

    def moves(self, parts: Parts, transfers) -> list[Move]:
        rb = parts.row_bytes
        return [Move(parts.span(parts.parts[t.src], t.src_row),
                     parts.span(parts.parts[t.dst], t.dst_row), t.count * rb)
                for t in transfers]

    def _refresh_ghosts(self, parts: Parts, j: int, kk: int) -> None:
        def plan():
            return [m for r in self.rp.active
                    for m in self.moves(parts, self.rp.ghost_refresh(r, j, kk))]

        moves = self.repeats.memo(("ghosts", id(parts), j, kk), plan)
        if moves:
            self.ex.move(moves)

    def _fill_constant(self, parts: Parts, rp: RowPlan) -> None:
        """The constant into the ghost rows of ``parts`` (border ``constant``)."""
        if self.mode != "constant":
            return
        st = storage_dtype(parts.dtype)
        pattern = np.asarray(self.skel.cval).astype(parts.dtype).astype(st).reshape(1)
        rb = parts.row_bytes
        for r in rp.active:
            p = parts.parts[r]
            if p.rt is None:                  # a device of another process (MPI)
                continue
            for first, count in rp.constant_rows(r):
                cl.enqueue_fill_buffer(p.rt.queue, p.buffer, pattern,
                                       p.offset(first, rb), count * rb)

    # -- kernels -------------------------------------------------------------------------------
    def extras(self, rp: RowPlan) -> dict[int, list]:
        """Each device's extra kernel arguments: scalars, its part of each extra matrix (the
        same halo as the input, filled), the whole of each extra vector."""
        per_rank: dict[int, list] = {r: [] for r in range(self.group.size)}
        tm = self.plan.muscle
        for k, (d, v) in enumerate(zip(self.bound.descs, self.bound.values, strict=True)):
            if isinstance(d, ScalarArg):
                val = scalar_value(v, tm.scalar_dtypes.get(k + 1, d.dtype), self.skel.origin)
                for r in per_rank:
                    per_rank[r].append(val)
            elif isinstance(d, MatrixExtra):
                parts = distributed(v, self.group, Overlap(rp.h))
                if not parts.halo_valid or parts.ghosts != (self.mode, self.skel.cval):
                    # an extra matrix never changes: its halo and ghost rows, once
                    self.ex.move(self.moves(parts, rp.halo_transfers(ghosts_too=True)))
                    self._fill_constant(parts, rp)
                    parts.halo_valid, parts.ghosts = True, (self.mode, self.skel.cval)
                for r in per_rank:
                    per_rank[r].append(parts.parts[r].buffer)
            else:
                parts = distributed(v, self.group, COPY)
                for r in per_rank:
                    per_rank[r] += [parts.parts[r].buffer, np.int64(v.shape[0])]
        for r, rt in enumerate(self.group.runtimes):
            # a kernel that checks its reads (debug mode, offsets that are not constants)
            # takes a check buffer last, one per device, read back after the call
            checks = check_buffer(self.plan, rt) if rt is not None else None
            if checks is not None:
                self.checks.append(checks)
                per_rank[r].append(checks.buffer)
        return per_rank

    def raise_if_failed(self) -> None:
        """After the call: a checked read out of range on any device is a BoundsError."""
        for checks in self.checks:
            checks.raise_if_failed(self.skel.origin)

    def _launch(self, rank: int, cur: Parts, dst: Parts, a: int, b: int):
        """The window kernel on device ``rank`` over rows [a, b) (matrix rows)."""
        rt = self.group.runtimes[rank]
        if b <= a or rt is None:              # (None: a device of another process)
            return None
        part = cur.parts[rank]
        point = self.points.get(rank)
        if point is not None:
            return self._repeat(rank, rt, point, part, dst.parts[rank].buffer, a, b)
        first = part.first
        plan, skel = self.plan, self.skel
        lo, hi = np.int32(a - first), np.int32(b - first)
        fixed = [dst.parts[rank].buffer, part.buffer, np.int32(part.held), np.int32(self.cols)]
        extra = self.extra_args[rank]

        def launch(point):
            gsize, lsize = geometry(point, b - a, self.cols, plan.tile_itemsize)
            args = list(fixed)
            if int(point["local"]):
                args.append(local_memory(tile_bytes(plan.shape, plan.tile_itemsize, point)))
            args += [lo, hi, *extra]
            kernel = plan.kernel(rt, point, None, WINDOW)
            ev = rt.launch(kernel, gsize, lsize, args, params=point, skeleton=skel.kind,
                           origin=skel.origin)
            return dst, [ev], gsize, lsize

        info = {}

        def run(p):
            out, evs, info["g"], info["l"] = launch(p)
            return out, evs

        dataset = {"n": float(part.rows * self.cols), "rows": float(part.rows),
                   "cols": float(self.cols), "dtype_size": float(plan.in_dtype.itemsize)}
        outcome = skel._run_tuned(plan, rt, dataset, self._whole_point(rt, part) or self.forced,
                                  run)
        self.points[rank] = dict(outcome.params)
        self.launches.setdefault(rank, []).append(_rt.Launch(
            skel.kind, dict(outcome.params), info["g"], info["l"], list(outcome.events),
            list(outcome.refused), outcome.source))
        return outcome.events[-1] if outcome.events else None

    def _whole_point(self, rt, part) -> dict | None:
        """Where nothing is forced and the tuner does not measure (``model``/``off``): the
        point it would take for the whole matrix on this device, for a part of at least
        ``WHOLE_MIN_ROWS`` rows (a big part is the same kernel over fewer rows; the model's
        separate decision for it can be worse: on 2 x H200 a Gaussian 11x11 at 8192^2 ran its
        4101-row parts in 0.600 ms at the part's point, 0.572 ms at the whole matrix's, 1.88x
        vs 1.96x over one device). None: decide for the part as usual."""
        if self.forced or part.rows < WHOLE_MIN_ROWS or tuner.get_mode() not in ("model", "off"):
            return None
        plan = self.plan
        req = plan.tuning_request(
            rt, self.skel.kind, {"n": float(self.rows * self.cols), "rows": float(self.rows),
                                 "cols": float(self.cols),
                                 "dtype_size": float(plan.in_dtype.itemsize)},
            self.skel.origin)
        point, _source = tuner.choose_params(req)
        return dict(point)

    def _repeat(self, rank: int, rt, point: dict, part, dst, a: int, b: int):
        """A launch at device ``rank``'s settled point: kernel, sizes and arguments prepared
        once per call and window, one kernel copy per window and buffers
        (:mod:`.stencil_repeats`)."""
        plan, first = self.plan, part.first

        def prepare():
            gsize, lsize = geometry(point, b - a, self.cols, plan.tile_itemsize)
            tail = [np.int32(part.held), np.int32(self.cols)]
            if int(point["local"]):
                tail.append(local_memory(tile_bytes(plan.shape, plan.tile_itemsize, point)))
            tail += [np.int32(a - first), np.int32(b - first), *self.extra_args[rank]]
            kernel = plan.kernel(rt, point, None, WINDOW)
            return kernel, gsize, lsize, tail, tuple(arg_key(x) for x in tail)

        rep = self.repeats
        kernel, gsize, lsize, tail, tail_key = rep.memo(("window", rank, a, b), prepare)
        src = part.buffer
        copies = kernel.__dict__.get("_skelpy_copies")
        if copies is None:
            copies = kernel._skelpy_copies = {}
        own = copy_of(copies, (src.int_ptr, dst.int_ptr, gsize, lsize, tail_key), kernel,
                      WINDOW_COPIES_KEPT)
        return rep.fire(rank, rt, own, gsize, lsize, point, lambda: [dst, src, *tail])
