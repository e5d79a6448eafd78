/* A streaming pass of stencil stages: the T stages of one pass (T time steps of an iterated
 * stencil, or the stages of a fused StencilSequence) run in one kernel, each intermediate row
 * on the chip, so global memory sees every cell once per pass instead of once per stage.
 * stencil_stream_common.cl and the stage muscles come first.
 *
 * Layout (after AN5D's register streaming, Matsumura et al., CGO 2020):
 *   - A work-group holds SKP_TB_WR independent *streams*.  A stream is a row of SKP_TB_WC
 *     work-items, each owning SKP_TB_V consecutive columns (loaded and stored as one vector),
 *     so a stream covers SKP_TB_NX columns.  Of these the middle `wout` are output;
 *     SKP_TB_OL columns on the left and as many as the stages consume on the right (the
 *     overlap, rounded up to whole vectors) are computed again by the neighbouring tiles.  A
 *     stream walks down the `chunk` rows it outputs plus the rows its stages need above and
 *     below ("stream division": many chunks give a GPU enough work-groups); on a GPU the
 *     streams of the pass's last work-groups output `schunk` rows (a shorter tail).
 *   - Level 0 is the input, level l + 1 what stage l (muscle l % SKP_TB_K) computes from level
 *     l.  Per step of the walk every level l < T publishes its newest row into a ring of
 *     SKP_TB_P rows in local memory; one barrier; then every stage computes one row.  Stage l
 *     computes row jr when level l's row jr + HS was just published, so level l + 1 lags level
 *     l by HS + 1 rows and one barrier per step serves all stages: a ring keeps the HR = HN +
 *     HS + 1 rows a window reaches plus the one being written.  The last stage's row is
 *     stored.  The work-group's size and the rings' shape are compile-time constants, so every
 *     ring access is one base address plus a constant.
 *   - SKP_TB_RING 0: each work-item also keeps its own columns of the last HR rows of every
 *     level in registers, rotated by unrolling the walk by SKP_TB_PERIOD steps (the rings'
 *     period), so that every register index is a constant; only the neighbour columns of a
 *     window come from local memory.  SKP_TB_RING 1: the whole window comes from the ring.
 *   - Input rows are loaded SKP_TB_PRE steps ahead, so that several loads are in flight.
 *   - The muscle is the single-step kernel's muscle, called on a private window of the cell's
 *     neighbourhood; every intermediate value is rounded to the storage type as a store would
 *     round it, so a pass equals its stages run one by one, bit for bit.
 *
 * Borders, per stage (as the single-step kernel applies them to the level it reads):
 *   constant  cells of the level outside the matrix hold the stage's constant (set when the
 *             level is loaded or computed);
 *   wrap      the pass computes the periodic continuation (loads and extras taken modulo the
 *             matrix), which is exact; every stage of a pass is then wrap;
 *   nearest, reflect, mirror ("redirect"): a cell outside the matrix must read as the in-matrix
 *             cell of the same level the rule names.  Level 0 is loaded that way.  For the
 *             other levels (SKP_TB_SMALL 0): when a work-item publishes an in-matrix cell near
 *             the left or right edge, it also writes it to the ring cells outside the matrix
 *             that name it; a row below the matrix takes its named row's values when it is
 *             published; windows of rows near the top read rows above the matrix from the
 *             rows they name (held in the ring: the rows a stage holds are symmetric for these
 *             modes).  Matrices of at most 2 x the reach + 1 rows or columns, where a rule
 *             folds more than once, are built with SKP_TB_SMALL 1: there every window near an
 *             edge is read cell by cell through the rule.
 *
 * Generated macros (skeletons/stencil_stream.py), k a stage muscle (0 <= k < SKP_TB_K), l a
 * level: SKP_ST (storage type; a word with SKP_TB_MIXED), SKP_IN_ST, SKP_OUT_ST, SKP_TB_IN/OUT
 * and SKP_TB_TOW_<type>/SKP_TB_OFW_<type> (with SKP_TB_MIXED), SKP_IDX_T, SKP_TB_K, SKP_TB_N/S/E/W(k) (reach),
 * SKP_TB_HN/HS(k) (rows held above/below), SKP_TB_GW/GE(k) (overlap columns a stage consumes),
 * SKP_TB_MODE(k), SKP_TB_CVAL(k), SKP_TB_ROWMASK(k, r) (bit j: the muscle reads window row r,
 * column j), SKP_TB_CALL(k) (the muscle call, in terms of skp_win, skp_m, skp_idx, skp_gr,
 * skp_gc, rows, cols and the extras), SKP_TB_EXTRA_DECL; sums over the first l levels:
 * SKP_TB_OFF(l) (lags), SKP_TB_PBASE(l) (ring rows), SKP_TB_HNSUM(l), SKP_TB_GWSUM(l),
 * SKP_TB_GESUM(l); SKP_TB_MRMAX, SKP_TB_WMAX, SKP_TB_EMAX, SKP_TB_PMAX, SKP_TB_PERIOD (the
 * least common multiple of the rings' sizes).
 * Launch macros: SKP_TB_T (stages per pass), SKP_TB_WC, SKP_TB_WR (the work-group), SKP_TB_V
 * (columns per work-item), SKP_TB_RING, SKP_TB_UNROLL (the walk unrolled by SKP_TB_PERIOD;
 * SKP_TB_RING 0 needs it), SKP_TB_PRE, SKP_TB_SMALL.
 */

