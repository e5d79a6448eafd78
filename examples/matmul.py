"""Matrix multiply with AllPairs, checked against NumPy, with GFLOP/s.

AllPairs pairs every row of its first argument with every row of its second, so
``A @ B`` is ``AllPairs(zip=mul, reduce=add)(A, B.T)``: row i of A meets column j of B as row
j of B.T. The kernel tiles both matrices through local memory and keeps a block of outputs per
work-item in registers.

    python examples/matmul.py [--size 1024] [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np

import skelpy as sk


def main(argv=None) -> np.ndarray:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1024, help="n for n x n matrices")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument("--quick", action="store_true", help="small matrices (for tests)")
    args = ap.parse_args(argv)
    n = 96 if args.quick else args.size
    dt = np.dtype(args.dtype)

    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n)).astype(dt)
    B = rng.standard_normal((n, n)).astype(dt)

    matmul = sk.AllPairs(zip=lambda a, b: a * b, reduce=lambda a, b: a + b)
    mA, mBT = sk.Matrix(A), sk.Matrix(np.ascontiguousarray(B.T))   # A @ B = AllPairs(A, B.T)
    C = matmul(mA, mBT).to_numpy()                                  # first call builds
    best = float("inf")
    for _ in range(2 if args.quick else 5):
        matmul(mA, mBT)
        best = min(best, matmul.last_launch.kernel_time)
    want = A.astype(np.float64) @ B.astype(np.float64)
    err = float(np.max(np.abs(C - want)) / np.max(np.abs(want)))
    print(f"device: {sk.current_device().name}")
    print(f"{n}x{n} {dt} matrix product: max relative error {err:.1e}; "
          f"{2.0 * n ** 3 / best / 1e9:.1f} GFLOP/s (kernel {best * 1e3:.3f} ms, "
          f"params {matmul.last_launch.params})")
    if err > (1e-4 if dt == np.float32 else 1e-12):
        raise SystemExit(f"AllPairs matmul differs from NumPy by {err:.1e}")
    return C


if __name__ == "__main__":
    main()
