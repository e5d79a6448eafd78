"""Conway's Game of Life as an iterative skelpy Stencil on a torus (``border="wrap"``).

    python examples/game_of_life.py [--size 256] [--generations 1000] [--frames 40] [--quick]

Every generation is one stencil launch; ``life(grid, iterations=k)`` ping-pongs two device
buffers, so nothing crosses to the host between the frames we save. The result is checked
against a NumPy ``np.roll`` implementation, and the frames are written as PNGs and a GIF to
``examples/output/`` (numba's stencil has no wrap mode; this is what it is for).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import skelpy as sk

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output")


def life(nb):
    """One cell's next state from its 3x3 neighbourhood (B3/S23).

    Written with ``|`` and ``&`` rather than ``or``/``and``: a branch-free muscle lets a CPU
    OpenCL compiler vectorise across work-items (several times faster on PoCL)."""
    n = (nb[-1, -1] + nb[-1, 0] + nb[-1, 1] + nb[0, -1] + nb[0, 1]
         + nb[1, -1] + nb[1, 0] + nb[1, 1])
    return (n == 3) | ((n == 2) & (nb[0, 0] == 1))


def numpy_life(grid: np.ndarray, generations: int) -> np.ndarray:
    """The reference: neighbour counts from np.roll, which wraps around the edges."""
    g = grid.astype(np.uint8)
    for _ in range(generations):
        n = sum(np.roll(np.roll(g, dr, 0), dc, 1)
                for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0))
        g = ((n == 3) | ((n == 2) & (g == 1))).astype(np.uint8)
    return g


def initial_grid(size: int, seed: int) -> np.ndarray:
    """Random soup in the middle plus a few gliders that travel across the wrapped edges."""
    rng = np.random.default_rng(seed)
    g = np.zeros((size, size), np.uint8)
    q = size // 4
    g[q:3 * q, q:3 * q] = rng.random((2 * q, 2 * q)) < 0.3
    glider = np.array([[0, 1, 0], [0, 0, 1], [1, 1, 1]], np.uint8)
    for k in range(4):
        r, c = (k * size) // 4 + 1, size - 6 - k
        g[r:r + 3, c:c + 3] = glider
    return g


def save_frames(frames: list[np.ndarray], out_dir: str, scale: int) -> tuple[str, str | None]:
    """The last frame as a PNG and all frames as an animated GIF (cells scaled up)."""
    os.makedirs(out_dir, exist_ok=True)
    big = [np.kron(f, np.ones((scale, scale), np.uint8)) * 255 for f in frames]
    png = os.path.join(out_dir, "game_of_life.png")
    gif = os.path.join(out_dir, "game_of_life.gif")
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - matplotlib brings Pillow
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        plt.imsave(png, big[-1], cmap="gray")
        return png, None
    Image.fromarray(255 - big[-1]).save(png)
    imgs = [Image.fromarray(255 - b) for b in big]
    imgs[0].save(gif, save_all=True, append_images=imgs[1:], duration=80, loop=0)
    return png, gif


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=256, help="grid is SIZE x SIZE")
    ap.add_argument("--generations", type=int, default=1000)
    ap.add_argument("--frames", type=int, default=40, help="frames in the GIF")
    ap.add_argument("--seed", type=int, default=2016)
    ap.add_argument("--quick", action="store_true", help="small grid, few generations")
    ap.add_argument("--out", default=OUT_DIR, help="folder for the pictures")
    args = ap.parse_args(argv)
    if args.quick:
        args.size, args.generations, args.frames = 96, 120, 12

    dev = sk.current_device()
    step = sk.Stencil(life, shape=1, border="wrap", out_dtype=np.uint8)
    g0 = initial_grid(args.size, args.seed)
    grid = sk.Matrix(g0)
    step(grid)                                    # build and tune once, outside the timing

    per_frame = max(1, args.generations // max(1, args.frames))
    frames = [g0]
    done, kernel_s = 0, 0.0
    t0 = time.perf_counter()
    while done < args.generations:
        k = min(per_frame, args.generations - done)
        grid = step(grid, iterations=k)           # k launches, no host transfer
        kernel_s += step.last_launch.kernel_time
        done += k
        frames.append(grid.to_numpy().copy())     # one download per saved frame
    wall = time.perf_counter() - t0
    final = frames[-1]

    t1 = time.perf_counter()
    want = numpy_life(g0, args.generations)
    numpy_s = time.perf_counter() - t1
    match = bool(np.array_equal(final, want))

    scale = max(1, 512 // args.size)
    png, gif = save_frames(frames, args.out, scale)
    cells = args.size * args.size * args.generations
    print(f"Game of Life {args.size}x{args.size}, {args.generations} generations (wrap borders) "
          f"on {dev.name}:")
    print(f"  skelpy {wall * 1e3:.1f} ms wall incl. {len(frames) - 1} frame downloads, "
          f"kernels {kernel_s * 1e3:.2f} ms ({cells / max(kernel_s, 1e-12) / 1e9:.2f} Gcells/s); "
          f"NumPy np.roll {numpy_s * 1e3:.1f} ms")
    print(f"  launch parameters {step.last_launch.params}; alive cells: {int(final.sum())}")
    print(f"  matches the NumPy np.roll implementation: {match}")
    print(f"  pictures: {png}" + (f", {gif}" if gif else ""))
    return {"match": match, "generations": args.generations, "size": args.size,
            "seconds": wall, "kernel_seconds": kernel_s, "numpy_seconds": numpy_s,
            "png": png, "gif": gif, "alive": int(final.sum())}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
