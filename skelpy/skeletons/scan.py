"""Scan: all prefix folds of an associative muscle.

``Scan(f, identity)(x)`` is exclusive, as in SkelCL: ``[id, x0, x0⊕x1, ...]``;
``inclusive=True`` gives ``[x0, x0⊕x1, ...]`` (``np.cumsum`` for +). Only associativity is
assumed. A Matrix is scanned in row-major order over all its elements and the result has its
shape (``np.cumsum(m.ravel()).reshape(m.shape)`` for an inclusive sum).

**Kernel** (``kernels/scan.cl``): tiles of ``wg * items`` elements, one work-group each. A tile
is staged in local memory with coalesced loads, each work-item folds ``items`` consecutive
elements sequentially (coarsening), the work-group scans those row totals with the
work-efficient Blelloch up/down-sweep in local memory (padded against bank conflicts), and
each work-item rescans its row from its prefix. The carry-in of each tile (``method``):

* ``"lookback"``: one pass with decoupled look-back (Merrill & Garland 2016): tiles publish
  their aggregates through global flags and fold their predecessors' values. Every element is
  read and written once (~76% of copy bandwidth for int32 on an H200). Offered where verified:
  NVIDIA GPUs and CPUs (it needs 64-bit atomics and earlier tiles progressing while later ones
  wait).
* ``"levels"``: the multi-level scheme of Harris et al.: fold each tile to a sum, scan the sums
  recursively with the same kernels, then scan each tile from its carry. Reads the input twice
  but needs no inter-group communication.

Launch parameters: ``wg``, ``items`` and ``method``; every legal point gives the same result
(up to floating-point reassociation).

**Accuracy** (floats): each work-item scans its row as a tree in registers and each output adds
its row prefix to the carry once; the multi-level carries are scans of tile sums (trees); the
look-back's carries form a chain across tiles, so for a sum (the muscle computes ``a + b``,
see ``fold_muscle.arithmetic_kind``) they are compensated pairs ``hi + lo`` added with TwoSum.
Every legal point is within a few ulps of NumPy's pairwise sum of each prefix
(``tests/test_fold_accuracy.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from ..containers import Container, Matrix, Vector, array_backend, empty_like_shape
from ..distribution import scan as distributed_scan
from ..distribution.host_fold import HostFold
from ..dtypes import c_type, storage_c_type, storage_dtype
from ..muscle import Muscle
from ..muscle.params import Scalar
from ..tuner import cpu_defaults
from ..tuner.space import Param, ParamSpace, pow2_range
from .arguments import (
    classify_extras,
    extra_kernel_args,
    extra_kernel_params,
    input_kind,
    input_muscle_kinds,
)
from .base import Skeleton, check_same_shape, checked_signature, constructor
from .check_buffer import DEBUG_PARAM, check_buffer
from .fold_common import (
    ITEMS_VALUES,
    check_identity,
    device_options,
    identity_value,
    local_rule,
    max_wg,
    one_launch_ok,
    power_of_two,
    work_group_rules,
)
from .fold_muscle import (
    arithmetic_kind,
    check_neutral,
    dtype_argument,
    fold_combine,
    fold_dtype,
)
from .kernel_source import SourceBuilder
from .limits import Legality, Rule, at_least, check_output
from .plan import Plan, feature_dict
from .reduce import Reduce

__all__ = ["MapScan", "Scan"]

METHODS = ("lookback", "levels")


@dataclass(eq=False)
class ScanPlan(Plan):
    """Scan's kernels for one input dtype."""

    sums_differ: bool         # lower levels' sums need their own program (another type)
    status_words: int         # 64-bit words per tile status in the look-back
    inputs: tuple = ()        # MapScan: the input kinds its map reads (else the one container)
    n_muscle_inputs: int = 1

    def macros(self, point: Mapping) -> tuple[str, ...]:
        return (f"-DSKP_WG={int(point['wg'])}", f"-DSKP_ITEMS={int(point['items'])}")

    def device_options(self, rt: _rt.Runtime) -> tuple[str, ...]:
        return device_options(rt)

    def local_bytes(self, point: Mapping) -> int:
        wg, items = int(point["wg"]), int(point["items"])
        tile = wg * items
        return (tile + (tile >> 5) + wg + (wg >> 5) + 2) * storage_dtype(
            self.out_dtype).itemsize + 16

    def make_space(self, rt: _rt.Runtime) -> tuple[ParamSpace, Legality]:
        """Legal points: a tile of at least two elements whose local arrays fit the budget."""
        wmax = max_wg(rt)
        acc_size = storage_dtype(self.out_dtype).itemsize
        params = [
            Param("wg", pow2_range(1, wmax), doc="work-group size (one tile per work-group)"),
            Param("items", ITEMS_VALUES, doc="consecutive elements per work-item (coarsening)"),
            Param("method", METHODS, numeric=False,
                  doc="lookback: one pass, decoupled look-back; levels: multi-level scan of "
                      "sums"),
        ]
        # The look-back publishes tile states with 64-bit atomics and needs earlier tiles to
        # make progress while later ones wait: verified on NVIDIA GPUs and CPUs (PoCL);
        # elsewhere the multi-level method, which needs neither, is the only one offered.
        ext = rt.device.cl_device.extensions
        methods = METHODS if "cl_khr_int64_base_atomics" in ext and one_launch_ok(rt) \
            else ("levels",)
        rules = Legality([
            *work_group_rules(rt, wmax),
            at_least("items", 1),
            power_of_two("items"),
            Rule(lambda p: int(p["wg"]) * int(p["items"]) >= 2,
                 lambda p: "a tile of wg x items must hold at least two elements"),
            Rule(lambda p: p["method"] in methods,
                 lambda p: f"method={p['method']!r}: {rt.device.name} offers only "
                           f"{list(methods)}"),
            local_rule(self, rt),
        ])
        gpu = rt.device.kind == "gpu"
        if gpu:   # measured on an H200: 256 x 32 reaches ~76% of copy bandwidth for int32
            default = {"wg": min(256, wmax), "items": 32 if acc_size <= 4 else 16,
                       "method": "lookback"}
        else:
            default = cpu_defaults.scan_point(wmax)     # issue 18: re-measured on PoCL
        default["method"] = default["method"] if default["method"] in methods else methods[0]
        space = ParamSpace(params, default, rules)
        if not space.is_legal(space.default):
            space.default = space.nearest(space.default) or space.default
        return space, rules


