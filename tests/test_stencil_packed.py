"""The packed (SWAR) form of one-byte stencil muscles (``muscle/packed.py``; the vector path's
interior in ``stencil.cl``): four cells per 32-bit word, bit for bit equal to NumPy evaluating
the same muscle on shifted arrays and to the per-cell code, in every border mode, at sizes
whose rows are whole words and not, with byte values that wrap; and what the lowering leaves
to the per-cell code."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_stencil_fuzz import Padded
from test_stencil_narrow import life
from test_stencil_stream_geometry import heat

import skelpy as sk

HEAVY = os.environ.get("SKELPY_HEAVY") == "1"
# vec counts 4-byte words: 8 and 16 uint8 columns per work-item (2 and 4 packed words)
PACKED = {"local": 0, "wg_r": 2, "wg_c": 4, "cr": 2, "cc": 1, "vec": 2}
PACKED4 = {"local": 0, "wg_r": 1, "wg_c": 4, "cr": 2, "cc": 1, "vec": 4}
PACKED8 = {"local": 0, "wg_r": 2, "wg_c": 2, "cr": 4, "cc": 1, "vec": 8}    # 32 columns
SCALAR = {"local": 0, "wg_r": 2, "wg_c": 8, "cr": 1, "cc": 1, "vec": 1}
WIDE = sk.Shape(north=1, south=1, east=4, west=4)         # the packed form's widest reach
SIZES = [(1, 4), (6, 12), (13, 40), (5, 37), (3, 64)]      # (5, 37): rows not whole words


def numpy_eval(f, g, border="wrap", cval=0, out_dtype=np.uint8):
    """``f`` evaluated by NumPy on the whole matrix, padded by the border rule."""
    return np.asarray(f(Padded(g, border, cval))).astype(out_dtype)


def life_loops(nb):
    """Life as a loop over the neighbourhood: unrolled by the packed form."""
    n = 0
    for dr in range(-1, 2):
        for dc in range(-1, 2):
            if dr != 0 or dc != 0:
                n += nb[dr, dc]
    return 1 if n == 3 or (n == 2 and nb[0, 0] == 1) else 0


def signed_mix(nb):
    d = nb[0, 1] - nb[0, -1] * 3 + nb[-2, 0]
    d -= nb[1, 1]
    return (d > -5) & (nb[0, 0] <= 7) | (d == nb[0, 0])


def wide(nb):
    s = nb[0, -4] + nb[0, 4] - nb[1, 3] * 2 + nb[-1, -3] * 100
    return ~s ^ (nb[0, 0] & 0x0F) | -nb[0, 2]


def branchy(nb):
    keep = (nb[0, 1] > 100 and nb[1, 0] != 3) or not nb[-1, -1]
    return nb[0, 0] if keep else nb[0, -1] + 7


def branchy_ref(nb):
    keep = ((nb[0, 1] > 100) & (nb[1, 0] != 3)) | (nb[-1, -1] == 0)
    return np.where(keep, nb[0, 0], nb[0, -1] + np.uint8(7))


def floaty(nb):
    return nb[0, 0] * 0.5 > nb[0, 1]


def looped(nb):
    s = nb[0, 0]
    for dc in range(-1, 2):
        if nb[0, dc] > 3:              # a condition on the data: per cell
            s += nb[1, dc]
    return s


def _grid(rng, shape, dtype):
    info = np.iinfo(dtype)
    g = rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)
    g[rng.random(shape) < 0.4] = 1                # Life needs live cells among the noise
    g[rng.random(shape) < 0.2] = 0
    return g


def _packed_source(stencil, dtype, point=PACKED) -> bool:
    src = stencil.source(sk.Matrix(np.zeros((8, 64), dtype)), params=point)
    return "#define SKP_PACKED 1" in src


def test_which_muscles_pack():
    assert _packed_source(sk.Stencil(life, shape=1, border="wrap", out_dtype=np.uint8),
                          np.uint8)
    assert _packed_source(sk.Stencil(signed_mix, shape=2, out_dtype=np.bool_), np.int8)
    assert _packed_source(sk.Stencil(wide, shape=WIDE, out_dtype=np.uint8), np.uint8)
    assert _packed_source(sk.Stencil(branchy, shape=1), np.uint8)
    assert _packed_source(sk.Stencil(life_loops, shape=1, out_dtype=np.uint8), np.uint8)
    # float arithmetic, loops, wider cells and extra arguments stay per cell
    assert not _packed_source(sk.Stencil(floaty, shape=1), np.uint8)
    assert not _packed_source(sk.Stencil(looped, shape=1), np.uint8)
    assert not _packed_source(sk.Stencil(life, shape=1, out_dtype=np.int32), np.int32)
    assert not _packed_source(sk.Stencil(life, shape=1, out_dtype=np.uint8), np.int16)


# the border rule acts in the edge work-items only (per cell, tested in every mode elsewhere):
# wrap and constant here, every mode under SKELPY_HEAVY
@pytest.mark.parametrize("border", ["wrap", "constant"] + (
    ["nearest", "reflect", "mirror"] if HEAVY else []))
def test_life_borders(border):
    rng = np.random.default_rng(1)
    st_ = sk.Stencil(life, shape=1, border=border, cval=1, out_dtype=np.uint8)
    for shape in SIZES:
        g = _grid(rng, shape, np.uint8)
        want = numpy_eval(life, g, border, 1)
        got = st_(g, params=PACKED).to_numpy()
        assert np.array_equal(got, want), (border, shape)
        if border == "wrap":
            assert np.array_equal(st_(g, params=PACKED4).to_numpy(), want), shape
            assert np.array_equal(st_(g, params=SCALAR).to_numpy(), want), shape
            loops = sk.Stencil(life_loops, shape=1, border=border, out_dtype=np.uint8)
            assert np.array_equal(loops(g, params=PACKED).to_numpy(), want), shape


def test_signed_bool_out_and_wide_reach():
    rng = np.random.default_rng(2)
    s1 = sk.Stencil(signed_mix, shape=2, border="reflect", out_dtype=np.bool_)
    s2 = sk.Stencil(wide, shape=WIDE, border="mirror", out_dtype=np.uint8)
    s3 = sk.Stencil(branchy, shape=1, border="nearest")
    for shape in SIZES + [(9, 96)]:
        g8 = _grid(rng, shape, np.int8)
        got = s1(g8, params=PACKED).to_numpy()
        assert got.dtype == np.bool_
        assert np.array_equal(got, numpy_eval(signed_mix, g8, "reflect", out_dtype=np.bool_))
        g = _grid(rng, shape, np.uint8)
        assert np.array_equal(s2(g, params=PACKED4).to_numpy(),
                              numpy_eval(wide, g, "mirror")), shape
        assert np.array_equal(s3(g, params=PACKED).to_numpy(),
                              numpy_eval(branchy_ref, g, "nearest")), shape


# Edge groups read words (stencil.cl: SKP_PACKED_EDGE_PATH): rows folded whole, a halo word
# beyond the first or last column made from the row's end words, words of rows of any width
# funnel-shifted from aligned ones (none read past the buffer's end: rows x cols not a multiple
# of 4 too), a word across the last column; every mode, the widest reach (4 columns: the whole
# halo word is read), two rows of reach over one- and two-row matrices (folded twice), the
# narrowest rows (8 columns) and narrower ones (byte by byte).
EDGE_WORD_SIZES = [(1, 8), (2, 16), (3, 8), (7, 48), (4, 64), (9, 96), (5, 37), (4, 50),
                   (7, 71), (3, 9), (6, 100), (2, 7), (1, 5)]


@pytest.mark.parametrize("border", ["constant", "nearest", "wrap", "reflect", "mirror"])
def test_edge_words_every_mode(border):
    rng = np.random.default_rng(11)
    wide_ = sk.Stencil(wide, shape=WIDE, border=border, cval=77, out_dtype=np.uint8)
    mix = sk.Stencil(signed_mix, shape=2, border=border, cval=-3, out_dtype=np.bool_)
    for shape in EDGE_WORD_SIZES:
        g = _grid(rng, shape, np.uint8)
        want = numpy_eval(wide, g, border, 77)
        for point in (PACKED, PACKED4, PACKED8):
            assert np.array_equal(wide_(g, params=point).to_numpy(), want), (shape, point)
        g8 = _grid(rng, shape, np.int8)
        assert np.array_equal(mix(g8, params=PACKED).to_numpy(),
                              numpy_eval(signed_mix, g8, border, -3, np.bool_)), shape


def test_iterations():
    rng = np.random.default_rng(3)
    g = _grid(rng, (20, 48), np.uint8)
    st_ = sk.Stencil(life, shape=1, border="wrap", out_dtype=np.uint8)
    want = g
    for _ in range(3):
        want = numpy_eval(life, want)
    assert np.array_equal(st_(g, iterations=3, params=PACKED).to_numpy(), want)


# -- random muscles -----------------------------------------------------------------------

_OFFS = st.tuples(st.integers(-2, 2), st.integers(-2, 2))


@st.composite
def _expr(draw, signed, depth=0):
    if depth >= 3 or draw(st.integers(0, 3)) == 0:
        dr, dc = draw(_OFFS)
        return f"nb[{dr}, {dc}]"
    op = draw(st.sampled_from(["+", "-", "*", "&", "|", "^", "~", "neg"]))
    a = draw(_expr(signed, depth + 1))
    if op == "~":
        return f"(~{a})"
    if op == "neg":
        return f"(-{a})"
    if op == "*":                       # a Python int the dtype holds (NumPy raises otherwise)
        return f"({a} * {draw(st.integers(-3 if signed else 0, 5))})"
    return f"({a} {op} {draw(_expr(signed, depth + 1))})"


@st.composite
def _muscle(draw):
    signed = draw(st.booleans())
    a, b = draw(_expr(signed)), draw(_expr(signed))
    cmp1 = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
    cmp2 = draw(st.sampled_from(["==", "!=", "<", ">="]))
    k = draw(st.integers(-130, 300))          # out of the dtype's range too: exact, as NumPy
    kind = draw(st.sampled_from(["bool", "value"]))
    ret = f"(t {cmp1} {b}) | (t {cmp2} {k})" if kind == "bool" else f"t ^ {b}"
    return f"def f(nb):\n    t = {a}\n    return {ret}\n", kind, signed


@settings(max_examples=40 if HEAVY else 4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=_muscle(), seed=st.integers(0, 2**16),
       size=st.tuples(st.integers(1, 9), st.integers(1, 70)),
       point=st.sampled_from([PACKED, PACKED4, PACKED8]),
       border=st.sampled_from(["wrap", "constant", "nearest", "reflect", "mirror"]))
def test_random_muscles_match_numpy(tmp_path_factory, case, seed, size, point, border):
    text, kind, signed = case
    d = tmp_path_factory.mktemp("packed")
    path = d / f"m{abs(hash(text)) % 10**8}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    dtype = np.int8 if signed else np.uint8
    out = np.bool_ if kind == "bool" else dtype
    st_ = sk.Stencil(mod.f, shape=2, border=border, cval=5, out_dtype=out)
    assert _packed_source(st_, dtype), text
    rng = np.random.default_rng(seed)
    g = _grid(rng, size, dtype)
    with np.errstate(over="ignore"):
        want = numpy_eval(mod.f, g, border, 5, out_dtype=out)
    assert np.array_equal(st_(g, params=point).to_numpy(), want), (text, size, point, border)


G3 = np.array([0.25, 0.5, 0.25], np.float32)


def gauss3(nb):
    acc = np.float32(0)
    for dr in range(-1, 2):
        row = np.float32(0)
        for dc in range(-1, 2):
            row += G3[dc + 1] * nb[dr, dc]
        acc += G3[dr + 1] * row
    return acc


def test_iterations_default_to_single_steps_where_passes_do_not_pay():
    """Compute-heavy stencils (over SINGLE_ABOVE instructions per byte moved) iterate in single
    steps by default; light ones (heat) in passes where the device's space allows them."""
    for f, border in ((gauss3, "reflect"), (heat, "nearest")):
        st_ = sk.Stencil(f, shape=1, border=border)
        m = sk.Matrix(np.zeros((16, 32), np.float32))
        bound = st_.bind(m, ())
        assert st_.temporal_plan(bound, m).single_first is (f is gauss3)


