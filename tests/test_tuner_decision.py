"""The decision path (forced -> cache -> store -> model -> default), modes, and refusals
injected at every step: the call still returns the right result and the refusal is recorded
in memory and in the store, and never tried again."""

from __future__ import annotations

import time

import numpy as np
import pytest
from test_tuner_support import FakeKernel, cache_dir, key, make_request, make_space  # noqa: F401

from skelpy import tuner
from skelpy.errors import ParameterError, RefusedParameters, SkelpyError
from skelpy.tuner import store as tstore

DEFAULT = {"wg": 64, "coarsen": 1, "blocked": 0}
BEST = {"wg": 32, "coarsen": 2, "blocked": 0}


@pytest.fixture(autouse=True)
def _isolated(cache_dir):  # noqa: F811
    yield


def _stored_refusals(req):
    return [key(p) for p in tstore.get_store().refusals(tuner.scenario_id(req))]


def _assert_refusal_recorded(req, kern, point, out):
    np.testing.assert_array_equal(out.result, kern.expected)
    assert point in out.refused
    assert out.params != point
    assert req.space.key(point) in tuner.refused_points(req)
    assert key(point) in _stored_refusals(req)
    # never tried again, in this process ...
    kern.calls.clear()
    out2 = tuner.execute(req)
    np.testing.assert_array_equal(out2.result, kern.expected)
    assert point not in kern.calls and out2.refused == []
    # ... nor in a fresh one that only has the store
    tuner.reset()
    kern.calls.clear()
    out3 = tuner.execute(req)
    np.testing.assert_array_equal(out3.result, kern.expected)
    assert point not in kern.calls


# -- plain decisions ---------------------------------------------------------------------------


def test_fresh_scenario_gets_the_default_then_the_cache():
    kern = FakeKernel()
    req = make_request(kern)
    out = tuner.execute(req)
    assert (out.params, out.source) == (DEFAULT, "default")
    np.testing.assert_array_equal(out.result, kern.expected)
    out = tuner.execute(req)
    assert (out.params, out.source) == (DEFAULT, "cache")
    assert len(kern.calls) == 2


def test_forced_params_are_normalised_and_checked():
    kern = FakeKernel()
    out = tuner.execute(make_request(kern, forced={"wg": 16}))
    assert out.params == {"wg": 16, "coarsen": 1, "blocked": 0} and out.source == "forced"
    with pytest.raises(ParameterError):
        tuner.execute(make_request(kern, forced={"wg": 512}))     # above this space's max
    with pytest.raises(ParameterError):
        tuner.execute(make_request(kern, forced={"bogus": 1}))


def test_scenarios_bucket_sizes_by_log2():
    k = FakeKernel()
    a = tuner.scenario_key(make_request(k, n=1000))
    assert a == tuner.scenario_key(make_request(k, n=1100))
    assert a != tuner.scenario_key(make_request(k, n=4000))
    assert a != tuner.scenario_key(make_request(k, n=1000, kernel_key="other"))


# -- modes -------------------------------------------------------------------------------------


def test_mode_setter_context_and_env(monkeypatch):
    assert tuner.get_mode() == "model"
    with tuner.tuning("off"):
        assert tuner.get_mode() == "off"
        with tuner.tuning("online"):
            assert tuner.get_mode() == "online"
        assert tuner.get_mode() == "off"
    assert tuner.get_mode() == "model"
    tuner.tuning("exhaustive")
    assert tuner.get_mode() == "exhaustive"
    tuner.set_mode(None)
    monkeypatch.setenv("SKELPY_TUNE", "off")
    assert tuner.get_mode() == "off"
    monkeypatch.setenv("SKELPY_TUNE", "nonsense")
    with pytest.warns(RuntimeWarning, match="SKELPY_TUNE"):
        assert tuner.get_mode() == "model"
    with pytest.raises(ParameterError):
        tuner.tuning("fast")


def test_exhaustive_sweeps_every_legal_point_once_and_keeps_the_best():
    kern = FakeKernel()
    req = make_request(kern)
    with tuner.tuning("exhaustive"):
        out = tuner.execute(req)
    legal = {key(p) for p in req.space.points()}
    assert {key(p) for p in kern.calls} == legal
    assert (out.params, out.source) == (BEST, "exhaustive")
    np.testing.assert_array_equal(out.result, kern.expected)
    meas = tstore.get_store().measurements(tuner.scenario_id(req))
    assert len(meas) == len(legal)
    n_calls = len(kern.calls)
    with tuner.tuning("exhaustive"):
        out = tuner.execute(req)
    assert (out.params, out.source) == (BEST, "cache") and len(kern.calls) == n_calls + 1
    # another process (fresh memory) finds the best in the store, in model mode
    tuner.reset()
    out = tuner.execute(req)
    assert (out.params, out.source) == (BEST, "store")
    # off ignores it all
    with tuner.tuning("off"):
        out = tuner.execute(req)
    assert (out.params, out.source) == (DEFAULT, "off")


