"""The halo depth rule (``_Job.best_k`` and the temporal passes per round): an exchange that
costs more per round (MPI's trip through the network layer) makes rounds rarer, within the
call's iterations and the parts' memory. Pure arithmetic on a call's description: no device."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from skelpy.distribution import stencil as dstencil
from skelpy.distribution import stencil_passes


def _job(round_latency: float, *, rows=4096, cols=4096, iterations=100, kind="gpu"):
    job = SimpleNamespace(
        group=SimpleNamespace(devices=[SimpleNamespace(kind=kind)], size=2),
        src=SimpleNamespace(dtype=np.dtype(np.float32)),
        bound=SimpleNamespace(out_dtype=np.dtype(np.float32)),
        plan=SimpleNamespace(features={"reads": 5.0}),
        cols=cols, rows=rows, north=1, south=1, iterations=iterations,
        ranges={0: (0, rows // 2), 1: (rows // 2, rows)},
        ex=SimpleNamespace(round_latency=round_latency))
    job.best_k = lambda: dstencil._Job.best_k(job)
    return job


def _k(job, t=4):
    return t * stencil_passes.Temporal.passes_per_round(job, t, 1)


def test_a_costlier_round_makes_rounds_rarer():
    for rows in (4096, 16384):
        here, mpi = _job(0.0, rows=rows, cols=rows), _job(130e-6, rows=rows, cols=rows)
        assert mpi.best_k() > here.best_k()
        assert _k(mpi) >= _k(here)
    # the rule's numbers at the sizes the 2 x H200 measured (bench_multidev, bench_mpi)
    assert _k(_job(0.0)) <= _k(_job(130e-6)) == 100
    assert _k(_job(0.0, rows=8192, cols=8192)) < _k(_job(130e-6, rows=8192, cols=8192))
    assert _k(_job(0.0, rows=16384, cols=16384)) < _k(_job(130e-6, rows=16384, cols=16384))


def test_rounds_stay_within_the_iterations_and_the_parts():
    for it in (1, 3, 7, 40):
        k = _k(_job(1.0, iterations=it))        # a huge latency: as deep as allowed
        assert 4 <= k <= max(it, 4) and (k <= it or k == 4)
    small = _job(1.0, rows=64, cols=64, iterations=1000)
    assert 2 * _k(small) <= 32                  # a halo of at most half the smallest part
    assert _k(_job(0.0, kind="cpu")) >= 4
