"""Stencils fuzzed against independent references at awkward sizes, and misuse that must be a
SkelpyError leaving the input as it was.

- A lopsided weighted sum (reach north 2, south 2, west 1, east 3) equals
  ``scipy.ndimage.correlate`` in every border mode, on matrices from 1x1 up, many smaller than
  the reach (scipy then reflects, mirrors and wraps repeatedly).
- Integer muscles wrap as NumPy does (uint8, int8, int16, int64), compared with the same muscle
  run on NumPy arrays over a padded copy (``np.pad``: scipy's modes under NumPy's names).
- ``iterations=`` forced through temporal blocking (``params={"t": ...}``) equals the same
  number of single steps bit for bit, for counts not divisible by t (0 and 1 included).
- Regressions: launch parameters that are not integers (``t=2.5`` ran as t=2); a ``cval`` that
  the matrix's dtype cannot hold crashing calls whose border never reads it (OverflowError,
  RuntimeWarning), or a fused array-style call (OverflowError); ``m >> stencil``.

Few programs (each a PoCL build of about half a second), many data: hypothesis draws shapes
and values, derandomized. SKELPY_HEAVY=1 draws more examples.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import skelpy as sk

HEAVY = os.environ.get("SKELPY_HEAVY") == "1"
MODES = ["constant", "nearest", "wrap", "reflect", "mirror"]
# scipy.ndimage's modes as np.pad names them
PAD = {"nearest": "edge", "wrap": "wrap", "reflect": "symmetric", "mirror": "reflect"}
FUZZ = settings(max_examples=200 if HEAVY else 25, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# -- against scipy.ndimage.correlate ---------------------------------------------------------

# (row offset, column offset) -> weight: reach north 2, south 2, west 1, east 3
TAPS = {(0, 0): 0.5, (-2, 1): 0.25, (1, 3): -0.125, (0, -1): 0.0625, (2, 0): 0.03125,
        (-1, -1): -0.375}


def lopsided(nb):
    return (0.5 * nb[0, 0] + 0.25 * nb[-2, 1] - 0.125 * nb[1, 3] + 0.0625 * nb[0, -1]
            + 0.03125 * nb[2, 0] - 0.375 * nb[-1, -1])


def taps_kernel() -> np.ndarray:
    """TAPS as a centred 5 x 7 correlation kernel (zeros elsewhere)."""
    w = np.zeros((5, 7))
    for (dr, dc), v in TAPS.items():
        w[dr + 2, dc + 3] = v
    return w


LOPSIDED = {mode: sk.Stencil(lopsided, border=mode, cval=-1.5) for mode in MODES}


@FUZZ
@given(mode=hs.sampled_from(MODES), rows=hs.integers(1, 12), cols=hs.integers(1, 12),
       seed=hs.integers(0, 2**32 - 1))
def test_lopsided_sum_equals_scipy_correlate(mode, rows, cols, seed):
    a = np.random.default_rng(seed).uniform(-10, 10, (rows, cols))
    before = a.copy()
    got = LOPSIDED[mode](sk.Matrix(a)).to_numpy()
    want = ndi.correlate(a, taps_kernel(), mode=mode, cval=-1.5)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{mode} {a.shape}")
    assert np.array_equal(a, before)


# -- integer wrap-around against the muscle on NumPy arrays ------------------------------------


def east_heavy(nb):
    """Reads nothing south or west; sums that overflow every narrow dtype."""
    return nb[0, 2] * 3 - nb[-1, 0] + nb[0, 0] * nb[-1, 1]


class Padded:
    """``nb[dr, dc]`` over a whole matrix, as NumPy computes the muscle: the matrix padded by
    scipy's mode (``np.pad``, repeated reflections included) and shifted."""

    def __init__(self, a: np.ndarray, mode: str, cval, reach: int = 4):
        self.shape, self.reach = a.shape, reach
        if mode == "constant":
            self.p = np.pad(a, reach, constant_values=np.asarray(cval).astype(a.dtype))
        else:
            p = a
            for ax in (0, 1):           # a one-cell axis mirrors onto itself
                width = [(0, 0), (0, 0)]
                width[ax] = (reach, reach)
                p = np.pad(p, width, mode="edge" if mode == "mirror" and a.shape[ax] == 1
                           else PAD[mode])
            self.p = p

    def __getitem__(self, at):
        dr, dc = at
        r, (n, m) = self.reach, self.shape
        return self.p[r + dr:r + dr + n, r + dc:r + dc + m]


