"""StencilSequence: stencils applied one after another, ``(a >> b >> c)(m)``, staged, fused
or streamed.

Staged, every stage is its own kernel and the intermediate matrices stay on the device. Fused
(:mod:`.stencil_fused`), the whole sequence is one kernel whose tile carries the summed halo:
global memory sees the input and the output once, and the intermediate cells around each tile
are recomputed. Streamed (:mod:`.stencil_stream`), the sequence is one streaming pass: each
stream walks down a column strip, every stage's newest rows held on the chip (levels of
different dtypes as words), so only the overlap columns are recomputed. The tuner decides per
sequence, dtype and size (:mod:`.stencil_decision`: a ``fuse`` parameter beside the fused and
the streamed tiles, ``fuse = 0`` staged, 1 fused, 2 streamed); all give the same results bit
for bit. The first guess is
staged everywhere (:meth:`DecisionPlans.default`: neither won on an H200 or PoCL). A sequence runs
staged wherever neither is legal (offsets known only at run time, checked reads in debug mode,
wrap mixed with other modes, a summed halo over ``MAX_HALO`` and a reach beyond the stream's,
``iterations > 1`` of a sequence that changes the dtype), where per-stage ``params`` are
forced, and on a device group.

This module knows its stages only through their public surface (``bind``, ``origin``,
``border``, ...), so that :mod:`.stencil` can import it for ``a >> b``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .. import runtime as _rt
from .. import tuner
from ..containers import Matrix, empty_like_shape
from ..distribution import stencil as distributed_stencil
from ..errors import ParameterError, ShapeError, SkelpyError
from . import stencil_fused as _fused
from . import stencil_stream as _stream
from .arguments import ScalarArg
from .base import checked_signature
from .limits import check_forced, check_iterations, check_output
from .stencil_decision import DecisionPlans
from .stencil_launch import BoundStencil, merge_launches, place
from .stencil_plan import MatrixExtra, VectorExtra
from .stencil_shape import cval_literal
from .stencil_stream_tile import TILE_NAMES

__all__ = ["StencilSequence", "NAMES"]

_INT_LIMIT = 2**31 - 1
#: the decision's parameters: fuse (0 staged, 1 fused, 2 streamed) and both tiles
NAMES = _fused.NAMES + TILE_NAMES
MAX_STREAM_REACH = 8          # rows/columns a stage may reach in a streamed sequence



class StencilSequence:
    """Stencils applied one after another, ``(a >> b >> c)(m)``; intermediate matrices stay
    on the device (or on the chip, fused). ``seq(m, iterations=k)`` repeats the whole sequence
    k times.

    Extra arguments given to the sequence go to every stage, each taking as many as its muscle
    has parameters after the neighbourhood (SkelCL passes the same extras to all stages).
    ``last_launch.fused`` says whether the call ran as one kernel (per iteration),
    ``last_launch.streamed`` whether that kernel was the streaming pass."""

    kind = "stencil_sequence"

    def __init__(self, *stages):
        flat: list = []
        for s in stages:
            if isinstance(s, StencilSequence):
                flat.extend(s.stages)
            elif getattr(s, "kind", None) == "stencil" and hasattr(s, "bind"):
                flat.append(s)
            else:
                raise ParameterError(f"a StencilSequence chains Stencils; got {s!r}")
        if not flat:
            raise ParameterError("a StencilSequence needs at least one Stencil")
        self.stages: tuple = tuple(flat)
        self.last_launch: _rt.Launch | None = None
        self.last_launches: list[_rt.Launch] = []
        self._fused_plans: dict = {}

    def __rshift__(self, other) -> StencilSequence:
        return StencilSequence(self, other)

    def __rrshift__(self, other) -> StencilSequence:
        return StencilSequence(other, self)

    def __len__(self) -> int:
        return len(self.stages)

    def __repr__(self) -> str:
        return "<skelpy.StencilSequence " + " >> ".join(s.origin for s in self.stages) + ">"

    @property
    def origin(self) -> str:
        return "StencilSequence(" + ", ".join(s.muscle.origin for s in self.stages) + ")"

    @checked_signature
    def __call__(self, m, *extras, iterations: int = 1,
                 params: Mapping | Sequence[Mapping | None] | None = None) -> Matrix:
        """Run every stage in order (``iterations`` times); the result stays on the device.

        ``params``: one dict for every stage, or a list with one dict (or None) per stage; or
        the decision: ``{"fuse": 0}`` (staged), ``{"fuse": 1, "fu_wc": ..., ...}`` (fused),
        ``{"fuse": 2, "tb_wc": ..., ...}`` (streamed)."""
        iterations = check_iterations(self.origin, iterations)
        fused_forced, stage_params = self._split_params(params)
        self._check_extras(extras)
        for stage in self.stages:
            stage._ready()
        src = self.stages[0]._as_input(m)
        if iterations == 0:
            self._bind_all(src, extras)         # misuse is an error with no step to run too
            self.last_launch = _rt.Launch(self.kind, {}, (0, 0), None, source="none")
            self.last_launch.fused = self.last_launch.streamed = False
            return src.copy()
        first, choice = self.stages[0], None
        if _rt.current().group is not None:              # several devices at once
            for i in range(len(self.stages)):
                self._bind_stage(i, src, extras)         # the checks, before anything runs
            cur, per_stage = distributed_stencil.run_sequence(self, src, extras, iterations,
                                                              stage_params)
        else:
            # one device for the whole sequence, placed as the first stage run len(stages)
            # times
            rt, choice = place(first, self._bind_stage(0, src, extras), src,
                               iterations * len(self.stages))
            if all(p is None for p in stage_params):
                done = self._run_fused(src, extras, iterations, fused_forced, rt, choice)
                if done is not None:
                    if choice is not None:
                        self.last_launch.choice = choice
                        first._chosen(choice, done)
                    return done
            cur, per_stage = self._run_stages(src, extras, iterations, stage_params, rt, choice)
        self._record_staged(per_stage, iterations)
        if choice is not None:
            self.last_launch.choice = choice
            first._chosen(choice, cur)
        return cur

    # -- staged --------------------------------------------------------------------------------
    def _run_stages(self, src, extras, iterations, stage_params, rt, choice=None):
        per_stage: list[list] = [[] for _ in self.stages]
        decided: dict = {}
        cur = src
        for _ in range(iterations):
            for i, stage in enumerate(self.stages):
                bound = self._bind_stage(i, cur, extras)
                if choice is not None:
                    bound.plan.check_device(rt)
                check_output(stage.origin, src.shape, bound.out_dtype, rt)
                dst = empty_like_shape(src.shape, bound.out_dtype, rt)
                bound.launch(rt, cur, dst, stage._check_params_arg(stage_params[i]), decided,
                             per_stage[i], key=i)
                bound.raise_if_failed()
                cur = dst
        return cur, per_stage

    def _record_staged(self, per_stage, iterations: int) -> None:
        """``last_launch``: every stage's parameters, events and refusals."""
        self.last_launches = []
        for stage, launches in zip(self.stages, per_stage):
            stage.last_launch = merge_launches(stage.kind, launches)
            self.last_launches.append(stage.last_launch)
        events = [e for ln in self.last_launches for e in ln.events]
        refused = [r for ln in self.last_launches for r in ln.refused]
        last = self.last_launches[-1]
        self.last_launch = _rt.Launch(
            self.kind, {i: dict(ln.params) for i, ln in enumerate(self.last_launches)},
            last.global_size, last.local_size, events, refused,
            "+".join(sorted({ln.source for ln in self.last_launches})))
        self.last_launch.iterations = iterations
        self.last_launch.fused = False
        self.last_launch.streamed = False

    # -- fused ---------------------------------------------------------------------------------
    def fused_plan(self, src: Matrix, extras: Sequence):
        """The fused plan of a call on ``src`` (:class:`.stencil_fused.FusedPlan`), or why
        this call cannot run fused (a str)."""
        def make(bounds):
            try:
                return _fused.FusedPlan([self._fused_stage(i, b) for i, b in enumerate(bounds)],
                                        big=src.size + 1 >= _INT_LIMIT,
                                        polish=self.stages[0].unroll_hints)
            except _fused.Unsupported as exc:
                return str(exc)
            except SkelpyError as exc:        # a muscle the fused kernel cannot take
                return f"{type(exc).__name__}: {exc}"

        return self._plan_of("fused", src, extras, make)

    def _plan_of(self, kind: str, src: Matrix, extras: Sequence, make):
        """``make(bounds)``'s plan of this call (``kind``: fused or stream), once per set of
        stage plans, or why it has none (a str; checked reads never fuse or stream)."""
        bounds = self._bind_all(src, extras)
        key = (kind,) + tuple(id(b.plan) for b in bounds)
        hit = self._fused_plans.get(key)
        if hit is not None:
            return hit[1]
        if any(b.plan.checked for b in bounds):
            plan = "its reads are checked at run time (debug mode, or offsets that are not " \
                   "constants)"
        else:
            plan = make(bounds)
        # the plans kept alive keep their ids unique
        self._fused_plans[key] = (tuple(b.plan for b in bounds), plan)
        return plan

    def _fused_stage(self, i: int, bound: BoundStencil) -> _fused.FusedStage:
        stage, plan = self.stages[i], bound.plan
        extras = []
        for q, d in enumerate(bound.descs):
            if isinstance(d, ScalarArg):
                extras.append(("scalar", d.dtype, d.weak,
                               plan.muscle.scalar_dtypes.get(q + 1, d.dtype)))
            else:
                extras.append(("matrix" if isinstance(d, MatrixExtra) else "vector", d.dtype,
                               False, d.dtype))
        shape = plan.shape
        cval = stage.cval
        return _fused.FusedStage(
            stage.muscle, (shape.north, shape.south, shape.east, shape.west), stage.border,
            lambda dt: cval_literal(cval, dt), plan.in_dtype, stage.out_dtype, plan.out_dtype,
            tuple(extras))

    def stream_plan(self, src: Matrix, extras: Sequence):
        """The streamed plan of a call on ``src`` (:class:`.stencil_stream.StreamPlan`: the
        stages as one streaming pass, each level in its stage's dtype), or why this call
        cannot stream (a str)."""
        def make(bounds):
            if len(self.stages) < 2:
                return "one stage: nothing to stream"
            kinds = {ScalarArg: "scalar", MatrixExtra: "matrix", VectorExtra: "vector"}
            widest = max(bounds, key=lambda b: len(b.descs))
            stages = []
            for stage, b in zip(self.stages, bounds):
                sh = b.plan.shape
                stages.append(_stream.Stage(
                    stage.muscle, (sh.north, sh.south, sh.east, sh.west), stage.border,
                    lambda dt, c=stage.cval: cval_literal(c, dt), stage.out_dtype))
            try:
                splan = _stream.StreamPlan(
                    stages, src.dtype,
                    [_stream.Extra(kinds[type(d)], d.dtype, getattr(d, "weak", False))
                     for d in widest.descs],
                    big=src.size + 1 >= _INT_LIMIT, polish=self.stages[0].unroll_hints,
                    max_reach=MAX_STREAM_REACH)
            except _stream.Unsupported as exc:
                return str(exc)
            except SkelpyError as exc:        # a muscle the streaming kernel cannot take
                return f"{type(exc).__name__}: {exc}"
            made = [b.out_dtype for b in bounds]
            if list(splan.levels[1:]) != made:
                return f"the stages make {splan.levels[1:]} streamed, {made} staged"
            return splan

        return self._plan_of("stream", src, extras, make)

    def decision_plans(self, src: Matrix, extras: Sequence, iterations: int = 1):
        """The fused and streamed plans a call decides among (:class:`DecisionPlans`), or why
        it can only run staged (a str)."""
        if src.size == 0:
            return "an empty matrix"
        return self._plans_any_size(src, extras, iterations)

    def _plans_any_size(self, src: Matrix, extras: Sequence, iterations: int):
        """:meth:`decision_plans` without the rule that an empty matrix runs staged."""
        fplan, splan = self.fused_plan(src, extras), self.stream_plan(src, extras)
        out = fplan.out_dtype if not isinstance(fplan, str) else (
            splan.out_dtype if not isinstance(splan, str) else None)
        if iterations > 1 and out is not None and out != src.dtype:
            return "repeating a sequence that changes the dtype"
        if isinstance(fplan, str) and isinstance(splan, str):
            return fplan if fplan == splan else f"fused: {fplan}; streamed: {splan}"
        return DecisionPlans(None if isinstance(fplan, str) else fplan,
                             None if isinstance(splan, str) else splan)

    def _request(self, plans, src: Matrix, iterations: int, forced, rt, run=None):
        rows, cols = src.shape
        point = plans.complete(forced, rt.device)
        if point is not None:
            free = _fused.NAMES[1:] if int(point.get("fuse", 0)) == 1 else TILE_NAMES
            # completed once here (the tuner takes the whole point as it is)
            point = check_forced(plans.space(rt), lambda p: plans.broken(p, rt.device), point,
                                 self.origin, rt.device.name, free=free, shown=forced)
        return tuner.TuningRequest(
            skeleton="stencil", kernel_key=plans.kernel_key, device=rt.device,
            space=plans.space(rt), features=plans.features,
            dataset={"n": float(rows * cols), "rows": float(rows), "cols": float(cols),
                     "dtype_size": float(plans.in_dtype.itemsize),
                     "iterations": float(iterations)},
            forced=point, run=run, origin=self.origin)

    def _run_fused(self, src, extras, iterations, forced, rt, choice):
        """The call through the tuner's staged, fused or streamed decision; None where only
        staged is possible and nothing forces another (the caller runs the stages)."""
        want = int(forced.get("fuse", 0)) if forced is not None else 0
        if want and src.size == 0:
            return self._forced_empty(src, extras, iterations, forced, want, rt)
        plans = self._forced_plans(src, extras, iterations, forced)
        if isinstance(plans, str):
            return None
        bounds = self._bind_all(src, extras)
        rows, cols = src.shape
        note: dict = {}

        def run(point):
            how = int(point["fuse"])
            if not how:
                out, per_stage = self._run_stages(src, extras, iterations,
                                                  [None] * len(self.stages), rt, choice)
                note["staged"] = per_stage
                return out, [e for launches in per_stage for ln in launches for e in ln.events]
            note.pop("staged", None)
            for b in bounds:
                if choice is not None:
                    b.plan.check_device(rt)
            out_dtype = plans.out_dtype
            check_output(self.origin, src.shape, out_dtype, rt)
            if how == 2:
                return self._run_streamed(plans.stream, point, src, bounds, iterations, rt,
                                          note)
            fplan = plans.fused
            extra_args = [a for b in bounds for a in b.extra_args(rt)]
            cur, events, spare = src, [], None
            for _ in range(iterations):
                dst = spare if spare is not None else empty_like_shape(src.shape,
                                                                       out_dtype, rt)
                events.append(fplan.launch(rt, point, dst.device_buffer(rt),
                                           cur.device_buffer(rt), rows, cols, extra_args))
                dst.mark_device_written()
                spare = cur if cur is not src else None
                cur = dst
            note["sizes"] = fplan.geometry(point, rows, cols)
            return cur, events

        outcome = tuner.execute(self._request(plans, src, iterations, forced, rt, run))
        if "staged" in note:
            self._record_staged(note["staged"], iterations)
            self.last_launch.decision = dict(outcome.params)
            return outcome.result
        gsize, lsize = note["sizes"]
        launch = _rt.Launch(self.kind, dict(outcome.params), gsize, lsize, list(outcome.events),
                            list(outcome.refused), outcome.source)
        launch.iterations = iterations
        launch.fused = True
        launch.streamed = int(outcome.params["fuse"]) == 2
        launch.decision = dict(outcome.params)
        self.last_launch = launch
        self.last_launches = [launch]
        return outcome.result

    def _forced_plans(self, src, extras, iterations, forced):
        """:meth:`decision_plans`, where a forced fused or streamed form must exist: a
        ParameterError saying why where it does not. An empty matrix, which otherwise runs
        staged, has the plans of any size here (its forced point is checked as elsewhere)."""
        want = int(forced.get("fuse", 0)) if forced is not None else 0
        plans = (self._plans_any_size if want and src.size == 0 else self.decision_plans)(
            src, extras, iterations)
        if want and (isinstance(plans, str) or (want == 1 and plans.fused is None)
                     or (want == 2 and plans.stream is None)):
            why = plans if isinstance(plans, str) else (
                self.fused_plan(src, extras) if want == 1 else self.stream_plan(src, extras))
            how = "fused" if want == 1 else "streamed"
            raise ParameterError(f"{self.origin}: params {dict(forced)}: this sequence "
                                 f"cannot run {how} ({why}); use fuse=0 or leave it out")
        return plans

    def _forced_empty(self, src, extras, iterations, forced, want: int, rt) -> Matrix:
        """A call forced fused or streamed on an empty matrix: the point is checked as for any
        size (one illegal there is an error here too), and the result is empty, of the
        sequence's dtype, as staged; no kernel runs."""
        plans = self._forced_plans(src, extras, iterations, forced)
        point = self._request(plans, src, iterations, forced, rt).forced
        self._bind_all(src, extras)
        check_output(self.origin, src.shape, plans.out_dtype, rt)
        out = empty_like_shape(src.shape, plans.out_dtype, rt)
        launch = _rt.Launch(self.kind, dict(point), (0, 0), None, source="none")
        launch.iterations = iterations
        launch.fused = True
        launch.streamed = want == 2
        launch.decision = dict(point)
        self.last_launch = launch
        self.last_launches = [launch]
        return out

    def _run_streamed(self, splan, point, src, bounds, iterations, rt, note):
        """``iterations`` runs of the sequence as streaming passes of one cycle each."""
        rows, cols = src.shape
        widest = max(bounds, key=lambda b: len(b.descs))
        tile = dict({k: point[k] for k in TILE_NAMES}, t=splan.n_stages)
        bufs = [empty_like_shape(src.shape, splan.out_dtype, rt)]
        bufs.append(empty_like_shape(src.shape, splan.out_dtype, rt) if iterations > 1
                    else bufs[0])
        _buf, k, events = splan.run(rt, tile, src.device_buffer(rt), rows, cols,
                                    splan.n_stages * iterations, widest.extra_args(rt),
                                    [b.device_buffer(rt) for b in bufs])
        out = bufs[k]
        out.mark_device_written()
        geo = splan.geometry(tile, rows, cols, rt.device)
        note["sizes"] = (geo.global_size, geo.local_size)
        return out, events

    def fused_decision(self, m, *extras, iterations: int = 1) -> dict | None:
        """The point the tuner would run a call with (``fuse`` 0: staged, 1: fused, 2:
        streamed), without running it; None where the call can only run staged."""
        src = self.stages[0]._as_input(m)
        plans = self.decision_plans(src, extras, iterations)
        if isinstance(plans, str):
            return None
        point, _source = tuner.choose_params(
            self._request(plans, src, iterations, None, _rt.current()))
        return dict(point)

    # -- source --------------------------------------------------------------------------------
    @checked_signature
    def source(self, m, *extras, params: Mapping | Sequence[Mapping | None] | None = None
               ) -> str:
        """The OpenCL C a call with these arguments builds: fused or streamed, the one program
        (after a comment ``/* fused: ... */`` or ``/* streamed: ... */``); staged, one program
        per stage in order, each as ``Stencil.source`` shows it (after a comment naming the
        stage)."""
        fused_forced, stage_params = self._split_params(params)
        self._check_extras(extras)
        src = self.stages[0]._as_input(m)
        rt = _rt.current()
        if all(p is None for p in stage_params):
            plans = self._forced_plans(src, extras, 1, fused_forced)   # as a call decides
            if not isinstance(plans, str):
                point, _source = tuner.choose_params(
                    self._request(plans, src, 1, fused_forced, rt))
                if int(point["fuse"]) == 1:
                    fplan = plans.fused
                    return (f"/* fused: {len(self.stages)} stages in one kernel, "
                            f"{self.origin} */\n"
                            + fplan.source.program_text(fplan.macros(point)))
                if int(point["fuse"]) == 2:
                    splan = plans.stream
                    tile = dict({k: point[k] for k in TILE_NAMES}, t=splan.n_stages)
                    return (f"/* streamed: {len(self.stages)} stages in one pass, "
                            f"{self.origin} */\n"
                            + splan.program_text(rt, tile, *src.shape))
        texts = []
        cur = src
        for i, stage in enumerate(self.stages):
            bound = self._bind_stage(i, cur, extras)
            n_extra = len(bound.values)
            texts.append(f"/* stage {i}: {stage.origin} */\n"
                         + stage.source(cur, *extras[:n_extra], params=stage_params[i]))
            # the next stage reads this one's output: only its dtype and shape matter here
            cur = Matrix.from_device(None, src.shape, bound.out_dtype, rt)
        return "\n".join(texts)

    # -- binding -------------------------------------------------------------------------------
    def _check_extras(self, extras: Sequence) -> None:
        """Extras that no stage takes are a mistake (as for a Stencil's call)."""
        most = max(max(s.muscle.n_params - 1, 0) for s in self.stages)
        if len(extras) > most:
            raise ShapeError(f"{self.origin}: {len(extras)} extra argument(s) given; the "
                             f"stages take at most {most} (each the first ones it has)")

    def _bind_stage(self, i: int, cur: Matrix, extras: Sequence) -> BoundStencil:
        stage = self.stages[i]
        n_extra = max(stage.muscle.n_params - 1, 0)
        if n_extra > len(extras):
            raise ShapeError(f"{stage.origin}: stage {i} takes {n_extra} extra "
                             f"argument(s) but the sequence was given {len(extras)}")
        return stage.bind(cur, extras[:n_extra])

    def _bind_all(self, src: Matrix, extras: Sequence) -> list[BoundStencil]:
        """Every stage bound as its staged run binds it (each stage's input dtype is the
        one before it makes)."""
        bounds, cur = [], src
        for i in range(len(self.stages)):
            b = self._bind_stage(i, cur, extras)
            bounds.append(b)
            cur = Matrix.from_device(None, src.shape, b.out_dtype, _rt.current())
        return bounds

    def _split_params(self, params) -> tuple[dict | None, list]:
        """(the forced fused decision, the per-stage params)."""
        n = len(self.stages)
        if params is None:
            return None, [None] * n
        if isinstance(params, Mapping):
            fused = {k: v for k, v in params.items() if k in NAMES}
            if fused:
                rest = {k: v for k, v in params.items() if k not in NAMES}
                if rest:
                    raise ParameterError(f"{self.origin}: params {dict(params)} mixes the "
                                         f"fused decision (fuse, fu_*, tb_*) with "
                                         "stage parameters; give one or the other")
                guess = 2 if set(fused) & set(TILE_NAMES) else 1
                how = fused.setdefault("fuse", guess)
                if not isinstance(how, (int, np.integer)) or how not in (0, 1, 2):
                    raise ParameterError(f"{self.origin}: params {dict(params)}: fuse is 0 "
                                         "(staged), 1 (fused) or 2 (streamed)")
                if not how:
                    fused = {"fuse": 0}
                return fused, [None] * n
            return None, [params] * n
        if isinstance(params, Sequence) and not isinstance(params, str) and len(params) == n:
            return None, list(params)
        raise ParameterError(f"{self.origin}: params must be a dict or a list of {n} dicts")