def test_iterations_default_to_packed_single_steps():
    """Passes of t steps are not packed: a packed stencil's iterations default to single
    steps on every device (passes stay available to the tuner and to params)."""
    for dtype, packed in ((np.uint8, True), (np.int32, False)):
        st_ = sk.Stencil(life, shape=1, border="wrap", out_dtype=dtype)
        m = sk.Matrix(np.zeros((16, 32), dtype))
        bound = st_.bind(m, ())
        assert bound.plan.packed is packed
        assert st_.temporal_plan(bound, m).single_first is packed


def test_packed_default_vector_divides_the_rows():
    """A packed plan's first guess takes the widest vector (up to the space's default) whose
    columns divide the rows: whole vectors are read as such; the tuner reports it as the
    default and the result is NumPy's."""
    from skelpy import runtime

    rt = runtime.current()
    st_ = sk.Stencil(life, shape=1, border="wrap", out_dtype=np.uint8)
    plan = st_.bind(sk.Matrix(np.zeros((8, 64), np.uint8)), ()).plan
    space = plan.space(rt)
    kept = dict(space.default)
    space.default = dict(kept, vec=8)      # the GPUs' default, on every device
    try:
        for cols, want in ((64, 8), (48, 4), (40, 2), (37, 2), (12, 2)):
            got = plan.default_for(rt, {"rows": 9.0, "cols": float(cols)})
            assert got is not None and int(got["vec"]) == want, (cols, got)
            g = _grid(np.random.default_rng(cols), (9, cols), np.uint8)
            with sk.tuning("off"):
                out = st_(g).to_numpy()
            assert int(st_.last_launch.params["vec"]) == want, (cols, st_.last_launch.params)
            assert np.array_equal(out, numpy_eval(life, g)), cols
        # one log2 bucket, two scenarios: a decision for whole 32-byte rows is not reused
        # for rows of 8-byte vectors (nor the other way round)
        for cols, want in ((128, 8), (124, 2), (128, 8)):
            g = _grid(np.random.default_rng(cols), (5, cols), np.uint8)
            with sk.tuning("model"):
                st_(g)
            assert int(st_.last_launch.params["vec"]) == want, (cols, st_.last_launch.params)
    finally:
        space.default = kept
    # a per-cell default (CPUs) is no packed one: no vector to fit
    space.default = dict(kept, vec=1)
    try:
        assert plan.default_for(rt, {"rows": 9.0, "cols": 40.0}) is None
    finally:
        space.default = kept
    int_plan = sk.Stencil(life, shape=1, border="wrap", out_dtype=np.int32).bind(
        sk.Matrix(np.zeros((8, 64), np.int32)), ()).plan
    assert int_plan.default_for(rt, {"rows": 8.0, "cols": 40.0}) is None


