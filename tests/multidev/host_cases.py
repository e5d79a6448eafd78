"""The host's side of a stencil loop on a device group (issue 13), run by tests/test_multidev.py
with group_cases.py (two PoCL devices): in steady state a call makes no OpenCL call that waits
for a device, makes no kernel, buffer or queue, sets no kernel argument, and a round of k steps
costs a fixed number of enqueues. On 2 x H200 a pass of heat 4096^2 takes ~80 us per device;
in some runs the devices waited for the host 21-41% of the time: a blocking call or a growing
per-round cost is caught here by counting, not by timing.

Not collected by the normal test run (the file name does not start with test_)."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

import skelpy as sk
from benchmarks.host_rounds import BLOCKING, ApiCounter
from skelpy import runtime

GROUP = "cpu:*"


@pytest.fixture(scope="module", autouse=True)
def group():
    expect = int(os.environ.get("SKELPY_EXPECT_DEVICES", "0"))
    if len(sk.devices()) < max(expect, 2):
        pytest.skip("one OpenCL device only")
    sk.use(GROUP)
    yield
    sk.use(GROUP)


def heat(nb):
    return nb[0, 0] + 0.1 * (nb[-1, 0] + nb[1, 0] + nb[0, -1] + nb[0, 1] - 4 * nb[0, 0])


def _finish() -> None:
    for rt in runtime.current().group.runtimes:
        rt.finish()
    runtime.current().group.exchange.finish()


# (params, n: iterations of the shorter call, per round on two devices without wrap: kernel
# enqueues, each device's m = k / t passes, the last split into its sent edge and its
# interior, or k single steps, the last split into both edges and the interior; copies: the
# 2 edges each down and up, and with single steps each device's ghost rows (one side each)
# refreshed on the device before each step; flushes: each device's queue once its boundary
# rows are enqueued, then the 2 copy queues (route queue: the senders' after the downloads
# and the receivers' after the uploads); with ``flush`` also each device's after each pass)
CASES = [({"t": 2, "k": 4, "route": "copy"}, 8, 2 * (2 + 1), 4, 4),
         ({"t": 2, "k": 4, "route": "queue"}, 8, 2 * (2 + 1), 4, 6),
         ({"t": 2, "k": 4, "route": "copy", "flush": True}, 8, 2 * (2 + 1), 4, 4),
         ({"t": 1, "k": 3, "route": "copy"}, 9, 2 * (3 + 2), 4 + 2 * 3, 4)]


@pytest.mark.parametrize("params, n, launches, copies, flushes", CASES,
                         ids=["passes-copy", "passes-queue", "passes-flush", "steps-copy"])
def test_a_steady_state_round_never_waits_for_a_device(params, n, launches, copies, flushes):
    if len(sk.current_devices()) != 2:
        pytest.skip("the counts are for two devices")
    a = np.random.default_rng(5).standard_normal((46, 37)).astype(np.float32)
    st = sk.Stencil(heat, border="nearest")
    m = sk.Matrix(a)
    out = None
    for _ in range(2):                      # builds, kernel copies, pinned staging
        for it in (n, 2 * n):
            out = st(m, iterations=it, params=params)     # (as below: the last result kept)
            _finish()
    counter, calls = ApiCounter(), {}
    with counter.installed():
        for it in (n, 2 * n):
            counter.reset()
            out = st(m, iterations=it, params=params)
            calls[it] = Counter(counter.calls)    # the call's own, before the finish
            _finish()
    k = params["k"]
    rounds = 2 * n // k - n // k
    extra = Counter(calls[2 * n])
    extra.subtract(calls[n])
    for it in (n, 2 * n):                   # the whole call
        assert sum(calls[it][b] for b in BLOCKING) == 0, calls[it]
        for made in ("Kernel()", "Buffer()", "CommandQueue()", "UserEvent()",
                     "enqueue_map_buffer"):
            assert calls[it][made] == 0, (made, calls[it])
    for it in (n, 2 * n):
        # no argument set, but with single steps in the call's first launch per device
        # (through the tuner, at the shared kernel: its two buffers)
        sets = calls[it]["Kernel.set_arg"] + calls[it]["Kernel._set_arg_buf"]
        assert sets <= (0 if params["t"] > 1 else 2 * 2), calls[it]
    assert extra["enqueue_nd_range_kernel"] == launches * rounds, extra
    assert extra["enqueue_copy"] == copies * rounds, extra
    per_pass = int(params.get("flush", False))
    assert extra["CommandQueue.flush"] == (flushes + per_pass * launches) * rounds, extra
    for it in (n, 2 * n):                   # and each device's queue after its first pass
        exchanges = -(-it // k) - 1         # and once the call is made
        assert calls[it]["CommandQueue.flush"] == flushes * exchanges + 2 + 2 \
            + per_pass * calls[it]["enqueue_nd_range_kernel"], calls[it]
    ref = a.astype(np.float64)              # NumPy, independently
    for _ in range(2 * n):
        p = np.pad(ref, 1, mode="edge")
        ref = ref + 0.1 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * ref)
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-4, atol=1e-5)
    sk.use(0)
    try:
        alone = st(a, iterations=2 * n, params={"t": params["t"]}).to_numpy()
    finally:
        sk.use(GROUP)
    np.testing.assert_array_equal(out.to_numpy(), alone)
