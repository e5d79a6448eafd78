"""The host fold of a device group's partial values (skelpy/distribution/host_fold.py): which
muscles it takes, its order (against hand-written folds and NumPy), and that it gives the bits
a device's fold of the same values gives (what a group's Reduce did before it existed)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skelpy as sk
from skelpy.distribution.host_fold import HostFold
from skelpy.dtypes import storage_dtype


def add(a, b):
    return a + b


def mul(a, b):
    return a * b


def host(fn, values, dtype=None, identity=0):
    """The host fold a Reduce(fn, identity, dtype=dtype) over ``values`` would use."""
    acc = np.dtype(dtype or values.dtype)
    return sk.Reduce(fn, identity, dtype=dtype).host_fold(acc)


def as_bytes(values, dtype) -> np.ndarray:
    return np.ascontiguousarray(values, dtype).view(np.uint8)


def folded(hf: HostFold, values):
    return hf.fold(as_bytes(values, hf.dtype), len(values)).view(hf.dtype)[0]


def test_only_sums_and_products_of_exact_types_fold_on_the_host():
    assert host(add, np.zeros(2, np.float32)).op is np.add
    assert host(mul, np.zeros(2, np.int8), dtype=np.int8).op is np.multiply
    assert host(lambda a, b: b + a, np.zeros(2, np.float64)) is not None
    assert host(lambda a, b: max(a, b), np.zeros(2, np.float32)) is None     # NaN rules
    assert host(lambda a, b: a + 2 * b, np.zeros(2, np.int32)) is None
    assert sk.Reduce("int f(int a, int b) { return a + b; }", 0).host_fold(
        np.dtype(np.int32)) is None                                         # OpenCL C
    assert HostFold.of("add", np.float16, np.float16, 0) is None            # double rounding
    assert HostFold.of(None, np.int32, np.int32, 0) is None
    scan = sk.Scan(add, 0)
    assert scan.host_fold(np.dtype(np.int64)).op is np.add


def test_float_fold_is_the_devices_tree_order():
    a, b, c, d, e = (np.float32(x) for x in (1e8, 1.0, -1e8, 3.0, 0.5))
    hf = host(add, np.zeros(1, np.float32))
    vals = [a, b, c, d, e]
    # pairs of neighbours, then pairs of pairs; an odd last one is carried up
    assert folded(hf, vals) == ((a + b) + (c + d)) + e
    assert folded(hf, vals[:3]) == (a + b) + c
    assert folded(hf, vals[:1]) == a
    assert folded(hf, []) == 0
    assert np.signbit(folded(hf, [np.float32(-0.0)] * 2)) == False  # noqa: E712 - 0 + -0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-2**31, 2**31 - 1), max_size=9),
       st.sampled_from([np.int8, np.uint16, np.int32, np.uint64]))
def test_integer_folds_wrap_as_numpy_does(values, dtype):
    v = np.array(values, np.int64).astype(dtype)
    hf = host(add, v, dtype=dtype)
    assert folded(hf, v) == np.add.reduce(v, dtype=dtype)
    hm = host(mul, v, dtype=dtype, identity=1)
    assert folded(hm, v) == np.multiply.reduce(v, dtype=dtype)
    carries = hf.exclusive(as_bytes(v, dtype), len(v)).view(dtype)
    ref = np.zeros(len(v) + 1, dtype)
    ref[1:] = np.cumsum(v, dtype=dtype)
    np.testing.assert_array_equal(carries, ref[:len(v)])


def test_exclusive_float_scan_runs_left_to_right():
    v = np.random.default_rng(5).standard_normal(7).astype(np.float32)
    hf = host(add, v)
    carries = hf.exclusive(as_bytes(v, np.float32), len(v)).view(np.float32)
    assert carries[0] == 0
    np.testing.assert_array_equal(carries[1:], np.cumsum(v)[:-1])     # a float32 cumsum
    hb = host(add, np.zeros(1, bool), dtype=bool)
    got = hb.exclusive(as_bytes([False, True, False], bool), 3).view(bool)
    np.testing.assert_array_equal(got, [False, False, True])


@pytest.mark.parametrize("fn, values, dtype, identity", [
    (add, np.float32([1e8, 1.5, -1e8]), None, 0),
    (add, np.int32([2**31 - 1, 5, -3]), np.int32, 0),
    (mul, np.uint8([7, 200, 3]), np.uint8, 1),
    (add, np.array([True, False, True]), bool, 0),
])
def test_host_fold_gives_the_bits_of_the_devices_fold(fn, values, dtype, identity):
    """A group's Reduce folded its P partials with this Reduce on a device before; for up to
    three values every fold order is the same, so the bits must be equal."""
    red = sk.Reduce(fn, identity, dtype=dtype)
    on_device = red(sk.Vector(values))
    acc = np.dtype(on_device.dtype)
    hf = red.host_fold(acc)
    got = hf.fold(as_bytes(values.astype(acc), storage_dtype(acc)), len(values))
    assert got.tobytes() == np.asarray(on_device, acc).astype(storage_dtype(acc)).tobytes()
