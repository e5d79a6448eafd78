"""Stencil: a muscle applied to the neighbourhood of every matrix cell (``a >> b`` chains
stencils into a StencilSequence, :mod:`.stencil_sequence`).

``Stencil(f, shape, border)(m)`` computes ``out[r, c] = f(nb)`` where ``nb[dr, dc]`` reads
``m[r + dr, c + dc]`` (``dr`` is the row offset, negative = north; ``dc`` the column offset,
negative = west). Reads outside the matrix follow ``border``, with ``scipy.ndimage``'s names and
meanings, so a linear muscle gives exactly ``scipy.ndimage.correlate``'s result.

The kernel (``kernels/stencil_common.cl`` + ``kernels/stencil.cl``) runs 2-D work-groups that
stage their tile plus halo in local memory (or, as a tunable alternative, read global memory
directly); only groups that touch an edge pay for border handling. Launch parameters: work-group
rows x cols (``wg_r``, ``wg_c``), cells per work-item along rows and columns (``cr``, ``cc``)
and ``local`` (0/1). The muscle is specialised twice — a fast version for interior groups and
an edge version whose reads remap indices — because a branch inside every read is what the
tile design exists to avoid.

OpenCL C muscles take the neighbourhood as their first parameter (declared with the element
pointer type, e.g. ``float func(float* nb)``) and read it with the accessor macro
``SKELPY_GET2(nb, dr, dc)``; extra matrices are read the same way. With constant offsets the
shape is inferred as for Python muscles; otherwise ``shape=`` is required, and the offsets
that are not compile-time constants (``nb[0, c]`` with a parameter ``c``, a C loop's index)
are checked at run time, in every mode: one outside the shape is a BoundsError naming the
muscle's line and the offset (``muscle/checks.py``). Only such kernels pay for the check
(a compare per read, and a read-back of a few bytes after the call); stencils with constant
offsets are checked at construction and run unchanged.

Borders follow scipy.ndimage's rules, periodic for reaches beyond the matrix (as ``np.pad``).
One difference: scipy's ``correlate`` in ``reflect`` mode reads outside its input when an
offset reaches 4n or more past the start of an axis of length n (``NI_InitFilterOffsets``
maps -4n, -6n, ... to -1); skelpy gives the periodic value there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .. import runtime as _rt
from ..containers import Matrix, array_backend, empty_like_shape
from ..distribution import stencil as distributed_stencil
from ..dtypes import c_type, storage_c_type, storage_dtype
from ..errors import CallError, DTypeError, ParameterError, ShapeError, TranslationError
from ..muscle.checks import OFFSETS as OFFSETS_CHECKS
from ..muscle.packed import NotPackable, PackedMuscle
from ..muscle.packed import lower as lower_packed
from ..muscle.params import Scalar, global_array
from . import stencil_temporal as _temporal
from .arguments import ScalarArg, classify_extra
from .base import Skeleton, checked_signature, constructor
from .check_buffer import DEBUG_PARAM
from .kernel_source import SourceBuilder
from .limits import check_forced, check_iterations, check_output
from .plan import feature_dict
from .stencil_launch import BoundStencil, merge_launches, place, repeat_launcher
from .stencil_plan import MatrixExtra, StencilPlan, VectorExtra, nb_extra, nb_input, tile_bytes
from .stencil_sequence import StencilSequence
from .stencil_shape import (
    BORDERS,
    Shape,
    border_mode,
    check_cval,
    cval_literal,
    resolve_shape,
    table_entry,
)
from .stencil_stream_tile import TILE_NAMES

__all__ = ["Shape", "Stencil", "StencilSequence", "BORDERS", "tile_bytes"]

_INT_LIMIT = 2**31 - 1
_CALL = "(m, *extras, iterations=1, params=None, out_dtype=None)"


class _NoInput:
    """The default of a Stencil call's matrix, so that a call without one is a CallError
    (checked in the call itself: a signature-checking wrapper would cost every tiny call)."""

    def __repr__(self) -> str:
        return "<the input matrix>"


_NO_INPUT = _NoInput()

# -- the skeleton -------------------------------------------------------------------------------


class Stencil(Skeleton):
    """``Stencil(f, shape=None, border="nearest", cval=0)(m, *extras)``: ``out[r, c] = f(nb,
    *extras)`` with ``nb[dr, dc] == m[r + dr, c + dc]``.

    ``shape``: an int (same reach all four ways) or ``Shape(north=, south=, east=, west=)``;
    omitted, it is inferred from the constant offsets a Python muscle reads. ``border``:
    ``"constant"`` (``cval``), ``"nearest"``, ``"wrap"``, ``"reflect"``, ``"mirror"`` as in
    ``scipy.ndimage``. Extras: numbers, NumPy scalars, Vectors read by index, and Matrices of
    ``m``'s shape read around the same cell (``other[0, 0]``, ``other[dr, dc]``, same border
    rule). ``iterations=k`` applies the stencil k times on the device (ping-pong buffers);
    ``a >> b`` chains stencils into a :class:`StencilSequence`."""

    kind = "stencil"
    _fast = None       # the repeat-call launcher of the latest settled call

    @staticmethod
    def unroll_hints(tm) -> str:
        """A translated muscle's source with unroll hints (what this stencil's kernels use;
        a fused sequence polishes its stages' muscles with it too)."""
        return _unroll_hints(tm)

    @constructor
    def __init__(self, f, shape: int | Shape | None = None, border: str = "nearest",
                 cval: float = 0, out_dtype=None):
        super().__init__(f, out_dtype=out_dtype)
        self._check_param_count(self.muscle, 1, False,
                                "the neighbourhood, then one per extra argument")
        try:
            self.shape: Shape | None = None if shape is None else Shape.of(shape)
            self.border: str = border_mode(border)
        except (ShapeError, ParameterError) as exc:
            raise self._error(type(exc), str(exc)) from None
        if isinstance(cval, (np.generic, np.ndarray)) and np.ndim(cval) == 0:
            cval = cval.item()
        if not isinstance(cval, (bool, int, float)):
            raise self._error(DTypeError, f"cval must be a real number, got {cval!r}")
        if isinstance(cval, int) and not -2**1024 < cval < 2**1024:
            # beyond float64 (and every dtype a matrix can have): it would overflow each cast
            raise self._error(DTypeError, f"cval={cval} is beyond the range of every dtype")
        self.cval = cval
        self._check_early()

    def __repr__(self) -> str:
        shape = "inferred" if self.shape is None else str(self.shape)
        return f"<skelpy.{self.origin} shape={shape} border={self.border!r}>"

    def __rshift__(self, other) -> StencilSequence:
        return StencilSequence(self, other)

    def __rrshift__(self, other) -> StencilSequence:
        # ``m >> stencil`` (or ``5 >> stencil``): the sequence names what is not a Stencil
        return StencilSequence(other, self)

    # -- calling -------------------------------------------------------------------------------
    def __call__(self, m=_NO_INPUT, *extras, iterations: int = 1,
                 params: Mapping | None = None, out_dtype=None, **unknown) -> Matrix:
        """Apply the stencil (``iterations`` times) to the Matrix ``m``; the result stays on
        the device."""
        if unknown or m is _NO_INPUT:
            raise self._unexpected(unknown, _CALL) if unknown else CallError(
                f"{self.origin}: missing the input matrix (the call takes {_CALL})")
        if params is None and isinstance(m, Matrix) and m.is_pending:
            # a pending array expression: read at each neighbour in this kernel (skelpy.array)
            iterations = check_iterations(self.origin, iterations)
            out = array_backend().fused_stencil(self, m, extras, iterations, out_dtype)
            if out is not None:
                return out
        fast = self._ready()
        # (``type(...) is int``: iterations=True or 1.0 are errors, not one step)
        if fast is not None and type(iterations) is int and iterations == 1 and params is None \
                and out_dtype is None:
            out = fast(m, extras)
            if out is not None:
                return out
        iterations = check_iterations(self.origin, iterations)
        forced = self._check_params_arg(params)
        src = self._as_input(m)
        if iterations == 0:
            self._bind(src, extras, out_dtype)     # misuse is an error with no step to run too
            self.last_launch = _rt.Launch(self.kind, {}, (0, 0), None, source="none")
            return src.copy()
        if _rt.current().group is not None:              # several devices at once
            return distributed_stencil.run(self, src, extras, iterations, forced, out_dtype)
        if forced and set(forced) & set(distributed_stencil.GROUP_PARAMS):
            # a group's parameters (k, ...) mean nothing on one device: code written for
            # sk.use("gpu:*") runs unchanged on a host with one GPU
            forced = {k: v for k, v in forced.items()
                      if k not in distributed_stencil.GROUP_PARAMS} or None
        bound = self._bind(src, extras, out_dtype)
        rt, choice = place(self, bound, src, iterations)
        if iterations > 1 or (forced is not None and set(forced) & set(_temporal.NAMES)):
            out = self._iterate_temporal(bound, src, extras, iterations, forced, out_dtype, rt)
            if out is not None:
                self._chosen(choice, out)
                return out
        cur, launches = self._single_steps(bound, src, extras, iterations, forced, out_dtype, rt)
        self.last_launch = merge_launches(self.kind, launches)
        self._chosen(choice, cur)
        if iterations == 1 and forced is None and out_dtype is None \
                and not bound.plan.checked:
            self._fast = repeat_launcher(self, bound, m, extras, rt,
                                         choice.stem if choice is not None else None)
        return cur

    def _single_steps(self, bound, src, extras, iterations, forced, out_dtype, rt):
        """``iterations`` launches of the single-step kernel: (result, their Launches)."""
        launches: list = []
        cur: Matrix = src
        spare: Matrix | None = None
        decided: dict = {}
        steps = {id(bound): bound}
        for _ in range(iterations):
            step = bound if cur.dtype == src.dtype else self._bind(cur, extras, out_dtype)
            steps.setdefault(id(step), step)
            # Ping-pong: write into the buffer that is not being read (never into the input).
            dst = spare if (spare is not None and spare.dtype == step.out_dtype) else None
            if dst is None:
                check_output(self.origin, src.shape, step.out_dtype, rt)
                dst = empty_like_shape(src.shape, step.out_dtype, rt)
            spare = cur if cur is not src else None
            step.launch(rt, cur, dst, forced, decided, launches)
            cur = dst
        for step in steps.values():        # checked reads: one read-back per call
            step.raise_if_failed()
        return cur, launches

    def _iterate_temporal(self, bound, src, extras, iterations, forced, out_dtype, rt):
        """Iterations in passes of t steps (``stencil_temporal``), t chosen by the tuner or by
        ``params={"t": ...}``; None where single-step parameters are forced or the path does
        not apply (then single steps run)."""
        if forced is not None and not set(forced) & set(_temporal.NAMES):
            return None
        if forced is not None and forced.get("t") == 1:
            # single steps: the pass's tile does not apply, single-step parameters do (they
            # were dropped: params={"t": 1, "wg_r": 4} ran at the tuner's point, and an
            # unknown name beside t=1 went unnoticed)
            rest = {k: v for k, v in forced.items() if k not in _temporal.NAMES} or None
            out, launches = self._single_steps(bound, src, extras, iterations, rest,
                                               out_dtype, rt)
            self.last_launch = merge_launches(self.kind, launches)
            return out
        tplan = self.temporal_plan(bound, src, out_dtype)
        if isinstance(tplan, str):
            if forced is None:
                return None
            raise self._error(ParameterError, f"params {forced}: this stencil cannot run "
                              f"several steps per pass ({tplan}); leave t out or use t=1")
        ran: list = []

        def single_steps():
            out, launches = self._single_steps(bound, src, extras, iterations, None,
                                               out_dtype, rt)
            ran[:] = launches
            return out, launches

        out, launch = _temporal.iterate(tplan, src, iterations, forced, bound.extra_args(rt),
                                        single_steps, self.origin, rt)
        self.last_launch = launch if launch is not None else merge_launches(self.kind, ran)
        return out

    def temporal_plan(self, bound, src, out_dtype=None):
        """The temporal plan of a call (``stencil_temporal``), or why it has none (a str)."""
        key = id(bound.plan)
        cache = self.__dict__.setdefault("_temporal_plans", {})
        if bound.out_dtype != src.dtype:
            cache[key] = (bound.plan, f"the muscle turns {src.dtype} into {bound.out_dtype}")
        elif bound.plan.checked:
            cache[key] = (bound.plan, "its reads are checked at run time (debug mode, or "
                                      "offsets that are not constants)")
        if key not in cache:
            kinds = {ScalarArg: "scalar", MatrixExtra: "matrix", VectorExtra: "vector"}
            shape = bound.plan.shape
            try:
                tplan = _temporal.plan(
                    self.muscle, src.dtype,
                    [_temporal.Extra(kinds[type(d)], d.dtype, getattr(d, "weak", False))
                     for d in bound.descs],
                    (shape.north, shape.south, shape.east, shape.west), self.border,
                    lambda dt: cval_literal(self.cval, dt), big=src.size + 1 >= _INT_LIMIT,
                    out_dtype=self.out_dtype if out_dtype is None else out_dtype,
                    polish=_unroll_hints,
                    single_first=_temporal.single_first(bound.plan.features, bound.plan.packed),
                    model_known=bound.plan.model_known)
            except _temporal.Unsupported as exc:
                tplan = str(exc)
            cache[key] = (bound.plan, tplan)      # the plan kept alive keeps its id unique
        return cache[key][1]

    @checked_signature
    def source(self, m, *extras, params: Mapping | None = None, out_dtype=None) -> str:
        """The OpenCL C program a call with these arguments builds (see Skeleton.source);
        with a pass's parameters (``t``, ``tb_*``: ``iterations=``' temporal blocking) the
        pass's program (``params={"t": 2}`` was an unknown launch parameter here)."""
        forced = self._check_params_arg(params)
        if forced is not None and set(forced) & set(_temporal.NAMES):
            if forced.get("t") != 1:
                return self._pass_source(m, extras, forced, out_dtype)
            params = {k: v for k, v in forced.items() if k not in _temporal.NAMES} or None
        return super().source(m, *extras, params=params, out_dtype=out_dtype)

    def _pass_source(self, m, extras, forced, out_dtype) -> str:
        src = self._as_input(m)
        bound = self._bind(src, extras, out_dtype)
        tplan = self.temporal_plan(bound, src, out_dtype)
        if isinstance(tplan, str):
            raise self._error(ParameterError, f"params {forced}: this stencil cannot run "
                              f"several steps per pass ({tplan}); leave t out or use t=1")
        rt = _rt.current()
        point = check_forced(tplan.space(rt), lambda p: tplan.broken_pass(p, rt.device), forced,
                             self.origin, rt.device.name, free=TILE_NAMES)
        return (f"/* temporal blocking: {int(point['t'])} steps per pass, {self.origin} */\n"
                + tplan.program_text(rt, point, *src.shape))

    def _describe(self, args, out_dtype=None):
        src = self._as_input(args[0])
        bound = self._bind(src, args[1:], out_dtype)
        rows, cols = src.shape
        return bound.plan, {"n": float(rows * cols), "rows": float(rows), "cols": float(cols),
                            "dtype_size": float(bound.plan.in_dtype.itemsize)}

    # -- internals -------------------------------------------------------------------------
    def _as_input(self, value) -> Matrix:
        if isinstance(value, (list, tuple)):
            try:
                value = np.asarray(value)
            except ValueError as exc:     # ragged: [[1, 2], [3]]
                raise self._error(ShapeError, f"the input is not a matrix: {exc}") from None
        if isinstance(value, (bool, int, float, complex, np.generic)):
            raise self._error(DTypeError, "the input is a scalar; a Stencil needs a Matrix "
                              "(or 2-D ndarray) first, then extra arguments")
        c = self._container(value, "input")
        if not isinstance(c, Matrix):
            raise self._error(ShapeError, f"a Stencil needs a 2-D Matrix, got {c!r}")
        return c

    def bind(self, src: Matrix, extras: Sequence, out_dtype=None) -> BoundStencil:
        """The plan and extra arguments of a call on ``src`` (for a call on a device group)."""
        return self._bind(src, extras, out_dtype)

    def _bind(self, src: Matrix, extras: Sequence, out_dtype) -> BoundStencil:
        """The plan and kernel arguments for one input dtype and these extras."""
        descs, values = [], []
        for k, value in enumerate(extras):
            d, v = classify_extra(value, self.origin, k + 1)
            if isinstance(d, ScalarArg):
                descs.append(d)
            elif v.ndim == 2:
                if v.shape != src.shape:
                    raise self._error(ShapeError, f"extra matrix {k + 1} has shape {v.shape} "
                                      f"but the input has {src.shape}; a stencil's extra "
                                      "matrices are read around the same cell")
                descs.append(MatrixExtra(v.dtype))
            else:
                descs.append(VectorExtra(v.dtype))
            values.append(v)
        odt = self.out_dtype if out_dtype is None else self._dtype_arg(out_dtype)
        big = src.size + 1 >= _INT_LIMIT
        sig = (src.dtype, tuple(descs), odt, big)
        plan = self._plans.get(sig)
        if plan is None:
            plan = self._plans.setdefault(sig, self._make_plan(src.dtype, descs, odt, big))
        # Python ints computed from Python-int extras, checked as NumPy would (host_ints.py)
        plan.muscle.check_python_ints({k + 1: v for k, v in enumerate(values)})
        rt = _rt.fixed()
        if rt is not None:              # in auto mode: checked on the device chosen
            plan.check_device(rt)
        return BoundStencil(self, plan, descs, values, src.shape)

    def _kinds(self, in_dtype, descs, edge: bool, nb_edge: Sequence[bool] = ()) -> list:
        kinds = [nb_input(in_dtype, edge)]
        for k, d in enumerate(descs):
            if isinstance(d, ScalarArg):
                kinds.append(Scalar(d.dtype, weak=d.weak))
            elif isinstance(d, MatrixExtra):
                kinds.append(nb_extra(d.dtype, edge and (not nb_edge or nb_edge[k])))
            else:
                kinds.append(global_array(d.dtype, 1))
        return kinds

    def _check_arity(self, n_extras: int) -> None:
        if self.muscle.n_params != 1 + n_extras:
            raise self._error(
                ShapeError,
                f"the muscle takes {self.muscle.n_params} parameter(s) but this call supplies "
                f"{1 + n_extras} (the neighbourhood and {n_extras} extra argument(s))")

    def _check_early(self) -> None:
        """Check a one-parameter Python muscle's offsets against the shape at construction,
        so that a wrong shape fails where it is written rather than at the first call."""
        if self.muscle.n_params != 1:
            return
        try:
            tm = self.muscle.specialise([nb_input(np.float32, False)],
                                        c_name="skp_muscle_check")
        except (TranslationError, DTypeError):
            return  # may depend on the dtype; the call reports it with the real types
        self._resolve_shape(tm, [0])

    def _resolve_shape(self, tm, nb_params: Sequence[int]) -> tuple[Shape, bool]:
        """The shape to use and whether some offsets are known only at run time (see
        stencil_shape.resolve_shape)."""
        return resolve_shape(tm, nb_params, self.shape, self.origin)

    def _packed(self, in_dtype, descs, out_dtype, checks, clamp) -> PackedMuscle | None:
        """The packed (SWAR) form of a one-byte muscle for the vector path's interior
        (``muscle/packed.py``: four cells per 32-bit word), or None where it does not apply:
        extra arguments, checked or run-time offsets, an OpenCL C muscle, wider cells, or a
        body the packed form does not cover."""
        if descs or checks is not None or clamp or self.muscle.is_c or \
                storage_dtype(in_dtype).itemsize != 1 or np.dtype(out_dtype).itemsize != 1:
            return None
        try:
            body = self.muscle.typed_body(tuple(self._kinds(in_dtype, descs, False)))
            return lower_packed(body, out_dtype)
        except NotPackable:
            return None

    def _make_plan(self, in_dtype, descs, out_dtype, big: bool) -> StencilPlan:
        self._check_arity(len(descs))
        if self.border == "constant":
            check_cval(self.cval, in_dtype, "the input", self.origin)
        checks = self._checks()
        tm_fast = self.muscle.specialise(self._kinds(in_dtype, descs, False),
                                         out_dtype=out_dtype, c_name="skp_muscle_fast",
                                         checks=checks)
        mat_params = [k + 1 for k, d in enumerate(descs) if isinstance(d, MatrixExtra)]
        shape, clamp = self._resolve_shape(tm_fast, [0] + mat_params)
        if clamp and checks is None:
            # offsets known only at run time: checked there against the shape, in every mode
            checks = OFFSETS_CHECKS
            tm_fast = self.muscle.specialise(self._kinds(in_dtype, descs, False),
                                             out_dtype=out_dtype, c_name="skp_muscle_fast",
                                             checks=checks)
        # Extra matrices read only at the cell need no remapping in edge groups.
        nb_edge = []
        bounds_all = getattr(tm_fast, "access_bounds", None) or {}
        for k, d in enumerate(descs):
            b = table_entry(bounds_all, k + 1) if isinstance(d, MatrixExtra) else None
            nb_edge.append(isinstance(d, MatrixExtra) and (b is None or b != ((0, 0), (0, 0))))
        edge_extras = any(nb_edge)
        for k, d in enumerate(descs):
            if nb_edge[k] and self.border == "constant":
                check_cval(self.cval, d.dtype, f"extra matrix {k + 1}", self.origin)
        tm_edge = self.muscle.specialise(self._kinds(in_dtype, descs, True, nb_edge),
                                         out_dtype=out_dtype, c_name="skp_muscle_edge",
                                         checks=checks)
        out_dt = tm_fast.out_dtype
        packed = self._packed(in_dtype, descs, out_dt, checks, clamp)

        decls, call_fast, call_edge = [], ["skp_nb, skp_pitch"], \
            ["skp_nb, skp_pitch, skp_r, skp_c, rows, cols"]
        cvals = {storage_c_type(in_dtype): in_dtype}
        for k, d in enumerate(descs):
            name = f"e{k}"
            if isinstance(d, ScalarArg):
                dt = tm_fast.scalar_dtypes.get(k + 1, d.dtype)
                decls.append(f"const {storage_c_type(dt)} {name}")
                call_fast.append(f"(({c_type(dt)}){name})")
                call_edge.append(f"(({c_type(dt)}){name})")
            elif isinstance(d, MatrixExtra):
                decls.append(f"__global const {storage_c_type(d.dtype)}* restrict {name}")
                call_fast.append(f"{name} + skp_idx, cols")
                call_edge.append(f"{name}, skp_r, skp_c, rows, cols" if nb_edge[k]
                                 else f"{name} + skp_idx, cols")
                cvals[storage_c_type(d.dtype)] = d.dtype
            else:
                decls.append(f"__global const {storage_c_type(d.dtype)}* restrict {name}")
                decls.append(f"const long {name}_n")
                call_fast.append(f"{name}, {name}_n")
                call_edge.append(f"{name}, {name}_n")

        if tm_fast.checked or tm_edge.checked:
            decls.append(DEBUG_PARAM)
        if clamp:
            # skp_check keeps offsets in the shape; the clamp stays for the reads it cannot
            # see (an OpenCL C muscle's helper functions)
            dr = f"clamp((int)(i), -{shape.north}, {shape.south})"
            dc = f"clamp((int)(i), -{shape.west}, {shape.east})"
        else:
            dr = dc = "((int)(i))"
        header = [
            f"#define SKP_IN_ST {storage_c_type(in_dtype)}",
            f"#define SKP_OUT_ST {storage_c_type(out_dt)}",
            f"#define SKP_N {shape.north}",
            f"#define SKP_S {shape.south}",
            f"#define SKP_E {shape.east}",
            f"#define SKP_W {shape.west}",
            f"#define SKP_MODE {BORDERS[self.border]}",
            f"#define SKP_IDX_T {'long' if big else 'int'}",
            f"#define SKP_DR(i) {dr}",
            f"#define SKP_DC(i) {dc}",
            f"#define SKP_EDGE_MUSCLE (!SKP_LOCAL || {int(edge_extras)})",
            f"#define SKP_PACKED {int(packed is not None)}",
            "#define SKP_EXTRA_DECL " + "".join(", " + x for x in decls),
            "#define SKP_CALL_FAST skp_muscle_fast(" + ", ".join(call_fast) + ")",
            "#define SKP_CALL_EDGE skp_muscle_edge(" + ", ".join(call_edge) + ")",
        ]
        for st, dt in cvals.items():
            header.append(f"#define SKP_CVAL_{st} {cval_literal(self.cval, dt)}")
            if self.border == "constant":     # SKP_BORDER_READ's choice (stencil_common.cl)
                header.append(f"static inline {st} skp_pick_{st}(const int inside, const {st} v)"
                              f" {{ return inside ? v : SKP_CVAL_{st}; }}")
        header.append(f"#define SKP_CVAL_IN SKP_CVAL_{storage_c_type(in_dtype)}")

        source = (SourceBuilder("stencil")
                  .header(header)
                  .file("stencil_border.cl")
                  .file("stencil_common.cl")
                  .part(_muscle_sources(tm_fast, tm_edge)
                        + ("" if packed is None else packed.source), muscles=(tm_fast, tm_edge))
                  .file("stencil.cl")
                  .data(in_dtype, out_dt, *(d.dtype for d in descs
                                            if not isinstance(d, ScalarArg)))
                  .build(("skelpy_stencil",)))
        features = feature_dict(tm_fast)
        features.update({
            "north": float(shape.north), "south": float(shape.south),
            "east": float(shape.east), "west": float(shape.west),
            "border": float(BORDERS[self.border]), "n_extras": float(len(descs)),
            "n_matrix_extras": float(len(mat_params)),
            "n_nb_extras": float(sum(nb_edge)),
            "in_dtype_size": float(np.dtype(in_dtype).itemsize),
            "out_dtype_size": float(out_dt.itemsize),
        })
        return StencilPlan(source=source, out_dtype=out_dt, muscles=(tm_fast, tm_edge),
                           features=features, origin=self.origin, shape=shape,
                           in_dtype=np.dtype(in_dtype),
                           tile_itemsize=storage_dtype(in_dtype).itemsize,
                           packed=packed is not None)


