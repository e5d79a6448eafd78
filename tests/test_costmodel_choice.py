"""The decision: predictions per device, the break-even size, residency, the margin, and the
measured times that replace the static model (history, tuning store)."""

from __future__ import annotations

import math
import time

import pytest
from costmodel_support import FakeContainer, FakeDevice, FakeRuntime, coefficients

from skelpy import costmodel, tuner
from skelpy.costmodel import choice as _choice
from skelpy.costmodel import history, registry, tuned
from skelpy.costmodel.choice import CallSpec, choose, predict
from skelpy.costmodel.terms import Line
from skelpy.tuner import store as _store

# A memory-bound map: one float32 read, one write, two float operations per element.
FEATURES = {"ops_add": 1.0, "ops_mul": 1.0, "ops_float": 2.0, "instructions": 2.0,
            "instructions_dyn": 2.0}
ZERO_MEM = dict.fromkeys(("read_byte", "write_byte", "strided", "gathered", "constant",
                          "cached"), 0.0)


def ops(per_alu: float) -> dict:
    return {"alu32": per_alu, "alu64": per_alu, "int": per_alu, "div": per_alu,
            "math": per_alu}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SKELPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(costmodel.settings, "explore", 0.0)   # see the exploration test
    costmodel.reset()
    _store.reset_store()
    yield
    costmodel.reset()
    _store.reset_store()


def two_devices(fast_fp64: bool = True):
    """``near``: low latency, slow per element (a CPU, or PoCL's basic device); ``far``:
    high latency and transfer cost, fast per element (a GPU)."""
    near = FakeRuntime(FakeDevice("test | near | 1", "near"))
    far = FakeRuntime(FakeDevice("test | far | 1", "far", has_fp64=fast_fp64))
    registry.remember(coefficients(
        near.device.key, h2d=Line(1e-6, 1e-10), d2h=Line(1e-6, 1e-10),
        launch=Line(5e-6, 1e-6), work_item=Line(0.0, 0.0), memory=ZERO_MEM,
        ops=ops(5e-9), overlap=0.0), save=False)
    registry.remember(coefficients(
        far.device.key, h2d=Line(20e-6, 1e-10), d2h=Line(20e-6, 1e-10),
        launch=Line(30e-6, 5e-6), work_item=Line(0.0, 0.0), memory=ZERO_MEM,
        ops=ops(1e-10), overlap=0.0), save=False)
    return near, far


def spec_for(n: int, inputs=None, *, reads_result=False, needs_fp64=False, kernel="k1"):
    inputs = inputs if inputs is not None else [FakeContainer(n)]
    return CallSpec("map", kernel, FEATURES, {"n": float(n)}, inputs, 4, 4 * n,
                    reads_result=reads_result, needs_fp64=needs_fp64)


def break_even() -> float:
    """Where the two devices' predicted times meet, from the coefficients above:
    near: (1e-6 + 4e-10 n) + 5e-6 + 2 * 5e-9 n; far: (20e-6 + 4e-10 n) + 30e-6 + 2e-10 n."""
    return (50e-6 - 6e-6) / (2 * 5e-9 - 2 * 1e-10)


def test_predictions_add_up_the_terms(cache):
    near, far = two_devices()
    n = 10_000
    p = predict(far, spec_for(n, reads_result=True))
    assert p.upload == pytest.approx(20e-6 + 4e-10 * n)
    assert p.launch == pytest.approx(30e-6)
    assert p.kernel == pytest.approx(2 * n * 1e-10)
    assert p.download == pytest.approx(20e-6 + 4e-10 * n)
    assert p.total == pytest.approx(p.upload + p.launch + p.kernel + p.download)
    assert p.kernel_source == "model"


def test_the_choice_flips_at_the_break_even_size(cache):
    near, far = two_devices()
    n_star = break_even()
    below = predict(near, spec_for(int(n_star) - 1)).total
    assert below < predict(far, spec_for(int(n_star) - 1)).total
    assert predict(near, spec_for(int(n_star) + 1)).total > \
        predict(far, spec_for(int(n_star) + 1)).total
    margin = history.DEFAULT_ERROR
    for n in (1, 10, int(n_star / 4), int(n_star * 4), int(n_star * 1000)):
        for prev in (near, far):
            c = choose(spec_for(n), [near, far], previous=prev)
            pn, pf = c.predictions["near"].total, c.predictions["far"].total
            best, other = ("near", "far") if pn < pf else ("far", "near")
            if c.predictions[other].total > margin * c.predictions[best].total:
                assert c.device == best, (n, c)
            else:
                assert c.device == prev.device.name, (n, c)
    assert choose(spec_for(int(n_star / 4)), [near, far], previous=far).device == "near"
    assert choose(spec_for(int(n_star * 4)), [near, far], previous=near).device == "far"


