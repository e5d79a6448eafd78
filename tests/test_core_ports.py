"""Bug hunt in the spirit of numba's vectorize/jit tests and pyopencl's test_array: muscles
checked against the same Python function run on NumPy scalars, element by element.

Each test pins a bug found here (its docstring says what went wrong). The translator cases
share ONE program (test_translator's ``Batch``), so the file stays cheap on a cold PoCL cache;
sweeps run with ``SKELPY_HEAVY=1``.
"""

from __future__ import annotations

import os
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_translator import Batch, Weak, ocl  # noqa: F401  (ocl: the fixture Batch runs on)

import skelpy as sk

HEAVY = os.environ.get("SKELPY_HEAVY") == "1"

I64_MIN, I64_MAX = -2**63, 2**63 - 1

# -- muscles (module level: a muscle's source must come from a file) --------------------------


def abs_in_wider_context(a, c):
    return (abs(a) < 0) + c - abs(a)


def abs_sign_test(a):
    return 0 > abs(a)  # noqa: SIM300  (the comparison clang folded)


def np_abs_in_wider_context(a, c):
    return c - np.abs(a) + (np.absolute(a) < 0)


def trips_up_to_int64_max(n):
    c = 0
    for _ in range(n, 9223372036854775807, 4611686018427387904):
        c += 1
    return c


def trips_down_to_int64_min(n):
    c = 0
    for i in range(n, -9223372036854775807, -4611686018427387904):
        c += 1 + (i < 0)
    return c


def trips_runtime_step(a, b, s):
    c = 0
    t = 0
    for i in range(a, b, s):
        c += 1
        t = (t * 3 + i) % 1000003
        if c > 40:
            break
    return c * 1000 + t % 997


def python_max_of_weak_and_unsigned(x, k):
    return max(k, x)


def python_min_of_weak_and_unsigned(x, k):
    return min(x, k, 300)


def python_max_of_int8_and_uint32(x, y):
    return max(x, y)


def python_min_of_local_and_unsigned(x):
    u = not 1
    u -= -4
    return max(~u, x | x)


def np_round(x):
    return np.round(x)


def np_around_plus_one(x):
    return np.around(x) + 1


DEBUG = False


def or_after_falsy_float(x):
    return (0.0 or x) - 9


def or_deciding_int(x):
    return max(5 or 0.0, x)  # noqa: SIM222


def and_deciding_false(x):
    return (False and x) + x  # noqa: SIM223


def and_flag(x):
    return DEBUG and undefined_name  # noqa: F821  (never evaluated, as in Python)


def and_truthy_prefix(x):
    return (-1.5 and x) ** 3


def and_several_after_prefix(x):
    return True and 2 and x or 7


# -- the translator, on one program ------------------------------------------------------------


def test_abs_of_the_most_negative_integer_wraps_in_any_context(ocl):  # noqa: F811
    """``abs(INT_MIN)`` is INT_MIN in NumPy. skelpy emitted OpenCL's ``abs()``, which PoCL
    lowers to llvm.abs with INT_MIN as poison: clang then folded ``abs(x) < 0`` to false and
    widened ``abs(x)`` of an int32 to +2**31 next to an int64 (``1 - abs(x)`` gave
    -2147483647 instead of 2147483649). Now ``max(x, -x)`` with a wrapping negation."""
    b = Batch(ocl)
    for dt in (np.int8, np.int16, np.int32, np.int64):
        info = np.iinfo(dt)
        a = np.array([info.min, info.min + 1, -5, 0, 7, info.max], dt)
        c = np.array([1, -3, 0, 2**40, I64_MIN + 2**40, 5], np.int64)
        b.add(abs_in_wider_context, a, c)
        b.add(np_abs_in_wider_context, a, c)
        b.add(abs_sign_test, a)
    b.run()   # each case against the Python function on NumPy scalars (exact for integers)


