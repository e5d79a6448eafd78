"""Canny edge detection with skelpy skeletons, compared with ``skimage.feature.canny``.

    python examples/canny.py [--sigma 2.0] [--low 0.1] [--high 0.2] [--quick]

The four stages of seed 002's Canny benchmark, each a skeleton running on the device:

1. **Gaussian** smoothing: two 1-D stencils chained into a ``StencilSequence`` (rows, then
   columns; ``border="constant"``), applied to the image and to a matrix of ones; a ``Zip``
   divides the two, which is skimage's normalisation for the zero border.
2. **Sobel** gradients: two stencils (``border="reflect"``, as ``scipy.ndimage.sobel``) give the
   row and column derivatives, a ``Zip`` the magnitude.
3. **Non-maximum suppression**: a stencil over the magnitude that also reads the two gradient
   matrices at the same cell (extra matrix arguments) and interpolates between neighbours in
   the gradient direction, exactly as skimage does.
4. **Double threshold and hysteresis**: a ``Map`` marks weak (1) and strong (2) pixels, then an
   iterative 3x3 stencil promotes weak pixels touching strong ones until a ``MapReduce`` count
   stops changing - the connected components skimage finds with ``ndi.label``.

Uses scikit-image's bundled ``camera`` photograph; writes PNGs to ``examples/output/`` and prints
the F1 agreement of the two edge maps.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import skelpy as sk

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output")


def gaussian_weights(sigma: float, truncate: float = 4.0) -> np.ndarray:
    """scipy.ndimage's 1-D Gaussian (skimage's default truncate=4)."""
    radius = int(truncate * float(sigma) + 0.5)
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    phi = np.exp(-0.5 / (sigma * sigma) * x * x)
    return (phi / phi.sum()).astype(np.float32)


def make_stages(sigma: float, low: float, high: float):
    g = gaussian_weights(sigma)
    r = len(g) // 2

    def blur_rows(nb):
        acc = np.float32(0)
        for k in range(-r, r + 1):
            acc += g[k + r] * nb[0, k]
        return acc

    def blur_cols(nb):
        acc = np.float32(0)
        for k in range(-r, r + 1):
            acc += g[k + r] * nb[k, 0]
        return acc

    gauss = (sk.Stencil(blur_rows, border="constant", cval=0)
             >> sk.Stencil(blur_cols, border="constant", cval=0))
    normalise = sk.Zip(lambda s, b: s / (b + np.float32(1.1920929e-07)))

    # scipy.ndimage.sobel(axis=0): derivative [-1, 0, 1] down the rows, smoothing [1, 2, 1]
    sobel_i = sk.Stencil(lambda nb: (nb[1, -1] + 2 * nb[1, 0] + nb[1, 1])
                         - (nb[-1, -1] + 2 * nb[-1, 0] + nb[-1, 1]), border="reflect")
    sobel_j = sk.Stencil(lambda nb: (nb[-1, 1] + 2 * nb[0, 1] + nb[1, 1])
                         - (nb[-1, -1] + 2 * nb[0, -1] + nb[1, -1]), border="reflect")
    magnitude = sk.Zip(lambda i, j: np.sqrt(i * i + j * j))

    def nms(m, isob, jsob):
        """skimage's _nonmaximum_suppression_bilinear for one pixel. The border is constant
        -1 (a magnitude is never negative), which is how a pixel knows it lies on the image
        edge, where skimage's eroded mask gives 0."""
        c = m[0, 0]
        gi = isob[0, 0]
        gj = jsob[0, 0]
        edge = (m[-1, 0] < 0) | (m[1, 0] < 0) | (m[0, -1] < 0) | (m[0, 1] < 0)
        ai = abs(gi)
        aj = abs(gj)
        down = gi <= 0
        left = gj <= 0
        cond1 = (not down and not left) or (down and left)
        # four cases: which pair of neighbours brackets the gradient direction
        if cond1:
            if ai > aj:
                w = aj / ai
                n11, n12, n21, n22 = m[1, 0], m[1, 1], m[-1, 0], m[-1, -1]
            else:
                w = ai / aj
                n11, n12, n21, n22 = m[0, 1], m[1, 1], m[0, -1], m[-1, -1]
        else:
            if ai < aj:
                w = ai / aj
                n11, n12, n21, n22 = m[0, 1], m[-1, 1], m[0, -1], m[1, -1]
            else:
                w = aj / ai
                n11, n12, n21, n22 = m[-1, 0], m[-1, 1], m[1, 0], m[1, -1]
        keep = (n12 * w + n11 * (1 - w) <= c) and (n22 * w + n21 * (1 - w) <= c)
        return c if (keep and not edge and c >= low) else np.float32(0)

    suppress = sk.Stencil(nms, shape=1, border="constant", cval=-1)
    threshold = sk.Map(lambda v: np.uint8(2) if v >= high else
                       (np.uint8(1) if v > 0 else np.uint8(0)))

    one, two = np.uint8(1), np.uint8(2)

    def grow(nb):
        """A weak pixel (1) next to a strong one (2) becomes strong. uint8 constants keep the
        comparisons in bytes, and max() keeps the muscle branch-free (it vectorises)."""
        near = max(nb[-1, -1], nb[-1, 0], nb[-1, 1], nb[0, -1], nb[0, 1],
                   nb[1, -1], nb[1, 0], nb[1, 1])
        return nb[0, 0] + ((nb[0, 0] == one) & (near == two))

    hysteresis = sk.Stencil(grow, border="constant", cval=0, out_dtype=np.uint8)
    count_strong = sk.MapReduce(lambda s: s == 2, lambda a, b: a + b, 0, out_dtype=np.int64)
    return dict(gauss=gauss, normalise=normalise, sobel_i=sobel_i, sobel_j=sobel_j,
                magnitude=magnitude, suppress=suppress, threshold=threshold,
                hysteresis=hysteresis, count_strong=count_strong)


