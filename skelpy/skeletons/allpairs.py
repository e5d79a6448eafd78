"""AllPairs: a muscle applied to every pair of rows of two matrices.

For A (n, d) and B (m, d), ``AllPairs(...)(A, B)`` is the Matrix C (n, m) with
``C[i, j] = f(A[i, :], B[j, :])``. Two forms, as in SkelCL:

* ``AllPairs(zip=g, reduce=h, identity=0)``: ``C[i, j] = h-fold over k of g(A[i, k], B[j, k])``
  starting from ``identity`` (default 0, the identity of +; give 1 for *, -inf for max, ...).
  The kernel (``kernels/allpairs.cl``) tiles A and B through local memory and keeps a block of
  outputs per work-item in registers, as a tuned matrix multiply does. **A matrix product
  A @ B is** ``AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b)(A, B.T)`` — B is
  passed transposed, since AllPairs pairs rows with rows.
* ``AllPairs(f)``: the generic form; ``f(a, b)`` receives the two rows as accessors
  (``a[k]``, ``a.size``, ``len(a)``) and loops over them itself (``cdist``-like work).

Extra arguments after A and B go to ``g`` (or ``f``) after the two elements (rows). The output
dtype follows the muscles (``g``'s result type; ``f``'s for the generic form) or ``out_dtype``,
as ``A @ B`` does (``np.matmul`` keeps int32 and bool; unlike ``np.sum`` it does not widen);
the fold runs in that dtype, and the compiler may fuse ``h(acc, g(a, b))`` into one fma when
that is ``acc + a * b`` (as BLAS does), so float results differ from NumPy's in rounding only.

**Accuracy** (float zip/reduce folds): the fold along k runs in chunks of about sqrt(d)
elements; when ``h`` computes ``a + b`` each chunk is added to the total with TwoSum and the
rounding is carried into the next chunk, so ``C[i, j]`` is as accurate as NumPy's pairwise sum
of the products for any d (``tests/test_fold_accuracy.py``); other float folds are blocked only
(~sqrt(d) roundings instead of d). This costs a second register per output.

Launch parameters: ``tm`` x ``tn`` (the block of C a work-group computes), ``rm`` x ``rn``
(outputs per work-item, so the work-group is (tn/rn) x (tm/rm) work-items), ``tk`` (depth of
the staged slices; zip/reduce form) and ``local_rows`` (generic form: stage whole rows in local
memory when they fit). Big tiles with 8 x 8 register blocks suit GPUs; small ones suit CPUs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from ..containers import Container, IndexSpace, Matrix, array_backend, empty_like_shape
from ..distribution import allpairs as distributed_allpairs
from ..dtypes import c_type, check_dtype, storage_c_type, storage_dtype
from ..errors import DTypeError, RefusedParameters, ShapeError, SkelpyError
from ..muscle import Muscle
from ..muscle.params import Accessor, Scalar
from ..tuner.space import Param, ParamSpace
from .arguments import (
    array_extra_dtypes,
    classify_extras,
    extra_kernel_args,
    extra_kernel_params,
    input_kind,
    input_muscle_kinds,
)
from .base import Skeleton, checked_signature, constructor
from .check_buffer import DEBUG_PARAM, check_buffer
from .fold_common import check_identity, device_options, identity_value, local_budget
from .fold_muscle import arithmetic_kind, check_neutral
from .kernel_source import SourceBuilder
from .limits import Legality, Rule, check_output, one_of
from .plan import Plan, feature_dict

__all__ = ["AllPairs", "RowsExpression", "row_accessor"]

_CONTRACT_OFF = "#pragma OPENCL FP_CONTRACT OFF"
_CONTRACT_ON = "#pragma OPENCL FP_CONTRACT ON"
T_VALUES = (1, 2, 4, 8, 16, 32, 64, 128)
TK_VALUES = (1, 2, 4, 8, 16, 32)
R_VALUES = (1, 2, 4, 8)
MAX_FETCH = 32           # slice elements per work-item held in registers while prefetching
MAX_BLOCK = 64           # outputs per work-item (rm x rn) held in registers


def row_accessor(dtype, space: str = "global") -> Accessor:
    """A matrix row as a muscle parameter: ``a[k]``, ``a.size``, ``len(a)``, ``a.shape[0]``.

    ``space`` is the OpenCL address space the row lives in (``"global"`` or ``"local"``)."""
    return Accessor(dtype, 1, (f"__{space} const {{stype}}* {{name}}", "long {name}_n"),
                    "(({ctype}){name}[{i0}])",
                    {"len": "{name}_n", "size": "{name}_n", "shape0": "{name}_n"}, kind="row")

@dataclass(frozen=True, eq=False)
class RowsExpression:
    """A or B given as an elementwise expression (a pending array value, ``skelpy.array``):
    ``muscle(*leaves, *consts)`` at each element, evaluated in the zip/reduce kernel as it
    fetches slices (never stored). ``key`` names the expression's structure (plans are
    cached by it); the leaves are containers or views of ``shape``."""

    muscle: Muscle
    key: tuple
    leaves: tuple
    consts: tuple
    dtype: np.dtype
    shape: tuple

    @property
    def ndim(self) -> int:
        return len(self.shape)


def _expression_side(x: RowsExpression, side: str, first: int, origin: str, checks):
    """The kernel side of an expression operand: (typed map muscle, header lines, input
    kinds, const kinds). Its leaves are ``in{first}...``, its constants ``e{side}0...``."""
    kinds = tuple(input_kind(c) for c in x.leaves)
    descs, _values = classify_extras(list(x.consts), origin)
    mkinds, n_in = input_muscle_kinds(kinds, descs, x.muscle.n_params)
    tm = x.muscle.specialise(mkinds, c_name=f"skp_map_{side.lower()}", checks=checks)
    decl_ex, call_ex = extra_kernel_params(descs, tm, n_in, prefix=f"e{side.lower()}")
    decls = [d for k, inp in enumerate(kinds) for d in inp.declarations(first + k)] + decl_ex
    call = [inp.read(first + k, "(i)") for k, inp in enumerate(kinds)] + call_ex
    st = storage_c_type(x.dtype)
    return tm, [f"#define SKP_{side}_DECL " + ", ".join(decls),
                f"#define SKP_LOAD_{side}(i) (({st})skp_map_{side.lower()}({', '.join(call)}))"
                ], kinds, tuple(descs)


def _side_args(x, plan_side, rt, origin: str) -> list:
    """Kernel arguments of A or B: its buffer, or an expression's leaves and constants."""
    if not isinstance(x, RowsExpression):
        return [x.device_buffer(rt)]
    tm, kinds, descs = plan_side
    args = [a for kind, c in zip(kinds, x.leaves, strict=True) for a in kind.kernel_args(c, rt)]
    return args + extra_kernel_args(descs, x.consts, tm, len(kinds), rt, origin)


