"""Issue 11 item 4 (and issue 10 item 12): forced launch parameters and ``iterations`` are
bounded, and a refused forced point names the limit it breaks.

Before: ``params={"coarsen": 10**9}`` hung building an unrolled loop (3.6 s at 128, 209 s at
1024), stencil ``cr``/``cc`` likewise, ``iterations=2**64`` was accepted, and an illegal point
only said "not legal on this device/kernel"."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

import skelpy as sk
from skelpy import runtime
from skelpy.skeletons.limits import MAX_CELLS, MAX_COARSEN, MAX_ITERATIONS

HERE = re.escape(__file__.rsplit("/", 1)[-1])


def _quick(fn):
    """Run ``fn`` and return its exception; a bound must be checked before any build."""
    t0 = time.perf_counter()
    with pytest.raises(sk.ParameterError) as info:
        fn()
    assert time.perf_counter() - t0 < 5.0
    return str(info.value)


@pytest.mark.parametrize("coarsen", [MAX_COARSEN + 1, 10**9])
def test_map_coarsening_over_the_maximum_is_refused_naming_it(coarsen):
    x = np.arange(100, dtype=np.float32)
    msg = _quick(lambda: sk.Map(lambda v: v + 1)(x, params={"coarsen": coarsen}))
    assert f"coarsen={coarsen}" in msg and "MAX_COARSEN" in msg and str(MAX_COARSEN) in msg
    assert re.search(HERE + r":\d+", msg)            # the muscle's file and line


def test_map_coarsening_at_the_maximum_runs():
    x = np.arange(1000, dtype=np.float32)
    f = sk.Map(lambda v: v * 2)
    np.testing.assert_array_equal(f(x, params={"coarsen": MAX_COARSEN}).to_numpy(), x * 2)
    assert f.last_launch.params["coarsen"] == MAX_COARSEN


def test_map_work_group_over_the_kernel_maximum_names_it():
    dev = runtime.current().device
    too_big = dev.max_work_group_size * 2
    msg = _quick(lambda: sk.Map(lambda v: v + 1)(np.ones(10, np.float32),
                                                 params={"wg": too_big}))
    assert f"wg={too_big}" in msg and "most this kernel takes" in msg
    assert "not legal" in msg


@pytest.mark.parametrize("forced", [{"cr": 10**6}, {"cc": 10**6}, {"cr": 16, "cc": 8},
                                    {"cr": 32, "vec": 4}])
def test_stencil_cells_per_work_item_over_the_maximum_are_refused(forced):
    st = sk.Stencil(lambda nb: nb[0, -1] + nb[0, 1], border="wrap")
    msg = _quick(lambda: st(np.ones((16, 16), np.float32), params=forced))
    assert "MAX_CELLS" in msg and str(MAX_CELLS) in msg
    assert re.search(HERE + r":\d+", msg)


def test_stencil_cells_at_the_maximum_run():
    a = np.arange(12 * 70, dtype=np.float32).reshape(12, 70)
    st = sk.Stencil(lambda nb: nb[0, 0] + nb[0, 1], border="nearest")
    want = a + np.concatenate([a[:, 1:], a[:, -1:]], axis=1)
    got = st(a, params={"cr": 8, "cc": MAX_CELLS // 8, "local": 0, "vec": 1})
    np.testing.assert_array_equal(got.to_numpy(), want)


def test_stencil_local_tile_over_local_memory_names_the_bytes():
    rt = runtime.current()
    reach = int((rt.device.local_mem_size / 4) ** 0.5) // 2 + 1
    st = sk.Stencil(lambda nb: nb[0, 0], shape=reach)
    msg = _quick(lambda: st(np.ones((3, 4), np.float32), params={"local": 1}))
    assert "local memory" in msg and str(rt.device.local_mem_size) in msg


def test_stencil_work_group_over_the_device_names_it():
    dev = runtime.current().device
    st = sk.Stencil(lambda nb: nb[0, 0] * 2)
    wc = max(v for v in (1024, 512, 256) if v <= dev.max_work_item_sizes[0])
    wr = dev.max_work_group_size // wc * 4
    if wr > dev.max_work_item_sizes[1]:
        pytest.skip("this device's work-item sizes bound the rows first")
    msg = _quick(lambda: st(np.ones((8, 8), np.float32), params={"wg_r": wr, "wg_c": wc}))
    assert f"{wr * wc}" in msg and str(dev.max_work_group_size) in msg


def test_vector_path_with_a_local_tile_names_the_rule():
    st = sk.Stencil(lambda nb: nb[0, 0] * 2)
    msg = _quick(lambda: st(np.ones((8, 8), np.float32), params={"vec": 2, "local": 1}))
    assert "vec=2" in msg and "local=1" in msg


@pytest.mark.parametrize("iterations", [2**64, MAX_ITERATIONS + 1])
def test_iterations_over_the_maximum_are_refused(iterations):
    st = sk.Stencil(lambda nb: nb[0, 0])
    msg = _quick(lambda: st(np.ones((4, 4), np.float32), iterations=iterations))
    assert "MAX_ITERATIONS" in msg and str(MAX_ITERATIONS) in msg
    seq = st >> st
    msg = _quick(lambda: seq(np.ones((4, 4), np.float32), iterations=iterations))
    assert "MAX_ITERATIONS" in msg


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_malformed_iterations_are_parameter_errors(bad):
    with pytest.raises(sk.ParameterError, match="iterations"):
        sk.Stencil(lambda nb: nb[0, 0])(np.ones((4, 4), np.float32), iterations=bad)


def test_every_legal_point_respects_the_maxima(rt):
    """The tuner never offers a point beyond skelpy's own maxima."""
    f = sk.Map(lambda v: v + 1)
    f(np.ones(8, np.float32))
    plan = next(iter(f._plans.values()))
    assert all(1 <= p["coarsen"] <= MAX_COARSEN for p in plan.space(rt).points())
    st = sk.Stencil(lambda nb: nb[0, 1] - nb[0, -1])
    st(np.ones((8, 8), np.float32))
    plan = next(iter(st._plans.values()))
    for p in plan.space(rt).points():
        assert p["cr"] * max(p["cc"], p["vec"]) <= MAX_CELLS


