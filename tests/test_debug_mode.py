"""Debug mode (issue 10, item 8): ``with sk.debug():`` compiles every array, row and
neighbourhood read with a bounds check; a read out of range is a BoundsError naming the muscle's
file, line, the read and the offending index, never a crash or a silent wrong answer. Off by
default, and then the generated kernels are the normal ones."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import skelpy as sk
from skelpy import tuner

HERE = "test_debug_mode.py"
A = np.arange(10, dtype=np.float32)
T = np.array([1, 2], np.float32)


def _line(fn, offset: int) -> str:
    return f"{HERE}:{fn.__code__.co_firstlineno + offset} ({fn.__name__})"


def far_read(i, v):
    return v[i + 100000000]


def off_by_one(x, v):
    s = x
    for k in range(len(v) + 1):
        s += v[k]
    return s


def test_far_read_is_an_error_not_a_crash():
    with sk.debug(), pytest.raises(sk.BoundsError) as info:
        sk.Map(far_read)(sk.IndexVector(10), A)
    msg = str(info.value)
    # the index of one offending read (on a GPU not necessarily the first work-item's)
    assert _line(far_read, 1) in msg and re.search(r"index 10000000\d\b", msg)
    assert "`v[i + 100000000]`" in msg and "0..9" in msg
    assert isinstance(info.value, IndexError) and isinstance(info.value, sk.SkelpyError)


def test_off_by_one_in_a_loop():
    f = sk.Map(off_by_one)
    with sk.debug(), pytest.raises(sk.BoundsError, match=r"index 10 of `v\[k\]`") as info:
        f(A, A)
    assert _line(off_by_one, 3) in str(info.value)


def test_constant_index_past_the_end_of_an_extra():
    f = sk.Map(lambda x, t: x + t[5])
    with sk.debug(), pytest.raises(sk.BoundsError, match=r"index 5 of `t\[5\]`.*0\.\.1"):
        f(A, T)
    # Zip, a Vector extra, and a Matrix extra indexed past its columns (inside its size)
    z = sk.Zip(lambda x, y, m: x + y + m[1, 3])
    with sk.debug(), pytest.raises(sk.BoundsError, match=r"column index 3 of `m\[1, 3\]`"):
        z(A, sk.Vector(A), np.ones((2, 3), np.float32))
    with sk.debug():
        got = z(A, sk.Vector(A), np.arange(8, dtype=np.float32).reshape(2, 4)).to_numpy()
    np.testing.assert_array_equal(got, A + A + 7)


def test_empty_extra_is_read_as_nothing():
    with sk.debug(), pytest.raises(sk.BoundsError, match="empty"):
        sk.Map(lambda x, t: x + t[0])(A, np.zeros(0, np.float32))


def test_captured_tables_in_debug_mode():
    table = (10.0, 20.0, 30.0)
    f = sk.Map(lambda i: table[i - 1])             # i - 1 == -1 reads the last, as in Python
    np.testing.assert_array_equal(f(sk.IndexVector(3)).to_numpy(), [30, 10, 20])
    with sk.debug():
        np.testing.assert_array_equal(f(sk.IndexVector(3)).to_numpy(), [30, 10, 20])
        with pytest.raises(sk.BoundsError, match=r"index 3 of `table\[i - 1\]`.*-3\.\.2"):
            f(sk.IndexVector(5))
    with pytest.raises(sk.TranslationError, match="out of range"):
        sk.Map(lambda x: x + table[3])(A)             # a constant: at translation


def helper_reads(v, k):
    return v[k + 1]


def calls_helper(x, v):
    return x + helper_reads(v, 9)


def test_reads_in_called_functions():
    with sk.debug(), pytest.raises(sk.BoundsError) as info:
        sk.Map(calls_helper)(A, A)
    assert _line(helper_reads, 1) in str(info.value) and "index 10" in str(info.value)


def test_stencil_extras_in_debug_mode():
    m = np.arange(30, dtype=np.float32).reshape(5, 6)
    st = sk.Stencil(lambda nb, w: nb[0, 0] * w[2] + nb[0, 1])
    with sk.debug(), pytest.raises(sk.BoundsError, match=r"index 2 of `w\[2\]`"):
        st(m, np.ones(2, np.float32))
    with sk.debug():
        got = st(m, np.array([0, 0, 2], np.float32)).to_numpy()
    want = 2 * m + np.concatenate([m[:, 1:], m[:, -1:]], axis=1)
    np.testing.assert_array_equal(got, want)


def generic_dist(a, b):
    s = 0.0
    for k in range(a.size + 1):
        d = a[k] - b[k]
        s += d * d
    return s


def test_allpairs_rows_and_zip_extras():
    A2 = np.arange(12, dtype=np.float32).reshape(3, 4)
    with sk.debug(), pytest.raises(sk.BoundsError, match=r"index 4 of `a\[k\]`.*0\.\.3"):
        sk.AllPairs(generic_dist)(A2, A2)
    ap = sk.AllPairs(zip=lambda a, b, w: a * b * w[1], reduce=lambda a, b: a + b)
    with sk.debug(), pytest.raises(sk.BoundsError, match=r"`w\[1\]`"):
        ap(A2, A2, np.ones(1, np.float32))
    with sk.debug():
        got = ap(A2, A2, np.array([0, 2], np.float32)).to_numpy()
    np.testing.assert_allclose(got, 2 * A2 @ A2.T)


def test_mapreduce_extras():
    mr = sk.MapReduce(lambda i, v: v[i + 1], lambda a, b: a + b, 0, inputs=1)
    x = np.arange(100, dtype=np.float32)
    with sk.debug(), pytest.raises(sk.BoundsError, match=r"index 100 of `v\[i \+ 1\]`"):
        mr(sk.IndexVector(100), x)
    with sk.debug():
        assert mr(sk.IndexVector(99), x) == x[1:].sum()


def test_in_range_muscles_give_the_normal_results():
    x = np.linspace(-2, 3, 37).astype(np.float32)
    m = np.arange(42, dtype=np.float32).reshape(6, 7)
    calls = [
        lambda: sk.Map(lambda a, t: a * t[0] + t[-1])(x, T),
        lambda: sk.Zip(lambda a, b: a - b)(x, x[::-1].copy()),
        lambda: sk.Stencil(lambda nb: nb[-1, 0] + nb[1, 1], border="wrap")(m),
        lambda: sk.Reduce(lambda a, b: a + b, 0)(x),
        lambda: sk.Scan(lambda a, b: a + b, 0)(x),
        lambda: sk.AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b)(m, m),
    ]
    for call in calls:
        normal = np.asarray(call())
        with sk.debug():
            checked = np.asarray(call())
        np.testing.assert_array_equal(checked, normal)


def test_off_by_default_and_normal_kernels_unchanged():
    assert not sk.debug.__module__.startswith("tests")
    f = sk.Map(lambda a, t: a + t[1])
    normal = f.source(A, T)
    assert "skp_check" not in normal and "skp_dbg" not in normal
    with sk.debug():
        checked = f.source(A, T)
        assert "skp_check" in checked and "skp_dbg" in checked
        f(A, T)
    assert f.source(A, T) == normal
    np.testing.assert_array_equal(f(A, T).to_numpy(), A + 2)
    with sk.debug(False):
        assert f.source(A, T) == normal
    with sk.debug(True):
        assert f.source(A, T) == checked


def test_a_failed_call_leaves_everything_usable():
    v = sk.Vector(A)
    f = sk.Map(lambda x, t: x + t[2])
    with sk.debug(), pytest.raises(sk.BoundsError):
        f(v, T)
    np.testing.assert_array_equal(v.to_numpy(), A)
    np.testing.assert_array_equal(f(v, np.array([0, 0, 5], np.float32)).to_numpy(), A + 5)


def test_debug_calls_are_never_measured(monkeypatch):
    modes = []
    real = tuner.execute

    def spy(req):
        modes.append(tuner.get_mode())
        return real(req)

    monkeypatch.setattr(tuner, "execute", spy)
    f = sk.Map(lambda x, t: x * t[0])
    with sk.tuning("online"):
        f(A, T)
        with sk.debug():
            f(A, T)
    assert modes == ["online", "off"]


def test_build_warnings_show_the_numbered_source():
    src = "float func(float x) {\n    int k = 4294967299L;\n    return x * k;\n}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = sk.Map(src)(A).to_numpy()
    np.testing.assert_array_equal(got, A * 3)
    shown = [w for w in caught if issubclass(w.category, sk.BuildWarning)]
    assert len(shown) == 1, [str(w.message) for w in caught]      # once per program
    text = str(shown[0].message)
    assert "warning" in text and "--- generated source ---" in text
    assert "int k = 4294967299L;" in text and "    1 | " in text


def test_style_notes_are_not_build_warnings():
    # notes on the generated code's style are no news to the user: x != x is Python's NaN
    # test, "self-comparison always evaluates to false" for integers (the array style's argmin),
    # and `if ((x == 3.25f))` is "equality comparison with extraneous parentheses". A captured
    # salt makes the programs new to every cache, so that the compiler's log is there to read.
    salt = time.time_ns() % 1_000_003

    def nan_test(x):
        t = x != x
        return x + salt if t else x - salt

    def if_equal(x):
        y = x
        if x == 3.25:
            y = x + salt
        return y

    ints = np.arange(7, dtype=np.int32)
    floats = ints + np.float32(0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sk.BuildWarning)
        np.testing.assert_array_equal(sk.Map(nan_test)(ints).to_numpy(), ints - salt)
        np.testing.assert_array_equal(sk.Map(if_equal)(floats).to_numpy(),
                                      np.where(floats == 3.25, floats + salt, floats))
        assert int(sk.Vector(ints[::-1].copy()).argmin()) == 6


def test_array_style_in_debug_mode():
    # fused expressions read element-wise (their shapes are checked at the line in every
    # mode), so debug mode has nothing to check in them: same results, and an index out of a
    # view's range is a BoundsError as everywhere
    x = np.arange(11, dtype=np.float32)
    y = np.linspace(0, 1, 11, dtype=np.float32)
    vx, vy = sk.Vector(x), sk.Vector(y)
    with sk.debug():
        np.testing.assert_allclose(np.asarray(2 * vx[1:] + vy[:-1] ** 2),
                                   2 * x[1:] + y[:-1] ** 2, rtol=1e-6)
        assert float((vx * vy).sum()) == pytest.approx(float((x * y).sum()), rel=1e-6)
        assert int(vx[::2].argmax()) == 5
        with pytest.raises(sk.BoundsError):
            vx[2:][9]
        with pytest.raises(sk.ShapeError):
            vx[3:] + vy


def test_environment_variable_turns_it_on(tmp_path):
    script = tmp_path / "env_debug.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import skelpy as sk
        try:
            sk.Map(lambda x, t: x + t[7])(np.ones(4, np.float32), np.ones(2, np.float32))
        except sk.BoundsError as exc:
            print("BOUNDS", exc)
    """))
    env = dict(os.environ, SKELPY_DEBUG="1")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert "BOUNDS" in out.stdout and "index 7" in out.stdout, out.stdout + out.stderr


def test_opencl_c_muscle_reads():
    f = sk.Map("""float func(float x, float* t) {
        return x + SKELPY_GET(t, 3);
    }""")
    np.testing.assert_array_equal(f(A, np.arange(5, dtype=np.float32)).to_numpy(), A + 3)
    with sk.debug(), pytest.raises(sk.BoundsError,
                                   match=r"C line 2\): index 3 of `SKELPY_GET\(t, 3\)`"):
        f(A, T)


def test_nvidia_noinline_note_is_not_a_build_warning():
    # NVIDIA's compiler says this of every kernel in some builds (seen on an H100): no news
    from types import SimpleNamespace

    from skelpy.build_log import build_warning

    class Program:
        def __init__(self, log):
            self.log = log

        def get_build_info(self, device, what):
            return self.log

    dev = SimpleNamespace(cl_device=None, name="NVIDIA H100")
    note = ("(): Warning: Function skelpy_stencil is a kernel, so overriding noinline "
            "attribute. The function may be inlined when called.")
    assert build_warning(Program(note), dev, "src", "") is None
    other = build_warning(Program(note + "\n<source>:3:1: warning: unused variable 'x'"),
                          dev, "src", "")
    assert other is not None and "unused variable" in str(other)
