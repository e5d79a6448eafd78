"""Map and Zip: one muscle applied element by element.

Both are the same kernel (``kernels/elementwise.cl``) over one or two inputs; the inputs may
be Vectors, Matrices, ndarrays or index spaces, and extra arguments follow them. Tunable
launch parameters: work-group size ``wg``, coarsening ``coarsen`` with ``blocked`` stride
(interleaved keeps loads coalesced, seed 000), and load/store vector width ``vw``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

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
    as_container,
    empty_like_shape,
)
from ..dtypes import c_type, storage_c_type
from ..errors import DTypeError, ShapeError
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
    scalar_converter,
    source_key,
)

COARSEN_VALUES = (1, 2, 4, 8, 16, 32)
VW_VALUES = (1, 2, 4, 8, 16)
DEFAULT_WG = 256


class _Elementwise(Skeleton):
    n_inputs = 1
    _fast = None       # the repeat-call launcher of the latest settled call (see _make_fast)

    def __call__(self, *args, params: Mapping | None = None, out_dtype=None):
        """Apply the muscle to every element; the result stays on the device."""
        if params is None and out_dtype is None:
            fast = self._fast
            if fast is not None:
                out = fast(args)
                if out is not None:
                    return out
        return self._call(args, params, out_dtype)

    def _call(self, args, params, out_dtype):
        n_in = self.n_inputs
        if len(args) < n_in:
            raise self._error(ShapeError, f"needs {n_in} input container(s), got {len(args)}")
        inputs = [self._as_input(a, k) for k, a in enumerate(args[:n_in])]
        shape = check_same_shape(self.origin, inputs)
        extras_desc, extras_val = classify_extras(args[n_in:], self.origin)
        forced = self._check_params_arg(params)
        odt = self.out_dtype if out_dtype is None else np.dtype(out_dtype)

        in_desc = tuple(_input_desc(c) for c in inputs)
        sig = (in_desc, tuple(extras_desc), odt)
        plan = self._plans.get(sig)
        if plan is None:
            plan = self._plans[sig] = self._make_plan(in_desc, extras_desc, odt)
        n = math.prod(shape)
        dataset = {"n": float(n), "rows": float(shape[0]),
                   "cols": float(shape[1] if len(shape) > 1 else 1),
                   "dtype_size": float(plan.out_dtype.itemsize)}
        rt, choice = self._runtime_for(plan, dataset, inputs, extras_val,
                                       out_bytes=n * plan.out_dtype.itemsize)
        fp64_check(rt, plan.uses_fp64, self.origin)

        out_shape = shape if len(shape) in (1, 2) else (n,)
        out = empty_like_shape(out_shape, plan.out_dtype, rt)
        if n == 0:
            self.last_launch = _rt.Launch(self.kind, {}, (0,), None)
            return out

        # Read inputs first (uploads), so that a failure leaves nothing half-done.
        fixed = [out.device_buffer(rt), np.int64(n)]
        for c in inputs:
            if isinstance(c, Container):
                fixed.append(c.device_buffer(rt))
            elif isinstance(c, IndexMatrix):
                fixed.append(np.int64(c.shape[1]))
        fixed += extra_kernel_args(extras_desc, extras_val, plan.typed, plan.n_muscle_inputs,
                                   rt)
        launched = {}

        def run(point):
            wg, c, vw = int(point["wg"]), int(point["coarsen"]), int(point["vw"])
            chunks = -(-n // vw)
            if wg == 0:                    # the OpenCL runtime chooses (local_size=None)
                gsize, lsize = -(-chunks // c), None
            elif point["blocked"]:
                items = -(-chunks // c)
                gsize, lsize = -(-items // wg) * wg, (wg,)
            else:
                gsize, lsize = -(-chunks // (wg * c)) * wg, (wg,)
            kernel = plan.kernel(rt, point)
            launched["g"], launched["l"] = (gsize,), lsize
            ev = rt.launch(kernel, (gsize,), lsize, fixed, params=point, skeleton=self.kind)
            out.mark_device_written()          # the tuner may read the result between runs
            return out, [ev]

        outcome = self._run_tuned(plan, rt, dataset, forced, run)
        out.mark_device_written()
        self._record(outcome, launched["g"], launched["l"])
        self._chosen(choice, out)
        if forced is None and out_dtype is None and outcome.ticket is not None \
                and choice is None:
            self._fast = self._make_fast(args, plan, rt, shape, out_shape, fixed[1], outcome,
                                         launched["g"], launched["l"])
        return out

    def _make_fast(self, args, plan: Plan, rt, shape, out_shape, n_arg, outcome, gsize, lsize):
        """A launcher for repeats of this call: same runtime, same argument types, dtypes
        and shapes, and a tuner decision that is still settled (``tuner.ticket_valid``).

        It skips classification, plan and tuner look-ups and the Launch record (built on
        demand by ``last_launch``), which is most of a tiny call's overhead. Anything
        unexpected returns None and the full path runs instead."""
        n_in = self.n_inputs
        specs = []
        for a in args[:n_in]:
            if isinstance(a, Container):
                specs.append((type(a), a.dtype, a.shape, None))
            elif isinstance(a, IndexMatrix):
                specs.append((IndexMatrix, None, a.shape, np.int64(a.shape[1])))
            elif isinstance(a, IndexVector):
                specs.append((IndexVector, None, a.shape, None))
            else:
                return None                # an ndarray is wrapped (and uploaded) per call
        for k, v in enumerate(args[n_in:]):
            if isinstance(v, Container):
                specs.append((type(v), v.dtype, None, None))
            elif type(v) in (bool, int, float) or isinstance(v, np.generic):
                conv = scalar_converter(v, plan.typed.scalar_dtypes,
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
            if len(call_args) != nargs or _rt.fixed() is not rt or not ticket_valid(ticket):
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
                            argv.append(a.device_buffer(rt))
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
            return out if self._relaunch(rt, kernel, gsize, lsize, argv, point) else None

        return fast

    # -- helpers ---------------------------------------------------------------------------
    def _as_input(self, value, k: int):
        if isinstance(value, (Container, IndexSpace)):
            return value
        if isinstance(value, (list, tuple)):
            value = np.asarray(value)
        if isinstance(value, (bool, int, float, complex, np.generic)):
            raise self._error(DTypeError, f"input {k + 1} is a scalar; {type(self).__name__} "
                              "needs containers first, then extra arguments")
        try:
            return as_container(value, f"{self.origin}: input {k + 1}")
        except (DTypeError, ShapeError) as exc:
            raise type(exc)(str(exc)) from None

    def _make_plan(self, in_desc, extras_desc, out_dtype) -> Plan:
        kinds, call_in, decl_in, vload, call_v = [], [], [], [], []
        n_muscle_inputs = 0
        n_extra = len(extras_desc)
        index_matrix_two_args = False
        for k, d in enumerate(in_desc):
            if d[0] == "c":
                dt = d[1]
                kinds.append(Scalar(dt))
                st = storage_c_type(dt)
                decl_in.append(f"__global const {st}* restrict in{k}")
                call_in.append(f"(({c_type(dt)})in{k}[i])")
                vload.append(f"{st} va{k}[SKP_VW]; SKP_VSTOREN(SKP_VLOADN(j, in{k}), 0, va{k});")
                call_v.append(f"(({c_type(dt)})va{k}[c])")
                n_muscle_inputs += 1
            elif d[0] == "iv":
                kinds.append(Scalar(np.dtype(np.int64)))
                call_in.append("((long)(i))")
                call_v.append("((long)(i))")
                n_muscle_inputs += 1
            else:  # index matrix: (row, col) or one index point
                decl_in.append("const long idx_cols")
                index_matrix_two_args = self.muscle.n_params == 2 + n_extra
                if index_matrix_two_args:
                    kinds += [Scalar(np.dtype(np.int64)), Scalar(np.dtype(np.int64))]
                    n_muscle_inputs += 2
                else:
                    kinds.append(IndexPoint())
                    n_muscle_inputs += 1
                rc = "((long)(i)) / idx_cols, ((long)(i)) % idx_cols"
                call_in.append(rc)
                call_v.append(rc)
        kinds += [e.kind() for e in extras_desc]
        expected = len(kinds)
        if self.muscle.n_params != expected:
            raise self._error(
                ShapeError,
                f"the muscle takes {self.muscle.n_params} parameter(s) but this call supplies "
                f"{expected} ({n_muscle_inputs} from the input container(s) and {n_extra} "
                "extra argument(s))")
        tm = self.muscle.specialise(kinds, out_dtype=out_dtype, c_name="skp_muscle")
        decl_ex, call_ex = extra_kernel_params(extras_desc, tm, n_muscle_inputs)
        decls = decl_in + decl_ex
        names = [_decl_name(x) for x in decls]
        header = [
            "/* generated by skelpy.skeletons.elementwise */",
            f"#define SKP_OUT_ST {storage_c_type(tm.out_dtype)}",
            "#define SKP_PARAMS_DECL " + "".join(", " + x for x in decls),
            "#define SKP_PARAMS_PASS " + "".join(", " + x for x in names),
            "#define SKP_ELEMENT(i) skp_muscle(" + ", ".join(call_in + call_ex) + ")",
            "#define SKP_VLOAD(j) " + " ".join(vload),
            "#define SKP_ELEMENT_V(i, c) skp_muscle(" + ", ".join(call_v + call_ex) + ")",
        ]
        uses_fp64 = tm.uses_fp64 or any(np.dtype(d[1]) == np.float64 for d in in_desc
                                        if d[0] == "c") or any(
            e.dtype == np.float64 for e in extras_desc if isinstance(e, ArrayArg))
        pragma = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if uses_fp64 else ""
        source = (pragma + tm.source + "\n" + "\n".join(header) + "\n"
                  + _rt.read_kernel("elementwise.cl"))
        features = feature_dict(tm)
        features.update({"n_inputs": float(len(in_desc)), "n_extras": float(n_extra),
                         "n_array_extras": float(sum(isinstance(e, ArrayArg)
                                                     for e in extras_desc))})
        plan = Plan(source=source, kernel_name="skelpy_elementwise",
                    kernel_key=source_key(source), out_dtype=tm.out_dtype, typed=tm,
                    features=features, space_factory=None, macros=_macros)
        plan.uses_fp64 = uses_fp64
        # 16-byte loads and stores by default: on the H200 a float map went from 2.7 TB/s
        # (scalar) to 4.2 TB/s (float4), and PoCL vectorises them as well.
        widest = max([tm.out_dtype.itemsize] + [np.dtype(d[1]).itemsize for d in in_desc
                                                 if d[0] == "c"])
        plan.vw_default = max(1, min(8, 16 // widest))
        plan.n_muscle_inputs = n_muscle_inputs
        plan.space_factory = lambda rt, plan=plan: _space(rt, plan)
        return plan


def _input_desc(c) -> tuple:
    if isinstance(c, IndexVector):
        return ("iv",)
    if isinstance(c, IndexMatrix):
        return ("im",)
    if isinstance(c, IndexSpace):
        raise DTypeError(f"unsupported index space {c!r}")
    return ("c", c.dtype, c.ndim)


def _decl_name(decl: str) -> str:
    return decl.replace("*", " ").split()[-1]


def _macros(point: Mapping) -> tuple[str, ...]:
    return (f"-DSKP_COARSEN={int(point['coarsen'])}", f"-DSKP_BLOCKED={int(point['blocked'])}",
            f"-DSKP_VW={int(point['vw'])}")


def _space(rt: _rt.Runtime, plan: Plan) -> ParamSpace:
    """The legal launch points of an elementwise kernel on this device."""
    dev_max = rt.device.max_work_group_size
    base_point = {"wg": 1, "coarsen": 1, "blocked": 0, "vw": 1}
    kmax = rt.kernel_max_work_group_size(plan.kernel(rt, base_point))
    wmax = min(dev_max, kmax, rt.device.max_work_item_sizes[0])
    plan.kernel_max_wg = kmax
    wgs = pow2_range(1, wmax)
    default_wg = min(DEFAULT_WG, wmax)
    params = [
        Param("wg", wgs, doc="work-group size"),
        Param("coarsen", COARSEN_VALUES, doc="chunks per work-item"),
        Param("blocked", (0, 1), numeric=False, doc="1: stride-1 (blocked) coarsening"),
        Param("vw", VW_VALUES, doc="elements per vector load/store"),
    ]

    def legal(p) -> bool:
        wg = int(p["wg"])
        # wg=0 (only when forced) leaves the work-group size to the OpenCL runtime
        return 0 <= wg <= wmax and (p["blocked"] in (0, 1)) and int(p["coarsen"]) >= 1 \
            and int(p["vw"]) in VW_VALUES

    return ParamSpace(params, {"wg": default_wg, "coarsen": 1, "blocked": 0,
                               "vw": getattr(plan, "vw_default", 1)}, legal,
                      extra_values_ok=("wg", "coarsen"))


class Map(_Elementwise):
    """``Map(f)(x, *extras)``: ``out[i] = f(x[i], *extras)``.

    ``x`` may be a Vector, Matrix, ndarray, ``IndexVector`` (f sees the index) or
    ``IndexMatrix`` (f sees ``row, col`` or one index point). Extras: numbers (Python ones
    are weak, NEP 50), NumPy scalars, or containers that f reads by index."""

    kind = "map"
    n_inputs = 1

    def __init__(self, f, *, out_dtype=None):
        super().__init__(f, out_dtype=out_dtype)


class Zip(_Elementwise):
    """``Zip(f)(x, y, *extras)``: ``out[i] = f(x[i], y[i], *extras)``; x and y of one shape."""

    kind = "zip"
    n_inputs = 2

    def __init__(self, f, *, out_dtype=None):
        super().__init__(f, out_dtype=out_dtype)
