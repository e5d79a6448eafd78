"""skelpy in one minute: Map and Zip on lazy containers, checked against NumPy.

Run with `make demo` (which also sets everything up) or `python examples/demo.py`.
"""

from __future__ import annotations

import time

import numpy as np

import skelpy as sk


def main() -> None:
    dev = sk.current_device()
    print(f"device: {dev.name}  ({dev.kind}, platform {dev.platform})")

    n = 1_000_003
    x = sk.Vector(np.linspace(0, 1, n, dtype=np.float32))
    y = sk.Vector(np.ones(n, dtype=np.float32))

    square = sk.Map(lambda v: v * v)
    saxpy = sk.Zip(lambda x, y, a: a * x + y)

    w = saxpy(square(x), y, 2.0)          # two kernels, nothing leaves the device
    t0 = time.perf_counter()
    w = saxpy(square(x), y, 2.0)
    host = w.to_numpy()                    # one download
    dt = time.perf_counter() - t0
    ref = 2.0 * np.asarray(x) ** 2 + 1.0
    print(f"saxpy(square(x), y, 2.0) over {n} floats: {host[:4]} ...  max error "
          f"{np.max(np.abs(host - ref)):.2e}  ({dt * 1e3:.2f} ms end to end)")
    print(f"  launch parameters used: {saxpy.last_launch.params}, kernel "
          f"{saxpy.last_launch.kernel_time * 1e6:.1f} us")

    idx = sk.Map(lambda i: i * i % 7)(sk.IndexVector(10))
    print("Map over IndexVector(10), i*i % 7:", idx.to_numpy())

    rows = sk.Map(lambda r, c: r * 10 + c)(sk.IndexMatrix((3, 4)))
    print("Map over IndexMatrix((3, 4)), r*10 + c:\n", rows.to_numpy())

    c_muscle = sk.Map("float func(float x) { return sqrt(x); }")
    print("OpenCL C muscle sqrt on [0, 1, 4, 9]:",
          c_muscle(np.array([0, 1, 4, 9], np.float32)).to_numpy())

    for extra in ("game_of_life", "canny"):
        try:
            mod = __import__(f"examples.{extra}", fromlist=["main"])
        except ImportError:
            continue
        print()
        mod.main(["--quick"]) if hasattr(mod, "main") else None


if __name__ == "__main__":
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
