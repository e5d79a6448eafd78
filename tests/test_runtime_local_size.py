"""wg=0 (forced only) leaves the work-group size to the OpenCL runtime, as pyopencl's
local_size=None does; the tuner evaluation uses it as a baseline."""

import numpy as np
import pytest
import scipy.ndimage as ndi

import skelpy as sk


@pytest.mark.parametrize("n", [1, 7, 1023, 65537])
@pytest.mark.parametrize("coarsen,blocked,vw", [(1, 0, 1), (4, 0, 4), (2, 1, 2)])
def test_map_runtime_local_size(n, coarsen, blocked, vw):
    x = np.random.default_rng(n).random(n, dtype=np.float32)
    m = sk.Map(lambda v: v * 3.0 + 1.0)
    out = m(x, params={"wg": 0, "coarsen": coarsen, "blocked": blocked, "vw": vw})
    np.testing.assert_allclose(out.to_numpy(), x * np.float32(3) + np.float32(1), rtol=1e-6)
    assert m.last_launch.local_size is None
    assert m.last_launch.params["wg"] == 0


@pytest.mark.parametrize("shape", [(1, 1), (31, 17), (257, 129)])
def test_stencil_runtime_local_size(shape):
    a = np.random.default_rng(1).random(shape, dtype=np.float32)
    st = sk.Stencil(lambda nb: nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0],
                    border="reflect")
    out = st(a, params={"wg_r": 0, "wg_c": 0, "cr": 2, "cc": 1, "local": 0})
    w = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], np.float32)
    np.testing.assert_allclose(out.to_numpy(), ndi.correlate(a, w, mode="reflect"),
                               rtol=1e-5, atol=1e-5)
    assert st.last_launch.local_size is None


def test_runtime_local_size_needs_no_local_tile():
    st = sk.Stencil(lambda nb: nb[0, 1] + nb[0, -1])
    with pytest.raises(sk.SkelpyError, match="not legal"):
        st(np.ones((8, 8), np.float32), params={"wg_r": 0, "wg_c": 0, "local": 1})
