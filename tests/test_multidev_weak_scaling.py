"""The weak-scaling model (benchmarks/weak_scaling.py, issue 14) from synthetic measured
terms: the fits recover the terms, the predicted step follows the stated formulas, and the
RESULTS.md section renders them. (The measurement mode runs under mpiexec; see the README.)"""

from __future__ import annotations

import argparse
import json
import math

import pytest

from benchmarks import report_multidev
from benchmarks import weak_scaling as ws


def _doc(P: int, *, cell=1e-12, alpha=50e-6, beta=1 / 20e9, ar=(30e-6, 10e-6),
         raw=1e-6) -> dict:
    halo = [{"cols": c, "bytes": 8 * c, "seconds": alpha + beta * 8 * c}
            for c in (256, 4096, 65536)]
    fit = ws._fit([h["bytes"] for h in halo], [h["seconds"] for h in halo])
    return {"schema": ws.SCHEMA, "device": "Fake GPU", "device_kind": "gpu", "ranks": P,
            "allreduce_mpi_s": raw, "allreduce_skelpy_s": ar[0] + ar[1] * math.log2(P),
            "halo": halo, "alpha_s": fit[0], "beta_s_per_byte": fit[1], "cell_s": cell}


def _options(**kw) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ws.add_model_options(ap)
    a = ap.parse_args([])
    vars(a).update(kw)
    return a


@pytest.fixture
def measured(tmp_path):
    for P in (2, 4, 8):
        (tmp_path / f"weak-scaling-fake-gpu-n{P}.json").write_text(json.dumps(_doc(P)))
    return tmp_path


def test_fits_recover_the_terms(measured):
    (t,) = ws.load_terms([], measured)
    assert t.alpha == pytest.approx(50e-6, rel=1e-6)
    assert t.beta == pytest.approx(1 / 20e9, rel=1e-6)
    assert t.ar == pytest.approx((30e-6, 10e-6), rel=1e-6)
    assert t.allreduce(4096) == pytest.approx(30e-6 + 12 * 10e-6)


def test_step_follows_the_stated_formulas(measured):
    (t,) = ws.load_terms([], measured)
    a = _options(allreduce_every=10)
    P, n = 64, a.cells_side
    N = n * math.sqrt(P)
    r = ws.predict(t, P, "1-D rows", False, a)
    k = r["k"]
    beta = max(t.beta, 1 / (a.net_gbs * 1e9))            # 64 ranks: beyond one node
    comp = t.cell_s * (n * n + (k - 1) * N)
    exch = t.alpha + a.net_latency + beta * 2 * k * N * 4
    assert r["step_s"] == pytest.approx(comp + exch / k + t.allreduce(P) / 10)
    assert r["efficiency"] == pytest.approx(t.cell_s * n * n / r["step_s"])
    # k is the best of the candidates, overlap never loses, and 1-D rows lose to 2-D blocks
    # at scale (their halo grows with sqrt P)
    for kk in ws.KS:
        assert r["step_s"] <= t.cell_s * (n * n + (kk - 1) * N) + (
            t.alpha + a.net_latency + beta * 2 * kk * N * 4) / kk + t.allreduce(P) / 10 + 1e-15
    rows = ws.table([t], a)
    for P in ws.PS:
        for split in ("1-D rows", "2-D blocks"):
            o, no = (next(x for x in rows if x["P"] == P and x["split"] == split
                          and x["overlap"] is ov) for ov in (True, False))
            assert o["efficiency"] >= no["efficiency"]
    eff = {s: [x["efficiency"] for x in rows if x["split"] == s and x["overlap"]]
           for s in ("1-D rows", "2-D blocks")}
    assert eff["1-D rows"] == sorted(eff["1-D rows"], reverse=True)
    assert eff["1-D rows"][-1] < eff["2-D blocks"][-1]


def test_free_exchange_scales_perfectly(tmp_path):
    (tmp_path / "weak-scaling-x-n2.json").write_text(json.dumps(
        _doc(2, alpha=0.0, beta=0.0, ar=(0.0, 0.0), raw=0.0)))
    (t,) = ws.load_terms([], tmp_path)
    a = _options(net_latency=0.0, net_gbs=1e12, launch=0.0)
    assert all(r["efficiency"] == pytest.approx(1.0, abs=1e-6) and r["k"] == 1
               for r in ws.table([t], a) if r["split"] == "1-D rows")


def test_one_measured_P_splits_the_allreduce_into_a_constant_and_mpi_levels(tmp_path):
    (tmp_path / "weak-scaling-x-n4.json").write_text(json.dumps(
        _doc(4, ar=(100e-6, 0.0), raw=6e-6)))
    (t,) = ws.load_terms([], tmp_path)
    assert t.ar == pytest.approx((94e-6, 3e-6))
    # a newer file also has the raw Allgather, the collective skelpy's Reduce makes: its
    # levels are MPI's part then
    doc = dict(_doc(4, ar=(100e-6, 0.0), raw=6e-6), allgather_mpi_s=8e-6)
    (tmp_path / "weak-scaling-x-n4.json").write_text(json.dumps(doc))
    (t,) = ws.load_terms([], tmp_path)
    assert t.ar == pytest.approx((92e-6, 4e-6))


def test_results_section_and_chart(measured):
    lines = report_multidev.mpi_section(measured, measured)
    text = "\n".join(lines)
    assert "### Weak scaling to 4096 GPUs" in text
    assert any(line.startswith("| Fake GPU (measured, P=2,4,8) | 1-D rows | 4096 |")
               for line in lines)
    pytest.importorskip("matplotlib")
    assert (measured / "weak-scaling.png").stat().st_size > 0
    assert "![weak scaling](weak-scaling.png)" in text