INT_CASES = [(np.uint8, "wrap"), (np.int8, "reflect"), (np.int16, "constant"),
             (np.int64, "mirror")]
INT_CVAL = {"constant": 7}          # the others 0: test_cval_unread_... shares their programs
INT_STENCILS = {mode: sk.Stencil(east_heavy, border=mode, cval=INT_CVAL.get(mode, 0))
                for _, mode in INT_CASES}


@FUZZ
@given(case=hs.sampled_from(INT_CASES), rows=hs.integers(1, 9), cols=hs.integers(1, 9),
       seed=hs.integers(0, 2**32 - 1))
def test_integer_muscles_wrap_as_numpy(case, rows, cols, seed):
    dtype, mode = case
    info = np.iinfo(dtype)
    a = np.random.default_rng(seed).integers(info.min, info.max, (rows, cols),
                                             dtype=dtype, endpoint=True)
    got = INT_STENCILS[mode](a).to_numpy()
    with np.errstate(over="ignore"):
        want = east_heavy(Padded(a, mode, INT_CVAL.get(mode, 0)))
    assert got.dtype == want.dtype == dtype
    np.testing.assert_array_equal(got, want, err_msg=f"{dtype.__name__} {mode} {a.shape}")


# -- temporal blocking against single steps ----------------------------------------------------


def heat(nb):
    return nb[0, 0] + 0.1 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


