"""Stencils as suites ported from scipy.ndimage, scikit-image and SkelCL use them, and the bugs
a hunt along those suites found (each test names its bug).

- scipy.ndimage: grey morphology (``morphological_gradient``: a 3x3 maximum minus minimum) in
  every border mode on uint8 with the ``cval`` the dtype barely holds, at 1x1, 1xN, Nx1 and
  prime sizes drawn by hypothesis; ``cval=nan`` bit for bit (the NaN's own bits).
- Sequences and ``iterations=`` whose forced tiles have no legal completion are refused naming
  the limit (and the muscle's file and line); a forced ``fuse=2`` whose usual start tile is
  illegal runs at the nearest legal tile.
- Misuse: a ragged list as the input is a ShapeError.

Few programs (each a PoCL build of about half a second), many data. SKELPY_HEAVY=1 draws more
examples and runs the sweeps (every dtype's extreme constants, temporal and sequence paths).
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from test_stencil_fuzz import Padded

import skelpy as sk

HEAVY = os.environ.get("SKELPY_HEAVY") == "1"
MODES = ["constant", "nearest", "wrap", "reflect", "mirror"]
FUZZ = settings(max_examples=60 if HEAVY else 8, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
HERE = re.escape(os.path.basename(__file__))


# -- scipy.ndimage: grey morphology ----------------------------------------------------------


def gradient(nb):
    """scipy.ndimage.morphological_gradient(size=3): the 3x3 maximum minus the minimum."""
    hi = nb[-1, -1]
    lo = nb[-1, -1]
    for dr in range(-1, 2):
        for dc in range(-1, 2):
            hi = max(hi, nb[dr, dc])
            lo = min(lo, nb[dr, dc])
    return hi - lo


# the constant the dtype barely holds: 255 reaches the maximum, 0 the minimum
GRADIENT = {mode: sk.Stencil(gradient, border=mode, cval=255 if mode == "constant" else 0)
            for mode in MODES}


@FUZZ
@given(mode=hs.sampled_from(MODES),
       shape=hs.tuples(hs.sampled_from([1, 2, 3, 7, 13]), hs.sampled_from([1, 2, 5, 11, 31])),
       seed=hs.integers(0, 2**32 - 1))
def test_grey_morphology_equals_scipy_in_every_mode(mode, shape, seed):
    a = np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)
    before = a.copy()
    got = GRADIENT[mode](a).to_numpy()
    want = ndi.morphological_gradient(a, size=3, mode=mode, cval=255)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want, err_msg=f"{mode} {shape}")
    np.testing.assert_array_equal(a, before)


@pytest.mark.skipif(not HEAVY, reason="SKELPY_HEAVY=1: every dtype and mode")
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.float32,
                                   np.float64])
def test_correlate_every_dtype_and_mode_bitwise(dtype):
    """scipy.ndimage.correlate with small integer weights: floats (small values, cval -7.5:
    every sum exact) equal scipy bit for bit; integers, with the constant at the dtype's
    minimum, equal the same sum in the dtype's own arithmetic (scipy sums in float64 and
    casts, so it saturates where the dtype wraps)."""
    cval = np.iinfo(dtype).min if np.dtype(dtype).kind == "i" else -7.5
    w = np.array([[1, -2, 0], [3, 1, -1], [0, 2, 1]])
    rng = np.random.default_rng(4)
    for mode in MODES:
        st = sk.Stencil(lambda nb: (nb[-1, -1] - 2 * nb[-1, 0] + 3 * nb[0, -1] + nb[0, 0]
                                    - nb[0, 1] + 2 * nb[1, 0] + nb[1, 1]),
                        border=mode, cval=cval)
        for shape in [(1, 1), (1, 6), (6, 1), (7, 11)]:
            a = rng.integers(-9, 10, shape).astype(dtype)
            if np.dtype(dtype).kind == "f":
                want = ndi.correlate(a, w.astype(dtype), mode=mode, cval=cval)
            else:
                p = Padded(a, mode, cval, reach=1)
                want = np.zeros_like(a)
                with np.errstate(over="ignore"):
                    for (dr, dc), wt in np.ndenumerate(w):
                        want = want + a.dtype.type(wt) * p[dr - 1, dc - 1]
            got = st(a).to_numpy()
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"{mode} {shape}")


# -- SkelCL: an OpenCL C muscle on every path ------------------------------------------------

C_HEAT = """
float func(float* nb) {
    return SKELPY_GET2(nb, 0, 0) + 0.125f * (SKELPY_GET2(nb, -1, 0) + SKELPY_GET2(nb, 1, 0)
           + SKELPY_GET2(nb, 0, -1) + SKELPY_GET2(nb, 0, 1) - 4.0f * SKELPY_GET2(nb, 0, 0));
}"""


def test_skelcl_c_muscle_heat_on_every_path():
    """SkelCL's heat as an OpenCL C muscle (SKELPY_GET2): six steps in passes of three
    (temporal blocking), and three stages fused and streamed, equal single steps bit for bit
    (the temporal, fused and streamed kernels had been run with Python muscles only)."""
    heat_c = sk.Stencil(C_HEAT, border="nearest")
    a = np.random.default_rng(5).random((13, 17)).astype(np.float32)
    steps = [sk.Matrix(a)]
    for _ in range(6):
        steps.append(heat_c(steps[-1]))
    want3, want6 = (steps[k].to_numpy().view(np.uint32) for k in (3, 6))
    got = heat_c(a, iterations=6, params={"t": 3, "tb_wc": 16, "tb_rows": 4})
    np.testing.assert_array_equal(got.to_numpy().view(np.uint32), want6)
    assert len(heat_c.last_launch.events) == 2
    seq = heat_c >> heat_c >> heat_c
    for fuse in (1, 2):
        got = seq(a, params={"fuse": fuse}).to_numpy()
        np.testing.assert_array_equal(got.view(np.uint32), want3, err_msg=f"fuse={fuse}")


# -- bug: a NaN constant had OpenCL's NAN bits -------------------------------------------------


def north_and_east(nb):
    return 0.5 * nb[-1, 0] + nb[0, 1]


def north(nb):
    return nb[-1, 0]


NORTH_EAST = np.array([[0, 0.5, 0], [0, 0, 1], [0, 0, 0]])


@pytest.mark.parametrize("dtype, cval", [(np.float32, np.nan),
                                         (np.float64, np.copysign(np.nan, -1))])
def test_nan_cval_keeps_its_bits(dtype, cval):
    """cval=nan was written into the kernel as OpenCL's NAN, whose bits are the platform's
    (PoCL: 0x7fffffff; NumPy's float32 nan is 0x7fc00000) and have no sign: the border, and
    arithmetic on it, differed from scipy bit for bit. The constant now carries the NaN's own
    bits. (Arithmetic on a NaN gives the device's NaN: NVIDIA GPUs return one canonical NaN
    whatever the operand's bits, x86 keeps the operand's. So the bits are compared where the
    border value is copied, and NaN-ness where it meets arithmetic.)"""
    a = np.random.default_rng(1).random((4, 5)).astype(dtype)
    bits = np.uint32 if dtype == np.float32 else np.uint64
    got = sk.Stencil(north, border="constant", cval=cval)(a).to_numpy()
    want = ndi.correlate(a, np.array([[0, 1, 0], [0, 0, 0], [0, 0, 0]], dtype),
                         mode="constant", cval=cval)
    np.testing.assert_array_equal(got.view(bits), want.view(bits))
    got = sk.Stencil(north_and_east, border="constant", cval=cval)(a).to_numpy()
    want = ndi.correlate(a, NORTH_EAST.astype(dtype), mode="constant", cval=cval)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))


@pytest.mark.skipif(not HEAVY, reason="SKELPY_HEAVY=1: the temporal, fused and streamed paths")
def test_nan_cval_keeps_its_bits_on_every_path():
    a = np.random.default_rng(2).random((6, 7)).astype(np.float32)
    nan = np.copysign(np.nan, -1)
    st = sk.Stencil(north_and_east, border="constant", cval=nan)
    same = sk.Stencil(lambda nb: nb[0, 0], border="constant", cval=nan)
    want = ndi.correlate(a, NORTH_EAST.astype(np.float32), mode="constant", cval=nan)
    outs = [st(a, iterations=1, params={"t": 2, "tb_wc": 16, "tb_rows": 4}),
            (st >> same)(a, params={"fuse": 1}), (st >> same)(a, params={"fuse": 2}),
            st(sk.Matrix(a) * 1)]
    # arithmetic on a NaN gives the device's NaN (NVIDIA: one canonical NaN): NaN where
    # SciPy has one, the other values bit for bit; copies keep the constant's bits exactly
    for out in outs:
        got = out.to_numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        np.testing.assert_array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))
    shifted = sk.Stencil(lambda nb: nb[-1, 1], border="constant", cval=nan)
    copy = ndi.correlate(a, np.array([[0, 0, 1], [0, 0, 0], [0, 0, 0]], np.float32),
                         mode="constant", cval=nan)
    copy = np.where(np.isnan(copy), nan, copy).astype(np.float32)
    for out in (shifted(a, iterations=1, params={"t": 2, "tb_wc": 16, "tb_rows": 4}),
                (shifted >> same)(a, params={"fuse": 1}), (shifted >> same)(a, params={"fuse": 2}),
                shifted(sk.Matrix(a) * 1)):
        np.testing.assert_array_equal(out.to_numpy().view(np.uint32), copy.view(np.uint32))


# -- bug: forced tiles ---------------------------------------------------------------------------


def reach2(nb):
    return nb[-2, 0] + nb[2, 0] - nb[0, 1]


def reach4(nb):
    return nb[-4, 0] - nb[4, 0] + nb[0, -1]


def test_forced_stream_starts_from_a_legal_tile():
    """``{"fuse": 2}`` alone put the GPUs' stream tile in as forced values; where that tile is
    not legal (a reach-2 >> reach-4 sequence: the walk unrolled by the rings' period 30 is over
    MAX_PERIOD) the call was refused, though other tiles are legal, with a message naming
    neither the sequence nor the limit. It now streams at the nearest legal tile."""
    seq = sk.Stencil(reach2, border="reflect") >> sk.Stencil(reach4, border="reflect")
    a = np.random.default_rng(3).integers(-100, 100, (11, 20)).astype(np.int32)
    got = seq(a, params={"fuse": 2}).to_numpy()
    want = reach4(Padded(reach2(Padded(a, "reflect", 0)), "reflect", 0))
    np.testing.assert_array_equal(got, want)
    assert seq.last_launch.streamed
    assert seq.last_launch.params["tb_unroll"] == 0


def reach8(nb):
    return nb[-8, 3] * 3 + nb[5, -8] - nb[0, 8] * 2 + nb[8, 0]


def heat(nb):
    return nb[0, 0] + 0.1 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


def test_forced_tiles_no_legal_point_keeps_name_the_limit():
    """A forced stream, fused or temporal tile that no legal point keeps was "not legal on
    this device/kernel" (the sequence's without naming the sequence): now the message names
    the muscle's file and line and the limit, found among the completions of what was not
    forced. Nothing is built, nothing is changed."""
    a = np.ones((9, 10), np.int32)
    m = sk.Matrix(a)
    seq = sk.Stencil(reach8, border="constant") >> sk.Stencil(reach2, border="constant")
    with pytest.raises(sk.ParameterError, match=rf"{HERE}:\d+ \(reach8\).*MAX_REGS"):
        seq(m, params={"fuse": 2})
    with pytest.raises(sk.ParameterError, match=rf"{HERE}:\d+ \(reach8\).*summed halo"):
        seq(m, params={"fuse": 1, "fu_wc": 8, "fu_wr": 1, "fu_cr": 1, "fu_cc": 1})
    with pytest.raises(sk.ParameterError, match=rf"{HERE}:\d+ \(reach8\).*summed halo"):
        seq.source(m, params={"fuse": 1, "fu_wc": 8, "fu_wr": 1, "fu_cr": 1, "fu_cc": 1})
    step = sk.Stencil(heat, border="wrap")
    f = sk.Matrix(a.astype(np.float32))
    with pytest.raises(sk.ParameterError, match=rf"{HERE}:\d+ \(heat\).*less than a quarter"):
        step(f, iterations=3, params={"t": 2, "tb_wc": 4, "tb_vec": 1})
    with pytest.raises(sk.ParameterError, match=rf"{HERE}:\d+ \(heat\).*tb_vec=3"):
        step(f, iterations=3, params={"t": 2, "tb_vec": 3})
    np.testing.assert_array_equal(m.to_numpy(), a)
    np.testing.assert_array_equal(f.to_numpy(), a)


# -- bug: single-step parameters beside t ------------------------------------------------------


def test_single_step_parameters_beside_t_1_are_used_and_checked():
    """``params={"t": 1, "wg_r": 2, "wg_c": 4}`` ran the single steps at the tuner's point
    (everything beside t=1 was dropped: an unknown name too); now they are the single steps'
    parameters, checked as such."""
    step = sk.Stencil(heat, border="wrap")
    a = np.random.default_rng(6).random((9, 10)).astype(np.float32)
    want = a
    for _ in range(3):
        want = heat(Padded(want, "wrap", 0)).astype(np.float32)
    got = step(a, iterations=3, params={"t": 1, "wg_r": 2, "wg_c": 4})
    np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-6)
    assert step.last_launch.params["wg_r"] == 2 and step.last_launch.local_size == (4, 2)
    with pytest.raises(sk.ParameterError, match=rf"{HERE}:\d+ \(heat\).*unknown launch "
                                                r"parameter 'zz'"):
        step(a, iterations=3, params={"t": 1, "zz": 1})


def test_source_shows_the_pass_a_call_with_t_builds():
    """``step.source(m, params={"t": 3})`` was "unknown launch parameter 't'" though a call
    with those params is legal: it shows the pass's program, with the build options the call
    uses (PoCL's kept loop too, which the streamed sequence's source left out); beside t=1 the
    single step's. Nothing is built."""
    step = sk.Stencil(heat, border="wrap")
    a = np.ones((9, 10), np.float32)
    text = step.source(a, params={"t": 3, "tb_wc": 32})
    assert text.startswith("/* temporal blocking: 3 steps per pass, Stencil(")
    assert "#define SKP_TB_T 3\n" in text and "#define SKP_TB_WC 32\n" in text
    assert "skelpy_stencil_stream" in text
    pocl = "portable computing" in sk.current_device().platform.lower()
    assert f"#define SKP_TB_KEEP_LOOP {int(pocl)}\n" in text
    streamed = (step >> step).source(a, params={"fuse": 2})
    assert f"#define SKP_TB_KEEP_LOOP {int(pocl)}\n" in streamed
    single = step.source(a, params={"t": 1, "cr": 2})
    assert "#define SKP_CR 2\n" in single and "skelpy_stencil_stream" not in single
    with pytest.raises(sk.ParameterError, match=rf"{HERE}:\d+ \(heat\).*less than a quarter"):
        step.source(a, params={"t": 2, "tb_wc": 4, "tb_vec": 1})


GROUP_PARAMS = """
import numpy as np
import skelpy as sk
from test_stencil_ports import heat

sk.use("cpu:*")
assert len(sk.current_devices()) == 2, sk.current_devices()
a = np.ones((8, 6), np.float32)
for params, says in [({"t": 2, "zz": 1}, "unknown launch parameter 'zz'"),
                     ({"t": 2, "wg_r": 4}, "unknown launch parameter 'wg_r'"),
                     ({"t": 2, "tb_wc": 4, "tb_vec": 1}, "less than a quarter")]:
    try:
        sk.Stencil(heat, border="wrap")(a, iterations=4, params=params)
    except sk.ParameterError as exc:
        assert "test_stencil_ports.py" in str(exc) and says in str(exc), exc
    else:
        raise AssertionError(f"{params} ran")
print("GROUP-PARAMS-OK")
"""


def test_a_pass_on_a_device_group_takes_no_single_step_parameters(tmp_path):
    """On a device group, parameters beside a forced t > 1 that no pass takes (``wg_r``, or a
    misspelt name) were dropped silently, and a forced tile no legal point keeps was "not
    legal on this device/kernel"; as on one device they are errors naming the muscle's line
    (and the limit), raised before anything is built."""
    import subprocess
    import sys
    try:
        if "portable computing" not in sk.current_device().platform.lower():
            pytest.skip("two devices are simulated with PoCL")
    except sk.SkelpyError:
        pytest.skip("no OpenCL device")
    env = dict(os.environ, POCL_DEVICES="pthread pthread",
               SKELPY_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([os.path.dirname(__file__),
                                           os.environ.get("PYTHONPATH", "")]))
    env.pop("SKELPY_DEVICE", None)
    proc = subprocess.run([sys.executable, "-c", GROUP_PARAMS], env=env, capture_output=True,
                          text=True, timeout=300)
    assert "GROUP-PARAMS-OK" in proc.stdout, (proc.stdout + proc.stderr)[-3000:]


# -- misuse ------------------------------------------------------------------------------------


def test_ragged_list_input_is_a_shape_error():
    """A ragged list was NumPy's ValueError."""
    with pytest.raises(sk.ShapeError, match=rf"{HERE}:\d+ \(heat\).*not a matrix"):
        sk.Stencil(heat)([[1.0, 2.0], [3.0]])
