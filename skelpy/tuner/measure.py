"""Timing candidates and checking that they compute the same result.

Kernel time comes from OpenCL profiling events (host-side jitter and Python overhead stay
out). After a warm-up, a point is run again until the 95% confidence interval of the mean is
within ``rel_ci`` of the median ([Cummins 2018] §7.2 reached 2.5-3.7%; see
docs/references.md) or a count/time budget runs out; the median is kept (or, with
``estimator="min"``, the minimum: on a CPU whose noise is only additive, other processes
and interrupts, the minimum of repeats estimates the undisturbed time better than the
median does). A parameter point whose output differs from the default point's is a bug in
the kernel, not a tuning result: :func:`check_same` raises it naming the parameters.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SkelpyError

# Two-sided 97.5% quantiles of Student's t for 1..29 degrees of freedom (then ~normal).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045)


@dataclass
class Budget:
    """How hard to try per point: sample counts, relative CI target and a time cap."""

    warmup: int = 1
    min_reps: int = 3
    max_reps: int = 30
    rel_ci: float = 0.03
    max_seconds: float = 1.0
    # A point whose warm-up run is this many times slower than the best point so far is
    # recorded from that one run: precision does not matter for a point that will never win.
    prune_factor: float | None = 8.0
    # "median" (robust to outliers both ways: GPUs) or "min" (noise that only adds: CPUs)
    estimator: str = "median"


@dataclass
class Measurement:
    seconds: float                    # median (or minimum) kernel seconds
    n: int                            # samples kept
    rel_ci: float                     # half-width of the 95% CI over the median
    result: Any = None                # the last result (for checking, or to return)
    events: list = field(default_factory=list)
    samples: list[float] = field(default_factory=list)


def run_seconds(run: Callable, point: Mapping) -> tuple[Any, list, float]:
    """Run once; seconds from profiling events, or wall time if the run has no events."""
    t0 = time.perf_counter()
    result, events = run(point)
    if events:
        from ..runtime_records import event_seconds

        secs = sum(event_seconds(e) for e in events)
    else:
        secs = time.perf_counter() - t0
    return result, events, secs


def ci_halfwidth(samples: list[float]) -> float:
    n = len(samples)
    if n < 2:
        return math.inf
    t = _T975[n - 2] if n - 2 < len(_T975) else 1.96
    return t * statistics.stdev(samples) / math.sqrt(n)


def measure(run: Callable, point: Mapping, budget: Budget | None = None,
            best_so_far: float | None = None) -> Measurement:
    """Median (or minimum, per ``budget.estimator``) kernel time of ``run(point)``; raises
    whatever ``run`` raises (refusals)."""
    b = budget or Budget()
    start = time.perf_counter()
    result, events = None, []
    for _ in range(max(b.warmup, 0)):
        result, events, secs = run_seconds(run, point)
        if b.prune_factor and best_so_far and secs > b.prune_factor * best_so_far:
            return Measurement(secs, 1, math.inf, result, events, [secs])
    samples: list[float] = []
    rel = math.inf
    while True:
        result, events, secs = run_seconds(run, point)
        samples.append(secs)
        n = len(samples)
        if n >= b.min_reps:
            med = statistics.median(samples)
            rel = ci_halfwidth(samples) / med if med > 0 else 0.0
            if rel <= b.rel_ci or n >= b.max_reps:
                break
            if time.perf_counter() - start > b.max_seconds:
                break
    est = min(samples) if b.estimator == "min" else statistics.median(samples)
    return Measurement(est, len(samples), rel, result, events, samples)


def as_array(result: Any) -> np.ndarray:
    """A snapshot of a skelpy container, NumPy array or scalar as an ndarray.

    Several runs of one call write the same output buffer, and a skeleton marks its output
    as device-written only after the tuner returns; so a container that has a device buffer
    is marked here first, or its host copy from an earlier run would be read again."""
    to_numpy = getattr(result, "to_numpy", None)
    if callable(to_numpy):
        mark = getattr(result, "mark_device_written", None)
        if callable(mark) and getattr(result, "has_device_buffer", False):
            mark()
        return np.array(to_numpy(), copy=True)
    return np.array(result, copy=True)


def same_result(reference: Any, candidate: Any) -> bool:
    """Equal for integers and booleans; allclose for floats (coarsening and work-group size
    legitimately reorder floating-point reductions)."""
    a, b = as_array(reference), as_array(candidate)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        dt = np.complex128 if "c" in (a.dtype.kind, b.dtype.kind) else np.float64
        a64, b64 = a.astype(dt), b.astype(dt)
        finite = np.isfinite(a64)
        scale = float(np.max(np.abs(a64[finite]))) if finite.any() else 1.0
        rtol = 1e-2 if a.dtype.itemsize <= 2 else (1e-3 if a.dtype.itemsize <= 4 else 1e-9)
        return bool(np.allclose(a64, b64, rtol=rtol, atol=rtol * 1e-3 * max(scale, 1e-30),
                                equal_nan=True))
    return bool(np.array_equal(a, b))


def check_same(reference: Any, candidate: Any, params: Mapping, reference_params: Mapping,
               origin: str = "") -> None:
    """Raise :class:`SkelpyError` if ``candidate`` (computed with ``params``) differs from
    the reference result: a launch parameter must never change what is computed."""
    if not same_result(reference, candidate):
        where = f"{origin}: " if origin else ""
        raise SkelpyError(f"{where}launch parameters {dict(params)} compute a different result "
                          f"from {dict(reference_params)}: this is a bug in the kernel for "
                          "those parameters (please report it)")