def test_range_counts_trips_without_overflow(ocl):  # noqa: F811
    """``for i in range(start, stop, step)`` was C's ``for (i = start; i < stop; i += step)``:
    ``i += step`` past int64 is undefined, and clang ran ``range(0, 2**63 - 1, 2**62)`` once
    (Python: twice) and ``range(2**63 - 10, ...)`` 4 times (Python: once). A step of 0 known
    only at run time looped forever. Now the trips are counted first, in unsigned arithmetic;
    a run-time step of 0 runs no iteration (Python raises ValueError)."""
    b = Batch(ocl)
    up = np.array([I64_MAX - 10, 0, -5, 2**62, I64_MIN, I64_MAX - 1, 2**62 - 1, 1], np.int64)
    b.add(trips_up_to_int64_max, up)
    b.add(trips_down_to_int64_min, -up)
    rng = np.random.default_rng(5)
    n = 64
    lo = rng.integers(-30, 30, n)
    hi = rng.integers(-30, 30, n)
    step = rng.choice([-7, -3, -2, -1, 1, 2, 5, 9], n)
    lo[:4] = [I64_MAX - 5, I64_MIN + 5, I64_MIN, 0]
    hi[:4] = [I64_MAX, I64_MIN, I64_MAX, 5]
    step[:4] = [2**62, -2**62, 2**63 - 1, 1]
    b.add(trips_runtime_step, lo.astype(np.int64), hi.astype(np.int32), step.astype(np.int64))
    b.run()

    # a run-time step of 0: no iteration, where C's loop never ended
    z = sk.Zip(trips_runtime_step)(np.array([0, 3], np.int64), np.array([5, -5], np.int32), 0)
    assert z.to_numpy().tolist() == [0, 0]


def test_builtin_min_max_compare_mixed_integers_as_python(ocl):  # noqa: F811
    """Python's ``max(k, x)`` compares ``x > k`` as NumPy does (exactly, whatever the types)
    and returns the operand it chose. skelpy converted both operands to the result type
    first: with a Python int ``k = -5`` and a uint32 ``x = 3`` it compared 4294967291 with 3
    and returned 4294967291; ``max(int8, uint32)`` likewise. Now mixed integers compare in
    int64 and only the chosen value is converted."""
    b = Batch(ocl)
    u32 = np.array([0, 3, 2**32 - 1, 7, 200, 1], np.uint32)
    k = Weak([-5, 200, -300, 4, 201, -1])
    b.add(python_max_of_weak_and_unsigned, u32, k)
    b.add(python_min_of_weak_and_unsigned, u32, k)
    i8 = np.array([-128, -1, 5, 127, 0, -7], np.int8)
    b.add(python_max_of_weak_and_unsigned, i8, k)
    b.add(python_max_of_int8_and_uint32, i8, u32)
    b.add(python_max_of_int8_and_uint32, i8, np.array([0, 200, 255, 1, 3, 250], np.uint8))
    b.add(python_min_of_local_and_unsigned, u32)
    b.run()