def test_packed_plans_default_to_packed_words_on_gpus():
    """On GPUs the default takes 8 packed words (32 cells) per row of a work-item; CPUs start
    per cell (PoCL ran Life uint8 faster so at 1024^2 and beyond) and tune ``vec`` (packed)
    too; a model that has not measured packed kernels does not override the default."""
    from skelpy import runtime

    rt = runtime.current()
    g = _grid(np.random.default_rng(8), (16, 32), np.uint8)
    st_ = sk.Stencil(life, shape=1, border="wrap", out_dtype=np.uint8)
    plan = st_.bind(sk.Matrix(g), ()).plan
    space, _ = plan.make_space(rt)
    assert space.default["vec"] == (8 if rt.device.kind == "gpu" else 1)
    assert space.is_legal(space.default) and not plan.model_known
    assert set(next(p for p in space.params if p.name == "vec").values) >= {1, 2, 4, 8}
    g = np.ascontiguousarray(np.vstack([g, g[:7]]))   # a size no other test measures
    with sk.tuning("model"):
        got = st_(g).to_numpy()
    launch = st_.last_launch
    assert launch.source in ("default", "cache"), launch.source
    assert {k: int(v) for k, v in launch.params.items()} == \
        {k: int(v) for k, v in space.default.items()}
    assert np.array_equal(got, numpy_eval(life, g))
