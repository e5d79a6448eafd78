"""Issue 11 item 5 and issue 10 item 12: no raw pyopencl/Python exception leaks out of a
skeleton, and errors that involve a muscle name its file and line.

Before: an oversized output raised pyopencl's ``LogicError: INVALID_BUFFER_SIZE``,
``out_dtype="banana"`` a TypeError, a kernel that could not be created an AttributeError,
a wrong call signature a bare TypeError; BuildErrors, input-dtype errors and constructor
errors for ``border``, ``shape`` and ``out_dtype`` did not name the muscle's line."""

from __future__ import annotations

import re

import numpy as np
import pytest

import skelpy as sk
from skelpy import runtime
from skelpy.errors import CallError

FILE = re.escape(__file__.rsplit("/", 1)[-1])


def _names_this_file(exc: BaseException) -> None:
    assert re.search(FILE + r":\d+", str(exc)), str(exc)


def test_oversized_map_output_is_refused_before_allocating(stats):
    dev = runtime.current().device
    n = dev.max_alloc_size // 4 + 1
    f = sk.Map(lambda i: i * 0.5, out_dtype=np.float32)
    with pytest.raises(sk.ShapeError) as info:
        f(sk.IndexVector(n))
    msg = str(info.value)
    assert f"{n * 4} bytes" in msg and f"{dev.max_alloc_size} bytes" in msg
    _names_this_file(info.value)
    assert stats.launches == 0


def test_the_issue_reproducer_two_billion_floats():
    if runtime.current().device.max_alloc_size >= 8_000_000_000:
        pytest.skip("this device allocates 8 GB in one buffer (the test above covers its limit)")
    with pytest.raises(sk.ShapeError, match="8000000000 bytes"):
        sk.Map(lambda i: i * 0.5, out_dtype=np.float32)(sk.IndexVector(2_000_000_000))


@pytest.fixture
def small_device(monkeypatch):
    """Pretend the device allocates at most 1 MiB in one buffer."""
    dev = runtime.current().device
    monkeypatch.setitem(dev.__dict__, "max_alloc_size", 1 << 20)
    return dev


def test_oversized_stencil_output_is_refused_before_allocating(small_device, stats):
    a = np.zeros((300, 300), np.float32)                    # 360 KB in, 720 KB out: fits
    st = sk.Stencil(lambda nb: nb[0, 0] + nb[0, 1], out_dtype=np.float64)
    if not runtime.current().device.has_fp64:
        st = sk.Stencil(lambda nb: nb[0, 0] + nb[0, 1], out_dtype=np.int64)
    st(a)
    big = np.zeros((300, 500), np.float32)                  # 600 KB in, 1.2 MB out
    launches = stats.launches
    with pytest.raises(sk.ShapeError) as info:
        st(big)
    assert "1200000 bytes" in str(info.value) and "1048576 bytes" in str(info.value)
    _names_this_file(info.value)
    assert stats.launches == launches
    with pytest.raises(sk.ShapeError):
        (st >> st)(big)


def test_oversized_input_names_the_muscle(small_device):
    table = np.zeros(300_000, np.float32)                    # 1.2 MB to upload
    with pytest.raises(sk.ShapeError) as info:
        sk.Map(lambda v, t: v + t[0])(np.zeros(10, np.float32), table)
    assert "1200000 bytes" in str(info.value) and "output" not in str(info.value)
    _names_this_file(info.value)


def test_runtime_allocation_over_the_maximum_is_a_shape_error():
    rt = runtime.current()
    with pytest.raises(sk.ShapeError, match="CL_DEVICE_MAX_MEM_ALLOC_SIZE"):
        rt.allocate(rt.device.max_alloc_size + 1)


@pytest.mark.parametrize("make", [lambda: sk.Map(lambda v: v + 1),
                                  lambda: sk.Zip(lambda v, w: v + w)])
def test_unknown_out_dtype_at_the_call_is_a_dtype_error(make):
    f = make()
    args = [np.ones(4, np.float32)] * f.n_inputs
    with pytest.raises(sk.DTypeError) as info:
        f(*args, out_dtype="banana")
    assert "banana" in str(info.value)
    _names_this_file(info.value)


@pytest.mark.parametrize("make", [
    lambda: sk.Map(lambda v: v + 1, out_dtype="banana"),
    lambda: sk.Zip(lambda v, w: v + w, out_dtype=np.complex64),
    lambda: sk.Stencil(lambda nb: nb[0, 0], out_dtype="banana"),
])
def test_unknown_out_dtype_at_construction_names_the_muscle(make):
    with pytest.raises(sk.DTypeError) as info:
        make()
    _names_this_file(info.value)


@pytest.mark.parametrize("kwargs, cls", [
    ({"border": "banana"}, sk.ParameterError), ({"border": ["nearest"]}, sk.ParameterError),
    ({"shape": -1}, sk.ShapeError), ({"shape": "big"}, sk.ShapeError),
    ({"cval": "x", "border": "constant"}, sk.DTypeError)])
def test_stencil_constructor_errors_name_the_muscle(kwargs, cls):
    with pytest.raises(cls) as info:
        sk.Stencil(lambda nb: nb[0, 0], **kwargs)
    _names_this_file(info.value)


