"""AllPairs against NumPy and SciPy: the zip/reduce form against A @ B.T (and other folds), the
generic form against scipy.spatial.distance.cdist, sizes that are multiples of no tile, a grid
of launch parameters, extra arguments, the matmul example and errors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import skelpy as sk

SHAPES = [(1, 1, 1), (17, 33, 5), (300, 129, 211)]   # (n, m, d)


def mul(a, b):
    return a * b


def add(a, b):
    return a + b


def euclid(a, b):
    s = 0.0
    for k in range(a.size):
        t = a[k] - b[k]
        s += t * t
    return np.sqrt(s)


def cityblock(a, b):
    s = 0.0
    for k in range(len(a)):
        s += abs(a[k] - b[k])
    return s


def mats(rng, n, m, d, dtype):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal((n, d)).astype(dtype), rng.standard_normal((m, d)).astype(dtype)
    return (rng.integers(-50, 51, (n, d)).astype(dtype),
            rng.integers(-50, 51, (m, d)).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32],
                         ids=lambda d: np.dtype(d).name)
def test_matmul_form_against_numpy(dtype, rng, has_fp64):
    if dtype == np.float64 and not has_fp64:
        pytest.skip("no fp64")
    ap = sk.AllPairs(zip=mul, reduce=add)
    for n, m, d in SHAPES:
        A, B = mats(rng, n, m, d, dtype)
        got = ap(sk.Matrix(A), sk.Matrix(B))
        assert isinstance(got, sk.Matrix) and got.shape == (n, m) and got.dtype == dtype
        want = A @ B.T
        if np.dtype(dtype).kind == "f":
            np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-4 if dtype == np.float32
                                       else 1e-12, atol=1e-4 * np.sqrt(d))
        else:
            np.testing.assert_array_equal(got.to_numpy(), want)


GRID = [  # (tm, tn, tk, rm, rn)
    (1, 1, 1, 1, 1), (8, 4, 4, 2, 4), (64, 16, 32, 8, 1), (32, 64, 2, 4, 8), (128, 8, 8, 8, 2),
    (1, 2, 1, 1, 1), (8, 8, 4, 2, 4),
]


def test_every_launch_parameter_of_a_grid(rng, rt):
    ap = sk.AllPairs(zip=mul, reduce=add)
    data = [mats(rng, n, m, d, np.int32) for n, m, d in SHAPES]
    ap(*data[0])
    (plan,) = ap._plans.values()
    space = plan.space(rt)
    pocl = "portable computing language" in rt.device.platform.lower()
    for tm, tn, tk, rm, rn in GRID:
        p = {"tm": tm, "tn": tn, "tk": tk, "rm": rm, "rn": rn}
        # one work-item wide, or two work-items: PoCL's compiler can abort; never offered
        if pocl and (tn == rn or (tn // rn) * (tm // rm) < 4):
            assert not space.is_legal(p)
            with pytest.raises(sk.ParameterError):
                ap(*data[0], params=p)
            continue
        for A, B in data:
            np.testing.assert_array_equal(ap(A, B, params=p).to_numpy(), A @ B.T, err_msg=str(p))
        assert ap.last_launch.params == p


def test_other_folds_chebyshev_and_extras(rng):
    A, B = mats(rng, 17, 33, 5, np.float32)
    cheb = sk.AllPairs(zip=lambda a, b: abs(a - b), reduce=lambda a, b: max(a, b), identity=0)
    np.testing.assert_allclose(cheb(A, B).to_numpy(), cdist(A, B, "chebyshev"), rtol=1e-6)
    scaled = sk.AllPairs(zip=lambda a, b, w: w * a * b, reduce=add)
    np.testing.assert_allclose(scaled(A, B, 0.5).to_numpy(), 0.5 * (A @ B.T), rtol=1e-5,
                               atol=1e-5)
    assert scaled(A, B, 0.5).dtype == np.float32          # a Python float stays weak


@pytest.mark.parametrize("metric,f", [("euclidean", euclid), ("cityblock", cityblock)])
def test_generic_form_against_cdist(metric, f, rng):
    ap = sk.AllPairs(f)
    for n, m, d in SHAPES:
        A, B = mats(rng, n, m, d, np.float32)
        got = ap(A, B)
        assert got.shape == (n, m)
        np.testing.assert_allclose(got.to_numpy(), cdist(A, B, metric), rtol=1e-4, atol=1e-4)


def test_generic_form_grid_and_local_rows(rng):
    ap = sk.AllPairs(euclid)
    data = [mats(rng, n, m, d, np.float64) for n, m, d in SHAPES]
    for tm, tn, rm, rn, local in [(1, 1, 1, 1, 1), (8, 16, 2, 4, 1), (32, 32, 4, 4, 0)]:
        p = {"tm": tm, "tn": tn, "rm": rm, "rn": rn, "local_rows": local}
        for A, B in data:
            np.testing.assert_allclose(ap(A, B, params=p).to_numpy(), cdist(A, B), rtol=1e-12,
                                       atol=1e-12)


def test_generic_form_extra_argument(rng):
    A, B = mats(rng, 17, 33, 5, np.float32)
    w = rng.random(5).astype(np.float32)

    def weighted(a, b, w):
        s = 0.0
        for k in range(a.size):
            s += w[k] * (a[k] - b[k]) ** 2
        return s

    np.testing.assert_allclose(sk.AllPairs(weighted)(A, B, w).to_numpy(),
                               cdist(A, B, "sqeuclidean", w=w), rtol=1e-5, atol=1e-5)


def test_empty_and_zero_depth():
    ap = sk.AllPairs(zip=mul, reduce=add, identity=0)
    assert ap(np.zeros((0, 3), np.float32), np.zeros((4, 3), np.float32)).shape == (0, 4)
    z = ap(np.zeros((2, 0), np.float32), np.zeros((3, 0), np.float32))
    np.testing.assert_array_equal(z.to_numpy(), np.zeros((2, 3), np.float32))


def test_errors():
    a = np.ones((3, 4), np.float32)
    with pytest.raises(sk.ShapeError, match="number of columns"):
        sk.AllPairs(zip=mul, reduce=add)(a, np.ones((3, 5), np.float32))
    with pytest.raises(sk.ShapeError, match="2-D"):
        sk.AllPairs(zip=mul, reduce=add)(a, np.ones(4, np.float32))
    with pytest.raises(sk.ShapeError):
        sk.AllPairs(euclid, zip=mul, reduce=add)
    with pytest.raises(sk.ShapeError):
        sk.AllPairs(zip=mul)
    with pytest.raises(sk.ShapeError, match="zip muscle takes 2"):
        sk.AllPairs(zip=mul, reduce=add)(a, a, 3.0)


def test_matmul_example():
    path = Path(__file__).resolve().parent.parent / "examples" / "matmul.py"
    spec = importlib.util.spec_from_file_location("matmul_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    C = mod.main(["--quick"])
    assert C.shape == (96, 96)