def test_near_the_break_even_the_call_stays_where_it_was(cache):
    near, far = two_devices()
    n = int(break_even() * 1.05)            # far is faster, by far less than the margin
    for prev in (near, far):
        c = choose(spec_for(n), [near, far], previous=prev)
        assert c.device == prev.device.name
        assert c.margin == 1.0 or "stays" in c.reason


def test_resident_data_stays_where_it_is(cache):
    near, far = two_devices()
    n = int(break_even() * 4)
    # on the host, far wins clearly; resident on near, moving it costs more than it saves
    v_host = FakeContainer(n)
    assert choose(spec_for(n, [v_host]), [near, far]).device == "far"
    v_near = FakeContainer(n, on=near, host=False)
    c = choose(spec_for(n, [v_near]), [near, far])
    assert c.incumbent == "near"
    assert c.predictions["near"].upload == 0.0
    # a move from near to far goes through the host: near's download plus far's upload
    assert c.predictions["far"].upload == pytest.approx(
        (1e-6 + 1e-10 * 4 * n) + (20e-6 + 1e-10 * 4 * n))
    assert c.predictions["far"].moves == ((4 * n, "near"),)
    # data valid on the host too (read back earlier): no download needed to move it
    v_both = FakeContainer(n, on=near, host=True)
    assert choose(spec_for(n, [v_both]), [near, far]).predictions["far"].upload == \
        pytest.approx(20e-6 + 1e-10 * 4 * n)


def test_data_resident_on_the_fast_device_stays_there_at_every_size(cache):
    near, far = two_devices()
    for n in (1, 100, 10**4, 10**7):
        v = FakeContainer(n, on=far, host=False)
        c = choose(spec_for(n, [v]), [near, far])
        assert c.device == "far", (n, c)


def test_reading_the_result_on_the_host_is_priced(cache):
    near, far = two_devices()
    n = 1000
    assert predict(far, spec_for(n, reads_result=True)).download > 0
    assert predict(far, spec_for(n, reads_result=False)).download == 0


def test_fp64_calls_go_only_where_fp64_exists(cache):
    near, far = two_devices(fast_fp64=False)
    c = choose(spec_for(10**8, needs_fp64=True), [near, far])
    assert c.device == "near" and set(c.predictions) == {"near"}


def test_same_named_devices_are_told_apart(cache):
    a = FakeRuntime(FakeDevice("test | twin | a", "twin"))
    b = FakeRuntime(FakeDevice("test | twin | b", "twin"))
    for rt in (a, b):
        registry.remember(coefficients(rt.device.key), save=False)
    assert _choice.labels([a, b]) == ["twin #0", "twin #1"]
    c = choose(spec_for(100), [a, b])
    assert set(c.predictions) == {"twin #0", "twin #1"}


def rec(n, predicted, measured, kernel="k1", source="model", t=None):
    return history.Record("map", kernel, float(n), predicted, measured, 0.0, 0.0, source,
                          t if t is not None else time.time())


