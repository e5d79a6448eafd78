"""Measuring: event times, stopping on a tight confidence interval or the budget, the
median kept; output checks that catch a parameter computing something else."""

from __future__ import annotations

import numpy as np
import pytest
from test_tuner_support import FakeEvent

from skelpy.errors import SkelpyError
from skelpy.tuner.measure import Budget, check_same, measure, same_result


class Timed:
    def __init__(self, times):
        self.times = list(times)
        self.calls = 0

    def __call__(self, point):
        t = self.times[min(self.calls, len(self.times) - 1)]
        self.calls += 1
        return np.ones(3), [FakeEvent(t)]


def test_steady_times_stop_at_the_minimum_count():
    run = Timed([5e-3] + [1e-3] * 50)          # a slow first (warm-up) run is discarded
    m = measure(run, {}, Budget(warmup=1, min_reps=3, max_reps=30))
    assert m.n == 3 and m.seconds == pytest.approx(1e-3) and run.calls == 4
    assert m.rel_ci < 0.03


def test_noisy_times_repeat_until_the_budget_and_keep_the_median():
    rng = np.random.default_rng(1)
    times = list(1e-3 * (1 + 0.5 * rng.random(100)))
    run = Timed([1.0] + times)
    m = measure(run, {}, Budget(warmup=1, min_reps=3, max_reps=12, rel_ci=0.001))
    assert m.n == 12
    assert m.seconds == pytest.approx(np.median(times[:12]))


def test_several_events_are_summed():
    def run(point):
        return 1, [FakeEvent(1e-3), FakeEvent(2e-3)]
    assert measure(run, {}, Budget(min_reps=3)).seconds == pytest.approx(3e-3)


def test_runs_without_events_use_wall_time():
    m = measure(lambda p: (1, []), {}, Budget(min_reps=3, max_reps=5))
    assert 0 < m.seconds < 0.01


def test_same_result_tolerances():
    a = np.linspace(0, 1, 100, dtype=np.float32)
    assert same_result(a, a * (1 + 1e-6))
    assert not same_result(a, a * 1.01)
    assert not same_result(a, a[:-1])
    i = np.arange(10)
    assert same_result(i, i.copy()) and not same_result(i, i + (i == 3))
    assert same_result(np.float32(100.0), np.float32(100.0001))
    nan = np.array([np.nan, 1.0])
    assert same_result(nan, nan.copy())

    class Box:                                    # a skelpy container reads with to_numpy()
        def to_numpy(self):
            return np.arange(4)
    assert same_result(Box(), np.arange(4))


def test_check_same_names_the_parameters():
    check_same(np.ones(3), np.ones(3), {"wg": 8}, {"wg": 64})
    with pytest.raises(SkelpyError, match=r"\{'wg': 8\}.*\{'wg': 64\}"):
        check_same(np.ones(3), np.zeros(3), {"wg": 8}, {"wg": 64}, origin="Map(f)")


def test_min_estimator_keeps_the_fastest_repeat():
    run = Timed([1.0, 3e-3, 1e-3, 2e-3, 5e-3])
    m = measure(run, {}, Budget(warmup=1, min_reps=4, max_reps=4, estimator="min"))
    assert m.seconds == pytest.approx(1e-3) and m.n == 4
    run = Timed([1.0, 3e-3, 1e-3, 2e-3, 5e-3])
    assert measure(run, {}, Budget(warmup=1, min_reps=4, max_reps=4)).seconds == \
        pytest.approx(2.5e-3)
