"""The streaming pass with its walk unrolled, as GPUs build it, run on the CPU.

PoCL normally keeps the walk's round a loop (``StreamPlan.pocl_keeps_loop``: faster builds and
passes there), so the default suite runs a different build of the kernel from the one a GPU
runs. Here PoCL builds it unrolled too. With the rings' local pointer declared ``restrict``,
this build read neighbour columns from before the barrier (stale windows): Game of Life
(``wrap``, int32 and uint8) passes differed from single steps, as they did on an H200. oclgrind
cannot see that bug (skelpy builds there with ``-Drestrict=``), hence this test on PoCL
against NumPy, and the source check below."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import skelpy as sk
from skelpy.skeletons.stencil_stream import StreamPlan

KERNELS = Path(sk.__file__).resolve().parent / "kernels"


def life(nb):
    n = (nb[-1, -1] + nb[-1, 0] + nb[-1, 1] + nb[0, -1] + nb[0, 1] + nb[1, -1] + nb[1, 0]
         + nb[1, 1])
    return (n == 3) | ((n == 2) & (nb[0, 0] == 1))


def numpy_life(board: np.ndarray, steps: int) -> np.ndarray:
    b = board.astype(np.int32)
    for _ in range(steps):
        n = sum(np.roll(np.roll(b, dr, 0), dc, 1) for dr in (-1, 0, 1) for dc in (-1, 0, 1)
                if (dr, dc) != (0, 0))
        b = ((n == 3) | ((n == 2) & (b == 1))).astype(np.int32)
    return b.astype(board.dtype)


@pytest.fixture
def unrolled(monkeypatch):
    monkeypatch.setattr(StreamPlan, "pocl_keeps_loop", False)


# The GPUs' default layout (own columns in registers, walk unrolled); 29 x 23 spans several
# tiles and chunks. int32: 5 steps = passes of 2, 2 and 1 (two programs); uint8: 2 + 2.
@pytest.mark.parametrize("dtype, iterations", [(np.int32, 5), (np.uint8, 4)])
def test_game_of_life_wrap_unrolled_equals_numpy(unrolled, dtype, iterations):
    rng = np.random.default_rng(11)
    board = (rng.random((29, 23)) < 0.35).astype(dtype)
    st = sk.Stencil(life, shape=1, border="wrap", out_dtype=dtype)
    p = {"t": 2, "tb_wc": 16, "tb_rows": 8, "tb_ring": 0, "tb_unroll": 1, "tb_pre": 2}
    got = st(sk.Matrix(board), iterations=iterations, params=p).to_numpy()
    assert st.last_launch.params["t"] == 2 and len(st.last_launch.events) == -(-iterations // 2)
    want = numpy_life(board, iterations)
    assert got.dtype == want.dtype
    assert np.array_equal(got, want), np.argwhere(got != want)[:8].tolist()


def _local_restrict_params(source: str) -> list[str]:
    """Kernel parameters that are ``__local`` pointers declared ``restrict``."""
    params = []
    for m in re.finditer(r"__kernel\b[^{]*?\(([^{]*?)\)\s*\{", source, re.S):
        params += [p.strip() for p in m.group(1).split(",")
                   if "__local" in p and re.search(r"\brestrict\b", p)]
    return params


@pytest.mark.parametrize("name", sorted(p.name for p in KERNELS.glob("*.cl")))
def test_local_memory_shared_across_work_items_is_not_restrict(name):
    # work-items trade values through these buffers across barriers; `restrict` would tell the
    # compiler that no other work-item writes them (the bug above)
    assert _local_restrict_params((KERNELS / name).read_text()) == []


def test_the_source_check_sees_a_restrict_local_parameter():
    src = "__kernel void k(__global int* restrict o,\n __local float* restrict l) { }"
    assert _local_restrict_params(src) == ["__local float* restrict l"]


# -- the benchmark's check of forced t (the command for the GPU) --------------------------------


def test_benchmark_force_t_prints_pass_and_fail(tmp_path, capsys, monkeypatch):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks import bench_temporal

    argv = ["--cases", "life_u8", "--sizes", "40", "--iterations", "4", "--reps", "1",
            "--force-t", "2", "--force-ring", "0", "--borders", "none", "--out", str(tmp_path)]
    data = bench_temporal.main(argv)
    out = capsys.readouterr().out
    assert "CHECK life_u8 40^2 t=2 ring0: PASS" in out and "bitwise: PASS" in out
    (case,) = data["cases"]
    (rec,) = case["forced"]
    assert rec["params"]["t"] == 2 and rec["params"]["tb_ring"] == 0 and rec["bitwise"]
    assert rec["gcs"] > 0 and data["bitwise_ok"]

    # a result that differs from the single steps is reported as such
    monkeypatch.setattr(bench_temporal, "same", lambda out, ref: False)
    data = bench_temporal.main(argv)
    out = capsys.readouterr().out
    assert "CHECK life_u8 40^2 t=2 ring0: FAIL" in out and "bitwise: FAIL in life_u8 40^2" in out
    assert not data["bitwise_ok"] and data["rows"][0]["bitwise"] is False
