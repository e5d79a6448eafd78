"""Map and Zip: one muscle applied element by element.

Both are the same kernel (``kernels/elementwise.cl``) over one or two inputs; the inputs may
be Vectors, Matrices, ndarrays or index spaces, and extra arguments follow them. Tunable
launch parameters: work-group size ``wg``, coarsening ``coarsen`` with ``blocked`` stride
(interleaved keeps loads coalesced, [Magni 2015] §4.3.2), and load/store vector width ``vw``.
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .. import runtime as _rt
from .. import tuner
from ..containers import (
    Container,
    IndexMatrix,
    IndexSpace,
    IndexVector,
    Matrix,
    Vector,
    empty_like_shape,
)
from ..containers import array_surface as _surface
from ..distribution import elementwise as distributed_elementwise
from ..dtypes import storage_c_type
from ..errors import DTypeError, RefusedParameters, ShapeError
from ..tuner import cpu_defaults
from ..tuner.space import Param, ParamSpace, pow2_range
from .arguments import (
    ArrayArg,
    ContainerInput,
    ScalarArg,
    ViewInput,
    array_extra_dtypes,
    classify_extras,
    extra_kernel_args,
    extra_kernel_params,
    input_kind,
    input_muscle_kinds,
    scalar_converter,
    scalar_value,
)
from .base import Skeleton, check_same_shape, checked_signature, constructor
from .check_buffer import DEBUG_PARAM, check_buffer
from .kernel_source import SourceBuilder
from .limits import MAX_COARSEN, Legality, Rule, at_least, at_most, check_output, one_of
from .plan import Plan, feature_dict

COARSEN_VALUES = (1, 2, 4, 8, 16, 32)
VW_VALUES = (1, 2, 4, 8, 16)
DEFAULT_WG = 256
_BASE_POINT = {"wg": 1, "coarsen": 1, "blocked": 0, "vw": 1}


@dataclass(eq=False)
class ElementwisePlan(Plan):
    """Map/Zip's kernel for one signature (input kinds, extras, output dtype)."""

    inputs: tuple                     # the input kinds (arguments.ContainerInput, ...)
    n_muscle_inputs: int              # muscle parameters the inputs fill (extras follow)
    vw_default: int                   # vector width of the default point

    def macros(self, point: Mapping) -> tuple[str, ...]:
        return (f"-DSKP_COARSEN={int(point['coarsen'])}",
                f"-DSKP_BLOCKED={int(point['blocked'])}", f"-DSKP_VW={int(point['vw'])}")

    def make_space(self, rt: _rt.Runtime) -> tuple[ParamSpace, Legality]:
        """The legal launch points of this kernel on ``rt``'s device."""
        dev = rt.device
        # A CPU's OpenCL takes any work-group size up to the device's for any kernel (there
        # are no registers to run out of), so asking a compiled kernel there would only cost a
        # build; a GPU is asked of the default point's program, which a default call reuses.
        if dev.kind == "cpu":
            kmax = dev.max_work_group_size
        else:
            kmax = rt.kernel_max_work_group_size(
                self.kernel(rt, {**_BASE_POINT, "vw": self.vw_default}))
        wmax = min(dev.max_work_group_size, kmax, dev.max_work_item_sizes[0])
        params = [
            Param("wg", pow2_range(1, wmax), doc="work-group size"),
            Param("coarsen", COARSEN_VALUES, doc="chunks per work-item"),
            Param("blocked", (0, 1), numeric=False, doc="1: stride-1 (blocked) coarsening"),
            Param("vw", VW_VALUES, doc="elements per vector load/store"),
        ]
        # wg=0 (only when forced) leaves the work-group size to the OpenCL runtime
        rules = Legality([
            at_least("wg", 0),
            Rule(lambda p: int(p["wg"]) <= wmax,
                 lambda p: f"work-group size wg={p['wg']} is over {wmax}, the most this kernel "
                           f"takes on {dev.name} (device {dev.max_work_group_size}, compiled "
                           f"kernel {kmax}, work-items {dev.max_work_item_sizes[0]})"),
            one_of("blocked", (0, 1)),
            at_least("coarsen", 1),
            at_most("coarsen", MAX_COARSEN, "skelpy's maximum coarsening MAX_COARSEN",
                    "the coarsening loop is unrolled: build time grows with it"),
            one_of("vw", VW_VALUES),
        ])
        vw = self.vw_default if dev.kind == "gpu" else \
            cpu_defaults.elementwise_vw(self.features, self.vw_default)   # issue 18
        default = {"wg": min(DEFAULT_WG, wmax), "coarsen": 1, "blocked": 0, "vw": vw}
        return ParamSpace(params, default, rules, extra_values_ok=("wg", "coarsen")), rules