def test_exhaustive_raises_when_a_point_computes_something_else():
    bad = {"wg": 128, "coarsen": 4, "blocked": 1}
    kern = FakeKernel(wrong=[bad])
    with tuner.tuning("exhaustive"), pytest.raises(SkelpyError) as ei:
        tuner.execute(make_request(kern))
    msg = str(ei.value)
    assert "'wg': 128" in msg and "'coarsen': 4" in msg and "different result" in msg


def test_online_converges_to_the_best_and_every_call_is_right():
    kern = FakeKernel()
    req = make_request(kern)
    sources = []
    with tuner.tuning("online"):
        for _ in range(tuner.settings.online_candidates + 4):
            out = tuner.execute(req)
            np.testing.assert_array_equal(out.result, kern.expected)
            sources.append(out.source)
    assert sources[0] == "online" and sources[-1] == "cache"
    assert out.params == BEST
    measured = tstore.get_store().measurements(tuner.scenario_id(req))
    assert 3 <= len(measured) <= tuner.settings.online_candidates + 1
    assert len(measured) < len(req.space.points())      # far from a full sweep


def test_online_checks_candidates_against_the_default():
    bad = {"wg": 32, "coarsen": 1, "blocked": 0}      # the first neighbour online tries
    kern = FakeKernel(wrong=[bad])
    with tuner.tuning("online"), pytest.raises(SkelpyError, match="different result"):
        for _ in range(tuner.settings.online_candidates):
            tuner.execute(make_request(kern))


# -- refusals at every step ----------------------------------------------------------------------


def test_refused_forced_point_falls_back_to_the_nearest():
    point = {"wg": 16, "coarsen": 1, "blocked": 0}
    kern = FakeKernel(refuse=[point])
    req = make_request(kern, forced={"wg": 16})
    out = tuner.execute(req)
    assert out.source == "forced+fallback"
    assert req.space.distance(out.params, point) == 1.0
    _assert_refusal_recorded(req, kern, point, out)


def test_refused_cached_decision_falls_back():
    kern = FakeKernel()
    req = make_request(kern)
    assert tuner.execute(req).params == DEFAULT
    kern.refuse = {key(DEFAULT)}
    out = tuner.execute(req)
    assert out.source == "cache+fallback"
    _assert_refusal_recorded(req, kern, DEFAULT, out)
    assert tuner.execute(req).source == "cache"


def test_refused_store_best_falls_back():
    kern = FakeKernel()
    req = make_request(kern)
    with tuner.tuning("exhaustive"):
        tuner.execute(req)
    tuner.reset()                                     # a new process: only the store knows
    kern.refuse = {key(BEST)}                         # e.g. a new driver refuses it
    out = tuner.execute(req)
    assert out.source == "store+fallback"
    _assert_refusal_recorded(req, kern, BEST, out)
    tuner.reset()
    assert tuner.execute(req).params != BEST          # the store's best skips refused points


def _train_model():
    """Sweep kernels whose best work-group size is 2**ops, then train."""
    for ops in (2, 3, 4, 5, 6, 7):
        kern = FakeKernel(best_wg=2 ** ops, best_coarsen=1)
        with tuner.tuning("exhaustive"):
            tuner.execute(make_request(kern, kernel_key=f"train-{ops}",
                                       features={"ops_add": float(ops)}))
    dev = make_request(FakeKernel()).device.key
    return tuner.manager().retrain(dev)


def test_refused_model_prediction_falls_back():
    _train_model()
    kern = FakeKernel(best_wg=16, best_coarsen=1)
    req = make_request(kern, kernel_key="new-kernel", features={"ops_add": 4.0})
    predicted, source = tuner.choose_params(req)
    assert source == "model"
    assert predicted["wg"] == 16
    tuner.reset()                     # forget the cached decision; the model is on disk
    kern.refuse = {key(predicted)}
    out = tuner.execute(req)
    assert out.source == "model+fallback"
    _assert_refusal_recorded(req, kern, predicted, out)


def test_refused_default_falls_back():
    kern = FakeKernel(refuse=[DEFAULT])
    req = make_request(kern)
    out = tuner.execute(req)
    assert out.source == "default+fallback"
    _assert_refusal_recorded(req, kern, DEFAULT, out)


