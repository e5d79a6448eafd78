"""Reduce and MapReduce: fold an associative muscle over all elements (or along one axis).

``Reduce(f, identity)(x)`` returns ``x0 ⊕ x1 ⊕ ... ⊕ x(n-1)`` as a NumPy scalar of the
accumulator dtype, chosen as NumPy does (``fold_muscle.py``): a sum or product of bool or narrow
integers accumulates in int64/uint64 as ``np.sum`` does, any other muscle in the type of
``f(acc, x)`` at its fixed point, and ``dtype=`` chooses it outright (then integers wrap exactly
as ``np.add.reduce(x, dtype=dtype)`` does). An empty input (or axis) gives ``identity``.

**Fusion decision.** Map results in skelpy are real device containers, computed when Map is
called, so ``Reduce(Map(...)(x))`` cannot be fused after the fact without turning every Map into
a deferred expression (changing when kernels run and where errors surface). Instead, as in
SkePU, the fused form is explicit: ``MapReduce(map_f, reduce_f, identity)(x, y, *extras)``
applies ``map_f`` to the elements and folds the results in ONE kernel launch, never storing the
mapped values; a dot product is ``MapReduce(lambda a, b: a * b, lambda a, b: a + b, 0)(x, y)``.

**Kernel** (``kernels/reduce.cl``): every work-item folds several elements (thread coarsening:
``items`` per step), the work-group folds in local memory, and the last work-group to finish
(an atomic ticket) folds the group results — all in one launch (``stages=1``), or with a
second launch (``stages=2``). One launch needs a fence that orders global stores for other
work-groups, which OpenCL 1.2 does not promise: it is offered on NVIDIA (PTX ``membar.gl``) and
on CPUs, elsewhere only ``stages=2``. **Accuracy**: float folds are pairwise at every launch
point — a work-item folds 16-element leaves and combines them like a binary counter in
registers (``PAIRWISE_LEAVES`` leaves at most; the host sizes shares to whole leaves), and the
group and partial folds are trees — so a float sum is within a few ulps of NumPy's pairwise sum
whatever the tuner picks (``tests/test_fold_accuracy.py``). Launch parameters: ``wg``
(work-group size), ``items``, ``groups`` (an upper bound on the number of work-groups) and
``stages``. On an H200 a float32 sum of 2^26 elements ran at ~95% of the device's copy
bandwidth before the pairwise leaves (not yet measured there since).

**Order.** Only associativity is assumed by default. When the muscle is known to be commutative
(``commutative=True``, or detected for a Python muscle by comparing ``f(a, b)`` with ``f(b, a)``
on sample values on the host), each work-item reads interleaved elements (perfectly coalesced).
Otherwise the group stages tiles through local memory so that every fold keeps element order.

**Axis.** ``axis=1`` (row reductions) and ``axis=0`` (column reductions) of a Matrix return a
Vector; several work-items (``lanes``) share one output and ``wg // lanes`` outputs share a
work-group.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from ..containers import (
    Container,
    IndexMatrix,
    IndexSpace,
    IndexVector,
    Vector,
    as_container,
    empty_like_shape,
)
from ..dtypes import c_type, check_dtype, storage_c_type, storage_dtype
from ..errors import DTypeError, ShapeError
from ..muscle import Muscle
from ..muscle.params import IndexPoint, Scalar
from ..tuner.space import Param, ParamSpace, pow2_range
from .base import (
    ArrayArg,
    Plan,
    Skeleton,
    check_same_shape,
    classify_extras,
    extra_kernel_args,
    extra_kernel_params,
    feature_dict,
    fp64_check,
    scalar_value,
    source_key,
)
from .fold_muscle import dtype_argument, fold_dtype, muscle_is_commutative

__all__ = ["Reduce", "MapReduce"]

ITEMS_VALUES = (1, 2, 4, 8, 16, 32, 64)
GROUPS_VALUES = (1, 4, 16, 64, 256, 1024, 4096, 16384)
MAX_WG = 1024
_LOCAL_RESERVE = 512                  # bytes of local memory left to the implementation


# -- shared helpers (Scan uses some of them too) -----------------------------------------------


def check_identity(identity, origin: str):
    """The identity must be a number; it is converted to the accumulator dtype per call."""
    if isinstance(identity, (bool, int, float, np.generic)) or (
            isinstance(identity, np.ndarray) and identity.ndim == 0):
        return identity
    raise DTypeError(f"{origin}: identity must be a number (the neutral element of the "
                     f"operator, e.g. 0 for +, 1 for *), got {type(identity).__name__}")


def identity_value(identity, dtype: np.dtype, origin: str):
    """The identity as a kernel argument of ``dtype`` (its storage type), exactly."""
    dt = np.dtype(dtype)
    if dt.kind in "iub" and isinstance(identity, (float, np.floating)) and (
            not np.isfinite(identity) or float(identity) != int(identity)):
        raise DTypeError(f"{origin}: identity {identity!r} cannot be represented as {dt} "
                         "(for a max over integers use np.iinfo(dtype).min)")
    if dt.kind in "iu" and not isinstance(identity, (bool, np.bool_)):
        info = np.iinfo(dt)
        if not info.min <= int(identity) <= info.max:
            raise DTypeError(f"{origin}: identity {identity!r} is out of range for {dt}")
    return scalar_value(identity, dt)


def as_scalar(host: np.ndarray, dtype: np.dtype):
    """A downloaded one-element storage array as a NumPy scalar of ``dtype``."""
    if dtype == np.bool_:
        return np.bool_(host[0] != 0)
    return host.view(dtype)[0]


_COUNTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _ticket_counter(rt: _rt.Runtime):
    """A zeroed uint per runtime; the last work-group of every launch resets it to zero."""
    buf = _COUNTERS.get(rt)
    if buf is None:
        buf = rt.allocate(4)
        cl.enqueue_fill_buffer(rt.queue, buf, np.uint32(0), 0, 4)
        _COUNTERS[rt] = buf
    return buf


def local_budget(rt: _rt.Runtime) -> int:
    """Bytes of local memory a kernel's own arrays may use on this device."""
    return rt.device.local_mem_size - _LOCAL_RESERVE


