"""Containers cannot disagree with themselves (issue 10): what a container shows is what a
skeleton computes from, whichever public path wrote it; element and slice access moves only
what it touches."""

from __future__ import annotations

import copy as copying
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import skelpy as sk
from skelpy.containers import MatrixRow

inc = sk.Map(lambda x: x + 1)


def device_only(arr) -> sk.Vector | sk.Matrix:
    """A container whose only copy is on the device (a skeleton result) holding ``arr``."""
    cls = sk.Vector if np.ndim(arr) == 1 else sk.Matrix
    out = sk.Map(lambda x: x)(cls(arr))
    assert "on=device" in repr(out)
    return out


# -- the reproducers of issue 10 --------------------------------------------------------------

def test_repro1_writing_into_to_numpy_fails_loudly_and_writes_through_the_container_work():
    x = sk.Vector(np.full(4, 2, np.int32))
    y = inc(x)
    arr = y.to_numpy()
    with pytest.raises(ValueError, match="read-only"):
        arr[0] = -999
    np.testing.assert_array_equal(y.to_numpy(), [3, 3, 3, 3])
    np.testing.assert_array_equal(inc(y).to_numpy(), [4, 4, 4, 4])
    y[0] = -999                                         # the container's own path
    np.testing.assert_array_equal(y.to_numpy(), [-999, 3, 3, 3])
    np.testing.assert_array_equal(inc(y).to_numpy(), [-998, 4, 4, 4])
    with y.host_edit() as a:
        a[1] = 50
    np.testing.assert_array_equal(inc(y).to_numpy(), [-998, 51, 4, 4])
    np.testing.assert_array_equal(arr, [3, 3, 3, 3])   # a snapshot never changes


def test_repro2_a_vector_is_a_snapshot_of_its_input():
    a = np.ones(5)
    va = sk.Vector(a)
    np.testing.assert_array_equal(inc(va).to_numpy(), np.full(5, 2.0))
    a[:] = 10
    np.testing.assert_array_equal(np.asarray(va), np.ones(5))
    np.testing.assert_array_equal(inc(va).to_numpy(), np.full(5, 2.0))
    assert a[0] == 10                                   # the caller's array is untouched


def test_repro3_row_proxies_and_slices_write_through():
    m = sk.Matrix(np.zeros((3, 4), np.int32))
    inc(m)
    m[1][2] = 7                                         # SkelCL style
    assert inc(m)[1, 2] == 8
    assert m[1, 2] == 7 and m[1][2] == 7
    m = inc(m)                                          # now only on the device
    m[2][1:3] = [5, 6]
    m[0][-1] = 9
    want = np.ones((3, 4), np.int32)
    want[1, 2] = 8
    want[2, 1:3] = [5, 6]
    want[0, -1] = 9
    np.testing.assert_array_equal(m.to_numpy(), want)
    np.testing.assert_array_equal(inc(m).to_numpy(), want + 1)
    # slices are views (issue 15): writes through them reach the base, as in NumPy
    v = sk.Vector(np.arange(6, dtype=np.int32))
    v[1:3][0] = 50
    m[0:2][0][0] = 5
    want[0, 0] = 5
    np.testing.assert_array_equal(v.to_numpy(), [0, 50, 2, 3, 4, 5])
    np.testing.assert_array_equal(inc(v).to_numpy(), [1, 51, 3, 4, 5, 6])
    np.testing.assert_array_equal(inc(m).to_numpy(), want + 1)


def test_repro4_a_vector_of_a_vector_is_an_independent_copy():
    vi = sk.Vector(np.arange(5, dtype=np.int32))
    inc(vi)                                             # vi has a device copy too
    copy = sk.Vector(vi)
    vi[0] = 0
    vi[1] = 100
    np.testing.assert_array_equal(copy.to_numpy(), np.arange(5))
    np.testing.assert_array_equal(inc(copy).to_numpy(), np.arange(5) + 1)
    copy[2] = -1                                        # and the other way round
    np.testing.assert_array_equal(vi.to_numpy(), [0, 100, 2, 3, 4])
    np.testing.assert_array_equal(inc(vi).to_numpy(), [1, 101, 3, 4, 5])
    d = device_only(np.arange(5, dtype=np.int32))
    dc = d.copy()                                       # a copy of a result stays there
    assert "on=device" in repr(dc)
    shallow, deep = copying.copy(d), copying.deepcopy(d)
    d[0] = 42
    assert dc[0] == 0 and inc(dc)[0] == 1
    assert shallow[0] == 0 and deep[0] == 0


