"""The kernels a stencil on a device group runs (the row-window kernel, SKP_ROW_WINDOW, in its
single-step and temporal forms, and the halo exchange around them) under the oclgrind
simulator: no invalid access, no data race, at awkward sizes (a part of no rows, parts of one
row, halos deeper than a part). oclgrind has one device, so the group here is three queues of
that device in one context (three ranks): the same kernels and exchanges as on three devices."""

from __future__ import annotations

import textwrap

import pytest
from oclgrind_support import STRICT_MARKERS, run_under_oclgrind

SCRIPT = textwrap.dedent('''
    import numpy as np
    import pyopencl as cl
    import skelpy as sk
    from skelpy import runtime
    from skelpy.device_groups import Group

    dev = sk.current_device()
    assert "oclgrind" in dev.platform.lower(), dev
    rng = np.random.default_rng(3)

    def skewed(nb):
        return 0.5 * nb[-2, 0] + nb[-1, 1] - 0.25 * nb[0, 0] + 0.125 * nb[1, -1] + nb[0, 2]

    def heat(u):
        return u[0, 0] + 0.2 * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4 * u[0, 0])

    cases = []
    for mode in ["constant", "nearest", "wrap", "reflect", "mirror"]:
        for shape in [(1, 1), (2, 3), (7, 5)]:
            cases.append((mode, rng.standard_normal(shape).astype(np.float32)))
    steps = {id(a): sk.Stencil(skewed, border=m, cval=-1.5) for m, a in cases}
    heats = {m: sk.Stencil(heat, border=m, cval=0.5) for m, _ in cases}
    ref = {}
    for mode, a in cases:                          # one device: the reference
        ref[id(a)] = steps[id(a)](a, iterations=3, params={"t": 1}).to_numpy()
        ref[("heat", id(a))] = heats[mode](a, iterations=4, params={"t": 1}).to_numpy()

    ctx = cl.Context([dev.cl_device])
    rts = [runtime.Runtime(dev, context=ctx) for _ in range(3)]
    group = Group((dev,) * 3, ctx, tuple(rts))
    for rank, rt in enumerate(rts):
        rt.group, rt.rank = group, rank
    runtime._current = rts[0]

    checked = 0
    for mode, a in cases:
        st = steps[id(a)]
        for k in (1, 2):
            try:
                got = st(a, iterations=3, params={"k": k, "t": 1}).to_numpy()
            except sk.ParameterError:
                assert k > 1
                continue
            assert np.array_equal(got, ref[id(a)]), (mode, a.shape, k)
            assert st.last_launch.k == k           # the group's path ran
            checked += 1
        got = heats[mode](a, iterations=4, params={"t": 2, "tb_wc": 8}).to_numpy()
        assert np.array_equal(got, ref[("heat", id(a))]), (mode, a.shape, "temporal")
        checked += 1
    print("GROUP-OCLGRIND-OK", checked)
''')



@pytest.mark.oclgrind
@pytest.mark.slow
def test_group_stencil_kernels_under_oclgrind(tmp_path):
    run_under_oclgrind(tmp_path, "group_oclgrind.py", SCRIPT, "GROUP-OCLGRIND-OK",
                       markers=STRICT_MARKERS, drop_env=("POCL_DEVICES",))
