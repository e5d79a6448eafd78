"""StencilSequence: stencils applied one after another, ``(a >> b >> c)(m)``, fused or staged.

Staged, every stage is its own kernel and the intermediate matrices stay on the device. Fused
(:mod:`.stencil_fused`), the whole sequence is one kernel whose tile carries the summed halo:
global memory sees the input and the output once, and the intermediate cells around each tile
are recomputed. The tuner decides per sequence, dtype and size (a ``fuse`` parameter beside the
fused tile: ``fuse = 0`` is the staged run); both give the same results bit for bit. A sequence
runs staged wherever fusion is not legal (offsets known only at run time, checked reads in
debug mode, wrap mixed with other modes, a summed halo over ``MAX_HALO``, ``iterations > 1``
of a sequence that changes the dtype), where per-stage ``params`` are forced, and on a device
group.

This module knows its stages only through their public surface (``bind``, ``origin``,
``border``, ...), so that :mod:`.stencil` can import it for ``a >> b``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .. import runtime as _rt
from .. import tuner
from ..containers import Matrix, empty_like_shape
from ..distribution import stencil as distributed_stencil
from ..errors import ParameterError, ShapeError, SkelpyError
from . import stencil_fused as _fused
from .arguments import ScalarArg
from .base import checked_signature
from .limits import check_iterations, check_output
from .stencil_launch import BoundStencil, merge_launches, place
from .stencil_plan import MatrixExtra
from .stencil_shape import cval_literal

__all__ = ["StencilSequence"]

_INT_LIMIT = 2**31 - 1


class StencilSequence:
    """Stencils applied one after another, ``(a >> b >> c)(m)``; intermediate matrices stay
    on the device (or on the chip, fused). ``seq(m, iterations=k)`` repeats the whole sequence
    k times.

    Extra arguments given to the sequence go to every stage, each taking as many as its muscle
    has parameters after the neighbourhood (SkelCL passes the same extras to all stages).
    ``last_launch.fused`` says whether the call ran as one fused kernel."""

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
        the fused decision: ``{"fuse": 0}`` (staged), ``{"fuse": 1, "fu_wc": ..., ...}``."""
        iterations = check_iterations(self.origin, iterations)
        fused_forced, stage_params = self._split_params(params)
        for stage in self.stages:
            stage._ready()
        src = self.stages[0]._as_input(m)
        if iterations == 0:
            self.last_launch = _rt.Launch(self.kind, {}, (0, 0), None, source="none")
            self.last_launch.fused = False
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

    # -- fused ---------------------------------------------------------------------------------
    def fused_plan(self, src: Matrix, extras: Sequence):
        """The fused plan of a call on ``src`` (:class:`.stencil_fused.FusedPlan`), or why
        this call cannot run fused (a str)."""
        bounds = self._bind_all(src, extras)
        key = tuple(id(b.plan) for b in bounds)
        hit = self._fused_plans.get(key)
        if hit is not None:
            return hit[1]
        if any(b.plan.checked for b in bounds):
            fplan = "its reads are checked at run time (debug mode, or offsets that are not " \
                    "constants)"
        else:
            try:
                fplan = _fused.FusedPlan([self._fused_stage(i, b) for i, b in enumerate(bounds)],
                                         big=src.size + 1 >= _INT_LIMIT,
                                         polish=self.stages[0].unroll_hints)
            except _fused.Unsupported as exc:
                fplan = str(exc)
            except SkelpyError as exc:        # a muscle the fused kernel cannot take
                fplan = f"{type(exc).__name__}: {exc}"
        # the plans kept alive keep their ids unique
        self._fused_plans[key] = (tuple(b.plan for b in bounds), fplan)
        return fplan

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

    def _fused_request(self, fplan, src: Matrix, iterations: int, forced, rt, run=None):
        rows, cols = src.shape
        return tuner.TuningRequest(
            skeleton="stencil", kernel_key=fplan.kernel_key, device=rt.device,
            space=fplan.space(rt), features=fplan.features,
            dataset={"n": float(rows * cols), "rows": float(rows), "cols": float(cols),
                     "dtype_size": float(fplan.in_dtype.itemsize),
                     "iterations": float(iterations)},
            forced=dict(forced) if forced else None, run=run, origin=self.origin)

    def _run_fused(self, src, extras, iterations, forced, rt, choice):
        """The call through the tuner's fused-or-staged decision; None where it cannot fuse
        and nothing forces it (the caller runs the stages)."""
        fplan = self.fused_plan(src, extras)
        if isinstance(fplan, str) or (iterations > 1 and fplan.out_dtype != src.dtype) \
                or src.size == 0:
            if forced is not None and int(forced.get("fuse", 0)) == 1:
                why = fplan if isinstance(fplan, str) else (
                    "repeating a sequence that changes the dtype" if src.size else
                    "an empty matrix")
                raise ParameterError(f"{self.origin}: params {dict(forced)}: this sequence "
                                     f"cannot run fused ({why}); use fuse=0 or leave it out")
            return None
        forced = _with_tile(fplan, forced, rt)
        bounds = self._bind_all(src, extras)
        rows, cols = src.shape
        note: dict = {}

        def run(point):
            if not int(point["fuse"]):
                out, per_stage = self._run_stages(src, extras, iterations,
                                                  [None] * len(self.stages), rt, choice)
                note["staged"] = per_stage
                return out, [e for launches in per_stage for ln in launches for e in ln.events]
            note.pop("staged", None)
            for b in bounds:
                if choice is not None:
                    b.plan.check_device(rt)
            extra_args = [a for b in bounds for a in b.extra_args(rt)]
            check_output(self.origin, src.shape, fplan.out_dtype, rt)
            cur, events, spare = src, [], None
            for _ in range(iterations):
                dst = spare if spare is not None else empty_like_shape(src.shape,
                                                                       fplan.out_dtype, rt)
                events.append(fplan.launch(rt, point, dst.device_buffer(rt),
                                           cur.device_buffer(rt), rows, cols, extra_args))
                dst.mark_device_written()
                spare = cur if cur is not src else None
                cur = dst
            note["sizes"] = fplan.geometry(point, rows, cols)
            return cur, events

        outcome = tuner.execute(self._fused_request(fplan, src, iterations, forced, rt, run))
        if "staged" in note:
            self._record_staged(note["staged"], iterations)
            self.last_launch.decision = dict(outcome.params)
            return outcome.result
        gsize, lsize = note["sizes"]
        launch = _rt.Launch(self.kind, dict(outcome.params), gsize, lsize, list(outcome.events),
                            list(outcome.refused), outcome.source)
        launch.iterations = iterations
        launch.fused = True
        launch.decision = dict(outcome.params)
        self.last_launch = launch
        self.last_launches = [launch]
        return outcome.result

    def fused_decision(self, m, *extras, iterations: int = 1) -> dict | None:
        """The point the tuner would run a call with (``fuse`` 1: fused), without running it;
        None where the call cannot run fused."""
        src = self.stages[0]._as_input(m)
        fplan = self.fused_plan(src, extras)
        if isinstance(fplan, str) or (iterations > 1 and fplan.out_dtype != src.dtype):
            return None
        point, _source = tuner.choose_params(
            self._fused_request(fplan, src, iterations, None, _rt.current()))
        return dict(point)

    # -- source --------------------------------------------------------------------------------
    @checked_signature
    def source(self, m, *extras, params: Mapping | Sequence[Mapping | None] | None = None
               ) -> str:
        """The OpenCL C a call with these arguments builds: fused, the one program (after a
        comment ``/* fused: ... */``); staged, one program per stage in order, each as
        ``Stencil.source`` shows it (after a comment naming the stage)."""
        fused_forced, stage_params = self._split_params(params)
        src = self.stages[0]._as_input(m)
        rt = _rt.current()
        if all(p is None for p in stage_params):
            fplan = self.fused_plan(src, extras)
            if not isinstance(fplan, str):
                req = self._fused_request(fplan, src, 1, _with_tile(fplan, fused_forced, rt),
                                          rt)
                point, _source = tuner.choose_params(req)
                if int(point["fuse"]):
                    return (f"/* fused: {len(self.stages)} stages in one kernel, "
                            f"{self.origin} */\n"
                            + fplan.source.program_text(fplan.macros(point)))
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
            fused = {k: v for k, v in params.items() if k in _fused.NAMES}
            if fused:
                rest = {k: v for k, v in params.items() if k not in _fused.NAMES}
                if rest:
                    raise ParameterError(f"{self.origin}: params {dict(params)} mixes the "
                                         f"fused decision ({', '.join(_fused.NAMES)}) with "
                                         "stage parameters; give one or the other")
                if int(fused.get("fuse", 1)) == 1:
                    fused.setdefault("fuse", 1)
                else:
                    fused = dict(_fused.STAGED)
                return fused, [None] * n
            return None, [params] * n
        if isinstance(params, Sequence) and not isinstance(params, str) and len(params) == n:
            return None, list(params)
        raise ParameterError(f"{self.origin}: params must be a dict or a list of {n} dicts")


def _with_tile(fplan, forced: dict | None, rt) -> dict | None:
    """``{"fuse": 1}`` alone runs the tile a GPU starts from (:meth:`FusedPlan.best_tile`)."""
    if forced is not None and int(forced.get("fuse", 0)) == 1 and not set(forced) - {"fuse"}:
        tile = fplan.best_tile(rt.device)
        if tile is not None:
            return tile
    return forced
