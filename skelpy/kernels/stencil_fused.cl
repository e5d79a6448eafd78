/* A fused StencilSequence: the K stages of `a >> b >> ...` in one kernel (Halide's compute_at
 * at the tile).  The generated header, stencil_border.cl and stencil_stream_common.cl (the
 * per-mode border rule skp_tb_remap and SKP_TB_AROUND), stencil_fused_common.cl (launch macros, SKP_FU_READ_EDGE)
 * and the stage muscles come first.
 *
 * A work-group of SKP_FU_WC x SKP_FU_WR work-items outputs a tile of SKP_FU_TH x SKP_FU_TW
 * cells.  Level 0 is the input, level k + 1 what stage k computes from level k; level K is the
 * output.  Level k is held in local memory over the tile grown by the halos of the stages
 * after it (the "region" of the level: SKP_FU_RR<k> x SKP_FU_RC<k> cells whose first cell is
 * the matrix cell (r0 - SKP_FU_HN<k>, c0 - SKP_FU_GW<k>)); each stage computes its whole
 * region from the one before, one barrier per stage, and the last stage writes the tile.
 * Every level has its own storage type, so a stage may change the dtype (float -> uint8).
 *
 * Borders.  The result equals the stages run one by one, bit for bit: each stage reads the
 * level before it with its own border rule, exactly as its single-step kernel reads its input.
 *   - An *interior* tile (level 0's region inside the matrix, uniform per group) reads every
 *     level directly.
 *   - An edge tile computes only the cells of each region that lie in the matrix, and a stage
 *     reads through its rule: constant gives the stage's constant, nearest/reflect/mirror read
 *     the in-matrix cell the rule names.  That cell is in the region: a stage with these modes
 *     grows the region by its largest reach on both sides, and a tile is at least as large as
 *     the summed halo (skeletons/stencil_fused.py checks both).
 *   - Wrap (every stage wrap, else the sequence is not fused): every cell of every region is
 *     computed, as the periodic continuation (loads and extras taken modulo the matrix),
 *     which is exact.
 *
 * Generated macros (skeletons/stencil_fused.py): SKP_FU_K, SKP_FU_IN_ST, SKP_FU_OUT_ST,
 * SKP_IDX_T, SKP_FU_WRAPALL, SKP_FU_HN<k>, SKP_FU_HS<k>, SKP_FU_GW<k>, SKP_FU_GE<k> (the halo
 * of level k, 0 <= k <= K; zero for level K), SKP_FU_EXTRA_DECL, SKP_FU_LOCALS (the local
 * arrays of levels 0 .. K-1), SKP_FU_STAGES (the stage blocks, in order).
 * Launch macros: SKP_FU_WC, SKP_FU_WR (the work-group), SKP_FU_CR, SKP_FU_CC (cells per
 * work-item along rows and columns of the tile).
 */

/* The cells (t, u) of a RR_ x RC_ region, spread over the work-group.  SKP_FU_FLAT 0: work-item
 * (lr, lc) takes the rows lr + i * WR and the columns lc + j * WC.  1: the cells numbered row
 * by row are dealt out in turn (every work-item busy, consecutive work-items on consecutive
 * cells: coalesced loads and stores).  2: as 1 with runs of SKP_FU_CR cells down a column
 * per work-item, unrolled, so that the windows of consecutive rows share their reads of the
 * level before (a 5x5 stencil reads 10 instead of 25 cells per output at SKP_FU_CR 4). */
