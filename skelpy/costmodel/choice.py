"""The device for one call: the lowest predicted time, with a margin.

For each candidate device the prediction adds the uploads of the inputs not resident there
(an input resident on another device moves through the host: its download there plus the
upload here), the launch, the kernel, and the download of the result when the caller will
read it on the host. The call stays on its *incumbent* device (the one holding most of its
input bytes; else the device the previous call of this skeleton chose; else the first
candidate) unless another device's prediction is lower by more than the predictions' own
measured error: [Gaspar 2022] §8.5 found a strict comparison wrong on short kernels, and
proposed such a margin.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyopencl as cl

from ..runtime import event_seconds
from . import decisions, tuned
from . import history as _history
from . import model as _model
from .features import Work, call_work
from .registry import coefficients
from .terms import DeviceCoefficients


@dataclass
class Settings:
    """``measurements``: predict kernels from measured times where there are any (this
    device's history, the tuning store) and correct the static model by its measured
    error; False predicts from the coefficients alone (tests of the static model).
    ``explore``: run a kernel once on a device it never ran on, when that device's
    prediction is within this factor of the chosen one's (1 or less: never)."""

    measurements: bool = True
    explore: float = 1.5

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name == "measurements":
            decisions.follow_measurements(value)
        decisions.changed()               # remembered decisions followed the old settings


settings = Settings()


@dataclass
class CallSpec:
    """What the cost model needs to know about one skeleton call.

    ``inputs`` are the containers the skeleton streams (index spaces left out), ``extras``
    the containers the muscle reads by index. ``reads_result``: whether the caller will
    read the result on the host (a Reduce's scalar always)."""

    skeleton: str
    kernel_key: str
    features: Mapping[str, float]
    dataset: Mapping[str, float]
    inputs: Sequence[Any]
    out_itemsize: int
    out_bytes: int
    reads_result: bool = False
    extras: Sequence[Any] = ()
    extra_reads: Mapping[str, float] | None = None
    needs_fp64: bool = False
    iterations: int = 1

    @property
    def measure_key(self) -> str:
        """The key of this call's measured times: the kernel, and how many steps a call
        runs (a Stencil's iterations run other kernels, in passes)."""
        return self.kernel_key if self.iterations == 1 else \
            f"{self.kernel_key}*{self.iterations}"

    def work(self) -> Work:
        return call_work(self.skeleton, self.features, self.dataset,
                         input_itemsizes=[c.dtype.itemsize for c in self.inputs],
                         out_itemsize=self.out_itemsize, extra_reads=self.extra_reads,
                         iterations=self.iterations)

    def containers(self) -> list:
        """Every container the call reads, each once."""
        got = self.__dict__.get("_containers")
        if got is None:
            seen, got = set(), []
            for c in (*self.inputs, *self.extras):
                if id(c) not in seen:
                    seen.add(id(c))
                    got.append(c)
            self.__dict__["_containers"] = got
        return got


def nbytes_of(c) -> int:
    """A container's bytes (``math.prod``: NumPy's prod costs microseconds per call)."""
    return math.prod(c.shape) * c.dtype.itemsize


def residence(c) -> tuple[bool, Any]:
    """(host copy valid, runtime holding a valid device copy or None) of a container."""
    return c.residence


NEAR = 4.0                  # a measured size within this factor is "near"


def kernel_prediction(rt, spec: CallSpec, coef: DeviceCoefficients, work: Work,
                      others: Sequence = ()) -> tuple[float, str]:
    """The kernel term and where it came from, measured times first:

    1. ``history``: this kernel's own calls on this device at this size (log2 bucket);
    2. ``tuner``: the tuning store's measurement of this scenario;
    3. ``nearby``: measured on this device at sizes within a factor :data:`NEAR`, or on
       both sides of this one (see :func:`from_nearby`);
    4. ``scaled``: measured at this size on another device (``others``: (runtime,
       coefficients) pairs), times the ratio of the two devices' static predictions:
       errors of the class costs that both devices share cancel in the ratio;
    5. ``nearby`` from farther sizes;
    6. ``model``: the static model, times its measured error on this device."""
    dev = rt.device
    n = float(spec.dataset.get("n", 0.0))
    static = _model.kernel_seconds(coef, work)
    if not settings.measurements:
        return static, "model"
    hist = _history.history(dev.key)
    t = hist.kernel_time(spec.measure_key, n)
    if t is not None:
        return t, "history"
    t = tuned.scenario_seconds(dev, spec.kernel_key, spec.dataset)
    if t is not None:
        return t * spec.iterations, "tuner"
    points = hist.measured_sizes(spec.measure_key)
    points += [(m, s * spec.iterations) for m, s in tuned.measured_sizes(dev, spec.kernel_key)]

    def model_at(m: float) -> float:
        return _model.kernel_seconds(coef, work.at_size(m / n))

    if points and n > 0:
        sizes = [m for m, _ in points]
        if any(n / NEAR <= m <= n * NEAR for m in sizes) or (min(sizes) < n < max(sizes)):
            return from_nearby(points, n, model_at), "nearby"
    for other_rt, other_coef in others:
        t = _history.history(other_rt.device.key).kernel_time(spec.measure_key, n)
        there = _model.kernel_seconds(other_coef, work)
        if t is not None and there > 0:
            return t * static / there, "scaled"
    if points and n > 0:
        return from_nearby(points, n, model_at), "nearby"
    return static * hist.correction(), "model"


def from_nearby(points: Sequence[tuple[float, float]], n: float, model) -> float:
    """The kernel time at size ``n`` from times measured at other sizes (``model(m)``:
    the static prediction at size m). Between two measured sizes: on the line through
    them (kernel costs are linear in the size). Above the largest: its time plus a slope
    between the measured one (through the next smaller measured size, or from the
    model's fixed cost) and the model's, weighted by how much of the model's time at that
    size grows with the size: a small call's time says little about the slope. Below the
    smallest: its time scaled by the model."""
    below = sorted(p for p in points if p[0] <= n)
    above = sorted(p for p in points if p[0] > n)
    if below and above:
        (n0, t0), (n1, t1) = below[-1], above[0]
        if n1 > n0:
            return max(t0 + (t1 - t0) * (n - n0) / (n1 - n0), 0.0)
        return t0
    if below:
        n0, t0 = below[-1]
        if n <= n0:
            return t0
        fixed = model(0.0)
        at = model(n0)
        slope_model = (at - fixed) / n0 if n0 > 0 else 0.0
        share = (at - fixed) / at if at > 0 else 0.0
        if len(below) >= 2 and below[-2][0] < n0:
            na, ta = below[-2]
            slope_meas = (t0 - ta) / (n0 - na)
        else:
            slope_meas = (t0 - fixed) / n0 if n0 > 0 else slope_model
        if slope_meas <= 0:
            slope_meas = slope_model
        slope = share * slope_meas + (1 - share) * slope_model
        return t0 + slope * (n - n0)
    n1, t1 = above[0]
    at = model(n1)
    return t1 * model(n) / at if at > 0 else t1


def predict(rt, spec: CallSpec, *, work: Work | None = None,
            coef: DeviceCoefficients | None = None, label: str | None = None,
            others: Sequence = ()) -> _model.Prediction:
    """The predicted time of ``spec`` on runtime ``rt`` (``others``: the other candidates
    as (runtime, coefficients), whose measurements of this kernel may serve)."""
    coef = coef or coefficients(rt)
    work = work or spec.work()
    upload, moves = 0.0, []
    for c in spec.containers():
        on_host, holder = residence(c)
        if holder is rt:
            continue
        nbytes = nbytes_of(c)
        if not on_host and holder is not None:        # on another device: via the host
            upload += _model.download_seconds(coefficients(holder), nbytes)
            moves.append((nbytes, holder.device.name))
        upload += _model.upload_seconds(coef, nbytes)
    if upload and settings.measurements:
        upload *= _history.history(rt.device.key).upload_correction()
    kernel, source = kernel_prediction(rt, spec, coef, work, others)
    download = _model.download_seconds(coef, spec.out_bytes) if spec.reads_result else 0.0
    return _model.Prediction(label or rt.device.name, upload,
                             _model.launch_seconds(coef, work.kernels), kernel, download,
                             source, tuple(moves))


@dataclass
class DeviceChoice:
    """Which device a call ran on and why; ``last_launch.choice`` of a skeleton.

    ``predictions`` maps each candidate's label to its :class:`Prediction`. Once the call's
    kernels finished, ``measured`` is the measured time of the parts the model predicted
    and can observe (kernels, uploads) and ``error`` the distance ``d`` between the two."""

    runtime: Any
    label: str
    predictions: dict[str, _model.Prediction]
    incumbent: str
    margin: float
    reason: str
    skeleton: str = ""
    kernel_key: str = ""
    n: float = 0.0
    upload_measured: float = 0.0
    events: list = field(default_factory=list)
    recorded: bool = False
    cold: bool = False      # the first call of its kernel on its device in this process
    stem: tuple = ()        # the call signature's kernel and sizes (see .decisions)
    entry: Any = None       # the remembered decision this choice belongs to
    reused: bool = False    # a remembered decision, not predicted for this call
    sampled: bool = True    # this call's measurement goes into the history

    @property
    def device(self) -> str:
        return self.label

    def again(self, entry: Any) -> DeviceChoice:
        """The same decision for a repeat of the call (fresh measurements), from the
        remembered ``entry`` (a :class:`~.decisions.Entry`)."""
        new = object.__new__(DeviceChoice)
        d = new.__dict__
        d.update(self.__dict__)
        d["upload_measured"], d["events"], d["recorded"], d["cold"] = 0.0, [], False, False
        d["entry"], d["reused"], d["sampled"] = entry, True, entry.sampled()
        return new

    @property
    def predicted(self) -> _model.Prediction:
        return self.predictions[self.label]

    def done(self) -> bool:
        try:
            return all(e.command_execution_status == cl.command_execution_status.COMPLETE
                       for e in self.events)
        except cl.Error:
            return True

    @property
    def kernel_measured(self) -> float:
        return sum(event_seconds(e) for e in self.events)

    @property
    def measured(self) -> float:
        return self.kernel_measured + self.upload_measured

    @property
    def error(self) -> float:
        p = self.predicted.kernel + self.predicted.upload
        m = self.measured
        return max(p, m) / min(p, m) if min(p, m) > 0 else math.inf

    def record(self) -> None:
        """Put the prediction next to the measured times in the device's history; a
        remembered decision whose prediction this contradicts is made again."""
        if self.recorded or not self.events:
            return
        self.recorded = True
        p = self.predicted
        up_p, up_m = (0.0, 0.0) if self.cold else (p.upload, self.upload_measured)
        rec = _history.Record(self.skeleton, self.kernel_key, self.n, p.kernel,
                              self.kernel_measured, up_p, up_m, p.kernel_source, time.time())
        _history.record(self.runtime.device.key, rec)
        if self.entry is not None:
            self.entry.check(rec.kernel_predicted + rec.upload_predicted,
                             rec.kernel_measured + rec.upload_measured)

    def __repr__(self) -> str:
        preds = ", ".join(f"{k}: {v.total * 1e3:.3f} ms" for k, v in self.predictions.items())
        again = " (a remembered decision)" if self.reused else ""
        text = f"DeviceChoice({self.label!r}; {self.reason}{again}; predicted {preds}"
        if self.events and self.done():
            p = self.predicted
            text += (f"; kernel+uploads predicted {(p.kernel + p.upload) * 1e3:.3f} ms, "
                     f"measured {self.measured * 1e3:.3f} ms (d = {self.error:.2f})")
        return text + ")"


def labels(runtimes: Sequence) -> list[str]:
    """Device names, numbered where two devices share one."""
    names = [rt.device.name for rt in runtimes]
    return [f"{n} #{k}" if names.count(n) > 1 else n for k, n in enumerate(names)]


def incumbent_of(spec: CallSpec, runtimes: Sequence, previous: Any = None) -> Any:
    """The runtime a call stays on unless another is clearly faster: the one holding most
    input bytes, else ``previous`` (the last choice for this skeleton), else the first."""
    held: dict[int, int] = {}
    for c in spec.containers():
        _on_host, holder = residence(c)
        if holder is not None and any(holder is rt for rt in runtimes):
            held[id(holder)] = held.get(id(holder), 0) + nbytes_of(c)
    if held:
        top = max(held.values())
        for rt in runtimes:
            if held.get(id(rt)) == top:
                return rt
    if previous is not None and any(previous is rt for rt in runtimes):
        return previous
    return runtimes[0]


def _explore(spec: CallSpec, preds: dict, by_label: dict, label: str, reason: str):
    """Run on a device that has never run this kernel when its prediction is within
    ``settings.explore`` of the chosen one: otherwise a device the static model
    overestimates is never measured, and never chosen. Once per kernel and device."""
    chosen = preds[label].total
    for other, p in sorted(preds.items(), key=lambda kv: kv[1].total):
        key = (by_label[other].device.key, spec.measure_key)
        if other == label or p.kernel_source != "model" or key in _explored \
                or p.total > settings.explore * chosen:
            continue
        _explored.add(key)
        return other, (f"exploring: {other} has not run this kernel (predicted "
                       f"{p.total / max(chosen, 1e-12):.2f}x the time of {label})")
    return label, reason


_explored: set[tuple[str, str]] = set()


def forget() -> None:
    """Forget the explorations and unusable devices of this process (tests)."""
    _explored.clear()
    _unusable.clear()


_unusable: dict[str, str] = {}


def _calibrated(rt) -> bool:
    """Whether ``rt``'s device has coefficients (calibrating it now if needed); a device
    whose calibration fails is left out of auto mode, with one warning."""
    key = rt.device.key
    if key in _unusable:
        return False
    try:
        coefficients(rt)
        return True
    except Exception as exc:  # noqa: BLE001 - a broken device must not break every call
        _unusable[key] = str(exc)
        warnings.warn(f"skelpy: auto mode leaves out {rt.device.name}: its cost-model "
                      f"calibration failed ({exc})", RuntimeWarning, stacklevel=4)
        return False


def choose(spec: CallSpec, runtimes: Sequence, previous: Any = None) -> DeviceChoice:
    """Predict ``spec`` on every runtime that can run it and pick one (see module doc)."""
    usable = [rt for rt in runtimes if (not spec.needs_fp64 or rt.device.has_fp64)
              and _calibrated(rt)]
    if not usable:
        usable = list(runtimes)[:1]                   # the call reports the missing fp64
    names = labels(usable)
    decisions.counted_predictions(len(usable))
    work = spec.work()
    coefs = [(rt, coefficients(rt)) for rt in usable]
    preds = {lab: predict(rt, spec, work=work, coef=c, label=lab,
                          others=[oc for oc in coefs if oc[0] is not rt])
             for (rt, c), lab in zip(coefs, names, strict=True)}
    by_label = dict(zip(names, usable, strict=True))
    inc = incumbent_of(spec, usable, previous)
    inc_label = names[[id(r) for r in usable].index(id(inc))]
    best_label = min(preds, key=lambda k: preds[k].total)
    if best_label == inc_label:
        margin = 1.0
        label, reason = inc_label, "lowest predicted time"
    else:
        n = float(spec.dataset.get("n", 0.0))
        margin = math.sqrt(_history.history(inc.device.key).error(n)
                           * _history.history(by_label[best_label].device.key).error(n)) \
            if settings.measurements else _history.DEFAULT_ERROR
        gain = preds[inc_label].total / max(preds[best_label].total, 1e-12)
        if gain > margin:
            label = best_label
            reason = f"predicted {gain:.2f}x faster than {inc_label} (margin {margin:.2f})"
        else:
            label = inc_label
            reason = (f"stays: {best_label} predicted only {gain:.2f}x faster (margin "
                      f"{margin:.2f})")
    if settings.measurements and settings.explore > 1:
        label, reason = _explore(spec, preds, by_label, label, reason)
    return DeviceChoice(by_label[label], label, preds, inc_label, margin, reason,
                        spec.skeleton, spec.measure_key, float(spec.dataset.get("n", 0.0)))
