"""What every skeleton shares: the muscle, argument classification, kernel building and
launching through the tuner.

A skeleton is built once and called many times. For each distinct *signature* of a call
(dtypes and kinds of its arguments) it keeps a :class:`Plan`: the specialised muscle, the
generated kernel source and its programs per compile-time launch parameters, so that a
repeated call costs a few dictionary look-ups and one enqueue.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from .. import tuner
from ..containers import Container, IndexSpace, as_container
from ..dtypes import c_type, check_dtype, storage_c_type
from ..errors import (
    DeviceError,
    DTypeError,
    ParameterError,
    RefusedParameters,
    ShapeError,
    SkelpyError,
)
from ..muscle import Muscle
from ..muscle.params import Scalar, global_array
from ..tuner.space import ParamSpace

# -- arguments ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalarArg:
    dtype: np.dtype
    weak: bool

    def kind(self):
        return Scalar(self.dtype, weak=self.weak)


@dataclass(frozen=True)
class ArrayArg:
    dtype: np.dtype
    ndim: int

    def kind(self):
        return global_array(self.dtype, self.ndim)


def classify_extra(value, origin: str, position: int):
    """Describe an extra (non-input) argument: a scalar (Python ones are weak) or a container
    read by index inside the muscle."""
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        if isinstance(value, bool):
            return ScalarArg(np.dtype(np.bool_), True), value
        if isinstance(value, int):
            return ScalarArg(np.dtype(np.int64), True), value
        return ScalarArg(np.dtype(np.float64), True), value
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        dt = check_dtype(value.dtype, f"{origin}: extra argument {position}")
        return ScalarArg(dt, False), value
    if isinstance(value, (list, tuple)):
        value = np.asarray(value)
    if isinstance(value, (Container, np.ndarray)):
        c = as_container(value, f"{origin}: extra argument {position}")
        return ArrayArg(c.dtype, c.ndim), c
    if isinstance(value, IndexSpace):
        raise DTypeError(f"{origin}: extra argument {position} is an index space; index "
                         "spaces can only be the input of Map")
    raise DTypeError(f"{origin}: extra argument {position} has unsupported type "
                     f"{type(value).__name__} (use a number, NumPy scalar, Vector, Matrix "
                     "or ndarray)")


def classify_extras(values: Sequence, origin: str) -> tuple[list, list]:
    """:func:`classify_extra` over every extra argument: (descriptions, values)."""
    descs, vals = [], []
    for k, value in enumerate(values):
        d, v = classify_extra(value, origin, k + 1)
        descs.append(d)
        vals.append(v)
    return descs, vals


def scalar_value(value, dtype: np.dtype):
    """A Python/NumPy scalar as the kernel argument of ``dtype`` (bool travels as uchar)."""
    if dtype == np.bool_:
        return np.uint8(bool(value))
    try:
        with np.errstate(all="ignore"):
            return np.asarray(value).astype(dtype)[()]
    except (OverflowError, ValueError) as exc:
        raise DTypeError(f"cannot pass {value!r} as {dtype}: {exc}") from None


def scalar_converter(value, param_dtypes: Mapping[int, np.dtype], param: int, origin: str):
    """What :func:`scalar_value` does for an extra like ``value`` at muscle parameter
    ``param``, as one call of a NumPy type (repeat-call paths run it on every call)."""
    dt = param_dtypes.get(param)
    if dt is None:
        dt = classify_extra(value, origin, param)[0].dtype
    return _as_uchar if dt == np.bool_ else dt.type


def _as_uchar(v) -> np.uint8:
    return np.uint8(bool(v))


def extra_kernel_params(extras: Sequence, tm, first_param: int, prefix: str = "e"):
    """Kernel parameter declarations and the muscle call arguments for the extras.

    Returns (declarations, call arguments) where scalars arrive in their storage type and
    are cast to the muscle's type at the call."""
    decls, call = [], []
    for k, ex in enumerate(extras):
        name = f"{prefix}{k}"
        idx = first_param + k
        if isinstance(ex, ScalarArg):
            dt = tm.scalar_dtypes.get(idx, ex.dtype)
            decls.append(f"const {storage_c_type(dt)} {name}")
            call.append(f"(({c_type(dt)}){name})")
        else:
            acc = ex.kind()
            decls.extend(acc.declarations(name))
            call.extend(acc.arguments(name))
    return decls, call