class Scan(Skeleton):
    """``Scan(f, identity, inclusive=False)(x)``: prefix folds of the associative muscle ``f``.

    Exclusive by default (``out[0] = identity``, ``out[i] = x0 ⊕ ... ⊕ x(i-1)``), inclusive
    with ``inclusive=True``. Returns a container of ``x``'s shape that stays on the device; a
    Matrix is scanned in row-major order over all elements. Its dtype is the accumulator's,
    chosen as NumPy does (``np.cumsum``'s for a sum or product: bool and narrow integers
    accumulate in int64/uint64; the type of ``f(acc, x)`` for other muscles) or ``dtype``.
    """

    kind = "scan"

    @constructor
    def __init__(self, f, identity, *, inclusive: bool = False, dtype=None, out_dtype=None):
        super().__init__(f)
        self._check_param_count(self.muscle, 2, True,
                                "the value scanned so far and the next element")
        acc = dtype_argument(dtype, out_dtype, self.origin)
        self.out_dtype = None if acc is None else self._dtype_arg(acc, "dtype")
        self._fn = f
        self.function = f          # the muscle as given (a fused input's MapScan scans it)
        self.identity = check_identity(identity, self.origin)
        self.inclusive = bool(inclusive)

    @checked_signature
    def source(self, x, *, params: Mapping | None = None) -> str:
        """The OpenCL C program a call with ``x`` builds (see Skeleton.source); the multi-level
        method may also build the same text with ``-DSKP_SUMS=1`` for its sums."""
        return super().source(x, params=params)

    def _describe(self, args, **_options):
        c = self._data_input(args[0])
        plan = self._plan(c)
        return plan, _dataset(c, plan)

    def _plan(self, c) -> ScanPlan:
        sig = (c.dtype,)
        plan = self._plans.get(sig)
        if plan is None:
            plan = self._plans.setdefault(sig, self._make_plan(c.dtype))
        return plan

    @checked_signature
    def __call__(self, x, *, params: Mapping | None = None) -> Vector | Matrix:
        """Scan all elements; the result stays on the device until read."""
        self._ready()
        rt = _rt.current()
        if rt.group is not None:                         # several devices at once
            return distributed_scan.run(self, self._data_input(x), params)
        if isinstance(x, Container) and x.is_pending:
            fused = array_backend().fused_scan(self, x, params)   # scanned at each load
            if fused is not None:
                return fused
        return self._scan(self._data_input(x), params, None)

    # -- on a device group (skelpy.distribution.scan) ---------------------------------------
    def accumulator(self, c) -> np.dtype:
        """The accumulator (and result) dtype of a scan of ``c``."""
        return self._plan(c).out_dtype

    def scan_on(self, rt: _rt.Runtime, c, params=None, carry: tuple | None = None):
        """The scan of ``c`` on one device's runtime ``rt``; ``carry`` (a device buffer of
        accumulator values on ``rt`` and an index into it) is folded in front of every
        prefix: the fold of the parts on the devices before this one."""
        return self._scan(c, params, rt, carry)

    def total_on(self, rt: _rt.Runtime, c):
        """The fold of all of ``c`` (a one-element Vector on ``rt``), with this scan's muscle
        and accumulator."""
        return self._folds(self.accumulator(c)).reduce_on(rt, [c], [])

    def scan_values_on(self, rt: _rt.Runtime, buffer, count: int, acc: np.dtype):
        """Exclusive scan of ``count`` accumulator values in ``buffer`` on ``rt`` (the devices'
        totals): the device buffer of the results."""
        part = Vector.from_device(buffer, (count,), acc, rt)
        scans = self.__dict__.setdefault("_total_scans", {})
        if acc not in scans:            # one per accumulator: its plan and program are kept
            scans[acc] = Scan(self._fn, self.identity, dtype=acc)
        return scans[acc].scan_on(rt, part).device_buffer(rt)

    def host_fold(self, acc: np.dtype) -> HostFold | None:
        """How a device group scans its devices' totals on the host (a sum or product: the
        device's bits, see ``distribution/host_fold.py``); None: on each device."""
        return self._folds(acc).host_fold(acc)

    def _folds(self, acc):
        folds = self.__dict__.setdefault("_part_folds", {})
        if acc not in folds:
            folds[acc] = Reduce(self._fn, self.identity, dtype=acc)
        return folds[acc]

    def _scan(self, c, params, rt: _rt.Runtime | None, carry=None, fused=None):
        """``fused`` (MapScan): ``(plan, inputs, extra kinds, extra values)``; then ``c`` is
        the first input (of the result's shape) and the map is evaluated at each load."""
        forced = self._check_params_arg(params)
        plan = self._plan(c) if fused is None else fused[0]
        dataset = _dataset(c, plan)
        choice = None
        if rt is None:                   # not a part of a call on a group: the call's device
            rt, choice = self._runtime_for(plan, dataset, [c] if fused is None else fused[1],
                                           fused[3] if fused else (),
                                           out_bytes=c.size * plan.out_dtype.itemsize)
        plan.check_device(rt)
        acc = plan.out_dtype
        st = storage_dtype(acc)
        ident = identity_value(self.identity, acc, self.origin)
        n = c.size
        if n > 0 and acc not in self.__dict__.setdefault("_neutral_checked", set()):
            check_neutral(None if self.muscle.is_c else self._fn, acc, self.identity,
                          self.origin)
            self._neutral_checked.add(acc)
        check_output(self.origin, c.shape, acc, rt)
        if n == 0:
            self._check_forced_on_empty(plan, forced, rt)
            self.last_launch = _rt.Launch(self.kind, {}, (0,), None)
            return empty_like_shape(c.shape, acc, rt)
        checks = None
        with self._naming_errors():
            if fused is None:
                src = [c.device_buffer(rt)]
            else:
                src = [a for kind, x in zip(plan.inputs, fused[1], strict=True)
                       for a in kind.kernel_args(x, rt)]
                src += extra_kernel_args(fused[2], fused[3], plan.muscle,
                                         plan.n_muscle_inputs, rt, self.origin)
                checks = check_buffer(plan, rt)
                if checks is not None:
                    src.append(checks.buffer)
        inc = int(self.inclusive)
        launched = {}
        origin = self.origin

        carried = ("-DSKP_CARRY_IN=1",) if carry is not None else ()

        def kernel(point, name: str, sums: int) -> cl.Kernel:
            # The sums of lower levels are read through the input's program unless their type
            # differs from the input's.
            return plan.kernel(rt, point, name,
                               ("-DSKP_SUMS=1",) * bool(sums and plan.sums_differ) + carried)

        def carry_args(sums: int) -> list:
            """The carry-in of the top level (lower levels scan sums: none)."""
            if carry is None:
                return []
            return [carry[0], np.int64(-1 if sums else carry[1])]

        def levels(point, ins: list, buf_out, m: int, inclusive: int, sums: int,
                   events: list):
            """``ins``: the input's kernel arguments (a buffer, or a fused expression's)."""
            wg, tile = int(point["wg"]), int(point["wg"]) * int(point["items"])
            tiles = -(-m // tile)
            k_tiles = kernel(point, "skelpy_scan_tiles", sums)
            if tiles == 1:
                events.append(rt.launch(k_tiles, (wg,), (wg,), [
                    buf_out, *ins, np.int64(m), ident, np.int32(inclusive), buf_out,
                    np.int32(0), *carry_args(sums)], params=point, skeleton=self.kind,
                    origin=origin))
                return
            partial = rt.allocate(tiles * st.itemsize)
            k_sums = kernel(point, "skelpy_scan_sums", sums)
            events.append(rt.launch(k_sums, (tiles * wg,), (wg,), [
                partial, *ins, np.int64(m), ident], params=point, skeleton=self.kind,
                origin=origin))
            levels(point, [partial], partial, tiles, 0, 1, events)    # in place, exclusive
            events.append(rt.launch(k_tiles, (tiles * wg,), (wg,), [
                buf_out, *ins, np.int64(m), ident, np.int32(inclusive), partial, np.int32(1),
                *carry_args(sums)], params=point, skeleton=self.kind, origin=origin))

        def run(point):
            wg, items = int(point["wg"]), int(point["items"])
            tiles = -(-n // (wg * items))
            out = empty_like_shape(c.shape, acc, rt)
            dst = out.device_buffer(rt)
            events: list = []
            if point["method"] == "lookback":
                nbytes = 8 * (tiles * plan.status_words + 1)
                status = rt.allocate(nbytes)
                events.append(cl.enqueue_fill_buffer(rt.queue, status, np.uint64(0), 0,
                                                     nbytes))
                k = kernel(point, "skelpy_scan_lookback", 0)
                events.append(rt.launch(k, (tiles * wg,), (wg,), [
                    dst, *src, np.int64(n), ident, np.int32(inc), status, np.int64(tiles),
                    *carry_args(0)], params=point, skeleton=self.kind, origin=origin))
            else:
                levels(point, src, dst, n, inc, 0, events)
            launched["g"], launched["l"] = (tiles * wg,), (wg,)
            out.mark_device_written()
            return out, events

        outcome = self._run_tuned(plan, rt, dataset, forced, run)
        self._record(outcome, launched["g"], launched["l"])
        if checks is not None:
            checks.raise_if_failed(self.origin)
        self._chosen(choice, outcome.result)
        return outcome.result

    def _make_plan(self, in_dt: np.dtype, expr: tuple | None = None) -> ScanPlan:
        """``expr`` (MapScan): ``(map_tm, input kinds, declarations, muscle arguments, number
        of muscle parameters the inputs give)``; the
        element loaded at ``i`` is then the map's value there, converted as a stored Map
        result would be (so that fused and unfused scans are equal bit for bit)."""
        acc = fold_dtype(self.muscle, self._fn, in_dt, self.out_dtype, self.origin)
        tm = self.muscle.specialise((Scalar(acc), Scalar(acc)), c_name="skp_scan_op")
        # a float sum's look-back carries are compensated (scan.cl): TwoSum needs a real +
        compensated = acc.kind == "f" and arithmetic_kind(self._fn) == "add"
        if expr is None:
            load = [f"#define SKP_LOAD_IN(p, i) (({c_type(acc)})(({c_type(in_dt)})(p)[(i)]))"]
            builder = SourceBuilder("scan")
        else:
            map_tm, inputs, decls, call, _n = expr
            names = [d.split()[-1] for d in decls]
            load = ["#define SKP_EXPR_DECL " + ", ".join(decls),
                    "#define SKP_EXPR_ARGS " + ", ".join(names),
                    f"#define SKP_LOAD_IN(p, i) (({c_type(acc)})(({c_type(in_dt)})"
                    f"(({storage_c_type(in_dt)})skp_map({', '.join(call)}))))"]
            builder = SourceBuilder("scan").muscle(map_tm).data(
                *(k.data_dtype for k in inputs))
        combine, nan_first = fold_combine(acc, None if self.muscle.is_c else self._fn,
                                          "skp_scan_op")
        builder.muscle(tm).part(nan_first)
        source = (builder
                  .header([
                      f"#define SKP_ACC {c_type(acc)}",
                      f"#define SKP_ACC_ST {storage_c_type(acc)}",
                      f"#define SKP_IN_ST {storage_c_type(in_dt)}",
                      *load,
                      f"#define SKP_COMBINE(a, b) (({c_type(acc)}){combine}((a), (b)))",
                      f"#define SKP_ACC_BITS {64 if storage_dtype(acc).itemsize == 8 else 32}",
                      "#define SKP_BITS(v) " + _BITS[storage_dtype(acc)][0],
                      "#define SKP_UNBITS(b) " + _BITS[storage_dtype(acc)][1],
                      f"#define SKP_FLOAT_ACC {int(acc.kind == 'f')}",
                      f"#define SKP_COMPENSATED {int(compensated)}",
                  ])
                  .file("scan.cl")
                  .data(acc, in_dt)
                  .build(("skelpy_scan_tiles", "skelpy_scan_sums", "skelpy_scan_lookback"),
                         key_suffix=f"/inclusive={int(self.inclusive)}"))
        features = feature_dict(tm)
        features["inclusive"] = float(self.inclusive)
        if expr is not None:
            for k, v in feature_dict(expr[0]).items():
                features["map_" + k] = v
        return ScanPlan(
            source=source, out_dtype=acc, features=features, origin=self.origin,
            muscles=(tm,) if expr is None else (expr[0], tm),
            inputs=() if expr is None else tuple(expr[1]),
            n_muscle_inputs=1 if expr is None else expr[4],
            # the sums are read by a program of their own when the input is an expression
            sums_differ=expr is not None or storage_dtype(in_dt) != storage_dtype(acc)
            or (in_dt == np.bool_) != (acc == np.bool_),
            # 64-bit words per tile status in the look-back: 32 bits of payload each
            status_words=(2 if storage_dtype(acc).itemsize == 8 else 1)
            * (2 if compensated else 1))


class MapScan(Scan):
    """``MapScan(map_f, f, identity, inputs=k)(x1, ..., xk, *extras)``: the scan of
    ``map_f(x1[i], ..., xk[i], *extras)`` in the scan's own kernel, never storing the mapped
    values (the inputs are read through their kinds: containers or views; extras are
    numbers). It is how a pending array value or Map result is scanned in one kernel
    (``skelpy.array.chains``); the result equals ``Scan(f, identity)(Map(map_f)(...))`` bit
    for bit. Not on a device group."""

    def __init__(self, map_f, f, identity, *, inputs: int, inclusive: bool = False,
                 dtype=None):
        self.map_muscle = map_f if isinstance(map_f, Muscle) else Muscle(map_f)
        super().__init__(f, identity, inclusive=inclusive, dtype=dtype)
        self.inputs = int(inputs)

    @property
    def origin(self) -> str:
        return f"MapScan({self.map_muscle.origin}, {self.muscle.origin})"

    def __call__(self, *args, params: Mapping | None = None) -> Vector | Matrix:
        self._ready()
        plan, inputs, descs, values = self._fused_signature(args)
        return self._scan(inputs[0], params, None, fused=(plan, inputs, descs, values))

    def source(self, *args, params: Mapping | None = None) -> str:
        """The OpenCL C program a call with these arguments builds (Skeleton.source)."""
        return Skeleton.source(self, *args, params=params)

    def _describe(self, args, **_options):
        plan, inputs, _descs, _values = self._fused_signature(args)
        return plan, _dataset(inputs[0], plan)

    def _fused_signature(self, args):
        inputs = [self._container(a, f"input {k + 1}") for k, a in
                  enumerate(args[:self.inputs])]
        check_same_shape(self.origin, inputs)
        descs, values = classify_extras(list(args[self.inputs:]), self.origin)
        kinds = tuple(input_kind(c) for c in inputs)
        sig = (kinds, tuple(descs))
        plan = self._plans.get(sig)
        if plan is None:
            mkinds, n_in = input_muscle_kinds(kinds, descs, self.map_muscle.n_params)
            map_tm = self.map_muscle.specialise(mkinds, c_name="skp_map",
                                                checks=self._checks())
            decl_ex, call_ex = extra_kernel_params(descs, map_tm, n_in)
            decls = [d for k, inp in enumerate(kinds) for d in inp.declarations(k)] + decl_ex
            if map_tm.checked:
                decls.append(DEBUG_PARAM)
            call = [inp.read(k, "(i)") for k, inp in enumerate(kinds)] + call_ex
            plan = self._plans.setdefault(sig, self._make_plan(
                map_tm.out_dtype, (map_tm, kinds, decls, call, n_in)))
        return plan, inputs, descs, values


def _dataset(c, plan: ScanPlan) -> dict:
    return {"n": float(c.size), "rows": float(c.shape[0]),
            "cols": float(c.shape[1] if c.ndim > 1 else 1),
            "dtype_size": float(plan.out_dtype.itemsize)}


# Storage value <-> raw bits, for the look-back's status words (scan.cl).
_BITS = {
    np.dtype(np.float32): ("as_uint(v)", "as_float((uint)(b))"),
    np.dtype(np.float64): ("as_ulong(v)", "as_double((ulong)(b))"),
    np.dtype(np.int32): ("as_uint(v)", "as_int((uint)(b))"),
    np.dtype(np.uint32): ("((uint)(v))", "((uint)(b))"),
    np.dtype(np.int64): ("as_ulong(v)", "as_long((ulong)(b))"),
    np.dtype(np.uint64): ("((ulong)(v))", "((ulong)(b))"),
    np.dtype(np.int16): ("((uint)(int)(v))", "((short)(b))"),
    np.dtype(np.uint16): ("((uint)(v))", "((ushort)(b))"),
    np.dtype(np.int8): ("((uint)(int)(v))", "((char)(b))"),
    np.dtype(np.uint8): ("((uint)(v))", "((uchar)(b))"),
}
