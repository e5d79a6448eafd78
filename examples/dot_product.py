"""Dot product in ONE kernel launch with MapReduce, checked against NumPy.

SkelCL's dot product, ``Reduce(+)(Zip(*)(x, y))``, ran two kernels and stored the products in
between, which is why it lost to hand-written OpenCL. ``sk.MapReduce`` fuses the multiply into
the reduction: each element pair is multiplied as it is read and folded at once.

    python examples/dot_product.py [--n 10000000] [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import skelpy as sk
from skelpy import runtime


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000_000, help="vector length")
    ap.add_argument("--quick", action="store_true", help="a small vector (for tests)")
    args = ap.parse_args(argv)
    n = 100_003 if args.quick else args.n

    rng = np.random.default_rng(0)
    x = sk.Vector(rng.random(n, dtype=np.float32))
    y = sk.Vector(rng.random(n, dtype=np.float32))
    dot = sk.MapReduce(lambda a, b: a * b, lambda a, b: a + b, identity=0)

    rt = runtime.current()
    dot(x, y)                                  # build and upload once
    rt.stats.reset()
    t0 = time.perf_counter()
    result = dot(x, y)
    wall = time.perf_counter() - t0
    launches = rt.stats.launches

    want = float(np.dot(x.to_numpy().astype(np.float64), y.to_numpy().astype(np.float64)))
    rel = abs(float(result) - want) / abs(want)
    ll = dot.last_launch
    print(f"device: {rt.device.name}")
    print(f"dot of {n} float32 pairs = {result!r} (float64 NumPy: {want:.7g}, relative error "
          f"{rel:.1e})")
    print(f"kernel launches: {launches}; kernel time {ll.kernel_time * 1e6:.1f} us "
          f"({8 * n / ll.kernel_time / 1e9:.1f} GB/s); {wall * 1e3:.2f} ms end to end; "
          f"params {ll.params}")
    if rel > 1e-5:
        raise SystemExit(f"dot product differs from NumPy by {rel:.1e}")
    return float(result)


if __name__ == "__main__":
    main()