def test_refused_default_in_off_mode():
    kern = FakeKernel(refuse=[DEFAULT])
    req = make_request(kern)
    with tuner.tuning("off"):
        out = tuner.execute(req)
        assert out.source == "off+fallback"
        _assert_refusal_recorded(req, kern, DEFAULT, out)


def test_refusals_during_a_sweep_are_recorded_and_skipped():
    refused = [{"wg": 32, "coarsen": 2, "blocked": 0}, {"wg": 8, "coarsen": 1, "blocked": 1}]
    kern = FakeKernel(refuse=refused)
    req = make_request(kern)
    with tuner.tuning("exhaustive"):
        out = tuner.execute(req)
    np.testing.assert_array_equal(out.result, kern.expected)
    assert out.params not in refused
    assert sorted(_stored_refusals(req)) == sorted(key(p) for p in refused)
    meas = tstore.get_store().measurements(tuner.scenario_id(req))
    assert len(meas) == len(req.space.points()) - 2


def test_refusal_during_online_exploration():
    first = {"wg": 32, "coarsen": 1, "blocked": 0}
    kern = FakeKernel(refuse=[first])
    req = make_request(kern)
    with tuner.tuning("online"):
        for _ in range(4):
            out = tuner.execute(req)
            np.testing.assert_array_equal(out.result, kern.expected)
    assert key(first) in _stored_refusals(req)
    assert sum(1 for c in kern.calls if c == first) == 1


def test_everything_refused_is_an_error():
    kern = FakeKernel()
    req = make_request(kern, space=make_space(max_wg=2))
    kern.refuse = {key(p) for p in req.space.points()}
    with pytest.raises(SkelpyError, match="every launch parameter"):
        tuner.execute(req)


def test_refusal_from_the_real_runtime_hook():
    """A hand-written pyopencl kernel launched through Runtime.launch, refused by the
    runtime's fault-injection hook."""
    import pyopencl as cl

    from skelpy import runtime
    from skelpy.tuner import Param, ParamSpace, TuningRequest, pow2_range

    rt = runtime.current()
    prg = rt.build("__kernel void twice(__global const float* x, __global float* y, long n)"
                   "{ long i = get_global_id(0); if (i < n) y[i] = 2.0f * x[i]; }")
    kern = rt.kernel(prg, "twice")
    n = 1000
    x = np.arange(n, dtype=np.float32)
    mf = cl.mem_flags
    xb = cl.Buffer(rt.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    yb = cl.Buffer(rt.context, mf.READ_WRITE, x.nbytes)
    wmax = min(rt.kernel_max_work_group_size(kern), 256)

    def run(p):
        wg = p["wg"]
        ev = rt.launch(kern, (-(-n // wg) * wg,), (wg,), [xb, yb, np.int64(n)], params=p,
                       skeleton="map")
        out = np.empty_like(x)
        cl.enqueue_copy(rt.queue, out, yb, wait_for=[ev])
        return out, [ev]

    space = ParamSpace([Param("wg", pow2_range(1, wmax))], {"wg": min(64, wmax)})
    req = TuningRequest("map", "twice-kernel", rt.device, space, {"n": n, "dtype_size": 4},
                        run=run, origin="test")
    refused_wg = space.default["wg"]
    rt.refuse_hook = lambda sk, params, gsize, lsize: params["wg"] == refused_wg
    try:
        out = tuner.execute(req)
    finally:
        rt.refuse_hook = None
    np.testing.assert_array_equal(out.result, 2 * x)
    assert out.params["wg"] != refused_wg and out.refused == [{"wg": refused_wg}]
    assert [p["wg"] for p in tstore.get_store().refusals(tuner.scenario_id(req))] == [refused_wg]
    assert out.events and out.events[0].profile.end >= out.events[0].profile.start


# -- cost of a cache hit -------------------------------------------------------------------------


def _best_per_call(fn, calls=2000, rounds=5):
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def test_cache_hit_costs_less_than_50_microseconds():
    kern = FakeKernel()
    req = make_request(kern)
    tuner.execute(req)
    assert tuner.choose_params(req)[1] == "cache"
    per_call = _best_per_call(lambda: tuner.choose_params(req))
    assert per_call < 50e-6, f"choose_params cache hit took {per_call * 1e6:.1f} us"
    # the whole execute path, with a run that does nothing
    out = np.zeros(4)
    req.run = lambda p: (out, [])
    per_call = _best_per_call(lambda: tuner.execute(req))
    assert per_call < 50e-6, f"execute on a cache hit took {per_call * 1e6:.1f} us"


def test_refused_parameters_type_is_the_runtime_one():
    assert issubclass(RefusedParameters, SkelpyError)
