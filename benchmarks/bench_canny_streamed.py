"""A hand-written streamed Canny against skelpy's staged sequence: the ceiling of fusing it.

The pipeline is ``bench_stencil``'s Canny without the threshold (5x5 Gaussian with ``reflect``,
Sobel magnitude with ``reflect``, non-maximum suppression with ``constant`` 0, all float32).
The hand kernel does in one pass what a fused schedule at its best would: work-groups of WG
columns walk down strips of RS rows; each input row's Gaussian row sums are computed once and
kept in registers for the five output rows that use them (Sobel's row terms likewise), three
local-memory rows per level, three barriers per row. It applies the border rule to the input
only (a true fusion applies each stage's rule to that stage's values), so it is compared with
the staged result away from the borders, where both must agree bit for bit (FP_CONTRACT off,
the muscles' operation order).

    python -m benchmarks.bench_canny_streamed [--size 4096] [--reps 15]

On the H200 (ninth session): staged 147.8 us, the best hand point 171.4 us (0.86x): one kernel
with per-row barriers loses to three bandwidth-bound stages even with the vertical sharing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl

import skelpy as sk
from benchmarks.bench_stencil import G5, gauss5, nms, sobel_mag
from benchmarks.common import print_table, time_events, write_json
from skelpy import runtime

SOURCE = r"""
#pragma OPENCL FP_CONTRACT OFF
#define G0 %(g0)s
#define G1 %(g1)s
#define G2 %(g2)s
#define G3 %(g3)s
#define G4 %(g4)s
inline int refl(int x, int n) { x = x < 0 ? -x - 1 : x; return x >= n ? 2 * n - 1 - x : x; }
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void canny(__global const float* restrict in, __global float* restrict out, const int rows, const int cols)
{
    __local float xs[WG], gs[3][WG], ms[3][WG];
    const int i = get_local_id(0);
    const int c0 = get_group_id(0) * (WG - 8) - 4;       /* column of item 0 */
    const int r0 = get_group_id(1) * RS;                 /* first output row */
    const int c = c0 + i, cr = refl(c, cols);
    float H0 = 0, H1 = 0, H2 = 0, H3 = 0, H4 = 0;        /* h rows ri-4 .. ri */
    float S0 = 0, S1 = 0, S2 = 0;                          /* S of g rows */
    for (int s = 0; s < RS + 8; ++s) {
        const int ri = r0 - 4 + s;
        xs[i] = in[(size_t)refl(ri, rows) * cols + cr];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (i >= 2 && i < WG - 2) {
            float h = 0.0f;
            h = h + G0 * xs[i - 2]; h = h + G1 * xs[i - 1]; h = h + G2 * xs[i];
            h = h + G3 * xs[i + 1]; h = h + G4 * xs[i + 2];
            H0 = H1; H1 = H2; H2 = H3; H3 = H4; H4 = h;
            float g = 0.0f;
            g = g + G0 * H0; g = g + G1 * H1; g = g + G2 * H2; g = g + G3 * H3; g = g + G4 * H4;
            gs[s %% 3][i] = g;                            /* g row ri - 2 */
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (s >= 6 && i >= 3 && i < WG - 3) {            /* m row ri - 3 from g rows ri-4..ri-2 */
            const int k2 = s %% 3, k1 = (s + 2) %% 3, k0 = (s + 1) %% 3;
            const float S = (gs[k2][i - 1] + 2.0f * gs[k2][i]) + gs[k2][i + 1];
            S0 = S1; S1 = S2; S2 = S;
            const float gi = S2 - S0;
            const float gj = ((gs[k0][i + 1] + 2.0f * gs[k1][i + 1]) + gs[k2][i + 1])
                           - ((gs[k0][i - 1] + 2.0f * gs[k1][i - 1]) + gs[k2][i - 1]);
            ms[s %% 3][i] = sqrt(gi * gi + gj * gj);
        } else if (i >= 3 && i < WG - 3 && s >= 4) {
            const int k2 = s %% 3;
            const float S = (gs[k2][i - 1] + 2.0f * gs[k2][i]) + gs[k2][i + 1];
            S0 = S1; S1 = S2; S2 = S;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (s >= 8 && i >= 4 && i < WG - 4) {            /* out row ri - 4 from m rows ri-5..ri-3 */
            const int ro = ri - 4;
            const int k2 = s %% 3, k1 = (s + 2) %% 3, k0 = (s + 1) %% 3;
            const float cc = ms[k1][i];
            const float di = ms[k2][i] - ms[k0][i];
            const float dj = ms[k1][i + 1] - ms[k1][i - 1];
            const float ai = fabs(di), aj = fabs(dj);
            const bool diag = (ai > 0.4142f * aj) & (aj > 0.4142f * ai);
            const bool same = (di > 0.0f) == (dj > 0.0f);
            const float a1 = same ? ms[k2][i + 1] : ms[k2][i - 1];
            const float a2 = same ? ms[k0][i - 1] : ms[k0][i + 1];
            const float b1 = ai >= aj ? ms[k2][i] : ms[k1][i + 1];
            const float b2 = ai >= aj ? ms[k0][i] : ms[k1][i - 1];
            const float n1 = diag ? a1 : b1, n2 = diag ? a2 : b2;
            if (ro < rows && c >= 0 && c < cols && ro >= r0)
                out[(size_t)ro * cols + c] = ((cc >= n1) & (cc >= n2)) ? cc : 0.0f;
        }
    }
}
"""


def kernel_source() -> str:
    """The kernel with the Gaussian's weights written as exact float32 literals."""
    g = G5.astype(np.float32)
    return SOURCE % {f"g{k}": np.format_float_positional(g[k], unique=True) + "f"
                     for k in range(5)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=None)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    rt = runtime.current()
    dev = sk.current_device()
    n = args.size or (4096 if dev.kind == "gpu" else 512)
    ctx, q = rt.context, rt.queue
    img = np.random.default_rng(0).random((n, n), dtype=np.float32)
    m = sk.Matrix(img)
    stages = [sk.Stencil(gauss5, border="reflect"), sk.Stencil(sobel_mag, border="reflect"),
              sk.Stencil(nms, border="constant", cval=0)]
    seq = stages[0] >> stages[1] >> stages[2]
    ref = seq(m, params={"fuse": 0}).to_numpy()

    def events(skeleton, **options):
        """Run one call of ``skeleton`` on ``m``; its kernels' events (for time_events)."""
        def run():
            skeleton(m, **options)
            return skeleton.last_launch.events
        return run

    rows = [{"run": "staged",
             "us": time_events(events(seq, params={"fuse": 0}), reps=args.reps, warmup=1) * 1e6}]
    for name, st in zip(("gauss5", "sobel_mag", "nms"), stages):
        rows.append({"run": f"  stage {name}",
                     "us": time_events(events(st), reps=args.reps, warmup=1) * 1e6})
    t_staged = rows[0]["us"]
    a = cl.Buffer(ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=img)
    o = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, img.nbytes)
    src = kernel_source()
    inner = (slice(8, -8), slice(8, -8))
    ok = True
    for wg in (64, 128, 256):
        for rs in (16, 32, 64, 128):
            k = cl.Program(ctx, src).build(options=[f"-DWG={wg}", f"-DRS={rs}"]).canny
            gsize = (-(-n // (wg - 8)) * wg, -(-n // rs))

            t = time_events(lambda k=k, gsize=gsize, wg=wg: k(q, gsize, (wg, 1), a, o,
                                                              np.int32(n), np.int32(n)),
                            reps=args.reps, warmup=1) * 1e6
            got = np.empty_like(img)
            cl.enqueue_copy(q, got, o)
            equal = bool(np.array_equal(got[inner], ref[inner]))
            ok &= equal
            rows.append({"run": f"hand streamed WG={wg} RS={rs}", "us": t,
                         "vs staged": t_staged / t, "interior equal": equal})
    print_table([{k: (f"{v:.2f}" if isinstance(v, float) else v) for k, v in r.items()}
                 for r in rows], ["run", "us", "vs staged", "interior equal"],
                title=f"Hand-written streamed Canny vs staged on {dev.name}, {n}^2")
    data = {"size": n, "reps": args.reps, "rows": rows, "interior_equal": ok,
            "best_vs_staged": max(r.get("vs staged", 0.0) for r in rows)}
    path = write_json("canny-streamed", dev.name, data,
                      directory=None if args.out is None else Path(args.out))
    print(f"results: {path}")
    return data


if __name__ == "__main__":
    sys.exit(0 if main()["interior_equal"] else 1)