def max_wg(rt: _rt.Runtime) -> int:
    """The largest 1-D work-group size worth offering the tuner on this device."""
    return min(MAX_WG, rt.device.max_work_group_size, rt.device.max_work_item_sizes[0])


def _input_desc(c) -> tuple:
    if isinstance(c, IndexVector):
        return ("iv",)
    if isinstance(c, IndexMatrix):
        return ("im",)
    if isinstance(c, IndexSpace):
        raise DTypeError(f"unsupported index space {c!r}")
    return ("c", c.dtype, c.ndim)


def _input_kinds(in_desc, n_params: int, n_extra: int):
    """Muscle parameter kinds, kernel declarations and call arguments for the inputs."""
    kinds, decls, call = [], [], []
    for k, d in enumerate(in_desc):
        if d[0] == "c":
            kinds.append(Scalar(d[1]))
            decls.append(f"__global const {storage_c_type(d[1])}* restrict in{k}")
            call.append(f"(({c_type(d[1])})in{k}[(i)])")
        elif d[0] == "iv":
            kinds.append(Scalar(np.dtype(np.int64)))
            call.append("((long)(i))")
        else:
            decls.append("const long idx_cols")
            if n_params == 2 + n_extra:
                kinds += [Scalar(np.dtype(np.int64)), Scalar(np.dtype(np.int64))]
            else:
                kinds.append(IndexPoint())
            call.append("((long)(i)) / idx_cols, ((long)(i)) % idx_cols")
    return kinds, decls, call


# -- the skeletons -------------------------------------------------------------------------------