def extra_kernel_args(extras: Sequence, values: Sequence, tm, first_param: int, rt):
    """The kernel argument values matching :func:`extra_kernel_params`."""
    out = []
    for k, (ex, v) in enumerate(zip(extras, values, strict=True)):
        if isinstance(ex, ScalarArg):
            out.append(scalar_value(v, tm.scalar_dtypes.get(first_param + k, ex.dtype)))
        else:
            out.append(v.device_buffer(rt))
            out.extend(np.int64(s) for s in v.shape)
    return out


# -- plans -------------------------------------------------------------------------------------


@dataclass
class Plan:
    """Everything a skeleton needs to launch one call signature again quickly."""

    source: str                                # full kernel source (without launch macros)
    kernel_name: str
    kernel_key: str
    out_dtype: np.dtype
    typed: Any                                 # TypedMuscle (or a tuple of them)
    features: dict[str, float]
    space_factory: Callable[[Any], ParamSpace]
    macros: Callable[[Mapping], tuple[str, ...]]
    programs: dict[tuple, cl.Kernel] = field(default_factory=dict)
    spaces: dict[int, ParamSpace] = field(default_factory=dict)
    kernel_max_wg: int | None = None
    last_kernel: tuple | None = None

    def kernel(self, rt: _rt.Runtime, point: Mapping) -> cl.Kernel:
        last = self.last_kernel
        # The tuner hands back the same decision object on a cache hit: skip the options.
        if last is not None and last[0] is point and last[1] is rt:
            return last[2]
        opts = self.macros(point)
        k = self.programs.get((id(rt), opts))
        if k is None:
            prg = rt.build(self.source, opts)
            k = self.programs[(id(rt), opts)] = rt.kernel(prg, self.kernel_name)
        self.last_kernel = (point, rt, k)
        return k

    def prebuild(self, rt: _rt.Runtime, points: Sequence[Mapping]) -> None:
        """Build the programs of ``points`` not built yet (a sweep's ``prepare`` hook): on a
        GPU in parallel threads (clBuildProgram releases the GIL, and the runtime builds
        different sources at once); a CPU's OpenCL compiler runs on the cores that would
        otherwise build them one by one."""
        todo = {}
        for p in points:
            opts = self.macros(p)
            if (id(rt), opts) not in self.programs:
                todo.setdefault(opts, p)
        if not todo:
            return
        if rt.device.kind != "gpu" or len(todo) == 1:
            for p in todo.values():
                self.kernel(rt, p)
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(8, len(todo), os.cpu_count() or 1)) as pool:
            for opts, prg in zip(todo, pool.map(lambda o: rt.build(self.source, o), todo)):
                self.programs.setdefault((id(rt), opts), rt.kernel(prg, self.kernel_name))

    def space(self, rt: _rt.Runtime) -> ParamSpace:
        sp = self.spaces.get(id(rt))
        if sp is None:
            sp = self.spaces[id(rt)] = self.space_factory(rt)
        return sp


