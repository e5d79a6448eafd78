"""Temporal blocking for iterated stencils: ``Stencil(...)(m, iterations=N)`` in passes of t steps.

Each pass is a streaming pass (:mod:`.stencil_stream`) of t copies of the stencil, so global
memory sees each cell once per t steps; the results equal t single steps bit for bit. The tuner
chooses t with the pass's tile (:func:`space`): ``t = 1`` is one point, today's single-step
kernel (whose own launch parameters it tunes separately). On CPUs only ``t = 1`` is tuned over
(on PoCL a walk with a barrier per row runs 20-40x slower than single steps); the other points
can be forced with ``params=``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence

from .. import runtime as _rt
from .. import tuner
from ..containers import Matrix, empty_like_shape
from ..errors import ParameterError
from ..muscle import Muscle, TypedMuscle
from ..tuner.space import ParamSpace
from .limits import check_forced
from .stencil_stream import Extra, Stage, StreamPlan, Unsupported
from .stencil_stream_tile import TILE_NAMES

__all__ = ["Extra", "NAMES", "SINGLE_ABOVE", "T_VALUES", "TemporalPlan", "Unsupported",
           "iterate", "plan", "single_first", "space"]

T_VALUES = (1, 2, 3, 4, 6, 8)
# Instructions per byte moved (the translator's dynamic count over input plus output bytes of
# a cell) above which a stencil's iterations default to single steps: passes save memory
# traffic, and past this the cell's work, repeated on the tiles' overlaps, costs more than
# they save. H200, 100 iterations at 4096^2-8192^2, passes of t = 4 over single steps: heat
# (1.6 per byte) 1.30-1.50x, Game of Life int32 (2.6) 1.79x, the 3x3 Gaussian with reflect
# (5.6) 0.92x (its best pass, t = 2, 0.95x), Life uint8 per cell (10.5) 0.75x.
SINGLE_ABOVE = 4.0
NAMES = ("t",) + TILE_NAMES
MAX_REACH = 4                 # rows/columns a muscle may reach for this path

# the single-step point: the tile parameters do not apply
_SINGLE = {"t": 1, "tb_wc": 64, "tb_wr": 1, "tb_rows": 128, "tb_vec": 1, "tb_ring": 1,
           "tb_unroll": 0, "tb_pre": 1}


class TemporalPlan(StreamPlan):
    """The streaming plan of one stencil repeated, with the tuner's space of its passes."""

    def __init__(self, *args, single_first: bool = False, model_known: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        # per runtime (weakly, as the kernels: see StreamPlan)
        self._spaces: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        # single steps are the default on GPUs too (see single_first below)
        self.single_first = single_first
        # False for a packed stencil: the model has not measured its single steps (t = 1)
        self.model_known = model_known

    def broken_pass(self, p: Mapping, dev) -> tuple[int, str] | None:
        """The first limit point ``p`` breaks on ``dev`` (``t = 1``, single steps, breaks
        none: the tile parameters do not apply)."""
        return None if int(p["t"]) == 1 else self.broken(p, dev)

    def space(self, rt: _rt.Runtime) -> ParamSpace:
        """The passes the tuner chooses among on ``rt``'s device (cached per runtime)."""
        sp = self._spaces.get(rt)
        if sp is not None:
            return sp
        dev = rt.device
        gpu = dev.kind == "gpu"

        def legal(p) -> bool:
            if int(p["t"]) == 1:          # single steps: the tile parameters do not apply
                return all(p[k] == v for k, v in _SINGLE.items())
            return self.legal(p, dev)

        default = dict(self.gpu_default(), t=4) if gpu and not self.single_first \
            else dict(_SINGLE)
        sp = ParamSpace(self.tile_params(rt, T_VALUES if gpu else (1,)), default, legal,
                        extra_values_ok=("t", "tb_wc", "tb_wr", "tb_rows"))
        if not sp.is_legal(sp.default):
            nearest = sp.nearest(sp.default)
            if nearest is not None:
                sp.default = nearest
        self._spaces[rt] = sp
        return sp


def single_first(features: Mapping[str, float], packed: bool) -> bool:
    """Whether iterations of a stencil with these kernel features default to single steps on
    every device: its single step is packed (``muscle/packed.py``: the passes are not), or it
    spends more than :data:`SINGLE_ABOVE` instructions per byte moved."""
    work = float(features.get("instructions_dyn", features.get("instructions", 0.0)))
    moved = float(features.get("in_dtype_size", 4.0)) + float(features.get("out_dtype_size", 4.0))
    return packed or work / moved > SINGLE_ABOVE


def plan(muscle: Muscle, dtype, extras: Sequence[Extra], reach: tuple[int, int, int, int],
         border: str, cval_literal: Callable, *, big: bool = False, out_dtype=None,
         polish: Callable[[TypedMuscle], str] | None = None,
         single_first: bool = False, model_known: bool = True) -> TemporalPlan:
    """The plan of one stencil repeated (raises Unsupported where it cannot stream);
    ``single_first``: single steps are the default on every device (the tuner and ``params``
    may still choose passes); ``model_known``: False where the tuner's model has not measured
    the single step (a packed one): the space's default comes first until measured."""
    return TemporalPlan([Stage(muscle, reach, border, cval_literal)], dtype, extras, big=big,
                        out_dtype=out_dtype, polish=polish, max_reach=MAX_REACH,
                        single_first=single_first, model_known=model_known)


def space(plan: TemporalPlan, rt: _rt.Runtime) -> ParamSpace:
    """The passes the tuner chooses among on ``rt``'s device (``plan.space``)."""
    return plan.space(rt)


def iterate(plan: TemporalPlan, src: Matrix, iterations: int, forced: Mapping | None,
            extra_args: Sequence, single_steps: Callable[[], tuple[Matrix, list]],
            origin: str, rt: _rt.Runtime | None = None) -> tuple[Matrix, _rt.Launch | None]:
    """``iterations`` steps of the stencil from ``src``, t per pass as the tuner (or
    ``forced``) decides; ``t = 1`` calls ``single_steps()``, which returns (result, its
    Launch records) from the single-step path. Returns (result, the Launch describing the
    passes, or None when single steps ran). ``rt``: the runtime the call runs on (default: the
    current one; in auto mode the one the cost model chose)."""
    rt = rt or _rt.current()
    rows, cols = src.shape
    note: dict = {}
    if forced and forced.get("t") == 1:       # single steps: the tile does not apply
        forced = {"t": 1}

    def run(point):
        if int(point["t"]) == 1:
            out, launches = single_steps()
            note["single"] = launches
            return out, [e for ln in launches for e in ln.events]
        note.pop("single", None)
        bufs = [empty_like_shape(src.shape, src.dtype, rt) for _ in range(2)]
        _buf, k, events = plan.run(rt, point, src.device_buffer(rt), rows, cols, iterations,
                                   extra_args, [b.device_buffer(rt) for b in bufs])
        geo = plan.geometry(point, rows, cols, rt.device)
        note["sizes"] = (geo.global_size, geo.local_size)
        out = bufs[k]
        out.mark_device_written()
        return out, events

    if forced:      # completed once here (the tuner takes the whole point as it is)
        forced = check_forced(space(plan, rt), lambda p: plan.broken_pass(p, rt.device),
                              forced, origin, rt.device.name, free=TILE_NAMES)
    req = tuner.TuningRequest(
        skeleton="stencil", kernel_key=plan.kernel_key, device=rt.device,
        space=space(plan, rt), features=plan.features,
        dataset={"n": float(rows * cols), "rows": float(rows), "cols": float(cols),
                 "dtype_size": float(plan.itemsize), "iterations": float(iterations)},
        forced=dict(forced) if forced else None, run=run, origin=origin,
        model_known=plan.model_known)
    try:
        outcome = tuner.execute(req)
    except ParameterError as exc:
        raise ParameterError(f"{origin}: {exc}") from None
    if "single" in note:
        return outcome.result, None
    gsize, lsize = note["sizes"]
    launch = _rt.Launch("stencil", dict(outcome.params), gsize, lsize, list(outcome.events),
                        list(outcome.refused), outcome.source)
    launch.iterations = iterations
    return outcome.result, launch
