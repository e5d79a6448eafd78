"""The muscle translator, checked by running the generated OpenCL C on a real device.

Every case is compiled into a small elementwise kernel and compared with the same Python
function evaluated on NumPy scalars element by element (the independent reference).  Many
muscles share one program, which also exercises the ``#ifndef`` guards of shared helpers.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest

pytest.importorskip("pyopencl")
import pyopencl as cl  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from skelpy.dtypes import c_type, storage_c_type, storage_dtype  # noqa: E402
from skelpy.errors import TranslationError  # noqa: E402
from skelpy.muscle import Muscle, TypedMuscle  # noqa: E402
from skelpy.muscle.params import Accessor, IndexPoint, Scalar, global_array  # noqa: E402

np_ = np  # an alias: math/numpy are resolved by identity, not by name

INT_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
FLOAT_DTYPES = [np.float32, np.float64]
N = 96


# ---------------------------------------------------------------------------------------------
# harness
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ocl():
    for p in cl.get_platforms():
        devs = p.get_devices()
        if devs:
            ctx = cl.Context(devices=[devs[0]])
            return ctx, cl.CommandQueue(ctx)
    pytest.skip("no OpenCL device")


class Weak:
    """A per-element Python scalar argument (weak, NEP 50)."""

    def __init__(self, values):
        self.values = list(values)


class Arr:
    """A whole array passed as an accessor (global_array)."""

    def __init__(self, a):
        self.a = np.asarray(a)


class Idx:
    """An index point (row, col) = (gid // 7, gid % 7)."""


class NB:
    """A 2-D neighbourhood of an image with a margin of 3; element gid is an interior cell."""

    def __init__(self, img, width):
        self.img = np.asarray(img)
        self.width = width


def nb_kind(dtype) -> Accessor:
    return Accessor(dtype, 2, ("__global const {stype}* restrict {name}", "long {name}_r",
                               "long {name}_c", "long {name}_cols"),
                    "(({ctype}){name}[({name}_r + {i0}) * {name}_cols + ({name}_c + {i1})])",
                    kind="neighbourhood")


class IP:
    """Reference-side index point."""

    def __init__(self, r, c):
        self.row = self.y = np.int64(r)
        self.col = self.x = np.int64(c)

    def __getitem__(self, i):
        return (self.row, self.col)[i]

    def __iter__(self):
        return iter((self.row, self.col))


class NBView:
    def __init__(self, img, r, c):
        self.img, self.r, self.c = img, r, c

    def __getitem__(self, rc):
        return self.img[self.r + rc[0], self.c + rc[1]]


@dataclass
class Case:
    fn: object
    inputs: list
    out_dtype: object = None
    n: int = N
    rtol: float | None = None
    expect_dtype: object = None
    tm: TypedMuscle | None = None
    kinds: list = field(default_factory=list)


class Batch:
    """Many muscles in one program, one kernel each."""

    def __init__(self, ocl):
        self.ctx, self.queue = ocl
        self.cases: list[Case] = []

    def add(self, fn, *inputs, out_dtype=None, n=None, rtol=None, dtype=None) -> Case:
        inputs = list(inputs)
        if n is None:
            n = next((len(a) for a in inputs if isinstance(a, np.ndarray)), None)
            n = n or next((len(a.values) for a in inputs if isinstance(a, Weak)), N)
        kinds = []
        for a in inputs:
            if isinstance(a, np.ndarray):
                kinds.append(Scalar(a.dtype))
            elif isinstance(a, Weak):
                v = a.values[0]
                dt = np.bool_ if isinstance(v, bool) else (np.int64 if isinstance(v, int)
                                                           else np.float64)
                kinds.append(Scalar(dt, weak=True))
            elif isinstance(a, Arr):
                kinds.append(global_array(a.a.dtype, a.a.ndim))
            elif isinstance(a, Idx):
                kinds.append(IndexPoint())
            elif isinstance(a, NB):
                kinds.append(nb_kind(a.img.dtype))
            else:
                raise TypeError(a)
        c = Case(fn, inputs, out_dtype, n, rtol, dtype, kinds=kinds)
        c.tm = Muscle(fn).specialise(kinds, out_dtype=out_dtype, c_name=f"m{len(self.cases)}")
        self.cases.append(c)
        return c

    def _pack(self, host: np.ndarray) -> int:
        off = (self.nbytes + 15) // 16 * 16
        self.blobs.append((off, np.ascontiguousarray(host)))
        self.nbytes = off + host.nbytes
        return off

    def _body(self, j: int, c: Case) -> tuple[str, int]:
        """The code of case j inside the shared kernel; inputs live in one packed buffer."""
        tm = c.tm
        setup, names = [], []
        for i, (a, k) in enumerate(zip(c.inputs, c.kinds)):
            p = f"p{i}"
            names.append(p)
            if isinstance(k, Scalar):
                dt = tm.scalar_dtypes[i]
                vals = a.values if isinstance(a, Weak) else a
                host = np.array(vals, dtype=dt).astype(storage_dtype(dt))
                off = self._pack(host)
                setup.append(f"{c_type(dt)} {p} = ({c_type(dt)})((__global const "
                             f"{storage_c_type(dt)}*)(in + {off}))[gid];")
            elif isinstance(a, Idx):
                setup.append(f"long {p}_r = gid / 7; long {p}_c = gid % 7;")
            else:
                img = a.img if isinstance(a, NB) else a.a
                off = self._pack(img.astype(storage_dtype(img.dtype)))
                ptr = f"(__global const {storage_c_type(img.dtype)}*)(in + {off})"
                if isinstance(a, NB):
                    vals = [ptr, f"3 + gid / {a.width}", f"3 + gid % {a.width}", str(img.shape[1])]
                else:
                    vals = [ptr] + [str(d) for d in img.shape]
                setup += [f"{d} = {v};" for d, v in zip(k.declarations(p), vals)]
        out = storage_c_type(tm.out_dtype)
        ooff = (self.outbytes + 15) // 16 * 16
        self.outbytes = ooff + c.n * storage_dtype(tm.out_dtype).itemsize
        body = (f"  case {j}: if (gid < {c.n}) {{\n    " + "\n    ".join(setup)
                + f"\n    ((__global {out}*)(out + {ooff}))[gid] = ({out}){tm.call(names)};\n"
                "  } break;\n")
        return body, ooff

    def run(self) -> None:
        self.blobs, self.nbytes, self.outbytes = [], 0, 0
        bodies, offs = [], []
        for j, c in enumerate(self.cases):
            b, o = self._body(j, c)
            bodies.append(b)
            offs.append(o)
        src = "".join(c.tm.source for c in self.cases)
        src += ("__kernel void kall(__global uchar* out, __global const uchar* in) {\n"
                "  long gid = get_global_id(0);\n  switch ((int)get_global_id(1)) {\n"
                + "".join(bodies) + "  }\n}\n")
        with warnings.catch_warnings():  # e.g. "self-comparison" in random expressions
            warnings.simplefilter("ignore", cl.CompilerWarning)
            prg = cl.Program(self.ctx, src).build()
        blob = np.zeros(max(self.nbytes, 16), np.uint8)
        for off, host in self.blobs:
            blob[off: off + host.nbytes] = host.view(np.uint8).ravel()
        mf = cl.mem_flags
        ib = cl.Buffer(self.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=blob)
        ob = cl.Buffer(self.ctx, mf.WRITE_ONLY, max(self.outbytes, 16))
        nmax = max(c.n for c in self.cases)
        prg.kall(self.queue, (nmax, len(self.cases)), None, ob, ib)
        res = np.empty(max(self.outbytes, 16), np.uint8)
        cl.enqueue_copy(self.queue, res, ob)
        for c, off in zip(self.cases, offs):
            sd = storage_dtype(c.tm.out_dtype)
            got = res[off: off + c.n * sd.itemsize].view(sd).astype(c.tm.out_dtype)
            check(c, got)


def reference(c: Case):
    out = []
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for g in range(c.n):
            args = []
            for a in c.inputs:
                if isinstance(a, np.ndarray):
                    args.append(a[g])
                elif isinstance(a, Weak):
                    args.append(a.values[g])
                elif isinstance(a, Arr):
                    args.append(a.a)
                elif isinstance(a, Idx):
                    args.append(IP(g // 7, g % 7))
                else:
                    args.append(NBView(a.img, 3 + g // a.width, 3 + g % a.width))
            out.append(c.fn(*args))
    return out


def check(c: Case, got: np.ndarray) -> None:
    tm = c.tm
    ref = reference(c)
    where = f"{tm.origin} [{', '.join(str(k) for k in c.kinds)}]"
    if c.out_dtype is None:
        # NumPy results have a dtype; Python scalars (weak) only have a kind
        arrays = (np.generic, np.ndarray)
        strong = [r.dtype for r in ref if isinstance(r, arrays)]
        weak = [0.0 if isinstance(r, float) else (0 if type(r) is int else np.bool_)
                for r in ref if not isinstance(r, arrays)]
        if c.expect_dtype is not None:
            assert tm.out_dtype == c.expect_dtype, f"{where}: out dtype {tm.out_dtype}"
        elif strong:
            want = np.result_type(*strong, *weak)
            assert tm.out_dtype == want, f"{where}: out dtype {tm.out_dtype} != NumPy {want}"
        else:
            want = np.result_type(*weak)
            assert tm.out_dtype.kind == want.kind, f"{where}: {tm.out_dtype} is not {want}"
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        exp = np.array([np.asarray(r).astype(tm.out_dtype) for r in ref])
    if tm.out_dtype.kind == "f":
        # C may contract a * b + c into an fma (OpenCL's default), hence a tiny atol
        rtol = c.rtol if c.rtol is not None else (2e-6 if tm.out_dtype == np.float32 else 1e-13)
        atol = 1e-6 if tm.out_dtype == np.float32 else 1e-13
        np.testing.assert_allclose(got, exp, rtol=rtol, atol=atol, equal_nan=True, err_msg=where)
    else:
        np.testing.assert_array_equal(got, exp, err_msg=where)


@pytest.fixture
def batch(ocl):
    b = Batch(ocl)
    yield b
    if b.cases:
        b.run()


rng = np.random.default_rng(1234)


def ints(dtype, n=N, edge=True, lo=None, hi=None):
    info = np.iinfo(dtype)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    a = rng.integers(lo, hi, size=n, endpoint=True, dtype=dtype)
    if edge:
        e = [v for v in (info.min, info.max, 0, 1, -1, 2, -2, 7, -7) if lo <= v <= hi]
        a[: len(e)] = e
    return a


def floats(dtype, n=N, scale=100.0, special=True):
    a = (rng.standard_normal(n) * scale).astype(dtype)
    if special:
        a[:6] = [0.0, -0.0, 1.5, -2.5, np.inf, np.nan]
    return a


def nonzero(a):
    a = a.copy()
    a[a == 0] = 3
    return a


# ---------------------------------------------------------------------------------------------
# arithmetic and dtypes
# ---------------------------------------------------------------------------------------------

BIN = [
    lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a // b,
    lambda a, b: a % b, lambda a, b: a / b, lambda a, b: a < b, lambda a, b: a <= b,
    lambda a, b: a == b, lambda a, b: a != b, lambda a, b: a > b, lambda a, b: a >= b,
    lambda a, b: min(a, b), lambda a, b: max(a, b),
]
BITS = [lambda a, b: a & b, lambda a, b: a | b, lambda a, b: a ^ b, lambda a: ~a, lambda a: -a,
        lambda a: +a, lambda a: abs(a), lambda a: a ** 2, lambda a: a ** 3]


@pytest.mark.parametrize("dt", INT_DTYPES)
def test_int_arithmetic_wraps_like_numpy(batch, dt):
    a, b = ints(dt), ints(dt)
    b[10:20] = 0  # floor division / modulo by zero give 0 as in NumPy
    for f in BIN:
        batch.add(f, a, b)
    for f in BITS:
        batch.add(f, *([a, b][: f.__code__.co_argcount]))
    bits = np.dtype(dt).itemsize * 8
    s = ints(dt, lo=0, hi=min(bits + 3, np.iinfo(dt).max))
    batch.add(lambda a, s: a << s, a, s)
    batch.add(lambda a, s: a >> s, a, s)
    e = ints(dt, lo=0, hi=9, edge=False)
    batch.add(lambda a, e: a ** e, a, e)
    batch.add(lambda a: a + 1, a)            # weak int adapts to the dtype
    batch.add(lambda a: 3 * a - 2, a)
    batch.add(lambda a: a * 2.5, a)          # weak float with an int -> float64
    batch.add(lambda a: a // 2 + a % 3, a)


@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_float_arithmetic(batch, dt):
    a, b = floats(dt), floats(dt)
    b[6:10] = [0.0, -0.0, np.inf, -np.inf]
    for f in BIN:
        batch.add(f, a, b)
    batch.add(lambda a: -a, a)
    batch.add(lambda a: a ** 2, a)
    batch.add(lambda a: a ** 0.5, np.abs(a))
    batch.add(lambda a: a ** -1, a)
    batch.add(lambda a, b: a ** b, np.abs(a), floats(dt, scale=2, special=False), rtol=1e-5)
    batch.add(lambda a: a * 0.1 + 1, a)
    batch.add(lambda a: 2 ** a, floats(dt, scale=3, special=False), rtol=1e-5)
    batch.add(lambda a, b: a < b < 10.0, a, b)


def test_bool_ops(batch):
    a = rng.integers(0, 2, N).astype(bool)
    b = rng.integers(0, 2, N).astype(bool)
    for f in (lambda a, b: a & b, lambda a, b: a | b, lambda a, b: a ^ b, lambda a: ~a,
              lambda a, b: a and b, lambda a, b: a or not b, lambda a, b: a + b,
              lambda a, b: a * b, lambda a, b: a == b, lambda a, b: a + 1,
              lambda a, b: a if b else not a, lambda a, b: a // b, lambda a: a * 2.0):
        batch.add(f, *([a, b][: f.__code__.co_argcount]))


def test_mixed_promotion(batch):
    i8, u8, i16 = ints(np.int8), ints(np.uint8), ints(np.int16)
    i32, u32, i64, u64 = ints(np.int32), ints(np.uint32), ints(np.int64), ints(np.uint64)
    f32, f64 = floats(np.float32), floats(np.float64)
    add = lambda a, b: a + b
    for x, y in [(i8, u8), (i8, i16), (u8, u32), (i32, f32), (i16, f32), (i64, u64),
                 (u32, i32), (f32, f64), (i8, f32)]:
        batch.add(add, x, y)
        batch.add(lambda a, b: a < b, x, y)
    batch.add(lambda a, b: a > b, u64, i64)        # exact mixed-sign 64-bit comparison
    batch.add(lambda a, b: a == b, i64, u64)
    batch.add(lambda a: a < 1000, i8)               # out-of-range Python int compares exactly
    batch.add(lambda a: a > -1, u64)
    batch.add(lambda a: a / 3, i8)                  # true division of ints -> float64
    batch.add(lambda a, b: a / b, f32, i16)         # float32 / int16 -> float32
    batch.add(lambda a, b: a / b, f32, i32)         # -> float64


def test_weak_python_scalars(batch):
    x, y = floats(np.float32, special=False), floats(np.float32, special=False)
    saxpy = batch.add(lambda x, y, a: a * x + y, x, y, Weak([2.0] * N))
    assert saxpy.tm.scalar_dtypes[2] == np.float32
    assert not saxpy.tm.uses_fp64 and "double" not in saxpy.tm.source
    only_weak = batch.add(lambda x, a, b: x + a * b, x, Weak(rng.random(N).tolist()),
                          Weak(rng.random(N).tolist()), dtype=np.float32)
    # the weak product a * b finally meets float32 x, so it is computed in float32
    assert only_weak.tm.scalar_dtypes[1] == np.float32 and not only_weak.tm.uses_fp64
    alone = batch.add(lambda a, b: a * b + 1, Weak(rng.random(N).tolist()),
                      Weak(rng.random(N).tolist()))
    assert alone.tm.scalar_dtypes[0] == np.float64 and alone.tm.out_dtype == np.float64
    ret = batch.add(lambda x, a: a, x, Weak([0.5] * N))
    assert ret.tm.out_dtype == np.float64
    i8 = ints(np.int8, lo=-50, hi=50)
    c = batch.add(lambda x, k: x + k, i8, Weak([3] * N))
    assert c.tm.scalar_dtypes[1] == np.int8
    loops = batch.add(lambda x, n: x * n, x, Weak(list(range(N))))
    assert loops.tm.scalar_dtypes[1].kind == "i" and not loops.tm.uses_fp64

    def local_weak(x):
        k = 0.25
        h = k * 2.0
        return x * h + k
    lw = batch.add(local_weak, x)
    assert lw.tm.out_dtype == np.float32 and not lw.tm.uses_fp64
    flag = batch.add(lambda x, b: x if b else -x, x, Weak([bool(i % 2) for i in range(N)]))
    assert flag.tm.scalar_dtypes[1] == np.bool_


def test_out_dtype_override(batch):
    x = floats(np.float32, special=False)
    c = batch.add(lambda x: x * 3.7, x, out_dtype=np.int32)
    assert c.tm.out_dtype == np.int32
    c = batch.add(lambda x: 1.5, x, out_dtype=np.float32)
    assert not c.tm.uses_fp64
    batch.add(lambda x: x > 0, x, out_dtype=np.float64)
    batch.add(lambda x: x, ints(np.int32), out_dtype=np.int8)


# ---------------------------------------------------------------------------------------------
# control flow and variables
# ---------------------------------------------------------------------------------------------


def classify(x):
    if x < -10:
        return -1
    elif x < 10:
        return 0
    elif x != x:
        return 2
    else:
        return 1


def collatz(n):
    steps = 0
    while n != 1 and steps < 1000:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def loops(n):
    s = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        if i > 50:
            break
        s += i
    for j in range(10, 0, -3):
        s -= j
    for k in range(2, n, 5):
        s += k * 2
    t = 0
    step = 1 + n % 3
    for m in range(n, -n, -step):
        t += m
    return s + t


def widening(x, n):
    s = 0
    for i in range(n):
        s += x * i
    return s


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def early(x):
    for i in range(100):
        if i * i > x:
            return i
    return -1


def swap(x, y):
    if x > y:
        x, y = y, x
    return x - y


def shadow_param(x, k):
    k = k * 2          # a weak parameter widened by assignment
    x = x + k
    return x


def test_control_flow(batch):
    f = floats(np.float32)
    batch.add(classify, f)
    batch.add(collatz, ints(np.int32, lo=1, hi=1000, edge=False))
    batch.add(loops, ints(np.int64, lo=0, hi=80, edge=False))
    w = batch.add(widening, floats(np.float32, special=False),
                  ints(np.int32, lo=0, hi=20, edge=False), rtol=1e-5)
    assert w.tm.out_dtype == np.float32 and "float s" in w.tm.source
    batch.add(fib, ints(np.int64, lo=0, hi=90, edge=False))
    batch.add(early, floats(np.float64, scale=500, special=False) ** 2)
    batch.add(swap, ints(np.int16), ints(np.int16))
    sp = batch.add(shadow_param, floats(np.float32), Weak([1.5] * N))
    assert sp.tm.scalar_dtypes[1] == np.float32 and not sp.tm.uses_fp64
    batch.add(lambda x: 1 if x > 0 else 2.5, f)
    batch.add(lambda x: -5 < x <= 5 != x, f)


def test_index_point(batch):
    def ip(p):
        r, c = p
        return r * 100 + c + p[0] - p.row + p.x - p.col + p.y
    batch.add(ip, Idx())


# ---------------------------------------------------------------------------------------------
# math, casts, constants, helpers
# ---------------------------------------------------------------------------------------------

MATH = [
    lambda x: math.sqrt(abs(x)), lambda x: np.sqrt(abs(x)), lambda x: math.exp(x / 64),
    lambda x: np.exp2(x / 64), lambda x: np.expm1(x / 64), lambda x: math.log(abs(x) + 1),
    lambda x: np.log2(abs(x) + 1), lambda x: math.log10(abs(x) + 1),
    lambda x: np.log1p(abs(x)), lambda x: math.sin(x), lambda x: np.cos(x),
    lambda x: math.tan(x / 100), lambda x: np.arcsin(x / 1000), lambda x: math.acos(x / 1000),
    lambda x: np.arctan(x), lambda x: math.atan2(x, 3.0), lambda x: np.arctan2(x, x + 1),
    lambda x: np.sinh(x / 100), lambda x: math.cosh(x / 100), lambda x: np.tanh(x),
    lambda x: np.arcsinh(x), lambda x: math.acosh(abs(x) + 1), lambda x: np.arctanh(x / 1000),
    lambda x: np.floor(x), lambda x: np.ceil(x), lambda x: np.trunc(x), lambda x: np.fabs(x),
    lambda x: np.absolute(x), lambda x: math.pow(abs(x), 0.3), lambda x: np.power(abs(x), 1.5),
    lambda x: math.hypot(x, 2.0), lambda x: np.fmin(x, 1.0), lambda x: np.maximum(x, -1.0),
    lambda x: np.minimum(x, 0.5), lambda x: np.fmax(x, 2.0), lambda x: math.copysign(3.0, x),
    lambda x: math.fmod(x, 7.0), lambda x: np.fmod(x, -7.0), lambda x: math.isnan(x),
    lambda x: np.isinf(x), lambda x: np.isfinite(x), lambda x: np.sign(x),
    lambda x: np.square(x), lambda x: np.clip(x, -1.0, 2.0), lambda x: np.where(x > 0, x, 0.0),
    lambda x: np_.sqrt(abs(x)) + np_.pi, lambda x: math.degrees(x), lambda x: np.radians(x),
    lambda x: np.cbrt(x), lambda x: math.erf(x / 100), lambda x: math.log(abs(x) + 1, 2.0),
    lambda x: min(x, 1.0, -x), lambda x: max(x, 0), lambda x: round(x / 7),
    lambda x: np.rint(x / 3), lambda x: np.signbit(x), lambda x: np.logical_not(x),
]


@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_math_functions(batch, dt):
    x = floats(dt, special=False)
    for f in MATH:
        batch.add(f, x, rtol=2e-5 if dt == np.float32 else 1e-12)
    # math.floor returns a Python int; in a muscle it follows np.floor (documented)
    batch.add(lambda x: math.floor(x) + math.ceil(-x), x, dtype=x.dtype)


def test_math_on_ints(batch):
    i32, i16, u8 = ints(np.int32, lo=0, hi=10**6), ints(np.int16, lo=0), ints(np.uint8)
    batch.add(lambda x: math.sqrt(x), i32)     # -> float64 as NumPy
    batch.add(lambda x: np.sqrt(x), i16, rtol=1e-6)  # int16 -> float32
    batch.add(lambda x: abs(x), ints(np.int8))  # stays int8, wraps at -128
    batch.add(lambda x: np.floor(x), u8)       # ints stay ints (NumPy 2)
    batch.add(lambda x, y: max(x, y), i32, i32[::-1].copy())
    batch.add(lambda x: np.sign(x), ints(np.int64))
    batch.add(lambda x: np.fmod(x, 7), ints(np.int32))
    batch.add(lambda x: np.clip(x, -5, 5), ints(np.int32))
    batch.add(lambda x: math.sqrt(2) * x, floats(np.float32, special=False))
    c = batch.add(lambda x: np.sqrt(2.0) * x, floats(np.float32, special=False))
    assert c.tm.out_dtype == np.float64  # np.sqrt of a Python float is a strong float64


def test_casts(batch):
    f = floats(np.float32, special=False)
    i = ints(np.int32, lo=-1000, hi=1000)
    batch.add(lambda x: int(x) + 1, f, dtype=np.int64)
    batch.add(lambda x: float(x) / 3, i)
    batch.add(lambda x: bool(x) and x > 2, i)
    batch.add(lambda x: np.float32(x) / 3, i)
    batch.add(lambda x: np.int8(x), i)
    batch.add(lambda x: np.uint16(x) + np.uint16(1), i)
    batch.add(lambda x: np.float64(x) * 0.1, f)
    batch.add(lambda x: x * np.float32(0.1), f)
    batch.add(lambda x: x + float("inf"), f)
    batch.add(lambda x: x * 1e40 - x * 1e-50, f)   # out of float32 range: inf and 0
    batch.add(lambda x: np.bool_(x) | False, i)


SCALE = 0.5
ISCALE = np.int16(3)
WEIGHTS = (0.25, 0.5, 0.25)
TABLE = np.array([3, 1, 4, 1, 5, 9, 2, 6], dtype=np.int16)
FTABLE = np.linspace(0, 1, 7, dtype=np.float32)


def captured(x, i):
    s = 0
    for k in range(len(WEIGHTS)):
        s += WEIGHTS[k] * x
    return s * SCALE + TABLE[i % len(TABLE)] + FTABLE[i % 7] + WEIGHTS[-1] + TABLE.size


def make_closure(c, arr):
    def f(x, i):
        return x * c + arr[i % 4] + arr[-1]
    return f


def test_captured_constants(batch):
    x = floats(np.float32, special=False)
    i = ints(np.int64, lo=0, hi=1000, edge=False)
    c = batch.add(captured, x, i)
    assert c.tm.out_dtype == np.float32 and not c.tm.uses_fp64
    assert "__constant" in c.tm.source
    batch.add(lambda x: x * ISCALE, ints(np.int8))
    batch.add(make_closure(1.5, [1.0, 2.0, 3.0, 4.0]), x, i)
    batch.add(make_closure(np.float64(2), np.arange(4, dtype=np.uint8)), x, i)
    batch.add(lambda x: x * math.pi + np.e - math.inf * 0 + np.float32(np.nan) * 0, x)


def sq(v):
    return v * v


def norm2(a, b):
    return sq(a) + sq(b)


def half(v):
    return v * 0.5


def row_sum(p, n):
    s = 0
    for k in range(n):
        s += p[k]
    return s


def uses_row(arr, i):
    return row_sum(arr, 3) + arr[i % len(arr)] + arr.size + arr.shape[0]


def test_helper_functions(batch):
    x, y = floats(np.float32, special=False), floats(np.float32, special=False)
    c = batch.add(norm2, x, y)
    assert c.tm.source.count("static inline float m") >= 2
    batch.add(norm2, ints(np.int8), ints(np.int16))   # a second specialisation of sq
    d = batch.add(lambda x: half(x) + half(2), x)   # half(2) is weak: computed in float32
    assert not d.tm.uses_fp64
    batch.add(uses_row, Arr(floats(np.float64, 16, special=False)),
              ints(np.int64, lo=0, hi=100, edge=False))
    m2 = rng.integers(-9, 9, (5, 6)).astype(np.int32)
    batch.add(lambda a, i: a[i % 5, 2] + a[i % 5][i % 6] + len(a) + a.shape[1] + a.size,
              Arr(m2), ints(np.int64, lo=0, hi=100, edge=False))


# ---------------------------------------------------------------------------------------------
# OpenCL C muscles
# ---------------------------------------------------------------------------------------------


def test_c_muscles(batch):
    x = floats(np.float32, special=False)
    m = Muscle("float func(float x) { return x * x; }")
    assert m.is_c and m.name == "func" and m.n_params == 1 and m.param_names == ["x"]
    c = batch.add(lambda x: x * x, x)           # the Python twin is the reference
    c.tm = m.specialise(c.kinds, c_name="cm0")
    src = """
    // a helper, renamed with the entry's prefix
    static float scale(float v, int k) { return v * k; }
    double func(float x, int k, __global float* ys) {
        return scale(x, k) + ys[0] + SKELPY_GET(ys, 1) + SKELPY_LEN(ys);
    }"""
    ys = floats(np.float32, 8, special=False)
    k = ints(np.int32, lo=-5, hi=5)
    case = batch.add(lambda x, k, ys: np.float64(x * np.float32(k) + ys[0] + ys[1]
                                                 + np.float32(len(ys))), x, k, Arr(ys))
    case.tm = Muscle(src).specialise(case.kinds, c_name="cm1")
    assert case.tm.out_dtype == np.float64 and case.tm.uses_fp64
    assert case.tm.source.startswith("#pragma OPENCL EXTENSION cl_khr_fp64")
    assert "cm1_scale" in case.tm.source
    case = batch.add(lambda x: x > 0, x)
    case.tm = Muscle("bool func(float x) { return x > 0; }").specialise(case.kinds, c_name="cm2")
    case = batch.add(lambda p: p.row * 10 + p.col, Idx())
    case.tm = Muscle("long func(IndexPoint p) { return p.row * 10 + p.x; }").specialise(
        case.kinds, c_name="cm3")
    case = batch.add(lambda x: x * 2, x, out_dtype=np.int32)
    case.tm = Muscle("float func(float x) { return x * 2; }").specialise(
        case.kinds, out_dtype=np.int32, c_name="cm4")


def test_c_muscle_accesses():
    kind = nb_kind(np.float32)
    m = Muscle("float func(nb_t nb) { return SKELPY_GET2(nb, -1, 0) + SKELPY_GET2(nb, 1, (2))"
               " + SKELPY_GET2(nb, 0, 0); }")
    tm = m.specialise([kind])
    assert tm.accesses[0] == [(-1, 0), (1, 2), (0, 0)]
    assert tm.access_bounds[0] == ((-1, 1), (0, 2))
    assert "__global const float* restrict nb" in ", ".join(tm.c_params)
    tm = Muscle("float func(nb_t nb, int k) { return SKELPY_GET2(nb, k, 0); }").specialise(
        [kind, Scalar(np.int32)])
    assert tm.accesses[0] is None and tm.access_bounds[0] is None
    with pytest.raises(TranslationError, match="no function"):
        Muscle("int x = 3;")


# ---------------------------------------------------------------------------------------------
# stencil accesses
# ---------------------------------------------------------------------------------------------


def heat(nb):
    return nb[0, 0] + 0.1 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


def box(nb):
    s = 0.0
    for dr in range(-2, 3):
        for dc in range(-1, 2):
            if dr == 0 and dc == 0:
                continue
            s += nb[dr, dc]
    return s / 14


OFFS = (-1, 0, 1)


def via_helper(nb):
    return get(nb, 2) + get(nb, -3) + nb[OFFS[0], OFFS[2]]


def get(nb, d):
    return nb[d, d + 1]


def wide(nb, k):
    s = nb[0, 0]
    for dr in range(-300, 301):
        s += nb[dr // 100, -dr // 150]
    return s + nb[k, 0]


def test_stencil_accesses(batch):
    img = rng.standard_normal((40, 40)).astype(np.float32)
    c = batch.add(heat, NB(img, 20), n=200)
    assert set(c.tm.accesses[0]) == {(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)}
    assert c.tm.access_bounds[0] == ((-1, 1), (-1, 1))
    assert c.tm.out_dtype == np.float32 and not c.tm.uses_fp64
    c = batch.add(box, NB(img, 20), n=200)
    assert len(c.tm.accesses[0]) == 14 and (0, 0) not in c.tm.accesses[0]
    assert c.tm.access_bounds[0] == ((-2, 2), (-1, 1))
    c = batch.add(via_helper, NB(img, 20), n=200)
    assert set(c.tm.accesses[0]) == {(2, 3), (-3, -2), (-1, 1)}
    assert c.tm.access_bounds[0] == ((-3, 2), (-2, 3))
    tm = Muscle(wide).specialise([nb_kind(np.float32), Scalar(np.int32)])
    assert tm.accesses[0] is None and tm.access_bounds[0] is None
    tm = Muscle(lambda nb: wide(nb, 1)).specialise([nb_kind(np.float32)])
    assert tm.accesses[0] is None  # too many iterations to unroll: intervals instead
    assert tm.access_bounds[0] == ((-3, 3), (-2, 2))
    tm = Muscle(lambda nb: nb[1, 1] if nb[0, 0] > 0 else nb[-1, -1]).specialise(
        [nb_kind(np.float32)])
    assert set(tm.accesses[0]) == {(0, 0), (1, 1), (-1, -1)}
    tm = Muscle(lambda nb: 1.0).specialise([nb_kind(np.float32)])
    assert tm.accesses[0] == [] and tm.access_bounds[0] == ((0, 0), (0, 0))


# ---------------------------------------------------------------------------------------------
# the API
# ---------------------------------------------------------------------------------------------

two = (lambda x: x + 1, lambda x: x * 2)
pair = (lambda a: a - 1, lambda b: b * 3)


def test_lambda_disambiguation_and_metadata():
    a, b = two
    ma, mb = Muscle(a), Muscle(b)
    f32 = [Scalar(np.float32)]
    assert "+" in ma.specialise(f32).source and "*" in mb.specialise(f32).source
    assert "-" in Muscle(pair[0]).specialise(f32).source.split("{")[-1]
    assert ma.name == "<lambda>" and ma.param_names == ["x"] and ma.n_params == 1
    assert ma.origin.startswith("tests/test_translator.py:") or "test_translator.py:" in ma.origin
    assert not ma.is_c
    assert Muscle(a) is ma                       # cheap for the same function
    tm = ma.specialise(f32, c_name="foo")
    assert ma.specialise(f32, c_name="foo") is tm  # cached
    assert tm.c_params == ["float x"] and tm.c_name == "foo"
    assert tm.source.rstrip().endswith("}") and "static inline float foo(float x)" in tm.source
    f = tm.features
    for k in ("ops_add", "ops_mul", "ops_div", "ops_cmp", "ops_logic", "ops_math", "ops_int",
              "ops_float", "branches", "loops", "reads", "instructions", "loop_trip_static"):
        assert k in f
    assert f["ops_add"] == 1 and f["ops_float"] == 1
    g = Muscle(box).specialise([nb_kind(np.float32)]).features
    assert g["loops"] == 2 and g["loop_trip_static"] == 15 and g["reads"] == 1
    assert g["reads_dyn"] == 15
    assert Muscle(loops).specialise([Scalar(np.int64)]).features["loop_trip_static"] == 0
    assert Muscle(np.add).specialise([Scalar(np.int8)] * 2).out_dtype == np.int8
    assert Muscle(max).specialise([Scalar(np.float32)] * 2).out_dtype == np.float32


def test_idx_and_accessor_param_names():
    tm = Muscle(lambda p, x: p[0] + x[p[1]]).specialise([IndexPoint(), global_array(np.int32)])
    assert tm.c_params == ["long p_r", "long p_c", "__global const int* restrict x", "long x_n"]
    assert tm.call(["q", "y"]) == "skelpy_f(q_r, q_c, y, y_n)"
    # names that are C keywords or clash with generated names are renamed
    def kw(int, double):
        float_ = int + double
        return float_
    tm = Muscle(kw).specialise([Scalar(np.int32), Scalar(np.int32)])
    assert "int int" not in tm.source


# ---------------------------------------------------------------------------------------------
# errors: the message names the construct and the line
# ---------------------------------------------------------------------------------------------


def _line(fn, text):
    import inspect
    src, start = inspect.getsourcelines(fn)
    for k, s in enumerate(src):
        if text in s:
            return start + k
    raise AssertionError(text)


def e_listcomp(x):
    y = [x for _ in range(3)]
    return y


def e_string(x):
    y = "abc"
    return y


def e_unknown(x):
    return x + undefined_name  # noqa: F821


def e_method(x):
    return x.sum()


def e_write(x, i):
    x[i] = 1
    return 0


def e_invert_float(x):
    return ~x


def e_slice(x, i):
    return x[1:3]


def e_with(x):
    with open("f"):
        pass
    return x


def e_try(x):
    try:
        return x
    except Exception:
        return 0


def e_global(x):
    global SCALE
    return x


def e_fstring(x):
    return f"{x}"


def e_recursive(n):
    return n if n < 2 else e_recursive(n - 1)


def e_noreturn(x):
    if x > 0:
        return 1


def e_kwargs(x):
    return np.clip(x, a_min=0, a_max=1)


def e_lambda(x):
    g = lambda y: y  # noqa: E731
    return g(x)


def e_shift_float(x):
    return x << 1.5


def e_index_scalar(x):
    return x[0]


def e_overflow(x):
    return x + 1000


def e_unassigned(x):
    if x > 0:
        y = x
    return z + y  # noqa: F821


def e_class(x):
    class A:
        pass
    return x


def e_yield(x):
    yield x


def e_defaults(x, y=1):
    return x


def e_for_list(x):
    s = 0
    for v in [1, 2]:
        s += v
    return s


def e_bool_sub(x, y):
    return x - y


def e_tuple_ret(x):
    return x, x


def e_dict(x):
    d = {1: x}
    return d


def e_negpow(x):
    return x ** -2


ERRORS = [
    (e_listcomp, "list comprehension", "y = [x for", [np.float32]),
    (e_string, "string literal", 'y = "abc"', [np.float32]),
    (e_unknown, "undefined_name", "undefined_name", [np.float32]),
    (e_method, "method call", "x.sum()", [np.float32]),
    (e_write, "item assignment", "x[i] = 1", [global_array(np.float32), np.int32]),
    (e_invert_float, "'~'", "return ~x", [np.float32]),
    (e_slice, "slicing", "x[1:3]", [global_array(np.float32), np.int32]),
    (e_with, "with statement", "with open", [np.float32]),
    (e_try, "try statement", "try:", [np.float32]),
    (e_global, "global statement", "global SCALE", [np.float32]),
    (e_fstring, "f-string", 'f"{x}"', [np.float32]),
    (e_recursive, "recursive call", "e_recursive(n - 1)", [np.int32]),
    (e_noreturn, "without returning", "if x > 0", [np.float32]),
    (e_kwargs, "keyword argument", "np.clip(", [np.float32]),
    (e_lambda, "lambda", "g = lambda", [np.float32]),
    (e_shift_float, "'<<'", "x << 1.5", [np.int32]),
    (e_index_scalar, "cannot index", "x[0]", [np.float32]),
    (e_overflow, "out of bounds for int8", "x + 1000", [np.int8]),
    (e_unassigned, "'z'", "return z + y", [np.float32]),
    (e_class, "class definition", "class A", [np.float32]),
    (e_for_list, "range", "for v in [1, 2]", [np.float32]),
    (e_bool_sub, "'-'", "return x - y", [np.bool_, np.bool_]),
    (e_tuple_ret, "several values", "return x, x", [np.float32]),
    (e_dict, "dict", "d = {1: x}", [np.float32]),
    (e_negpow, "negative integer powers", "x ** -2", [np.int32]),
]


@pytest.mark.parametrize("fn,what,text,kinds", ERRORS, ids=[e[0].__name__ for e in ERRORS])
def test_translation_errors(fn, what, text, kinds):
    kinds = [k if isinstance(k, Accessor) else Scalar(k) for k in kinds]
    with pytest.raises(TranslationError) as ei:
        Muscle(fn).specialise(kinds)
    msg = str(ei.value)
    assert what in msg, msg
    assert f"test_translator.py:{_line(fn, text)} ({fn.__name__})" in msg, msg


def test_errors_at_construction():
    with pytest.raises(TranslationError, match="yield"):
        Muscle(e_yield)
    with pytest.raises(TranslationError, match="default value"):
        Muscle(e_defaults)
    with pytest.raises(TranslationError, match="args"):
        Muscle(lambda *xs: xs[0])
    with pytest.raises(TranslationError, match="function 'print' is not supported"):
        Muscle(lambda x: print(x)).specialise([Scalar(np.int32)])
    with pytest.raises(TranslationError, match="lambda is not supported"):
        Muscle(lambda x: (lambda y: y)(x)).specialise([Scalar(np.int32)])
    with pytest.raises(TranslationError, match="np.linalg.norm"):
        Muscle(lambda x: np.linalg.norm(x)).specialise([Scalar(np.float32)])
    with pytest.raises(TranslationError, match="takes 1 parameter"):
        Muscle(lambda x: x).specialise([Scalar(np.int32)] * 2)
    with pytest.raises(TranslationError, match="source"):
        Muscle(eval("lambda x: x"))
    with pytest.raises(TranslationError, match="a muscle must be"):
        Muscle(3)


# ---------------------------------------------------------------------------------------------
# property-based: random inputs through a fixed program
# ---------------------------------------------------------------------------------------------


def poly(a, b, c):
    t = a * b - c // 3 + (a ^ c) % 7
    if t > b:
        t = t - (b << 2) + abs(c)
    return t * 3 + min(a, c) ** 2


def fpoly(a, b, c):
    return (a * b - c) / (abs(c) + 1) + max(a, b) * 0.5 - a // (b + 10) + c % 3.5


@pytest.mark.parametrize("dt", [np.int8, np.int32, np.uint16, np.float32, np.float64])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_property_random_inputs(ocl, dt, data):
    dt = np.dtype(dt)
    elems = (st.floats(-1e3, 1e3, width=dt.itemsize * 8) if dt.kind == "f"
             else st.integers(np.iinfo(dt).min, np.iinfo(dt).max))
    arrays = [data.draw(hnp.arrays(dt, 16, elements=elems)) for _ in range(3)]
    b = Batch(ocl)
    # same source every time (inputs are packed into a buffer): the program is built once
    # per dtype and comes from pyopencl's cache afterwards
    b.add(poly if dt.kind in "iu" else fpoly, *arrays, rtol=1e-5 if dt == np.float32 else None)
    b.run()


# ---------------------------------------------------------------------------------------------
# odds and ends
# ---------------------------------------------------------------------------------------------


def later_read(x):
    prev = 0.0
    s = 0.0
    for i in range(4):
        s += prev
        prev = x * i
    return s


def loop_var_reassigned(n):
    t = 0
    i = -1          # the loop may not run (n is not a constant): i needs a value before it
    for i in range(n):
        i = i * 2
        t += i
    return t + i


def while_true(x):
    k = 0
    while True:
        k += 1
        if k * k >= x:
            break
    return k


def nested_helpers(p, i):
    return twice_get(p, i) + ip_sum(i, i)


def twice_get(arr, i):
    return 2 * arr[i % len(arr)]


def ip_sum(a, b):
    return a + b


def mixed_weak(x, n, s):
    acc = 0.5
    for k in range(n % 5):
        acc = acc + k * s
    return x * acc


def weak_int_param(x, n):
    t = x
    for _ in range(n % 4):
        t = t + n
    return t


def mandel(p, scale):
    cr = -2.0 + p.x * scale
    ci = -1.0 + p.y * scale
    zr = zi = 0.0
    n = 0
    while zr * zr + zi * zi < 4.0 and n < 50:
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        n += 1
    return n


def ip_helper(p):
    return row_of(p) * 1000 + p[1]


def row_of(q):
    r, _ = q
    return r


def test_misc(batch):
    f32 = floats(np.float32, special=False)
    batch.add(later_read, f32)
    batch.add(loop_var_reassigned, ints(np.int64, lo=1, hi=20, edge=False))
    batch.add(while_true, ints(np.int32, lo=0, hi=10**6, edge=False))
    batch.add(nested_helpers, Arr(ints(np.int16, 10)), ints(np.int64, lo=0, hi=99, edge=False))
    m = batch.add(mixed_weak, f32, ints(np.int32, lo=0, hi=99, edge=False), Weak([0.25] * N))
    assert not m.tm.uses_fp64 and m.tm.scalar_dtypes[2] == np.float32
    w = batch.add(weak_int_param, ints(np.int8, lo=-20, hi=20), Weak(list(range(N))))
    assert w.tm.scalar_dtypes[1] == np.int64  # used as int8 and as a Python int in range()
    batch.add(lambda x, b: x + b, ints(np.int8), rng.integers(0, 2, N).astype(bool))
    batch.add(lambda x: not x, f32)
    batch.add(lambda x, y: x if x > 0 else y, ints(np.uint8), ints(np.int8))
    batch.add(lambda x, y: x < y, f32, ints(np.int8))
    batch.add(lambda x: -x, ints(np.uint8))
    batch.add(lambda x: (x + 1) * 2 ** 3 - (1 << 4), ints(np.int64, lo=-1000, hi=1000))
    batch.add(lambda x: x // 0.0 + x % 0.0, f32)
    batch.add(lambda x: 7 // x + -7 % x, ints(np.int32))
    batch.add(lambda x: 7.5 // x + (-7.5) % x, floats(np.float64))
    batch.add(lambda x, e: x ** e, ints(np.int32, lo=-3, hi=3), ints(np.int32, lo=0, hi=40))
    batch.add(lambda x: 2 ** -1 * x, f32)             # Python folds 2 ** -1 to 0.5
    batch.add(lambda x: True + True + x, ints(np.int16))
    mb = batch.add(mandel, Idx(), Weak([0.3] * N))
    assert mb.tm.out_dtype == np.int64
    batch.add(ip_helper, Idx())
    z = batch.add(lambda: 3, n=4)                      # no parameters at all
    assert z.tm.c_params == [] and z.tm.out_dtype == np.int64


DEBUG = False


def debug_branches(x):
    if DEBUG:
        return x & 1          # a float has no '&': fine, this branch never runs
    y = x * 2 if not DEBUG else x << 3
    while DEBUG:
        y = "never"
    return y


def test_constant_conditions_prune_dead_branches(batch):
    c = batch.add(debug_branches, floats(np.float32, special=False))
    assert c.tm.out_dtype == np.float32 and "<<" not in c.tm.source
    c = batch.add(lambda x: (x if 2 > 0 else 0.5), ints(np.uint32))
    assert c.tm.out_dtype == np.uint32


# ---------------------------------------------------------------------------------------------
# random expression trees over mixed dtypes, against NumPy scalars
# ---------------------------------------------------------------------------------------------

_RAND_DTS = [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.float32, np.float64,
             np.bool_]
_RAND_OPS = ["+", "-", "*", "//", "%", "/", "&", "|", "^", "<", ">=", "==", "minimum",
             "maximum", "abs", "neg", "lit", "flit", "**2", "sqrt", "floor"]


def _rand_expr(r, depth, nv):
    if depth == 0 or r.random() < 0.25:
        c = r.random()
        if c < 0.7:
            return f"v{r.randrange(nv)}"
        return str(r.randint(-5, 5)) if c < 0.85 else repr(round(r.uniform(-3, 3), 2))
    op = r.choice(_RAND_OPS)
    a, b = _rand_expr(r, depth - 1, nv), _rand_expr(r, depth - 1, nv)
    return {"minimum": f"np.minimum({a}, {b})", "maximum": f"np.maximum({a}, {b})",
            "abs": f"abs({a})", "neg": f"(-{a})", "lit": f"({a} + 3)", "flit": f"({a} * 0.5)",
            "**2": f"({a} ** 2)", "sqrt": f"np.sqrt(abs({a}) + 0.5)",
            "floor": f"np.floor({a})"}.get(op, f"({a} {op} {b})")


def test_random_expressions(ocl, tmp_path):
    import random
    r = random.Random(2024)
    src = ["import numpy as np\n"]
    sigs = []
    for k in range(80):
        nv = r.randint(1, 3)
        sigs.append([r.choice(_RAND_DTS) for _ in range(nv)])
        args = ", ".join(f"v{i}" for i in range(nv))
        src.append(f"def f{k}({args}):\n    return {_rand_expr(r, 3, nv)}\n")
    path = tmp_path / "random_muscles.py"
    path.write_text("".join(src))
    ns: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    b = Batch(ocl)
    for k, dts in enumerate(sigs):
        ins = []
        for dt in dts:
            dt = np.dtype(dt)
            if dt == np.bool_:
                ins.append(rng.integers(0, 2, 48).astype(bool))
            elif dt.kind == "f":
                ins.append((rng.standard_normal(48) * 20).astype(dt))
            else:
                info = np.iinfo(dt)
                ins.append(rng.integers(max(info.min, -100), min(info.max, 100), 48,
                                        endpoint=True).astype(dt))
        f = ns[f"f{k}"]
        try:  # keep the programs NumPy itself accepts, with one result type
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                out = [f(*[a[g] for a in ins]) for g in range(48)]
        except TypeError:
            continue
        if len({(type(o), getattr(o, "dtype", None)) for o in out}) != 1:
            continue
        b.add(f, *ins, rtol=1e-5)
    assert len(b.cases) > 40
    b.run()


# ---------------------------------------------------------------------------------------------
# added with the translator's passes
# ---------------------------------------------------------------------------------------------


def weak_pow(x, n):
    return x * pow(n, 2) + pow(x, 2) - pow(n, 3)


def test_builtin_pow_of_python_ints(batch):
    # pow() of Python values is Python's **; it used to stop the translator (a KeyError)
    c = batch.add(weak_pow, floats(np.float32, special=False), Weak(list(range(-48, 48))))
    assert c.tm.out_dtype == np.float32 and c.tm.scalar_dtypes[1] == np.int64
