"""Reduce and MapReduce: fold an associative muscle over all elements (or along one axis).

``Reduce(f, identity)(x)`` returns ``x0 ⊕ x1 ⊕ ... ⊕ x(n-1)`` as a NumPy scalar of the
accumulator dtype, chosen as NumPy does (``fold_muscle.py``): a sum or product of bool or narrow
integers accumulates in int64/uint64 as ``np.sum`` does, any other muscle in the type of
``f(acc, x)`` at its fixed point, and ``dtype=`` chooses it outright (then integers wrap exactly
as ``np.add.reduce(x, dtype=dtype)`` does). An empty input (or axis) gives ``identity``.

**Fusion.** ``MapReduce(map_f, reduce_f, identity)(x, y, *extras)`` applies ``map_f`` to the
elements and folds the results in ONE kernel launch, never storing the mapped values; a dot
product is ``MapReduce(lambda a, b: a * b, lambda a, b: a + b, 0)(x, y)``. Map results are
computed when Map is called, except inside ``with sk.lazy():``, where they stay pending as
array expressions do; ``Reduce`` of a pending value (an expression, or such a Map result)
runs as that MapReduce (``skelpy.array.chains``).

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

import math
import weakref
from collections.abc import Mapping

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from ..containers import (
    Container,
    IndexSpace,
    Matrix,
    MatrixRow,
    Vector,
    array_backend,
    empty_like_shape,
)
from ..distribution import reduce as distributed_reduce
from ..distribution.host_fold import HostFold
from ..dtypes import c_type, check_dtype, storage_c_type, storage_dtype
from ..errors import DTypeError, ShapeError
from ..muscle import Muscle
from ..muscle.params import Scalar
from .arguments import (
    array_extra_dtypes,
    classify_extras,
    extra_kernel_args,
    extra_kernel_params,
    input_kind,
    input_muscle_kinds,
)
from .base import Skeleton, check_same_shape, checked_signature, constructor
from .check_buffer import DEBUG_PARAM, check_buffer
from .fold_common import as_scalar, check_identity, identity_value
from .fold_muscle import (
    arithmetic_kind,
    check_neutral,
    dtype_argument,
    fold_combine,
    fold_dtype,
    muscle_is_commutative,
)
from .kernel_source import SourceBuilder
from .plan import feature_dict
from .reduce_plan import PAIRWISE_LEAF, PAIRWISE_LEAVES, ReducePlan

__all__ = ["Reduce", "MapReduce"]

_COUNTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _ticket_counter(rt: _rt.Runtime):
    """A zeroed uint per runtime; the last work-group of every launch resets it to zero."""
    buf = _COUNTERS.get(rt)
    if buf is None:
        buf = rt.allocate(4)
        cl.enqueue_fill_buffer(rt.queue, buf, np.uint32(0), 0, 4)
        _COUNTERS[rt] = buf
    return buf


# -- the skeletons -------------------------------------------------------------------------------


class _Reduction(Skeleton):
    """What Reduce and MapReduce share: plans, the two kernels, and launching."""

    kind = "reduce"
    map_muscle: Muscle | None = None

    def _setup(self, identity, axis, commutative, dtype, out_dtype):
        self.out_dtype = dtype_argument(dtype, out_dtype, self.origin)
        if self.out_dtype is not None:
            self.out_dtype = self._dtype_arg(self.out_dtype, "dtype")
        self.identity = check_identity(identity, self.origin)
        if axis is not None and axis not in (0, 1, -1, -2):
            raise self._error(ShapeError, f"axis must be None, 0 or 1, got {axis!r}")
        self.axis = axis
        self.commutative = None if commutative is None else bool(commutative)
        self._commutative_cache: dict[np.dtype, bool] = {}

    def _check_neutral(self, acc: np.dtype) -> None:
        checked = self.__dict__.setdefault("_neutral_checked", set())
        if acc not in checked:
            check_neutral(None if self.muscle.is_c else self._reduce_fn, acc, self.identity,
                          self.origin)
            checked.add(acc)

    def _is_commutative(self, acc: np.dtype) -> bool:
        if self.commutative is not None:
            return self.commutative
        hit = self._commutative_cache.get(acc)
        if hit is None:
            fn = None if self.muscle.is_c else self._reduce_fn
            hit = self._commutative_cache[acc] = muscle_is_commutative(fn, acc, self.identity)
        return hit

    # -- one call ---------------------------------------------------------------------------
    def _signature(self, inputs: list, extras: list):
        """Classify a call: (plan, shape, axis, extra kinds, extra values, tuner dataset)."""
        shape = check_same_shape(self.origin, inputs)
        extras_desc, extras_val = classify_extras(extras, self.origin)
        axis = self.axis
        ndim = len(shape)
        if axis is not None and ndim == 1:
            if axis not in (0, -1):
                raise self._error(ShapeError, f"axis {axis} is out of range for a Vector")
            axis = None
        if axis is not None:
            axis = axis % 2          # an IndexMatrix is read at the linear index, like data
        kinds = tuple(input_kind(c) for c in inputs)
        sig = (kinds, tuple(extras_desc), axis)
        plan = self._plans.get(sig)
        if plan is None:
            # setdefault: threads making the first call at once all use one plan (one build)
            plan = self._plans.setdefault(sig, self._make_plan(kinds, extras_desc, axis))
        n = math.prod(shape)
        dataset = {"n": float(n), "rows": float(shape[0]),
                   "cols": float(shape[1] if ndim > 1 else 1),
                   "dtype_size": float(plan.out_dtype.itemsize),
                   "axis": float(-1 if axis is None else axis)}
        return plan, shape, axis, extras_desc, extras_val, dataset

    def _describe(self, args, **_options):
        inputs, extras = self._split(args)
        plan, *_rest, dataset = self._signature(inputs, extras)
        return plan, dataset

    # -- on a device group (skelpy.distribution.reduce) -------------------------------------
    def classify(self, inputs: list, extras: list) -> tuple[ReducePlan, tuple, int | None]:
        """A call checked: (plan, input shape, axis: None, 0 or 1)."""
        plan, shape, axis, *_rest = self._signature(inputs, extras)
        return plan, shape, axis

    def reduce_on(self, rt: _rt.Runtime, inputs: list, extras: list, params=None):
        """The fold on one device's runtime ``rt``, its result left there: a one-element
        Vector of the accumulator (an axis fold: its Vector)."""
        return self._reduce(inputs, extras, params, rt)

    def fold_on(self, rt: _rt.Runtime, buffer, count: int, acc: np.dtype, axis=None,
                cols: int = 0):
        """Fold ``count`` accumulator values in ``buffer`` on ``rt`` in order (the partial
        results of the devices of a group); with ``axis=0``, ``count`` rows of ``cols``.
        Returns the device buffer of the result."""
        folds = self.__dict__.setdefault("_partial_folds", {})
        key = (acc, axis)
        if key not in folds:
            folds[key] = Reduce(self._reduce_fn, self.identity, dtype=acc, axis=axis,
                                commutative=self.commutative)
        if axis is None:
            part = Vector.from_device(buffer, (count,), acc, rt)
        else:
            part = Matrix.from_device(buffer, (count, cols), acc, rt)
        out = folds[key].reduce_on(rt, [part], [])
        return out.device_buffer(rt)

    def host_fold(self, acc: np.dtype) -> HostFold | None:
        """How a device group folds its devices' partials on the host (a sum or product: the
        device's bits, see ``distribution/host_fold.py``); None: on a device (fold_on)."""
        folds = self.__dict__.setdefault("_host_folds", {})
        if acc not in folds:
            folds[acc] = HostFold.of(arithmetic_kind(self._reduce_fn), acc, storage_dtype(acc),
                                     identity_value(self.identity, acc, self.origin))
        return folds[acc]

    def _reduce(self, inputs: list, extras: list, params, rt=None):
        on_device = rt is not None
        if not on_device:
            self._ready()
        if not on_device and _rt.current().group is not None:   # several devices at once
            return distributed_reduce.run(self, inputs, extras, params)
        plan, shape, axis, extras_desc, extras_val, dataset = self._signature(inputs, extras)
        forced = self._check_params_arg(params)
        outer = 1 if axis is None else shape[1 - axis]
        choice = None
        if not on_device:
            rt, choice = self._runtime_for(plan, dataset, inputs, extras_val,
                                           out_bytes=outer * plan.out_dtype.itemsize,
                                           reads_result=True if axis is None else None)
        plan.check_device(rt)
        ident = identity_value(self.identity, plan.out_dtype, self.origin)
        if math.prod(shape) > 0:
            self._check_neutral(plan.out_dtype)
        fixed = []
        with self._naming_errors():
            for kind, c in zip(plan.inputs, inputs, strict=True):
                fixed += kind.kernel_args(c, rt)
            fixed += extra_kernel_args(extras_desc, extras_val, plan.muscle,
                                       plan.n_muscle_inputs, rt, self.origin)
            checks = check_buffer(plan, rt)
            if checks is not None:
                fixed.append(checks.buffer)
        if axis is None:
            result = self._run_flat(plan, rt, int(dataset["n"]), ident, fixed, forced, dataset,
                                    on_device)
        else:
            result = self._run_axis(plan, rt, shape, axis, ident, fixed, forced, dataset)
        if checks is not None:
            checks.raise_if_failed(self.origin)
        self._chosen(choice, result)
        return result

    def _run_flat(self, plan, rt, n, ident, fixed, forced, dataset, on_device=False):
        acc = plan.out_dtype
        st = storage_dtype(acc)
        if n == 0:
            self._check_forced_on_empty(plan, forced, rt)
            self.last_launch = _rt.Launch(self.kind, {}, (0,), None)
            if on_device:
                return Vector(np.asarray([ident], st).view(acc))
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
            k1 = plan.kernel(rt, point, "skelpy_reduce")
            args = [partial, rbuf, counter, np.int64(n), np.int64(per), np.int32(stages == 1),
                    ident, *fixed]
            launched["g"], launched["l"] = (groups * wg,), (wg,)
            events = [rt.launch(k1, (groups * wg,), (wg,), args, params=point,
                                skeleton=self.kind, origin=self.origin)]
            if stages == 2 and groups > 1:
                k2 = plan.kernel(rt, point, "skelpy_reduce_final")
                events.append(rt.launch(k2, (wg,), (wg,), [partial, rbuf, np.int64(groups),
                                                           ident],
                                        params=point, skeleton=self.kind, origin=self.origin))
            result.mark_device_written()
            return result, events

        outcome = self._run_tuned(plan, rt, dataset, forced, run)
        self._record(outcome, launched["g"], launched["l"])
        if on_device:
            return outcome.result
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
            k = plan.kernel(rt, point, "skelpy_reduce_axis")
            args = [out.device_buffer(rt), np.int64(outer), np.int64(inner), np.int64(so),
                    np.int64(sk_), np.int32(lanes), np.int32(axis == 1), ident, *fixed]
            launched["g"], launched["l"] = (groups * wg,), (wg,)
            ev = rt.launch(k, (groups * wg,), (wg,), args, params=point, skeleton=self.kind,
                           origin=self.origin)
            out.mark_device_written()
            return out, [ev]

        outcome = self._run_tuned(plan, rt, dataset, forced, run)
        self._record(outcome, launched["g"], launched["l"])
        return outcome.result

    # -- plans ------------------------------------------------------------------------------
    def _make_plan(self, inputs, extras_desc, axis) -> ReducePlan:
        map_muscle = self.map_muscle
        n_extra = len(extras_desc)
        source = SourceBuilder("reduce")
        if map_muscle is None:
            (inp,) = inputs
            in_dt = inp.dtype
            acc = fold_dtype(self.muscle, self._reduce_fn, in_dt, self.out_dtype, self.origin)
            decls = inp.declarations(0)
            load = f"(({c_type(acc)}){inp.read(0, '(i)')})"
            map_tm = None
            n_muscle_inputs = 1
        else:
            kinds, n_muscle_inputs = input_muscle_kinds(inputs, extras_desc,
                                                        map_muscle.n_params)
            if map_muscle.n_params != len(kinds):
                raise self._error(
                    ShapeError,
                    f"the map muscle takes {map_muscle.n_params} parameter(s) but this call "
                    f"supplies {len(kinds)} ({n_muscle_inputs} from the input container(s) "
                    f"and {n_extra} extra argument(s))")
            map_tm = map_muscle.specialise(kinds, c_name="skp_map", checks=self._checks())
            acc = fold_dtype(self.muscle, self._reduce_fn, map_tm.out_dtype, self.out_dtype,
                             self.origin)
            decl_ex, call_ex = extra_kernel_params(extras_desc, map_tm, n_muscle_inputs)
            decls = [d for k, inp in enumerate(inputs) for d in inp.declarations(k)] + decl_ex
            if map_tm.checked:          # (the reduce muscle runs in helpers: not checked)
                decls.append(DEBUG_PARAM)
            call = [inp.read(k, "(i)") for k, inp in enumerate(inputs)]
            load = f"(({c_type(acc)})skp_map({', '.join(call + call_ex)}))"
            source.muscle(map_tm)
        acc = check_dtype(acc, self.origin)
        # Specialised for (acc, acc); its result is converted to acc by SKP_COMBINE.
        red_tm = self.muscle.specialise((Scalar(acc), Scalar(acc)), c_name="skp_reduce")
        ordered = not self._is_commutative(acc)
        mode = "flat" if axis is None else f"axis{axis}"
        combine, nan_first = fold_combine(acc, None if self.muscle.is_c else self._reduce_fn,
                                          "skp_reduce")
        source.muscle(red_tm).part(nan_first)
        built = (source
                 .header([
                     f"#define SKP_ACC {c_type(acc)}",
                     f"#define SKP_ACC_ST {storage_c_type(acc)}",
                     f"#define SKP_COMBINE(a, b) (({c_type(acc)}){combine}((a), (b)))",
                     "#define SKP_PARAMS_DECL " + "".join(", " + x for x in decls),
                     f"#define SKP_LOAD(i) {load}",
                     f"#define SKP_ORDERED {int(ordered)}",
                     f"#define SKP_PAIRWISE {int(acc.kind == 'f')}",
                 ])
                 .file("reduce.cl")
                 .data(acc, *(inp.data_dtype for inp in inputs),
                       *array_extra_dtypes(extras_desc))
                 .build(("skelpy_reduce", "skelpy_reduce_final") if axis is None
                        else ("skelpy_reduce_axis",), key_suffix=f"/{mode}"))
        features = feature_dict(red_tm)
        if map_tm is not None:
            for k, v in feature_dict(map_tm).items():
                features["map_" + k] = v
        features.update({"n_inputs": float(len(inputs)), "n_extras": float(n_extra),
                         "ordered": float(ordered), "fused_map": float(map_tm is not None)})
        return ReducePlan(source=built, out_dtype=acc, muscles=(map_tm or red_tm, red_tm),
                          features=features, origin=self.origin, inputs=tuple(inputs),
                          n_muscle_inputs=n_muscle_inputs, ordered=ordered, axis=axis)


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

    @constructor
    def __init__(self, f, identity, *, dtype=None, axis: int | None = None,
                 commutative: bool | None = None, out_dtype=None):
        super().__init__(f)
        self._check_param_count(self.muscle, 2, True,
                                "the value folded so far and the next element")
        self._reduce_fn = f
        self.function = f          # the muscle as given (a fused input's MapReduce folds it)
        self._setup(identity, axis, commutative, dtype, out_dtype)

    @checked_signature
    def __call__(self, x, *, params: Mapping | None = None) -> np.generic | Vector:
        """Fold all elements (or along ``axis``); a scalar, or a Vector for an axis fold."""
        if params is None and isinstance(x, Container) and x.is_pending:
            fused = array_backend().fused_reduce(self, x)   # the input's kernel is the map
            if fused is not None:
                return fused
        return self._reduce([self._data_input(x)], [], params)

    @checked_signature
    def source(self, x, *, params: Mapping | None = None) -> str:
        """The OpenCL C program a call with ``x`` builds (see Skeleton.source)."""
        return super().source(x, params=params)

    def _split(self, args):
        return [self._data_input(args[0])], []


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
        super().__init__(reduce_f)
        self._reduce_fn = reduce_f
        if inputs is not None and (not isinstance(inputs, int) or inputs < 1):
            raise self._error(ShapeError, f"inputs must be a positive int, got {inputs!r}")
        self.inputs = inputs
        self._setup(identity, axis, commutative, dtype, out_dtype)

    @property
    def origin(self) -> str:
        return f"MapReduce({self.map_muscle.origin}, {self.muscle.origin})"

    @checked_signature
    def __call__(self, *args, params: Mapping | None = None) -> np.generic | Vector:
        """Map and fold in one pass; a scalar, or a Vector for an axis fold."""
        inputs, extras = self._split(args)
        return self._reduce(inputs, extras, params)

    @checked_signature
    def source(self, *args, params: Mapping | None = None) -> str:
        """The OpenCL C program a call with these arguments builds (see Skeleton.source)."""
        return super().source(*args, params=params)

    def _split(self, args):
        """(inputs, extras) of a call: see the class docstring."""
        n_in = self._count_inputs(args)
        inputs = []
        for k, a in enumerate(args[:n_in]):
            if isinstance(a, (list, tuple)):
                a = np.asarray(a)
            inputs.append(self._container(a, f"input {k + 1}"))
        return inputs, list(args[n_in:])

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
    return isinstance(v, (Container, MatrixRow, IndexSpace, np.ndarray, list, tuple)) and not (
        isinstance(v, np.ndarray) and v.ndim == 0)


def _shape_of(v) -> tuple:
    if isinstance(v, (list, tuple)):
        return np.shape(v)
    return tuple(v.shape)

