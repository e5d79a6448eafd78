"""Launching a stencil: one bound call on any pair of buffers, iterations, and repeats.

:class:`BoundStencil` is a stencil's plan with one call's extra arguments: it launches
``src -> dst`` through the tuner on its first launch and reuses the decided point after, so
``iterations=k`` and sequences cost one enqueue per step. A launch the OpenCL runtime refuses
takes the tuner's path wherever it happens (first launch, later iterations, repeat calls): the
refusal is recorded and the call goes on at the nearest legal point.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from .. import tuner
from ..containers import Container, Matrix, Vector
from ..errors import RefusedParameters
from .arguments import ScalarArg, scalar_converter, scalar_value
from .check_buffer import CheckBuffer, check_buffer
from .stencil_plan import VECTOR_WORD, MatrixExtra, StencilPlan, tile_bytes, vector_columns


class BoundStencil:
    """One stencil call's plan with its extra arguments, ready to launch on any buffers."""

    def __init__(self, skel, plan: StencilPlan, descs, values, shape):
        self.skel = skel
        self.plan = plan
        self.descs = descs
        self.values = values
        self.shape = shape
        self.out_dtype = plan.out_dtype
        self._extra_args = None
        self.checks: CheckBuffer | None = None     # a checked kernel's check buffer
        self.last: dict | None = None      # the latest tuned launch (see repeat_launcher)

    def extra_args(self, rt) -> list:
        if self._extra_args is None:
            tm = self.plan.muscle
            out = []
            for k, (d, v) in enumerate(zip(self.descs, self.values)):
                if isinstance(d, ScalarArg):
                    out.append(scalar_value(v, tm.scalar_dtypes.get(k + 1, d.dtype),
                                            self.skel.origin))
                elif isinstance(d, MatrixExtra):
                    out.append(v.device_buffer(rt))
                else:
                    out.append(v.device_buffer(rt))
                    out.append(np.int64(v.shape[0]))
            self.checks = check_buffer(self.plan, rt)
            if self.checks is not None:
                out.append(self.checks.buffer)
            self._extra_args = out
        return self._extra_args

    def raise_if_failed(self) -> None:
        """After the call's launches: a checked read out of range is a BoundsError."""
        if self.checks is not None:
            self.checks.raise_if_failed(self.skel.origin)

    def launch(self, rt, src: Matrix, dst: Matrix, forced, decided: dict,
               launches: list, key=None) -> None:
        """Run src -> dst; parameters are decided by the tuner on the first launch of this
        plan (``decided`` remembers them) and reused after, so iterations cost one enqueue.
        A refusal of a reused point goes back to the tuner, as on the first launch."""
        plan, skel = self.plan, self.skel
        rows, cols = self.shape
        if rows * cols == 0:
            skel._check_forced_on_empty(plan, forced, rt)
            dst.mark_device_written()
            launches.append(_rt.Launch(skel.kind, {}, (0, 0), None, source="empty"))
            return
        with skel._naming_errors():
            fixed = [dst.device_buffer(rt), src.device_buffer(rt), np.int32(rows),
                     np.int32(cols)]
            extra = self.extra_args(rt)
        info: dict = {}

        def run(point):
            gsize, lsize = geometry(point, rows, cols, plan.tile_itemsize)
            args = list(fixed)
            if int(point["local"]):
                args.append(local_memory(tile_bytes(plan.shape, plan.tile_itemsize, point)))
            args.extend(extra)
            kernel = plan.kernel(rt, point)
            info["g"], info["l"], info["args"], info["kernel"] = gsize, lsize, args, kernel
            ev = rt.launch(kernel, gsize, lsize, args, params=point, skeleton=skel.kind,
                           origin=skel.origin)
            return dst, [ev]

        key = (key, id(plan))
        point = decided.get(key)
        if point is not None:
            try:
                _, events = run(point)
            except RefusedParameters:
                del decided[key]          # the tuner records it and falls back, below
            else:
                launches.append(_rt.Launch(skel.kind, dict(point), info["g"], info["l"],
                                           events, source="repeat"))
                dst.mark_device_written()
                return
        dataset = {"n": float(rows * cols), "rows": float(rows), "cols": float(cols),
                   "dtype_size": float(plan.in_dtype.itemsize)}
        outcome = skel._run_tuned(plan, rt, dataset, forced, run)
        decided[key] = dict(outcome.params)
        self.last = dict(info, point=outcome.params, ticket=outcome.ticket)
        launches.append(_rt.Launch(skel.kind, dict(outcome.params), info["g"], info["l"],
                                   list(outcome.events), list(outcome.refused),
                                   outcome.source))
        dst.mark_device_written()


