"""Reduce, MapReduce, Scan and AllPairs kernels under the oclgrind simulator: no invalid memory
access and no data race (the pairwise counters, the order-preserving tiles, the scan's row
trees and multi-level carries, the blocked and compensated AllPairs fold) at awkward sizes and
launch points, results checked against NumPy. oclgrind is offered neither the one-launch
reduction nor the look-back scan (they need a device-wide fence: skeletons/reduce.py
one_launch_ok), so those run on PoCL and GPUs only."""

from __future__ import annotations

import textwrap

import pytest
from oclgrind_support import STRICT_MARKERS, run_under_oclgrind

SCRIPT = textwrap.dedent('''
    import math
    import numpy as np
    import skelpy as sk

    assert "oclgrind" in sk.current_device().platform.lower(), sk.current_device()
    rng = np.random.default_rng(3)

    def add(a, b):
        return a + b

    def last_nonzero(a, b):
        return b if b != 0 else a

    checked = 0
    x = rng.random(1000).astype(np.float32)
    xi = rng.integers(0, 5, 1000).astype(np.int32)
    for commutative in (True, False):
        red = sk.Reduce(add, 0, commutative=commutative)
        for p in [dict(wg=4, items=2, groups=3, stages=2), dict(wg=8, items=16, groups=2,
                  stages=2), dict(wg=1, items=1, groups=1, stages=2),
                  dict(wg=16, items=4, groups=64, stages=2)]:
            for n in (1, 37, 1000):
                got = red(x[:n], params=p)
                assert abs(float(got) - math.fsum(x[:n])) <= 1e-5 * n, (p, n)
                assert red(xi[:n], params=p) == xi[:n].sum(), (p, n)
                checked += 2
    dot = sk.MapReduce(lambda a, b: a * b, add, 0)
    assert abs(float(dot(x, x, params=dict(wg=8, items=2, groups=4, stages=2)))
               - float(np.dot(x.astype(np.float64), x))) < 1e-3
    m = rng.random((7, 45)).astype(np.float32)
    for axis in (0, 1):
        r = sk.Reduce(add, 0, axis=axis)
        for p in [dict(wg=8, lanes=2), dict(wg=4, lanes=4)]:
            got = r(m, params=p).to_numpy()
            assert np.allclose(got, m.sum(axis=axis), rtol=1e-5), (axis, p)
            checked += 1
    for inclusive in (False, True):
        scans = [sk.Scan(add, 0, inclusive=inclusive), sk.Scan(last_nonzero, 0,
                                                               inclusive=inclusive)]
        for p in [dict(wg=1, items=2, method="levels"), dict(wg=4, items=4, method="levels"),
                  dict(wg=2, items=8, method="levels"), dict(wg=8, items=1, method="levels")]:
            for v in (x[:301], xi[:301], x[:3].astype(np.float64)):
                want = np.cumsum(v)
                got = scans[0](v, params=p).to_numpy()
                ref = want if inclusive else np.concatenate([[0], want[:-1]])
                assert np.allclose(got, ref, rtol=1e-5), (p, v.dtype)
                checked += 1
            y = xi[:201] * (rng.random(201) < 0.3)
            scans[1](y, params=p).to_numpy()
    mm = sk.AllPairs(zip=lambda a, b: a * b, reduce=add)
    A = rng.random((5, 37)).astype(np.float32)
    B = rng.random((3, 37)).astype(np.float32)
    for p in [dict(tm=4, tn=2, tk=4, rm=2, rn=1), dict(tm=2, tn=4, tk=8, rm=1, rn=2),
              dict(tm=8, tn=8, tk=2, rm=4, rn=4)]:
        assert np.allclose(mm(A, B, params=p).to_numpy(), A @ B.T, rtol=1e-5), p
        checked += 1
    print("FOLD-OCLGRIND-OK", checked)
''')



@pytest.mark.oclgrind
@pytest.mark.slow
def test_fold_kernels_under_oclgrind(tmp_path):
    run_under_oclgrind(tmp_path, "fold_oclgrind.py", SCRIPT, "FOLD-OCLGRIND-OK",
                       markers=STRICT_MARKERS)
