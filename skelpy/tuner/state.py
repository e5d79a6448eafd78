"""Everything the tuner remembers in this process, in one object (:data:`STATE`).

The mode, the knobs of the strategies (:class:`Settings`), what is known about each
*scenario* (device, kernel, data size bucketed by log2) and the model manager of the current
store live here, so that the engine and the strategies are functions of it and ``reset()``
has one thing to clear.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

from .measure import Budget
from .space import ParamSpace, Point

MODES = ("off", "model", "online", "exhaustive")


@dataclass
class Settings:
    """The strategies' knobs (benchmarks and tests turn them down)."""

    online_candidates: int = 12       # candidates an online scenario measures before settling
    online_shortlist: int = 8         # of them, the model's best-scored points come first
    # how hard a sweep measures each point; None: by device kind (sweep.SWEEP_BUDGETS)
    sweep_budget: Budget | None = None
    # a measured point replaces the untuned choice (the default, the model's pick) only when
    # the interleaved confirmation finds it faster by more than this fraction
    keep_margin: float = 0.02
    confirm_rounds: int | None = None     # None: by device kind (sweep.CONFIRM_ROUNDS)
    # sweeps build programs ahead through the request's prepare hook (in parallel, or many
    # variants in one build); False builds each point when it is first launched
    prebuild: bool = True
    # exhaustive sweeps stop measuring new points after this time.perf_counter() value
    sweep_deadline: float | None = None
    # tqdm bars for exhaustive sweeps: None shows them when stderr is a terminal and the
    # sweep takes more than a second; False never; True always
    progress: bool | None = None


class Scenario:
    """What this process knows about one scenario."""

    __slots__ = ("mkey", "key", "refused", "decision", "source", "generation", "swept",
                 "converged", "online_tries", "record", "feats", "loaded")

    def __init__(self, mkey: tuple, key: str):
        self.mkey = mkey
        self.key = key                              # the scenario's key in the store
        self.refused: set[tuple] = set()            # space keys refused on this device
        self.decision: Point | None = None          # the decision cache
        self.source = ""
        self.generation = -1                        # model generation the decision used
        self.swept = False                          # exhaustive: every point measured
        self.converged = False                      # online: no candidate left
        self.online_tries = 0
        self.record: Any = None                     # store.ScenarioRecord, built once
        self.feats: dict[str, float] | None = None  # scenario features, built once
        self.loaded = False                         # refusals read from the store


class TunerState:
    """The process-wide tuner state."""

    def __init__(self) -> None:
        self.mode: str | None = None                # set by tuning()/set_mode()
        self.bad_env_warned: set[str] = set()
        self.settings = Settings()
        self.lock = threading.Lock()
        self.scenarios: dict[tuple, Scenario] = {}
        # (device, kernel, raw dataset items) -> scenario: skips bucketing and sorting on
        # repeated calls, which is most of a cache hit's cost
        self.by_raw: dict[tuple, Scenario] = {}
        self.manager: Any = None                    # model_manager.ModelManager of the store
        self.capturing: list | None = None          # see engine.capture_requests
        # per-space data the engine derives once (description, model candidates)
        self.spaces: weakref.WeakKeyDictionary[ParamSpace, Any] = weakref.WeakKeyDictionary()

    def reset(self) -> None:
        """Forget every scenario, refusal and model (the store and the mode are kept)."""
        with self.lock:
            self.scenarios.clear()
            self.by_raw.clear()
            self.manager = None


STATE = TunerState()