def test_reduce_groups_over_the_maximum_are_refused():
    from skelpy.skeletons.limits import MAX_GROUPS

    red = sk.Reduce(lambda a, b: a + b, 0)
    msg = _quick(lambda: red(np.ones(100, np.float32), params={"groups": MAX_GROUPS * 2}))
    assert "MAX_GROUPS" in msg and str(MAX_GROUPS) in msg
    assert red(np.ones(100, np.float32), params={"groups": MAX_GROUPS}) == 100


def test_allpairs_divisibility_is_named():
    ap = sk.AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b)
    a = np.ones((8, 3), np.float32)
    msg = _quick(lambda: ap(a, a, params={"tm": 2, "rm": 4}))
    assert "tm=2 is not a multiple of rm=4" in msg
    assert re.search(HERE + r":\d+", msg)


def test_scan_and_reduce_work_groups_are_named():
    scan = sk.Scan(lambda a, b: a + b, 0)
    msg = _quick(lambda: scan(np.ones(10, np.int32), params={"wg": 4096 * 4}))
    assert "wg=16384" in msg
    red = sk.Reduce(lambda a, b: max(a, b), 0, axis=1)
    msg = _quick(lambda: red(np.ones((4, 4), np.int32), params={"wg": 4, "lanes": 8}))
    assert "lanes=8 is more than the work-group wg=4" in msg
    msg = _quick(lambda: red(np.ones((4, 4), np.int32), params={"wg": 1 << 14}))
    assert "wg=16384 is not one of" in msg           # only listed sizes may be forced here
