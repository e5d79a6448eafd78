"""Map and Zip against NumPy: every dtype, awkward sizes, every launch parameter of a grid,
laziness, extra arguments, index spaces, captured constants, OpenCL C muscles, errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import skelpy as sk

ALL_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
              np.int64, np.uint64, np.float32, np.float64]
SIZES = [1, 7, 1023, 65537, 2**20 + 3]


def sample(rng, dtype, n):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -1000), min(info.max, 1000)
        return rng.integers(lo, hi, n, endpoint=True).astype(dtype)
    return (rng.standard_normal(n) * 100).astype(dtype)


def assert_same(got, want):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=2e-6 if want.dtype == np.float32 else 1e-13,
                                   atol=1e-30)
    else:
        np.testing.assert_array_equal(got, want)


def poly(x):
    return x * 3 + 1


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", SIZES)
def test_map_every_dtype_and_size(dtype, n, rng):
    x = sample(rng, dtype, n)
    with np.errstate(over="ignore"):
        want = poly(x)
    got = sk.Map(poly)(sk.Vector(x))
    assert_same(got.to_numpy(), want)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_zip_every_dtype(dtype, rng):
    n = 1023
    x, y = sample(rng, dtype, n), sample(rng, dtype, n)
    f = lambda a, b: (a if a > b else b)  # noqa: E731
    got = sk.Zip(f)(x, y)
    assert_same(got.to_numpy(), np.where(x > y, x, y))


GRID = list(itertools.product([1, 16, 64, 256], [1, 4], [0, 1], [1, 4]))


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float64], ids=lambda d: np.dtype(d).name)
def test_every_launch_parameter_of_a_grid(dtype, rng):
    square = sk.Map(lambda x: x * x)
    add = sk.Zip(lambda a, b: a + b)
    for n in (1, 7, 1023, 65537):
        x = sample(rng, dtype, n)
        y = sample(rng, dtype, n)
        with np.errstate(over="ignore"):
            want_sq, want_add = x * x, x + y
        vx, vy = sk.Vector(x), sk.Vector(y)
        for wg, c, blocked, vw in GRID:
            p = {"wg": wg, "coarsen": c, "blocked": blocked, "vw": vw}
            assert_same(square(vx, params=p).to_numpy(), want_sq)
            assert square.last_launch.params == p
            assert_same(add(vx, vy, params=p).to_numpy(), want_add)


def test_last_launch_reports_parameters_and_time():
    m = sk.Map(lambda x: x + 1)
    m(np.zeros(1000, np.float32), params={"wg": 32, "coarsen": 2})
    ll = m.last_launch
    assert ll.params["wg"] == 32 and ll.params["coarsen"] == 2
    assert ll.local_size == (32,)
    assert ll.global_size[0] % 32 == 0 and ll.global_size[0] * 2 * ll.params["vw"] >= 1000
    # 16-byte loads by default for float32 on a GPU; scalar work-items on a CPU, whose
    # OpenCL packs them into SIMD lanes itself (the muscle calls no library math)
    assert ll.params["vw"] == (4 if sk.current_device().kind == "gpu" else 1)
    assert ll.kernel_time > 0


def test_matrix_map_and_zip(rng):
    a = rng.standard_normal((37, 53)).astype(np.float32)
    b = rng.standard_normal((37, 53)).astype(np.float32)
    out = sk.Zip(lambda x, y: x * 2 - y)(sk.Matrix(a), sk.Matrix(b))
    assert isinstance(out, sk.Matrix) and out.shape == (37, 53)
    assert_same(np.asarray(out), a * 2 - b)


def test_laziness_three_calls_upload_once_download_once(stats, rng):
    x = rng.standard_normal(10000).astype(np.float32)
    v = sk.Vector(x)
    f = sk.Map(lambda t: t * 2)
    g = sk.Map(lambda t: t + 1)
    h = sk.Zip(lambda a, b: a * b)
    r = h(g(f(v)), v)
    assert stats.downloads == 0
    got = r.to_numpy()
    np.asarray(r)
    assert stats.uploads == 1
    assert stats.downloads == 1
    assert_same(got, (x * 2 + 1) * x)


def test_host_modification_is_uploaded_again(stats):
    v = sk.Vector(np.arange(5, dtype=np.int32))
    inc = sk.Map(lambda x: x + 1)
    assert inc(v).to_numpy().tolist() == [1, 2, 3, 4, 5]
    v[0] = 10
    assert inc(v).to_numpy().tolist() == [11, 2, 3, 4, 5]
    assert stats.uploads == 2


def test_saxpy_weak_scalar_keeps_float32(rng):
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32)
    saxpy = sk.Zip(lambda x, y, a: a * x + y)
    out = saxpy(x, y, 2.0)
    assert out.dtype == np.float32
    assert_same(out.to_numpy(), 2.0 * x + y)


def test_strong_numpy_scalar_promotes(rng):
    x = rng.standard_normal(100).astype(np.float32)
    out = sk.Map(lambda x, a: x * a)(x, np.float64(3))
    assert out.dtype == np.float64
    assert_same(out.to_numpy(), x * np.float64(3))


def test_int_true_division_gives_float64():
    x = np.arange(-5, 6, dtype=np.int32)
    out = sk.Map(lambda v: v / 2)(x)
    assert_same(out.to_numpy(), x / 2)


def test_out_dtype_override():
    x = np.arange(10, dtype=np.int32)
    out = sk.Map(lambda v: v * 2.5, out_dtype=np.float32)(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.to_numpy(), (x * 2.5).astype(np.float32))


def test_extra_container_read_by_index(rng):
    n = 1001
    v = rng.standard_normal(n).astype(np.float32)
    rev = sk.Map(lambda i, v: v[len(v) - 1 - i])(sk.IndexVector(n), sk.Vector(v))
    assert_same(rev.to_numpy(), v[::-1].copy())
    m = rng.standard_normal((13, 7)).astype(np.float32)
    rowsum = sk.Map(lambda i, m: sum_row(m, i))(sk.IndexVector(13), m)
    np.testing.assert_allclose(rowsum.to_numpy(), m.sum(axis=1), rtol=1e-5)


def sum_row(m, i):
    s = 0.0
    for j in range(m.shape[1]):
        s += m[i, j]
    return s


def test_index_vector():
    out = sk.Map(lambda i: i * 2 + 1)(sk.IndexVector(1023))
    assert_same(out.to_numpy(), np.arange(1023) * 2 + 1)


def test_index_matrix_two_forms():
    rows, cols = 17, 29
    r, c = np.indices((rows, cols))
    a = sk.Map(lambda i, j: i * 100 + j)(sk.IndexMatrix((rows, cols)))
    assert isinstance(a, sk.Matrix)
    assert_same(a.to_numpy(), r * 100 + c)
    b = sk.Map(lambda p: p[0] * 100 + p[1])(sk.IndexMatrix((rows, cols)))
    assert_same(b.to_numpy(), r * 100 + c)


SCALE = 2.5
OFFSETS = (1, 2, 3, 4)
TABLE = np.array([0.5, 1.5, 2.5, 3.5], dtype=np.float32)


def test_captured_constants():
    k = 3
    x = np.arange(100, dtype=np.int32)
    out = sk.Map(lambda v: v * k + OFFSETS[v % 4])(x)
    assert_same(out.to_numpy(), x * k + np.array(OFFSETS, dtype=np.int32)[x % 4])
    out = sk.Map(lambda v: TABLE[v % 4] * SCALE)(x)
    assert_same(out.to_numpy(), TABLE[x % 4] * SCALE)


def test_opencl_c_muscle():
    x = np.arange(1000, dtype=np.float32)
    sq = sk.Map("float func(float x) { return x * x; }")
    assert_same(sq(x).to_numpy(), x * x)
    mult = sk.Zip("int func(int x, int y){ return x*y; }")
    a = np.arange(50, dtype=np.int32)
    assert_same(mult(a, a).to_numpy(), a * a)


def test_mandelbrot_like_loop():
    def mandel(i, j):
        x0 = np.float32(j) * np.float32(3.0 / 64) - np.float32(2.0)
        y0 = np.float32(i) * np.float32(2.0 / 32) - np.float32(1.0)
        x = np.float32(0)
        y = np.float32(0)
        it = 0
        while x * x + y * y <= 4 and it < 50:
            x, y = x * x - y * y + x0, 2 * x * y + y0
            it += 1
        return it

    got = sk.Map(mandel)(sk.IndexMatrix((32, 64))).to_numpy()
    want = np.array([[mandel(i, j) for j in range(64)] for i in range(32)])
    assert got.shape == want.shape
    # float32 rounding (and FMA contraction) may move a point on the boundary by an iteration
    assert np.mean(got == want) > 0.99


# -- errors -----------------------------------------------------------------------------------


def test_shape_mismatch_names_the_muscle():
    z = sk.Zip(lambda a, b: a + b)
    with pytest.raises(sk.ShapeError) as e:
        z(np.zeros(5, np.float32), np.zeros(6, np.float32))
    assert "test_map_zip.py" in str(e.value)


def test_wrong_number_of_arguments():
    m = sk.Map(lambda x, a: x * a)
    with pytest.raises(sk.SkelpyError) as e:
        m(np.zeros(5, np.float32))
    assert "parameter" in str(e.value)
    with pytest.raises(sk.SkelpyError):
        m(np.zeros(5, np.float32), 1.0, 2.0)


def test_scalar_as_input_is_an_error():
    with pytest.raises(sk.DTypeError):
        sk.Map(lambda x: x)(3.0)


def test_unsupported_dtype():
    with pytest.raises(sk.DTypeError):
        sk.Map(lambda x: x)(np.zeros(3, np.complex64))
    with pytest.raises(sk.DTypeError):
        sk.Vector(np.array(["a", "b"]))


def test_unsupported_construct_names_line():
    def bad(x):
        return [x for _ in range(3)][0]

    with pytest.raises(sk.TranslationError) as e:
        sk.Map(bad)(np.zeros(3, np.float32))
    msg = str(e.value)
    assert "bad" in msg and "test_map_zip.py" in msg


def test_bad_params():
    m = sk.Map(lambda x: x)
    x = np.zeros(10, np.float32)
    with pytest.raises(sk.ParameterError):
        m(x, params={"nonsense": 1})
    with pytest.raises(sk.ParameterError):
        m(x, params={"wg": 10**9})
    with pytest.raises(sk.ParameterError):
        m(x, params={"vw": 3})


def test_build_error_carries_source_and_log():
    bad = sk.Map("float func(float x) { return x * ; }")
    with pytest.raises(sk.BuildError) as e:
        bad(np.zeros(3, np.float32))
    msg = str(e.value)
    assert "build log" in msg and "    1 | " in msg


def test_missing_fp64_is_a_clear_error(monkeypatch):
    from skelpy import runtime

    dev = runtime.current().device
    monkeypatch.setattr(type(dev), "has_fp64", property(lambda self: False), raising=False)
    dev.__dict__.pop("has_fp64", None)
    with pytest.raises(sk.DeviceError) as e:
        sk.Map(lambda x: x * 2)(np.zeros(3, np.float64))
    assert "fp64" in str(e.value) or "double" in str(e.value)


def test_failed_call_leaves_inputs_untouched():
    x = np.arange(10, dtype=np.float32)
    keep = x.copy()
    v = sk.Vector(x)
    z = sk.Zip(lambda a, b: a + b)
    with pytest.raises(sk.ShapeError):
        z(v, np.zeros(3, np.float32))
    with pytest.raises(sk.ParameterError):
        z(v, v, params={"wg": -1})
    np.testing.assert_array_equal(x, keep)
    assert_same(z(v, v).to_numpy(), keep * 2)


def test_unknown_device():
    with pytest.raises(sk.DeviceError):
        sk.use("no-such-device-xyz")


def test_devices_listed():
    ds = sk.devices()
    assert ds and all(isinstance(d, sk.Device) for d in ds)
    assert sk.current_device() in ds


def test_empty_input():
    out = sk.Map(lambda x: x + 1)(np.zeros(0, np.float32))
    assert out.shape == (0,) and out.to_numpy().size == 0


def test_math_functions_float32(rng):
    x = np.abs(rng.standard_normal(4099).astype(np.float32)) + 0.1
    out = sk.Map(lambda v: math.sqrt(v) + np.exp(-v) * np.sin(v))(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.to_numpy(), np.sqrt(x) + np.exp(-x) * np.sin(x), rtol=1e-5)
