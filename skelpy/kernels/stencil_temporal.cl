/* Temporal blocking for an iterated stencil: one pass advances SKP_TB_T time steps, so every
 * cell is read from and written to global memory once per SKP_TB_T steps instead of once per
 * step.  stencil_common.cl (border rule, read macros) and the muscle come first.
 *
 * Layout (after AN5D's register streaming, Matsumura et al., CGO 2020):
 *   - A work-group holds get_local_size(1) independent *streams*; a stream is a row of
 *     get_local_size(0) work-items, each owning SKP_TB_CC columns (interleaved, so loads and
 *     stores stay coalesced).  A stream walks down the rows of its chunk ("stream division":
 *     many chunks give a large GPU enough work-groups) and covers a tile of
 *     nx = get_local_size(0) * SKP_TB_CC columns, of which the middle `wout` are output: the
 *     rest is the overlap each intermediate step consumes (SKP_TB_GW left and SKP_TB_GE
 *     right per step), computed redundantly by neighbouring tiles.
 *   - Per step of the walk, stage 0 loads one new input row and every stage s < T hands the
 *     row it computed in the previous step to its neighbours through local memory; one
 *     barrier; then stage s + 1 computes one row from stage s's rows.  Stage s + 1 lags stage
 *     s by SKP_TB_HS + 1 rows, so one barrier per step serves all stages (two local planes per
 *     stage, used alternately, make that safe).  Stage T is stored.
 *   - SKP_TB_RING 0: each work-item keeps the last SKP_TB_HR rows of every stage in registers
 *     (a private array indexed by constants after unrolling), its own column and the
 *     neighbour columns the muscle reads, copied from local memory once per row.
 *     SKP_TB_RING 1: local memory keeps a ring of SKP_TB_HR + 1 rows per stage and the muscle's
 *     window is read from it where it is used (fewer registers, more local reads).
 *   - The muscle is the single-step kernel's muscle, called on a private window of the cell's
 *     neighbourhood; every intermediate value is rounded to the storage type as a store would
 *     round it, so the results equal SKP_TB_T single steps bit for bit.
 *
 * Borders, per intermediate step (as the single-step kernel applies them to each step):
 *   constant  cells outside the matrix hold the constant at every stage;
 *   wrap      the stream computes the periodic continuation (loads and extras taken modulo
 *             the matrix), which is exact;
 *   nearest, reflect, mirror: a read outside the matrix is redirected to the in-matrix cell of
 *             the SAME stage: columns through the neighbour indices (xo below), rows near the
 *             top and bottom through the registers/ring rows (the window reaches SKP_TB_HN
 *             rows up and SKP_TB_HS down, symmetric for these modes, so the target is held).
 *
 * Generated macros (skeletons/stencil_temporal.py): SKP_ST (storage type of the cells, input
 * and output), SKP_N/S/E/W (the muscle's reach), SKP_MODE, SKP_IDX_T, SKP_DR/SKP_DC, the
 * SKP_CVAL_* constants, SKP_TB_HN/HS (rows held above/below), SKP_TB_GW/GE (overlap columns
 * per step), SKP_TB_USE(i, j) (1 if the muscle reads window row i, column j),
 * SKP_TB_UCOL(j) (1 if any row reads column j), SKP_TB_EXTRA_DECL and SKP_TB_CALL (the muscle
 * call, in terms of skp_win, skp_idx, skp_gr, skp_gc, rows, cols).
 * Launch macros: SKP_TB_T (steps per pass), SKP_TB_CC, SKP_TB_RING, SKP_TB_UNROLL (1: the
 * walk unrolled by the rotation period).
 */

#ifndef SKP_TB_T
#define SKP_TB_T 2
#endif
#ifndef SKP_TB_CC
#define SKP_TB_CC 1
#endif
#ifndef SKP_TB_RING
#define SKP_TB_RING 0
#endif
#ifndef SKP_TB_UNROLL
#define SKP_TB_UNROLL 0
#endif