#ifndef SKP_TB_T
#define SKP_TB_T 2
#endif
#ifndef SKP_TB_WC
#define SKP_TB_WC 64
#endif
#ifndef SKP_TB_WR
#define SKP_TB_WR 1
#endif
#ifndef SKP_TB_V
#define SKP_TB_V 1
#endif
#ifndef SKP_TB_RING
#define SKP_TB_RING 1
#endif
#ifndef SKP_TB_UNROLL
#define SKP_TB_UNROLL 0
#endif
#ifndef SKP_TB_PRE
#define SKP_TB_PRE 1
#endif
#ifndef SKP_TB_SMALL
#define SKP_TB_SMALL 1
#endif
#ifndef SKP_TB_KEEP_LOOP
#define SKP_TB_KEEP_LOOP 0
#endif
/* SKP_ROW_WINDOW (1 on a device group, distribution/stencil.py): in and out point `offset`
 * elements into one device's part, whose `rows` rows hold its own rows and the halo a pass
 * reads (where the part reaches the first or last row of the matrix, nothing beyond it: the
 * border rule applies there as above); the pass outputs rows [row_lo, row_hi) only. */
#ifndef SKP_ROW_WINDOW
#define SKP_ROW_WINDOW 0
#endif
#if SKP_ROW_WINDOW
#define SKP_TB_WINDOW_DECL , const int row_lo, const int row_hi, const long offset
#define SKP_TB_ROW_START row_lo
#define SKP_TB_ROW_END row_hi
#else
#define SKP_TB_WINDOW_DECL
#define SKP_TB_ROW_START 0
#define SKP_TB_ROW_END rows
#endif
/* One dtype (an iterated stencil): SKP_ST is the data's storage type.  Levels of different
 * dtypes (a sequence float -> int -> uchar, SKP_TB_MIXED 1): SKP_ST is a word (uint, or ulong
 * where a level has 8 bytes) holding each level's bits as a store of its dtype leaves them;
 * the stage calls convert their results into words and the muscles' reads convert words back
 * (the generated SKP_TB_CALL and accessors), SKP_TB_IN converts a loaded input, SKP_TB_OUT a
 * stored result. */
#ifndef SKP_TB_MIXED
#define SKP_TB_MIXED 0
#endif
#ifndef SKP_IN_ST
#define SKP_IN_ST SKP_ST
#define SKP_OUT_ST SKP_ST
#define SKP_TB_IN(x) (x)
#define SKP_TB_OUT(x) (x)
#endif
#if SKP_TB_MIXED && SKP_TB_V > 1
#error "levels of different dtypes are held as words: one column per work-item"
#endif
#if !SKP_TB_RING && !SKP_TB_UNROLL
#error "SKP_TB_RING 0 keeps rows in registers rotated by unrolling: it needs SKP_TB_UNROLL 1"
#endif

#define SKP_TB_P(k) (SKP_TB_HN(k) + SKP_TB_HS(k) + 2)     /* ring rows of a level */
#define SKP_TB_HR(k) (SKP_TB_HN(k) + SKP_TB_HS(k) + 1)    /* rows a stage reaches back */
#define SKP_TB_MR(k) (SKP_TB_N(k) + SKP_TB_S(k) + 1)      /* rows of a stage's window */
#define SKP_TB_REDIR(k) (SKP_TB_MODE(k) == SKP_TB_NEAREST || SKP_TB_MODE(k) == SKP_TB_REFLECT \
                         || SKP_TB_MODE(k) == SKP_TB_MIRROR)
