"""What a fold's muscle is, found out before any kernel is built: its accumulator dtype (as
NumPy has it), whether it is a sum or a product, whether it commutes. Used by Reduce,
MapReduce, Scan and AllPairs' reduce.

**The accumulator dtype.** NumPy gives two answers, and a fold muscle is one of two things:

* **a sum or a product** (``lambda a, b: a + b``, ``def add(a, b): return b + a``,
  ``operator.mul``, ``np.add`` ...): ``np.sum``/``np.prod``/``np.cumsum``/``np.cumprod``
  accumulate bool and integers narrower than the platform integer in int64 (uint64 for
  unsigned), everything else in the input's dtype. So does skelpy: a bool count is a number,
  and 5000 x 10^6 in int32 is 5000000000, not a wrapped 705032704.
* **anything else** (max, and/or, a user operator): the accumulator is the type of
  ``f(acc, x)`` at its fixed point, starting from ``acc = x.dtype`` -- what
  ``functools.reduce(f, x)`` gives over NumPy scalars (max over int8 stays int8, ``a or b``
  over bool stays bool, ``a + 0.5 * b`` over int32 becomes float64).

``dtype=`` overrides both, as in NumPy (``np.sum(x, dtype=np.int8)`` wraps; so does
``Reduce(add, 0, dtype=np.int8)``).

**Why detect sums by what the muscle computes, not by where a ``+`` appears.** The other
candidate rule -- type every ``+``/``*`` inside a fold muscle with NumPy's reduction promotion --
changes the meaning of muscles NumPy has no reduction rule for (``(a + b) % 7`` over uint8
would become int64, while ``functools.reduce`` keeps uint8) and needs a special typing context
in the translator. Asking "is this muscle addition?" matches NumPy exactly where NumPy has an
answer (``np.add.reduce`` versus ``functools.reduce``) and nowhere else. The question is asked
by evaluating the Python muscle on the host on a spread of int64 and float64 samples (wide
types, so that nothing wraps); a muscle that disagrees anywhere, or cannot run on the host,
or is OpenCL C (whose declared types already say what it computes), is not a sum. A wrong
answer could only change the accumulator's width: the kernel always runs the user's muscle.
Being a sum also lets a float Scan and AllPairs compensate their carries (TwoSum needs a real +).

**Commutativity** (``muscle_is_commutative``, the same kind of host test) only picks the faster
of Reduce's two correct kernels (interleaved or order-preserving loads).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np

from ..dtypes import c_type, check_dtype
from ..errors import DTypeError, SkelpyError
from ..muscle import Muscle
from ..muscle.params import Scalar

__all__ = ["arithmetic_kind", "check_neutral", "dtype_argument", "fold_dtype",
           "fold_combine", "muscle_is_commutative", "numpy_sum_dtype",
           "propagates_nan_in_folds"]

# (a, b) samples: signs, zero, equal operands, magnitudes that tell +, *, |, ^, max apart.
_INT_SAMPLES = ((3, 5), (-7, 11), (1_000_003, 17), (0, 9), (12, 12), (-4, -6), (6, 0))
_FLOAT_SAMPLES = ((0.5, 2.25), (-1.75, 3.0), (1e10, -3.5), (0.0, 0.125))
_FIXED_POINT_STEPS = 8


def arithmetic_kind(fn) -> str | None:
    """``"add"`` or ``"multiply"`` when the Python callable ``fn`` computes ``a + b`` (``a * b``)
    on every sample pair, in int64 and in float64; otherwise None (see the module docstring)."""
    if fn is None or isinstance(fn, (str, Muscle)) or not callable(fn):
        return None
    for kind, op in (("add", np.add), ("multiply", np.multiply)):
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ok = all(_same(fn(np.int64(a), np.int64(b)), op(np.int64(a), np.int64(b)))
                         for a, b in _INT_SAMPLES) and all(
                    _same(fn(np.float64(a), np.float64(b)), op(np.float64(a), np.float64(b)))
                    for a, b in _FLOAT_SAMPLES)
        except Exception:  # noqa: BLE001 - a muscle that cannot run on the host: not detected
            return None
        if ok:
            return kind
    return None


def propagates_nan_in_folds(fn) -> bool:
    """Whether a fold of the Python muscle ``fn`` over floats makes NaN win, as ``np.max`` and
    ``np.min`` do: ``fn`` is a max or a min on numbers (every sample pair) whose NaN result
    depends on the operands' order (Python's ``max(nan, 1.0)`` is nan, ``max(1.0, nan)`` is
    1.0). A fold's order is unspecified (it changes with the launch point and the devices), so
    such a muscle gave any of NaN, the identity or a partial maximum; NaN-propagation is its
    one associative reading, and NumPy's. Muscles with a consistent NaN rule (``np.maximum``
    propagates, ``np.fmax`` ignores NaN) keep it."""
    if fn is None or isinstance(fn, (str, Muscle)) or not callable(fn):
        return False
    nan, one = np.float64(np.nan), np.float64(1.0)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for pick in (max, min):
                if all(_same(fn(np.float64(a), np.float64(b)), pick(a, b))
                       and _same(fn(np.float64(b), np.float64(a)), pick(a, b))
                       for a, b in _FLOAT_SAMPLES + _INT_SAMPLES):
                    return bool(np.isnan(fn(nan, one))) != bool(np.isnan(fn(one, nan)))
    except Exception:  # noqa: BLE001 - a muscle that cannot run on the host: not detected
        return False
    return False


def fold_combine(acc: np.dtype, fn, name: str) -> tuple[str, str]:
    """(the function a fold kernel combines with, C to add after the muscle ``name``): the
    muscle itself, or ``skp_nan_first`` where a NaN operand wins
    (:func:`propagates_nan_in_folds`; ``fn`` None: an OpenCL C muscle, taken as written)."""
    if np.dtype(acc).kind != "f" or not propagates_nan_in_folds(fn):
        return name, ""
    t = c_type(acc)
    return "skp_nan_first", (f"static inline {t} skp_nan_first({t} a, {t} b) "
                             f"{{ return isnan(a) ? a : (isnan(b) ? b : ({t}){name}(a, b)); }}")


def _same(got, want) -> bool:
    g = np.asarray(got)
    return g.shape == () and g.dtype.kind in "iuf" and g == want


def numpy_sum_dtype(dt: np.dtype) -> np.dtype:
    """The accumulator ``np.sum``/``np.prod``/``np.cumsum`` use for ``dt`` (asked of NumPy)."""
    return np.add.reduce(np.zeros(1, dt)).dtype


def fold_dtype(muscle: Muscle, fn, in_dtype: np.dtype, dtype, origin: str) -> np.dtype:
    """The accumulator dtype of folding ``muscle`` (the user's callable ``fn``, or None for an
    OpenCL C muscle) over elements of ``in_dtype``; ``dtype`` (the user's ``dtype=``) wins."""
    if dtype is not None:
        return check_dtype(dtype, origin)
    acc = _fixed_point(muscle, check_dtype(in_dtype, origin), origin)
    return numpy_sum_dtype(acc) if arithmetic_kind(fn) is not None else acc


def _fixed_point(muscle: Muscle, in_dtype: np.dtype, origin: str) -> np.dtype:
    """The type of ``muscle(acc, x)`` iterated from ``acc = x``'s type until it settles."""
    acc = in_dtype
    seen = [acc]
    for step in range(_FIXED_POINT_STEPS):
        try:
            tm = muscle.specialise((Scalar(acc), Scalar(seen[0])), c_name="skp_fold_probe")
        except SkelpyError:
            if step == 0:
                raise
            break   # f(acc, x) does not translate for the wider type: keep the last one that did
        out = check_dtype(tm.out_dtype, origin)
        if out == acc:
            return acc
        if out in seen:
            raise DTypeError(f"{origin}: the fold's result type does not settle ("
                             + " -> ".join(str(d) for d in [*seen, out])
                             + "); give dtype= to choose the accumulator")
        seen.append(out)
        acc = out
    return acc


def dtype_argument(dtype, out_dtype, origin: str):
    """``dtype=`` (NumPy's name) and ``out_dtype=`` (skelpy's older one) mean the same: the
    accumulator, which is also the result's dtype. Give at most one of them (or equal ones)."""
    if dtype is None:
        return out_dtype
    if out_dtype is not None and check_dtype(dtype, origin) != check_dtype(out_dtype, origin):
        raise DTypeError(f"{origin}: dtype={np.dtype(dtype)} and out_dtype="
                         f"{np.dtype(out_dtype)} disagree; give one of them")
    return dtype


def muscle_is_commutative(fn, dtype: np.dtype, identity) -> bool:
    """Whether a Python muscle gives ``f(a, b) == f(b, a)`` on a spread of sample values.

    A heuristic that only picks the faster of two correct kernels: a muscle that fails the
    test (or cannot be run on the host) is folded in order, which is correct either way."""
    if not callable(fn):
        return False
    dt = np.dtype(dtype)
    if dt == np.bool_:
        samples = [np.bool_(False), np.bool_(True)]
    else:
        raw = [0, 1, 2, 3, 7, -1, -5, 100, -1000, 0.5, -2.25, 1e6, 123456789]
        samples = []
        for v in [identity, *raw]:
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if dt.kind in "iu" and (float(v) != int(v)):
                        continue
                    s = np.asarray(v).astype(dt)[()]
                    if dt.kind in "iu" and int(s) != int(v):
                        continue
            except (OverflowError, ValueError, TypeError):
                continue
            samples.append(s)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for a, b in itertools.combinations(samples, 2):
                x, y = np.asarray(fn(a, b)), np.asarray(fn(b, a))
                if x.shape != y.shape or not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
                    return False
    except Exception:  # noqa: BLE001 - any failure means "don't know": keep order
        return False
    return True


def check_neutral(fn, dtype: np.dtype, identity, origin: str) -> None:
    """Raise a DTypeError when a Python muscle shows ``identity`` is not its neutral element:
    ``f(id, id) != id`` (``add`` with 7, ``mul`` with 2). The kernels start every partial
    result and pad every tile with the identity, so a non-neutral one would be folded in a
    number of times that depends on the launch point: a wrong answer, different per device.
    (Folding nothing gives the identity, as documented, and is not checked. An OpenCL C
    muscle, or one that cannot run on the host, is not checked.)"""
    if fn is None or isinstance(fn, (str, Muscle)) or not callable(fn):
        return
    dt = np.dtype(dtype)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = np.bool_(identity) if dt == np.bool_ else np.asarray(identity).astype(dt)[()]
            r = np.asarray(fn(s, s))
            if r.shape != () or r.dtype.kind not in "biuf":
                return
            same = bool(r == s) or (r.dtype.kind == "f" and dt.kind == "f"
                                    and bool(np.isnan(r)) and bool(np.isnan(s)))
    except Exception:  # noqa: BLE001 - a muscle that cannot run on the host: not checked
        return
    if not same:
        raise DTypeError(
            f"{origin}: identity {identity!r} is not the operator's neutral element in {dt} "
            f"(f({s.item()!r}, {s.item()!r}) = {r.item()!r}); every partial result starts "
            "from it, so the result would depend on the launch point. Give the neutral "
            "element (0 for +, 1 for *, -inf or np.iinfo(dtype).min for max) and combine a "
            "start value with the result yourself")
