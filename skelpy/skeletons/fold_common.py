"""What the folding skeletons share (Reduce, MapReduce, Scan, AllPairs' zip/reduce form): the
identity as a kernel value, a fold's result as a NumPy scalar, and the device's limits and
build options for their work-groups and local arrays.

(The accumulator dtype and what a fold muscle computes are in ``fold_muscle.py``.)
"""

from __future__ import annotations

import numpy as np

from .. import runtime as _rt
from ..errors import DTypeError
from .arguments import scalar_value
from .limits import Rule, at_least

ITEMS_VALUES = (1, 2, 4, 8, 16, 32, 64)
MAX_WG = 1024
LOCAL_RESERVE = 512                   # bytes of local memory left to the implementation


def check_identity(identity, origin: str):
    """The identity must be a number; it is converted to the accumulator dtype per call."""
    if isinstance(identity, (bool, int, float, np.generic)) or (
            isinstance(identity, np.ndarray) and identity.ndim == 0):
        return identity
    raise DTypeError(f"{origin}: identity must be a number (the neutral element of the "
                     f"operator, e.g. 0 for +, 1 for *), got {type(identity).__name__}")


def identity_value(identity, dtype: np.dtype, origin: str):
    """The identity as a kernel argument of ``dtype`` (its storage type), exactly."""
    dt = np.dtype(dtype)
    if dt.kind in "iub" and isinstance(identity, (float, np.floating)) and (
            not np.isfinite(identity) or float(identity) != int(identity)):
        raise DTypeError(f"{origin}: identity {identity!r} cannot be represented as {dt} "
                         "(for a max over integers use np.iinfo(dtype).min)")
    if dt.kind in "iu" and not isinstance(identity, (bool, np.bool_)):
        info = np.iinfo(dt)
        if not info.min <= int(identity) <= info.max:
            raise DTypeError(f"{origin}: identity {identity!r} is out of range for {dt}")
    return scalar_value(identity, dt, origin)


def as_scalar(host: np.ndarray, dtype: np.dtype):
    """A downloaded one-element storage array as a NumPy scalar of ``dtype``."""
    if dtype == np.bool_:
        return np.bool_(host[0] != 0)
    return host.view(dtype)[0]


def local_budget(rt: _rt.Runtime) -> int:
    """Bytes of local memory a kernel's own arrays may use on this device."""
    return rt.device.local_mem_size - LOCAL_RESERVE


def max_wg(rt: _rt.Runtime) -> int:
    """The largest 1-D work-group size worth offering the tuner on this device."""
    return min(MAX_WG, rt.device.max_work_group_size, rt.device.max_work_item_sizes[0])


def one_launch_ok(rt: _rt.Runtime) -> bool:
    """Whether the last-work-group-finishes pattern (stages=1) is safe here: it needs a fence
    that orders global stores for other work-groups, which we have on NVIDIA (PTX membar.gl)
    and on CPUs; elsewhere the partials are folded by a second launch."""
    return rt.device.kind == "cpu" or "nvidia" in rt.device.platform.lower()


def device_options(rt: _rt.Runtime) -> tuple[str, ...]:
    """Build options that depend on the device: SKP_NVIDIA (the fence to use) and SKP_UNROLL
    (unroll coarsening loops: many loads in flight on a GPU, only compile time on a CPU)."""
    opts = ("-DSKP_UNROLL=1",) if rt.device.kind == "gpu" else ()
    if "nvidia" in rt.device.platform.lower():
        opts += ("-DSKP_NVIDIA=1",)
    return opts


# -- launch rules of the fold kernels (see limits.py) ----------------------------------------


def power_of_two(name: str) -> Rule:
    """``name`` must be a power of two."""
    return Rule(lambda p: int(p[name]) & (int(p[name]) - 1) == 0,
                lambda p: f"{name}={p[name]} is not a power of two (the group's trees need one)")


def work_group_rules(rt: _rt.Runtime, wmax: int) -> list[Rule]:
    """A 1-D work-group ``wg``: at least 1, at most ``wmax``, a power of two."""
    dev = rt.device
    return [
        at_least("wg", 1),
        Rule(lambda p: int(p["wg"]) <= wmax,
             lambda p: f"work-group size wg={p['wg']} is over {wmax}, the most offered on "
                       f"{dev.name} (device {dev.max_work_group_size}, work-items "
                       f"{dev.max_work_item_sizes[0]}, skelpy's {MAX_WG})"),
        power_of_two("wg"),
    ]


def local_rule(plan, rt: _rt.Runtime) -> Rule:
    """The plan's ``local_bytes(point)`` within the device's local memory less the reserve."""
    budget = local_budget(rt)
    return Rule(lambda p: plan.local_bytes(p) <= budget,
                lambda p: f"the group's local arrays need {plan.local_bytes(p)} bytes; "
                          f"{rt.device.name} has {rt.device.local_mem_size} bytes of local "
                          f"memory ({budget} after the implementation's reserve)")