@dataclass(eq=False)
class AllPairsPlan(Plan):
    """AllPairs' kernel for one signature (A's and B's dtypes, extras)."""

    generic: bool                     # the generic form (row accessors), not zip/reduce
    itemsizes: tuple[int, int]        # bytes of one staged element of A and of B
    sides: tuple = (None, None)       # A's and B's expressions: (map muscle, kinds, consts)

    def macros(self, point: Mapping) -> tuple[str, ...]:
        names = ("tm", "tn", "rm", "rn", "local_rows") if self.generic else \
            ("tm", "tn", "tk", "rm", "rn")
        return tuple(f"-DSKP_{k.upper()}={int(point[k])}" for k in names)

    def device_options(self, rt: _rt.Runtime) -> tuple[str, ...]:
        return device_options(rt)

    def local_bytes(self, point: Mapping) -> int:
        """The staged slices of A and B (zip/reduce form). The generic form's staged rows
        depend on the row length: each call checks them against the budget."""
        if self.generic:
            return 0
        a_size, b_size = self.itemsizes
        tm, tn, tk = int(point["tm"]), int(point["tn"]), int(point["tk"])
        return tk * ((tm + 1) * a_size + (tn + 1) * b_size)

    def make_space(self, rt: _rt.Runtime) -> tuple[ParamSpace, Legality]:
        """Legal points: work-group within the device limits (per dimension too), slices
        within the local-memory budget, and register blocks of at most MAX_BLOCK outputs."""
        dev = rt.device
        generic = self.generic
        wmax = dev.max_work_group_size
        wx, wy = dev.max_work_item_sizes[0], dev.max_work_item_sizes[1]
        budget = local_budget(rt)
        params = [Param("tm", T_VALUES, doc="rows of C per work-group"),
                  Param("tn", T_VALUES, doc="columns of C per work-group")]
        if not generic:
            params.append(Param("tk", TK_VALUES, doc="depth of the staged slices of A and B"))
        params += [Param("rm", R_VALUES, doc="rows of C per work-item"),
                   Param("rn", R_VALUES, doc="columns of C per work-item")]
        if generic:
            params.append(Param("local_rows", (0, 1), numeric=False,
                                doc="1: stage the rows in local memory (when they fit)"))

        # PoCL (2.10) aborts the process (an assertion in its work-group region formation) or
        # hangs when it compiles or runs skelpy_allpairs for some work-groups one work-item
        # wide in x (e.g. tm=2, tn=4, tk=2, rm=1, rn=4); oclgrind runs those points correctly.
        # They are never offered there.
        narrow_ok = generic or "portable computing language" not in dev.platform.lower()

        def lx(p) -> int:
            return int(p["tn"]) // int(p["rn"])

        def ly(p) -> int:
            return int(p["tm"]) // int(p["rm"])

        def fetch(p) -> int:
            nt, tk = lx(p) * ly(p), int(p["tk"])
            return -(-int(p["tm"]) * tk // nt) + -(-int(p["tn"]) * tk // nt)

        rules = [
            Rule(lambda p: int(p["tm"]) % int(p["rm"]) == 0,
                 lambda p: f"tm={p['tm']} is not a multiple of rm={p['rm']} (a work-item "
                           "computes rm of the work-group's tm rows)"),
            Rule(lambda p: int(p["tn"]) % int(p["rn"]) == 0,
                 lambda p: f"tn={p['tn']} is not a multiple of rn={p['rn']} (a work-item "
                           "computes rn of the work-group's tn columns)"),
            Rule(lambda p: int(p["rm"]) * int(p["rn"]) <= MAX_BLOCK,
                 lambda p: f"rm x rn = {int(p['rm']) * int(p['rn'])} outputs per work-item "
                           f"is over skelpy's register block maximum {MAX_BLOCK}"),
            Rule(lambda p: lx(p) * ly(p) <= wmax,
                 lambda p: f"the work-group (tn/rn) x (tm/rm) = {lx(p) * ly(p)} work-items is "
                           f"over {dev.name}'s maximum {wmax}"),
            Rule(lambda p: lx(p) <= wx and ly(p) <= wy,
                 lambda p: f"the work-group {lx(p)} x {ly(p)} (tn/rn x tm/rm) is over "
                           f"{dev.name}'s work-item sizes {wx} x {wy}"),
            Rule(lambda p: lx(p) > 1 or narrow_ok,
                 lambda p: "work-groups one work-item wide (tn = rn) are not offered on PoCL "
                           "(it aborts or hangs on some)"),
            # PoCL 3.1 aborts the same way on some work-groups of two work-items (tm=8, tn=4,
            # tk=4, rm=8, rn=2: 2 x 1), which killed a `skelpy tune` sweep
            Rule(lambda p: lx(p) * ly(p) >= 4 or narrow_ok,
                 lambda p: f"work-groups of {lx(p) * ly(p)} work-items are not offered on PoCL "
                           "(it aborts on some)"),
        ]
        if generic:
            rules.append(one_of("local_rows", (0, 1)))
        else:
            rules += [
                Rule(lambda p: fetch(p) <= MAX_FETCH,
                     lambda p: f"each work-item would prefetch {fetch(p)} slice elements into "
                               f"registers, over {MAX_FETCH}"),
                Rule(lambda p: self.local_bytes(p) <= budget,
                     lambda p: f"the staged slices need {self.local_bytes(p)} bytes of local "
                               f"memory; {dev.name} has {dev.local_mem_size} ({budget} after "
                               "the implementation's reserve)"),
            ]
        legality = Legality(rules)
        default = _default(rt, generic, max(self.itemsizes))
        space = ParamSpace(params, default, legality)
        if not space.is_legal(space.default):
            space.default = space.nearest(space.default) or space.default
        return space, legality


def _origins(**muscles) -> str:
    """Where the muscles given to a misused constructor are (file:line), for its message."""
    parts = []
    for name, m in muscles.items():
        if m is None:
            continue
        try:
            parts.append(f"{name}={(m if isinstance(m, Muscle) else Muscle(m)).origin}")
        except SkelpyError:
            parts.append(f"{name}={m!r}")
    return ", ".join(parts)


class AllPairs(Skeleton):
    """``AllPairs(zip=g, reduce=h, identity=0)(A, B)`` or ``AllPairs(f)(A, B)``: C (n, m) from
    A (n, d) and B (m, d); see the module docstring. A @ B is ``AllPairs(zip=mul,
    reduce=add)(A, B.T)``."""

    kind = "allpairs"

    @constructor
    def __init__(self, f=None, *, zip=None, reduce=None, identity=0,  # noqa: A002
                 out_dtype=None):
        generic = f is not None
        if generic and (zip is not None or reduce is not None):
            raise ShapeError(f"AllPairs({_origins(f=f, zip=zip, reduce=reduce)}): give either "
                             "f (the generic form) or zip= and reduce=, not both")
        if not generic and (zip is None or reduce is None):
            raise ShapeError(f"AllPairs({_origins(zip=zip, reduce=reduce)}): needs a muscle f, "
                             "or both zip= and reduce=")
        self.generic = generic
        self.zip_muscle = None if generic else (zip if isinstance(zip, Muscle) else Muscle(zip))
        super().__init__(f if generic else reduce, out_dtype=out_dtype)
        if generic:
            self._check_param_count(self.muscle, 2, False,
                                    "the rows of A and B, then one per extra argument", "f muscle")
        else:
            self._check_param_count(self.zip_muscle, 2, False, "the elements of a row of A and "
                                    "of B, then one per extra argument", "zip muscle")
            self._check_param_count(self.muscle, 2, True,
                                    "the value reduced so far and the next product",
                                    "reduce muscle")
        self.identity = None if generic else check_identity(identity, self.origin)
        # a reduce muscle that computes a + b gets compensated k-chunks (allpairs.cl)
        self._adds = not generic and arithmetic_kind(reduce) == "add"
        self._reduce_fn = None if generic or self.muscle.is_c else reduce
        self._neutral_checked: set = set()

    @property
    def origin(self) -> str:
        if self.zip_muscle is None:
            return f"AllPairs({self.muscle.origin})"
        return f"AllPairs(zip={self.zip_muscle.origin}, reduce={self.muscle.origin})"

    @checked_signature
    def __call__(self, A, B, *extras, params: Mapping | None = None) -> Matrix:
        """C[i, j] for every row i of A and row j of B; stays on the device until read."""
        self._ready()
        rt = _rt.current()
        if rt.group is not None:                         # several devices at once
            a, b, *_rest = self._signature(A, B, extras)
            return distributed_allpairs.run(self, a, b, extras, params)
        if not self.generic and (_is_pending(A) or _is_pending(B)):
            # pending inputs are read as expressions where that is cheap (skelpy.array)
            A, B = array_backend().allpairs_operands(A, B)
        return self.run_on(None, A, B, *extras, params=params)

    def run_on(self, rt: _rt.Runtime | None, A, B, *extras,
               params: Mapping | None = None) -> Matrix:
        """The call on one device's runtime ``rt`` (a part of a call on a device group), or
        with ``rt`` None on the runtime the call chooses (``Skeleton._runtime_for``)."""
        a, b, (n, m, d), plan, extras_desc, extras_val = self._signature(A, B, extras)
        forced = self._check_params_arg(params)
        dataset = _dataset(plan, n, m, d)
        choice = None
        if rt is None:
            reads = [c for x in (a, b) for c in
                     (x.leaves if isinstance(x, RowsExpression) else (x,))]
            rt, choice = self._runtime_for(plan, dataset, reads, extras_val,
                                           out_bytes=n * m * plan.out_dtype.itemsize)
        plan.check_device(rt)
        acc = plan.out_dtype
        check_output(self.origin, (n, m), acc, rt)
        if n == 0 or m == 0:
            self._check_forced_on_empty(plan, forced, rt)
            self.last_launch = _rt.Launch(self.kind, {}, (0, 0), None)
            return empty_like_shape((n, m), acc, rt)
        with self._naming_errors():
            fixed = [*_side_args(a, plan.sides[0], rt, self.origin),
                     *_side_args(b, plan.sides[1], rt, self.origin),
                     np.int64(n), np.int64(m), np.int64(d)]
            at_chunk = len(fixed) + 1            # where the chunk argument goes (zip/reduce)
            if not self.generic:
                fixed.append(identity_value(self.identity, acc, self.origin))
                if d > 0 and acc not in self._neutral_checked:
                    check_neutral(self._reduce_fn, acc, self.identity, self.origin)
                    self._neutral_checked.add(acc)
            tail = extra_kernel_args(extras_desc, extras_val, plan.muscle, 2, rt, self.origin)
            checks = check_buffer(plan, rt)
            if checks is not None:
                tail.append(checks.buffer)
        chunk = math.isqrt(d)      # elements per chunk of a blocked float fold (allpairs.cl)
        launched = {}
        budget = local_budget(rt)

        def run(point):
            tm, tn, rm, rn = (int(point[k]) for k in ("tm", "tn", "rm", "rn"))
            lx, ly = tn // rn, tm // rm
            gsize = (-(-m // tn) * lx, -(-n // tm) * ly)
            out = empty_like_shape((n, m), acc, rt)
            args = [out.device_buffer(rt), *fixed]
            if not self.generic:
                args.insert(at_chunk, np.int32(max(1, round(chunk / int(point["tk"])))))
            if self.generic and int(point["local_rows"]):
                nbytes_a, nbytes_b = tm * d * a.dtype.itemsize, tn * d * b.dtype.itemsize
                if nbytes_a + nbytes_b > budget:
                    raise RefusedParameters(
                        f"{self.origin}: rows of {d} elements do not fit local memory with "
                        f"tm={tm}, tn={tn}", params=dict(point),
                        code=int(cl.status_code.OUT_OF_RESOURCES))
                args += [cl.LocalMemory(max(nbytes_a, 1)), cl.LocalMemory(max(nbytes_b, 1))]
            args += tail
            k = plan.kernel(rt, point)
            launched["g"], launched["l"] = gsize, (lx, ly)
            ev = rt.launch(k, gsize, (lx, ly), args, params=point, skeleton=self.kind,
                           origin=self.origin)
            out.mark_device_written()
            return out, [ev]

        outcome = self._run_tuned(plan, rt, dataset, forced, run)
        self._record(outcome, launched["g"], launched["l"])
        if checks is not None:
            checks.raise_if_failed(self.origin)
        self._chosen(choice, outcome.result)
        return outcome.result

    @checked_signature
    def source(self, A, B, *extras, params: Mapping | None = None) -> str:
        """The OpenCL C program a call with these arguments builds (see Skeleton.source)."""
        return super().source(A, B, *extras, params=params)

    def _describe(self, args, **_options):
        if len(args) < 2:
            raise self._error(ShapeError, f"needs A and B, got {len(args)} argument(s)")
        _a, _b, (n, m, d), plan, _descs, _vals = self._signature(args[0], args[1], args[2:])
        return plan, _dataset(plan, n, m, d)

    def _signature(self, A, B, extras):
        """Classify a call: (A, B, (n, m, d), plan, extra kinds, extra values). A and B may
        be :class:`RowsExpression` (zip/reduce form only)."""
        a = A if isinstance(A, RowsExpression) else self._as_matrix(A, "A")
        b = B if isinstance(B, RowsExpression) else self._as_matrix(B, "B")
        (n, d), (m, d2) = a.shape, b.shape
        if d != d2:
            raise self._error(ShapeError, f"A {a.shape} and B {b.shape} must have the same "
                              "number of columns (AllPairs pairs rows; for A @ B pass B.T)")
        extras_desc, extras_val = classify_extras(extras, self.origin)
        sig = (a.dtype, b.dtype, tuple(extras_desc), _side_key(a), _side_key(b))
        plan = self._plans.get(sig)
        if plan is None:
            plan = self._plans.setdefault(sig, self._make_plan(a.dtype, b.dtype, extras_desc,
                                                                (a, b)))
        return a, b, (n, m, d), plan, extras_desc, extras_val

    def _as_matrix(self, value, name: str) -> Container:
        if isinstance(value, (list, tuple)):
            value = np.asarray(value)
        if isinstance(value, IndexSpace) or not isinstance(value, (Container, np.ndarray)):
            raise self._error(DTypeError, f"{name} must be a Matrix or 2-D ndarray, got "
                              f"{type(value).__name__}")
        if isinstance(value, np.ndarray) and value.ndim == 2 and not value.flags.c_contiguous:
            value = np.ascontiguousarray(value)
        c = self._container(value, name)
        if c.ndim != 2:
            raise self._error(ShapeError, f"{name} must be 2-D (rows x d), got shape {c.shape}")
        return c

    # -- plans ------------------------------------------------------------------------------
    def _make_plan(self, a_dt: np.dtype, b_dt: np.dtype, extras_desc,
                   operands: tuple = (None, None)) -> AllPairsPlan:
        n_extra = len(extras_desc)
        expected = 2 + n_extra
        main = self.muscle if self.generic else self.zip_muscle
        if main.n_params != expected:
            which = "f" if self.generic else "zip"
            raise self._error(ShapeError, f"the {which} muscle takes {main.n_params} parameter(s)"
                              f" but this call supplies {expected} (2 from A and B and "
                              f"{n_extra} extra argument(s))")
        ex_kinds = [e.kind() for e in extras_desc]
        common = [
            f"#define SKP_A_ST {storage_c_type(a_dt)}",
            f"#define SKP_B_ST {storage_c_type(b_dt)}",
            f"#define SKP_A_T {c_type(a_dt)}",
            f"#define SKP_B_T {c_type(b_dt)}",
        ]
        checks = self._checks()
        if self.generic:
            tm_l = main.specialise([row_accessor(a_dt, "local"), row_accessor(b_dt, "local"),
                                    *ex_kinds], c_name="skp_f_local", checks=checks)
            tm_g = main.specialise([row_accessor(a_dt, "global"), row_accessor(b_dt, "global"),
                                    *ex_kinds], c_name="skp_f_global", checks=checks)
            acc = check_dtype(self.out_dtype or tm_g.out_dtype, self.origin)
            decl_ex, call_ex = extra_kernel_params(extras_desc, tm_g, 2)
            if tm_g.checked or tm_l.checked:
                decl_ex.append(DEBUG_PARAM)
            tail = "".join(", " + x for x in call_ex)
            header = common + [
                f"#define SKP_ACC {c_type(acc)}",
                f"#define SKP_ACC_ST {storage_c_type(acc)}",
                "#define SKP_PARAMS_DECL " + "".join(", " + x for x in decl_ex),
                "#define SKP_GENERIC 1",
                "#if SKP_LOCAL_ROWS",
                f"#define SKP_F(a, b) (({c_type(acc)})skp_f_local((a), d, (b), d{tail}))",
                "#else",
                f"#define SKP_F(a, b) (({c_type(acc)})skp_f_global((a), d, (b), d{tail}))",
                "#endif",
            ]
            typed = (tm_g, tm_l)
            muscles = tm_l.source + "\n" + tm_g.source
            features = feature_dict(tm_g)
        else:
            z = main.specialise([Scalar(a_dt), Scalar(b_dt), *ex_kinds], c_name="skp_zip",
                                checks=checks)
            acc = check_dtype(self.out_dtype or z.out_dtype, self.origin)
            r = self.muscle.specialise((Scalar(acc), Scalar(acc)), c_name="skp_red",
                                       checks=checks)
            decl_ex, call_ex = extra_kernel_params(extras_desc, z, 2)
            sides, side_muscles, side_lines = [None, None], [], []
            first = 0
            for k, (x, side) in enumerate(zip(operands, "AB", strict=True)):
                if isinstance(x, RowsExpression):
                    tm_x, lines, kinds, descs = _expression_side(x, side, first, self.origin,
                                                                 checks)
                    first += len(kinds)
                    sides[k] = (tm_x, kinds, descs)
                    side_muscles.append(tm_x)
                    side_lines += lines
            sides = tuple(sides)
            if z.checked or r.checked or any(tm_x.checked for tm_x in side_muscles):
                decl_ex.append(DEBUG_PARAM)
            tail = "".join(", " + x for x in call_ex)
            header = common + [
                f"#define SKP_ACC {c_type(acc)}",
                f"#define SKP_ACC_ST {storage_c_type(acc)}",
                "#define SKP_PARAMS_DECL " + "".join(", " + x for x in decl_ex),
                f"#define SKP_ZIP(a, b) (({c_type(acc)})skp_zip((a), (b){tail}))",
                f"#define SKP_RED(x, z) (({c_type(acc)})skp_red((x), (z)))",
                f"#define SKP_BLOCKED {int(acc.kind == 'f')}",
                f"#define SKP_COMPENSATED {int(acc.kind == 'f' and self._adds)}",
                *side_lines,
            ]
            # Translated muscles ask for FP_CONTRACT OFF (operation by operation, as NumPy).
            # The fold's order differs from NumPy's anyway, and fusing the zip's multiply into
            # the reduce's add (one fma, as BLAS does) is both more accurate and 1.5x faster.
            typed = (z, r, *side_muscles)
            # (input expressions keep FP_CONTRACT OFF: equal to the stored values bit for bit)
            muscles = "".join(tm_x.source + "\n" for tm_x in side_muscles) + \
                (z.source + "\n" + r.source).replace(_CONTRACT_OFF, _CONTRACT_ON)
            features = feature_dict(z)
            for k, v in feature_dict(r).items():
                features["reduce_" + k] = v
        source = (SourceBuilder("allpairs")
                  .part(muscles, muscles=typed)
                  .header(header)
                  .file("allpairs.cl")
                  .data(a_dt, b_dt, acc, *array_extra_dtypes(extras_desc),
                        *(c.dtype for x in operands if isinstance(x, RowsExpression)
                          for c in x.leaves))
                  .build(("skelpy_allpairs_generic",) if self.generic
                         else ("skelpy_allpairs",)))
        features.update({"generic": float(self.generic), "n_extras": float(n_extra)})
        return AllPairsPlan(source=source, out_dtype=acc, muscles=typed, features=features,
                            origin=self.origin, generic=self.generic,
                            itemsizes=(storage_dtype(a_dt).itemsize,
                                       storage_dtype(b_dt).itemsize),
                            sides=(None, None) if self.generic else sides)


def _side_key(x):
    """What of an operand names its plan besides its dtype: an expression's structure."""
    if not isinstance(x, RowsExpression):
        return None
    return (x.key, tuple(input_kind(c) for c in x.leaves))


def _is_pending(x) -> bool:
    return isinstance(x, Container) and x.is_pending


def _dataset(plan: AllPairsPlan, n: int, m: int, d: int) -> dict:
    return {"n": float(n) * m, "rows": float(n), "cols": float(m), "depth": float(d),
            "dtype_size": float(plan.out_dtype.itemsize)}


def _default(rt: _rt.Runtime, generic: bool, itemsize: int) -> dict:
    if rt.device.kind == "gpu":
        # measured on an H200: 35 TFLOP/s for a 4096^2 float32 product
        p = {"tm": 128, "tn": 128, "tk": 32 if itemsize <= 4 else 16, "rm": 8, "rn": 8}
        if generic:
            p = {"tm": 32, "tn": 32, "rm": 2, "rn": 2}
    else:
        p = {"tm": 64, "tn": 64, "tk": 16, "rm": 8, "rn": 8}
        if generic:
            p = {"tm": 16, "tn": 16, "rm": 2, "rn": 2}
    if generic:
        p["local_rows"] = 0
    return p
