"""What every skeleton shares: the muscle, its plans, launching through the tuner, errors.

A skeleton is built once and called many times. For each distinct *signature* of a call
(dtypes and kinds of its arguments) it keeps a plan (``plan.py``): the specialised muscle, the
generated kernel source and its launch space, so that a repeated call costs a few dictionary
look-ups and one enqueue. ``skeleton.source(*args)`` shows the program a call with those
arguments builds, for the launch point that call would use.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import runtime as _rt
from .. import tuner
from ..containers import Container, IndexSpace, MatrixRow, as_container
from ..debug import STATE as DEBUG
from ..dtypes import check_dtype
from ..errors import (
    CallError,
    DeviceError,
    DTypeError,
    ParameterError,
    RefusedParameters,
    ShapeError,
    SkelpyError,
)
from ..muscle import Muscle
from ..muscle.checks import ALL as ALL_CHECKS
from ..muscle.source import short_path
from .plan import Plan


def checked_signature(method: Callable) -> Callable:
    """Make a call that does not fit ``method``'s signature a :class:`CallError` naming the
    skeleton and its muscle, instead of Python's bare TypeError. The signature is bound only
    after a TypeError; the wrapper itself costs one call frame (about 1 us on a slow CPU),
    so the tiny-call paths of Map, Zip and Stencil check their arguments by hand instead."""
    sig = inspect.signature(method)

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except TypeError as exc:
            if isinstance(exc, SkelpyError):
                raise
            try:
                sig.bind(self, *args, **kwargs)
            except TypeError as wrong:
                shown = str(sig).replace("(self, ", "(", 1)
                raise CallError(f"{self.origin}: {wrong} (the call takes {shown})") from None
            raise

    return call


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def caller_where() -> str:
    """``file:line (function)`` of the nearest caller outside skelpy (the user's line)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f = f.f_back
    if f is None:
        return "<unknown caller>"
    return f"{short_path(f.f_code.co_filename)}:{f.f_lineno} ({f.f_code.co_name})"


def constructor(init: Callable) -> Callable:
    """Make every error of a skeleton's constructor name the caller's file and line (where
    the skeleton is built): a muscle that is no function has no line of its own, and a muscle
    defined elsewhere is not where the misuse is. A call that does not fit the signature (a
    missing ``identity``, an unknown keyword) becomes a :class:`CallError`. The exception
    keeps its class and attributes; its message gets ``sk.Kind built at file:line (fn): ``
    in front unless it names that line already."""
    sig = inspect.signature(init)
    kind = init.__qualname__.split(".")[0]

    @functools.wraps(init)
    def build(self, *args, **kwargs):
        try:
            init(self, *args, **kwargs)
        except SkelpyError as exc:
            where = caller_where()
            message = str(exc)
            if where.rsplit(" (", 1)[0] not in message:
                exc.args = (f"sk.{kind} built at {where}: {message}", *exc.args[1:])
            raise
        except TypeError:
            try:
                sig.bind(self, *args, **kwargs)
            except TypeError as wrong:
                shown = str(sig).replace("(self, ", "(", 1)
                raise CallError(f"sk.{kind} built at {caller_where()}: {wrong} (it takes "
                                f"{shown})") from None
            raise

    return build


class Skeleton:
    """Holds a muscle and the plans built from it; subclasses implement ``__call__`` and
    ``_describe`` (what a call with given arguments would build)."""

    kind = "skeleton"

    def __init__(self, muscle, *, out_dtype=None):
        self.muscle = muscle if isinstance(muscle, Muscle) else Muscle(muscle)
        self.out_dtype = None if out_dtype is None else self._dtype_arg(out_dtype)
        self._last_launch: _rt.Launch | None = None
        self._pending_launch: tuple | None = None
        # plans of normal calls, and of debug mode's checked kernels (never mixed)
        self._plans_by_mode: tuple[dict[tuple, Plan], dict[tuple, Plan]] = ({}, {})

    def _check_param_count(self, muscle: Muscle, least: int, exact: bool, what: str,
                           role: str = "muscle") -> None:
        """A muscle that cannot take this skeleton's arguments: a CallError at construction
        (``least`` parameters, or exactly that many; ``what`` says what they receive)."""
        n = muscle.n_params
        if n < least or (exact and n != least):
            want = f"exactly {least}" if exact else f"at least {least}"
            raise CallError(f"{self.origin}: the {role} takes {n} parameter(s) but {want} "
                            f"are needed ({what})")

    @property
    def _plans(self) -> dict[tuple, Plan]:
        """The plans of the current mode (debug mode builds checked kernels)."""
        return self._plans_by_mode[DEBUG.on]

    @staticmethod
    def _checks() -> str | None:
        """The level of checked reads the muscles of a new plan are translated with."""
        return ALL_CHECKS if DEBUG.on else None

    def _ready(self):
        """Called first in every call: drops what was built from captured values that have
        changed since (the muscle's :meth:`~skelpy.muscle.Muscle.version` moved on), and
        returns the repeat-call launcher to try (None in debug mode, whose calls always take
        the full, checked path)."""
        watch = self._watch
        if watch is None:
            watch = self._watch = tuple((m, m.version()) for m in self._own_muscles())
        for muscle, generation in watch:
            if muscle.generation != generation or muscle.stale():
                self._renew()
                break
        return None if DEBUG.on else self._fast

    _fast = None
    _watch: tuple | None = None      # (muscle, its generation) of the Python muscles used

    def _own_muscles(self) -> list[Muscle]:
        found = [self.muscle, getattr(self, "zip_muscle", None), getattr(self, "map_muscle",
                                                                          None)]
        return [m for m in found if m is not None and not m.is_c]

    def _renew(self) -> None:
        """Forget every plan, launcher and cached host-side fact built from the muscles."""
        self._plans_by_mode = ({}, {})
        for name in ("_fast", "_temporal_plans"):
            self.__dict__.pop(name, None)
        derived = self.__dict__.get("_commutative_cache")
        if derived is not None:
            derived.clear()
        self._watch = tuple((m, m.version()) for m in self._own_muscles())

    @property
    def last_launch(self) -> _rt.Launch | None:
        """What the latest call ran (parameters, sizes, events, refusals, decision source)."""
        pending = self._pending_launch
        if pending is not None:
            params, gsize, lsize, event, choice = pending
            self._last_launch = _rt.Launch(self.kind, dict(params), gsize, lsize, [event], [],
                                           "cache", choice)
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

    # -- source ------------------------------------------------------------------------------
    def source(self, *args, params: Mapping | None = None, **call_options) -> str:
        """The OpenCL C program a call with these arguments builds: the generated source with
        the launch parameters of the point the call would use (``params=`` forces them, as in
        a call) written as ``#define`` lines in front. Nothing is launched."""
        self._ready()
        plan, dataset = self._describe(args, **call_options)
        rt = _rt.current()
        forced = self._check_params_arg(params)
        if forced is not None:
            plan.check_forced(rt, forced)
        req = plan.tuning_request(rt, self.kind, dataset, self.origin, forced)
        point, _source = tuner.choose_params(req)
        return plan.program_text(rt, point)

    def _describe(self, args: Sequence, **call_options) -> tuple[Plan, dict]:
        """The plan and the tuner's data description of a call with ``args``."""
        raise NotImplementedError

    # -- argument checks -----------------------------------------------------------------------
    def _unexpected(self, keywords: Mapping, takes: str) -> CallError:
        """The error of a call with keywords it does not take (hot ``__call__`` methods check
        ``**unknown`` themselves instead of paying for :func:`checked_signature`)."""
        names = ", ".join(repr(k) for k in keywords)
        return CallError(f"{self.origin}: got unexpected keyword argument(s) {names} (the call "
                         f"takes {takes})")

    def _error(self, cls, message: str) -> SkelpyError:
        return cls(f"{self.origin}: {message}")

    def _check_forced_on_empty(self, plan: Plan, forced: Mapping | None, rt) -> None:
        """An empty input runs no kernel, yet the forced params are checked as for any size
        (names and values; legality depends on the size): a misspelt name, accepted silently
        on an empty input, was an error on the next non-empty one."""
        if forced:
            try:
                plan.space(rt).normalise(forced, check_legal=False)
            except ParameterError as exc:
                raise self._error(ParameterError, str(exc)) from None

    def _dtype_arg(self, dtype, what: str = "out_dtype") -> np.dtype:
        return check_dtype(dtype, f"{self.origin}: {what}")

    def _data_input(self, x) -> Container:
        """The one data input of Reduce/Scan: a container or ndarray (not an index space)."""
        if isinstance(x, (list, tuple)):
            x = np.asarray(x)
        if isinstance(x, IndexSpace) or not isinstance(x, (Container, MatrixRow, np.ndarray)):
            raise self._error(DTypeError, "the input must be a Vector, Matrix or ndarray, got "
                              f"{type(x).__name__}")
        return self._container(x, "input")

    def _container(self, value, what: str):
        """``as_container`` with errors that name the muscle. A Matrix row ``m[i]`` is its
        view ``m[i, :]`` (it was a DTypeError: "expected a Vector, ..., got MatrixRow")."""
        if isinstance(value, MatrixRow):
            value = value[:]
        try:
            return as_container(value, f"{self.origin}: {what}")
        except (DTypeError, ShapeError) as exc:
            message = str(exc)
            if not message.startswith(self.origin):
                message = f"{self.origin}: {what}: {message}"
            raise type(exc)(message) from None

    def _naming_errors(self) -> _NamingErrors:
        """A context manager: within it, shape and device errors raised below the skeleton (an
        input too large for one buffer, a failed allocation) name the skeleton and its muscle.
        (A small class rather than contextlib's generator: this sits on every full call.)"""
        return _NamingErrors(self)

    def _check_params_arg(self, params) -> dict | None:
        if params is None:
            return None
        if not isinstance(params, Mapping):
            raise self._error(ParameterError, f"params must be a dict, got {type(params).__name__}")
        return dict(params)

    # -- launching -----------------------------------------------------------------------------
    def _run_tuned(self, plan: Plan, rt: _rt.Runtime, dataset: dict, params,
                   run: Callable) -> tuner.Outcome:
        if params is not None:
            plan.check_forced(rt, params)
        req = plan.tuning_request(rt, self.kind, dataset, self.origin, params, run=run,
                                  prepare=lambda points: plan.prebuild(rt, points))
        try:
            if DEBUG.on and plan.checked:
                # debug kernels are slower on purpose: never measured, never in the store
                with tuner.tuning("off"):
                    return tuner.execute(req)
            return tuner.execute(req)
        except ParameterError as exc:
            message = str(exc)
            if not message.startswith(self.origin):
                message = f"{self.origin}: {message}"
            raise ParameterError(message) from None

    def _runtime_for(self, plan: Plan, dataset: dict, inputs: Sequence, extras: Sequence = (),
                     *, out_bytes: int, reads_result: bool | None = None,
                     iterations: int = 1) -> tuple[_rt.Runtime, Any]:
        """The runtime this call runs on, and the cost model's choice that picked it in auto
        mode (``sk.use("auto")``; None otherwise), with the inputs then already there."""
        rt = _rt.fixed()
        if rt is not None:
            return rt, None
        if not _rt.auto():
            return _rt.current(), None
        choice = _costmodel_auto().place_call(self, plan, dataset, inputs, extras,
                                              out_bytes=out_bytes, reads_result=reads_result,
                                              iterations=iterations)
        return choice.runtime, choice

    def _chosen(self, choice, result=None) -> None:
        """After an auto-mode call: the choice goes into ``last_launch`` and its events to
        the cost model's history."""
        launch = self.last_launch
        if choice is None or launch is None:
            return
        launch.choice = choice
        _costmodel_auto().launched(self, choice, launch.events, result)

    def _auto_repeat(self, rt: _rt.Runtime, stem, containers):
        """For a repeat-call launcher made for ``rt`` in auto mode (``stem``: the cost
        model's signature of the call it was made from; None when made for a fixed device):
        the cost model's remembered choice for this call if it is still ``rt``, the inputs
        then there; None sends the call down the full path."""
        if stem is None or not _rt.auto():
            return None
        return _costmodel_auto().repeat(self, stem, containers, rt)

    def _relaunch(self, rt: _rt.Runtime, kernel, gsize, lsize, argv, point,
                  choice=None, result=None) -> bool:
        """A repeat-call launch at a settled point; False when the runtime refuses it now
        (the caller then takes the full path, which records the refusal and falls back).
        ``choice``: the cost model's, in auto mode (see :meth:`_auto_repeat`)."""
        try:
            ev = rt.launch(kernel, gsize, lsize, argv, params=point, skeleton=self.kind,
                           origin=self.origin)
        except RefusedParameters:
            return False
        self._pending_launch = (point, gsize, lsize, ev, choice)
        if choice is not None:
            _costmodel_auto().launched(self, choice, [ev], result)
        return True

    def _record(self, outcome: tuner.Outcome, global_size, local_size) -> None:
        self.last_launch = _rt.Launch(self.kind, dict(outcome.params), tuple(global_size),
                                      tuple(local_size) if local_size else None,
                                      list(outcome.events), list(outcome.refused),
                                      outcome.source)


def _costmodel_auto():
    """``skelpy.costmodel.auto``, imported on first use (only auto mode needs the cost
    model)."""
    global _AUTO
    if _AUTO is None:
        from ..costmodel import auto
        _AUTO = auto
    return _AUTO


_AUTO = None


class _NamingErrors:
    __slots__ = ("skel",)

    def __init__(self, skel: Skeleton):
        self.skel = skel

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ, exc, tb) -> bool:
        if exc is None or not isinstance(exc, (ShapeError, DeviceError)):
            return False
        origin = self.skel.origin
        message = str(exc)
        if message.startswith(origin):
            return False
        raise type(exc)(f"{origin}: {message}") from None


def check_same_shape(origin: str, containers: Sequence) -> tuple[int, ...]:
    shape = containers[0].shape
    for c in containers[1:]:
        if c.shape != shape:
            raise ShapeError(f"{origin}: inputs have different shapes "
                             + " and ".join(str(x.shape) for x in containers))
    return shape


def round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m