def skelpy_canny(img: np.ndarray, sigma: float, low: float, high: float, stages=None,
                 batch: int = 8) -> tuple[np.ndarray, dict]:
    """The edge map (bool) and per-stage kernel seconds."""
    st = stages or make_stages(sigma, low, high)
    times: dict[str, float] = {}
    image = sk.Matrix(img.astype(np.float32))
    ones = sk.Matrix(np.ones(img.shape, np.float32))

    smooth = st["gauss"](image)
    times["gaussian"] = st["gauss"].last_launch.kernel_time
    bleed = st["gauss"](ones)
    times["gaussian"] += st["gauss"].last_launch.kernel_time
    smooth = st["normalise"](smooth, bleed)
    times["gaussian"] += st["normalise"].last_launch.kernel_time

    gi = st["sobel_i"](smooth)
    gj = st["sobel_j"](smooth)
    mag = st["magnitude"](gi, gj)
    times["sobel"] = (st["sobel_i"].last_launch.kernel_time
                      + st["sobel_j"].last_launch.kernel_time
                      + st["magnitude"].last_launch.kernel_time)

    thin = st["suppress"](mag, gi, gj)
    times["nms"] = st["suppress"].last_launch.kernel_time

    state = st["threshold"](thin)
    times["hysteresis"] = st["threshold"].last_launch.kernel_time
    strong = st["count_strong"](state)
    rounds = 0
    while True:
        state = st["hysteresis"](state, iterations=batch)
        times["hysteresis"] += st["hysteresis"].last_launch.kernel_time
        rounds += batch
        now = st["count_strong"](state)
        if now == strong:
            break
        strong = now
    times["hysteresis_iterations"] = rounds
    return state.to_numpy() == 2, {"smoothed": smooth, "magnitude": mag, "times": times}


def f1_score(got: np.ndarray, want: np.ndarray) -> float:
    tp = int(np.sum(got & want))
    fp = int(np.sum(got & ~want))
    fn = int(np.sum(~got & want))
    return 1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def save_pictures(out_dir: str, pictures: dict[str, np.ndarray]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, img in pictures.items():
        path = os.path.join(out_dir, f"canny_{name}.png")
        if img.ndim == 3:
            plt.imsave(path, img)
        else:
            plt.imsave(path, img, cmap="gray")
        paths.append(path)
    return paths


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sigma", type=float, default=2.0)
    ap.add_argument("--low", type=float, default=0.1, help="low threshold (image in [0, 1])")
    ap.add_argument("--high", type=float, default=0.2, help="high threshold")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs (best is reported)")
    ap.add_argument("--quick", action="store_true", help="one timed run")
    ap.add_argument("--out", default=OUT_DIR, help="folder for the pictures")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeat = 1

    from skimage import data
    from skimage.feature import canny

    img = data.camera().astype(np.float64) / 255.0
    dev = sk.current_device()
    stages = make_stages(args.sigma, args.low, args.high)
    edges, extra = skelpy_canny(img, args.sigma, args.low, args.high, stages)  # build + tune
    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        edges, extra = skelpy_canny(img, args.sigma, args.low, args.high, stages)
        best = min(best, time.perf_counter() - t0)

    t0 = time.perf_counter()
    ref = canny(img, sigma=args.sigma, low_threshold=args.low, high_threshold=args.high)
    sk_time = time.perf_counter() - t0
    f1 = f1_score(edges, ref)

    overlay = np.zeros(img.shape + (3,), np.float32)
    overlay[..., 1] = edges & ref          # green: both
    overlay[..., 0] = edges & ~ref         # red: only skelpy
    overlay[..., 2] = ~edges & ref         # blue: only skimage
    paths = save_pictures(args.out, {
        "input": img, "smoothed": extra["smoothed"].to_numpy(),
        "magnitude": extra["magnitude"].to_numpy(), "edges": edges.astype(np.float32),
        "skimage": ref.astype(np.float32), "agreement": overlay})

    t = extra["times"]
    kernels = sum(v for k, v in t.items() if k != "hysteresis_iterations")
    print(f"Canny on camera {img.shape[1]}x{img.shape[0]}, sigma={args.sigma}, thresholds "
          f"{args.low}/{args.high}, on {dev.name}:")
    print(f"  skelpy {best * 1e3:.1f} ms end to end (kernels {kernels * 1e3:.2f} ms: gaussian "
          f"{t['gaussian'] * 1e3:.2f}, sobel {t['sobel'] * 1e3:.2f}, nms {t['nms'] * 1e3:.2f}, "
          f"hysteresis {t['hysteresis'] * 1e3:.2f} over {t['hysteresis_iterations']} "
          f"iterations); skimage.feature.canny {sk_time * 1e3:.1f} ms")
    print(f"  edge pixels: skelpy {int(edges.sum())}, skimage {int(ref.sum())}; "
          f"F1 agreement {f1:.4f} (target >= 0.9)")
    print(f"  pictures: {os.path.join(args.out, 'canny_*.png')}")
    return {"f1": f1, "seconds": best, "skimage_seconds": sk_time, "kernel_seconds": kernels,
            "edges": int(edges.sum()), "skimage_edges": int(ref.sum()), "pngs": paths}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
