"""Python's indexing where it costs nothing (issue 10, item 11b): negative constant indices
into arrays count from the end, constant indices out of a captured table are refused at
translation, neighbourhood indices stay offsets; and the error classes that say so."""

from __future__ import annotations

import numpy as np
import pytest

import skelpy as sk

A = np.arange(8, dtype=np.float32)


def test_negative_constant_index_into_an_extra_counts_from_the_end():
    t = np.array([1, 2], np.float32)
    np.testing.assert_array_equal(sk.Map(lambda x, t: x + t[-1])(A, t).to_numpy(), A + 2)
    np.testing.assert_array_equal(sk.Map(lambda x, t: x + t[-2])(A, t).to_numpy(), A + 1)
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = sk.Zip(lambda x, y, m: x + y * m[-1, -2])
    np.testing.assert_array_equal(f(A, A, m).to_numpy(), A + A * m[-1, -2])
    w = sk.Vector(np.array([5, 6, 7], np.int32))
    np.testing.assert_array_equal(sk.Map(lambda i, w: w[-3] + i)(sk.IndexVector(4), w)
                                  .to_numpy(), np.arange(4) + 5)


def test_rows_and_stencil_vectors_count_from_the_end_too():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(8, dtype=np.float32).reshape(2, 4) * 10
    got = sk.AllPairs(lambda r, s: r[-1] - s[0])(a, b).to_numpy()
    np.testing.assert_array_equal(got, a[:, -1][:, None] - b[:, 0][None, :])
    m = np.arange(20, dtype=np.float32).reshape(4, 5)
    st = sk.Stencil(lambda nb, w: nb[-1, 0] * w[-1], border="wrap")
    want = np.roll(m, 1, axis=0) * 9
    np.testing.assert_array_equal(st(m, np.array([1, 2, 9], np.float32)).to_numpy(), want)


def test_neighbourhood_indices_stay_offsets():
    m = np.arange(20, dtype=np.float32).reshape(4, 5)
    got = sk.Stencil(lambda nb: nb[0, -1], border="nearest")(m).to_numpy()
    np.testing.assert_array_equal(got, np.concatenate([m[:, :1], m[:, :-1]], axis=1))


def test_captured_tables():
    table = (10, 20, 30)
    np.testing.assert_array_equal(sk.Map(lambda x: x + table[-1])(A).to_numpy(), A + 30)
    with pytest.raises(sk.TranslationError, match="index 3 is out of range") as info:
        sk.Map(lambda x: x + table[3])(A)
    assert "test_indexing.py" in str(info.value)
    with pytest.raises(sk.TranslationError, match="out of range"):
        sk.Map(lambda x: x + table[-4])(A)


def test_computed_index_past_the_end_is_caught_in_debug_mode():
    t = np.array([1, 2], np.float32)
    f = sk.Map(lambda x, t: x + t[5])
    with sk.debug(), pytest.raises(sk.BoundsError, match=r"index 5 of `t\[5\]`"):
        f(A, t)


def test_error_classes():
    assert issubclass(sk.BoundsError, IndexError) and issubclass(sk.BoundsError,
                                                                 sk.SkelpyError)
    assert issubclass(sk.CallError, TypeError) and issubclass(sk.CallError, sk.SkelpyError)
    for fold in (sk.Reduce(lambda a, b: a + b, 0), sk.Scan(lambda a, b: a + b, 0)):
        with pytest.raises(sk.CallError, match="test_indexing.py"):     # issue 10, item 12
            fold(A, A)
    v = sk.Vector(A)
    m = sk.Matrix(np.zeros((2, 3), np.float32))
    for bad in (lambda: v[8], lambda: v[-9], lambda: m[2, 0], lambda: m[0, 1, 2],
                lambda: v.__setitem__(8, 1.0), lambda: m[5]):
        with pytest.raises(sk.BoundsError):
            bad()
    np.testing.assert_array_equal(v.to_numpy(), A)
