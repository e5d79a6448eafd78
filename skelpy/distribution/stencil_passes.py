"""Iterations of a stencil on a device group in passes of t steps (``stencil_temporal``) per
device, the halo exchanged every m passes (k = m t steps; see :mod:`.stencil`, whose call
object, the job, this drives: its row plan, exchange and launch records)."""

from __future__ import annotations

import math
import weakref
from collections import OrderedDict
from functools import cached_property

import pyopencl as cl

from .. import tuner
from ..containers import Overlap
from ..errors import ParameterError
from ..skeletons.limits import check_forced
from ..skeletons.stencil_plan import MatrixExtra
from ..skeletons.stencil_stream import GPU_MIN_ITEMS_PER_CU
from ..skeletons.stencil_stream_tile import TILE_NAMES
from .common import group_launch
from .parts import Parts, allocate, distributed, parts_of
from .stencil_repeats import Repeats, arg_key, copy_of
from .stencil_rows import RowPlan

__all__ = ["Temporal"]

# A pass's kernel, geometry, argument tail and kernel copies (stencil_repeats), kept across
# calls per temporal plan, device and call (rows, columns, border, halo, split, point, extra
# arguments) by the window of rows it computes: a loop of calls repeats the same passes, and
# planning one (geometry, options, argument list) cost ~25 us of host time per launch, which
# at 4096^2 on 2 x H200 (a pass ~80 us per device) left the queues waiting for the host.
_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
CALLS_KEPT = 64                  # calls (their keys) kept per plan and device
WINDOWS_KEPT = 1024              # windows kept per call
MAX_PASSES_PER_ROUND = 4096     # the halo depth rule's candidates (k = m t)


