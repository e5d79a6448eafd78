"""Stencil launch parameters: every point of a small grid, refusals, local-memory legality,
large matrices."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from test_stencil_ref import assert_close, check, pad_correlate, sample, weighted, weights_for

import skelpy as sk


@pytest.mark.parametrize("mode", ["reflect", "wrap", "mirror"])
def test_large_matrix_1000x999(mode, rng):
    a = sample(rng, np.float32, (1000, 999))
    s = sk.Shape(north=2, south=1, east=3, west=0)
    w = weights_for(s, rng, np.float32).astype(np.float32)
    st = weighted(w, s, mode)
    check(st, a, w, s, mode)
    check(st, a, w, s, mode, params={"local": 1, "wg_r": 8, "wg_c": 32, "cr": 2, "cc": 2})


# -- launch parameters ----------------------------------------------------------------------------


def test_every_launch_parameter_of_a_small_grid(rng):
    """Every point of wg (rows x cols) in {1x1, 3x8} x cr {1, 3} x cc {1, 2} x local {0, 1}
    with scalar accesses, and wg x cr x vec {2, 4} for the vector path (odd sizes on
    purpose), on sizes smaller than, equal to and larger than one group's tile, with column
    counts that are and are not multiples of the vector width; larger groups are exercised
    by the tests below. Each point is a PoCL build: by default every third point of each
    product (every value of every parameter, most pairs) and the last; SKELPY_HEAVY=1 runs all."""
    s = sk.Shape(north=2, south=1, east=3, west=1)
    w = weights_for(s, rng, np.float32, density=0.4).astype(np.float32)
    sizes = [(1, 1), (5, 3), (37, 70), (40, 96)]
    data = [sample(rng, np.float32, sz) for sz in sizes]
    wants = [pad_correlate(a, w, s, "reflect") for a in data]
    st = weighted(w, s, "reflect", dense=False)
    grid = [{"wg_r": wr, "wg_c": wc, "cr": cr, "cc": cc, "local": local, "vec": 1}
            for (wr, wc), cr, cc, local
            in itertools.product([(1, 1), (3, 8)], [1, 3], [1, 2], [0, 1])]
    grid += [{"wg_r": wr, "wg_c": wc, "cr": cr, "cc": 1, "local": 0, "vec": vec}
             for (wr, wc), cr, vec in itertools.product([(1, 1), (3, 8)], [1, 3], [2, 4])]
    if not os.environ.get("SKELPY_HEAVY"):
        grid = grid[:16][::3] + grid[16:][::3] + grid[-1:]
    for p in grid:
        wr, wc = p["wg_r"], p["wg_c"]
        for a, want in zip(data, wants):
            got = st(a, params=p).to_numpy()
            assert_close(got, want, w, a)
            assert st.last_launch.params == p
            assert st.last_launch.local_size == (wc, wr)


def test_shape_larger_than_tile_and_matrix_smaller_than_group(rng):
    w = weights_for(6, rng, np.float32, density=0.3).astype(np.float32)
    for mode in ["wrap", "constant"]:
        st = weighted(w, 6, mode, cval=2.0, dense=False)
        for size in [(2, 3), (13, 7)]:
            a = sample(rng, np.float32, size)
            for p in [{"wg_r": 1, "wg_c": 1, "local": 1}, {"wg_r": 2, "wg_c": 2, "cr": 2, "local": 1},
                      {"wg_r": 16, "wg_c": 16, "cr": 1, "cc": 1, "local": 1}, {"wg_r": 1, "wg_c": 1, "local": 0}]:
                check(st, a, w, 6, mode, cval=2.0, params=p)


def test_last_launch_reports_params_sizes_and_time(rng):
    st = sk.Stencil(lambda nb: nb[-1, 0] + nb[1, 0], shape=1)
    st(sample(rng, np.float32, (100, 50)), params={"wg_r": 2, "wg_c": 16, "cr": 2, "cc": 1,
                                                    "local": 1})
    ll = st.last_launch
    assert ll.skeleton == "stencil"
    assert ll.params == {"wg_r": 2, "wg_c": 16, "cr": 2, "cc": 1, "local": 1, "vec": 1}
    assert ll.local_size == (16, 2)
    assert ll.global_size == (64, 50)             # ceil(50/16)*16, ceil(100/4)*2
    assert ll.kernel_time > 0


def test_illegal_params_are_rejected():
    st = sk.Stencil(lambda nb: nb[0, 1], shape=1)
    a = np.zeros((4, 4), np.float32)
    with pytest.raises(sk.ParameterError):
        st(a, params={"nonsense": 1})
    with pytest.raises(sk.ParameterError):
        st(a, params={"wg_r": 0})
    with pytest.raises(sk.ParameterError):
        st(a, params={"wg_r": 4096, "wg_c": 4096})
    with pytest.raises(sk.ParameterError):
        st(a, params={"local": 2})
    with pytest.raises(sk.ParameterError):         # the vector path reads no local tile
        st(a, params={"local": 1, "vec": 4})
    with pytest.raises(sk.ParameterError):
        st(a, params={"vec": 3})


def test_open_parameters_are_completed_legally():
    """Forcing local=1 alone must work even where the default point uses the vector path
    (which excludes it): the open parameters take the nearest legal values."""
    st = sk.Stencil(lambda nb: nb[0, 1] + nb[1, 0], shape=1)
    a = np.arange(30, dtype=np.float32).reshape(5, 6)
    want = pad_correlate(a, np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0]], np.float32), 1,
                         "nearest")
    for forced in ({"local": 1}, {"cc": 4}, {"vec": 4}, {"vec": 2, "cr": 8}):
        np.testing.assert_allclose(st(a, params=forced).to_numpy(), want)
        got = st.last_launch.params
        assert all(got[k] == v for k, v in forced.items())
        assert got["vec"] == 1 or (got["local"] == 0 and got["cc"] == 1)


def test_local_memory_constraint_excludes_too_big_tiles(rt):
    big = sk.Shape(north=0, south=0, east=0, west=0)
    st = sk.Stencil(lambda nb: nb[0, 0] * 2, shape=big)
    st(np.ones((3, 3), np.float32))
    plan = next(iter(st._plans.values()))
    space = plan.space(rt)
    from skelpy.skeletons.stencil import tile_bytes
    budget = rt.device.local_mem_size
    for p in space.points():
        if p["local"]:
            assert tile_bytes(plan.shape, 4, p) <= budget
    # a reach so large that no staged tile fits leaves only the global-memory variant
    reach = int((rt.device.local_mem_size / 4) ** 0.5) // 2 + 1
    far = sk.Stencil(lambda nb: nb[0, 0], shape=reach)
    out = far(np.arange(12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(out.to_numpy(), np.arange(12).reshape(3, 4))
    assert far.last_launch.params["local"] == 0
    with pytest.raises(sk.ParameterError):
        far(np.ones((3, 4), np.float32), params={"local": 1})




def test_a_groups_parameters_mean_nothing_on_one_device():
    """Code written for ``sk.use("gpu:*")`` that forces the halo depth runs unchanged on a
    host with one device: ``k`` is dropped there (and the result is the same), while a
    parameter no skeleton knows is still an error."""
    st = sk.Stencil(lambda nb: 0.5 * nb[0, 0] + 0.125 * (nb[-1, 0] + nb[1, 0] + nb[0, -1]
                                                         + nb[0, 1]), border="wrap")
    a = np.arange(35, dtype=np.float32).reshape(5, 7)
    want = st(a, iterations=3).to_numpy()
    got = st(a, iterations=3, params={"k": 2}).to_numpy()
    np.testing.assert_array_equal(got, want)
    assert "k" not in st.last_launch.params
    got = st(a, params={"k": 4, "wg_r": 1, "wg_c": 8}).to_numpy()
    assert st.last_launch.params["wg_c"] == 8 and "k" not in st.last_launch.params
    with pytest.raises(sk.ParameterError, match="unknown launch parameter 'kk'"):
        st(a, params={"kk": 2})
