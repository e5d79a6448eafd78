"""OpenCL C muscles are never converted behind the user's back (issue 10, item 9): a parameter
declared with another type than the data it receives is a DTypeError naming both."""

from __future__ import annotations

import numpy as np
import pytest

import skelpy as sk

SQUARE = "float func(float x) { return x * x; }"


def test_float64_data_to_a_float_parameter_is_refused():
    x = np.linspace(0, 1, 7)                         # float64
    with pytest.raises(sk.DTypeError, match=r"'float x' \(float32\) but receives float64"):
        sk.Map(SQUARE)(x)
    got = sk.Map(SQUARE)(x.astype(np.float32)).to_numpy()      # the explicit conversion
    np.testing.assert_array_equal(got, x.astype(np.float32) ** 2)
    got = sk.Map("double func(double x) { return x * x; }")(x).to_numpy()
    np.testing.assert_array_equal(got, x * x)


def test_each_parameter_and_each_skeleton():
    i32 = np.arange(10, dtype=np.int32)
    with pytest.raises(sk.DTypeError, match="'y'.*int32.*receives int64"):
        sk.Zip("int func(int x, int y) { return x * y; }")(i32, i32.astype(np.int64))
    with pytest.raises(sk.DTypeError, match="int32"):
        sk.Reduce("float func(float a, float b) { return a + b; }", 0)(i32)
    with pytest.raises(sk.DTypeError, match="receives float64"):
        sk.AllPairs(zip="float func(float a, float b) { return a * b; }",
                    reduce=lambda a, b: a + b)(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(sk.DTypeError, match=r"'float\* nb' \(float32\) but receives float64"):
        sk.Stencil("float func(float* nb) { return SKELPY_GET2(nb, 0, 1); }")(np.ones((4, 4)))


def test_extras_arrays_and_numpy_scalars():
    x = np.arange(6, dtype=np.float32)
    src = "float func(float x, __global const float* t, float k) { return x * k + t[1]; }"
    with pytest.raises(sk.DTypeError, match="'__global const float\\* t'.*float64 elements"):
        sk.Map(src)(x, np.ones(3), np.float32(2))
    with pytest.raises(sk.DTypeError, match="'float k'.*receives float64 values"):
        sk.Map(src)(x, np.ones(3, np.float32), np.float64(2))
    got = sk.Map(src)(x, np.array([0, 5, 0], np.float32), np.float32(2)).to_numpy()
    np.testing.assert_array_equal(got, x * 2 + 5)


def test_python_numbers_go_to_parameters_of_their_kind_or_wider():
    x = np.arange(6, dtype=np.int32)
    f = sk.Map("float func(int x, float a, int k) { return x * a + k; }")
    np.testing.assert_allclose(f(x, 2, 3).to_numpy(), x * 2.0 + 3)          # int -> float ok
    np.testing.assert_allclose(f(x, 0.5, True).to_numpy(), x * 0.5 + 1)     # bool -> int ok
    with pytest.raises(sk.DTypeError, match="'int k'.*a Python float"):
        f(x, 0.5, 1.5)                                                      # float -> int: no