def test_np_round_keeps_integers_and_rounds_bools_to_float(ocl):  # noqa: F811
    """``np.round`` of an integer is the integer, of its dtype; skelpy typed it as ``np.rint``
    (int8 -> float16, computed as float32). And ``np.round(bool_vector)`` returned the bools
    where NumPy gives floats (float16; float32 in skelpy, the documented deviation)."""
    b = Batch(ocl)
    for dt in (np.int8, np.uint32, np.int64):
        info = np.iinfo(dt)
        x = np.array([info.min, info.min // 2, 0, 5, info.max], dt)
        b.add(np_round, x, dtype=dt)
        b.add(np_around_plus_one, x, dtype=dt)
    b.add(np_round, np.array([-2.5, -0.5, 0.5, 1.5, 2.5, 3.7], np.float32))
    case = b.add(np_round, np.array([True, False]), dtype=np.float32)
    b.run()
    assert case.tm.out_dtype == np.float32

    r = np.round(sk.Vector(np.array([True, False, True])))
    assert r.dtype == np.float32 and r.to_numpy().tolist() == [1.0, 0.0, 1.0]
    i = sk.Vector(np.array([-7, 3], np.int16)).round()
    assert i.dtype == np.int16 and i.to_numpy().tolist() == [-7, 3]


def test_and_or_with_constant_operands_are_pythons(ocl):  # noqa: F811
    """A constant operand of ``and``/``or`` that decides is Python's value with its own type
    (``5 or 0.0`` is the int 5, ``False and x`` is False); one that does not decide drops out
    (``0.0 or x`` is x). skelpy promoted all operands to one type: ``(0.0 or x) - 9`` of a
    uint32 became a float64 (-9.0 for 0, where Python wraps to 4294967287), and
    ``max(5 or 0.0, x)`` of int64 went through float64 (2**63 - 1 became INT64_MIN)."""
    b = Batch(ocl)
    u32 = np.array([0, 3, 2**32 - 1, 7], np.uint32)
    i64 = np.array([I64_MIN, 0, 5, I64_MAX], np.int64)
    f32 = np.array([0.0, -0.0, 1.5, np.nan], np.float32)
    cases = [b.add(or_after_falsy_float, u32), b.add(or_deciding_int, i64),
             b.add(and_deciding_false, i64), b.add(and_flag, f32),
             b.add(and_truthy_prefix, i64), b.add(and_several_after_prefix, f32)]
    b.run()
    assert [c.tm.out_dtype for c in cases] == [np.uint32, np.int64, np.int64, np.bool_,
                                               np.int64, np.float32]


# -- array style -------------------------------------------------------------------------------


def test_argmin_argmax_of_64_bit_integers_without_self_comparisons():
    """argmin/argmax of 64-bit data take two passes; the second ran a muscle testing
    ``x != x`` (NumPy's NaN rule) for integers too, so clang warned "self-comparison always
    evaluates to false" on every build and PoCL printed "2 warnings generated." on stderr.
    Integers and bools now use a muscle without the NaN test; results are NumPy's."""
    a = np.array([[3, 9, -1, 9], [I64_MIN, 0, I64_MAX, I64_MAX]], np.int64)
    if HEAVY:
        m = sk.Matrix(a.astype(np.uint64))
        u = a.astype(np.uint64)
        assert m.argmin(axis=0).to_numpy().tolist() == u.argmin(axis=0).tolist()
        assert m.argmax(axis=1).to_numpy().tolist() == u.argmax(axis=1).tolist()
    v = sk.Vector(a[1])
    assert int(v.argmax()) == a[1].argmax() == 2
    src = sk.array.last_skeleton().source(v, sk.IndexVector(4), np.int64(I64_MAX), 2**62)
    assert not re.search(r"\b(\w+) != \1\b", src), "a self-comparison is still emitted"


def row_difference(x, y):
    return x - y


def row_product(x, y):
    return x * y


def row_sum(x, y):
    return x + y


def test_matrix_rows_are_skeleton_inputs():
    """``m[i]`` (a MatrixRow, which reads like a 1-D array and computes as the view
    ``m[i, :]`` in array style) was a DTypeError as the input of a skeleton ("expected a
    Vector, Matrix, index space or ndarray, got MatrixRow"). Extra arguments are still
    Vectors, Matrices or ndarrays (pass ``m[i, :]``)."""
    a = np.arange(20, dtype=np.float32).reshape(4, 5) - 7.5
    m = sk.Matrix(a)
    np.testing.assert_array_equal(sk.Zip(row_difference)(m[3], m[0]).to_numpy(), a[3] - a[0])
    dot = sk.MapReduce(row_product, row_sum, identity=0)
    assert dot(m[1], m[2]) == np.float32(a[1] @ a[2])


# -- hypothesis: the fixed muscles over random data --------------------------------------------


def fold_of_python_scalars(a, b, k):
    s = 0
    for i in range(k % 7, -3, -2):
        s += max(a, i) - abs(b) + min(k, b)
    return s


@settings(max_examples=25 if HEAVY else 8, deadline=None, derandomize=True)
@given(st.integers(0, 300), st.integers(-200, 200), st.integers(0, 2**32 - 1))
def test_mixed_integer_muscle_matches_python_at_any_size(n, k, seed):
    """abs of int32 (INT_MIN included), builtin max of uint16 data with a loop index that goes
    negative, min of a Python int with int32 data, a range with a negative step: any size
    (0 and primes included), against Python on NumPy scalars."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**16, n).astype(np.uint16)
    b = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    if n:
        a[0], b[-1] = 0, -2**31
    got = sk.Zip(fold_of_python_scalars)(a, b, k).to_numpy()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = [fold_of_python_scalars(x, y, k) for x, y in zip(a, b)]
    assert got.dtype == np.int32
    assert got.tolist() == [int(w) for w in want]


# -- random muscles with control flow (numba-style jit tests), against Python ----------------

_DTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
        np.float32, np.float64, np.bool_]
_BIN = ["+", "-", "*", "//", "%", "/", "&", "|", "^", "<<", ">>", "**"]
_CMP = ["<", "<=", ">", ">=", "==", "!="]


class _Program:
    """A random muscle whose locals keep one dtype (each assignment is cast to it, so Python's
    path-dependent types never differ from skelpy's one type per local) and whose ``and``/
    ``or``, ``min``/``max`` and ternaries see operands of one type: what is left to differ from
    Python on NumPy scalars is a translation bug."""

    def __init__(self, r, dts):
        self.r = r
        self.vars = [f"v{i}" for i in range(len(dts))]
        # int() of a uint64 past 2**63 is a Python int in Python, an int64 in a muscle
        self.counts = [v for v, d in zip(self.vars, dts) if d != np.uint64] or ["4"]
        self.home = {v: np.dtype(r.choice(dts)).name for v in ("t", "u", "ret")}

    def expr(self, d, names):
        r = self.r
        if d == 0 or r.random() < 0.3:
            c = r.random()
            if c < 0.65:
                return r.choice(names)
            if c < 0.85:
                return str(r.randint(-4, 9))
            return repr(r.choice([0.5, -1.5, 2.0, 0.0, -0.0, 3.25]))
        a, b = self.expr(d - 1, names), self.expr(d - 1, names)
        k = r.random()
        if k < 0.5:
            op = r.choice(_BIN)
            if op == "**":
                b = str(r.randint(0, 3))
            elif op in ("<<", ">>"):
                b = f"({b} & 7)" if r.random() < 0.5 else str(r.randint(0, 9))
            return f"({a} {op} {b})"
        if k < 0.65:
            return f"({a} {r.choice(_CMP)} {b})"
        if k < 0.72:
            return (f"(({a} {r.choice(_CMP)} 0) {r.choice(['and', 'or'])} "
                    f"({b} {r.choice(_CMP)} 1))")
        if k < 0.8:
            t = self.home["t"]
            return f"(np.{t}({a}) if {self.expr(d - 1, names)} else np.{t}({b}))"
        if k < 0.88:
            return f"np.{r.choice(['minimum', 'maximum'])}({a}, {b})"
        if k < 0.94:
            return f"abs({a})"
        return f"(-{a})"

    def block(self, depth, names, ind, in_loop):
        r, sp, out = self.r, "    " * ind, []
        for _ in range(r.randint(1, 3)):
            k = r.random()
            if k < 0.45 or depth == 0:
                v = r.choice(["t", "u"])
                op = r.choice(["", "+", "-", "*", "", "//", "%", "|", "^"])
                rhs = self.expr(2, names) if not op else f"{v} {op} ({self.expr(2, names)})"
                out.append(f"{sp}{v} = np.{self.home[v]}({rhs})")
            elif k < 0.65:
                out.append(f"{sp}if {self.expr(2, names)}:")
                out += self.block(depth - 1, names, ind + 1, in_loop)
                if r.random() < 0.5:
                    out.append(f"{sp}else:")
                    out += self.block(depth - 1, names, ind + 1, in_loop)
            elif k < 0.85:
                i = f"i{ind}"
                rng = r.choice(["range(4)", "range(-3, 5, 2)", "range(6, -2, -3)",
                                f"range(int({r.choice(self.counts)}) % 5)", "range(1, 3)"])
                out.append(f"{sp}for {i} in {rng}:")
                out += self.block(depth - 1, names + [i], ind + 1, True)
            elif in_loop and k < 0.95:
                out += [f"{sp}if {self.expr(1, names)}:",
                        f"{sp}    {r.choice(['break', 'continue'])}"]
            else:
                out += [f"{sp}if {self.expr(1, names)}:",
                        f"{sp}    return np.{self.home['ret']}({self.expr(2, names)})"]
        return out

    def source(self, name):
        names = self.vars + ["t", "u"]
        body = [f"    t = np.{self.home['t']}({self.expr(1, self.vars)})",
                f"    u = np.{self.home['u']}({self.expr(1, self.vars)})"]
        body += self.block(2, names, 1, False)
        body.append(f"    return np.{self.home['ret']}({self.expr(2, names)})")
        return f"def {name}({', '.join(self.vars)}):\n" + "\n".join(body) + "\n"


def _inputs(rng, dts, n):
    ins = []
    for dt in map(np.dtype, dts):
        if dt == np.bool_:
            ins.append(rng.integers(0, 2, n).astype(bool))
        elif dt.kind == "f":
            a = (rng.standard_normal(n) * 5).astype(dt)
            a[:4] = [0.0, -0.0, 1.0, -2.0]
            ins.append(a)
        else:
            info = np.iinfo(dt)
            a = rng.integers(max(info.min, -20), min(info.max, 20), n, endpoint=True).astype(dt)
            a[:3] = [info.min, info.max, 0]
            ins.append(a)
    return ins


def _python_values(f, ins, n):
    """f over NumPy scalars, or None where Python raises, casts NaN/inf/out-of-range floats to
    integers (undefined, as NumPy warns) or gives results of several types."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore", invalid="raise"):
            warnings.simplefilter("ignore")
            warnings.filterwarnings("error", message=".*cast.*")
            out = [f(*[a[g] for a in ins]) for g in range(n)]
    except Exception:
        return None
    return out if len({(type(o), getattr(o, "dtype", None)) for o in out}) == 1 else None


@pytest.mark.parametrize("seed", list(range(1, 31)) if HEAVY else [7])
def test_random_muscles_with_control_flow_match_python(ocl, tmp_path, seed):  # noqa: F811
    """Random muscles with if/else, for over ranges with negative steps, break/continue, early
    returns, casts, floor division and modulo, shifts, and/or, abs, np.minimum/maximum over
    every dtype, 40 elements with each dtype's extremes, against Python on NumPy scalars (one
    program per seed; 30 seeds with SKELPY_HEAVY=1)."""
    import random

    r = random.Random(seed)
    sigs, src = [], ["import numpy as np\n"]
    for k in range(60):
        dts = [r.choice(_DTS) for _ in range(r.randint(1, 3))]
        sigs.append(dts)
        src.append(_Program(r, dts).source(f"f{k}"))
    path = tmp_path / f"random_muscles_{seed}.py"
    path.write_text("\n".join(src))
    ns: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    rng = np.random.default_rng(seed)
    b = Batch(ocl)
    for k, dts in enumerate(sigs):
        ins = _inputs(rng, dts, 40)
        if _python_values(ns[f"f{k}"], ins, 40) is None:
            continue
        try:
            b.add(ns[f"f{k}"], *ins, rtol=1e-5)
        except sk.SkelpyError:
            continue      # outside the subset (e.g. a constant out of its dtype's range)
    assert len(b.cases) >= 5
    b.run()


# -- folds of a max over NaN --------------------------------------------------------------


def _user_max(a, b):
    return a if a > b else b


def test_max_and_min_folds_propagate_nan_whatever_the_order():
    """Python's max(nan, 1.0) is nan but max(1.0, nan) is 1.0: in a fold, whose order is
    unspecified, such a muscle gave NaN, the identity or a partial maximum depending on the
    launch point. Max- and min-like muscles with an order-dependent NaN fold as np.max/np.min
    (NaN wins); np.fmax keeps ignoring NaN; integers and sums are untouched."""
    rng = np.random.default_rng(7)
    mx = sk.Reduce(lambda a, b: max(a, b), identity=-np.inf)
    mn = sk.Reduce(min, identity=np.inf)
    um = sk.Reduce(_user_max, identity=-np.inf)
    fm = sk.Reduce(np.fmax, identity=-np.inf)
    scan = sk.Scan(lambda a, b: max(a, b), identity=-np.inf, inclusive=True)
    for n in (1, 2, 5, 37, 1000, 4099):
        for dt in (np.float32, np.float64):
            x = rng.standard_normal(n).astype(dt)
            x[rng.integers(0, n)] = np.nan
            for f in (mx, um):
                assert np.isnan(f(x)), (n, dt)
            assert np.isnan(mn(x))
            if n > 1:                  # (fmax over NaN alone is the identity, not nanmax's nan)
                assert fm(x) == np.nanmax(x)
            np.testing.assert_array_equal(scan(x).to_numpy(), np.maximum.accumulate(x))
            x[np.isnan(x)] = 0.5
            assert mx(x) == x.max() and mn(x) == x.min() and um(x) == x.max()
    ints = rng.integers(-50, 50, 999).astype(np.int32)
    assert sk.Reduce(lambda a, b: max(a, b), identity=np.iinfo(np.int32).min)(ints) == ints.max()