def test_unsupported_input_and_extra_dtypes_name_the_muscle():
    c = np.ones(4, np.complex64)
    with pytest.raises(sk.DTypeError) as info:
        sk.Map(lambda v: v)(c)
    _names_this_file(info.value)
    with pytest.raises(sk.DTypeError) as info:
        sk.Map(lambda v, w: v + w[0])(np.ones(4, np.float32), c)
    _names_this_file(info.value)
    with pytest.raises(sk.DTypeError) as info:
        sk.Stencil(lambda nb: nb[0, 0])(np.ones((2, 2), np.complex128))
    _names_this_file(info.value)
    with pytest.raises(sk.DTypeError) as info:
        sk.Map(lambda v, s: v * s)(np.ones(4, np.float32), "two")
    _names_this_file(info.value)


def test_a_build_error_names_the_muscle():
    f = sk.Map("float func(float x) { return x + not_declared; }")
    with pytest.raises(sk.BuildError) as info:
        f(np.ones(4, np.float32))
    assert "not_declared" in str(info.value)         # the numbered source is in the message
    _names_this_file(info.value)


def test_a_kernel_that_cannot_be_created_is_a_build_error():
    # the muscle's trailing #define renames skelpy's kernel, so the built program lacks it
    src = "float func(float x) { return x; }\n#define skelpy_elementwise skelpy_other\n"
    with pytest.raises(sk.BuildError) as info:
        sk.Map(src)(np.ones(4, np.float32))
    assert "skelpy_elementwise" in str(info.value)
    _names_this_file(info.value)
    rt = runtime.current()
    prg = rt.build("__kernel void k(__global float* x) { x[0] = 1.0f; }")
    with pytest.raises(sk.BuildError, match="missing"):
        rt.kernel(prg, "missing")


@pytest.mark.parametrize("call", [
    lambda: sk.Map(lambda v: v)(np.ones(3, np.float32), prams={}),
    lambda: sk.Zip(lambda v, w: v)(np.ones(3, np.float32), np.ones(3), iterations=2),
    lambda: sk.Stencil(lambda nb: nb[0, 0])(),
    lambda: sk.Stencil(lambda nb: nb[0, 0])(np.ones((2, 2)), param={}),
    lambda: (sk.Stencil(lambda nb: nb[0, 0]) >> sk.Stencil(lambda nb: nb[0, 0]))(
        np.ones((2, 2)), out_dtype=np.float32),
    lambda: sk.Map(lambda v: v).source(np.ones(3, np.float32), bogus=1),
])
def test_a_wrong_call_signature_is_a_call_error(call):
    with pytest.raises(CallError) as info:
        call()
    assert isinstance(info.value, sk.SkelpyError) and isinstance(info.value, TypeError)
    _names_this_file(info.value)


def test_a_type_error_inside_a_call_is_not_mistaken_for_a_signature_error():
    # the muscle's own problem (a string extra) stays what it is, not a CallError
    with pytest.raises(sk.DTypeError) as info:
        sk.Map(lambda v, s: v)(np.ones(3, np.float32), "s")
    assert not isinstance(info.value, CallError)



def test_allpairs_output_over_the_maximum_is_refused_before_allocating(stats):
    # the issue's 60000 x 60000 float32: 14.4 GB of output from two small inputs
    a = np.ones((60000, 2), np.float32)
    ap = sk.AllPairs(zip=lambda x, y: x * y, reduce=lambda x, y: x + y)
    launches = stats.launches
    with pytest.raises(sk.ShapeError) as info:
        ap(a, a)
    assert f"{60000 * 60000 * 4} bytes" in str(info.value)
    assert str(runtime.current().device.max_alloc_size) in str(info.value)
    _names_this_file(info.value)
    assert stats.launches == launches


def test_scan_output_over_the_maximum_is_refused(small_device):
    # int8 in, int64 accumulator out: 8x the input's bytes
    flags = np.ones(200_000, np.int8)                        # 200 KB in, 1.6 MB out
    with pytest.raises(sk.ShapeError) as info:
        sk.Scan(lambda a, b: a + b, 0)(flags)
    assert "1600000 bytes" in str(info.value)
    _names_this_file(info.value)


@pytest.mark.parametrize("call", [
    lambda: sk.Reduce(lambda a, b: a + b, 0)(np.ones(3), np.ones(3)),
    lambda: sk.Reduce(lambda a, b: a + b, 0)(np.ones(3), axis=0),
    lambda: sk.Scan(lambda a, b: a + b, 0)(np.ones(3), np.ones(3)),
    lambda: sk.Scan(lambda a, b: a + b, 0)(),
    lambda: sk.MapReduce(lambda a: a, lambda a, b: a + b, 0)(np.ones(3), parms={}),
    lambda: sk.AllPairs(lambda a, b: a[0])(np.ones((2, 2))),
    lambda: sk.Reduce(lambda a, b: a + b, 0).source(np.ones(3), np.ones(3)),
])
def test_fold_signatures_are_call_errors(call):
    with pytest.raises(CallError) as info:
        call()
    _names_this_file(info.value)


def test_fold_constructor_dtype_errors_name_the_muscle():
    for make in (lambda: sk.Reduce(lambda a, b: a + b, 0, dtype="banana"),
                 lambda: sk.Scan(lambda a, b: a + b, 0, dtype=np.int8, out_dtype=np.int16),
                 lambda: sk.AllPairs(lambda a, b: a[0], out_dtype="banana")):
        with pytest.raises(sk.DTypeError) as info:
            make()
        _names_this_file(info.value)
