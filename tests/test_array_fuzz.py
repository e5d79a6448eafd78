"""The array API against NumPy where NumPy users hit edges (issue 15's bug hunt).

Each test pins a bug that was found by fuzzing containers against NumPy: Python ints that
travel in a float loop (``int8 / 300``), NumPy's exception classes (OverflowError,
ValueError, AxisError) kept by skelpy's errors, integers to negative powers, float ->
narrow-integer casts, rows of a matrix as operands, ``out=`` containers, ``ufunc.at`` and
``np.put`` writing into containers, ``any``/``all``, tuple axes, ``divmod``.

Few distinct kernels run (each costs a PoCL compile on a cold cache); the error and dtype
checks run no kernel at all. ``SKELPY_HEAVY=1`` adds the edge-value sweep over every
operator, dtype and scalar (minutes).
"""

from __future__ import annotations

import operator
import os
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_array_ops import _numpy

import skelpy as sk

HEAVY = bool(os.environ.get("SKELPY_HEAVY"))
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
DTYPES = [np.bool_, *INTS, np.float32, np.float64]
OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
       "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
       "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
       "==": operator.eq, "<": operator.lt, "max": np.maximum, "hypot": np.hypot,
       "arctan2": np.arctan2, "copysign": np.copysign}


@settings(max_examples=150, derandomize=True, deadline=None)
@given(dt=st.sampled_from(DTYPES), op=st.sampled_from(sorted(OPS)),
       scalar=st.one_of(st.integers(-2**65, 2**65), st.sampled_from(
           [300, -1, -129, 2**31, 2**63, 2**64 - 1, 1.5, True, np.int8(-3), np.uint64(7)])),
       reflected=st.booleans())
def test_scalar_operands_have_numpys_dtype_and_exception_class(dt, op, scalar, reflected):
    """NEP 50 over every dtype and operation, Python ints of any size included: the result
    dtype is NumPy's, and where NumPy raises, skelpy raises a SkelpyError that is also
    NumPy's class (``uint8 + 300``: OverflowError, ``int8 ** -1``: ValueError), at once.
    Nothing is evaluated (no kernel): values are the other tests' job."""
    f = OPS[op]
    a = np.array([1, 2], dt)
    args = (scalar, a) if reflected else (a, scalar)
    want, err = _numpy(f, *args)
    v = sk.Vector(a)
    dev = (scalar, v) if reflected else (v, scalar)
    if err is not None:
        with pytest.raises(sk.SkelpyError) as info:
            f(*dev)
        kind = OverflowError if isinstance(err, OverflowError) else \
            TypeError if isinstance(err, TypeError) else ValueError
        assert isinstance(info.value, kind), (err, info.value)
        assert "test_array_fuzz.py" in str(info.value)
        return
    try:
        got = f(*dev)
    except sk.SkelpyError as exc:
        # a NumPy 2 deviation skelpy documents: half results are float32; past that, none
        pytest.fail(f"{op} {np.dtype(dt)} {scalar!r}: NumPy gives {want!r}, skelpy {exc}")
    want_dt = np.float32 if want.dtype == np.float16 else want.dtype
    assert got.dtype == want_dt and got.shape == want.shape


def test_python_ints_travel_in_the_dtype_of_numpys_loop():
    """``int8 / 300`` runs NumPy's float64 loop: the 300 is 300.0, not an int8 that wraps
    to 44 (it was: -128 / 300 gave -2.9)."""
    a = np.array([-128, 127, 0, 1, 3, -7], np.int8)
    v = sk.Vector(a)
    np.testing.assert_array_equal((v / 300).to_numpy(), a / 300)
    u = np.array([0, 255, 3, 1], np.uint8)
    np.testing.assert_array_equal((sk.Vector(u) / -1).to_numpy(), u / -1)
    with np.errstate(all="ignore"):
        want = np.arctan2(a.astype(np.float32), np.float32(300))   # NumPy: float16
    np.testing.assert_allclose(np.arctan2(v, 300).to_numpy(), want, rtol=1e-6)