def _muscle_sources(tm_fast, tm_edge) -> str:
    """Both specialisations; the edge one is compiled only where it is called. (The
    translator guards its helpers with #ifndef, so the two can share them.)"""
    return (_unroll_hints(tm_fast) + "\n#if SKP_EDGE_MUSCLE\n"
            + _unroll_hints(tm_edge) + "\n#endif\n")


_UNROLL_BUDGET = 128          # most copies of a loop body that unrolling nested loops may make


def _unroll_hints(tm) -> str:
    """``#pragma unroll`` before short constant-trip loops of a muscle, innermost first.

    Stencil muscles loop over their neighbourhood (``for dr in range(-r, r + 1)``); unrolled,
    every offset becomes a constant and the weights fold into immediates, which PoCL measured
    3-5x faster on a Gaussian (it does not unroll these loops by itself). Nested loops are
    unrolled from the inside out while the copies of the innermost body stay within
    ``_UNROLL_BUDGET`` (an 11x11 neighbourhood fully, a 21x21 one by rows), which bounds the
    compile time. A performance hint only: the translator reports the loops with a constant
    trip count (``constant_loops``, parents before children); C muscles report none."""
    loops = tm.constant_loops
    inner = [1] * len(loops)
    unroll = []
    for k in reversed(range(len(loops))):  # children come after their parents
        lp = loops[k]
        size = lp.trips * inner[k]
        if lp.trips > 0 and size <= _UNROLL_BUDGET:
            unroll.append(k)
        else:
            size = 1                       # not unrolled: one copy of its body
        if lp.parent is not None:
            inner[lp.parent] = max(inner[lp.parent], size)
    return tm.with_unroll_pragmas(unroll)