#if SKP_FU_FLAT == 2
#define SKP_FU_CELLS(RR_, RC_)                                                               \
    for (int skp_q = lr * SKP_FU_WC + lc;                                                    \
         skp_q < ((RR_) + SKP_FU_CR - 1) / SKP_FU_CR * (RC_);                                \
         skp_q += SKP_FU_WC * SKP_FU_WR) {                                                   \
        const int skp_t0 = skp_q / (RC_) * SKP_FU_CR, u = skp_q - skp_q / (RC_) * (RC_);     \
        _Pragma("unroll")                                                                    \
        for (int skp_i = 0; skp_i < SKP_FU_CR; ++skp_i) {                                    \
            const int t = skp_t0 + skp_i;                                                    \
            if (t < (RR_)) {
#define SKP_FU_END_CELLS }}}
#elif SKP_FU_FLAT == 1
#define SKP_FU_CELLS(RR_, RC_)                                                               \
    for (int skp_q = lr * SKP_FU_WC + lc; skp_q < (RR_) * (RC_);                             \
         skp_q += SKP_FU_WC * SKP_FU_WR) {                                                   \
        const int t = skp_q / (RC_), u = skp_q - skp_q / (RC_) * (RC_);                      \
        {
#define SKP_FU_END_CELLS }}
#else
#define SKP_FU_CELLS(RR_, RC_)                                                               \
    for (int t = lr; t < (RR_); t += SKP_FU_WR) {                                            \
        for (int u = lc; u < (RC_); u += SKP_FU_WC) {
#define SKP_FU_END_CELLS }}
#endif

#if SKP_FU_WRAPALL
#define SKP_FU_GRID(x, n) skp_tb_remap((x), (n), SKP_TB_WRAP)
#else
#define SKP_FU_GRID(x, n) (x)
#endif

/* Stage k's reach as the regions hold it: rows north and south, columns west and east of a
 * level k + 1 cell that its level k region holds (at least the stage's own reach). */
#define SKP_FU_DN(k, k1) (SKP_FU_CAT(SKP_FU_HN, k) - SKP_FU_CAT(SKP_FU_HN, k1))
#define SKP_FU_DS(k, k1) (SKP_FU_CAT(SKP_FU_HS, k) - SKP_FU_CAT(SKP_FU_HS, k1))
#define SKP_FU_DW(k, k1) (SKP_FU_CAT(SKP_FU_GW, k) - SKP_FU_CAT(SKP_FU_GW, k1))
#define SKP_FU_DE(k, k1) (SKP_FU_CAT(SKP_FU_GE, k) - SKP_FU_CAT(SKP_FU_GE, k1))
/* a run's register window: SKP_FU_CR cells down a column and their neighbourhoods */
#define SKP_FU_WIN_R(k, k1) (SKP_FU_CR + SKP_FU_DN(k, k1) + SKP_FU_DS(k, k1))
#define SKP_FU_WIN_C(k, k1) (1 + SKP_FU_DW(k, k1) + SKP_FU_DE(k, k1))
#ifndef SKP_FU_WIN_LIMIT
#define SKP_FU_WIN_LIMIT 96   /* most elements of a register window (beyond: the local path) */
#endif

/* fu_flat 2 in an interior tile: a whole run of SKP_FU_CR cells down a column reads its
 * window of level k from local memory into registers once, every cell's muscle (WIN, reading
 * the window through skp_wp, pitch skp_wpitch) reads it there, and the cells are stored after
 * all are computed.  Read cell by cell from local memory, the compiler reloaded every read of
 * every cell: clang's NVPTX code for sm_90 read all 25 cells of a 5x5 window per cell, 50
 * local loads per run of 2, where the window is 30.  In an interior tile every cell of every
 * region is computed, so the window only holds written cells.  Runs that reach past the
 * region, edge tiles and windows over SKP_FU_WIN_LIMIT take the cell-by-cell path. */
#if SKP_FU_FLAT == 2
#define SKP_FU_WHOLE_RUN(k, k1, SRC, SRC_ST, DST, DST_ST, LAST, WIN)                         \
            if (SKP_FU_WIN_R(k, k1) * SKP_FU_WIN_C(k, k1) <= SKP_FU_WIN_LIMIT                \
                && interior && skp_t0 + SKP_FU_CR <= SKP_FU_RR(k1)) {                        \
                SRC_ST skp_win[SKP_FU_WIN_R(k, k1) * SKP_FU_WIN_C(k, k1)];                   \
                _Pragma("unroll")                                                            \
                for (int skp_a = 0; skp_a < SKP_FU_WIN_R(k, k1); ++skp_a) {                  \
                    _Pragma("unroll")                                                        \
                    for (int skp_b = 0; skp_b < SKP_FU_WIN_C(k, k1); ++skp_b)                \
                        skp_win[skp_a * SKP_FU_WIN_C(k, k1) + skp_b] =                       \
                            SRC[(skp_t0 + skp_a) * SKP_FU_RC(k) + u + skp_b];                \
                }                                                                            \
                DST_ST skp_v[SKP_FU_CR];                                                     \
                _Pragma("unroll")                                                            \
                for (int skp_i = 0; skp_i < SKP_FU_CR; ++skp_i) {                            \
                    const int skp_gr = r0 - SKP_FU_CAT(SKP_FU_HN, k1) + skp_t0 + skp_i;      \
                    const int skp_gc = c0 - SKP_FU_CAT(SKP_FU_GW, k1) + u;                   \
                    const SKP_IDX_T skp_idx = (SKP_IDX_T)skp_gr * cols + skp_gc;             \
                    const int skp_wpitch = SKP_FU_WIN_C(k, k1);                              \
                    __private const SRC_ST* skp_wp = skp_win                                 \
                        + (skp_i + SKP_FU_DN(k, k1)) * SKP_FU_WIN_C(k, k1) + SKP_FU_DW(k, k1); \
                    skp_v[skp_i] = (DST_ST)(WIN);                                            \
                }                                                                            \
                _Pragma("unroll")                                                            \
                for (int skp_i = 0; skp_i < SKP_FU_CR; ++skp_i) {                            \
                    const int t = skp_t0 + skp_i;                                            \
                    if (LAST)                                                                \
                        out[(SKP_IDX_T)(r0 - SKP_FU_CAT(SKP_FU_HN, k1) + t) * cols           \
                            + c0 - SKP_FU_CAT(SKP_FU_GW, k1) + u] = skp_v[skp_i];            \
                    else                                                                     \
                        DST[t * SKP_FU_RC(k1) + u] = skp_v[skp_i];                           \
                }                                                                            \
                continue;                                                                    \
            }
#define SKP_FU_STAGE_CELLS(k, k1, SRC, SRC_ST, DST, DST_ST, LAST, WIN)                       \
    for (int skp_q = lr * SKP_FU_WC + lc;                                                    \
         skp_q < (SKP_FU_RR(k1) + SKP_FU_CR - 1) / SKP_FU_CR * SKP_FU_RC(k1);                \
         skp_q += SKP_FU_WC * SKP_FU_WR) {                                                   \
        const int skp_t0 = skp_q / SKP_FU_RC(k1) * SKP_FU_CR;                                \
        const int u = skp_q - skp_q / SKP_FU_RC(k1) * SKP_FU_RC(k1);                         \
        SKP_FU_WHOLE_RUN(k, k1, SRC, SRC_ST, DST, DST_ST, LAST, WIN)                         \
        _Pragma("unroll")                                                                    \
        for (int skp_i = 0; skp_i < SKP_FU_CR; ++skp_i) {                                    \
            const int t = skp_t0 + skp_i;                                                    \
            if (t < SKP_FU_RR(k1)) {
#else
#define SKP_FU_STAGE_CELLS(k, k1, SRC, SRC_ST, DST, DST_ST, LAST, WIN)                       \
    SKP_FU_CELLS(SKP_FU_RR(k1), SKP_FU_RC(k1))
#endif

/* Stage k: level k (local array SRC of SRC_ST) -> level k + 1 (local array DST, or the output
 * when LAST).  FAST and EDGE are the muscle calls of interior and edge tiles, in terms of SRC
 * (FAST: at skp_off, the cell; EDGE: the region, whose first cell is (skp_rb, skp_cb)), skp_gr,
 * skp_gc (the cell, in the matrix), skp_idx, skp_rb, skp_cb, rows, cols and the extras; WIN
 * the interior call on a run's register window (SKP_FU_WHOLE_RUN). */
#define SKP_FU_STAGE(k, k1, SRC, SRC_ST, DST, DST_ST, LAST, FAST, EDGE, WIN)                 \
    {                                                                                        \
        const int skp_rb = r0 - SKP_FU_CAT(SKP_FU_HN, k);                                    \
        const int skp_cb = c0 - SKP_FU_CAT(SKP_FU_GW, k);                                    \
        SKP_FU_STAGE_CELLS(k, k1, SRC, SRC_ST, DST, DST_ST, LAST, WIN)                       \
                const int gr = r0 - SKP_FU_CAT(SKP_FU_HN, k1) + t;                           \
                const int gc = c0 - SKP_FU_CAT(SKP_FU_GW, k1) + u;                           \
                const bool skp_in = (uint)gr < (uint)rows && (uint)gc < (uint)cols;          \
                if (LAST && !skp_in)                                                         \
                    continue;                                                                \
                DST_ST v;                                                                    \
                if (interior || SKP_FU_WRAPALL) {                                            \
                    const int skp_gr = SKP_FU_GRID(gr, rows);                                \
                    const int skp_gc = SKP_FU_GRID(gc, cols);                                \
                    const SKP_IDX_T skp_idx = (SKP_IDX_T)skp_gr * cols + skp_gc;             \
                    const int skp_off =                                                      \
                        (t + SKP_FU_CAT(SKP_FU_HN, k) - SKP_FU_CAT(SKP_FU_HN, k1))           \
                            * SKP_FU_RC(k)                                                   \
                        + u + SKP_FU_CAT(SKP_FU_GW, k) - SKP_FU_CAT(SKP_FU_GW, k1);          \
                    v = (DST_ST)(FAST);                                                      \
                } else {                                                                     \
                    if (!skp_in)                                                             \
                        continue;                                                            \
                    const int skp_gr = gr, skp_gc = gc;                                      \
                    const SKP_IDX_T skp_idx = (SKP_IDX_T)skp_gr * cols + skp_gc;             \
                    v = (DST_ST)(EDGE);                                                      \
                }                                                                            \
                if (LAST)                                                                    \
                    out[(SKP_IDX_T)gr * cols + gc] = v;                                      \
                else                                                                         \
                    DST[t * SKP_FU_RC(k1) + u] = v;                                          \
        SKP_FU_END_CELLS                                                                     \
        if (!LAST)                                                                           \
            barrier(CLK_LOCAL_MEM_FENCE);                                                    \
    }

__kernel __attribute__((reqd_work_group_size(SKP_FU_WC, SKP_FU_WR, 1)))
void skelpy_stencil_fused(__global SKP_FU_OUT_ST* restrict out,
                          __global const SKP_FU_IN_ST* restrict in,
                          const int rows, const int cols
                          SKP_FU_EXTRA_DECL)
{
    SKP_FU_LOCALS
    const int lc = (int)get_local_id(0), lr = (int)get_local_id(1);
    const int r0 = (int)get_group_id(1) * SKP_FU_TH;
    const int c0 = (int)get_group_id(0) * SKP_FU_TW;
    /* uniform per group: level 0's region lies in the matrix */
    const bool interior = r0 >= SKP_FU_HN0 && c0 >= SKP_FU_GW0
                          && r0 + SKP_FU_TH + SKP_FU_HS0 <= rows
                          && c0 + SKP_FU_TW + SKP_FU_GE0 <= cols;

    /* level 0: the input over its region (in an edge tile only the cells in the matrix, or
     * the periodic continuation when every stage wraps).  An interior tile copies it row by
     * row: dealt out cell by cell, each cell paid a division and a 64-bit address of its own
     * (~15 instructions a cell, a fifth of the fused Canny's). */
    if (interior) {
        for (int t = lr; t < SKP_FU_RR(0); t += SKP_FU_WR) {
            __global const SKP_FU_IN_ST* src =
                in + (SKP_IDX_T)(r0 - SKP_FU_HN0 + t) * cols + (c0 - SKP_FU_GW0);
            __local SKP_FU_IN_ST* dst = skp_lv0 + t * SKP_FU_RC(0);
            for (int u = lc; u < SKP_FU_RC(0); u += SKP_FU_WC)
                dst[u] = src[u];
        }
    } else {
    SKP_FU_CELLS(SKP_FU_RR(0), SKP_FU_RC(0))
            const int gr = r0 - SKP_FU_HN0 + t;
            const int gc = c0 - SKP_FU_GW0 + u;
            if (SKP_FU_WRAPALL) {
                skp_lv0[t * SKP_FU_RC(0) + u] =
                    in[(SKP_IDX_T)SKP_FU_GRID(gr, rows) * cols + SKP_FU_GRID(gc, cols)];
            } else if ((uint)gr < (uint)rows && (uint)gc < (uint)cols) {
                skp_lv0[t * SKP_FU_RC(0) + u] = in[(SKP_IDX_T)gr * cols + gc];
            }
    SKP_FU_END_CELLS
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    SKP_FU_STAGES
}