def test_repro13_element_and_slice_reads_move_only_what_they_read(stats, rt):
    n = 10**6 + 3
    y = inc(sk.Vector(np.arange(n, dtype=np.float32)))
    rt.finish()
    stats.reset()
    assert y[n - 1] == np.float32(n)
    assert stats.download_bytes == 4
    np.testing.assert_array_equal(y[10:20], np.arange(11, 21, dtype=np.float32))
    np.testing.assert_array_equal(y[-5:], np.arange(n - 4, n + 1, dtype=np.float32))
    np.testing.assert_array_equal(y[::100_000], np.arange(1, n + 1, 100_000, dtype=np.float32))
    assert stats.download_bytes == 4 + 40 + 20 + 11 * 4
    m = inc(sk.Matrix(np.arange(2000 * 3000, dtype=np.float32).reshape(2000, 3000)))
    rt.finish()
    stats.reset()
    col = m[:, 7]
    np.testing.assert_array_equal(col, np.arange(2000, dtype=np.float32) * 3000 + 8)
    assert stats.download_bytes == 2000 * 4
    np.testing.assert_array_equal(np.asarray(m[5]), np.arange(3000, dtype=np.float32) + 15001)
    assert stats.download_bytes == (2000 + 3000) * 4
    assert "on=device" in repr(y) and "on=device" in repr(m)


def test_writes_into_a_device_copy_move_only_what_they_write(stats, rt):
    n = 10**6
    y = inc(sk.Vector(np.zeros(n, np.int32)))
    rt.finish()
    stats.reset()
    y[n - 1] = 7
    y[10:14] = [1, 2, 3, 4]
    assert stats.upload_bytes == 4 + 16 and stats.download_bytes == 0
    assert "on=device" in repr(y)
    want = np.ones(n, np.int32)
    want[n - 1] = 7
    want[10:14] = [1, 2, 3, 4]
    np.testing.assert_array_equal(inc(y).to_numpy(), want + 1)
    np.testing.assert_array_equal(y.to_numpy(), want)


# -- every basic index, read and written on the device, against NumPy -------------------------

