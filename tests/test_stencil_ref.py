"""Independent references and muscle factories shared by the stencil tests (no tests here)."""

from __future__ import annotations

import functools

import numpy as np
import scipy.ndimage as ndi

import skelpy as sk

MODES = ["constant", "nearest", "wrap", "reflect", "mirror"]
# np.pad spells scipy.ndimage's modes differently; it extends periodically for any pad width.
PAD_MODES = {"constant": "constant", "nearest": "edge", "wrap": "wrap", "reflect": "symmetric",
             "mirror": "reflect"}


def as_shape(shape) -> sk.Shape:
    if isinstance(shape, sk.Shape):
        return shape
    if isinstance(shape, int):
        return sk.Shape(north=shape, south=shape, east=shape, west=shape)
    n, s, e, w = shape
    return sk.Shape(north=n, south=s, east=e, west=w)


def pad_correlate(a, w, shape, mode, cval=0.0) -> np.ndarray:
    """sum_{dr, dc} w[dr + N, dc + W] * a[r + dr, c + dc] in float64, the border taken from
    np.pad (an implementation independent of scipy and of skelpy)."""
    s = as_shape(shape)
    kw = {"constant_values": cval} if mode == "constant" else {}
    p = np.pad(a.astype(np.float64), ((s.north, s.south), (s.west, s.east)),
               mode=PAD_MODES[mode], **kw)
    rows, cols = a.shape
    out = np.zeros(a.shape, np.float64)
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            if w[i, j]:
                out += float(w[i, j]) * p[i:i + rows, j:j + cols]
    return out


def scipy_correlate(a, w, shape, mode, cval=0.0) -> np.ndarray:
    s = as_shape(shape)
    origin = (s.north - w.shape[0] // 2, s.west - w.shape[1] // 2)
    return ndi.correlate(a.astype(np.float64), w.astype(np.float64), mode=mode, cval=cval,
                         origin=origin)


def scipy_reads_in_bounds(a_shape, shape, mode) -> bool:
    """scipy.ndimage.correlate's 'reflect' maps offsets x <= -4n with x % 2n == 0 to index -1
    (NI_InitFilterOffsets: ``cc = sz2 * (int)(-cc / sz2) + cc`` gives 0, then ``-cc - 1``),
    reading memory outside the array. Only compare with scipy where that cannot happen."""
    s = as_shape(shape)
    rows, cols = a_shape
    if mode != "reflect":
        return True
    return not ((rows > 1 and s.north >= 4 * rows) or (cols > 1 and s.west >= 4 * cols))


def weights_for(shape, rng, dtype, density=1.0) -> np.ndarray:
    s = as_shape(shape)
    w = np.zeros((s.north + s.south + 1, s.west + s.east + 1))
    if np.dtype(dtype).kind == "f":
        w[:] = rng.standard_normal(w.shape)
    else:
        w[:] = rng.integers(-3, 4, w.shape)
    if density < 1.0:
        w[rng.random(w.shape) > density] = 0
        # always touch the four corners and the centre so the whole halo is exercised
        for i, j in ((0, 0), (0, -1), (-1, 0), (-1, -1), (s.north, s.west)):
            w[i, j] = w[i, j] or 1
    return w


@functools.cache
def _weighted_cached(key):
    wbytes, wshape, wdtype, shape, border, cval, dense = key
    w = np.frombuffer(wbytes, dtype=wdtype).reshape(wshape)
    return _weighted(w, shape, border, cval, dense)


def weighted(w, shape, border, cval=0, dense=True) -> sk.Stencil:
    """A Stencil computing the correlation with ``w`` (cached, so tests share programs).

    dense: loops over the whole shape; sparse: loops over the nonzero taps through captured
    offset arrays (both give exact constant offsets to the translator)."""
    w = np.ascontiguousarray(w)
    key = (w.tobytes(), w.shape, w.dtype.str, as_shape(shape), border, cval, dense)
    return _weighted_cached(key)


def _weighted(w, shape, border, cval, dense):
    s = as_shape(shape)
    if dense:
        flat = w.ravel()
        n_, s_, w_, e_ = s.north, s.south, s.west, s.east
        width = w_ + e_ + 1
        zero = flat.dtype.type(0)

        def corr(nb):
            acc = zero
            for dr in range(-n_, s_ + 1):
                for dc in range(-w_, e_ + 1):
                    acc += flat[(dr + n_) * width + dc + w_] * nb[dr, dc]
            return acc

        return sk.Stencil(corr, shape=s, border=border, cval=cval)
    ii, jj = np.nonzero(w)
    drs = (ii - s.north).astype(np.int64)
    dcs = (jj - s.west).astype(np.int64)
    vals = w[ii, jj]
    k_ = len(vals)
    zero = vals.dtype.type(0)

    def sparse(nb):
        acc = zero
        for k in range(k_):
            acc += vals[k] * nb[drs[k], dcs[k]]
        return acc

    return sk.Stencil(sparse, shape=s, border=border, cval=cval)


def sample(rng, dtype, shape) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt == np.uint8:
        return rng.integers(0, 256, shape).astype(dt)
    return rng.integers(-1000, 1001, shape).astype(dt)


def assert_close(got, want, w=None, a=None, dtype=np.float32):
    got = np.asarray(got, dtype=np.float64)
    scale = 1.0
    if w is not None and a is not None and a.size:
        scale = float(np.abs(w).sum() * max(np.abs(a.astype(np.float64)).max(), 1.0))
    tol = {np.dtype(np.float32): 4e-6, np.dtype(np.float64): 1e-13}.get(np.dtype(dtype), 0.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale)


def check(st, a, w, shape, mode, cval=0.0, params=None, dtype=None):
    """Run ``st`` on ``a`` and compare with the np.pad reference and, where scipy reads in
    bounds, with scipy.ndimage.correlate."""
    got = st(a, params=params).to_numpy()
    want = pad_correlate(a, w, shape, mode, cval)
    assert got.shape == a.shape
    assert_close(got, want, w, a, dtype or a.dtype)
    if scipy_reads_in_bounds(a.shape, shape, mode):
        assert_close(got, scipy_correlate(a, w, shape, mode, cval), w, a, dtype or a.dtype)