#define SKP_TB_HR (SKP_TB_HN + SKP_TB_HS + 1)   /* rows of a stage held */
#define SKP_TB_MR (SKP_N + SKP_S + 1)           /* rows of the muscle's window */
#define SKP_TB_WC (SKP_W + SKP_E + 1)           /* columns of the muscle's window */
#define SKP_TB_P (SKP_TB_HR + 1)                /* ring slots per stage */
#define SKP_TB_LAG (SKP_TB_HS + 1)              /* steps stage s + 1 lags stage s */
#if !SKP_TB_UNROLL
#define SKP_TB_U 1                              /* steps per round of the walk */
#elif SKP_TB_RING
#define SKP_TB_U SKP_TB_P
#else
#define SKP_TB_U SKP_TB_HR
#endif

#if SKP_MODE == SKP_MODE_CONSTANT
/* any cell of the matrix (the value is replaced by the constant) */
#define SKP_TB_GRID(x, n) clamp((x), 0, (n) - 1)
#else
#define SKP_TB_GRID(x, n) skp_remap((x), (n))
#endif
#define SKP_TB_REDIRECT (SKP_MODE == SKP_MODE_NEAREST || SKP_MODE == SKP_MODE_REFLECT \
                         || SKP_MODE == SKP_MODE_MIRROR)

#if SKP_TB_RING
/* local row of stage s holding the row exchanged at walk step e (plane = s * P + e mod P) */
#define SKP_TB_PLANE(s, slot) ((s) * SKP_TB_P + (slot))
#else
#define SKP_TB_PLANE(s, par) ((par) * SKP_TB_T + (s))
#endif
#define SKP_TB_ROW(plane) (lds + ((plane) * nstr + ls) * nx)

/* Stage 0: the input row `row` of this work-item's columns into dst[]. */
#define SKP_TB_LOAD(dst, row)                                                              \
    {                                                                                      \
        const int skp_lr = (row);                                                          \
        const int skp_g = SKP_TB_GRID(skp_lr, rows);                                       \
        const bool skp_rin = (uint)skp_lr < (uint)rows;                                    \
        _Pragma("unroll")                                                                  \
        for (int m = 0; m < SKP_TB_CC; ++m) {                                              \
            const SKP_ST skp_v = in[(SKP_IDX_T)skp_g * cols + gcol[m]];                    \
            dst[m] = (SKP_MODE == SKP_MODE_CONSTANT && !(skp_rin && incol[m]))             \
                         ? SKP_CVAL_IN : skp_v;                                            \
        }                                                                                  \
    }

