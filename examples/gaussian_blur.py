"""Gaussian blur of radius 1 to 10 as one 2-D skelpy Stencil, checked against SciPy.

    python examples/gaussian_blur.py [--radii 1-10] [--size 1024] [--border reflect] [--quick]

For each radius r the muscle sums (2r+1)^2 weighted neighbours (seed 002's Gaussian benchmark
is this 2-D form); the shape is inferred from the loop bounds. The result is compared with
``scipy.ndimage.correlate`` with the same 2-D weights and with ``scipy.ndimage.gaussian_filter``
(separable, sigma = r/2, truncate = 2), and both are timed. Writes PNGs of the blurred camera
photograph to ``examples/output/``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import scipy.ndimage as ndi

import skelpy as sk

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output")


def kernel_1d(radius: int) -> np.ndarray:
    """scipy.ndimage's Gaussian of sigma = radius / 2 truncated at 2 sigma (float64)."""
    sigma = radius / 2.0
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    phi = np.exp(-0.5 / (sigma * sigma) * x * x)
    return phi / phi.sum()


def blur_stencil(radius: int, border: str) -> sk.Stencil:
    """A 2-D Gaussian stencil; the weights are captured constants of the muscle."""
    g = kernel_1d(radius).astype(np.float32)
    r = radius

    def gauss(nb):
        acc = np.float32(0)
        for dr in range(-r, r + 1):
            row = np.float32(0)
            for dc in range(-r, r + 1):
                row += g[dc + r] * nb[dr, dc]
            acc += g[dr + r] * row
        return acc

    return sk.Stencil(gauss, border=border)


def parse_radii(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--radii", default="1-10", help="e.g. 1-10 or 1,3,5")
    ap.add_argument("--size", type=int, default=1024, help="image is SIZE x SIZE")
    ap.add_argument("--border", default="reflect",
                    choices=["constant", "nearest", "wrap", "reflect", "mirror"])
    ap.add_argument("--quick", action="store_true", help="radii 1, 4, 10 on a 256x256 image")
    ap.add_argument("--out", default=OUT_DIR, help="folder for the pictures")
    args = ap.parse_args(argv)
    radii = [1, 4, 10] if args.quick else parse_radii(args.radii)
    size = 256 if args.quick else args.size

    from skimage import data, transform

    cam = data.camera().astype(np.float64) / 255.0
    img64 = transform.resize(cam, (size, size), anti_aliasing=True) if size != 512 else cam
    img = img64.astype(np.float32)
    m = sk.Matrix(img)
    dev = sk.current_device()
    print(f"Gaussian blur of a {size}x{size} image, border={args.border!r}, on {dev.name}:")
    print(f"{'radius':>6} {'taps':>5} {'skelpy ms':>10} {'correlate ms':>13} "
          f"{'gaussian_filter ms':>19} {'max |err|':>10}")
    rows, blurred = [], {}
    for r in radii:
        st = blur_stencil(r, args.border)
        st(m)                                               # build and tune
        best = float("inf")
        for _ in range(3):
            out = st(m)
            best = min(best, st.last_launch.kernel_time)
        got = out.to_numpy()
        g = kernel_1d(r)
        t0 = time.perf_counter()
        ref2d = ndi.correlate(img64, np.outer(g, g), mode=args.border)
        corr_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        ref = ndi.gaussian_filter(img64, sigma=r / 2.0, mode=args.border, truncate=2.0)
        gf_s = time.perf_counter() - t0
        err = float(max(np.abs(got - ref).max(), np.abs(got - ref2d).max()))
        rows.append({"radius": r, "skelpy_s": best, "correlate_s": corr_s,
                     "gaussian_filter_s": gf_s, "max_err": err, "params": st.last_launch.params})
        blurred[r] = got
        print(f"{r:>6} {(2 * r + 1) ** 2:>5} {best * 1e3:>10.2f} {corr_s * 1e3:>13.2f} "
              f"{gf_s * 1e3:>19.2f} {err:>10.2e}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(args.out, exist_ok=True)
    shown = [r for r in radii if r in (radii[0], radii[len(radii) // 2], radii[-1])]
    fig, axes = plt.subplots(1, len(shown) + 1, figsize=(4 * (len(shown) + 1), 4.2))
    axes[0].imshow(img, cmap="gray")
    axes[0].set_title("input")
    for ax, r in zip(axes[1:], shown):
        ax.imshow(blurred[r], cmap="gray")
        ax.set_title(f"skelpy Stencil, radius {r}")
    for ax in axes:
        ax.axis("off")
    png = os.path.join(args.out, "gaussian_blur.png")
    fig.tight_layout()
    fig.savefig(png, dpi=80)
    plt.close(fig)
    worst = max(r["max_err"] for r in rows)
    print(f"  largest difference from SciPy: {worst:.2e} (float32 vs float64); picture: {png}")
    return {"rows": rows, "max_err": worst, "png": png}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
