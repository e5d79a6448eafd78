"""Stencil and StencilSequence: a muscle applied to the neighbourhood of every matrix cell.

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

OpenCL C muscles take the neighbourhood as their first parameter (declared with any pointer
type, e.g. ``float func(float* nb)``) and read it with the accessor macro
``SKELPY_GET2(nb, dr, dc)``; extra matrices are read the same way. With constant offsets the
shape is inferred as for Python muscles; otherwise ``shape=`` is required and offsets are
clamped into it, because they cannot be checked before run time.

Borders follow scipy.ndimage's rules, periodic for reaches beyond the matrix (as ``np.pad``).
One difference: scipy's ``correlate`` in ``reflect`` mode reads outside its input when an
offset reaches 4n or more past the start of an axis of length n (``NI_InitFilterOffsets``
maps -4n, -6n, ... to -1); skelpy gives the periodic value there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from .. import tuner
from ..containers import Matrix, Vector, as_container, empty_like_shape
from ..dtypes import c_type, check_dtype, storage_c_type, storage_dtype
from ..errors import (
    DTypeError,
    ParameterError,
    ShapeError,
    TranslationError,
)
from ..muscle.params import Accessor, Scalar, global_array
from ..tuner.space import Param, ParamSpace
from . import stencil_temporal as _temporal
from .base import (
    Plan,
    ScalarArg,
    Skeleton,
    classify_extra,
    feature_dict,
    fp64_check,
    scalar_converter,
    scalar_value,
    source_key,
)

__all__ = ["Shape", "Stencil", "StencilSequence", "BORDERS"]

#: Border modes (scipy.ndimage names) -> SKP_MODE values in stencil_common.cl.
BORDERS = {"constant": 0, "nearest": 1, "wrap": 2, "reflect": 3, "mirror": 4}
_BORDER_ALIASES = {"grid-constant": "constant", "grid-wrap": "wrap", "grid-mirror": "reflect"}

WG_R_VALUES = (1, 2, 4, 8, 16, 32, 64)
WG_C_VALUES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
CR_VALUES = (1, 2, 4, 8)
CC_VALUES = (1, 2, 4)
VEC_VALUES = (1, 2, 4)
_WINDOW_LIMIT = 96            # most elements of a vector path's register window (beyond it the
                              # unrolled muscle copies make compiles slow and registers spill)
_LOCAL_RESERVE = 256          # bytes of local memory left for the implementation
_INT_LIMIT = 2**31 - 1


# -- the shape -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """How far a stencil reads in each direction (SkelCL's stencil shape).

    ``north``: rows above the cell (negative row offsets), ``south``: rows below, ``west``:
    columns to the left (negative column offsets), ``east``: columns to the right."""

    north: int = 0
    south: int = 0
    east: int = 0
    west: int = 0

    def __post_init__(self):
        for name in ("north", "south", "east", "west"):
            v = getattr(self, name)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ShapeError(f"Shape: {name} must be a non-negative int, got {v!r}")
            object.__setattr__(self, name, int(v))

    @classmethod
    def of(cls, value) -> Shape:
        """An int (the same reach all four ways) or a Shape."""
        if isinstance(value, Shape):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            if value < 0:
                raise ShapeError(f"stencil shape must be >= 0, got {value}")
            v = int(value)
            return cls(north=v, south=v, east=v, west=v)
        raise ShapeError(f"stencil shape must be an int or sk.Shape(north=, south=, east=, "
                         f"west=), got {value!r}")

    @classmethod
    def from_bounds(cls, bounds) -> Shape:
        """The smallest shape holding ((row lo, row hi), (col lo, col hi)) offset bounds."""
        (rlo, rhi), (clo, chi) = bounds
        return cls(north=max(0, -int(rlo)), south=max(0, int(rhi)),
                   west=max(0, -int(clo)), east=max(0, int(chi)))

    def union(self, other: Shape) -> Shape:
        return Shape(north=max(self.north, other.north), south=max(self.south, other.south),
                     east=max(self.east, other.east), west=max(self.west, other.west))

    def contains(self, dr: int, dc: int) -> bool:
        return -self.north <= dr <= self.south and -self.west <= dc <= self.east

    def __str__(self) -> str:
        return (f"Shape(north={self.north}, south={self.south}, east={self.east}, "
                f"west={self.west})")


def _border_mode(border) -> str:
    name = str(border).lower() if isinstance(border, str) else border
    name = _BORDER_ALIASES.get(name, name)
    if name not in BORDERS:
        raise ParameterError(f"unknown border mode {border!r}; use one of "
                             + ", ".join(repr(b) for b in BORDERS) + " (scipy.ndimage names)")
    return name


# -- accessor templates (see stencil_common.cl) ------------------------------------------------

_DIRECT_READ = "(({ctype})SKP_READ_DIRECT({name}, {name}_p, {i0}, {i1}))"


def _nb_input(dtype, edge: bool) -> Accessor:
    """The input neighbourhood: in local memory or global memory, chosen by SKP_LOCAL."""
    if not edge:
        return Accessor(dtype, 2, ("SKP_SPACE_NB const {stype}* {name}",
                                   "const int {name}_p"), _DIRECT_READ, kind="neighbourhood")
    return Accessor(
        dtype, 2,
        ("SKP_SPACE_IN const {stype}* {name}", "const int {name}_p",
         "const int {name}_r", "const int {name}_c", "const int {name}_rows",
         "const int {name}_cols"),
        "(({ctype})SKP_READ_EDGE_IN({name}, {name}_p, {name}_r, {name}_c, {name}_rows, "
        "{name}_cols, SKP_CVAL_{stype}, {i0}, {i1}))", kind="neighbourhood")


def _nb_extra(dtype, edge: bool) -> Accessor:
    """An extra matrix of the input's shape, read around the same cell from global memory."""
    if not edge:
        return Accessor(dtype, 2, ("__global const {stype}* {name}",
                                   "const int {name}_p"), _DIRECT_READ, kind="neighbourhood")
    return Accessor(
        dtype, 2,
        ("__global const {stype}* {name}", "const int {name}_r", "const int {name}_c",
         "const int {name}_rows", "const int {name}_cols"),
        "(({ctype})SKP_READ_EDGE({name}, {name}_r, {name}_c, {name}_rows, {name}_cols, "
        "SKP_CVAL_{stype}, {i0}, {i1}))", kind="neighbourhood")


@dataclass(frozen=True)
class _MatrixArg:
    """An extra matrix of the input's shape (read as a neighbourhood or at the cell)."""

    dtype: np.dtype


@dataclass(frozen=True)
class _VectorArg:
    """An extra 1-D container, read by index (``w[k]``) like a Map extra."""

    dtype: np.dtype


def _cval_literal(value, dtype: np.dtype) -> str:
    """``value`` as a C constant of ``dtype``'s storage type, exactly."""
    st = storage_c_type(dtype)
    dt = storage_dtype(dtype)
    if dt.kind == "f":
        v = float(dt.type(value))
        if math.isnan(v):
            return f"(({st})NAN)"
        if math.isinf(v):
            return f"(({st})({'-' if v < 0 else ''}INFINITY))"
        return f"(({st})({v.hex()}{'f' if dt == np.float32 else ''}))"
    v = int(np.asarray(value).astype(dt)[()])
    bits = v & ((1 << (8 * dt.itemsize)) - 1)
    return f"(({st})0x{bits:x}UL)"


def _check_cval(cval, dtype: np.dtype, what: str, origin: str) -> None:
    dt = np.dtype(dtype)
    if dt.kind in "iub":
        ok = float(cval).is_integer()
        if ok and dt.kind in "iu":
            info = np.iinfo(dt)
            ok = info.min <= int(cval) <= info.max
        if ok and dt.kind == "b":
            ok = int(cval) in (0, 1)
        if not ok:
            raise DTypeError(f"{origin}: cval={cval!r} cannot be represented in {what}'s dtype "
                             f"{dt} (border='constant' reads cval as that dtype)")


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

    def __init__(self, f, shape: int | Shape | None = None, border: str = "nearest",
                 cval: float = 0, out_dtype=None):
        super().__init__(f, out_dtype=out_dtype)
        self.shape: Shape | None = None if shape is None else Shape.of(shape)
        self.border: str = _border_mode(border)
        if isinstance(cval, (np.generic, np.ndarray)) and np.ndim(cval) == 0:
            cval = cval.item()
        if not isinstance(cval, (bool, int, float)):
            raise self._error(DTypeError, f"cval must be a real number, got {cval!r}")
        self.cval = cval
        self._check_early()

    def __repr__(self) -> str:
        shape = "inferred" if self.shape is None else str(self.shape)
        return f"<skelpy.{self.origin} shape={shape} border={self.border!r}>"

    def __rshift__(self, other) -> StencilSequence:
        return StencilSequence(self, other)

    # -- calling -------------------------------------------------------------------------------
    def __call__(self, m, *extras, iterations: int = 1, params: Mapping | None = None,
                 out_dtype=None) -> Matrix:
        """Apply the stencil (``iterations`` times); the result stays on the device."""
        if iterations == 1 and params is None and out_dtype is None:
            fast = self._fast
            if fast is not None:
                out = fast(m, extras)
                if out is not None:
                    return out
        iterations = _check_iterations(self.origin, iterations)
        forced = self._check_params_arg(params)
        src = self._as_input(m)
        rt = _rt.current()
        if iterations == 0:
            self.last_launch = _rt.Launch(self.kind, {}, (0, 0), None, source="none")
            return src.copy()
        bound = self._bind(src, extras, out_dtype)
        if iterations > 1 or (forced is not None and set(forced) & set(_temporal.NAMES)):
            out = self._iterate_temporal(bound, src, extras, iterations, forced, out_dtype, rt)
            if out is not None:
                return out
        cur, launches = self._single_steps(bound, src, extras, iterations, forced, out_dtype, rt)
        self.last_launch = _merge_launches(self.kind, launches)
        if iterations == 1 and forced is None and out_dtype is None:
            self._fast = _repeat_launcher(self, bound, m, extras, rt)
        return cur

    def _single_steps(self, bound, src, extras, iterations, forced, out_dtype, rt):
        """``iterations`` launches of the single-step kernel: (result, their Launches)."""
        launches: list = []
        cur: Matrix = src
        spare: Matrix | None = None
        decided: dict = {}
        for _ in range(iterations):
            step = bound if cur.dtype == src.dtype else self._bind(cur, extras, out_dtype)
            # Ping-pong: write into the buffer that is not being read (never into the input).
            dst = spare if (spare is not None and spare.dtype == step.out_dtype) else None
            if dst is None:
                dst = empty_like_shape(src.shape, step.out_dtype, rt)
            spare = cur if cur is not src else None
            step.launch(rt, cur, dst, forced, decided, launches)
            cur = dst
        return cur, launches

    def _iterate_temporal(self, bound, src, extras, iterations, forced, out_dtype, rt):
        """Iterations in passes of t steps (``stencil_temporal``), t chosen by the tuner or by
        ``params={"t": ...}``; None where single-step parameters are forced or the path does
        not apply (then single steps run)."""
        if forced is not None and not set(forced) & set(_temporal.NAMES):
            return None
        key = id(bound.plan)
        cache = self.__dict__.setdefault("_temporal_plans", {})
        if bound.out_dtype != src.dtype:
            cache[key] = (bound.plan, f"the muscle turns {src.dtype} into {bound.out_dtype}")
        if key not in cache:
            kinds = {ScalarArg: "scalar", _MatrixArg: "matrix", _VectorArg: "vector"}
            shape = bound.plan.shape
            try:
                tplan = _temporal.TemporalPlan(
                    self.muscle, src.dtype,
                    [_temporal.Extra(kinds[type(d)], d.dtype, getattr(d, "weak", False))
                     for d in bound.descs],
                    (shape.north, shape.south, shape.east, shape.west), self.border,
                    lambda dt: _cval_literal(self.cval, dt), big=src.size + 1 >= _INT_LIMIT,
                    out_dtype=self.out_dtype if out_dtype is None else out_dtype,
                    polish=_unroll_hints)
            except _temporal.Unsupported as exc:
                tplan = str(exc)
            cache[key] = (bound.plan, tplan)      # the plan kept alive keeps its id unique
        tplan = cache[key][1]
        if isinstance(tplan, str):
            if forced is None:
                return None
            if forced.get("t", 2) != 1:
                raise self._error(ParameterError, f"params {forced}: this stencil cannot run "
                                  f"several steps per pass ({tplan}); leave t out or use t=1")
            out, launches = self._single_steps(bound, src, extras, iterations, None, out_dtype,
                                               rt)
            self.last_launch = _merge_launches(self.kind, launches)
            return out
        ran: list = []

        def single_steps():
            out, launches = self._single_steps(bound, src, extras, iterations, None,
                                               out_dtype, rt)
            ran[:] = launches
            return out, launches

        out, launch = _temporal.iterate(tplan, src, iterations, forced, bound.extra_args(rt),
                                        single_steps, self.origin)
        self.last_launch = launch if launch is not None else _merge_launches(self.kind, ran)
        return out

    # -- internals -------------------------------------------------------------------------
    def _as_input(self, value) -> Matrix:
        if isinstance(value, (list, tuple)):
            value = np.asarray(value)
        if isinstance(value, (bool, int, float, complex, np.generic)):
            raise self._error(DTypeError, "the input is a scalar; a Stencil needs a Matrix "
                              "(or 2-D ndarray) first, then extra arguments")
        try:
            c = as_container(value, f"{self.origin}: input")
        except (DTypeError, ShapeError) as exc:
            raise type(exc)(str(exc)) from None
        if not isinstance(c, Matrix):
            raise self._error(ShapeError, f"a Stencil needs a 2-D Matrix, got {c!r}")
        return c

    def _bind(self, src: Matrix, extras: Sequence, out_dtype) -> _Bound:
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
                descs.append(_MatrixArg(v.dtype))
            else:
                descs.append(_VectorArg(v.dtype))
            values.append(v)
        odt = self.out_dtype if out_dtype is None else check_dtype(out_dtype, "out_dtype")
        big = src.size + 1 >= _INT_LIMIT
        sig = (src.dtype, tuple(descs), odt, big)
        plan = self._plans.get(sig)
        if plan is None:
            plan = self._plans[sig] = self._make_plan(src.dtype, descs, odt, big)
        rt = _rt.current()
        fp64_check(rt, plan.uses_fp64, self.origin)
        return _Bound(self, plan, descs, values, src.shape)

    def _kinds(self, in_dtype, descs, edge: bool, nb_edge: Sequence[bool] = ()) -> list:
        kinds = [_nb_input(in_dtype, edge)]
        for k, d in enumerate(descs):
            if isinstance(d, ScalarArg):
                kinds.append(Scalar(d.dtype, weak=d.weak))
            elif isinstance(d, _MatrixArg):
                kinds.append(_nb_extra(d.dtype, edge and (not nb_edge or nb_edge[k])))
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
            tm = self.muscle.specialise([_nb_input(np.float32, False)],
                                        c_name="skp_muscle_check")
        except (TranslationError, DTypeError):
            return  # may depend on the dtype; the call reports it with the real types
        self._resolve_shape(tm, [0])

    def _resolve_shape(self, tm, nb_params: Sequence[int]) -> tuple[Shape, bool]:
        """The shape to use and whether offsets must be clamped (unknown at compile time).

        Raises ShapeError for reads outside a given shape, or when no shape is given and the
        offsets cannot be inferred."""
        bounds_all = getattr(tm, "access_bounds", None) or {}
        accesses_all = getattr(tm, "accesses", None) or {}
        unknown = False
        inferred = Shape()
        for p in nb_params:
            b = _lookup(bounds_all, p)
            if b is None:
                unknown = True
                continue
            inferred = inferred.union(Shape.from_bounds(b))
            if self.shape is not None and not self.shape.contains(b[0][0], b[1][0]) or \
                    self.shape is not None and not self.shape.contains(b[0][1], b[1][1]):
                bad = [a for a in (_lookup(accesses_all, p) or [])
                       if not self.shape.contains(int(a[0]), int(a[1]))]
                what = "the neighbourhood" if p == 0 else f"extra matrix {p}"
                shown = ", ".join(f"[{a[0]}, {a[1]}]" for a in bad[:4]) or \
                    f"rows {b[0][0]}..{b[0][1]}, columns {b[1][0]}..{b[1][1]}"
                where = _access_line(tm, p, bad)
                raise ShapeError(
                    f"{where or self.origin}: the muscle reads {what} at {shown}, outside the "
                    f"stencil "
                    f"{self.shape} (north/south = negative/positive row offsets, west/east = "
                    f"negative/positive column offsets); widen shape= or omit it to infer it")
        if self.shape is not None:
            return self.shape, unknown
        if unknown:
            raise ShapeError(
                f"{self.origin}: cannot infer the stencil shape because the muscle reads "
                "neighbours at offsets that are not constants; pass shape= (an int or "
                "sk.Shape(north=, south=, east=, west=))")
        return inferred, False

    def _make_plan(self, in_dtype, descs, out_dtype, big: bool) -> Plan:
        self._check_arity(len(descs))
        if self.border == "constant":
            _check_cval(self.cval, in_dtype, "the input", self.origin)
        tm_fast = self.muscle.specialise(self._kinds(in_dtype, descs, False),
                                         out_dtype=out_dtype, c_name="skp_muscle_fast")
        mat_params = [k + 1 for k, d in enumerate(descs) if isinstance(d, _MatrixArg)]
        shape, clamp = self._resolve_shape(tm_fast, [0] + mat_params)
        # Extra matrices read only at the cell need no remapping in edge groups.
        nb_edge = []
        bounds_all = getattr(tm_fast, "access_bounds", None) or {}
        for k, d in enumerate(descs):
            b = _lookup(bounds_all, k + 1) if isinstance(d, _MatrixArg) else None
            nb_edge.append(isinstance(d, _MatrixArg) and (b is None or b != ((0, 0), (0, 0))))
        edge_extras = any(nb_edge)
        for k, d in enumerate(descs):
            if nb_edge[k] and self.border == "constant":
                _check_cval(self.cval, d.dtype, f"extra matrix {k + 1}", self.origin)
        tm_edge = self.muscle.specialise(self._kinds(in_dtype, descs, True, nb_edge),
                                         out_dtype=out_dtype, c_name="skp_muscle_edge")
        out_dt = tm_fast.out_dtype

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
            elif isinstance(d, _MatrixArg):
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

        if clamp:
            dr = f"clamp((int)(i), -{shape.north}, {shape.south})"
            dc = f"clamp((int)(i), -{shape.west}, {shape.east})"
        else:
            dr = dc = "((int)(i))"
        header = [
            "/* generated by skelpy.skeletons.stencil */",
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
            "#define SKP_EXTRA_DECL " + "".join(", " + x for x in decls),
            "#define SKP_CALL_FAST skp_muscle_fast(" + ", ".join(call_fast) + ")",
            "#define SKP_CALL_EDGE skp_muscle_edge(" + ", ".join(call_edge) + ")",
        ]
        for st, dt in cvals.items():
            header.append(f"#define SKP_CVAL_{st} {_cval_literal(self.cval, dt)}")
        header.append(f"#define SKP_CVAL_IN SKP_CVAL_{storage_c_type(in_dtype)}")

        uses_fp64 = (tm_fast.uses_fp64 or tm_edge.uses_fp64 or np.dtype(in_dtype) == np.float64
                     or out_dt == np.float64
                     or any(getattr(d, "dtype", None) == np.float64 for d in descs
                            if not isinstance(d, ScalarArg)))
        pragma = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if uses_fp64 else ""
        source = (pragma + "\n".join(header) + "\n" + _rt.read_kernel("stencil_common.cl")
                  + "\n" + _muscle_sources(tm_fast, tm_edge)
                  + "\n" + _rt.read_kernel("stencil.cl"))
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
        plan = Plan(source=source, kernel_name="skelpy_stencil", kernel_key=source_key(source),
                    out_dtype=out_dt, typed=(tm_fast, tm_edge), features=features,
                    space_factory=None, macros=_macros)
        plan.uses_fp64 = uses_fp64
        plan.shape = shape
        plan.in_dtype = np.dtype(in_dtype)
        plan.tile_itemsize = storage_dtype(in_dtype).itemsize
        plan.space_factory = lambda rt, plan=plan: _space(rt, plan)
        return plan


def _access_line(tm, param: int, bad) -> str | None:
    """``file:line (name)`` of the first read of parameter ``param`` at offsets that lie in
    ``bad``, so that a shape error points at the offending line (None for C muscles, which
    record no read sites: the error then names the muscle)."""
    wanted = {(int(a[0]), int(a[1])) for a in bad}
    for site in tm.read_sites.get(param, ()):
        if site.offsets in wanted:
            return f"Stencil({site.where})"
    return None


def _lookup(table, key):
    if table is None:
        return None
    if isinstance(table, Mapping):
        return table.get(key)
    try:
        return table[key]
    except (IndexError, KeyError, TypeError):
        return None


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


def _macros(point: Mapping) -> tuple[str, ...]:
    return (f"-DSKP_LOCAL={int(point['local'])}", f"-DSKP_CR={int(point['cr'])}",
            f"-DSKP_CC={int(point['cc'])}", f"-DSKP_VEC={int(point.get('vec', 1))}")


def window_elements(shape: Shape, point: Mapping) -> int:
    """Size of the vector path's per-work-item register window."""
    return ((shape.north + int(point["cr"]) + shape.south)
            * (shape.west + int(point["vec"]) + shape.east))


def tile_bytes(plan_shape: Shape, itemsize: int, point: Mapping) -> int:
    """Local memory one work-group needs for its tile plus halo."""
    rows = int(point["wg_r"]) * int(point["cr"]) + plan_shape.north + plan_shape.south
    cols = int(point["wg_c"]) * int(point["cc"]) + plan_shape.west + plan_shape.east
    return rows * cols * itemsize


def _space(rt: _rt.Runtime, plan: Plan) -> ParamSpace:
    """The legal launch points of this stencil kernel on this device."""
    dev = rt.device
    kmax_cache: dict[int, int] = {}

    def kmax(local: int) -> int:
        # CL_KERNEL_WORK_GROUP_SIZE needs a built program: build each variant only when a
        # point of it is first asked about (a program build costs ~0.5 s on PoCL).
        if local not in kmax_cache:
            k = plan.kernel(rt, {"local": local, "cr": 1, "cc": 1, "vec": 1})
            kmax_cache[local] = min(dev.max_work_group_size, rt.kernel_max_work_group_size(k))
            plan.kernel_max_wg = max(kmax_cache.values())
        return kmax_cache[local]

    items = dev.max_work_item_sizes
    max_c = items[0] if items else dev.max_work_group_size
    max_r = items[1] if len(items) > 1 else 1
    local_budget = dev.local_mem_size - _LOCAL_RESERVE
    shape, itemsize = plan.shape, plan.tile_itemsize

    def legal(p) -> bool:
        wr, wc, cr, cc, local = (int(p["wg_r"]), int(p["wg_c"]), int(p["cr"]), int(p["cc"]),
                                 int(p["local"]))
        vec = p["vec"]
        if local not in (0, 1) or p["local"] not in (0, 1) or min(cr, cc) < 1 \
                or vec not in VEC_VALUES:
            return False
        # the vector path reads global memory into registers: no local tile, no column
        # coarsening beyond the vector, and a window small enough to stay in registers
        if vec > 1 and (local or cc != 1 or window_elements(shape, p) > _WINDOW_LIMIT):
            return False
        if wr == 0 and wc == 0:           # the runtime chooses (forced only): no local tile
            return not local
        if min(wr, wc) < 1:
            return False
        if wr > max_r or wc > max_c or wr * wc > dev.max_work_group_size:
            return False
        if local and tile_bytes(shape, itemsize, p) > local_budget:
            return False
        return wr * wc <= kmax(local)

    params = [
        Param("wg_r", tuple(v for v in WG_R_VALUES if v <= max_r), doc="work-group rows"),
        Param("wg_c", tuple(v for v in WG_C_VALUES if v <= max_c), doc="work-group columns"),
        Param("cr", CR_VALUES, doc="cells per work-item along rows"),
        Param("cc", CC_VALUES, doc="cells per work-item along columns"),
        Param("local", (0, 1), numeric=False, doc="1: stage tile + halo in local memory"),
        # On CPUs the vector path can be forced but is not tuned over: on PoCL it measured
        # 1.4x faster for a Gaussian 5x5 yet 1.4x slower for the 5-point stencil, the model
        # shipped for PoCL predates it, and the larger space slowed decisions (0.9 vs 0.55 ms).
        Param("vec", VEC_VALUES if dev.kind == "gpu" else (1,),
              doc="columns per work-item read and written as one vector"),
    ]
    space = ParamSpace(params, _default_point(dev, plan.features), legal,
                       extra_values_ok=("wg_r", "wg_c", "cr", "cc", "vec"))
    if not space.is_legal(space.default):
        nearest = space.nearest(space.default)
        if nearest is not None:
            space.default = nearest
    return space


# Neighbours read per cell above which a stencil counts as compute-heavy. A GPU's local tile
# pays off later than a CPU's narrow groups: on an H200 at 4096^2 the tile ran a 5x5 LoG (13
# reads) in 106.7 us against the light default's 42.1 us (issue 18) and a 5x5 Gaussian (26
# reads) in 0.150 ms against 0.104 ms without it, and won only for the 11x11 Gaussian (121);
# on PoCL the narrow heavy groups ran the same LoG 1.5-2x faster than the light default.
_HEAVY_READS = {"gpu": 48, "cpu": 12}


def _default_point(dev, features: Mapping[str, float]) -> dict:
    """A good first guess before the tuner knows better, measured with
    ``benchmarks/bench_stencil.py`` (``--bandwidth-sweep`` and the "skelpy best" sweeps).

    Light stencils (a few reads per cell) are memory-bound: on an H200, 4x64 work-items each
    computing 2 rows by a 2-vector from a register window reach 83% / 95% / 95% of a same-size
    copy at 2048^2 / 4096^2 / 8192^2 (the scalar 2x128 with 2x2 cells: 73-85%); on PoCL 4x64
    without coarsening is best. Heavy stencils (a Gaussian 11x11 reads all 121 neighbours)
    re-read each input many times: the H200 then wants the local-memory tile (8x32, 2 rows per
    item, up to 6x faster than the light default), PoCL narrow 4x16 groups with 2 rows per item
    (3x); a CPU never gains from the local tile (there is no faster memory to stage into)."""
    reads = float(features.get("reads_dyn", features.get("reads", 0.0)))
    area = ((features.get("north", 0.0) + features.get("south", 0.0) + 1)
            * (features.get("west", 0.0) + features.get("east", 0.0) + 1))
    # many reads that cover much of the neighbourhood: a sparse far-reaching stencil (Table
    # 6.3's synthetic 1/10/30/30) gains nothing from staging its large halo
    heavy = reads > _HEAVY_READS["gpu" if dev.kind == "gpu" else "cpu"] and reads >= 0.25 * area
    if dev.kind == "gpu":
        if heavy:
            return {"wg_r": 8, "wg_c": 32, "cr": 2, "cc": 1, "local": 1, "vec": 1}
        return {"wg_r": 4, "wg_c": 64, "cr": 2, "cc": 1, "local": 0, "vec": 2}
    if heavy:
        return {"wg_r": 4, "wg_c": 16, "cr": 2, "cc": 1, "local": 0, "vec": 1}
    return {"wg_r": 4, "wg_c": 64, "cr": 1, "cc": 1, "local": 0, "vec": 1}


# -- launching ------------------------------------------------------------------------------------


def _repeat_launcher(skel: Stencil, bound: _Bound, m, extras, rt):
    """A launcher for repeats of a one-step call (``u = step(u)`` in a loop): same runtime,
    input Matrix dtype and shape, the same kinds of extras and a settled tuner decision
    (``tuner.ticket_valid``); it skips binding, plan and tuner look-ups. None when the call
    does not qualify; the launcher itself returns None for anything unexpected, and the
    full path runs instead (as for Map, see elementwise._Elementwise._make_fast)."""
    last = bound.last
    if last is None or last["ticket"] is None or type(m) is not Matrix:
        return None
    tm = bound.plan.typed[0]
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
                or len(call_extras) != len(specs) or _rt.current() is not rt \
                or not ticket_valid(ticket):
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
        return dst if skel._relaunch(rt, kernel, gsize, lsize, argv, point) else None

    return fast


class _Bound:
    """One stencil call's plan with its extra arguments, ready to launch on any buffers."""

    def __init__(self, skel: Stencil, plan: Plan, descs, values, shape):
        self.skel = skel
        self.plan = plan
        self.descs = descs
        self.values = values
        self.shape = shape
        self.out_dtype = plan.out_dtype
        self._extra_args = None
        self.last: dict | None = None      # the latest tuned launch (see _repeat_launcher)

    def extra_args(self, rt) -> list:
        if self._extra_args is None:
            tm = self.plan.typed[0]
            out = []
            for k, (d, v) in enumerate(zip(self.descs, self.values)):
                if isinstance(d, ScalarArg):
                    out.append(scalar_value(v, tm.scalar_dtypes.get(k + 1, d.dtype)))
                elif isinstance(d, _MatrixArg):
                    out.append(v.device_buffer(rt))
                else:
                    out.append(v.device_buffer(rt))
                    out.append(np.int64(v.shape[0]))
            self._extra_args = out
        return self._extra_args

    def launch(self, rt, src: Matrix, dst: Matrix, forced, decided: dict,
               launches: list, key=None) -> None:
        """Run src -> dst; parameters are decided by the tuner on the first launch of this
        plan (``decided`` remembers them) and reused after, so iterations cost one enqueue."""
        plan, skel = self.plan, self.skel
        rows, cols = self.shape
        if rows * cols == 0:
            dst.mark_device_written()
            launches.append(_rt.Launch(skel.kind, {}, (0, 0), None, source="empty"))
            return
        fixed = [dst.device_buffer(rt), src.device_buffer(rt), np.int32(rows), np.int32(cols)]
        extra = self.extra_args(rt)
        info: dict = {}

        def run(point):
            wr, wc, cr = int(point["wg_r"]), int(point["wg_c"]), int(point["cr"])
            cc = int(point["vec"]) if int(point["vec"]) > 1 else int(point["cc"])
            if wr == 0 and wc == 0:       # the OpenCL runtime chooses (local_size=None)
                gsize, lsize = (-(-cols // cc), -(-rows // cr)), None
            else:
                gsize = (-(-cols // (wc * cc)) * wc, -(-rows // (wr * cr)) * wr)
                lsize = (wc, wr)
            args = list(fixed)
            if int(point["local"]):
                args.append(_local_memory(tile_bytes(plan.shape, plan.tile_itemsize, point)))
            args.extend(extra)
            kernel = plan.kernel(rt, point)
            info["g"], info["l"], info["args"], info["kernel"] = gsize, lsize, args, kernel
            ev = rt.launch(kernel, gsize, lsize, args, params=point, skeleton=skel.kind)
            return dst, [ev]

        key = (key, id(plan))
        if key in decided:
            point = decided[key]
            _, events = run(point)
            launches.append(_rt.Launch(skel.kind, dict(point), info["g"], info["l"], events,
                                       source="repeat"))
        else:
            dataset = {"n": float(rows * cols), "rows": float(rows), "cols": float(cols),
                       "dtype_size": float(plan.in_dtype.itemsize)}
            outcome = skel._run_tuned(plan, rt, dataset, forced, run)
            decided[key] = dict(outcome.params)
            self.last = dict(info, point=outcome.params, ticket=outcome.ticket)
            launches.append(_rt.Launch(skel.kind, dict(outcome.params), info["g"], info["l"],
                                       list(outcome.events), list(outcome.refused),
                                       outcome.source))
        dst.mark_device_written()


def _local_memory(nbytes: int) -> cl.LocalMemory:
    return cl.LocalMemory(max(int(nbytes), 1))


def _merge_launches(kind: str, launches: list) -> _rt.Launch:
    """One Launch describing a whole call (all iterations): the first launch's parameters
    and sizes, every event, every refusal."""
    first = launches[0]
    events = [e for ln in launches for e in ln.events]
    refused = [r for ln in launches for r in ln.refused]
    merged = _rt.Launch(kind, dict(first.params), first.global_size, first.local_size, events,
                        refused, first.source)
    merged.iterations = len(launches)
    return merged


def _check_iterations(origin: str, iterations) -> int:
    if isinstance(iterations, (bool, np.bool_)) or not isinstance(iterations, (int, np.integer)) \
            or iterations < 0:
        raise ParameterError(f"{origin}: iterations must be an int >= 0, got {iterations!r}")
    return int(iterations)


# -- sequences ----------------------------------------------------------------------------------


class StencilSequence:
    """Stencils applied one after another, ``(a >> b >> c)(m)``; intermediate matrices stay
    on the device. ``seq(m, iterations=k)`` repeats the whole sequence k times.

    Extra arguments given to the sequence go to every stage, each taking as many as its muscle
    has parameters after the neighbourhood (SkelCL passes the same extras to all stages)."""

    kind = "stencil_sequence"

    def __init__(self, *stages):
        flat: list[Stencil] = []
        for s in stages:
            if isinstance(s, StencilSequence):
                flat.extend(s.stages)
            elif isinstance(s, Stencil):
                flat.append(s)
            else:
                raise ParameterError(f"a StencilSequence chains Stencils; got {s!r}")
        if not flat:
            raise ParameterError("a StencilSequence needs at least one Stencil")
        self.stages: tuple[Stencil, ...] = tuple(flat)
        self.last_launch: _rt.Launch | None = None
        self.last_launches: list[_rt.Launch] = []

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

    def __call__(self, m, *extras, iterations: int = 1,
                 params: Mapping | Sequence[Mapping | None] | None = None) -> Matrix:
        """Run every stage in order (``iterations`` times); the result stays on the device.

        ``params``: one dict for every stage, or a list with one dict (or None) per stage."""
        iterations = _check_iterations(self.origin, iterations)
        stage_params = self._stage_params(params)
        src = self.stages[0]._as_input(m)
        rt = _rt.current()
        if iterations == 0:
            self.last_launch = _rt.Launch(self.kind, {}, (0, 0), None, source="none")
            return src.copy()
        per_stage: list[list] = [[] for _ in self.stages]
        decided: dict = {}
        cur = src
        for _ in range(iterations):
            for i, stage in enumerate(self.stages):
                n_extra = max(stage.muscle.n_params - 1, 0)
                if n_extra > len(extras):
                    raise ShapeError(f"{stage.origin}: stage {i} takes {n_extra} extra "
                                     f"argument(s) but the sequence was given {len(extras)}")
                bound = stage._bind(cur, extras[:n_extra], None)
                dst = empty_like_shape(src.shape, bound.out_dtype, rt)
                bound.launch(rt, cur, dst, stage._check_params_arg(stage_params[i]), decided,
                             per_stage[i], key=i)
                cur = dst
        self.last_launches = []
        for stage, launches in zip(self.stages, per_stage):
            stage.last_launch = _merge_launches(stage.kind, launches)
            self.last_launches.append(stage.last_launch)
        events = [e for ln in self.last_launches for e in ln.events]
        refused = [r for ln in self.last_launches for r in ln.refused]
        last = self.last_launches[-1]
        self.last_launch = _rt.Launch(
            self.kind, {i: dict(ln.params) for i, ln in enumerate(self.last_launches)},
            last.global_size, last.local_size, events, refused,
            "+".join(sorted({ln.source for ln in self.last_launches})))
        self.last_launch.iterations = iterations
        return cur

    def _stage_params(self, params) -> list:
        n = len(self.stages)
        if params is None:
            return [None] * n
        if isinstance(params, Mapping):
            return [params] * n
        if isinstance(params, Sequence) and not isinstance(params, str) and len(params) == n:
            return list(params)
        raise ParameterError(f"{self.origin}: params must be a dict or a list of {n} dicts")