__kernel void skelpy_stencil_temporal(__global SKP_ST* restrict out,
                                      __global const SKP_ST* restrict in,
                                      const int rows, const int cols,
                                      const int chunk, const int wout,
                                      __local SKP_ST* restrict lds
                                      SKP_TB_EXTRA_DECL)
{
    const int lc = (int)get_local_id(0), ls = (int)get_local_id(1);
    const int nxw = (int)get_local_size(0), nstr = (int)get_local_size(1);
    const int nx = nxw * SKP_TB_CC;
    const int c0 = (int)get_group_id(0) * wout;            /* first output column */
    const int cbase = c0 - SKP_TB_T * SKP_TB_GW;           /* column of local index 0 */
    const int r0 = ((int)get_group_id(1) * nstr + ls) * chunk;   /* first output row */
    const int base = r0 - SKP_TB_T * SKP_TB_HN;            /* row loaded at step 0 */
    const int nsteps = chunk + SKP_TB_T * SKP_TB_LAG + SKP_TB_T * SKP_TB_HN - 1;

    /* Per column: the matrix column loads and extras use, whether it lies in the matrix,
     * whether this tile outputs it, and the local index of each neighbour column the muscle
     * reads (redirected into the matrix for nearest/reflect/mirror). */
    int gcol[SKP_TB_CC];
    bool incol[SKP_TB_CC], outcol[SKP_TB_CC];
    int xo[SKP_TB_CC][SKP_TB_WC];
#pragma unroll
    for (int m = 0; m < SKP_TB_CC; ++m) {
        const int li = m * nxw + lc;
        const int c = cbase + li;
        gcol[m] = SKP_TB_GRID(c, cols);
        incol[m] = (uint)c < (uint)cols;
        outcol[m] = c >= c0 && c < c0 + wout && c < cols;
#pragma unroll
        for (int j = 0; j < SKP_TB_WC; ++j) {
            int x = c + j - SKP_W;
#if SKP_TB_REDIRECT
            if ((uint)x >= (uint)cols)
                x = skp_remap(x, cols);
#endif
            xo[m][j] = clamp(x - cbase, 0, nx - 1);
        }
    }

    SKP_ST cur[SKP_TB_T][SKP_TB_CC];     /* newest row of each stage, to be exchanged */
    SKP_ST nxt[SKP_TB_CC];               /* the next input row (loaded one step ahead) */
#pragma unroll
    for (int s = 0; s < SKP_TB_T; ++s)
#pragma unroll
        for (int m = 0; m < SKP_TB_CC; ++m)
            cur[s][m] = (SKP_ST)0;
#if !SKP_TB_RING
    SKP_ST hist[SKP_TB_T][SKP_TB_CC][SKP_TB_HR][SKP_TB_WC];
#pragma unroll
    for (int s = 0; s < SKP_TB_T; ++s)
#pragma unroll
        for (int m = 0; m < SKP_TB_CC; ++m)
#pragma unroll
            for (int k = 0; k < SKP_TB_HR; ++k)
#pragma unroll
                for (int j = 0; j < SKP_TB_WC; ++j)
                    hist[s][m][k][j] = (SKP_ST)0;
#endif
    SKP_TB_LOAD(nxt, base)

    /* The walk, SKP_TB_U steps per round: unrolled by the rotation period, the shifts of the
     * held rows become register renaming and the ring's slot numbers constants.  The steps
     * of the last round past nsteps store nothing (rows past the chunk) and read in bounds. */
#if SKP_TB_U > 1
    for (int i0 = 0; i0 < nsteps; i0 += SKP_TB_U)
#pragma unroll
    for (int ku = 0; ku < SKP_TB_U; ++ku) {
        const int i = i0 + ku;
#else
    for (int i = 0; i < nsteps; ++i) {
        const int ku = 0;
#endif
#pragma unroll
        for (int m = 0; m < SKP_TB_CC; ++m)
            cur[0][m] = nxt[m];
#if SKP_TB_RING
        const int slot = SKP_TB_U == SKP_TB_P ? ku : i % SKP_TB_P;
#define SKP_TB_MINE slot
#else
        const int par = i & 1;
#define SKP_TB_MINE par
#endif
        /* publish every stage's newest row */
#pragma unroll
        for (int s = 0; s < SKP_TB_T; ++s) {
            __local SKP_ST* const dst = SKP_TB_ROW(SKP_TB_PLANE(s, SKP_TB_MINE));
#pragma unroll
            for (int m = 0; m < SKP_TB_CC; ++m)
                dst[m * nxw + lc] = cur[s][m];
        }
        if (i + 1 < nsteps)
            SKP_TB_LOAD(nxt, base + i + 1)
        barrier(CLK_LOCAL_MEM_FENCE);

#if !SKP_TB_RING
        /* take in the rows just exchanged: own column from registers, the others from
         * local memory */
#pragma unroll
        for (int s = 0; s < SKP_TB_T; ++s) {
            __local const SKP_ST* const src = SKP_TB_ROW(SKP_TB_PLANE(s, par));
#pragma unroll
            for (int m = 0; m < SKP_TB_CC; ++m) {
#pragma unroll
                for (int k = 0; k + 1 < SKP_TB_HR; ++k)
#pragma unroll
                    for (int j = 0; j < SKP_TB_WC; ++j)
                        if (SKP_TB_UCOL(j))
                            hist[s][m][k][j] = hist[s][m][k + 1][j];
#pragma unroll
                for (int j = 0; j < SKP_TB_WC; ++j)
                    if (SKP_TB_UCOL(j))
                        hist[s][m][SKP_TB_HR - 1][j] =
                            j == SKP_W ? cur[s][m] : src[xo[m][j]];
            }
        }
#endif

        /* stage s + 1 computes row jr from stage s's rows jr - N .. jr + S */
#pragma unroll
        for (int s = 0; s < SKP_TB_T; ++s) {
            const int a = base + i - s * SKP_TB_LAG;     /* stage s's row exchanged now */
            const int jr = a - SKP_TB_HS;
            const bool rin = (uint)jr < (uint)rows;
            const int skp_gr = SKP_TB_GRID(jr, rows);
#if SKP_TB_REDIRECT
            /* rows of the window outside the matrix come from rows of the same stage */
            const bool redge = rin && (jr < SKP_N || jr + SKP_S >= rows);
#else
            const bool redge = false;
#endif
#pragma unroll
            for (int m = 0; m < SKP_TB_CC; ++m) {
                SKP_ST skp_win[SKP_TB_MR * SKP_TB_WC];
#if SKP_TB_RING
#pragma unroll
                for (int r = 0; r < SKP_TB_MR; ++r) {
                    /* steps since the window's row r was exchanged */
                    int back = SKP_TB_HS + SKP_N - r;
                    if (redge)
                        back = clamp(a - skp_remap(jr + r - SKP_N, rows), 0, SKP_TB_HR - 1);
                    int sl = slot - back;
                    sl = sl < 0 ? sl + SKP_TB_P : sl;
                    __local const SKP_ST* const src = SKP_TB_ROW(SKP_TB_PLANE(s, sl));
#pragma unroll
                    for (int j = 0; j < SKP_TB_WC; ++j)
                        if (SKP_TB_USE(r, j))
                            skp_win[r * SKP_TB_WC + j] = src[xo[m][j]];
                }
#else
                if (redge) {
#pragma unroll
                    for (int r = 0; r < SKP_TB_MR; ++r) {
                        const int k = SKP_TB_HR - 1 - (a - skp_remap(jr + r - SKP_N, rows));
#pragma unroll
                        for (int j = 0; j < SKP_TB_WC; ++j)
                            if (SKP_TB_USE(r, j)) {
                                SKP_ST x = hist[s][m][0][j];
#pragma unroll
                                for (int kk = 1; kk < SKP_TB_HR; ++kk)
                                    x = kk == k ? hist[s][m][kk][j] : x;
                                skp_win[r * SKP_TB_WC + j] = x;
                            }
                    }
                } else {
#pragma unroll
                    for (int r = 0; r < SKP_TB_MR; ++r)
#pragma unroll
                        for (int j = 0; j < SKP_TB_WC; ++j)
                            if (SKP_TB_USE(r, j))
                                skp_win[r * SKP_TB_WC + j] =
                                    hist[s][m][SKP_TB_HN - SKP_N + r][j];
                }
#endif
                const int skp_gc = gcol[m];
                const SKP_IDX_T skp_idx = (SKP_IDX_T)skp_gr * cols + skp_gc;
                SKP_ST v = (SKP_ST)(SKP_TB_CALL(s));
#if SKP_MODE == SKP_MODE_CONSTANT
                v = (rin && incol[m]) ? v : SKP_CVAL_IN;
#endif
                if (s + 1 < SKP_TB_T)
                    cur[s + 1 < SKP_TB_T ? s + 1 : 0][m] = v;
                else if (outcol[m] && rin && jr >= r0 && jr < r0 + chunk)
                    out[skp_idx] = v;
            }
        }
    }
}
