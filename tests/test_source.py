"""``skeleton.source(*args)``: the OpenCL C program a call with those arguments builds, with
the launch macros of the point that call would use — complete enough to build and run on its
own (checked here by building it with plain pyopencl and running its kernel)."""

from __future__ import annotations

import re

import numpy as np
import pyopencl as cl
import pytest
import scipy.ndimage as ndi

import skelpy as sk
from skelpy import runtime
from skelpy.errors import CallError


def _defines(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        m = re.match(r"#define (SKP_[A-Z]+) (\S+)$", line)
        if m and m.group(1) not in out:
            out[m.group(1)] = m.group(2)
    return out


def _standalone(text: str, name: str) -> cl.Kernel:
    """Build the text with plain pyopencl (no options): it must be the whole program."""
    rt = runtime.current()
    return cl.Kernel(cl.Program(rt.context, text).build(), name)


def test_map_source_is_the_program_its_call_runs(stats):
    x = np.linspace(-2, 2, 1001, dtype=np.float32)
    f = sk.Map(lambda v: v * v - 0.5)
    text = f.source(x)
    assert stats.launches == 0                      # nothing launched, nothing built for it
    out = f(x)
    used = f.last_launch.params
    d = _defines(text)
    assert (d["SKP_COARSEN"], d["SKP_BLOCKED"], d["SKP_VW"]) == \
        (str(used["coarsen"]), str(used["blocked"]), str(used["vw"]))
    # run the text by hand with the call's launch sizes: the same result as the call
    rt = runtime.current()
    k = _standalone(text, "skelpy_elementwise")
    dst = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, x.nbytes)
    src = cl.Buffer(rt.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
    k(rt.queue, f.last_launch.global_size, f.last_launch.local_size, dst, np.int64(x.size), src)
    by_hand = np.empty_like(x)
    cl.enqueue_copy(rt.queue, by_hand, dst)
    np.testing.assert_array_equal(by_hand, out.to_numpy())
    np.testing.assert_allclose(by_hand, x * x - np.float32(0.5), rtol=1e-6)


def test_forced_parameters_show_in_the_source():
    f = sk.Zip(lambda a, b, s: a * s + b)
    x, y = np.ones(64, np.float32), np.arange(64, dtype=np.float32)
    text = f.source(x, y, 2.0, params={"coarsen": 4, "vw": 2, "blocked": 1})
    d = _defines(text)
    assert (d["SKP_COARSEN"], d["SKP_VW"], d["SKP_BLOCKED"]) == ("4", "2", "1")
    assert "skp_muscle" in text and "__kernel void skelpy_elementwise" in text
    with pytest.raises(sk.ParameterError, match="MAX_COARSEN"):
        f.source(x, y, 2.0, params={"coarsen": 10**6})


def test_source_follows_the_call_signature():
    f = sk.Map(lambda v: v + 1)
    ints = f.source(np.arange(5, dtype=np.int32))
    floats = f.source(np.arange(5, dtype=np.float32))
    assert "#define SKP_OUT_ST int" in ints and "#define SKP_OUT_ST float" in floats
    assert "#define SKP_OUT_ST double" in f.source(np.arange(5, dtype=np.float32),
                                                   out_dtype=np.float64) or \
        not runtime.current().device.has_fp64
    idx = sk.Map(lambda r, c: r * 10 + c).source(sk.IndexMatrix((3, 4)))
    assert "idx_cols" in idx
    with pytest.raises(sk.ShapeError):
        sk.Zip(lambda a, b: a + b).source(np.ones(3))
    with pytest.raises(CallError):
        f.source(np.ones(3), bogus=True)


def test_stencil_source_builds_and_names_the_launch_point():
    a = np.random.default_rng(0).random((40, 33)).astype(np.float32)
    st = sk.Stencil(lambda nb: nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0],
                    border="reflect")
    text = st.source(a)
    out = st(a).to_numpy()
    used = st.last_launch.params
    d = _defines(text)
    for k in ("local", "cr", "cc", "vec"):
        assert d[f"SKP_{k.upper()}"] == str(int(used[k]))
    assert d["SKP_MODE"] == "3" and d["SKP_N"] == "1"
    _standalone(text, "skelpy_stencil")
    w = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], np.float32)
    np.testing.assert_allclose(out, ndi.correlate(a, w, mode="reflect"), rtol=1e-5, atol=1e-5)
    forced = st.source(a, params={"local": 1, "cr": 2})
    assert _defines(forced)["SKP_LOCAL"] == "1" and _defines(forced)["SKP_CR"] == "2"


def test_stencil_source_with_extras_and_out_dtype():
    a = np.ones((8, 9), np.float32)
    st = sk.Stencil(lambda nb, other, k: nb[0, 0] + other[0, 1] * k)
    text = st.source(a, np.zeros((8, 9), np.int32), 3, out_dtype=np.float32)
    assert "SKP_EXTRA_DECL , __global const int* restrict e0, const int e1\n" in text
    _standalone(text, "skelpy_stencil")


def test_sequence_source_has_every_stage_in_order():
    blur = sk.Stencil(lambda nb: (nb[0, -1] + nb[0, 0] + nb[0, 1]) / 3)
    edge = sk.Stencil(lambda nb: nb[1, 0] > nb[-1, 0])
    text = (blur >> edge).source(np.ones((10, 10), np.float32))
    first, second = text.index("/* stage 0"), text.index("/* stage 1")
    assert first < second
    # stage 1 reads stage 0's float32 output and writes bool (uchar)
    assert "#define SKP_IN_ST float" in text[second:]
    assert "#define SKP_OUT_ST uchar" in text[second:]


def test_reduce_and_mapreduce_sources_name_their_points():
    x = np.arange(1000, dtype=np.float32)
    red = sk.Reduce(lambda a, b: a + b, 0)
    text = red.source(x)
    assert red(x) == np.float32(x.sum())
    d = _defines(text)
    assert (d["SKP_WG"], d["SKP_ITEMS"]) == (str(red.last_launch.params["wg"]),
                                             str(red.last_launch.params["items"]))
    _standalone(text, "skelpy_reduce")
    _standalone(text, "skelpy_reduce_final")
    rows = sk.Reduce(lambda a, b: max(a, b), -np.inf, axis=1)
    assert "#define SKP_AXIS_ONLY 1" in rows.source(np.ones((3, 4), np.float32))
    dot = sk.MapReduce(lambda a, b: a * b, lambda a, b: a + b, 0)
    text = dot.source(x, x, params={"wg": 32, "items": 4})
    assert _defines(text)["SKP_WG"] == "32" and "skp_map" in text
    _standalone(text, "skelpy_reduce")


def test_scan_and_allpairs_sources():
    scan = sk.Scan(lambda a, b: a + b, 0)
    text = scan.source(np.ones(100, np.int32), params={"wg": 16, "items": 2})
    assert _defines(text)["SKP_WG"] == "16"
    _standalone(text, "skelpy_scan_tiles")
    mm = sk.AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b)
    a = np.ones((8, 5), np.float32)
    text = mm.source(a, a)
    mm(a, a)
    used = mm.last_launch.params
    d = _defines(text)
    assert all(d[f"SKP_{k.upper()}"] == str(used[k]) for k in ("tm", "tn", "tk", "rm", "rn"))
    _standalone(text, "skelpy_allpairs")
    gen = sk.AllPairs(lambda p, q: p[0] - q[0])
    _standalone(gen.source(a, a), "skelpy_allpairs_generic")
    with pytest.raises(CallError):
        scan.source(np.ones(3), np.ones(3))