def geometry(point, rows: int, cols: int, itemsize: int = VECTOR_WORD,
             ) -> tuple[tuple[int, int], tuple[int, int] | None]:
    """Global and local size of a launch over a rows x cols matrix at ``point`` (``itemsize``:
    bytes of an input element, which sets the vector path's columns per work-item; a launch
    that leaves it at 4 for narrower elements is still correct, with idle work-groups)."""
    wr, wc, cr = int(point["wg_r"]), int(point["wg_c"]), int(point["cr"])
    cc = vector_columns(point, itemsize) if int(point["vec"]) > 1 else int(point["cc"])
    if wr == 0 and wc == 0:       # the OpenCL runtime chooses (local_size=None)
        return (-(-cols // cc), -(-rows // cr)), None
    return (-(-cols // (wc * cc)) * wc, -(-rows // (wr * cr)) * wr), (wc, wr)


def repeat_launcher(skel, bound: BoundStencil, m, extras, rt, stem=None):
    """A launcher for repeats of a one-step call (``u = step(u)`` in a loop): same runtime
    (in auto mode, ``stem`` given: the cost model's remembered choice is still it), input
    Matrix dtype and shape, the same kinds of extras and a settled tuner decision
    (``tuner.ticket_valid``); it skips binding, plan and tuner look-ups. None when the call
    does not qualify; the launcher itself returns None for anything unexpected, and the
    full path runs instead (as for Map, see elementwise._Elementwise._make_fast)."""
    last = bound.last
    tm = bound.plan.muscle
    if last is None or last["ticket"] is None or type(m) is not Matrix or bound.plan.checked \
            or tm.int_checks is not None:     # extras checked per call (host_ints.py)
        return None
    specs = []
    for k, v in enumerate(extras):
        if isinstance(v, (Matrix, Vector)):
            specs.append((type(v), v.dtype, v.shape, None))
        elif type(v) in (bool, int, float) or isinstance(v, np.generic):
            specs.append((type(v), None, None,
                          scalar_converter(v, tm.scalar_dtypes, k + 1, skel.origin)))
        else:
            return None
    template = list(last["args"])
    first_extra = len(template) - len(bound.extra_args(rt))
    shape, in_dt, odt = bound.shape, m.dtype, bound.out_dtype
    nbytes = shape[0] * shape[1] * odt.itemsize
    kernel, gsize, lsize = last["kernel"], last["g"], last["l"]
    point, ticket = last["point"], last["ticket"]
    ticket_valid = tuner.ticket_valid

    def fast(m, call_extras):
        if type(m) is not Matrix or m.shape != shape or m.dtype != in_dt \
                or len(call_extras) != len(specs) or not ticket_valid(ticket):
            return None
        choice = None
        if _rt.fixed() is not rt:
            # the containers in the order ``place`` gives them to the cost model
            arrays = [v for v in call_extras if isinstance(v, Container)]
            choice = skel._auto_repeat(rt, stem, [m, *[v for v in arrays if v.ndim == 2],
                                                  *[v for v in arrays if v.ndim == 1]])
            if choice is None:
                return None
        argv = template[:first_extra]
        try:
            for v, (typ, dt, shp, conv) in zip(call_extras, specs):
                if type(v) is not typ:
                    return None
                if conv is not None:
                    argv.append(conv(v))
                    continue
                if v.dtype != dt or (typ is Matrix and v.shape != shp):
                    return None
                argv.append(v.device_buffer(rt))
                if typ is Vector:
                    argv.append(np.int64(v.shape[0]))
        except (OverflowError, ValueError, TypeError):
            return None
        argv[0] = buf = rt.allocate(nbytes)
        argv[1] = m.device_buffer(rt)
        dst = Matrix.from_device(buf, shape, odt, rt)
        return dst if skel._relaunch(rt, kernel, gsize, lsize, argv, point, choice,
                                     dst) else None

    return fast


def local_memory(nbytes: int) -> cl.LocalMemory:
    return cl.LocalMemory(max(int(nbytes), 1))


def place(skel, bound: BoundStencil, src, iterations: int):
    """The runtime a call of ``bound`` runs on (``Skeleton._runtime_for``: in auto mode the
    cost model's choice, with the inputs moved there), fp64 checked; and the choice."""
    plan = bound.plan
    rows, cols = src.shape
    dataset = {"n": float(rows * cols), "rows": float(rows), "cols": float(cols),
               "dtype_size": float(plan.in_dtype.itemsize)}
    arrays = [v for v in bound.values if isinstance(v, Container)]
    rt, choice = skel._runtime_for(
        plan, dataset, [src, *[v for v in arrays if v.ndim == 2]],
        [v for v in arrays if v.ndim == 1], out_bytes=rows * cols * plan.out_dtype.itemsize,
        iterations=iterations)
    plan.check_device(rt)
    return rt, choice


def merge_launches(kind: str, launches: list) -> _rt.Launch:
    """One Launch describing a whole call (all iterations): the first launch's parameters
    and sizes, every event, every refusal."""
    first = launches[0]
    events = [e for ln in launches for e in ln.events]
    refused = [r for ln in launches for r in ln.refused]
    merged = _rt.Launch(kind, dict(first.params), first.global_size, first.local_size, events,
                        refused, first.source)
    merged.iterations = len(launches)
    return merged
