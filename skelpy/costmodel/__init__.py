"""The right device for each call: a calibrated cost model chooses CPU or GPU, transfers
included ([Pöppl 2014], [Gaspar 2022], [Joshi & Omar 2011]; see docs/references.md).

With ``sk.use("auto")`` (or ``SKELPY_DEVICE=auto``) every skeleton call runs on the device
with the lowest predicted time for *this* call: the uploads of inputs not resident there,
the launch, the kernel, and the download of the result if the caller reads it on the host.
A switch away from the device that holds the data needs a predicted gain larger than the
predictions' own measured error. ``skeleton.last_launch.choice`` says which device, why,
and (once the kernels ran) how good the prediction was; every prediction is recorded next
to the measured time, and the measured times are preferred to the static model next time.

Layout, top to bottom:

=================  ==========================================================================
``auto.py``        the hook skeleton calls use in auto mode: place a call, record its events
``choice.py``      the decision: CallSpec, predictions per device, the margin, DeviceChoice
``decisions.py``   decisions remembered per call signature: a repeat costs a dictionary lookup
``model.py``       the prediction in [Pöppl 2014]'s form, term by term
``features.py``    the static work of a call: operations by type, memory accesses by class
``access.py``      access classes of the muscle's reads ([Joshi & Omar 2011]'s ID(a, b, c))
``tuned.py``       the tuner's measurements of a scenario, preferred over the static model
``history.py``     predictions next to measured times; the error d; the model's correction
``calibrate.py``   microbenchmarks fitting one device's coefficients (a few seconds)
``registry.py``    coefficients per device: memory, file, or calibrate once
``terms.py``       the coefficients as validated plain data (JSON)
``files.py``       the JSON files under the private cache folder
=================  ==========================================================================
"""

from __future__ import annotations

from .calibrate import calibrate
from .choice import CallSpec, DeviceChoice, choose, predict, settings
from .features import Work, call_work
from .model import Prediction
from .registry import coefficients, remember, stored
from .terms import DeviceCoefficients, Line


def reset() -> None:
    """Forget what the cost model holds in memory: coefficients, histories, decisions
    (tests; the files stay)."""
    from . import auto, choice, history, registry

    registry.forget()
    history.forget()
    choice.forget()
    auto.forget()


__all__ = ["CallSpec", "DeviceChoice", "DeviceCoefficients", "Line", "Prediction", "Work",
           "calibrate", "call_work", "choose", "coefficients", "predict", "remember",
           "reset", "settings", "stored"]