def test_numpy_exception_classes_survive_as_skelpy_errors():
    v = sk.Vector(np.arange(4, dtype=np.int8))
    for bad in (lambda: v + 300, lambda: 300 * v, lambda: v & -129):
        with pytest.raises(OverflowError) as info:
            bad()
        assert isinstance(info.value, sk.SkelpyError)
    with pytest.raises(OverflowError):
        v[0] = 300                                   # a write: nothing written
    with pytest.raises(ValueError):
        v[1:3] = np.nan
    np.testing.assert_array_equal(v.to_numpy(), np.arange(4))
    m = sk.Matrix(np.ones((2, 3), np.float32))
    for axis in (2, -3, (0, 2)):
        with pytest.raises(np.exceptions.AxisError) as info:
            np.sum(m, axis=axis)
        assert isinstance(info.value, (sk.SkelpyError, IndexError))
    for f in (np.min, np.argmax):
        with pytest.raises(ValueError) as info:
            f(sk.Vector(np.zeros(0, np.float32)))
        assert isinstance(info.value, sk.SkelpyError)
    with pytest.raises(ValueError):
        np.sum(m, axis=(1, 1))


def test_integers_to_negative_integer_powers_raise_valueerror_at_the_line():
    """NumPy raises for any negative exponent of an integer power: a scalar one at the
    operation's line (it was silently 0, or a TranslationError naming the fused kernel at
    evaluation), an exponent container's too (its values are looked at once, on the
    device), and nothing is left pending."""
    a = np.array([2, 1, -1, 0, 3], np.int32)
    v = sk.Vector(a)
    for bad in (lambda: v ** -1, lambda: v ** -5, lambda: v ** np.int8(-2),
                lambda: np.power(v, -3), lambda: v ** sk.Vector(np.array([1, 2, -1, 0, 1],
                                                                          np.int32)),
                lambda: 2 ** sk.Vector(np.array([3, -3, 1, 1, 1], np.int32))):
        with pytest.raises(ValueError) as info:
            bad()
        assert isinstance(info.value, sk.SkelpyError)
        assert "test_array_fuzz.py" in str(info.value)
    e = sk.Vector(np.array([0, 3, 2, 7, 1], np.int32))
    np.testing.assert_array_equal((v ** e).to_numpy(), a ** e.to_numpy())
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal((v ** -1.0).to_numpy(), a ** -1.0)   # a float power


def test_float_to_narrow_integer_casts_wrap_as_numpy():
    """NumPy truncates to a wide integer and wraps (``-1.0 -> uint8`` is 255, ``300.0`` is
    44, ``-2.5 -> uint64`` is 2**64 - 2); C leaves these undefined and PoCL gave 0 or
    the maximum. (NaN, inf and values past int64 stay undefined: NumPy warns there.)"""
    x = np.array([-1.0, -2.5, 300.0, 70000.5, -7.9, 0.0, 255.0, 1e9], np.float64)
    for src, dst in ((np.float32, np.uint8), (np.float64, np.uint16),
                     (np.float64, np.uint32), (np.float32, np.uint64)):
        a = x.astype(src)
        np.testing.assert_array_equal(sk.Vector(a).astype(dst).to_numpy(), a.astype(dst),
                                      err_msg=f"{np.dtype(src)} -> {np.dtype(dst)}")