def _chunk(tplan, point: dict, rows: int, cols: int, dev) -> int:
    """Rows per stream of one pass over ``rows`` output rows (a run-time argument, not a
    build option): about the point's, as many streams as ``rows / tb_rows`` rounds to (a
    part's few halo rows beyond a multiple do not add a stream that runs alone: 8236 rows at
    128 run 64 streams of 129, not 65), and on a GPU at least enough streams for
    ``GPU_MIN_ITEMS_PER_CU`` where the pass is short (at most 4 streams of 32 rows: the rows
    computed before an exchange, a halo deep, ran ~10x longer than their share at 128 rows
    per stream), down to 8 rows per stream. (A longer pass with too few streams gets them
    shortened, down to 32 rows, by the plan's geometry, as on one device: a part of 4096^2 on
    2 x H200 ran a pass in 105 us at 128 rows, 78 us at 32.)"""
    tb_rows = int(point["tb_rows"])
    if rows <= 0:
        return tb_rows
    streams = max(1, round(rows / tb_rows))
    if dev.kind == "gpu" and rows <= 4 * min(tb_rows, 32):
        g = tplan.geometry(point, tb_rows, cols)     # one stream per row of work-groups
        per_row = g.global_size[0] * g.global_size[1]
        want = -(-GPU_MIN_ITEMS_PER_CU * max(dev.compute_units, 1) // max(per_row, 1))
        streams = max(streams, min(want, -(-rows // 8)))
    return -(-rows // streams)


class Temporal:
    """Iterations in passes of t steps on every device, the halo exchanged between passes."""

    @classmethod
    def of(cls, job, out_dtype, passes: dict, forced_k) -> Temporal | None:
        """The temporal run of ``job``, or None where single steps run instead (the tuner
        chose t = 1, the stencil has no temporal kernel or reads extra matrices, or a part
        is too small for the pass's border rule)."""
        skel, bound = job.skel, job.bound
        tplan = skel.temporal_plan(bound, job.src, out_dtype)
        unsupported = isinstance(tplan, str) or any(isinstance(d, MatrixExtra)
                                                    for d in bound.descs)
        if unsupported:
            if passes and passes.get("t", 2) != 1:
                why = tplan if isinstance(tplan, str) else "it reads extra matrices"
                raise ParameterError(f"{skel.origin}: params {passes}: this stencil cannot run "
                                     f"several steps per pass on a device group ({why})")
            return None
        points = {}
        for r in range(job.group.size):
            lo, hi = job.ranges[r]
            rt = job.group.runtimes[r]
            if hi <= lo or rt is None:        # (None: a device of another process)
                continue
            space = tplan.space(rt)
            forced = None
            if passes:      # a tile no legal point keeps: named (as on one device)
                forced = check_forced(
                    space, lambda p, dev=rt.device: tplan.broken_pass(p, dev), passes,
                    skel.origin, rt.device.name, free=TILE_NAMES)
            req = tuner.TuningRequest(
                skeleton="stencil", kernel_key=tplan.kernel_key, device=rt.device,
                space=space, features=tplan.features, origin=skel.origin,
                dataset={"n": float((hi - lo) * job.cols), "rows": float(hi - lo),
                         "cols": float(job.cols), "dtype_size": float(tplan.itemsize),
                         "iterations": float(job.iterations)},
                forced=forced)
            try:
                point, _source = tuner.choose_params(req)
            except ParameterError as exc:
                raise ParameterError(f"{skel.origin}: {exc}") from None
            if points:                         # every device passes the same t steps
                first = next(iter(points.values()))
                point = space.normalise({"t": first["t"]}, base=point)
            points[r] = dict(point)
        first = next(iter(points.values()), None)
        t = int(job.ex.agree(int(first["t"]) if first is not None else 1))
        for r, point in points.items():       # (MPI: the first rank's t on every rank)
            if int(point["t"]) != t:
                points[r] = dict(tplan.space(job.group.runtimes[r]).normalise({"t": t},
                                                                               base=point))
        if t == 1:
            return None
        hn, hs = tplan.hold
        reach = max(hn, hs, 1)
        if forced_k is not None:
            if isinstance(forced_k, bool) or not isinstance(forced_k, int) or forced_k < t \
                    or forced_k % t:
                raise ParameterError(f"{skel.origin}: k={forced_k!r} with passes of t={t} "
                                     "steps: on a device group k (the steps between "
                                     "exchanges) is a multiple of t (force t, or t=1 for "
                                     "single steps and any k)")
            m = forced_k // t
        else:
            # (the same on every MPI rank without a collective: the rule reads the agreed t,
            # the split and the first device's kind, which every rank knows alike)
            m = cls.passes_per_round(job, t, reach)
        self = cls(job, tplan, points, t, m)
        return self if self.feasible() else None

    @staticmethod
    def passes_per_round(job, t: int, reach: int) -> int:
        """Passes between exchanges (k = m t): the m of least :meth:`_Job.call_cost` (a
        round's latency and exposed halo trip against recomputing the deeper halo), at most
        the iterations and a halo of half the smallest part (its memory)."""
        smallest = min((hi - lo for lo, hi in (job.ranges[r] for r in range(job.group.size))
                        if hi > lo), default=0)
        most = max(min(job.iterations // t, smallest // (2 * t * reach),
                       MAX_PASSES_PER_ROUND), 1)
        # Among the m with the same number of rounds the least is the cheapest (the deeper
        # halo only adds recomputation and trip), so only each round count's least m is
        # priced: O(sqrt(iterations / t)) candidates, not O(iterations / t), in every call.
        terms, iters = job.cost_terms(reach), job.iterations
        best_m, best, m = 1, math.inf, 1
        while m <= most:
            cost = job.cost_of(terms, m * t)
            if cost < best:
                best_m, best = m, cost
            rounds = -(-iters // (m * t))
            if rounds <= 1:
                break
            depth = -(-iters // (rounds - 1))         # the least k of one round fewer
            m = max(m + 1, -(-depth // t))
        return best_m

    def __init__(self, job, tplan, points: dict, t: int, m: int = 1):
        self.job, self.tplan, self.points, self.t, self.m = job, tplan, points, t, m
        hn, hs = tplan.hold
        self.reach = max(hn, hs)
        self.h = m * t * self.reach
        self.rp = RowPlan(job.ranges, job.rows, job.north, job.south, job.mode, self.h)

    def region(self, rank: int) -> tuple[int, int]:
        """The rows device ``rank``'s pass sees as its matrix: its held rows, without the
        ghost rows beyond the first and last row (the pass's border rule stands for them)."""
        a, b = self.rp.held(rank)
        if self.job.mode != "wrap":
            a, b = max(a, 0), min(b, self.job.rows)
        return a, b

    def feasible(self) -> bool:
        """Every part's region is the whole matrix, or longer than twice the reach (so that
        the pass's border rule near an edge of the matrix reads rows of its region)."""
        job = self.job
        for r in self.rp.active:
            a, b = self.region(r)
            whole = (a, b) == (0, job.rows) and job.mode != "wrap"
            if not whole and b - a <= 2 * max(job.reach, 1):
                return False
        return True

    def run(self) -> Parts:
        job = self.job
        group = job.group
        job.launches, job.exchange_events = {}, []
        job.repeats = Repeats(job.skel.kind, job.skel.origin)
        with job.skel._naming_errors():
            inp = parts_of(job.src)
            if inp is None or inp.group is not group or inp.dist.name != "overlap" \
                    or inp.dist.halo < self.h:
                inp = distributed(job.src, group, Overlap(self.h))
            if inp.dist.halo != self.h:
                self.h = inp.dist.halo
                self.rp = RowPlan(job.ranges, job.rows, job.north, job.south, job.mode, self.h)
            job.rp, job.local_ghosts = self.rp, True
            bufs = [allocate(group, inp.dist, inp.shape, inp.dtype) for _ in range(2)]
            self.extra_args = job.extras(self.rp)
        by_runtime = _PREPARED.setdefault(self.tplan, weakref.WeakKeyDictionary())
        self._windows = {}
        for r in self.points:
            if any(isinstance(a, cl.MemoryObjectHolder) for a in self.extra_args[r]):
                # (a pass reading a buffer of the caller's is prepared for this call only:
                # the cache would keep the buffer alive)
                self._windows[r] = {}
                continue
            call_key = (job.rows, job.cols, job.mode, self.h, tuple(job.ranges),
                        tuple(sorted(self.points[r].items())),
                        tuple(arg_key(a) for a in self.extra_args[r]))
            calls = by_runtime.setdefault(group.runtimes[r], OrderedDict())
            windows = calls.get(call_key)
            if windows is None:
                windows = calls[call_key] = {}
                while len(calls) > CALLS_KEPT:
                    calls.popitem(last=False)
            else:
                calls.move_to_end(call_key)
            self._windows[r] = windows
        key = ("wrap", job.skel.cval) if job.mode == "wrap" else None
        if not inp.halo_valid or (key is not None and inp.ghosts != key):
            job.exchange(inp)
        inp.halo_valid, inp.ghosts = True, key
        cur, nxt, done = inp, 0, 0
        while done < job.iterations:
            steps = min(self.m * self.t, job.iterations - done)     # this round's
            more = done + steps < job.iterations
            left = steps
            while left > 0:                     # passes of t steps; the last exchanges
                kk = min(self.t, left)
                left -= kk
                dst = bufs[nxt]
                nxt ^= 1
                if left:
                    self._extended(cur, dst, kk, left)
                else:
                    self._round(cur, dst, kk, more)
                cur = dst
            done += steps
        job.submit()
        job.add_repeats("temporal")
        skel = job.skel
        skel.last_launch = group_launch(skel.kind, [ln for r in sorted(job.launches)
                                                    for ln in job.launches[r]])
        skel.last_launch.iterations = job.iterations
        skel.last_launch.k = self.m * self.t
        skel.last_launch.exchange_events = list(job.exchange_events)
        cur.halo_valid, cur.ghosts = False, None
        return cur

    def _extended(self, cur: Parts, dst: Parts, kk: int, left: int) -> None:
        """A pass of kk steps that is not the last of its round: every device computes its
        rows and the halo rows the ``left`` steps after it in the round still read (the
        overlap recomputed instead of exchanged)."""
        job, ext = self.job, left * self.reach
        for r in self.rp.active:
            lo, hi = job.ranges[r]
            a, b = lo - ext, hi + ext
            if job.mode != "wrap":
                a, b = max(a, 0), min(b, job.rows)
            self._pass(r, cur, dst, kk, a, b)

    def _round(self, cur: Parts, dst: Parts, kk: int, more: bool) -> None:
        """One pass of kk steps on every device; with ``more``, dst's halo exchanged after
        (its boundary rows computed first, sent while the interior is computed)."""
        job, h = self.job, self.h
        split = more and job.overlap and h > 0
        after, interiors = {}, []
        sends = self._sends if split else {}
        for r in self.rp.active:
            lo, hi = job.ranges[r]
            top, bottom = sends.get(r, (True, True))
            if split and hi - lo > 2 * h and (top or bottom):
                # the rows the neighbours need first (only the edges this device sends:
                # on 2 devices without wrap, one per device), the rest behind the copies
                a, b = (lo + h if top else lo), (hi - h if bottom else hi)
                after[r] = ([self._pass(r, cur, dst, kk, lo, a)] if top else []) \
                    + ([self._pass(r, cur, dst, kk, b, hi)] if bottom else [])
                interiors.append((r, a, b))
            else:
                after[r] = [self._pass(r, cur, dst, kk, lo, hi)]
        if not more:
            return
        if not split:
            job.exchange(dst)
            return
        moves = job.repeats.memo(("halo", id(dst)),
                                 lambda: job.moves(dst, self.rp.halo_transfers(False)))
        job.exchange_behind(moves, after,
                            lambda: [self._pass(r, cur, dst, kk, a, b)
                                     for r, a, b in interiors])

    @cached_property
    def _sends(self) -> dict[int, tuple[bool, bool]]:
        """Per device: whether its first h rows, and its last h rows, go to another device
        in an exchange (the rows a round computes before its copies start)."""
        transfers = self.rp.halo_transfers(False)
        out = {}
        for r in self.rp.active:
            lo, hi = self.job.ranges[r]
            sent = [(t.src_row, t.src_row + t.count) for t in transfers if t.src == r]
            out[r] = (any(a < lo + self.h and b > lo for a, b in sent),
                      any(a < hi and b > hi - self.h for a, b in sent))
        return out

    def _pass(self, rank: int, cur: Parts, dst: Parts, kk: int, a: int, b: int):
        """A pass of kk steps on device ``rank`` outputting rows [a, b) (matrix rows)."""
        rt = self.job.group.runtimes[rank]
        if rt is None:                        # a device of another process (MPI)
            return None
        part = cur.parts[rank]
        windows = self._windows[rank]
        key = (kk, a, b, part.first)
        win = windows.get(key)
        if win is None:
            win = windows[key] = self._prepare(rank, rt, part, kk, a, b)
            while len(windows) > WINDOWS_KEPT:
                windows.pop(next(iter(windows)))
        kernel, gsize, lsize, tail, point, copies = win
        src, out = part.buffer, dst.parts[rank].buffer
        own = copy_of(copies, (src.int_ptr, out.int_ptr), kernel)
        ev = self.job.repeats.fire(rank, rt, own, gsize, lsize, point,
                                   lambda: [out, src, *tail])
        if self.job.flush:
            rt.queue.flush()
        return ev

    def _prepare(self, rank: int, rt, part, kk: int, a: int, b: int) -> tuple:
        """Kernel, sizes, argument tail and point of a pass over rows [a, b), and the dict
        of its kernel copies (by buffers)."""
        job = self.job
        ra, rb = self.region(rank)
        point = dict(self.points[rank], t=kk)
        window = (a - ra, b - ra, (ra - part.first) * job.cols)
        shaped = dict(point, tb_rows=_chunk(self.tplan, point, b - a, job.cols, rt.device))
        buf = part.buffer
        kernel, geo, args = self.tplan.pass_launch(rt, shaped, buf, buf, rb - ra, job.cols,
                                                   self.extra_args[rank], window=window)
        return kernel, geo.global_size, geo.local_size, tuple(args[2:]), point, {}