def source_key(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()[:16]


def fp64_check(rt: _rt.Runtime, uses_fp64: bool, origin: str) -> None:
    if uses_fp64 and not rt.device.has_fp64:
        raise DeviceError(f"{origin}: this muscle needs double precision (float64) but "
                          f"{rt.device.name} has no fp64 support; use float32 data, or "
                          "out_dtype=np.float32, or pick another device with sk.use()")


def feature_dict(tm) -> dict[str, float]:
    return {k: float(v) for k, v in getattr(tm, "features", {}).items()}


# -- the skeleton base ---------------------------------------------------------------------------


class Skeleton:
    """Holds a muscle and the plans built from it; subclasses implement ``__call__``."""

    kind = "skeleton"

    def __init__(self, muscle, *, out_dtype=None):
        self.muscle = muscle if isinstance(muscle, Muscle) else Muscle(muscle)
        self.out_dtype = None if out_dtype is None else check_dtype(out_dtype, "out_dtype")
        self._last_launch: _rt.Launch | None = None
        self._pending_launch: tuple | None = None
        self._plans: dict[tuple, Plan] = {}

    @property
    def last_launch(self) -> _rt.Launch | None:
        """What the latest call ran (parameters, sizes, events, refusals, decision source)."""
        pending = self._pending_launch
        if pending is not None:
            params, gsize, lsize, event = pending
            self._last_launch = _rt.Launch(self.kind, dict(params), gsize, lsize, [event], [],
                                           "cache")
            self._pending_launch = None
        return self._last_launch

    @last_launch.setter
    def last_launch(self, launch: _rt.Launch | None) -> None:
        self._pending_launch = None
        self._last_launch = launch

    @property
    def origin(self) -> str:
        o = self.__dict__.get("_origin")
        if o is None:
            o = self.__dict__["_origin"] = f"{type(self).__name__}({self.muscle.origin})"
        return o

    def __repr__(self) -> str:
        return f"<skelpy.{self.origin}>"

    def _error(self, cls, message: str) -> SkelpyError:
        return cls(f"{self.origin}: {message}")

    def _data_input(self, x) -> Container:
        """The one data input of Reduce/Scan: a container or ndarray (not an index space)."""
        if isinstance(x, (list, tuple)):
            x = np.asarray(x)
        if isinstance(x, IndexSpace) or not isinstance(x, (Container, np.ndarray)):
            raise self._error(DTypeError, "the input must be a Vector, Matrix or ndarray, got "
                              f"{type(x).__name__}")
        return as_container(x, f"{self.origin}: input")

    def _check_params_arg(self, params) -> dict | None:
        if params is None:
            return None
        if not isinstance(params, Mapping):
            raise self._error(ParameterError, f"params must be a dict, got {type(params).__name__}")
        return dict(params)

    def _run_tuned(self, plan: Plan, rt: _rt.Runtime, dataset: dict, params,
                   run: Callable) -> tuner.Outcome:
        req = tuner.TuningRequest(
            skeleton=self.kind, kernel_key=plan.kernel_key, device=rt.device,
            space=plan.space(rt), dataset=dataset, features=plan.features,
            forced=params, run=run, origin=self.origin,
            prepare=lambda points: plan.prebuild(rt, points))
        try:
            return tuner.execute(req)
        except ParameterError as exc:
            raise self._error(ParameterError, str(exc)) from None

    def _relaunch(self, rt: _rt.Runtime, kernel, gsize, lsize, argv, point) -> bool:
        """A repeat-call launch at a settled point; False when the runtime refuses it now
        (the caller then takes the full path, which records the refusal and falls back)."""
        try:
            ev = rt.launch(kernel, gsize, lsize, argv, params=point, skeleton=self.kind)
        except RefusedParameters:
            return False
        self._pending_launch = (point, gsize, lsize, ev)
        return True

    def _record(self, outcome: tuner.Outcome, global_size, local_size) -> None:
        self.last_launch = _rt.Launch(self.kind, dict(outcome.params), tuple(global_size),
                                      tuple(local_size) if local_size else None,
                                      list(outcome.events), list(outcome.refused),
                                      outcome.source)


def check_same_shape(origin: str, containers: Sequence) -> tuple[int, ...]:
    shape = containers[0].shape
    for c in containers[1:]:
        if c.shape != shape:
            raise ShapeError(f"{origin}: inputs have different shapes "
                             + " and ".join(str(x.shape) for x in containers))
    return shape


def round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m