HEAT = sk.Stencil(heat, border="wrap")
TILE = {"t": 3, "tb_wc": 8, "tb_rows": 4}      # one pass program for every test here


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (1, 9), (7, 13), (31, 17)])
def test_forced_t_equals_single_steps_bitwise(shape):
    """t = 3 with 0, 1, 2 (a short pass), 7 (two passes and one step) iterations; tiles of 8
    work-items and 4 rows so the larger matrices span several tiles and streams."""
    a = np.random.default_rng(sum(shape)).random(shape).astype(np.float32)
    step = sk.Matrix(a)
    done = 0
    for iterations in (0, 1, 2, 7):
        while done < iterations:
            step = HEAT(step)
            done += 1
        got = HEAT(sk.Matrix(a), iterations=iterations, params=TILE).to_numpy()
        want = step.to_numpy()
        assert got.dtype == want.dtype
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (shape, iterations)
        if iterations:
            assert HEAT.last_launch.params["t"] == 3
            assert len(HEAT.last_launch.events) == -(-iterations // 3)


# -- regressions: misuse ---------------------------------------------------------------------


@pytest.mark.parametrize("params", [{"t": 2.5}, {"t": 2, "tb_rows": 3.5},
                                    {"wg_r": 2.5, "wg_c": 4}, {"cr": 1.5}])
def test_launch_parameters_must_be_integers(params):
    """t=2.5 ran as t=2 (and wg_r=2.5, cr=1.5 as their int()) and was reported as 2.5."""
    a = np.arange(35, dtype=np.float32).reshape(5, 7)
    m = sk.Matrix(a)
    iterations = 3 if "t" in params else 1
    with pytest.raises(sk.ParameterError, match="must be a whole number"):
        HEAT(m, iterations=iterations, params=params)
    np.testing.assert_array_equal(m.to_numpy(), a)


def test_sequence_tile_parameters_must_be_integers():
    seq = HEAT >> HEAT
    with pytest.raises(sk.ParameterError, match="must be a whole number"):
        seq(np.ones((3, 4), np.float32), params={"fuse": 1, "fu_cr": 1.5})


def test_integer_launch_parameters_of_other_types_are_plain_ints():
    for t in (np.int64(3), 3.0):
        HEAT(np.ones((3, 4), np.float32), iterations=2, params=dict(TILE, t=t))
        assert type(HEAT.last_launch.params["t"]) is int


@pytest.mark.parametrize("cval", [2**70, -(2**64), float("nan"), float("inf"), 1e300])
def test_cval_unread_by_the_border_does_not_matter(cval):
    """A cval no uint8 holds, with a border that never reads it: the call ran into
    OverflowError (2**70) or RuntimeWarnings (nan, inf, 1e300) building the kernel's
    constants. It computes as with any other cval."""
    a = np.random.default_rng(3).integers(0, 256, (4, 6), dtype=np.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = sk.Stencil(east_heavy, border="wrap", cval=cval)(a).to_numpy()
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, east_heavy(Padded(a, "wrap", 0)))


@pytest.mark.parametrize("cval, dtype", [(2**70, np.int16), (2**64, np.int64), (1e300, np.float32),
                                         (float("nan"), np.int8), (300, np.uint8)])
def test_constant_border_needs_a_cval_of_the_dtype(cval, dtype):
    """Read by border='constant', a cval the dtype cannot hold is a DTypeError, also when
    the input is a pending array expression (2**70 there was an OverflowError) and for floats
    that overflow (1e300 in float32 read as inf)."""
    st = sk.Stencil(lambda nb: nb[0, 1] + nb[1, 0], border="constant", cval=cval)
    a = np.ones((3, 3), dtype)
    m = sk.Matrix(a)
    with pytest.raises(sk.DTypeError, match="cannot be represented"):
        st(m)
    with pytest.raises(sk.DTypeError, match="cannot be represented"):
        st(m * 2)
    np.testing.assert_array_equal(m.to_numpy(), a)


def test_cval_beyond_every_dtype_is_refused_at_construction():
    with pytest.raises(sk.DTypeError, match="beyond the range of every dtype"):
        sk.Stencil(heat, border="nearest", cval=2**2000)


def test_matrix_shifted_into_a_stencil_is_a_skelpy_error():
    """``m >> stencil`` was Python's TypeError; ``stencil >> m`` already named the mistake."""
    m = sk.Matrix(np.ones((2, 2), np.float32))
    for left in (m, 5, None):
        with pytest.raises(sk.ParameterError, match="chains Stencils"):
            left >> HEAT  # noqa: B015 - the operator is the test
    with pytest.raises(sk.ParameterError, match="chains Stencils"):
        5 >> (HEAT >> HEAT)  # noqa: B015


def test_misuse_is_an_error_with_zero_iterations_too():
    """iterations=0 returned a copy without looking at the extras: a wrong one, or one more
    than the muscle takes, went unnoticed (and a cval the dtype cannot hold)."""
    a = np.ones((3, 4), np.float32)
    with pytest.raises(sk.DTypeError, match="unsupported type str"):
        HEAT(a, "x", iterations=0)
    with pytest.raises(sk.ShapeError, match="takes 1 parameter"):
        HEAT(a, 2.0, iterations=0)
    with pytest.raises(sk.ShapeError, match="extra argument"):
        (HEAT >> HEAT)(a, 2.0, iterations=0)
    ints = sk.Stencil(east_heavy, border="constant", cval=1.5)
    with pytest.raises(sk.DTypeError, match="cannot be represented"):
        ints(np.ones((2, 2), np.int32), iterations=0)
    np.testing.assert_array_equal(HEAT(a, iterations=0).to_numpy(), a)


def test_sequence_extras_that_no_stage_takes_are_an_error():
    """A sequence ignored extras beyond what its stages take ('junk' included), staged, fused
    and streamed alike."""
    a = np.ones((3, 4), np.float32)
    for params in (None, {"fuse": 1}, {"fuse": 2}):
        with pytest.raises(sk.ShapeError, match="stages take at most 0"):
            (HEAT >> HEAT)(a, 1.0, "junk", params=params)
    with pytest.raises(sk.ShapeError, match="stages take at most 0"):
        (HEAT >> HEAT).source(a, 1.0)


# -- reaches beyond the unrolled folds ---------------------------------------------------------


def reaches_far(nb):
    """70 columns west (over SKP_FOLD_MAX_REACH: each read maps its index with a division)."""
    return 2 * nb[0, -70] - nb[1, 3] + 0.5 * nb[0, 0]


def test_shape_beyond_max_reach_is_an_error_and_a_wide_declared_shape_is_quick():
    """shape=2**31 - 1 in reflect mode ran each edge read through 2**31 folds (a 5 x 6 matrix:
    6 minutes); 2**31 and beyond wrapped around in the kernel's ints. Now reaches up to
    MAX_REACH use a division past SKP_FOLD_MAX_REACH, and beyond MAX_REACH are a ShapeError,
    also when a muscle reads that far."""
    from skelpy.skeletons.stencil_shape import MAX_REACH
    for shape in (MAX_REACH + 1, 2**31 - 1):
        with pytest.raises(sk.ShapeError, match="maximum reach"):
            sk.Stencil(heat, shape=shape)
    with pytest.raises(sk.ShapeError, match="maximum reach"):
        sk.Shape(north=2**40)
    with pytest.raises(sk.ShapeError, match="reads too far"):
        sk.Stencil(lambda nb: nb[0, -2**31])
    a = np.random.default_rng(5).random((5, 6))
    got = sk.Stencil(reaches_far, shape=MAX_REACH, border="reflect")(a).to_numpy()
    want = reaches_far(Padded(a, "reflect", 0, reach=70))
    np.testing.assert_allclose(got, want, rtol=1e-12)


OCLGRIND_FAR = '''
import numpy as np
import skelpy as sk
from test_stencil_fuzz import Padded, reaches_far

assert "oclgrind" in sk.current_device().platform.lower(), sk.current_device()
rng = np.random.default_rng(11)
for mode in ["constant", "wrap", "reflect", "mirror"]:
    st = sk.Stencil(reaches_far, border=mode, cval=0.25)
    for shape in [(1, 1), (2, 3), (3, 71), (4, 150)]:
        a = rng.standard_normal(shape)
        for local in (0, 1):
            got = st(a, params={"local": local, "wg_r": 2, "wg_c": 4}).to_numpy()
            np.testing.assert_allclose(got, reaches_far(Padded(a, mode, 0.25, reach=70)),
                                       rtol=1e-12, err_msg=f"{mode} {shape} local={local}")
print("FAR-OCLGRIND-OK")
'''


def test_far_reach_under_oclgrind(tmp_path):
    """Reads 70 columns away (the division path of the folds: a staged halo, local=1, and a
    muscle's edge reads, local=0) at sizes smaller and larger than the reach: no invalid
    access, equal to NumPy over the padded matrix."""
    from oclgrind_support import STRICT_MARKERS, run_under_oclgrind
    script = f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n" + OCLGRIND_FAR
    run_under_oclgrind(tmp_path, "far_oclgrind.py", script, "FAR-OCLGRIND-OK",
                       markers=STRICT_MARKERS)


def test_iterations_must_be_an_int_on_every_path():
    """After a plain call set up the repeat launcher, iterations=True or 1.0 ran one step
    (``True == 1``), and so did a pending array input; elsewhere they are errors."""
    a = np.ones((3, 4), np.float32)
    m = sk.Matrix(a)
    HEAT(m)
    HEAT(m)                                   # the repeat launcher is in place
    for bad in (True, 1.0):
        with pytest.raises(sk.ParameterError, match="iterations must be an int"):
            HEAT(m, iterations=bad)
        with pytest.raises(sk.ParameterError, match="iterations must be an int"):
            HEAT(m * 2, iterations=bad)
    np.testing.assert_array_equal(m.to_numpy(), a)
