"""Heat diffusion on a plate: an iterative 5-point skelpy Stencil against a NumPy loop.

    python examples/heat.py [--size 512] [--steps 2000] [--alpha 0.2] [--quick] [--devices N]

Explicit time stepping of u_t = alpha * laplacian(u) on an insulated plate (``border="nearest"``:
no heat flows through the edges) with a few hot spots. ``step(u, iterations=k)`` keeps both
buffers on the device and downloads nothing until the end; the same number of steps in NumPy
(``np.pad(mode="edge")`` and slicing) is the reference. Writes a PNG to ``examples/output/``.

``--devices N`` runs the same code on N devices at once (the first N of the current device's
kind: two GPUs, or PoCL's CPU devices with ``POCL_DEVICES="pthread pthread"``): the plate is
cut into row blocks, each device steps its own with halo rows that the devices exchange every
k steps (the tuner picks k), and the picture marks the cuts. The same steps on one device are
timed too, for the speedup.
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
    ap.add_argument("--devices", type=int, default=1,
                    help="devices at once (the first N of the current device's kind)")
    args = ap.parse_args(argv)
    if args.quick:
        args.size, args.steps = 128, 200

    dev = sk.current_device()
    u0 = initial_plate(args.size)
    one = None
    if args.devices > 1:
        same = [d for d in sk.devices() if d.kind == dev.kind]
        if len(same) < args.devices:
            raise SystemExit(f"--devices {args.devices}: only {len(same)} {dev.kind} "
                             "device(s); on a CPU set POCL_DEVICES='pthread pthread' first")
        one = run_steps(make_step(args.alpha), u0, args.steps)     # the same on one device
        sk.use(same[:args.devices])
    step = make_step(args.alpha)
    try:
        final, wall, kernel_s, cuts, k = run_steps(step, u0, args.steps)
    finally:
        if args.devices > 1:
            sk.use(dev)

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
    on = f" on {args.devices} devices" if args.devices > 1 else ""
    for ax, img, title in [(axes[0], u0, "initial"),
                           (axes[1], final, f"after {args.steps} steps{on}")]:
        im = ax.imshow(img, cmap="inferno")
        ax.set_title(title)
        ax.axis("off")
        fig.colorbar(im, ax=ax, fraction=0.046)
    for row in cuts:                                # where one device's rows end
        axes[1].axhline(row - 0.5, color="cyan", linestyle="--", linewidth=1)
    png = os.path.join(args.out, "heat.png" if args.devices == 1 else
                       f"heat_{args.devices}_devices.png")
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
    result = {"max_err": err, "drift": drift, "seconds": wall, "kernel_seconds": kernel_s,
              "numpy_seconds": numpy_s, "png": png}
    if one is not None:
        same = float(np.abs(final - one[0]).max())
        print(f"  {args.devices} devices, halo depth k={k}: {one[1] / wall:.2f}x the wall "
              f"time of one device ({one[1] * 1e3:.1f} ms), kernels {one[2] / kernel_s:.2f}x; "
              f"max |{args.devices} devices - 1 device| = {same:.1e}")
        result.update(one_device_seconds=one[1], one_device_kernel_seconds=one[2],
                      vs_one_device=same, k=k, cuts=cuts)
    print(f"  picture: {png}")
    return result


def run_steps(step: sk.Stencil, u0: np.ndarray, steps: int):
    """``steps`` steps of ``u0`` on the devices in use: (result, wall seconds, kernel seconds
    (on several devices: the busiest device's), the first row of each device's block but the
    first's, the halo depth k (None on one device))."""
    plate = sk.Matrix(u0)
    step(plate, iterations=2)                               # build, tune, spread the plate
    t0 = time.perf_counter()
    out = step(plate, iterations=steps)
    final = out.to_numpy()
    wall = time.perf_counter() - t0
    launch = step.last_launch
    busy: dict = {}                  # kernel seconds per device queue (devices run at once)
    for ev in launch.events:
        q = ev.command_queue.int_ptr
        busy[q] = busy.get(q, 0.0) + (ev.profile.end - ev.profile.start) * 1e-9
    kernel_s = max(busy.values(), default=0.0)
    ndev = len(sk.current_devices())
    cuts = [lo for lo, _hi in sk.Overlap(0).ranges(u0.shape[0], ndev)[1:]] if ndev > 1 else []
    return final, wall, kernel_s, cuts, getattr(launch, "k", None)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
