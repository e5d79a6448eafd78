"""The embedded autotuner: every skeleton launch goes through :func:`execute`.

A skeleton describes one call as a :class:`TuningRequest`; :func:`execute` decides its
launch parameters, runs it, survives parameters the OpenCL runtime refuses, and returns an
:class:`Outcome`. Modes (:func:`tuning`, ``$SKELPY_TUNE``): ``off``, ``model`` (default),
``online``, ``exhaustive``.

Layout, top to bottom:

=====================  ======================================================================
``request.py``         TuningRequest, Outcome, Ticket: what skeletons and the tuner exchange
``engine.py``          the decision path (cache -> store -> model -> default) and launches
                       that fall back to the nearest legal point on refusal
``strategies/``        one module per mode (off, model, online, exhaustive), one signature
``sweep.py``           measuring many points: order, building ahead, keeping a point that
                       is never slower than the untuned choice
``state.py``           everything the tuner remembers in this process, in one object
``modes.py``           the current mode
``space.py``           launch-parameter spaces: legality, nearest legal point
``measure.py``         timing candidates from profiling events; result checks
``features.py``        feature vectors of scenarios and points
``model.py``           per-device forests: training (the names below importable from it)
``model_settings.py``  the models' settings per kind of device (GPU, CPU)
``packed_forest.py``   a fitted forest as NumPy arrays (no scikit-learn to predict)
``model_choice.py``    choosing a point with a model: pick, shortlist, sweep order
``model_files.py``     the data-only model format, safe loading, the shipped models
``model_manager.py``   loading, caching and retraining the models of one store
``zero_shot.py``       models across devices: the shipped data and model, local weighting
``training_data.py``   measurements as compact data-only files (shipped per device)
``budget.py``          ``skelpy tune``: programs, sizes and points that fit a time budget
``store.py``           the SQLite store of measurements and refusals
``store_file.py``      its file: WAL, short writes, a write queue, fall-back to memory
``cache_dir.py``       the private cache folder (0700/0600, no symlinks, owner checks)
``synthetic.py``       synthetic training programs (``skelpy tune --synthetic``)
=====================  ======================================================================
"""

from __future__ import annotations

from .engine import (
    capture_requests,
    choose_params,
    execute,
    forget_space,
    manager,
    new_call,
    refused_points,
    reset,
    scenario_id,
    scenario_key,
    sweep_deadline,
    ticket_valid,
)
from .modes import get_mode, set_mode, tuning
from .request import Outcome, Ticket, TuningRequest
from .space import Param, ParamSpace, Point, pow2_range
from .state import MODES, STATE

settings = STATE.settings
"""The strategies' knobs (:class:`~skelpy.tuner.state.Settings`): online candidates, the
sweep budget, progress bars."""

__all__ = ["TuningRequest", "Outcome", "Ticket", "execute", "choose_params", "ticket_valid",
           "Param", "ParamSpace", "Point", "pow2_range", "tuning", "get_mode", "set_mode",
           "MODES", "reset", "scenario_key", "scenario_id", "refused_points", "manager",
           "sweep_deadline", "forget_space", "settings", "capture_requests", "new_call"]
