"""The halo depth rule (``_Job.call_cost`` and the temporal passes per round): an exchange
that costs more per round (MPI's trip through the network layer) makes rounds rarer, within
the call's iterations and the parts' memory. Pure arithmetic on a call's description (a
``_Job`` without a device): no device."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from skelpy.distribution import stencil as dstencil
from skelpy.distribution import stencil_passes


def _job(latency: float = 0.0, bandwidth: float = math.inf, *, rows=4096, cols=4096,
         iterations=100, kind="gpu", devices=2):
    job = dstencil._Job.__new__(dstencil._Job)
    job.group = SimpleNamespace(devices=[SimpleNamespace(kind=kind)] * devices, size=devices)
    job.src = SimpleNamespace(dtype=np.dtype(np.float32))
    job.bound = SimpleNamespace(out_dtype=np.dtype(np.float32))
    job.plan = SimpleNamespace(features={"reads": 5.0})
    job.rows, job.cols, job.north, job.south, job.iterations = rows, cols, 1, 1, iterations
    step = -(-rows // devices)
    job.ranges = [(min(r * step, rows), min((r + 1) * step, rows)) for r in range(devices)]
    job.ex = SimpleNamespace(round_latency=latency, round_bandwidth=bandwidth)
    return job


def _k(job, t=4):
    return t * stencil_passes.Temporal.passes_per_round(job, t, 1)


MPI = {"latency": 130e-6, "bandwidth": 3.96e9}


def test_the_cost_counts_exchanges_recompute_and_the_exposed_trip():
    job = _job()
    # k = iterations: no exchange, only the recomputed overlap
    per_row = job._per_row()
    assert math.isclose(job.call_cost(100, 1), 100 * 99 / 2 * 2 * per_row)
    # one exchange more costs the round's latency
    assert math.isclose(job.call_cost(50, 1) - 100 * 49 / 2 * 2 * per_row,
                        dstencil.ROUND_LATENCY_GPU)
    # an MPI trip longer than an interior pass is paid for, a shorter one is hidden
    slow, fast = _job(bandwidth=1e6), _job(bandwidth=1e15)
    assert slow.call_cost(50, 1) > job.call_cost(50, 1) == fast.call_cost(50, 1)


def test_a_costlier_round_makes_rounds_rarer():
    for rows in (2048, 4096, 8192, 16384):
        here, mpi = _job(rows=rows, cols=rows), _job(**MPI, rows=rows, cols=rows)
        assert _k(mpi) >= _k(here), rows
        assert mpi.best_k() > here.best_k()
    assert _k(_job(**MPI)) == 100                # heat 4096^2 x100 under MPI: no exchange


def test_rounds_stay_within_the_iterations_and_the_parts():
    for it in (1, 3, 7, 40, 1000):
        k = _k(_job(1.0, iterations=it))        # a huge latency: as deep as allowed
        assert k == 4 * max(1, min(it // 4, 2048 // 8)), (it, k)
    small = _job(1.0, rows=64, cols=64, iterations=1000)
    assert 2 * _k(small) <= 32                  # a halo of at most half the smallest part
    assert _k(_job(kind="cpu")) >= 4
    # a deeper halo is never chosen when the round costs nothing
    assert _k(_job(0.0, iterations=1000)) <= _k(_job(1e-3, iterations=1000))


def test_the_rule_prices_each_round_count_once_and_finds_the_least_cost():
    # the rule skips depths that add rounds' worth of nothing; it must still find the least
    # call cost over every legal m (a brute-force argmin over all of them)
    import random

    r = random.Random(7)
    for _ in range(300):
        rows = r.choice([64, 300, 4096, 16384])
        job = _job(r.choice([0.0, 130e-6, 1e-2]), r.choice([math.inf, 3.96e9, 1e7]),
                   rows=rows, cols=rows, iterations=r.randint(1, 3000))
        t, reach = r.choice([1, 2, 4, 8]), r.choice([1, 2])
        most = max(min(job.iterations // t, (rows // 2) // (2 * t * reach),
                       stencil_passes.MAX_PASSES_PER_ROUND), 1)
        brute = min(range(1, most + 1), key=lambda m: (job.call_cost(m * t, reach), m))
        assert stencil_passes.Temporal.passes_per_round(job, t, reach) == brute