class _Reduction(Skeleton):
    """What Reduce and MapReduce share: plans, the two kernels, and launching."""

    kind = "reduce"

    def _setup(self, identity, axis, commutative):
        self.identity = check_identity(identity, self.origin)
        if axis is not None and axis not in (0, 1, -1, -2):
            raise self._error(ShapeError, f"axis must be None, 0 or 1, got {axis!r}")
        self.axis = axis
        self.commutative = None if commutative is None else bool(commutative)
        self._commutative_cache: dict[np.dtype, bool] = {}

    def _is_commutative(self, acc: np.dtype) -> bool:
        if self.commutative is not None:
            return self.commutative
        hit = self._commutative_cache.get(acc)
        if hit is None:
            fn = None if self.muscle.is_c else self._reduce_fn
            hit = self._commutative_cache[acc] = muscle_is_commutative(fn, acc, self.identity)
        return hit

    # -- one call ---------------------------------------------------------------------------
    def _reduce(self, inputs: list, extras: list, params, map_muscle: Muscle | None):
        shape = check_same_shape(self.origin, inputs)
        extras_desc, extras_val = classify_extras(extras, self.origin)
        forced = self._check_params_arg(params)
        axis = self.axis
        ndim = len(shape)
        if axis is not None and ndim == 1:
            if axis not in (0, -1):
                raise self._error(ShapeError, f"axis {axis} is out of range for a Vector")
            axis = None
        if axis is not None:
            axis = axis % 2
            if any(isinstance(c, IndexSpace) for c in inputs):
                raise self._error(ShapeError, "axis reductions need container inputs")
        in_desc = tuple(_input_desc(c) for c in inputs)
        sig = (in_desc, tuple(extras_desc), axis)
        rt = _rt.current()
        plan = self._plans.get(sig)
        if plan is None:
            plan = self._plans[sig] = self._make_plan(in_desc, extras_desc, map_muscle, axis)
        fp64_check(rt, plan.uses_fp64, self.origin)
        acc = plan.out_dtype
        ident = identity_value(self.identity, acc, self.origin)
        n = int(np.prod(shape, dtype=np.int64))

        fixed = []
        for c in inputs:
            if isinstance(c, Container):
                fixed.append(c.device_buffer(rt))
            elif isinstance(c, IndexMatrix):
                fixed.append(np.int64(c.shape[1]))
        fixed += extra_kernel_args(extras_desc, extras_val, plan.typed[0],
                                   plan.n_muscle_inputs, rt)
        dataset = {"n": float(n), "rows": float(shape[0]),
                   "cols": float(shape[1] if ndim > 1 else 1),
                   "dtype_size": float(acc.itemsize), "axis": float(-1 if axis is None else axis)}
        if axis is None:
            return self._run_flat(plan, rt, n, ident, fixed, forced, dataset)
        return self._run_axis(plan, rt, shape, axis, ident, fixed, forced, dataset)

    def _run_flat(self, plan, rt, n, ident, fixed, forced, dataset):
        acc = plan.out_dtype
        st = storage_dtype(acc)
        if n == 0:
            self.last_launch = _rt.Launch(self.kind, {}, (0,), None)
            return as_scalar(np.asarray([ident], st), acc)
        counter = _ticket_counter(rt)
        launched = {}

        def run(point):
            wg, items = int(point["wg"]), int(point["items"])
            cap, stages = max(1, int(point["groups"])), int(point["stages"])
            chunk = wg * items
            if acc.kind == "f":
                # Shares are whole leaves, and at most PAIRWISE_LEAVES of them per work-item,
                # so that every work-item's fold is a pairwise tree (reduce.cl).
                chunk *= max(1, PAIRWISE_LEAF // items)
                cap = max(cap, -(-n // (chunk * PAIRWISE_LEAVES)))
            chunks = -(-n // chunk)
            per = -(-chunks // min(chunks, cap)) * chunk
            groups = -(-n // per)
            result = empty_like_shape((1,), acc, rt)
            rbuf = result.device_buffer(rt)
            partial = rt.allocate(groups * st.itemsize) if groups > 1 else rbuf
            k1 = plan_kernel(plan, rt, point, "skelpy_reduce")
            args = [partial, rbuf, counter, np.int64(n), np.int64(per), np.int32(stages == 1),
                    ident, *fixed]
            launched["g"], launched["l"] = (groups * wg,), (wg,)
            events = [rt.launch(k1, (groups * wg,), (wg,), args, params=point,
                                skeleton=self.kind)]
            if stages == 2 and groups > 1:
                k2 = plan_kernel(plan, rt, point, "skelpy_reduce_final")
                events.append(rt.launch(k2, (wg,), (wg,), [partial, rbuf, np.int64(groups),
                                                           ident],
                                        params=point, skeleton=self.kind))
            result.mark_device_written()
            return result, events

        outcome = self._run_tuned(plan, rt, dataset, forced, run)
        self._record(outcome, launched["g"], launched["l"])
        host = np.empty(1, st)
        rt.download(host, outcome.result.device_buffer(rt))
        return as_scalar(host, acc)

    def _run_axis(self, plan, rt, shape, axis, ident, fixed, forced, dataset):
        rows, cols = shape
        outer, inner = (rows, cols) if axis == 1 else (cols, rows)
        so, sk_ = (cols, 1) if axis == 1 else (1, cols)
        acc = plan.out_dtype
        if outer == 0 or inner == 0:    # nothing to fold: every output is the identity
            self.last_launch = _rt.Launch(self.kind, {}, (0,), None)
            return Vector(np.full(outer, ident, storage_dtype(acc)).view(acc))
        launched = {}

        def run(point):
            wg, lanes = int(point["wg"]), int(point["lanes"])
            segs = wg // lanes
            groups = -(-outer // segs)
            out = empty_like_shape((outer,), acc, rt)
            k = plan_kernel(plan, rt, point, "skelpy_reduce_axis")
            args = [out.device_buffer(rt), np.int64(outer), np.int64(inner), np.int64(so),
                    np.int64(sk_), np.int32(lanes), np.int32(axis == 1), ident, *fixed]
            launched["g"], launched["l"] = (groups * wg,), (wg,)
            ev = rt.launch(k, (groups * wg,), (wg,), args, params=point, skeleton=self.kind)
            out.mark_device_written()
            return out, [ev]

        outcome = self._run_tuned(plan, rt, dataset, forced, run)
        self._record(outcome, launched["g"], launched["l"])
        return outcome.result

    # -- plans ------------------------------------------------------------------------------
    def _make_plan(self, in_desc, extras_desc, map_muscle: Muscle | None, axis) -> Plan:
        n_extra = len(extras_desc)
        if map_muscle is None:
            (d,) = in_desc
            in_dt = d[1]
            acc = fold_dtype(self.muscle, self._reduce_fn, in_dt, self.out_dtype, self.origin)
            decls = [f"__global const {storage_c_type(in_dt)}* restrict in0"]
            load = f"(({c_type(acc)})(({c_type(in_dt)})in0[(i)]))"
            map_tm = None
            n_muscle_inputs = 1
            uses_fp64 = in_dt == np.float64
        else:
            kinds, decls, call = _input_kinds(in_desc, map_muscle.n_params, n_extra)
            n_muscle_inputs = len(kinds)
            kinds += [e.kind() for e in extras_desc]
            if map_muscle.n_params != len(kinds):
                raise self._error(
                    ShapeError,
                    f"the map muscle takes {map_muscle.n_params} parameter(s) but this call "
                    f"supplies {len(kinds)} ({n_muscle_inputs} from the input container(s) "
                    f"and {n_extra} extra argument(s))")
            map_tm = map_muscle.specialise(kinds, c_name="skp_map")
            acc = fold_dtype(self.muscle, self._reduce_fn, map_tm.out_dtype, self.out_dtype,
                             self.origin)
            decl_ex, call_ex = extra_kernel_params(extras_desc, map_tm, n_muscle_inputs)
            decls = decls + decl_ex
            load = f"(({c_type(acc)})skp_map({', '.join(call + call_ex)}))"
            uses_fp64 = map_tm.uses_fp64 or any(d[0] == "c" and d[1] == np.float64
                                                for d in in_desc) or any(
                isinstance(e, ArrayArg) and e.dtype == np.float64 for e in extras_desc)
        acc = check_dtype(acc, self.origin)
        # Specialised for (acc, acc); its result is converted to acc by SKP_COMBINE.
        red_tm = self.muscle.specialise((Scalar(acc), Scalar(acc)), c_name="skp_reduce")
        uses_fp64 = uses_fp64 or red_tm.uses_fp64 or acc == np.float64
        ordered = not self._is_commutative(acc)
        header = [
            "/* generated by skelpy.skeletons.reduce */",
            f"#define SKP_ACC {c_type(acc)}",
            f"#define SKP_ACC_ST {storage_c_type(acc)}",
            f"#define SKP_COMBINE(a, b) (({c_type(acc)})skp_reduce((a), (b)))",
            "#define SKP_PARAMS_DECL " + "".join(", " + x for x in decls),
            f"#define SKP_LOAD(i) {load}",
            f"#define SKP_ORDERED {int(ordered)}",
            f"#define SKP_PAIRWISE {int(acc.kind == 'f')}",
        ]
        pragma = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if uses_fp64 else ""
        source = (pragma + (map_tm.source + "\n" if map_tm else "") + red_tm.source + "\n"
                  + "\n".join(header) + "\n" + _rt.read_kernel("reduce.cl"))
        features = feature_dict(red_tm)
        if map_tm is not None:
            for k, v in feature_dict(map_tm).items():
                features["map_" + k] = v
        features.update({"n_inputs": float(len(in_desc)), "n_extras": float(n_extra),
                         "ordered": float(ordered), "fused_map": float(map_tm is not None)})
        typed = (map_tm or red_tm, red_tm)
        mode = "flat" if axis is None else f"axis{axis}"
        plan = Plan(source=source, kernel_name="skelpy_reduce", kernel_key=source_key(
            source + f"/{mode}"), out_dtype=acc, typed=typed, features=features,
                    space_factory=None, macros=None)
        plan.uses_fp64 = uses_fp64
        plan.n_muscle_inputs = n_muscle_inputs
        plan.ordered = ordered
        if axis is None:
            plan.macros = _flat_macros
            plan.space_factory = lambda rt, plan=plan: _flat_space(rt, plan)
        else:
            plan.macros = _axis_macros
            plan.space_factory = lambda rt, plan=plan: _axis_space(rt, plan)
        return plan


def device_options(rt: _rt.Runtime) -> tuple[str, ...]:
    """Build options that depend on the device: SKP_NVIDIA (the fence to use) and SKP_UNROLL
    (unroll coarsening loops: many loads in flight on a GPU, only compile time on a CPU)."""
    opts = ("-DSKP_UNROLL=1",) if rt.device.kind == "gpu" else ()
    if "nvidia" in rt.device.platform.lower():
        opts += ("-DSKP_NVIDIA=1",)
    return opts


PAIRWISE_LEAVES = 1 << 15     # leaves one work-item folds pairwise (2^(SKP_LEVELS-1), reduce.cl)
PAIRWISE_LEAF = 16            # elements of a leaf, folded serially (SKP_LEAF, reduce.cl)


def one_launch_ok(rt: _rt.Runtime) -> bool:
    """Whether the last-work-group-finishes pattern (stages=1) is safe here: it needs a fence
    that orders global stores for other work-groups, which we have on NVIDIA (PTX membar.gl)
    and on CPUs; elsewhere the partials are folded by a second launch."""
    return rt.device.kind == "cpu" or "nvidia" in rt.device.platform.lower()


def plan_kernel(plan: Plan, rt: _rt.Runtime, point: Mapping, name: str,
                extra: tuple[str, ...] = ()) -> cl.Kernel:
    """The kernel ``name`` of the program built for ``point`` on ``rt`` (cached on the plan)."""
    opts = plan.macros(point) + extra + device_options(rt)
    key = (id(rt), opts, name)
    k = plan.programs.get(key)
    if k is None:
        prg = rt.build(plan.source, opts)
        k = plan.programs[key] = rt.kernel(prg, name)
    return k


def _flat_macros(point: Mapping) -> tuple[str, ...]:
    return (f"-DSKP_WG={int(point['wg'])}", f"-DSKP_ITEMS={int(point['items'])}")


def _axis_macros(point: Mapping) -> tuple[str, ...]:
    return (f"-DSKP_WG={int(point['wg'])}", "-DSKP_AXIS_ONLY=1")


def _flat_default(rt: _rt.Runtime, itemsize: int, wmax: int, ordered: bool) -> dict:
    """Starting points measured on an H200 (float32 sums of 2^26 elements: 95% of copy
    bandwidth interleaved, 56% order-preserving) and on PoCL."""
    dev = rt.device
    if dev.kind == "gpu":
        groups = min(GROUPS_VALUES, key=lambda g: abs(g - 8 * dev.compute_units))
        if ordered:
            return {"wg": min(128, wmax), "items": 32 if itemsize <= 4 else 16,
                    "groups": groups, "stages": 1}
        return {"wg": min(256, wmax), "items": 16 if itemsize <= 4 else 8,
                "groups": groups, "stages": 1}
    return {"wg": min(64, wmax), "items": 16, "groups": 64, "stages": 1}


def _flat_space(rt: _rt.Runtime, plan: Plan) -> ParamSpace:
    """Legal points: work-group within the device limits, local memory within budget."""
    wmax = max_wg(rt)
    acc_size = storage_dtype(plan.out_dtype).itemsize
    budget = local_budget(rt)
    ordered = plan.ordered

    def local_bytes(wg: int, items: int) -> int:
        tile = wg * items + (wg * items >> 5) if ordered else 0
        return (wg + tile) * acc_size + 16

    params = [
        Param("wg", pow2_range(1, wmax), doc="work-group size"),
        Param("items", ITEMS_VALUES, doc="elements per work-item per step (coarsening)"),
        Param("groups", GROUPS_VALUES, doc="upper bound on the number of work-groups"),
        Param("stages", (1, 2), numeric=False,
              doc="1: the last work-group folds the partials; 2: a second launch does"),
    ]

    stages = (1, 2) if one_launch_ok(rt) else (2,)

    def legal(p) -> bool:
        wg, items = int(p["wg"]), int(p["items"])
        return (1 <= wg <= wmax and wg & (wg - 1) == 0 and items >= 1
                and items & (items - 1) == 0 and int(p["groups"]) >= 1
                and p["stages"] in stages and local_bytes(wg, items) <= budget)

    default = _flat_default(rt, acc_size, wmax, ordered)
    default["stages"] = stages[0]
    space = ParamSpace(params, default, legal, extra_values_ok=("groups",))
    if not space.is_legal(space.default):
        space.default = space.nearest(space.default) or space.default
    return space


def _axis_space(rt: _rt.Runtime, plan: Plan) -> ParamSpace:
    wmax = max_wg(rt)
    acc_size = storage_dtype(plan.out_dtype).itemsize
    budget = local_budget(rt)
    wgs = pow2_range(1, wmax)
    params = [Param("wg", wgs, doc="work-group size"),
              Param("lanes", wgs, doc="work-items folding one output")]

    def legal(p) -> bool:
        wg, lanes = int(p["wg"]), int(p["lanes"])
        return (1 <= lanes <= wg <= wmax and wg & (wg - 1) == 0 and lanes & (lanes - 1) == 0
                and wg * acc_size + 16 <= budget)

    gpu = rt.device.kind == "gpu"
    default = {"wg": min(256 if gpu else 64, wmax), "lanes": min(32 if gpu else 16, wmax)}
    return ParamSpace(params, default, legal)


class Reduce(_Reduction):
    """``Reduce(f, identity)(x)``: fold the associative muscle ``f`` over all elements of a
    Vector, Matrix or ndarray and return a NumPy scalar of the accumulator dtype: NumPy's
    (``np.sum``'s for a sum or product, the type of ``f(acc, x)`` otherwise), or ``dtype``
    (``out_dtype`` is an older name for it).

    ``identity`` is ``f``'s neutral element (0 for +, 1 for *, -inf or the dtype's minimum for
    max); it is the result for an empty input. ``axis=1`` (``axis=0``) on a Matrix folds each
    row (column) and returns a Vector. ``commutative`` (default: detected for Python muscles,
    False for OpenCL C muscles) only selects the faster interleaved kernel; the result of an
    associative muscle does not depend on it beyond floating-point rounding.
    """

    kind = "reduce"

    def __init__(self, f, identity, *, dtype=None, axis: int | None = None,
                 commutative: bool | None = None, out_dtype=None):
        super().__init__(f, out_dtype=dtype_argument(dtype, out_dtype, "Reduce"))
        self._reduce_fn = f
        self._setup(identity, axis, commutative)

    def __call__(self, x, *, params: Mapping | None = None) -> np.generic | Vector:
        """Fold all elements (or along ``axis``); a scalar, or a Vector for an axis fold."""
        return self._reduce([self._data_input(x)], [], params, None)


class MapReduce(_Reduction):
    """``MapReduce(map_f, reduce_f, identity)(x, y, ..., *extras)``: fold ``reduce_f`` over
    ``map_f(x[i], y[i], ..., *extras)`` in one kernel launch, never storing the mapped values.

    Inputs and extras are told apart by a fixed rule: the inputs are the leading arguments that
    are containers (Vector, Matrix, ndarray, or an index space) of the first argument's shape,
    at most ``map_f``'s arity; the rest are extras, passed to ``map_f`` after the elements
    (numbers, or containers read by index). Give ``inputs=k`` to say how many there are when a
    same-shaped container is meant as an extra. The result is a NumPy scalar (a Vector with
    ``axis``) of the accumulator dtype: chosen from the map's output dtype as in Reduce, or
    ``dtype``.

    A dot product: ``MapReduce(lambda a, b: a * b, lambda a, b: a + b, 0)(x, y)``.
    """

    kind = "mapreduce"

    def __init__(self, map_f, reduce_f, identity, *, dtype=None, axis: int | None = None,
                 commutative: bool | None = None, inputs: int | None = None, out_dtype=None):
        self.map_muscle = map_f if isinstance(map_f, Muscle) else Muscle(map_f)
        super().__init__(reduce_f, out_dtype=dtype_argument(dtype, out_dtype, "MapReduce"))
        self._reduce_fn = reduce_f
        if inputs is not None and (not isinstance(inputs, int) or inputs < 1):
            raise self._error(ShapeError, f"inputs must be a positive int, got {inputs!r}")
        self.inputs = inputs
        self._setup(identity, axis, commutative)

    @property
    def origin(self) -> str:
        return f"MapReduce({self.map_muscle.origin}, {self.muscle.origin})"

    def __call__(self, *args, params: Mapping | None = None) -> np.generic | Vector:
        """Map and fold in one pass; a scalar, or a Vector for an axis fold."""
        n_in = self._count_inputs(args)
        inputs = []
        for k, a in enumerate(args[:n_in]):
            if isinstance(a, (list, tuple)):
                a = np.asarray(a)
            inputs.append(as_container(a, f"{self.origin}: input {k + 1}"))
        return self._reduce(inputs, list(args[n_in:]), params, self.map_muscle)

    def _count_inputs(self, args) -> int:
        if not args:
            raise self._error(ShapeError, "needs at least one input container")
        if self.inputs is not None:
            if len(args) < self.inputs:
                raise self._error(ShapeError, f"needs {self.inputs} input container(s), got "
                                  f"{len(args)} argument(s)")
            return self.inputs
        first = args[0]
        if not _is_container_like(first):
            raise self._error(DTypeError, "the first argument must be an input container "
                              f"(Vector, Matrix, ndarray or index space), got "
                              f"{type(first).__name__}")
        shape = _shape_of(first)
        n = 1
        limit = max(1, self.map_muscle.n_params)
        while n < len(args) and n < limit and _is_container_like(args[n]) \
                and _shape_of(args[n]) == shape:
            n += 1
        return n


def _is_container_like(v) -> bool:
    return isinstance(v, (Container, IndexSpace, np.ndarray, list, tuple)) and not (
        isinstance(v, np.ndarray) and v.ndim == 0)


def _shape_of(v) -> tuple:
    if isinstance(v, (list, tuple)):
        return np.shape(v)
    return tuple(v.shape)