def _slices(n):
    pts = [None, *sorted({0, 1, n // 2, n - 1, n, -1, -n, n + 3, -n - 2})]
    for a, b, s in itertools.product(pts, pts, (None, 1, 2, 3, -1, -2, 17, -40)):
        yield slice(a, b, s)


def _keys(shape):
    if len(shape) == 1:
        n = shape[0]
        yield from (i for i in (0, n - 1, -1, -n) if -n <= i < n)
        yield from _slices(n)
        return
    r, c = shape
    rows = [s for k, s in enumerate(_slices(r)) if k % 17 == 0] + [0, r - 1, -1]
    cols = [s for k, s in enumerate(_slices(c)) if k % 11 == 0] + [0, c - 1, -c]
    yield from itertools.product(rows, cols)
    yield from (s for k, s in enumerate(_slices(r)) if k % 3 == 0)


@pytest.mark.parametrize("shape,dtype", [((1,), np.int32), ((37,), np.float32),
                                         ((64,), np.uint8), ((29,), np.bool_),
                                         ((5, 7), np.int32), ((9, 40), np.float32),
                                         ((4, 70), np.int8), ((1, 1), np.float32)])
def test_basic_indices_on_the_device_agree_with_numpy(shape, dtype, rng):
    ref = (rng.integers(-100, 100, size=shape) % (2 if dtype == np.bool_ else 1000)).astype(dtype)
    dev = device_only(ref)
    for key in _keys(shape):
        want = ref[key]
        got = dev[key]
        if isinstance(want, np.ndarray):             # slices are device views (issue 15)
            assert isinstance(got, (sk.Vector, sk.Matrix)), key
            assert got.dtype == want.dtype and got.shape == want.shape, key
            got = got.to_numpy()
            assert not got.flags.writeable, key
        elif len(shape) == 1 or isinstance(key, tuple):
            assert type(got) is type(want), key
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=str(key))
    assert "on=device" in repr(dev)
    for k, key in enumerate(_keys(shape)):
        sel_shape = np.shape(ref[key])
        value = (rng.integers(0, 100, size=sel_shape) % (2 if dtype == np.bool_ else 100)
                 ).astype(dtype) if k % 3 else dtype(k % 2)
        ref[key] = value
        dev[key] = value
    assert "on=device" in repr(dev)
    np.testing.assert_array_equal(dev.to_numpy(), ref)


@pytest.mark.parametrize("key,moved", [
    ((slice(None), slice(None, None, 20)), 8 * 2),        # a grid of elements: one 3-D copy
    ((slice(1, None, 3), slice(None, None, 20)), 3 * 2),
    ((slice(None), slice(20, -1, 17)), 8 * 18),           # no legal 3-D copy: rows' spans
    ((slice(None), slice(None, None, 2)), 8 * 39),        # small gaps move with the data
    ((slice(None, None, -2), slice(-2, 3, -1)), 4 * 35),  # a rectangle, read backwards
    ((3, slice(None, None, 30)), 2),
    ((slice(2, 6), slice(None)), 4 * 40),                 # whole rows: one contiguous run
])
def test_strided_parts_move_only_their_elements(key, moved, stats, rt):
    ref = np.arange(8 * 40, dtype=np.float32).reshape(8, 40)
    m = device_only(ref)
    rt.finish()
    stats.reset()
    np.testing.assert_array_equal(m[key], ref[key])
    assert stats.download_bytes == moved * 4
    value = -np.arange(ref[key].size, dtype=np.float32).reshape(ref[key].shape)
    m[key] = value
    ref[key] = value
    np.testing.assert_array_equal(m.to_numpy(), ref)


# -- the coherence model, path by path ----------------------------------------------------------

def test_reads_are_read_only_snapshots_and_np_array_is_a_writable_copy():
    v = sk.Vector(np.arange(6, dtype=np.float32))
    snap, view, part = v.to_numpy(), np.asarray(v), v[1:4].to_numpy()
    live = v[1:4]                                 # a slice is a view (issue 15): it follows v
    fancy, mask = v[[0, 2]], v[np.arange(6) > 3]
    for a in (snap, view, part, fancy, mask):
        assert not a.flags.writeable
        with pytest.raises(ValueError):
            a[0] = 100
    for a in (snap, view, part):
        with pytest.raises(ValueError):
            a.flags.writeable = True              # views cannot be unlocked either
    fancy.flags.writeable = True                  # copies can: they are the caller's
    fancy[0] = 100
    copy = np.array(v)
    copy[0] = 100                                 # a copy: the container does not change
    v[1:3] = -1
    v[0] = 7
    np.testing.assert_array_equal(snap, np.arange(6))
    np.testing.assert_array_equal(view, np.arange(6))
    np.testing.assert_array_equal(part, [1, 2, 3])
    np.testing.assert_array_equal(live.to_numpy(), [-1, -1, 3])
    np.testing.assert_array_equal(v.to_numpy(), [7, -1, -1, 3, 4, 5])
    np.testing.assert_array_equal(inc(v).to_numpy(), [8, 0, 0, 4, 5, 6])
    assert np.asarray(v, dtype=np.float64).flags.writeable
    assert np.asarray(v, copy=True).flags.writeable


def test_fancy_and_mask_writes_go_through_the_host():
    d = device_only(np.arange(10, dtype=np.int64))
    d[[1, 3, 3, -1]] = [10, 30, 31, 90]
    d[d.to_numpy() > 80] = 0
    d[np.array([True] + [False] * 9)] = 5
    want = np.arange(10)
    want[[1, 3, 3, -1]] = [10, 30, 31, 90]
    want[want > 80] = 0
    want[0] = 5
    np.testing.assert_array_equal(d.to_numpy(), want)
    np.testing.assert_array_equal(inc(d).to_numpy(), want + 1)


def test_host_edit_is_seen_by_skeletons_inside_and_after_the_block():
    v = device_only(np.zeros(5, np.int32))
    snap = v.to_numpy()
    with v.host_edit() as a:
        assert a.flags.writeable
        a[:] = 3
        np.testing.assert_array_equal(inc(v).to_numpy(), np.full(5, 4))
        a[0] = 9                                       # after a skeleton read the block
        np.testing.assert_array_equal(inc(v).to_numpy(), [10, 4, 4, 4, 4])
        inner = v.to_numpy()                           # a snapshot, even inside the block
        v[1] = 8
        assert a[1] == 8 and inner[1] == 3
    np.testing.assert_array_equal(snap, np.zeros(5))
    with pytest.raises(ValueError):
        a[0] = 1                                       # the block is over
    with pytest.raises(ValueError):
        a.flags.writeable = True
    np.testing.assert_array_equal(inc(v).to_numpy(), [10, 9, 4, 4, 4])
    with pytest.raises(RuntimeError), v.host_edit() as b:
        b[2] = 77
        raise RuntimeError("edits made before an error stay")
    np.testing.assert_array_equal(inc(v).to_numpy(), [10, 9, 78, 4, 4])


def test_matrix_rows_read_like_arrays_and_iterate():
    ref = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = device_only(ref)
    row = m[1]
    assert isinstance(row, MatrixRow) and row.shape == (4,) and len(row) == 4
    assert row.dtype == np.float32 and row.size == 4
    np.testing.assert_array_equal(np.asarray(row), ref[1])
    np.testing.assert_array_equal(row[1:3], ref[1, 1:3])
    np.testing.assert_array_equal(row == 5, ref[1] == 5)
    assert list(row) == list(ref[1])
    np.testing.assert_array_equal(sk.Vector(row).to_numpy(), ref[1])
    np.testing.assert_array_equal(np.array([np.asarray(r) for r in m]), ref)
    for i, r in enumerate(m):
        r[0] = -i                                      # iteration rows write through too
    ref[:, 0] = -np.arange(3)
    np.testing.assert_array_equal(inc(m).to_numpy(), ref + 1)
    with pytest.raises(IndexError):
        m[3]
    with pytest.raises(ValueError):
        bool(row)


def test_skeletons_reading_a_container_as_an_extra_argument_see_host_writes():
    e = sk.Vector(np.array([1, 2, 3], np.float32))
    f = sk.Map(lambda x, t: x + t[2])
    x = sk.Vector(np.zeros(4, np.float32))
    np.testing.assert_array_equal(f(x, e).to_numpy(), np.full(4, 3))
    e[2] = 10
    np.testing.assert_array_equal(f(x, e).to_numpy(), np.full(4, 10))
    with e.host_edit() as a:
        a[2] = 20
    np.testing.assert_array_equal(f(x, e).to_numpy(), np.full(4, 20))


def test_a_plain_ndarray_argument_is_not_copied_and_not_kept(stats, rt):
    a = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(inc(a).to_numpy(), a + 1)
    a[0] = 100                                         # the next call sees the new value
    np.testing.assert_array_equal(inc(a).to_numpy(), a + 1)
    assert a.flags.writeable                           # and the caller's array is as it was
    m = np.ones((4, 5), np.float32)
    kept = sk.Stencil(lambda nb: nb[0, 0], shape=0)(m, iterations=0)
    m[0, 0] = 5
    assert kept[0, 0] == 1                             # what a skeleton returns is its own


def test_construction_paths():
    assert sk.Vector([1, 2, 3]).dtype == np.int64
    np.testing.assert_array_equal(sk.Vector(sk.IndexVector(4)).to_numpy(), np.arange(4))
    np.testing.assert_array_equal(sk.Vector(np.arange(4), dtype=np.float32).to_numpy(),
                                  np.arange(4, dtype=np.float32))
    v = sk.Vector(np.arange(4, dtype=np.int32))
    w = sk.Vector(v, dtype=np.float64)
    assert w.dtype == np.float64
    z = sk.Matrix(shape=(2, 3), dtype=np.int8)
    np.testing.assert_array_equal(z.to_numpy(), np.zeros((2, 3)))
    f = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(sk.Matrix(f).to_numpy(), f)
    be = np.arange(3, dtype=">i4")
    assert sk.Vector(be).dtype == np.dtype(np.int32) and sk.Vector(be)[2] == 2
    with pytest.raises(sk.ShapeError):
        sk.Matrix(v)
    with pytest.raises(sk.ShapeError):
        sk.Vector(np.zeros((2, 2)))
    with pytest.raises(sk.DTypeError):
        sk.Vector(np.zeros(3, np.float16))
    with pytest.raises(sk.DTypeError):
        sk.Vector(["a", "b"])


def test_failed_writes_change_nothing():
    for v in (sk.Vector(np.arange(5, dtype=np.int8)), device_only(np.arange(5, dtype=np.int8))):
        snap = v.to_numpy()
        with pytest.raises(sk.DTypeError, match="int8"):
            v[0] = 300
        with pytest.raises(sk.DTypeError):
            v[1:3] = ["a", "b"]
        with pytest.raises(sk.ShapeError, match="broadcast"):
            v[1:3] = [1, 2, 3]
        with pytest.raises(sk.ShapeError):
            v[0:0] = [1, 2]
        with pytest.raises(IndexError):
            v[5] = 1
        with pytest.raises(IndexError):
            v[0, 0] = 1
        with pytest.raises(IndexError):
            v[[0, 9]] = 1
        np.testing.assert_array_equal(v.to_numpy(), snap)
        np.testing.assert_array_equal(inc(v).to_numpy(), snap + 1)


_TWO_DEVICES = """
import numpy as np, skelpy as sk
if len(sk.devices()) < 2:
    print("SKIP"); raise SystemExit
inc = sk.Map(lambda x: x + 1)
sk.use(0)
y = inc(sk.Vector(np.arange(10, dtype=np.int32)))      # lives on device 0
m = inc(sk.Matrix(np.zeros((3, 4), np.float32)))
sk.use(1)
assert y[3] == 4 and list(y[2:5]) == [3, 4, 5]          # parts read from device 0
y[0] = 100
m[1][2] = 7
z = inc(y)                                              # moves to device 1 through the host
assert z.to_numpy().tolist() == [101] + list(range(3, 12)), z.to_numpy()
assert y.to_numpy().tolist() == [100] + list(range(2, 11))
want = np.ones((3, 4), np.float32); want[1, 2] = 7
assert (inc(m).to_numpy() == want + 1).all() and (m.to_numpy() == want).all()
print("OK")
"""


def test_containers_follow_a_change_of_device(tmp_path):
    """Written on one device, read and computed on another (PoCL's two CPU devices)."""
    script = tmp_path / "two_devices.py"
    script.write_text(_TWO_DEVICES)
    env = {**os.environ, "POCL_DEVICES": "pthread pthread"}
    env.pop("SKELPY_DEVICE", None)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    if "SKIP" in out.stdout:
        pytest.skip("one OpenCL device only")
    assert "OK" in out.stdout


def test_rectangles_never_reach_past_the_buffer_as_nvidia_counts_them(monkeypatch):
    """NVIDIA refuses (INVALID_VALUE) a rectangle whose last row, counted as a whole pitch,
    would pass the buffer's end, although OpenCL allows it: seen with ``y[::100000]`` on a
    10^6 + 1 element vector. Every rectangle skelpy issues must fit by that stricter count."""
    import pyopencl as cl

    real = cl.enqueue_copy
    n = 1_000_001
    nbytes = n * 4
    seen = []

    def checked(queue, dst, src, **kw):
        if "region" in kw:
            x, y, z = kw["buffer_origin"]
            row, sl = kw["buffer_pitches"]
            w, rows, planes = kw["region"]
            sl = sl or row * rows
            strict = z * sl + y * row + x + planes * sl if planes > 1 else y * row + x + rows * row
            seen.append(strict)
            assert strict <= nbytes
        return real(queue, dst, src, **kw)

    y = sk.Map(lambda v: v + 1)(np.arange(n, dtype=np.float32))
    monkeypatch.setattr(cl, "enqueue_copy", checked)
    np.testing.assert_array_equal(y[::100000], np.arange(n, dtype=np.float32)[::100000] + 1)
    m = sk.Map(lambda v: v * 2)(np.arange(1001 * 7, dtype=np.int32).reshape(1001, 7))
    np.testing.assert_array_equal(m[::10, 6], (np.arange(1001 * 7).reshape(1001, 7) * 2)[::10, 6])
    assert seen