class _Elementwise(Skeleton):
    n_inputs = 1
    _fast = None       # the repeat-call launcher of the latest settled call (see _make_fast)
    deferrable = True  # inside ``sk.lazy()`` a call may become a pending value (skelpy.array)

    def __init__(self, f, *, out_dtype=None):
        super().__init__(f, out_dtype=out_dtype)
        #: The Python muscle function (None for OpenCL C source): a deferred call's result
        #: is fused by calling it from the consumer's kernel (``skelpy.array.chains``).
        self.function = f if isinstance(f, types.FunctionType) else \
            getattr(f, "_skelpy_fn", None)

    def __call__(self, *args, params: Mapping | None = None, out_dtype=None, **unknown):
        """Apply the muscle to every element; the result stays on the device."""
        if unknown:
            raise self._unexpected(unknown, "(*containers, *extras, params=None, "
                                   "out_dtype=None)")
        fast = self._ready()        # every call: captured values changed? debug mode?
        if params is None and out_dtype is None:
            if _surface.lazy_calls and self.deferrable:
                out = _surface.array_backend().defer(self, args)
                if out is not None:
                    return out
            if fast is not None:
                out = fast(args)
                if out is not None:
                    return out
        return self._call(args, params, out_dtype)

    @checked_signature
    def source(self, *args, params: Mapping | None = None, out_dtype=None) -> str:
        """The OpenCL C program a call with these arguments builds (see Skeleton.source)."""
        return super().source(*args, params=params, out_dtype=out_dtype)

    def classify(self, args, out_dtype=None):
        """A call's arguments checked and classified: (input containers or index spaces, their
        shape, extra argument values); for a call on a device group."""
        _plan, inputs, shape, _descs, extras = self._signature(args, out_dtype)
        return inputs, shape, extras

    def _describe(self, args, out_dtype=None):
        plan, _inputs, shape, _descs, _vals = self._signature(args, out_dtype)
        return plan, _dataset(plan, shape)

    def result_dtype(self, *args) -> np.dtype:
        """The dtype a call with these arguments returns; the arguments are checked (and the
        muscle specialised) as a call does, so errors are the call's. Nothing runs. (A
        deferred call, ``sk.lazy()``, is checked here: its kernel calls the muscle as a helper,
        whose Python ints computed from the extras are not checked there.)"""
        plan, _inputs, _shape, descs, values = self._signature(args, None)
        tm, first = plan.muscle, plan.n_muscle_inputs
        tm.check_python_ints({first + k: v for k, v in enumerate(values)})
        for k, (d, v) in enumerate(zip(descs, values)):
            if isinstance(d, ScalarArg):        # passed in the type it meets: it must fit
                scalar_value(v, tm.scalar_dtypes.get(first + k, d.dtype), self.origin)
        return plan.out_dtype

    def _signature(self, args, out_dtype):
        """Classify a call's arguments: (plan, inputs, shape, extra kinds, extra values)."""
        n_in = self.n_inputs
        if len(args) < n_in:
            raise self._error(ShapeError, f"needs {n_in} input container(s), got {len(args)}")
        inputs = [self._as_input(a, k) for k, a in enumerate(args[:n_in])]
        shape = check_same_shape(self.origin, inputs)
        extras_desc, extras_val = classify_extras(args[n_in:], self.origin)
        odt = self.out_dtype if out_dtype is None else self._dtype_arg(out_dtype)
        kinds = tuple(input_kind(c) for c in inputs)
        sig = (kinds, tuple(extras_desc), odt)
        plan = self._plans.get(sig)
        if plan is None:
            plan = self._plans.setdefault(sig, self._make_plan(kinds, extras_desc, odt))
        return plan, inputs, shape, extras_desc, extras_val

    def run_on(self, rt: _rt.Runtime, args, params=None, out_dtype=None):
        """The call on one device's runtime ``rt``, whatever is in use (a part of a call on a
        device group: ``skelpy.distribution``)."""
        return self._call(args, params, out_dtype, rt)

    def _call(self, args, params, out_dtype, rt=None):
        if rt is None and _rt.current().group is not None:   # several devices at once
            return distributed_elementwise.run(self, args, params, out_dtype)
        plan, inputs, shape, extras_desc, extras_val = self._signature(args, out_dtype)
        forced = self._check_params_arg(params)
        n = math.prod(shape)
        dataset = _dataset(plan, shape)
        choice = None
        if rt is None:
            rt, choice = self._runtime_for(plan, dataset, inputs, extras_val,
                                           out_bytes=n * plan.out_dtype.itemsize)
        plan.check_device(rt)

        out_shape = shape if len(shape) in (1, 2) else (n,)
        check_output(self.origin, out_shape, plan.out_dtype, rt)
        out = empty_like_shape(out_shape, plan.out_dtype, rt)
        if n == 0:
            self._check_forced_on_empty(plan, forced, rt)
            self.last_launch = _rt.Launch(self.kind, {}, (0,), None)
            return out

        # Read inputs first (uploads), so that a failure leaves nothing half-done.
        fixed = [out.device_buffer(rt), np.int64(n)]
        with self._naming_errors():
            for kind, c in zip(plan.inputs, inputs, strict=True):
                fixed += kind.kernel_args(c, rt)
            fixed += extra_kernel_args(extras_desc, extras_val, plan.muscle,
                                       plan.n_muscle_inputs, rt, self.origin)
            checks = check_buffer(plan, rt)
            if checks is not None:
                fixed.append(checks.buffer)
        launched = {}

        def run(point):
            gsize, lsize = _geometry(point, n)
            kernel = plan.kernel(rt, point)
            launched["g"], launched["l"] = (gsize,), lsize
            ev = rt.launch(kernel, (gsize,), lsize, fixed, params=point, skeleton=self.kind,
                           origin=self.origin)
            out.mark_device_written()          # the tuner may read the result between runs
            return out, [ev]

        outcome = self._run_tuned(plan, rt, dataset, forced, run)
        out.mark_device_written()
        self._record(outcome, launched["g"], launched["l"])
        if checks is not None:
            checks.raise_if_failed(self.origin)
        self._chosen(choice, out)
        if forced is None and out_dtype is None and outcome.ticket is not None \
                and checks is None and rt.group is None:
            self._fast = self._make_fast(args, plan, rt, shape, out_shape, fixed[1], outcome,
                                         launched["g"], launched["l"],
                                         choice.stem if choice is not None else None)
        return out

    def _make_fast(self, args, plan: ElementwisePlan, rt, shape, out_shape, n_arg, outcome,
                   gsize, lsize, stem=None):
        """A launcher for repeats of this call: same runtime (in auto mode: the cost
        model's remembered choice for the call is still that runtime), same argument types,
        dtypes and shapes, and a tuner decision that is still settled (``tuner.ticket_valid``).

        It skips classification, plan and tuner look-ups and the Launch record (built on
        demand by ``last_launch``), which is most of a tiny call's overhead. Anything
        unexpected returns None and the full path runs instead."""
        if plan.muscle.int_checks is not None:   # extras checked per call (host_ints.py)
            return None
        n_in = self.n_inputs
        specs = []
        for k, a in enumerate(args[:n_in]):
            if isinstance(a, Container):
                # a view's kernel arguments come from its kind (offset, strides)
                specs.append((type(a), a.dtype, a.shape,
                              plan.inputs[k] if a.layout is not None else None))
            elif type(a) is IndexMatrix:
                specs.append((IndexMatrix, None, a.shape, np.int64(a.shape[1])))
            elif type(a) is IndexVector:
                specs.append((IndexVector, None, a.shape, None))
            else:
                return None                # an ndarray is wrapped (and uploaded) per call
        for k, v in enumerate(args[n_in:]):
            if isinstance(v, Container):
                specs.append((type(v), v.dtype, None, None))
            elif type(v) in (bool, int, float) or isinstance(v, np.generic):
                conv = scalar_converter(v, plan.muscle.scalar_dtypes,
                                        plan.n_muscle_inputs + k, self.origin)
                specs.append((type(v), None, None, conv))
            else:
                return None
        nargs = len(args)
        kernel = plan.kernel(rt, outcome.params)
        point, ticket = outcome.params, outcome.ticket
        odt = plan.out_dtype
        out_cls = Vector if len(out_shape) == 1 else Matrix
        nbytes = math.prod(out_shape) * odt.itemsize
        ticket_valid = tuner.ticket_valid

        def fast(call_args):
            if len(call_args) != nargs or not ticket_valid(ticket):
                return None
            choice = None
            if _rt.fixed() is not rt:
                choice = self._auto_repeat(
                    rt, stem, [a for a in call_args if isinstance(a, Container)])
                if choice is None:
                    return None
            argv = [None, n_arg]
            try:
                for k in range(nargs):
                    a = call_args[k]
                    typ, dt, shp, extra = specs[k]
                    if type(a) is not typ:
                        return None
                    if k < n_in:
                        if a.shape != shp:
                            return None
                        if dt is not None:
                            if a.dtype != dt:
                                return None
                            if extra is None:
                                if a.layout is not None:
                                    return None
                                argv.append(a.device_buffer(rt))
                            else:
                                if input_kind(a) is not extra:
                                    return None
                                argv.extend(extra.kernel_args(a, rt))
                        elif extra is not None:
                            argv.append(extra)
                    elif dt is not None:               # a container read by index
                        if a.dtype != dt:
                            return None
                        argv.append(a.device_buffer(rt))
                        argv.extend(np.int64(s) for s in a.shape)
                    else:                              # a scalar, in the muscle's type
                        argv.append(extra(a))
            except (OverflowError, ValueError, TypeError):
                return None
            argv[0] = buf = rt.allocate(nbytes)
            out = out_cls.from_device(buf, out_shape, odt, rt)
            return out if self._relaunch(rt, kernel, gsize, lsize, argv, point, choice,
                                         out) else None

        def launch_into(call_shape, inputs, extras, stores, into):
            """``fast`` for a caller that vouches for the inputs' types, dtypes and kinds
            (the fused kernel of an array expression, whose structure key holds them;
            ``stores``: the inputs' storages): checks the shape and the extras' types only,
            and fills the storage ``into`` with the result (no container): True, or None
            (then the full path runs). Not in auto mode."""
            if call_shape != shape or len(inputs) + len(extras) != nargs \
                    or not ticket_valid(ticket) or _rt.fixed() is not rt:
                return None
            argv = [None, n_arg]
            try:
                if blocks:                         # every input a container's own block
                    for s in stores:
                        argv.append(s.buffer if s.device_valid and s.runtime is rt
                                    else s.device_buffer(rt))
                else:
                    for a, s, kind in zip(inputs, stores, input_kinds, strict=False):
                        if kind is None:
                            argv.append(s.buffer if s.device_valid and s.runtime is rt
                                        else s.device_buffer(rt))
                        else:
                            argv.extend(kind.kernel_args(a, rt))
                if as_they_are:                    # NumPy scalars of the muscle's types
                    if tuple(map(type, extras)) != extra_types:
                        return None
                    argv += extras
                else:
                    for v, typ, conv in zip(extras, extra_types, extra_convs, strict=False):
                        if type(v) is not typ:
                            return None
                        argv.append(v if conv is None else conv(v))
            except (OverflowError, ValueError, TypeError):
                return None
            argv[0] = buf = rt.allocate(nbytes)
            try:                               # _relaunch, without the cost model (not auto)
                ev = rt.launch(kernel, gsize, lsize, argv, params=point,
                               skeleton=skel_kind, origin=origin)
            except RefusedParameters:
                return None
            self._pending_launch = (point, gsize, lsize, ev, None)
            into.filled(buf, rt)
            return True

        skel_kind, origin = self.kind, self.origin
        input_kinds = [spec[3] for spec in specs[:n_in]]
        blocks = all(kind is None for kind in input_kinds)
        extra_types = tuple(spec[0] for spec in specs[n_in:])
        # None: a NumPy scalar of the muscle's type goes in as it is
        extra_convs = [None if typ is conv else conv for typ, _d, _s, conv in specs[n_in:]]
        as_they_are = all(conv is None for conv in extra_convs)
        # only containers in, only scalars as extras (what an array expression's kernel takes)
        fitting = all(spec[1] is not None for spec in specs[:n_in]) and \
            all(spec[1] is None for spec in specs[n_in:])
        fast.launch_into = launch_into if fitting else None
        return fast

    # -- helpers ---------------------------------------------------------------------------
    def _as_input(self, value, k: int):
        if isinstance(value, (Container, IndexSpace)):
            if isinstance(value, IndexSpace) and not isinstance(value, (IndexVector,
                                                                        IndexMatrix)):
                raise self._error(DTypeError, f"input {k + 1}: unsupported index space "
                                  f"{value!r}")
            return value
        if isinstance(value, (list, tuple)):
            value = np.asarray(value)
        if isinstance(value, (bool, int, float, complex, np.generic)):
            raise self._error(DTypeError, f"input {k + 1} is a scalar; {type(self).__name__} "
                              "needs containers first, then extra arguments")
        return self._container(value, f"input {k + 1}")

    def _make_plan(self, inputs, extras_desc, out_dtype) -> ElementwisePlan:
        kinds, n_muscle_inputs = input_muscle_kinds(inputs, extras_desc, self.muscle.n_params)
        n_extra = len(extras_desc)
        if self.muscle.n_params != len(kinds):
            raise self._error(
                ShapeError,
                f"the muscle takes {self.muscle.n_params} parameter(s) but this call supplies "
                f"{len(kinds)} ({n_muscle_inputs} from the input container(s) and {n_extra} "
                "extra argument(s))")
        tm = self.muscle.specialise(kinds, out_dtype=out_dtype, c_name="skp_muscle",
                                    checks=self._checks())
        decl_in, call_in, vload, call_v = [], [], [], []
        for k, inp in enumerate(inputs):
            decl_in += inp.declarations(k)
            call_in.append(inp.read(k, "i"))
            load = inp.vector_load(k)
            if load:
                vload.append(load)
            call_v.append(inp.vector_read(k, "i", "c"))
        decl_ex, call_ex = extra_kernel_params(extras_desc, tm, n_muscle_inputs)
        decls = decl_in + decl_ex + ([DEBUG_PARAM] if tm.checked else [])
        names = [_decl_name(x) for x in decls]
        loaded = [inp.data_dtype for inp in inputs if inp.data_dtype is not None]
        source = (SourceBuilder("elementwise")
                  .muscle(tm)
                  .header([
                      f"#define SKP_OUT_ST {storage_c_type(tm.out_dtype)}",
                      "#define SKP_PARAMS_DECL " + "".join(", " + x for x in decls),
                      "#define SKP_PARAMS_PASS " + "".join(", " + x for x in names),
                      "#define SKP_ELEMENT(i) skp_muscle(" + ", ".join(call_in + call_ex) + ")",
                      "#define SKP_VLOAD(j) " + " ".join(vload),
                      "#define SKP_ELEMENT_V(i, c) skp_muscle(" + ", ".join(call_v + call_ex)
                      + ")",
                  ])
                  .file("elementwise.cl")
                  .data(*loaded, *array_extra_dtypes(extras_desc))
                  .build(("skelpy_elementwise",)))
        features = feature_dict(tm)
        features.update({"n_inputs": float(len(inputs)), "n_extras": float(n_extra),
                         "libm_calls": float(cpu_defaults.libm_calls(tm.source)),
                         "n_array_extras": float(sum(isinstance(e, ArrayArg)
                                                     for e in extras_desc))})
        # 16-byte loads and stores by default: on the H200 a float map went from 2.7 TB/s
        # (scalar) to 4.2 TB/s (float4), and PoCL vectorises them as well.
        widest = max([tm.out_dtype.itemsize] + [inp.dtype.itemsize for inp in inputs
                                                 if isinstance(inp, (ContainerInput, ViewInput))])
        return ElementwisePlan(source=source, out_dtype=tm.out_dtype, muscles=(tm,),
                               features=features, origin=self.origin, inputs=tuple(inputs),
                               n_muscle_inputs=n_muscle_inputs,
                               vw_default=max(1, min(8, 16 // widest)))


def _dataset(plan: ElementwisePlan, shape) -> dict:
    """The data a call works on, as the tuner describes a scenario."""
    return {"n": float(math.prod(shape)), "rows": float(shape[0]),
            "cols": float(shape[1] if len(shape) > 1 else 1),
            "dtype_size": float(plan.out_dtype.itemsize)}


def _geometry(point: Mapping, n: int) -> tuple[int, tuple[int] | None]:
    """Global size and local size of a launch over ``n`` elements at ``point``."""
    wg, c, vw = int(point["wg"]), int(point["coarsen"]), int(point["vw"])
    chunks = -(-n // vw)
    if wg == 0:                    # the OpenCL runtime chooses (local_size=None)
        return -(-chunks // c), None
    if point["blocked"]:
        items = -(-chunks // c)
        return -(-items // wg) * wg, (wg,)
    return -(-chunks // (wg * c)) * wg, (wg,)


def _decl_name(decl: str) -> str:
    return decl.replace("*", " ").split()[-1]


class Map(_Elementwise):
    """``Map(f)(x, *extras)``: ``out[i] = f(x[i], *extras)``.

    ``x`` may be a Vector, Matrix, ndarray, ``IndexVector`` (f sees the index) or
    ``IndexMatrix`` (f sees ``row, col`` or one index point). Extras: numbers (Python ones
    are weak, NEP 50), NumPy scalars, or containers that f reads by index."""

    kind = "map"
    n_inputs = 1

    @constructor
    def __init__(self, f, *, out_dtype=None):
        super().__init__(f, out_dtype=out_dtype)
        self._check_param_count(self.muscle, 1, False,
                                "the element, then one per extra argument")


class Zip(_Elementwise):
    """``Zip(f)(x, y, *extras)``: ``out[i] = f(x[i], y[i], *extras)``; x and y of one shape."""

    kind = "zip"
    n_inputs = 2

    @constructor
    def __init__(self, f, *, out_dtype=None):
        super().__init__(f, out_dtype=out_dtype)
        self._check_param_count(self.muscle, 2, False,
                                "the elements of x and y, then one per extra argument")


class ZipN(_Elementwise):
    """``ZipN(f, n)(x1, ..., xn, *extras)``: ``out[i] = f(x1[i], ..., xn[i], *extras)``.

    The kernel of an array expression (``skelpy.array``): its inputs are the expression's
    leaves (containers or views of one shape), its extras the constants. For the tuner it is
    a Map like any other."""

    kind = "map"
    deferrable = False          # it IS the fused kernel

    def __init__(self, f, n_inputs: int, *, out_dtype=None, description: str = ""):
        super().__init__(f, out_dtype=out_dtype)
        self.n_inputs = int(n_inputs)
        self.description = description

    def source(self, *args, params: Mapping | None = None, out_dtype=None) -> str:
        """The program a call builds (see Skeleton.source), after a comment naming the
        expression it computes (inputs ``a0, a1, ...``, constants ``c0, ...``)."""
        head = f"/* skelpy.array fused: {self.description} */\n" if self.description else ""
        return head + super().source(*args, params=params, out_dtype=out_dtype)

    def repeat_launcher(self):
        """The launcher of repeats of this kernel's latest settled call for the array
        expression that computes it (``launch_into(shape, inputs, extras, storages, into)``
        fills the storage ``into``: True, or None), or None: no settled call yet, debug
        mode, or the muscle changed."""
        fast = self._ready()
        return None if fast is None else fast.launch_into
