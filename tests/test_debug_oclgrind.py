"""Checked reads under the oclgrind simulator: muscles that read far outside their arrays (in
debug mode) and stencils whose run-time offsets leave the shape (in every mode) raise
BoundsError, and the kernels themselves never read or write outside their buffers."""

from __future__ import annotations

import textwrap

import pytest
from oclgrind_support import ERROR_MARKERS, run_under_oclgrind

SCRIPT = textwrap.dedent('''
    import numpy as np
    import skelpy as sk

    assert "oclgrind" in sk.current_device().platform.lower(), sk.current_device()
    a = np.arange(37, dtype=np.float32)
    t = np.array([1, 2, 3], np.float32)
    table = (5.0, 6.0, 7.0)
    m = np.arange(42, dtype=np.float32).reshape(6, 7)

    def far(i, v):
        return v[i + 100000000]

    def below(i, v):
        return v[i - 40]

    def rows(a, b):
        s = 0.0
        for k in range(a.size + 3):
            s += a[k] * b[k]
        return s

    def column(nb, c):
        return nb[0, c]

    cases = {
        "far": lambda: sk.Map(far)(sk.IndexVector(37), a),
        "below": lambda: sk.Map(below)(sk.IndexVector(37), a, params={"wg": 8, "vw": 4}),
        "empty": lambda: sk.Map(lambda x, e: x + e[0])(a, np.zeros(0, np.float32)),
        "zip-matrix": lambda: sk.Zip(lambda x, y, q: x + y * q[1, 9])(a, a, m),
        "table": lambda: sk.Map(lambda i: table[i])(sk.IndexVector(9)),
        "stencil-extra": lambda: sk.Stencil(lambda nb, w: nb[0, 0] * w[9])(m, t),
        "allpairs": lambda: sk.AllPairs(rows)(m, m),
        "mapreduce": lambda: sk.MapReduce(lambda i, v: v[2 * i], lambda x, y: x + y, 0,
                                          inputs=1)(sk.IndexVector(37), a),
    }
    raised = []
    with sk.debug():
        for name, call in cases.items():
            try:
                call()
            except sk.BoundsError as exc:
                raised.append(name)
                print("RAISED", name, exc)
        # in range: the right answer, checked
        got = sk.Map(lambda x, e: x + e[-1])(a, t).to_numpy()
        assert np.array_equal(got, a + 3), got
    # stencil offsets known at run time: checked in every mode, on both kernel paths
    for p in ({"local": 1, "wg_r": 2, "wg_c": 4}, {"local": 0, "wg_r": 2, "wg_c": 2, "cr": 2}):
        for mode in ("constant", "wrap", "mirror"):
            st = sk.Stencil(column, shape=2, border=mode)
            try:
                st(m, 40000, params=p)
            except sk.BoundsError as exc:
                raised.append("stencil-" + mode)
            ok = st(m, -2, params=p).to_numpy()
    print("RAISED-ALL", len(raised), sorted(set(raised)))
    assert len(raised) == len(cases) + 6, raised
    print("DEBUG-OCLGRIND-OK")
''')



@pytest.mark.oclgrind
@pytest.mark.slow
def test_checked_reads_under_oclgrind(tmp_path):
    run_under_oclgrind(tmp_path, "debug_oclgrind.py", SCRIPT, "DEBUG-OCLGRIND-OK",
                       markers=ERROR_MARKERS, drop_env=("SKELPY_DEBUG",))
