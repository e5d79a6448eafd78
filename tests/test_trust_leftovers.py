"""Three trust leftovers of earlier bug hunts, each reproduced first, then fixed:

1. Python ints computed from Python-int extras (``x8 + s // 4``) raise as NumPy 2 does where
   the value does not fit the integer type it meets (they wrapped), checked on the host at
   each call (``skelpy/muscle/host_ints.py``): compared with NumPy over values in and out of
   range for uint8, int8, int16 and uint16 through Map, Zip and Stencil;
2. every skeleton constructor's misuse (a muscle that is no function, too few parameters, a
   call that does not fit the signature) names the caller's file and line;
3. empty matrices through every forced path of a StencilSequence (fused, streamed, staged,
   ``iterations=``) give empty results of the staged shape and dtype; forced params on an
   empty input are still checked by name for every skeleton.

Few kernels (one per muscle and dtype; errors raise before any build), so the file runs
cold in a few seconds."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skelpy as sk

DTYPES = [np.uint8, np.int8, np.int16, np.uint16]
RNG = np.random.default_rng(7)
S = st.integers(-70_000, 70_000) | st.integers(-300, 300)


def _data(dtype, shape) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)


def _compare(run, reference) -> None:
    """skelpy's result equals NumPy's, or both raise OverflowError (skelpy's a SkelpyError
    naming the muscle's file and line)."""
    try:
        want = reference()
    except OverflowError:
        with pytest.raises(sk.SkelpyError, match=r"test_trust_leftovers\.py:\d+") as info:
            run()
        assert isinstance(info.value, OverflowError)
        return
    got = run()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# -- 1. computed Python ints -----------------------------------------------------------------

MAP_F = lambda x, s: x + s // 4                   # noqa: E731
ZIP_F = lambda a, b, s: a * (s % 300) - b        # noqa: E731
STENCIL_F = lambda nb, s: nb[0, 0] - (s - 1) // 3  # noqa: E731
MAP = sk.Map(MAP_F)
ZIP = sk.Zip(ZIP_F)
STENCIL = sk.Stencil(STENCIL_F, shape=0)
X = {dt: _data(dt, 11) for dt in DTYPES}
Y = {dt: _data(dt, 11) for dt in DTYPES}
M = {dt: _data(dt, (3, 5)) for dt in DTYPES}


def test_the_reported_case_raises_as_numpy():
    x8 = np.array([1, 2, 200], np.uint8)
    with pytest.raises(OverflowError):
        MAP_F(x8, 4000)                                   # NumPy 2: 1000 is no uint8
    with pytest.raises(sk.DTypeError, match=r"Python integer 1000 out of bounds for uint8.*"
                                            r"`s // 4` with s=4000"):
        MAP(sk.Vector(x8), 4000)
    np.testing.assert_array_equal(MAP(sk.Vector(x8), 1020).to_numpy(), MAP_F(x8, 1020))


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(DTYPES), s=S)
def test_map_matches_numpy(dtype, s):
    x = X[dtype]
    _compare(lambda: MAP(sk.Vector(x), s).to_numpy(), lambda: MAP_F(x, s))


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from([np.int8, np.uint16]), s=S)
def test_zip_matches_numpy(dtype, s):
    a, b = X[dtype], Y[dtype]
    _compare(lambda: ZIP(sk.Vector(a), sk.Vector(b), s).to_numpy(), lambda: ZIP_F(a, b, s))


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from([np.uint8, np.int16]), s=S)
def test_stencil_matches_numpy(dtype, s):
    m = M[dtype]
    _compare(lambda: STENCIL(sk.Matrix(m), s).to_numpy(), lambda: m - (s - 1) // 3)


def shifted(x, s, t):
    q = s // 4
    q += t                 # a local assigned at the top level, then changed
    if s < 0:              # followed on the host: it compares Python ints only
        return x
    return x + q


def test_locals_and_branches_the_host_follows():
    x = X[np.uint8]
    f = sk.Map(shifted)
    for s, t in [(900, 10), (1000, 10), (-5000, 1), (1020, -1), (4000, 0)]:
        _compare(lambda s=s, t=t: f(sk.Vector(x), s, t).to_numpy(),
                 lambda s=s, t=t: shifted(x, s, t))


def test_conditional_expressions_and_calls_the_host_follows():
    x = X[np.uint8]
    g = lambda x, s: x + (abs(s) // 8 if s < 2000 else max(s - 3990, -1))  # noqa: E731
    f = sk.Map(g)
    for s in [4000, 3000, -4000, 1000, -100, 2100, 4300]:
        _compare(lambda s=s: f(sk.Vector(x), s).to_numpy(), lambda s=s: g(x, s))


def _quarter(x, k):
    return x + k // 4


def test_called_functions_check_what_the_host_passes():
    """A called Python function's checks run with the arguments the host knows (``s - 3000``
    computed first), naming the function's own line."""
    x = X[np.uint8]
    g = lambda x, s: _quarter(x, s - 3000)             # noqa: E731
    f = sk.Map(g)
    for s in [4000, 40, 3500, 4100]:
        _compare(lambda s=s: f(sk.Vector(x), s).to_numpy(), lambda s=s: g(x, s))
    line = inspect.getsourcelines(_quarter)[1] + 1
    with pytest.raises(OverflowError, match=rf"test_trust_leftovers\.py:{line} \(_quarter\)"):
        f(sk.Vector(x), 40)


def test_deferred_calls_are_checked_when_made():
    """``sk.lazy()``: the fused kernel calls the muscle as a helper; the call checks."""
    x = sk.Vector(X[np.uint8])
    with sk.lazy():
        ok = MAP(x, 400) * 2
        with pytest.raises(OverflowError, match="`s // 4` with s=4000"):
            MAP(x, 4000)
        with pytest.raises(OverflowError, match=r"test_trust_leftovers\.py:\d+.*Python "
                                                "integer 4000 out of bounds for uint8"):
            sk.Map(lambda x, s: x + s)(x, 4000)
    np.testing.assert_array_equal(ok.to_numpy(), (X[np.uint8] + 100) * 2)


def test_python_errors_and_the_64_bit_limit():
    x = X[np.uint8]
    div_f = lambda x, s: x + s // (s - 7)           # noqa: E731
    with pytest.raises(ZeroDivisionError):
        div_f(x, 7)                                 # Python's own error
    div = sk.Map(div_f)
    with pytest.raises(sk.DTypeError, match=r"test_trust_leftovers\.py:\d+.*`s // \(s - 7\)` "
                                            "divides a Python integer by zero") as info:
        div(sk.Vector(x), 7)
    assert isinstance(info.value, ZeroDivisionError)
    # NumPy computes s * s exactly (2**80) and adds it to float32; a kernel has 64 bits
    big = sk.Map(lambda x, s: np.float32(x) + s * s)
    with pytest.raises(sk.DTypeError, match=r"Python integer 1208925819614629174706176 does "
                                            "not fit int64") as info:
        big(sk.Vector(x), 2**40)
    assert isinstance(info.value, OverflowError)
    np.testing.assert_array_equal(big(sk.Vector(x), 3000).to_numpy(),
                                  np.float32(x) + 3000 * 3000)


def test_builtin_max_with_a_computed_int_as_with_a_constant():
    x = X[np.uint8]
    with pytest.raises(sk.TranslationError, match="out of bounds for uint8"):
        sk.Map(lambda x: max(x, 1000))(sk.Vector(x))
    f = sk.Map(lambda x, s: max(x, s // 4))
    with pytest.raises(sk.DTypeError, match="Python integer 1000 out of bounds for uint8"):
        f(sk.Vector(x), 4000)
    np.testing.assert_array_equal(f(sk.Vector(x), 400).to_numpy(),
                                  np.maximum(x, np.uint8(100)))


def test_values_numpy_does_not_check_are_left_alone():
    """``where`` does what the installed NumPy does with a Python int its type cannot hold
    (2.4 converts it as ``astype`` does, wrapping; 2.5 raises), and a comparison with an
    out-of-range Python int is exact in NumPy 2."""
    x = X[np.uint8]
    w = sk.Map(lambda x, s: np.where(x > 100, s // 4, x))
    try:
        want = np.where(x > 100, 1000, x).astype(np.uint8)
    except OverflowError:
        with pytest.raises(OverflowError):
            w(sk.Vector(x), 4000)
    else:
        np.testing.assert_array_equal(w(sk.Vector(x), 4000).to_numpy(), want)
    c = sk.Map(lambda x, s: x < s // 4)
    np.testing.assert_array_equal(c(sk.Vector(x), 4000).to_numpy(), x < 1000)


def test_repeat_calls_check_every_call():
    """The repeat-call shortcut skips argument classification: a muscle with checks never
    takes it, so the tenth call with a bad value raises like the first."""
    x = sk.Vector(X[np.uint8])
    m = sk.Matrix(M[np.uint8])
    for _ in range(3):
        MAP(x, 400)
        STENCIL(m, 40)
    with pytest.raises(OverflowError):
        MAP(x, 4000)
    with pytest.raises(OverflowError):
        STENCIL(m, -4000)
    # a Python int passed in the type it meets is checked as it is converted: such a muscle
    # keeps the shortcut
    plain = sk.Map(lambda x, k: x + k)
    plain(x, 3)
    plain(x, 4)
    assert plain._fast is not None
    with pytest.raises(sk.DTypeError, match="Python integer 4000 out of bounds for uint8"):
        plain(x, 4000)


# -- 2. constructors name the caller ---------------------------------------------------------

def _line() -> str:
    return f"test_trust_leftovers.py:{inspect.currentframe().f_back.f_lineno} "


def _callee(a, b, c):
    return a


CONSTRUCTORS = [
    ("Map", lambda: sk.Map(None), sk.TranslationError),
    ("Zip", lambda: sk.Zip(3.5), sk.TranslationError),
    ("Reduce", lambda: sk.Reduce(3, identity=0), sk.TranslationError),
    ("Scan", lambda: sk.Scan([1], identity=0), sk.TranslationError),
    ("AllPairs", lambda: sk.AllPairs(zip=3, reduce=_callee), sk.TranslationError),
    ("Stencil", lambda: sk.Stencil(5), sk.TranslationError),
    ("Reduce", lambda: sk.Reduce(_callee), sk.CallError),           # no identity
    ("Scan", lambda: sk.Scan(_callee, 0, bogus=1), sk.CallError),   # an unknown keyword
    ("Stencil", lambda: sk.Stencil(_callee, border="bogus"), sk.ParameterError),
]


@pytest.mark.parametrize("kind, build, cls", CONSTRUCTORS)
def test_constructor_misuse_names_the_caller(kind, build, cls):
    with pytest.raises(cls) as info:
        build()
    line = inspect.getsourcelines(build)[1]
    assert f"test_trust_leftovers.py:{line} " in str(info.value)
    assert isinstance(info.value, sk.SkelpyError)


ARITY = [
    (lambda: sk.Map(lambda: 1), "at least 1"),
    (lambda: sk.Zip(lambda a: a), "at least 2"),
    (lambda: sk.Reduce(_callee, identity=0), "exactly 2"),
    (lambda: sk.Scan(lambda a: a, identity=0), "exactly 2"),
    (lambda: sk.AllPairs(lambda a: a), "at least 2"),
    (lambda: sk.AllPairs(zip=lambda a, b: a * b, reduce=_callee), "exactly 2"),
    (lambda: sk.Stencil(lambda: 1), "at least 1"),
]


@pytest.mark.parametrize("build, want", ARITY)
def test_wrong_arity_is_an_error_at_construction(build, want):
    with pytest.raises(sk.CallError, match=want) as info:
        build()
    assert f"test_trust_leftovers.py:{inspect.getsourcelines(build)[1]} " in str(info.value)


def test_muscle_defined_elsewhere_names_both():
    """A muscle from another line: the message names the muscle's line and the caller's."""
    here = _line()
    with pytest.raises(sk.CallError) as info:
        sk.Scan(_callee, identity=0)
    text = str(info.value)
    where = f"test_trust_leftovers.py:{inspect.getsourcelines(_callee)[1]} "
    assert where in text and f":{int(here.split(':')[1]) + 2} " in text


# -- 3. empty inputs through every forced path -----------------------------------------------

@pytest.fixture(scope="module")
def sequence():
    a = sk.Stencil(lambda nb: nb[-1, 0] + nb[1, 0], shape=1, border="nearest")
    b = sk.Stencil(lambda nb: nb[0, -1] * 0.5 + nb[0, 1], shape=1, border="reflect")
    return a >> b                     # int16 -> float64 (a weak float meets int16)


FORCED = [{"fuse": 0}, {"fuse": 1}, {"fuse": 2},
          {"fuse": 1, "fu_wc": 8, "fu_wr": 4, "fu_cr": 2, "fu_cc": 2, "fu_flat": 0},
          {"fuse": 2, "tb_wc": 32}, {"wg_r": 4, "wg_c": 8}, None]


def _repeats_a_dtype_change(params, iterations) -> bool:
    return iterations > 1 and params is not None and params.get("fuse") in (1, 2)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0)])
def test_empty_sequence_every_forced_path(sequence, shape):
    m = sk.Matrix(np.zeros(shape, np.int16))
    staged = sequence(m, params={"fuse": 0})
    assert staged.shape == shape and staged.dtype == np.float64
    for params in FORCED:
        for iterations in (1, 3):
            if _repeats_a_dtype_change(params, iterations):
                with pytest.raises(sk.ParameterError, match="changes the dtype"):
                    sequence(m, params=params, iterations=iterations)   # as on any size
                continue
            out = sequence(m, params=params, iterations=iterations)
            assert out.shape == shape and out.dtype == staged.dtype, (params, iterations)
            assert out.to_numpy().size == 0
    assert sequence.last_launch.global_size == (0, 0)
    sequence(m, params={"fuse": 1})
    launch = sequence.last_launch
    assert launch.fused and not launch.streamed and launch.decision["fu_wc"] > 0


def test_empty_forced_points_are_still_checked(sequence):
    """An empty input runs no kernel, yet what is forced is checked as on any size."""
    m = sk.Matrix(np.zeros((0, 4), np.int16))
    with pytest.raises(sk.ParameterError, match="fu_wc"):
        sequence(m, params={"fuse": 1, "fu_wc": 7777})
    with pytest.raises(sk.ParameterError, match="unknown launch parameter 'bogus'"):
        sequence(m, params={"bogus": 1})
    v0, m0 = sk.Vector(np.zeros(0, np.float32)), sk.Matrix(np.zeros((0, 3), np.float32))
    calls = [lambda p: sk.Map(lambda x: x + 1)(v0, params=p),
             lambda p: sk.Reduce(lambda a, b: a + b, identity=0)(v0, params=p),
             lambda p: sk.Scan(lambda a, b: a + b, identity=0)(v0, params=p),
             lambda p: sk.AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b)(
                 m0, m0, params=p),
             lambda p: sk.Stencil(lambda nb: nb[0, 1], shape=1)(m0, params=p),
             lambda p: sk.Stencil(lambda nb: nb[0, 1], shape=1)(m0, iterations=3, params=p)]
    for call in calls:
        with pytest.raises(sk.ParameterError, match="unknown launch parameter 'bogus'"):
            call({"bogus": 1})
        call(None)                       # and without params, an empty result


def test_one_by_one_through_every_forced_path(sequence):
    m = sk.Matrix(np.array([[7]], np.int16))
    want = sequence(m, params={"fuse": 0}).to_numpy()
    for params in FORCED:
        for iterations in (1, 2):
            if _repeats_a_dtype_change(params, iterations):
                with pytest.raises(sk.ParameterError, match="changes the dtype"):
                    sequence(m, params=params, iterations=iterations)
                continue
            got = sequence(m, params=params, iterations=iterations).to_numpy()
            ref = want if iterations == 1 else sequence(
                m, params={"fuse": 0}, iterations=2).to_numpy()
            np.testing.assert_array_equal(got, ref)


def test_source_shows_what_a_forced_call_runs(sequence):
    """``source`` with a forced form: the program of that form on an empty matrix too (it
    showed the staged programs), and the call's error where the form does not exist (it
    showed the staged programs of a sequence that cannot fuse)."""
    empty = sk.Matrix(np.zeros((0, 5), np.int16))
    assert sequence.source(empty, params={"fuse": 1}).startswith("/* fused: 2 stages")
    assert sequence.source(empty, params={"fuse": 2}).startswith("/* streamed: 2 stages")
    assert sequence.source(empty, params={"fuse": 0}).startswith("/* stage 0")
    wrap = sk.Stencil(lambda nb: nb[0, 1] - nb[0, -1], shape=1, border="wrap")
    mixed = sequence >> wrap
    with pytest.raises(sk.ParameterError, match="cannot run fused") as call:
        mixed(sk.Matrix(np.zeros((4, 5), np.int16)), params={"fuse": 1})
    with pytest.raises(sk.ParameterError, match="cannot run fused") as shown:
        mixed.source(sk.Matrix(np.zeros((4, 5), np.int16)), params={"fuse": 1})
    assert str(shown.value) == str(call.value)