#define SKP_TB_WP (SKP_TB_WMAX + SKP_TB_V + SKP_TB_EMAX)   /* pitch of the private window */
#define SKP_TB_UP(x) (((x) + SKP_TB_V - 1) / SKP_TB_V * SKP_TB_V)
#define SKP_TB_OL SKP_TB_UP(SKP_TB_GWSUM(SKP_TB_T))
#define SKP_TB_NX (SKP_TB_WC * SKP_TB_V)                  /* columns of a stream */
/* A ring row: the stream's columns and padding that reads past the tile's edges land in
 * (those cells only feed cells that are never used) */
#define SKP_TB_PADL SKP_TB_UP(SKP_TB_WMAX)
#define SKP_TB_NXP (SKP_TB_PADL + SKP_TB_NX + SKP_TB_UP(SKP_TB_EMAX))
#define SKP_TB_ROWLEN (SKP_TB_WR * SKP_TB_NXP)              /* one ring row of the group */
#if SKP_TB_UNROLL
#define SKP_TB_U SKP_TB_PERIOD
#else
#define SKP_TB_U 1
#endif

/* the matrix row or column that loads and extras use for x: the first stage's rule (any cell
 * for constant: the value is replaced) */
#define SKP_TB_GRID(x, n) skp_tb_remap((x), (n), SKP_TB_MODE(0))

#define SKP_TB_CAT_(a, b) a##b
#define SKP_TB_CAT(a, b) SKP_TB_CAT_(a, b)
#if SKP_TB_V > 1
#define SKP_TB_VT SKP_TB_CAT(SKP_ST, SKP_TB_V)
#define SKP_TB_VLOAD SKP_TB_CAT(vload, SKP_TB_V)
#define SKP_TB_VSTORE SKP_TB_CAT(vstore, SKP_TB_V)
/* local rows start at multiples of SKP_TB_V elements: vector-typed accesses up to 16 bytes */
#define SKP_TB_LVEC (SKP_TB_V * sizeof(SKP_ST) <= 16)
#else
#define SKP_TB_LVEC 0
#endif

/* Does the V-wide window of a stage read row r, column jj (some cell m reads jj - m)? */
inline bool skp_tb_vuse(const ulong rowmask, const int jj)
{
    bool used = false;
#pragma unroll
    for (int m = 0; m < SKP_TB_V; ++m)
        used = used || (jj - m >= 0 && jj - m < 64 && ((rowmask >> (jj - m)) & 1UL));
    return used;
}

/* Steps between a row d rows below the matrix (d = 0: the first) and the row it names */
inline int skp_tb_below(const int d, const int mode)
{
    return mode == SKP_TB_NEAREST ? d + 1 : mode == SKP_TB_REFLECT ? 2 * d + 1 : 2 * d + 2;
}

/* Level 0, matrix row `row`, this work-item's columns into dst[] (the first stage's rule
 * outside the matrix). */
#define SKP_TB_LOAD(dst, row)                                                              \
    {                                                                                      \
        const int skp_lr = (row);                                                          \
        const bool skp_rin = (uint)skp_lr < (uint)rows;                                    \
        __global const SKP_IN_ST* const skp_src =                                          \
            in + (SKP_IDX_T)SKP_TB_GRID(skp_lr, rows) * cols;                              \
        if (vld) {                                                                         \
            SKP_TB_VLOADROW(dst, skp_src + cfirst);                                        \
        } else {                                                                           \
            _Pragma("unroll")                                                              \
            for (int m = 0; m < SKP_TB_V; ++m)                                             \
                dst[m] = SKP_TB_IN(skp_src[gcol[m]]);                                      \
        }                                                                                  \
        if (SKP_TB_MODE(0) == SKP_TB_CONSTANT) {                                           \
            _Pragma("unroll")                                                              \
            for (int m = 0; m < SKP_TB_V; ++m)                                             \
                dst[m] = (skp_rin && cin[m]) ? dst[m] : SKP_TB_CVAL(0);                    \
        }                                                                                  \
    }