def test_measured_times_replace_the_static_model(cache):
    near, far = two_devices()
    n = 4096
    h = history.history(near.device.key)
    static, static_2n = (predict(near, spec_for(m)).kernel for m in (n, 2 * n))
    assert static_2n == pytest.approx(2 * static)
    # the same kernel measured at a size twice as large: scaled down by the model's ratio
    h.add(rec(2 * n, 1.0, 3e-4))
    p = predict(near, spec_for(n))
    assert p.kernel_source == "nearby"
    assert p.kernel == pytest.approx(3e-4 * static / static_2n)
    # measured at a quarter of the size too: on the line between the two
    h.add(rec(n // 4, 1.0, 1e-4))
    assert predict(near, spec_for(n)).kernel == pytest.approx(
        1e-4 + (3e-4 - 1e-4) * (n - n // 4) / (2 * n - n // 4))
    # above every measured size: the largest one's time plus the measured slope (the
    # model here has no fixed cost: all of its time grows with the size, so the measured
    # slope counts fully)
    slope = (3e-4 - 1e-4) / (2 * n - n // 4)
    assert predict(near, spec_for(8 * n)).kernel == pytest.approx(3e-4 + slope * 6 * n)
    # measured at this size: taken as it is (the lower quartile: a disturbed run only adds)
    for m in (4e-4, 9e-4, 2e-4, 3e-4, 5e-4):
        h.add(rec(n, 1.0, m))
    p = predict(near, spec_for(n))
    assert p.kernel_source == "history" and p.kernel == pytest.approx(3e-4)
    # another kernel is still predicted by the model
    assert predict(near, spec_for(n, kernel="other")).kernel_source == "model"


def test_the_static_model_is_corrected_by_what_it_got_wrong(cache):
    near, far = two_devices()
    h = history.history(near.device.key)
    before = predict(near, spec_for(1000, kernel="fresh")).kernel
    for k in range(5):
        h.add(rec(100 * (k + 1), 1e-5, 2e-5, kernel=f"seen{k}"))
    assert h.correction() == pytest.approx(2.0)
    assert predict(near, spec_for(1000, kernel="fresh")).kernel == pytest.approx(2 * before)


def test_the_margin_is_the_measured_error(cache):
    near, far = two_devices()
    for dev, ratio in ((near, 1.1), (far, 1.6)):
        h = history.history(dev.device.key)
        for k in range(6):
            h.add(rec(10 + k, 1e-5, 1e-5 * ratio, kernel=f"m{k}"))
        assert h.error() == pytest.approx(ratio)
    n = int(break_even() * 4)
    c = choose(spec_for(n), [near, far], previous=near)
    assert c.margin == pytest.approx(math.sqrt(1.1 * 1.6))


def test_the_tuners_measurement_of_the_scenario_is_preferred(cache):
    near, far = two_devices()
    n = 5000
    spec = spec_for(n, kernel="tuned-kernel")
    req = tuner.TuningRequest(skeleton="map", kernel_key="tuned-kernel", device=far.device,
                              space=None, dataset={"n": float(n)})
    sid = tuner.scenario_id(req)
    st = _store.get_store()
    rec_ = _store.ScenarioRecord(sid, far.device.key, {}, "tuned-kernel", "map", {},
                                 {"n": float(n)})
    st.record_measurements(rec_, [({"wg": 64}, 7e-4, 3), ({"wg": 128}, 5e-4, 3)])
    tuned._forget()
    p = predict(far, spec)
    assert p.kernel_source == "tuner" and p.kernel == pytest.approx(5e-4)
    # a size the tuner did not measure: from the measured one (far's model has no fixed
    # cost, so all of the measured time grows with the size)
    tuned._forget()
    p2 = predict(far, spec_for(2 * n, kernel="tuned-kernel"))
    assert p2.kernel_source == "nearby" and p2.kernel == pytest.approx(2 * 5e-4)


def test_history_survives_the_process_and_merges(cache):
    near, _far = two_devices()
    h = history.history(near.device.key)
    h.add(rec(10, 1e-5, 2e-5, t=1.0))
    h.save()
    history.forget()
    other = history.History(near.device.key)      # another process, meanwhile
    other.add(rec(20, 1e-5, 3e-5, t=2.0))
    other.save()
    history.forget()
    h = history.history(near.device.key)
    assert sorted(r.n for r in h.records) == [10.0, 20.0]


def test_malformed_history_rows_are_dropped(cache):
    from skelpy.costmodel import files
    near, _far = two_devices()
    good = {"skeleton": "map", "kernel": "k", "n": 1, "kernel_predicted": 1e-5,
            "kernel_measured": 1e-5, "upload_predicted": 0, "upload_measured": 0,
            "source": "model", "time": 1}
    rows = [good, {**good, "n": "x"}, {**good, "kernel_measured": float("nan")},
            {**good, "kernel": 5}, [1, 2], {**good, "time": -1}]
    files.save(near.device.key, {"format": "skelpy-costmodel-history", "records": rows},
               "-history")
    history.forget()
    assert len(history.history(near.device.key).records) == 1


def test_a_device_that_never_ran_a_kernel_is_tried_once_when_close(cache, monkeypatch):
    monkeypatch.setattr(costmodel.settings, "explore", 1.5)
    near, far = two_devices()
    n = int(break_even() / 1.3)                 # near is faster, far within 1.5x
    c = choose(spec_for(n, kernel="fresh"), [near, far], previous=near)
    assert c.device == "far" and c.reason.startswith("exploring"), c
    c = choose(spec_for(n, kernel="fresh"), [near, far], previous=near)
    assert c.device == "near", c                # once per kernel and device
    # far beyond the factor: never explored
    c = choose(spec_for(n // 20, kernel="other"), [near, far], previous=near)
    assert c.device == "near", c
    # a kernel measured on far already: nothing to explore
    history.history(far.device.key).add(rec(n, 1e-5, 1e-5, kernel="known"))
    c = choose(spec_for(n, kernel="known"), [near, far], previous=near)
    assert not c.reason.startswith("exploring"), c
    # without measurements (the static model alone), never
    _choice.settings.measurements = False
    try:
        c = choose(spec_for(n, kernel="third"), [near, far], previous=near)
        assert c.device == "near", c
    finally:
        _choice.settings.measurements = True


def test_a_device_whose_calibration_fails_is_left_out(cache):
    near, far = two_devices()
    broken = FakeRuntime(FakeDevice("test | broken | 1", "broken"))   # nothing to measure with
    with pytest.warns(RuntimeWarning, match="leaves out broken"):
        c = choose(spec_for(1000), [near, far, broken])
    assert set(c.predictions) == {"near", "far"}
    c = choose(spec_for(1000), [near, far, broken])                     # warned once
    assert set(c.predictions) == {"near", "far"}


def test_extrapolation_trusts_a_measured_slope_as_far_as_the_size_was_large():
    from skelpy.costmodel.choice import from_nearby

    def model(m):                        # 100 us fixed, 1 ns per element
        return 1e-4 + 1e-9 * m
    # measured at a size where the fixed cost dominates the model (share 1%): the
    # model's slope, not the measured one (which the fixed cost's error would swamp)
    got = from_nearby([(1e3, 3e-4)], 1e7, model)
    share = 1e-6 / (1e-4 + 1e-6)
    meas = (3e-4 - 1e-4) / 1e3
    assert got == pytest.approx(3e-4 + (share * meas + (1 - share) * 1e-9) * (1e7 - 1e3))
    # measured where the per-element part dominates (share 99%): mostly the measured slope
    got = from_nearby([(1e7, 2e-3), (4e7, 5e-3)], 8e7, model)
    share = (model(4e7) - model(0)) / model(4e7)
    meas = (5e-3 - 2e-3) / 3e7
    assert got == pytest.approx(5e-3 + (share * meas + (1 - share) * 1e-9) * 4e7)
    # between two sizes: the line; below the smallest: scaled by the model
    assert from_nearby([(1e3, 1e-4), (1e5, 3e-4)], 5.05e4, model) == pytest.approx(2e-4)
    assert from_nearby([(1e5, 3e-4)], 1e3, model) == pytest.approx(
        3e-4 * model(1e3) / model(1e5))


def test_a_kernel_measured_on_another_device_is_scaled_by_the_models(cache):
    near, far = two_devices()
    n = 100_000
    history.history(near.device.key).add(rec(n, 1.0, 2e-3, kernel="k9"))
    c = choose(spec_for(n, kernel="k9"), [near, far])
    pn, pf = c.predictions["near"], c.predictions["far"]
    assert pn.kernel_source == "history" and pn.kernel == pytest.approx(2e-3)
    # far: near's measurement times far's static kernel time over near's
    assert pf.kernel_source == "scaled"
    assert pf.kernel == pytest.approx(2e-3 * (2 * 1e-10) / (2 * 5e-9))


def test_uploads_are_corrected_by_their_measured_times(cache):
    near, far = two_devices()
    n = 1_000_000
    before = predict(far, spec_for(n)).upload
    h = history.history(far.device.key)
    for k in range(4):                 # uploads measured 1.5x slower than predicted
        h.add(history.Record("map", f"u{k}", 1e6, 1e-4, 1e-4, 4e-4, 6e-4, "model", 1.0 + k))
    h.add(history.Record("map", "tiny", 1e3, 1e-5, 1e-5, 1e-6, 9e-5, "model", 9.0))  # ignored
    assert h.upload_correction() == pytest.approx(1.5)
    assert predict(far, spec_for(n)).upload == pytest.approx(1.5 * before)
