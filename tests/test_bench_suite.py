"""The benchmark suite (benchmarks/suite.py) and its report (benchmarks/report.py).

The suite runs end to end at tiny sizes into a temporary folder and writes a valid device
document; a spent budget marks parts skipped and a part past its deadline is stopped; the
merge reads each part's output format; and every number the report prints is the JSON's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import report, suite  # noqa: E402

pytest.importorskip("matplotlib")

# -- fixtures in the formats the parts return --------------------------------------------------------


def raw_parts(gpu: bool) -> dict:
    """What map / reduce_scan_allpairs / stencil / extras / tuning return, in miniature."""
    n = 1 << 20
    mm = 4096 if gpu else 256
    bw = 4000.0 if gpu else 20.0
    scale = 0.01 if gpu else 1.0
    kernels = [
        {"kernel": "map", "params": "wg=256 c=1 vw=1 (chosen)", "skelpy_us": 200.0 * scale,
         "hand_us": 196.0 * scale, "skelpy/hand": 1.0204},
        {"kernel": "zip", "params": "wg=256 c=1 vw=1 (chosen)", "skelpy_us": 330.0 * scale,
         "hand_us": 300.0 * scale, "skelpy/hand": 1.1},
        {"kernel": "map", "params": "wg=256 c=1 vw=4", "skelpy_us": 150.0 * scale,
         "hand_us": 140.0 * scale, "skelpy/hand": 1.0714},
    ]
    rsa_rows = [
        {"op": "reduce sum f32", "impl": "skelpy", "us": 110.0 * scale,
         "GB/s": 4 * n / (110e-6 * scale) / 1e9, "params": "wg=64,items=16"},
        {"op": "reduce sum f32", "impl": "skelpy ordered", "us": 150.0 * scale,
         "GB/s": 4 * n / (150e-6 * scale) / 1e9},
        {"op": "reduce sum f32", "impl": "pyopencl ReductionKernel", "us": 180.0 * scale},
        {"op": "reduce sum f32", "impl": "numpy", "us": 90.0},
        {"op": "scan exclusive i32", "impl": "skelpy", "us": 400.0 * scale,
         "GB/s": 8 * n / (400e-6 * scale) / 1e9},
        {"op": "scan exclusive i32", "impl": "pyopencl ExclusiveScanKernel",
         "us": 900.0 * scale},
        {"op": "matmul f32", "impl": "skelpy AllPairs", "us": 8000.0,
         "GFLOP/s": 2 * mm ** 3 / 8e-3 / 1e9},
        {"op": "matmul f32", "impl": "hand-written tiled OpenCL", "us": 30000.0},
        {"op": "matmul f32", "impl": "numpy", "us": 90000.0},
    ]
    stencil_rows = []
    for size in (256, 512):
        stencil_rows.append({"case": "heat_5pt", "size": size, "skelpy_ms": size * 1e-3 * scale,
                             "skelpy_best_ms": size * 0.9e-3 * scale,
                             "hand_ms": size * 1.1e-3 * scale, "scipy_ms": size * 0.02,
                             "params": {"wg_r": 4, "wg_c": 64}, "agree": True,
                             **({"cupy_ms": size * 2e-3 * scale} if gpu else {})})
        stencil_rows.append({"case": "gaussian_11x11", "size": size,
                             "skelpy_ms": size * 0.05 * scale, "hand_ms": size * 0.06 * scale,
                             "scipy_ms": size * (0.04 if size == 512 else 0.06),
                             "scipy_sep_ms": size * 0.01})
        stencil_rows.append({"case": "canny", "size": size, "skelpy_ms": size * 0.02 * scale,
                             "scipy_ms": size * 0.1,
                             "params": {0: {"wg_r": 4}, 1: {"wg_r": 8}}})
    extras = {"rows": [
        {"benchmark": "map", "size": f"n={n}", "elements": n, "bytes": 8 * n,
         "skelpy_s": 210e-6 * scale, "skelpy_params": {"wg": 256},
         "alternatives": [{"name": "pyopencl ElementwiseKernel", "kind": "pyopencl",
                           "where": "same device", "seconds": 230e-6 * scale}]},
        {"benchmark": "dot", "size": f"n={n}", "elements": n, "bytes": 8 * n,
         "skelpy_s": 120e-6 * scale, "alternatives": [
             {"name": "CuPy", "kind": "cupy", "where": "CUDA GPU",
              "seconds": 100e-6 * scale}]}],
        "notes": [] if gpu else ["CuPy not importable or no CUDA device: CuPy comparisons "
                                 "skipped"]}
    tuning = {"cases": [
        {"benchmark": "heat_5pt", "size": "512x512", "tuned_mode": "exhaustive",
         "tuned_seconds": 0.8e-3 * scale, "default_seconds": 1.2e-3 * scale,
         "speedup": 1.5, "requests": 1, "modes": {
             "off": {"seconds": 1.2e-3 * scale, "params": {"wg_r": 4, "wg_c": 64}},
             "model": {"seconds": 1.1e-3 * scale, "params": {"wg_r": 4, "wg_c": 64}},
             "online": {"seconds": 0.9e-3 * scale, "params": {"wg_r": 8}, "calls": 14,
                        "settled": True},
             "exhaustive": {"seconds": 0.8e-3 * scale, "params": {"wg_r": 8, "wg_c": 32},
                            "sampled_points": 26, "space_points": 1603,
                            "cut_by_time": False}}},
        {"benchmark": "matmul", "size": "64x64x64", "error": "LaunchError: boom"}],
        "max_points": 24, "online_candidates": 12, "skipped": []}
    return {
        "map": {"n": n, "copy_bandwidth_GBs": bw, "kernels": kernels,
                "numpy": [{"kernel": "map", "numpy_us": 800.0}, {"kernel": "zip",
                                                                  "numpy_us": 900.0}],
                "overhead": {"raw_enqueue_wait_us": 50.0, "skelpy_call_wait_us": 85.0,
                             "ratio": 1.7}, "worst_kernel_ratio": 1.1},
        "reduce_scan_allpairs": {"copy_bandwidth_GBs": bw * 0.98, "n": n, "matmul_n": mm,
                                 "rows": rsa_rows},
        "stencil": {"copy_bandwidth_GBs": bw * 1.02, "sizes": [256, 512], "rows": stencil_rows},
        "extras": extras,
        "tuning": tuning,
    }


def device_doc(gpu: bool) -> dict:
    name = "NVIDIA H200" if gpu else "pthread-haswell-AMD EPYC"
    meta = {"schema": suite.SCHEMA, "device": name,
            "device_slug": "nvidia-h200" if gpu else "pthread-haswell-amd-epyc",
            "device_kind": "gpu" if gpu else "cpu", "platform": "NVIDIA CUDA" if gpu else
            "Portable Computing Language", "compute_units": 132 if gpu else 2, "host": "h",
            "time": "2026-11-21T12:00:00", "budget_s": 600.0, "elapsed_s": 512.5,
            "copy_bandwidth_GBs": 4100.0 if gpu else 21.0, "store": "fresh",
            "parts": {"map": {"status": "done", "seconds": 12.0, "scale": "full", "argv": []},
                      "stencil": {"status": "done", "seconds": 200.0, "scale": "medium",
                                  "argv": ["--sizes", "256,512"]},
                      "tuner_eval": {"status": "skipped", "scale": "tiny",
                                     "reason": "time budget exhausted (9:58 of 10:00 used)"}}}
    return suite.merge(meta, raw_parts(gpu))


# -- the merge -----------------------------------------------------------------------------------------


def test_merge_reads_every_part_format():
    doc = device_doc(gpu=True)
    rows = {(r["benchmark"], r["size"]): r for r in doc["rows"]}
    m = rows[("map", "n=1048576")]
    assert m["skelpy_s"] == pytest.approx(2e-6)
    hand = next(a for a in m["alternatives"] if a["name"].startswith("hand-written OpenCL (same"))
    assert hand["speedup"] == pytest.approx(1.96 / 2.0)
    best = next(a for a in m["alternatives"] if "best of 2" in a["name"])
    assert best["seconds"] == pytest.approx(1.4e-6)
    # extras' alternative keeps the skelpy time it was measured against
    ek = next(a for a in m["alternatives"] if a["kind"] == "pyopencl")
    assert ek["skelpy_seconds"] == pytest.approx(2.1e-6)
    assert ek["speedup"] == pytest.approx(2.3 / 2.1)
    assert m["fraction_of_copy"] == pytest.approx(8 * (1 << 20) / 2e-6 / 1e9 / 4000.0)
    red = rows[("reduce_sum", "n=1048576")]
    assert red["skelpy_params"] == "wg=64,items=16"
    assert red["skelpy_variants"] == {"skelpy ordered": pytest.approx(1.5e-6)}
    assert {a["kind"] for a in red["alternatives"]} == {"pyopencl", "numpy"}
    assert red["fraction_of_copy"] == pytest.approx(4 * (1 << 20) / 1.1e-6 / 1e9 / 3920.0)
    assert rows[("matmul", "4096x4096x4096")]["GFLOP/s"] == pytest.approx(2 * 4096 ** 3 / 8e-3 / 1e9)
    heat = rows[("heat_5pt", "512x512")]
    assert {a["kind"] for a in heat["alternatives"]} == {"opencl", "scipy", "cupy"}
    assert heat["bytes"] == 2 * 4 * 512 * 512
    assert rows[("canny", "512x512")]["bytes"] == 4 * 2 * 4 * 512 * 512
    assert ("dot", "n=1048576") in rows             # a row only extras measured
    assert [t["benchmark"] for t in doc["tuning"]] == ["heat_5pt", "matmul"]
    assert doc["tuning"][0]["speedup"] == 1.5 and "error" in doc["tuning"][1]
    assert doc["overhead"]["ratio"] == 1.7 and "merge_errors" not in doc


def test_targets_follow_the_device_kind():
    gpu = {t["name"]: t for t in device_doc(gpu=True)["targets"]}
    cpu = {t["name"]: t for t in device_doc(gpu=False)["targets"]}
    assert gpu["matmul_tflops"]["applies"] and gpu["matmul_tflops"]["met"] is True
    assert gpu["matmul_tflops"]["value"] == pytest.approx(2 * 4096 ** 3 / 8e-3 / 1e12)
    assert cpu["matmul_tflops"]["value"] is None and not cpu["matmul_tflops"]["applies"]
    assert cpu["gaussian11_vs_scipy"]["applies"] and not gpu["gaussian11_vs_scipy"]["applies"]
    # worst size: 256 (0.06 / 0.05 = 1.2) vs 512 (0.04 / 0.05 = 0.8)
    assert cpu["gaussian11_vs_scipy"]["value"] == pytest.approx(0.8)
    assert cpu["gaussian11_vs_scipy"]["met"] is False
    assert gpu["call_overhead"]["met"] is False and gpu["map_vs_hand"]["met"] is True
    assert gpu["zip_vs_hand"]["value"] == pytest.approx(1.1) and not gpu["zip_vs_hand"]["met"]
    assert gpu["tuner_oracle"]["met"] is None            # no tuner_eval in this run


def test_plan_shares_and_scales():
    p = suite.plan(suite.DEFAULT_PARTS, 600.0, "cpu")
    assert sum(x["share_s"] for x in p) == pytest.approx(600.0)
    assert p[-1]["deadline_s"] == pytest.approx(600.0)
    scales = {x["part"]: x["scale"] for x in p}
    assert all(suite.EST_SECONDS["cpu"][x["part"]][suite.SCALES.index(x["scale"])]
               <= x["share_s"] for x in p)
    assert scales["stencil"] in ("medium", "full")
    assert {x["scale"] for x in suite.plan(suite.DEFAULT_PARTS, 600.0, "cpu", cap="quick")} \
        <= {"tiny", "quick"}
    assert suite.parse_parts("scan,zip,map") == ["map", "reduce_scan_allpairs"]
    assert suite.parse_parts(None) == list(suite.DEFAULT_PARTS)
    with pytest.raises(SystemExit):
        suite.parse_parts("nonsense")


# -- the report ----------------------------------------------------------------------------------------


def _write_docs(folder: Path) -> list[dict]:
    docs = [device_doc(gpu=True), device_doc(gpu=False)]
    for d in docs:
        (folder / f"{d['device_slug']}.json").write_text(json.dumps(d))
    # a part's own result file beside them is not a device document
    (folder / "map-some-other-device.json").write_text(json.dumps(
        {"benchmark": "map", "device": "Some Other Device", "n": 1}))
    return docs


def test_report_numbers_are_the_json_numbers(tmp_path):
    docs = _write_docs(tmp_path)
    md_path = report.main(["--results", str(tmp_path)])
    md = md_path.read_text()
    assert md_path == tmp_path / "RESULTS.md"
    assert "Some Other Device" not in md
    for d in docs:
        assert f"## {d['device']}" in md
        assert report.fmt_num(d["copy_bandwidth_GBs"]) in md
        for r in d["rows"]:
            assert report.fmt_ms(r["skelpy_s"]) in md
            if r.get("fraction_of_copy") is not None:
                assert report.fmt_pct(r["fraction_of_copy"]) in md
            for a in r["alternatives"]:
                assert f"{report.fmt_ms(a['seconds'])} ms, **{report.fmt_x(a['speedup'])}**" in md
        for t in d["tuning"]:
            if "error" in t:
                assert t["error"] in md
            else:
                assert f"**{report.fmt_x(t['speedup'])}**" in md
                assert report.fmt_ms(t["tuned_s"]) in md
                assert report.fmt_ms(t["tuned_default_s"]) in md
                assert report.fmt_x(t["online_speedup"]) in md
        for k, g in d["summary"]["speedup_geomean_by_kind"].items():
            assert f"vs {report.KIND_NAMES[k]} {report.fmt_x(g)}" in md
        assert "time budget exhausted (9:58 of 10:00 used)" in md      # the skipped part
    unmet = md.split("## Targets from the earlier issues not yet met")[1].split("\n## ")[0]
    assert "Gaussian 11x11 faster than scipy.ndimage" in unmet        # CPU target, not met
    assert "AllPairs fp32 matmul" not in unmet                        # met on the GPU
    # every chart the markdown links exists and is a PNG
    links = [ln.split("](")[1].rstrip(")") for ln in md.splitlines() if ln.startswith("![")]
    assert len(links) == 2 * 3 + 1
    for link in links:
        assert (tmp_path / link).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_is_reproducible_and_handles_no_results(tmp_path):
    _write_docs(tmp_path)
    first = report.main(["--results", str(tmp_path), "--no-charts"]).read_text()
    again = report.main(["--results", str(tmp_path), "--no-charts"]).read_text()
    assert first == again
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "No device results yet" in report.main(["--results", str(empty)]).read_text()


# -- the suite, for real -------------------------------------------------------------------------------


def test_suite_runs_at_tiny_sizes(tmp_path):
    doc = suite.main(["--scale", "tiny", "--only", "map,extras,tuning", "--out", str(tmp_path),
                      "--budget-minutes", "4", "--quiet"])
    path = tmp_path / f"{doc['device_slug']}.json"
    saved = json.loads(path.read_text())
    assert saved["schema"] == suite.SCHEMA and saved["copy_bandwidth_GBs"] > 0
    assert {k: v["status"] for k, v in saved["parts"].items() if v["status"] != "not selected"} \
        == {"map": "done", "extras": "done", "tuning": "done"}
    rows = {r["benchmark"]: r for r in saved["rows"]}
    assert {"map", "zip"} <= set(rows)
    for r in saved["rows"]:
        assert r["skelpy_s"] > 0 and r["GB/s"] > 0
        for a in r["alternatives"]:
            assert a["speedup"] == pytest.approx(a["seconds"] / a["skelpy_seconds"])
    kinds = {a["kind"] for a in rows["map"]["alternatives"]}
    assert {"opencl", "pyopencl", "numpy"} <= kinds
    tuned = [t for t in saved["tuning"] if "error" not in t]
    assert tuned and all(t["default_s"] > 0 and t["tuned_s"] > 0 for t in tuned)
    assert (tmp_path / f"{doc['device_slug']}.log").exists()
    assert (tmp_path / "RESULTS.md").read_text().count(saved["device"]) >= 2


def test_spent_budget_skips_the_remaining_parts(tmp_path, monkeypatch):
    """The first part spends the budget: the rest are recorded as skipped, not run."""
    clock = [1000.0]
    monkeypatch.setattr(suite, "_now", lambda: clock[0])
    ran = []

    def fake_run_part(part, argv, *, dump, parts_dir, env, timeout_s, log, progress):
        ran.append(part)
        clock[0] += 97.0                                  # of a 100 s budget
        dump.write_text(json.dumps({"part": part, "device": "?", "data": {}}))
        return {"status": "done", "seconds": 97.0, "argv": argv, "returncode": 0}

    monkeypatch.setattr(suite, "run_part", fake_run_part)
    doc = suite.main(["--scale", "tiny", "--budget-minutes", str(100 / 60), "--out",
                      str(tmp_path), "--quiet", "--no-report"])
    assert ran == ["map"]
    saved = json.loads((tmp_path / f"{doc['device_slug']}.json").read_text())
    for name in ("reduce_scan_allpairs", "stencil", "extras", "tuning"):
        assert saved["parts"][name]["status"] == "skipped"
        assert "budget" in saved["parts"][name]["reason"]
    assert saved["parts"]["tuner_eval"]["status"] == "not selected"


def test_no_budget_at_all_skips_everything(tmp_path):
    doc = suite.main(["--scale", "tiny", "--budget-minutes", "0", "--out", str(tmp_path),
                      "--quiet", "--no-report"])
    assert all(doc["parts"][p]["status"] == "skipped" for p in suite.DEFAULT_PARTS)
    assert doc["rows"] == [] and all(t["met"] is None for t in doc["targets"])


def test_a_part_past_its_deadline_is_stopped(tmp_path):
    with open(tmp_path / "log", "w") as log:
        rec = suite.run_part("map", ["--n", str(1 << 26)], dump=tmp_path / "d.json",
                             parts_dir=tmp_path / "parts", env=dict(__import__("os").environ),
                             timeout_s=1.0, log=log, progress=None)
    assert rec["status"] == "timeout" and not (tmp_path / "d.json").exists()


def test_only_keeps_the_other_parts_of_the_previous_document(tmp_path, monkeypatch):
    prev = device_doc(gpu=False)
    import skelpy

    dev = skelpy.current_device()
    prev.update(device=dev.name, device_slug=suite_slug(dev.name), raw=raw_parts(gpu=False))
    (tmp_path / f"{prev['device_slug']}.json").write_text(json.dumps(prev))
    map_raw = raw_parts(gpu=False)["map"]

    def fake_run_part(part, argv, *, dump, parts_dir, env, timeout_s, log, progress):
        dump.write_text(json.dumps({"part": part, "device": dev.name, "data": map_raw}))
        return {"status": "done", "seconds": 1.0, "argv": argv, "returncode": 0}

    monkeypatch.setattr(suite, "run_part", fake_run_part)
    doc = suite.main(["--scale", "tiny", "--only", "map", "--out", str(tmp_path), "--quiet",
                      "--no-report"])
    assert doc["parts"]["map"].get("kept_from") is None
    assert doc["parts"]["stencil"]["kept_from"] == prev["time"]
    assert {r["benchmark"] for r in doc["rows"]} >= {"map", "heat_5pt", "reduce_sum"}
    fresh = suite.main(["--scale", "tiny", "--only", "map", "--out", str(tmp_path), "--quiet",
                        "--no-report", "--fresh"])
    assert fresh["parts"]["stencil"]["status"] == "not selected"


def suite_slug(name: str) -> str:
    from benchmarks.common import device_slug

    return device_slug(name)