#if SKP_TB_V > 1
#define SKP_TB_VLOADROW(dst, p) SKP_TB_VSTORE(*(__global const SKP_TB_VT*)(p), 0, dst)
#else
#define SKP_TB_VLOADROW(dst, p) (dst)[0] = SKP_TB_IN(*(p))
#endif

/* The newest row of level l (waiting to be published) and the ring slot it goes to */
#if SKP_TB_RING
#define SKP_TB_NEWEST(l) cur[l]
#else
#define SKP_TB_NEWEST(l) reg[l][ku % SKP_TB_P((l) % SKP_TB_K)]
#endif
#if SKP_TB_UNROLL
#define SKP_TB_SLOT(l) (ku % SKP_TB_P((l) % SKP_TB_K))
#else
#define SKP_TB_SLOT(l) (i % SKP_TB_P((l) % SKP_TB_K))
#endif
/* ring row of level l, slot sl, at this work-item's first column */
#define SKP_TB_RROW(l, sl) (ring + (SKP_TB_PBASE(l) + (sl)) * SKP_TB_ROWLEN)
/* the slot `age` steps before slot sl of a level read by stage k */
#define SKP_TB_BACK(sl, age, k) \
    ((sl) - (age) < 0 ? (sl) - (age) + SKP_TB_P(k) : (sl) - (age))

/* `lds` is NOT restrict: the rings are written by one work-item and read by its neighbours, and
 * `restrict` promises the compiler that nothing else writes what this work-item reads through
 * it, so a barrier (a call not passed the pointer) cannot change it and reads may move across
 * it.  On PoCL with the walk unrolled as GPUs build it, windows then held neighbour columns from
 * before the barrier (Game of Life with wrap, a Gaussian with reflect), the likely cause of the
 * H200's Game of Life passes differing from single steps.  oclgrind cannot see it: skelpy
 * builds there with -Drestrict= (runtime.py).  `in` and `out` may be restrict: no work-item
 * writes what another reads. */
