"""A skeleton's plan: what it built for one call signature, ready to launch again.

For each distinct signature of a call (the dtypes and kinds of its arguments) a skeleton builds
one plan: the specialised muscles, the :class:`~.kernel_source.KernelSource` and the launch
parameter space. Each skeleton declares its own subclass with the fields its launches need
(a stencil's shape, a reduction's order, ...), the ``-D`` macros of a launch point
(:meth:`Plan.macros`) and its legal points on a device (:meth:`Plan.make_space`).

A plan works per device runtime: kernels and spaces are looked up for the runtime a launch
uses, so one plan serves several devices. A plan keeps only its latest few kernels
(``KERNELS_PER_PLAN``): the runtime's program cache holds programs (bounded), and a plan that is
dropped lets its programs go.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl

from .. import runtime as _rt
from ..errors import DeviceError
from ..tuner.request import TuningRequest
from ..tuner.space import ParamSpace
from .kernel_source import KernelSource
from .limits import Legality, check_forced

#: Kernels a plan keeps at hand (the latest ones: a fold's two or three, a stencil's probes);
#: the runtime's program cache holds the rest, bounded.
KERNELS_PER_PLAN = 8


@dataclass(eq=False)
class Plan:
    """What every plan has; subclasses add their fields, :meth:`macros` and
    :meth:`make_space`."""

    source: KernelSource
    out_dtype: np.dtype
    muscles: tuple                    # the TypedMuscles; the first takes the extras
    features: dict[str, float]
    origin: str                       # the skeleton and its muscle's file and line
    _last: tuple | None = field(default=None, init=False, repr=False)
    _kernels: dict = field(default_factory=dict, init=False, repr=False)
    _spaces: dict = field(default_factory=dict, init=False, repr=False)

    # -- identity ----------------------------------------------------------------------------
    @property
    def kernel_key(self) -> str:
        return self.source.key

    @property
    def uses_fp64(self) -> bool:
        return self.source.uses_fp64

    @property
    def checked(self) -> bool:
        """Whether the kernel checks its reads and takes a check buffer (check_buffer.py)."""
        return any(getattr(tm, "checked", False) for tm in self.muscles if tm is not None)

    @property
    def muscle(self):
        """The translated muscle the extra arguments are passed to."""
        return self.muscles[0]

    @property
    def model_known(self) -> bool:
        """Whether the tuner's model has measured kernels of this kind (TuningRequest)."""
        return True

    def default_for(self, rt: _rt.Runtime, dataset: Mapping[str, float]) -> dict | None:
        """The first guess for a call on this data where it depends on the data (None: the
        space's default)."""
        return None

    def tuning_dataset(self, dataset: dict) -> dict:
        """The data description the tuner keys scenarios by: ``dataset`` and whatever else
        :meth:`default_for` depends on (sizes alone are bucketed by log2)."""
        return dataset

    def tuning_request(self, rt: _rt.Runtime, skeleton: str, dataset: dict, origin: str,
                       forced: Mapping | None = None, **more) -> TuningRequest:
        """The tuner's request for a call of this plan on ``rt`` (``more``: ``run``,
        ``prepare``): the data keyed as :meth:`tuning_dataset` says, with the plan's default
        for that data and whether the model knows kernels of its kind."""
        dataset = self.tuning_dataset(dataset)
        return TuningRequest(
            skeleton=skeleton, kernel_key=self.kernel_key, device=rt.device,
            space=self.space(rt), dataset=dataset, features=self.features, forced=forced,
            origin=origin, model_known=self.model_known,
            default=self.default_for(rt, dataset), **more)

    # -- what subclasses say -------------------------------------------------------------------
    def macros(self, point: Mapping) -> tuple[str, ...]:
        """The ``-D`` options of a launch point."""
        raise NotImplementedError

    def make_space(self, rt: _rt.Runtime) -> tuple[ParamSpace, Legality]:
        """The legal launch points on ``rt``'s device, and the rules that make them legal."""
        raise NotImplementedError

    def device_options(self, rt: _rt.Runtime) -> tuple[str, ...]:
        """Build options that depend on the device rather than the point."""
        return ()

    def local_bytes(self, point: Mapping) -> int:
        """Local memory one work-group of a launch at ``point`` asks for (its ``__local``
        arrays and local-memory arguments); legal points stay within the device's limit."""
        return 0

    # -- kernels -------------------------------------------------------------------------------
    def options(self, rt: _rt.Runtime, point: Mapping, extra: tuple[str, ...] = ()
                ) -> tuple[str, ...]:
        return self.macros(point) + extra + self.device_options(rt)

    def kernel(self, rt: _rt.Runtime, point: Mapping, name: str | None = None,
               extra: tuple[str, ...] = ()) -> cl.Kernel:
        """The kernel ``name`` (default: the first) of the program for ``point`` on ``rt``."""
        plain = name is None and not extra
        if plain:
            last = self._last
            # The tuner hands back the same decision object on a cache hit: skip the options.
            if last is not None and last[0] is point and last[1] is rt:
                return last[2]
        opts = self.options(rt, point, extra)
        key = (rt, opts, name)
        k = self._kernels.get(key)
        if k is None:
            prg = rt.build(self.source.text, opts, origin=self.origin, owner=self)
            k = rt.kernel(prg, name or self.source.kernel_names[0], origin=self.origin)
            if len(self._kernels) >= KERNELS_PER_PLAN:
                del self._kernels[next(iter(self._kernels))]     # the oldest
            self._kernels[key] = k
        if plain:
            self._last = (point, rt, k)
        return k

    def prebuild(self, rt: _rt.Runtime, points: Sequence[Mapping]) -> None:
        """Build the programs of ``points`` into the runtime's cache (a sweep's ``prepare``
        hook, a chunk at a time): on a GPU in parallel threads (clBuildProgram releases the
        GIL; the runtime builds different programs at once); a CPU's OpenCL compiler runs on
        the cores that would run the threads, so there they build one by one."""
        todo = list(dict.fromkeys(self.options(rt, p) for p in points))
        if len(todo) > 1 and rt.device.kind == "gpu":
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(8, len(todo), os.cpu_count() or 1)) as pool:
                list(pool.map(lambda o: rt.build(self.source.text, o, origin=self.origin,
                                                 owner=self), todo))
            return
        for opts in todo:
            rt.build(self.source.text, opts, origin=self.origin, owner=self)

    def program_text(self, rt: _rt.Runtime, point: Mapping) -> str:
        """The program a launch at ``point`` builds, its options written as ``#define``s."""
        return self.source.program_text(self.options(rt, point))

    # -- spaces --------------------------------------------------------------------------------
    def space(self, rt: _rt.Runtime) -> ParamSpace:
        return self._space_and_rules(rt)[0]

    def legality(self, rt: _rt.Runtime) -> Legality:
        return self._space_and_rules(rt)[1]

    def _space_and_rules(self, rt: _rt.Runtime) -> tuple[ParamSpace, Legality]:
        hit = self._spaces.get(rt)
        if hit is None:
            hit = self._spaces[rt] = self.make_space(rt)
        return hit

    def check_forced(self, rt: _rt.Runtime, forced: Mapping) -> None:
        """Refuse forced parameters that break a limit, naming it (see limits.check_forced)."""
        space, rules = self._space_and_rules(rt)
        check_forced(space, rules.first_broken, forced, self.origin, rt.device.name)

    def check_device(self, rt: _rt.Runtime) -> None:
        """Raise DeviceError when the kernel needs fp64 and the device has none."""
        if self.uses_fp64 and not rt.device.has_fp64:
            raise DeviceError(f"{self.origin}: this muscle needs double precision (float64) but "
                              f"{rt.device.name} has no fp64 support; use float32 data, or "
                              "out_dtype=np.float32, or pick another device with sk.use()")


def feature_dict(tm) -> dict[str, float]:
    """A translated muscle's static features as floats (for the tuner)."""
    return {k: float(v) for k, v in getattr(tm, "features", {}).items()}