def test_matrix_rows_compute_like_numpy_rows():
    """``m[i]`` (a MatrixRow) was no operand: ``m[i] * 2`` and ``m[i] += 1`` raised
    TypeError, ``np.sum(m[i])`` ran on the host."""
    ref = np.arange(15, dtype=np.float32).reshape(3, 5)
    m = sk.Matrix(ref)
    np.testing.assert_array_equal((m[1] * 2).to_numpy(), ref[1] * 2)
    np.testing.assert_array_equal((m[-1] * 3).to_numpy(), 3 * ref[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", sk.HostFallbackWarning)
        assert np.sum(m[2]) == ref[2].sum() and m[0].sum() == ref[0].sum()
    m[1] *= 2
    ref[1] *= 2
    np.testing.assert_array_equal(m.to_numpy(), ref)
    np.testing.assert_array_equal(np.asarray(m[0] == 3), ref[0] == 3)


def test_any_all_tuple_axes_and_empty_reductions():
    ref = np.array([[0.0, np.nan, 0.0], [0.0, 0.0, 0.0], [1.0, -0.0, 2.0]], np.float32)
    m = sk.Matrix(ref)
    assert m.any() == ref.any() and not np.all(m)
    np.testing.assert_array_equal(m.all(axis=1).to_numpy(), ref.all(axis=1))
    e = sk.Matrix(np.zeros((0, 3), np.float32))
    assert e.any() == np.False_ and e.all() == np.True_
    np.testing.assert_array_equal(e.all(axis=0).to_numpy(), np.ones(3, bool))
    i8 = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    got = np.sum(sk.Matrix(i8), axis=(0, 1))
    assert got == i8.sum() and got.dtype == np.int64
    assert np.sum(sk.Matrix(i8), axis=(1,)).shape == (3,)
    none = np.sum(sk.Matrix(i8), axis=())
    assert none.dtype == np.sum(i8, axis=()).dtype and none.shape == (3, 4)


def test_out_containers_at_and_put_write_through_the_container():
    """``out=`` a container was NumPy's 'output array is read-only'; ``np.add.at`` wrote
    into the read-only host snapshot behind the container's back."""
    a = np.arange(6, dtype=np.float32)
    v = sk.Vector(a)
    assert np.add(v, 1, out=v) is v
    np.testing.assert_array_equal(v.to_numpy(), a + 1)
    w = sk.Vector(a)
    half = w[::2]
    np.negative(half, out=half)                      # through a view: the base sees it
    np.testing.assert_array_equal(w.to_numpy(), np.where(np.arange(6) % 2, a, -a))
    with pytest.warns(sk.HostFallbackWarning):
        np.clip(v, 2, 4, out=v)                      # no device version with out=
    np.testing.assert_array_equal(v.to_numpy(), np.clip(a + 1, 2, 4))
    d = v * 1                                        # data on the device only
    sk.evaluate(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sk.HostFallbackWarning)
        np.add.at(d, [0, 0, 5], 10)
        np.put(d, [1], [-1])
    ref = np.clip(a + 1, 2, 4)
    np.add.at(ref, [0, 0, 5], 10)
    ref[1] = -1
    np.testing.assert_array_equal(d.to_numpy(), ref)
    np.testing.assert_array_equal((d + 0).to_numpy(), ref)   # the device copy too
    t = sk.Vector(np.zeros(6, np.int16))
    with pytest.raises(TypeError):
        np.copyto(t, v)                              # NumPy's same-kind rule
    with pytest.raises(TypeError):
        np.copyto(t, 1.5)
    np.copyto(t, v, casting="unsafe")
    np.testing.assert_array_equal(t.to_numpy(), np.clip(a + 1, 2, 4).astype(np.int16))


def test_divmod_and_methods_numpy_arrays_have():
    a = np.array([7, -7, 7, -7, 0], np.int32)
    b = np.array([3, 3, -3, -3, 0], np.int32)
    q, r = divmod(sk.Vector(a), sk.Vector(b))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(q.to_numpy(), a // b)
        np.testing.assert_array_equal(r.to_numpy(), a % b)
    v = sk.Vector(a)
    np.testing.assert_array_equal(v.clip(-1, 1).to_numpy(), a.clip(-1, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", sk.HostFallbackWarning)
        np.testing.assert_array_equal(np.clip(v, None, 1).to_numpy(), np.clip(a, None, 1))
        # a Python int past int8's range is clamped to it, as NumPy does (it wrapped: 44)
        a8 = a.astype(np.int8)
        np.testing.assert_array_equal(np.clip(sk.Vector(a8), -300, 300).to_numpy(), a8)
    assert v.tolist() == a.tolist() and v.item(1) == -7
    f = sk.Matrix(np.arange(6, dtype=np.int32).reshape(2, 3)).T.flatten()
    np.testing.assert_array_equal(f.to_numpy(), np.arange(6).reshape(2, 3).T.flatten())
    v.fill(4)
    np.testing.assert_array_equal(v.to_numpy(), np.full(5, 4))
    with pytest.warns(sk.HostFallbackWarning):
        assert v.std() == 0.0
    with pytest.warns(sk.HostFallbackWarning):       # keywords the device has not: NumPy's
        np.testing.assert_array_equal(v.sum(keepdims=True), [20])


def test_matrix_vector_products_squeeze_and_comparing_with_none():
    """``A @ x`` and ``np.dot`` of vectors ran on the host (with a warning); ``v == None``
    was Python's identity answer ``False``, not NumPy's array of False."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((5, 7)).astype(np.float32)
    x = rng.standard_normal(7).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sk.HostFallbackWarning)
        got = sk.Matrix(A) @ sk.Vector(x)
        assert got.dtype == np.float32 and got.shape == (5,)
        np.testing.assert_allclose(got.to_numpy(), A @ x, rtol=1e-5)
        dot = np.dot(sk.Vector(x), sk.Vector(x))
        assert dot.dtype == np.float32 and np.isclose(dot, x @ x, rtol=1e-5)
        row = sk.Matrix(A[:1]).squeeze()
        assert row.shape == (7,) and np.array_equal(row.to_numpy(), A[0])
    with pytest.raises(ValueError):
        sk.Matrix(A) @ sk.Vector(np.ones(5, np.float32))
    v = sk.Vector(x)
    np.testing.assert_array_equal(np.asarray(v == None), np.zeros(7, bool))   # noqa: E711
    b = np.broadcast_to(v, (2, 7))     # read-only, as NumPy's (writes changed v, repeatedly)
    for write in (lambda: b.__setitem__((0, 0), 9), lambda: b.__iadd__(1),
                  lambda: np.add(v, 1, out=b)):
        with pytest.raises(ValueError, match="read-only"):
            write()
    np.testing.assert_array_equal(v.to_numpy(), x)
    np.testing.assert_array_equal(np.asarray(v != "a"), np.ones(7, bool))


# -- the edge-value sweep (SKELPY_HEAVY=1) -----------------------------------------------------

def _edges(dt) -> np.ndarray:
    dt = np.dtype(dt)
    if dt == np.bool_:
        return np.array([False, True])
    if dt.kind == "f":
        return np.array([-np.inf, np.inf, np.nan, -0.0, 0.0, 1, -1, 2.5, -2.5, 3, -7, 0.5,
                         1e30, -1e-30, 7.0], dt)
    info = np.iinfo(dt)
    vals = [info.min, info.max, 0, 1, 2, 3, 7, info.max - 1, 5]
    if info.min < 0:
        vals += [-1, -2, -7, info.min + 1]
    return np.array(vals, dt)


def _same(got: np.ndarray, want: np.ndarray, approx: bool) -> bool:
    if want.dtype == np.float16:
        want = want.astype(np.float32)
        with np.errstate(over="ignore"):
            got = got.astype(np.float16).astype(np.float32)
        approx = True
    if got.dtype != want.dtype:
        return False
    if approx and want.dtype.kind == "f":
        return bool(np.allclose(got, want, rtol=2e-6 if want.dtype == np.float32 else 1e-14,
                                atol=0, equal_nan=True)) and \
            np.array_equal(np.isinf(got), np.isinf(want))
    same = (got == want) | ((got != got) & (want != want))
    if want.dtype.kind == "f":
        same &= (np.signbit(got) == np.signbit(want)) | np.isnan(want)
    return bool(same.all())


@pytest.mark.skipif(not HEAVY, reason="edge-value sweep: SKELPY_HEAVY=1")
@pytest.mark.parametrize("op", sorted(OPS))
def test_edge_values_of_every_dtype_pair_and_scalar(op):
    """Every pair of edge values (min, max, 0, -1, inf, NaN, -0.0...) of each dtype, and
    each dtype against Python and NumPy scalars on either side, bit for bit (floor
    division, modulo, shifts, wrap-around; transcendental ones within an ulp or two)."""
    f = OPS[op]
    approx = op in ("hypot", "arctan2", "**")
    scalars = [0, 1, -1, 3, 300, -300, 2**40, 2**64 - 1, True, 0.5, -0.0, float("nan"),
               float("inf"), 1e300, np.float32(2.5), np.int16(-3), np.uint64(7)]
    for dt in DTYPES:
        e = _edges(dt)
        a, b = (x.ravel() for x in np.meshgrid(e, e))
        cases = [((a, b), (sk.Vector(a), sk.Vector(b)))]
        cases += [((e, s), (sk.Vector(e), s)) for s in scalars]
        cases += [((s, e), (s, sk.Vector(e))) for s in scalars]
        for host, dev in cases:
            want, err = _numpy(f, *host)
            if err is not None:
                with pytest.raises(sk.SkelpyError):
                    f(*dev).to_numpy()
                continue
            got = f(*dev).to_numpy()
            assert _same(got, np.asarray(want), approx), (op, np.dtype(dt), host)
