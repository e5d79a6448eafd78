"""Containers as device arrays: every operator and ufunc against NumPy (issue 15).

Dtypes, NEP 50 corner cases and broadcasting are compared exactly; values bit for bit for
arithmetic that IEEE rounds once (and integer/bool work), within a few ulps for the
transcendental functions (OpenCL's accuracy, not NumPy's libm).

Every (operation, dtype) pair and every (operator, dtype, scalar) triple has its result dtype
and its errors checked against NumPy: that is host-side work and cheap. *Values* need a kernel
build per pair (tens of milliseconds on PoCL), so by default each operation runs a rotating
sample that still covers every dtype across the operations; ``SKELPY_HEAVY=1`` runs the
whole value matrix.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import skelpy as sk
from skelpy.array import ops

FULL = bool(os.environ.get("SKELPY_HEAVY"))
DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64,
          np.float32, np.float64]
EXACT = {"add", "subtract", "multiply", "true_divide", "floor_divide", "remainder",
         "bitwise_and", "bitwise_or", "bitwise_xor", "equal", "not_equal", "less",
         "less_equal", "greater", "greater_equal", "minimum", "maximum", "fmin", "fmax",
         "logical_and", "logical_or", "logical_xor", "negative", "positive", "invert",
         "absolute", "logical_not", "floor", "ceil", "trunc", "rint", "fabs", "sign",
         "square", "isnan", "isinf", "isfinite", "signbit", "copysign", "sqrt", "fmod"}


def _data(dt, shape, rng):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind == "f":
        a = rng.standard_normal(shape) * 10
        return a.astype(dt)
    info = np.iinfo(dt)
    lo, hi = max(int(info.min), -100), min(int(info.max), 100)
    return rng.integers(lo, hi + 1, size=shape).astype(dt)


def _numpy(func, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return func(*args), None
        except (TypeError, ValueError, OverflowError) as exc:
            return None, exc


def _check(got, want, name):
    assert isinstance(got, (sk.Vector, sk.Matrix)), name
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    assert got.shape == want.shape
    g = got.to_numpy()
    if name in EXACT or want.dtype.kind in "biu":
        np.testing.assert_array_equal(g, want, err_msg=name)
    else:
        tol = 1e-5 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(g, want, rtol=tol, atol=tol, equal_nan=True, err_msg=name)


def _runs(name: str, dt) -> bool:
    """Every (operation, dtype) pair has its dtype and errors checked against NumPy; each
    operation is *run* on two dtypes, rotating so that every dtype runs (a kernel build per
    pair on PoCL would take minutes); all of them under ``SKELPY_HEAVY=1``."""
    if FULL:
        return True
    k = sorted({**ops.BINARY, **ops.UNARY}).index(name)
    return DTYPES.index(dt) in {k % len(DTYPES), (k + 5) % len(DTYPES)}


def _sample(cases: list, salt: int, k: int = 3) -> list:
    """A deterministic, rotating choice of ``k`` cases (all of them under FULL): the stride
    walks a different part of the list for each ``salt`` so the operators share the work."""
    if FULL or len(cases) <= k:
        return cases
    step = max(1, len(cases) // k)
    return [cases[(salt * 7 + i * step) % len(cases)] for i in range(k)]


@pytest.mark.parametrize("name", sorted(ops.BINARY))
def test_binary_ufuncs_against_numpy(name, rng):
    uf = ops.BINARY[name][0]
    for dt in DTYPES:
        a, b = _data(dt, (37,), rng), _data(dt, (37,), rng)
        if name in ("floor_divide", "remainder", "fmod", "true_divide") and dt != np.bool_:
            b[b == 0] = 3                     # x // 0 differs in warnings only
        if name in ("power", "left_shift", "right_shift") and np.dtype(dt).kind in "iu":
            b = (np.abs(b) % 5).astype(dt)    # NumPy raises on negative int powers
        want, err = _numpy(uf, a, b)
        if err is not None:
            with pytest.raises(sk.SkelpyError):
                uf(sk.Vector(a), sk.Vector(b))
            continue
        got = uf(sk.Vector(a), sk.Vector(b))
        assert got.dtype == (np.float32 if want.dtype == np.float16 else want.dtype)
        if _runs(name, dt):
            if want.dtype == np.float16:      # skelpy computes half results in float32
                want = _numpy(uf, a.astype(np.float32), b.astype(np.float32))[0]
            _check(got, want, name)


@pytest.mark.parametrize("name", sorted(ops.UNARY))
def test_unary_ufuncs_against_numpy(name, rng):
    uf = ops.UNARY[name][0]
    for dt in DTYPES:
        a = _data(dt, (5, 7), rng)
        if name in ("sqrt", "log", "log2", "log10", "log1p", "arccosh") and a.dtype.kind == "f":
            a = np.abs(a) + 1
        if name in ("arcsin", "arccos", "arctanh") and a.dtype.kind == "f":
            a = (a / 40).clip(-0.99, 0.99).astype(dt)
        want, err = _numpy(uf, a)
        if err is not None:
            with pytest.raises(sk.SkelpyError):
                uf(sk.Matrix(a))
            continue
        got = uf(sk.Matrix(a))
        assert got.dtype == (np.float32 if want.dtype == np.float16 else want.dtype)
        if _runs(name, dt):
            if want.dtype == np.float16:      # skelpy computes half results in float32
                want = _numpy(uf, a.astype(np.float32))[0]
            _check(got, want, name)


OPERATORS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    "**": lambda a, b: a ** b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
SCALARS = [0, 1, 3, -2, 300, -129, 2**40, 2.5, -0.5, 1e300, True, False,
           np.float32(1.5), np.int8(-3), np.uint8(200), np.float64(0.25), np.int64(7)]


@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_operators_with_scalars_follow_nep50(op, rng):
    """Python scalars are weak (NEP 50): out-of-range ints are NumPy's error (or, in a
    comparison, NumPy's exact answer); NumPy scalars are strong. Dtypes and errors for
    every (dtype, scalar, side); values for a rotating sample of them (each is a kernel
    build), every one under ``SKELPY_HEAVY=1``."""
    f = OPERATORS[op]
    runnable = {}
    for dt in [np.int8, np.uint8, np.int32, np.int64, np.uint64, np.float32, np.float64,
               np.bool_]:
        a = _data(dt, (23,), rng)
        v = sk.Vector(a)
        for s in SCALARS:
            for args, dev in (((a, s), (v, s)), ((s, a), (s, v))):
                if op in ("//", "%", "/") and args[1] is s and s == 0:
                    continue
                if op == "**" and (np.dtype(dt).kind in "iu" or isinstance(s, (int,
                                                                              np.integer))):
                    continue                  # int ** negative raises in NumPy, per element
                want, err = _numpy(f, *args)
                if err is not None:
                    with pytest.raises(sk.SkelpyError):
                        f(*dev)
                    continue
                if not isinstance(want, np.ndarray) or want.dtype == np.float16:
                    continue
                got = f(*dev)                 # lazy: the dtype rule is checked on the host
                assert got.dtype == want.dtype, (op, dt, s, args[0] is s)
                assert got.is_pending
                runnable.setdefault((np.dtype(dt).str, type(s).__name__, args[0] is s),
                                    (got, want, s))
    for key in _sample(sorted(runnable), sorted(OPERATORS).index(op), k=4):
        got, want, s = runnable[key]
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-6, equal_nan=True,
                                       err_msg=f"{op} {key} {s!r}")
        else:
            np.testing.assert_array_equal(got.to_numpy(), want, err_msg=f"{op} {key} {s!r}")


@pytest.mark.parametrize("dt", [np.int32, np.uint8, np.float32, np.float64, np.bool_, np.int64])
def test_unary_operators(dt, rng):
    a = _data(dt, (41,), rng)
    v = sk.Vector(a)
    for f in (lambda x: -x, lambda x: +x, lambda x: ~x, abs):
        want, err = _numpy(f, a)
        if err is not None:
            with pytest.raises(sk.SkelpyError):
                f(v)
            continue
        got = f(v)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.to_numpy(), want)


shapes = st.sampled_from([(1,), (7,), (1, 1), (1, 7), (5, 1), (5, 7), (3, 64), (1, 64), (64,)])


@settings(max_examples=100 if FULL else 10, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(sa=shapes, sb=shapes, dta=st.sampled_from(DTYPES), dtb=st.sampled_from(DTYPES),
       op=st.sampled_from(["+", "-", "*", "<", "&", "=="]), data=st.data())
def test_broadcasting_and_promotion_match_numpy(sa, sb, dta, dtb, op, data):
    a = data.draw(hnp.arrays(dta, sa, elements=_elements(dta)))
    b = data.draw(hnp.arrays(dtb, sb, elements=_elements(dtb)))
    f = OPERATORS[op]
    want, err = _numpy(f, a, b)
    ca = (sk.Vector if a.ndim == 1 else sk.Matrix)(a)
    cb = (sk.Vector if b.ndim == 1 else sk.Matrix)(b)
    if err is not None:
        with pytest.raises(sk.SkelpyError):
            f(ca, cb)
        return
    got = f(ca, cb)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.to_numpy(), want)
    np.testing.assert_array_equal(f(a, cb).to_numpy(), want)      # ndarray operands too


def _elements(dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return st.booleans()
    if dt.kind == "f":
        return st.floats(-1e3, 1e3, width=dt.itemsize * 8)
    info = np.iinfo(dt)
    return st.integers(max(int(info.min), -1000), min(int(info.max), 1000))


def test_where_clip_astype_and_numpy_functions(rng):
    a = rng.standard_normal((6, 9)).astype(np.float32)
    m = sk.Matrix(a)
    np.testing.assert_array_equal(sk.where(m > 0, m, 0.0).to_numpy(), np.where(a > 0, a, 0.0))
    np.testing.assert_array_equal(np.where(m > 0, 1, -1).to_numpy(), np.where(a > 0, 1, -1))
    assert np.where(m > 0, 1, -1).dtype == np.where(a > 0, 1, -1).dtype
    np.testing.assert_array_equal(np.clip(m, -0.5, 0.5).to_numpy(), np.clip(a, -0.5, 0.5))
    np.testing.assert_array_equal(m.astype(np.int16).to_numpy(), a.astype(np.int16))
    np.testing.assert_array_equal(np.maximum(m, 0.25).to_numpy(), np.maximum(a, 0.25))
    np.testing.assert_allclose(np.hypot(m, m.T.T).to_numpy(), np.hypot(a, a), rtol=1e-6)


def test_unsupported_numpy_calls_fall_back_with_one_warning():
    v = sk.Vector(np.arange(5, dtype=np.float64))
    with pytest.warns(sk.HostFallbackWarning, match="cumsum"):
        out = np.cumsum(v)
    np.testing.assert_array_equal(out, np.cumsum(np.arange(5.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.cumsum(v)                            # once per operation
    with pytest.warns(sk.HostFallbackWarning, match="outer"):
        np.add.outer(v, v)
