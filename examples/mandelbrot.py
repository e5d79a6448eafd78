"""Mandelbrot set: a Map over an IndexMatrix, written to a PNG.

    python examples/mandelbrot.py [--size 1024x768] [--iterations 200] [--out mandelbrot.png]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import skelpy as sk

X0, X1, Y0, Y1 = -2.2, 0.8, -1.2, 1.2


def make_muscle(rows: int, cols: int, max_iter: int):
    dx = np.float32((X1 - X0) / cols)
    dy = np.float32((Y1 - Y0) / rows)
    x_min, y_min = np.float32(X0), np.float32(Y0)

    def mandelbrot(r, c):
        cx = x_min + np.float32(c) * dx
        cy = y_min + np.float32(r) * dy
        x = np.float32(0)
        y = np.float32(0)
        n = 0
        while n < max_iter and x * x + y * y <= 4:
            x, y = x * x - y * y + cx, 2 * x * y + cy
            n += 1
        return n

    return mandelbrot


def main(argv=None) -> np.ndarray:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", default="1024x768", help="COLSxROWS")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--out", default=os.path.join("examples", "output", "mandelbrot.png"))
    args = ap.parse_args(argv)
    cols, rows = (int(v) for v in args.size.lower().split("x"))

    fractal = sk.Map(make_muscle(rows, cols, args.iterations))
    space = sk.IndexMatrix((rows, cols))
    fractal(space)  # build and warm up
    t0 = time.perf_counter()
    counts = fractal(space).to_numpy()
    dt = time.perf_counter() - t0
    print(f"mandelbrot {cols}x{rows}, {args.iterations} iterations on "
          f"{sk.current_device().name}: {dt * 1e3:.1f} ms "
          f"(kernel {fractal.last_launch.kernel_time * 1e3:.2f} ms)")

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shade = np.log1p(counts.astype(np.float32)) / np.log1p(args.iterations)
    plt.imsave(args.out, shade, cmap="magma", origin="upper")
    print(f"wrote {args.out}")
    return counts


if __name__ == "__main__":
    main()