__kernel __attribute__((reqd_work_group_size(SKP_TB_WC, SKP_TB_WR, 1)))
void skelpy_stencil_stream(__global SKP_OUT_ST* restrict out,
                           __global const SKP_IN_ST* restrict in,
                           const int rows, const int cols,
                           const int chunk, const int split, const int schunk,
                           const int wout,
                           __local SKP_ST* lds
                           SKP_TB_WINDOW_DECL
                           SKP_TB_EXTRA_DECL)
{
#if SKP_ROW_WINDOW
    in += offset;
    out += offset;
#endif
    const int lc = (int)get_local_id(0), ls = (int)get_local_id(1);
    const int x0 = lc * SKP_TB_V;                          /* first local column owned */
    const int c0 = (int)get_group_id(0) * wout;            /* first output column */
    const int cbase = c0 - SKP_TB_OL;                      /* matrix column of local 0 */
    const int cfirst = cbase + x0;                         /* first matrix column owned */
    /* Streams before `split` output `chunk` rows each, the rest (the pass's last work-groups,
     * a multiple of SKP_TB_WR streams: every stream of a work-group walks as many steps)
     * `schunk` rows: the last wave of a GPU pass ends sooner (see geometry in
     * stencil_stream.py). */
    const int sidx = (int)get_group_id(1) * SKP_TB_WR + ls;
    const int lchunk = sidx < split ? chunk : schunk;      /* rows this stream outputs */
    const int r0 = SKP_TB_ROW_START                         /* first output row */
                   + (sidx < split ? sidx * chunk : split * chunk + (sidx - split) * schunk);
    const int base = r0 - SKP_TB_HNSUM(SKP_TB_T);          /* row loaded at step 0 */
    const int nsteps = lchunk + SKP_TB_HNSUM(SKP_TB_T) + SKP_TB_OFF(SKP_TB_T) - 1;
    __local SKP_ST* const ring = lds + ls * SKP_TB_NXP + SKP_TB_PADL + x0;

    /* the padding (and the rest) starts defined */
    for (int q = ls * SKP_TB_WC + lc; q < SKP_TB_PBASE(SKP_TB_T) * SKP_TB_ROWLEN;
         q += SKP_TB_WC * SKP_TB_WR)
        lds[q] = (SKP_ST)0;
    barrier(CLK_LOCAL_MEM_FENCE);

    /* Per owned column: the matrix column loads and extras use, whether it lies in the
     * matrix, whether this tile outputs it. */
    int gcol[SKP_TB_V];
    bool cin[SKP_TB_V], outc[SKP_TB_V];
#pragma unroll
    for (int m = 0; m < SKP_TB_V; ++m) {
        const int c = cfirst + m;
        gcol[m] = SKP_TB_GRID(c, cols);
        cin[m] = (uint)c < (uint)cols;
        outc[m] = x0 + m >= SKP_TB_OL && x0 + m < SKP_TB_OL + wout && c < cols;
    }
    const bool allin = cfirst >= 0 && cfirst + SKP_TB_V <= cols;
    /* whole vectors inside the matrix, aligned (rows start at multiples of V): vector access */
    const bool vld = SKP_TB_V > 1 && allin && cols % SKP_TB_V == 0;
    const bool vout = vld && x0 >= SKP_TB_OL && x0 + SKP_TB_V <= SKP_TB_OL + wout;
#if !SKP_TB_SMALL
    /* owns cells in and outside the matrix (its registers of the outside ones are not the
     * cells named by a redirect rule: its windows come from the ring) */
    const bool straddle = cfirst < cols && !allin;
    /* owns cells that cells outside the matrix name */
    const bool colnear = cfirst <= SKP_TB_WMAX + SKP_TB_EMAX
                         || cfirst + SKP_TB_V + SKP_TB_WMAX + SKP_TB_EMAX >= cols;
#endif

#if SKP_TB_RING
    SKP_ST cur[SKP_TB_T][SKP_TB_V];
#pragma unroll
    for (int l = 0; l < SKP_TB_T; ++l)
#pragma unroll
        for (int m = 0; m < SKP_TB_V; ++m)
            cur[l][m] = (SKP_ST)0;
#else
    SKP_ST reg[SKP_TB_T][SKP_TB_PMAX][SKP_TB_V];
#pragma unroll
    for (int l = 0; l < SKP_TB_T; ++l)
#pragma unroll
        for (int q = 0; q < SKP_TB_PMAX; ++q)
#pragma unroll
            for (int m = 0; m < SKP_TB_V; ++m)
                reg[l][q][m] = (SKP_ST)0;
#endif
    SKP_ST pre[SKP_TB_PRE][SKP_TB_V];
#pragma unroll
    for (int d = 0; d < SKP_TB_PRE; ++d)
        SKP_TB_LOAD(pre[d], base + d)

    /* Unrolled, the walk runs whole rounds of SKP_TB_U steps: the steps past nsteps load
     * rows in bounds and store nothing (their rows lie past the chunk).  PoCL keeps the round
     * a loop (SKP_TB_KEEP_LOOP 1, the register indices then run-time values): unrolled, its
     * builds took 3-15x longer and its passes ran 2-4x slower.  (What looked like PoCL
     * miscompiling the unrolled barriers was `lds` declared restrict: see above the kernel.) */
    for (int i0 = 0; i0 < nsteps; i0 += SKP_TB_U)
#if SKP_TB_KEEP_LOOP
#pragma unroll 1
#else
#pragma unroll
#endif
    for (int ku = 0; ku < SKP_TB_U; ++ku) {
        const int i = i0 + ku;
        /* level 0's newest row is the oldest one prefetched */
#pragma unroll
        for (int m = 0; m < SKP_TB_V; ++m)
            SKP_TB_NEWEST(0)[m] = pre[0][m];
#pragma unroll
        for (int d = 0; d + 1 < SKP_TB_PRE; ++d)
#pragma unroll
            for (int m = 0; m < SKP_TB_V; ++m)
                pre[d][m] = pre[d + 1][m];
        if (i + SKP_TB_PRE < nsteps)
            SKP_TB_LOAD(pre[SKP_TB_PRE - 1], base + i + SKP_TB_PRE)

        /* publish every level's newest row */
#pragma unroll
        for (int l = 0; l < SKP_TB_T; ++l) {
            const int k = l % SKP_TB_K;
            const int slot = SKP_TB_SLOT(l);
            __local SKP_ST* const dst = SKP_TB_RROW(l, slot);
            const bool fix = !SKP_TB_SMALL && l > 0 && SKP_TB_REDIR(k);
#if !SKP_TB_SMALL
            if (fix) {
                /* a row below the matrix: the values of the row it names */
                const int a = base + i - SKP_TB_OFF(l);
                if (a >= rows) {
#pragma unroll
                    for (int d = 0; d < SKP_TB_HS(k); ++d)
                        if (a == rows + d) {
                            const int age = skp_tb_below(d, SKP_TB_MODE(k));
#pragma unroll
                            for (int m = 0; m < SKP_TB_V; ++m)
#if SKP_TB_RING
                                SKP_TB_NEWEST(l)[m] =
                                    SKP_TB_RROW(l, SKP_TB_BACK(slot, age, k))[m];
#else
                                SKP_TB_NEWEST(l)[m] =
                                    reg[l][SKP_TB_BACK(slot, age, k)][m];
#endif
                        }
                }
            }
#endif
            if (!fix || allin) {
#if SKP_TB_V > 1
                if (SKP_TB_LVEC) {
                    *(__local SKP_TB_VT*)dst = SKP_TB_VLOAD(0, SKP_TB_NEWEST(l));
                } else
#endif
                {
#pragma unroll
                    for (int m = 0; m < SKP_TB_V; ++m)
                        dst[m] = SKP_TB_NEWEST(l)[m];
                }
            } else {
                /* cells outside the matrix are written by the cells they name */
#pragma unroll
                for (int m = 0; m < SKP_TB_V; ++m)
                    if (cin[m])
                        dst[m] = SKP_TB_NEWEST(l)[m];
            }
#if !SKP_TB_SMALL
            if (fix && colnear) {
#pragma unroll
                for (int m = 0; m < SKP_TB_V; ++m) {
                    const int c = cfirst + m;
                    if (!cin[m])
                        continue;
#pragma unroll
                    for (int e = 1; e <= SKP_TB_GW(k); ++e) {
                        const int xl = -e, xr = cols - 1 + e;
                        if (skp_tb_remap(xl, cols, SKP_TB_MODE(k)) == c && xl >= cbase)
                            dst[xl - cfirst] = SKP_TB_NEWEST(l)[m];
                        if (skp_tb_remap(xr, cols, SKP_TB_MODE(k)) == c
                            && xr < cbase + SKP_TB_NX)
                            dst[xr - cfirst] = SKP_TB_NEWEST(l)[m];
                    }
                }
            }
#endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* stage l: level l + 1's row jr from level l's rows jr - N .. jr + S */
#pragma unroll
        for (int l = 0; l < SKP_TB_T; ++l) {
            const int k = l % SKP_TB_K;
            const int a = base + i - SKP_TB_OFF(l);        /* level l's row published now */
            const int jr = a - SKP_TB_HS(k);
            const bool rin = (uint)jr < (uint)rows;
            const int slot = SKP_TB_SLOT(l);
            SKP_ST skp_win[SKP_TB_MRMAX * SKP_TB_WP];
#if SKP_TB_SMALL
            const bool top = false;
            const bool from_ring = SKP_TB_RING;
            if (SKP_TB_REDIR(k)
                && (jr < SKP_TB_N(k) || jr + SKP_TB_S(k) >= rows || cfirst < SKP_TB_W(k)
                    || cfirst + SKP_TB_V + SKP_TB_E(k) > cols)) {
                /* every cell through the rule: rows through the ring, columns through the
                 * local index */
#pragma unroll
                for (int r = 0; r < SKP_TB_MR(k); ++r) {
                    const int tr = skp_tb_remap(jr - SKP_TB_N(k) + r, rows, SKP_TB_MODE(k));
                    const int age = clamp(a - tr, 0, SKP_TB_HR(k) - 1);
                    __local const SKP_ST* const src = SKP_TB_RROW(l, SKP_TB_BACK(slot, age, k));
#pragma unroll
                    for (int jj = 0; jj < SKP_TB_W(k) + SKP_TB_V + SKP_TB_E(k); ++jj)
                        if (skp_tb_vuse(SKP_TB_ROWMASK(k, r), jj)) {
                            const int x = skp_tb_remap(cfirst + jj - SKP_TB_W(k), cols,
                                                       SKP_TB_MODE(k)) - cbase;
                            skp_win[r * SKP_TB_WP + jj] = src[clamp(x, 0, SKP_TB_NX - 1) - x0];
                        }
                }
            } else
#else
            /* rows above the matrix: read the rows they name */
            const bool top = l > 0 && SKP_TB_REDIR(k) && jr < SKP_TB_N(k);
            const bool from_ring = SKP_TB_RING || top || (l > 0 && SKP_TB_REDIR(k) && straddle);
#endif
            if (from_ring) {
#pragma unroll
                for (int r = 0; r < SKP_TB_MR(k); ++r) {
                    const int row = jr - SKP_TB_N(k) + r;
                    /* (clamped: for a row jr itself above the matrix, whose value no
                     * in-matrix cell reads, the named row may not be in the ring) */
                    const int age = (top && row < 0)
                        ? clamp(a - skp_tb_remap(row, rows, SKP_TB_MODE(k)), 0,
                                SKP_TB_HR(k) - 1)
                        : SKP_TB_HS(k) + SKP_TB_N(k) - r;
                    __local const SKP_ST* const src = SKP_TB_RROW(l, SKP_TB_BACK(slot, age, k));
#if SKP_TB_V > 1
                    if (SKP_TB_LVEC) {
                        /* own columns: one vector read */
                        SKP_ST own[SKP_TB_V];
                        SKP_TB_VSTORE(*(__local const SKP_TB_VT*)src, 0, own);
#pragma unroll
                        for (int m = 0; m < SKP_TB_V; ++m)
                            skp_win[r * SKP_TB_WP + SKP_TB_W(k) + m] = own[m];
                    }
#endif
#pragma unroll
                    for (int jj = 0; jj < SKP_TB_W(k) + SKP_TB_V + SKP_TB_E(k); ++jj) {
                        const bool own = jj >= SKP_TB_W(k) && jj < SKP_TB_W(k) + SKP_TB_V;
                        if (skp_tb_vuse(SKP_TB_ROWMASK(k, r), jj) && !(own && SKP_TB_LVEC))
                            skp_win[r * SKP_TB_WP + jj] = src[jj - SKP_TB_W(k)];
                    }
                }
            } else {
#if !SKP_TB_RING
#pragma unroll
                for (int r = 0; r < SKP_TB_MR(k); ++r) {
                    const int sl = SKP_TB_BACK(slot, SKP_TB_HS(k) + SKP_TB_N(k) - r, k);
                    __local const SKP_ST* const src = SKP_TB_RROW(l, sl);
#pragma unroll
                    for (int jj = 0; jj < SKP_TB_W(k) + SKP_TB_V + SKP_TB_E(k); ++jj) {
                        const bool own = jj >= SKP_TB_W(k) && jj < SKP_TB_W(k) + SKP_TB_V;
                        if (skp_tb_vuse(SKP_TB_ROWMASK(k, r), jj))
                            skp_win[r * SKP_TB_WP + jj] =
                                own ? reg[l][sl][own ? jj - SKP_TB_W(k) : 0]
                                    : src[jj - SKP_TB_W(k)];
                    }
                }
#endif
            }
            const int skp_gr = SKP_TB_GRID(jr, rows);
            SKP_ST res[SKP_TB_V];
#pragma unroll
            for (int skp_m = 0; skp_m < SKP_TB_V; ++skp_m) {
                const int skp_gc = gcol[skp_m];
                const SKP_IDX_T skp_idx = (SKP_IDX_T)skp_gr * cols + skp_gc;
                SKP_ST v = (SKP_ST)(SKP_TB_CALL(k));
                if (l + 1 < SKP_TB_T) {
                    const int kn = (l + 1) % SKP_TB_K;
                    if (SKP_TB_MODE(kn) == SKP_TB_CONSTANT)
                        v = (rin && cin[skp_m]) ? v : SKP_TB_CVAL(kn);
#if SKP_TB_RING
                    cur[l + 1 < SKP_TB_T ? l + 1 : 0][skp_m] = v;
#else
                    reg[l + 1 < SKP_TB_T ? l + 1 : 0]
                       [(ku + 1) % SKP_TB_P((l + 1) % SKP_TB_K)][skp_m] = v;
#endif
                } else {
                    res[skp_m] = v;
                }
            }
            if (l + 1 == SKP_TB_T && rin && jr >= r0 && jr < r0 + lchunk
                && jr < SKP_TB_ROW_END) {
                __global SKP_OUT_ST* const o = out + (SKP_IDX_T)jr * cols + cfirst;
#if SKP_TB_V > 1
                if (vout) {
                    *(__global SKP_TB_VT*)o = SKP_TB_VLOAD(0, res);
                } else
#endif
                {
#pragma unroll
                    for (int m = 0; m < SKP_TB_V; ++m)
                        if (outc[m])
                            o[m] = SKP_TB_OUT(res[m]);
                }
            }
        }
    }
}
