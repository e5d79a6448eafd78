"""Heat diffusion on a plate: an iterative 5-point skelpy Stencil against a NumPy loop.

    python examples/heat.py [--size 512] [--steps 2000] [--alpha 0.2] [--quick]

Explicit time stepping of u_t = alpha * laplacian(u) on an insulated plate (``border="nearest"``:
no heat flows through the edges) with a few hot spots. ``step(u, iterations=k)`` keeps both
buffers on the device and downloads nothing until the end; the same number of steps in NumPy
(``np.pad(mode="edge")`` and slicing) is the reference. Writes a PNG to ``examples/output/``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import skelpy as sk

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output")


def make_step(alpha: float) -> sk.Stencil:
    a = np.float32(alpha)

    def heat(u):
        return u[0, 0] + a * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4 * u[0, 0])

    return sk.Stencil(heat, shape=1, border="nearest")


def numpy_heat(u: np.ndarray, steps: int, alpha: float) -> np.ndarray:
    u = u.astype(np.float32).copy()
    a = np.float32(alpha)
    for _ in range(steps):
        p = np.pad(u, 1, mode="edge")
        u = u + a * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u)
    return u


def initial_plate(size: int) -> np.ndarray:
    u = np.zeros((size, size), np.float32)
    yy, xx = np.mgrid[0:size, 0:size] / size
    for cy, cx, t in [(0.3, 0.3, 100.0), (0.7, 0.6, 60.0), (0.5, 0.85, 80.0)]:
        u[(yy - cy) ** 2 + (xx - cx) ** 2 < 0.004] = t
    u[size // 8: size // 8 + 2, size // 4: 3 * size // 4] = 50.0      # a hot bar
    return u


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--alpha", type=float, default=0.2, help="stable for alpha <= 0.25")
    ap.add_argument("--quick", action="store_true", help="128x128, 200 steps")
    ap.add_argument("--out", default=OUT_DIR, help="folder for the picture")
    args = ap.parse_args(argv)
    if args.quick:
        args.size, args.steps = 128, 200

    dev = sk.current_device()
    u0 = initial_plate(args.size)
    step = make_step(args.alpha)
    plate = sk.Matrix(u0)
    step(plate, iterations=2)                               # build and tune
    t0 = time.perf_counter()
    out = step(plate, iterations=args.steps)
    final = out.to_numpy()
    wall = time.perf_counter() - t0
    kernel_s = step.last_launch.kernel_time

    t0 = time.perf_counter()
    want = numpy_heat(u0, args.steps, args.alpha)
    numpy_s = time.perf_counter() - t0
    err = float(np.abs(final - want).max())
    # explicit diffusion with insulated edges conserves the total heat
    drift = float(abs(final.astype(np.float64).sum() / u0.astype(np.float64).sum() - 1.0))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(args.out, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
    for ax, img, title in [(axes[0], u0, "initial"), (axes[1], final, f"after {args.steps} steps")]:
        im = ax.imshow(img, cmap="inferno")
        ax.set_title(title)
        ax.axis("off")
        fig.colorbar(im, ax=ax, fraction=0.046)
    png = os.path.join(args.out, "heat.png")
    fig.tight_layout()
    fig.savefig(png, dpi=80)
    plt.close(fig)

    cells = args.size * args.size * args.steps
    print(f"Heat equation {args.size}x{args.size}, {args.steps} steps, alpha={args.alpha}, "
          f"on {dev.name}:")
    print(f"  skelpy {wall * 1e3:.1f} ms wall (kernels {kernel_s * 1e3:.2f} ms, "
          f"{kernel_s / args.steps * 1e6:.1f} us/step, {cells / max(kernel_s, 1e-12) / 1e9:.2f} "
          f"Gcells/s); NumPy loop {numpy_s * 1e3:.1f} ms ({numpy_s / max(wall, 1e-12):.1f}x)")
    print(f"  max |skelpy - NumPy| = {err:.2e}; total heat drift {drift:.1e}; "
          f"launch parameters {step.last_launch.params}")
    print(f"  picture: {png}")
    return {"max_err": err, "drift": drift, "seconds": wall, "kernel_seconds": kernel_s,
            "numpy_seconds": numpy_s, "png": png}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
