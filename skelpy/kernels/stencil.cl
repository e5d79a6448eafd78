/* The stencil kernel; stencil_common.cl (macros, border rule) and the muscles come first.
 * See stencil_common.cl for the launch macros and the layout of work.
 *
 * SKP_ROW_WINDOW (1 on a device group, distribution/stencil.py): the buffers are one device's
 * part, its rows plus halo and ghost rows, and the kernel computes rows [row_lo, row_hi) of it
 * only; every read of a computed cell lies inside the buffer, so the border rule only ever
 * remaps columns, and no row outside the window is written. */
#ifndef SKP_ROW_WINDOW
#define SKP_ROW_WINDOW 0
#endif
#if SKP_ROW_WINDOW
#define SKP_WINDOW_DECL , const int row_lo, const int row_hi
#define SKP_ROW_START row_lo
#define SKP_ROW_END row_hi
#else
#define SKP_WINDOW_DECL
#define SKP_ROW_START 0
#define SKP_ROW_END rows
#endif

/* Where work-item (lr, lc) finds its k-th row and m-th column cell inside the group's tile.
 * Scalar layout: interleaved (rows lr, lr + wgr, ...; columns lc, lc + wgc, ...), which keeps
 * every read and write of a warp on consecutive addresses.  Vector layout (SKP_VEC > 1): a
 * block of SKP_CR consecutive rows by SKP_VEC consecutive columns, read and written as
 * vectors; consecutive work-items still touch consecutive vectors. */
#if SKP_VEC > 1
#define SKP_NCOL SKP_VEC
#define SKP_T(k) (lr * SKP_CR + (k))
#define SKP_U(m) (lc * SKP_VEC + (m))
#else
#define SKP_NCOL SKP_CC
#define SKP_T(k) (lr + (k) * wgr)
#define SKP_U(m) (lc + (m) * wgc)
#endif

/* One output cell (skp_r, skp_c) of the group's tile at tile position (t, u). CALL is the
 * muscle call; NB is where the input neighbourhood pointer points. */
#if SKP_LOCAL
#define SKP_NB_FAST(t, u) (tile + ((t) + SKP_N) * skp_pitch + ((u) + SKP_W))
#define SKP_NB_EDGE(t, u) SKP_NB_FAST(t, u)
#else
#define SKP_NB_FAST(t, u) (in + skp_idx)
#define SKP_NB_EDGE(t, u) (in)
#endif

#define SKP_CELLS(CHECK, NBPTR, CALL)                                                  \
    _Pragma("unroll")                                                                  \
    for (int k = 0; k < SKP_CR; ++k) {                                                 \
        const int t = SKP_T(k);                                                        \
        const int skp_r = r0 + t;                                                      \
        _Pragma("unroll")                                                              \
        for (int m = 0; m < SKP_NCOL; ++m) {                                           \
            const int u = SKP_U(m);                                                    \
            const int skp_c = c0 + u;                                                  \
            if (CHECK && (skp_r >= SKP_ROW_END || skp_c >= cols))                      \
                continue;                                                              \
            const SKP_IDX_T skp_idx = (SKP_IDX_T)skp_r * cols + skp_c;                 \
            SKP_SPACE_IN const SKP_IN_ST* skp_nb = NBPTR(t, u);                        \
            out[skp_idx] = (SKP_OUT_ST)(CALL);                                         \
        }                                                                              \
    }

#if SKP_VEC > 1
/* The vector path of an interior group.  The work-item loads the window its cells read
 * (SKP_N + SKP_CR + SKP_S rows by SKP_W + SKP_VEC + SKP_E columns) into private memory: one
 * vector load per row for its own columns, scalars for the halo columns (neighbouring
 * work-items just loaded those, so they come from the cache).  Every offset is a constant
 * after unrolling, so the window lives in registers and the muscle reads it for free.
 * Aligned rows (cols a multiple of SKP_VEC) use vector-typed accesses, which the compiler
 * turns into single wide loads and stores; otherwise vloadn/vstoren. */
#define SKP_WIN_R (SKP_N + SKP_CR + SKP_S)
#define SKP_WIN_C (SKP_W + SKP_VEC + SKP_E)
#define SKP_CAT_(a, b) a##b
#define SKP_CAT(a, b) SKP_CAT_(a, b)
#define SKP_VIN SKP_CAT(SKP_IN_ST, SKP_VEC)
#define SKP_VOUT SKP_CAT(SKP_OUT_ST, SKP_VEC)
#define SKP_VLOADN SKP_CAT(vload, SKP_VEC)
#define SKP_VSTOREN SKP_CAT(vstore, SKP_VEC)

#define SKP_WINDOW_PATH(ALIGNED)                                                       \
    {                                                                                  \
        SKP_IN_ST win[SKP_WIN_R * SKP_WIN_C];                                          \
        _Pragma("unroll")                                                              \
        for (int i = 0; i < SKP_WIN_R; ++i) {                                          \
            __global const SKP_IN_ST* row =                                            \
                in + (SKP_IDX_T)(rb - SKP_N + i) * cols + cb;                          \
            const SKP_VIN v = ALIGNED ? *(__global const SKP_VIN*)row                  \
                                      : SKP_VLOADN(0, row);                            \
            SKP_VSTOREN(v, 0, win + i * SKP_WIN_C + SKP_W);                            \
            _Pragma("unroll")                                                          \
            for (int j = 1; j <= SKP_W; ++j)                                           \
                win[i * SKP_WIN_C + SKP_W - j] = row[-j];                              \
            _Pragma("unroll")                                                          \
            for (int j = 0; j < SKP_E; ++j)                                            \
                win[i * SKP_WIN_C + SKP_W + SKP_VEC + j] = row[SKP_VEC + j];           \
        }                                                                              \
        _Pragma("unroll")                                                              \
        for (int k = 0; k < SKP_CR; ++k) {                                             \
            const int skp_r = rb + k;                                                  \
            SKP_OUT_ST res[SKP_VEC];                                                   \
            _Pragma("unroll")                                                          \
            for (int m = 0; m < SKP_VEC; ++m) {                                        \
                const int skp_c = cb + m;                                              \
                const SKP_IDX_T skp_idx = (SKP_IDX_T)skp_r * cols + skp_c;             \
                SKP_SPACE_NB const SKP_IN_ST* skp_nb =                                 \
                    win + (SKP_N + k) * SKP_WIN_C + SKP_W + m;                         \
                const int skp_pitch = SKP_WIN_C;                                       \
                res[m] = (SKP_OUT_ST)(SKP_CALL_FAST);                                  \
            }                                                                          \
            __global SKP_OUT_ST* o = out + (SKP_IDX_T)skp_r * cols + cb;               \
            if (ALIGNED)                                                               \
                *(__global SKP_VOUT*)o = SKP_VLOADN(0, res);                           \
            else                                                                       \
                SKP_VSTOREN(SKP_VLOADN(0, res), 0, o);                                 \
        }                                                                              \
    }
#endif

#if defined(SKP_PACKED) && SKP_PACKED && SKP_VEC >= 4 && SKP_VEC % 4 == 0 \
    && defined(__ENDIAN_LITTLE__)
#define SKP_PACKED_ON 1
#else
#define SKP_PACKED_ON 0
#endif
#if SKP_PACKED_ON
/* The packed path (muscle/packed.py) of the work-items of an interior group of one-byte
 * cells in rows of whole vectors (cols % SKP_VEC == 0): a window of 32-bit words, SKP_VEC / 4
 * of its own per row and one word of halo each side (read only where the shape reaches that
 * side), and skp_muscle_packed computes each output word's 4 cells at once. */
#if SKP_VEC == 4
#define SKP_PW 1
#elif SKP_VEC == 8
#define SKP_PW 2
#elif SKP_VEC == 16
#define SKP_PW 4
#elif SKP_VEC == 32
#define SKP_PW 8
#else
#error "the packed path takes 4, 8, 16 or 32 one-byte columns per work-item"
#endif
#define SKP_PWIN (SKP_PW + 2)
#if SKP_PW == 1
#define SKP_PVT uint
#define SKP_PLOAD(p) (p)[0]
#define SKP_PSTORE(v, p) ((p)[0] = (v))
#else
#define SKP_PVT SKP_CAT(uint, SKP_PW)
#define SKP_PLOAD(p) SKP_CAT(vload, SKP_PW)(0, p)
#define SKP_PSTORE(v, p) SKP_CAT(vstore, SKP_PW)(v, 0, p)
#endif

/* The packed output words of row k of a work-item's cells, from its window pwin. */
#define SKP_PACKED_ROW(k, res)                                                         \
    _Pragma("unroll")                                                                  \
    for (int j = 0; j < SKP_PW; ++j)                                                   \
        (res)[j] = skp_muscle_packed(pwin + (SKP_N + (k)) * SKP_PWIN + 1 + j, SKP_PWIN)

#define SKP_PACKED_PATH                                                                \
    {                                                                                  \
        uint pwin[SKP_WIN_R * SKP_PWIN];                                               \
        _Pragma("unroll")                                                              \
        for (int i = 0; i < SKP_WIN_R; ++i) {                                          \
            __global const uint* row = (__global const uint*)                          \
                (in + (SKP_IDX_T)(rb - SKP_N + i) * cols + cb);                        \
            SKP_PSTORE(*(__global const SKP_PVT*)row, pwin + i * SKP_PWIN + 1);        \
            pwin[i * SKP_PWIN] = SKP_W > 0 ? row[-1] : 0u;                             \
            pwin[i * SKP_PWIN + SKP_PW + 1] = SKP_E > 0 ? row[SKP_PW] : 0u;            \
        }                                                                              \
        _Pragma("unroll")                                                              \
        for (int k = 0; k < SKP_CR; ++k) {                                             \
            uint res[SKP_PW];                                                          \
            SKP_PACKED_ROW(k, res);                                                    \
            __global uint* o = (__global uint*)(out + (SKP_IDX_T)(rb + k) * cols + cb); \
            *(__global SKP_PVT*)o = SKP_PLOAD(res);                                    \
        }                                                                              \
    }

/* The packed path of the edge groups' work-items where rows are whole words, at least two
 * (cols % 4 == 0, cols >= 8; a packed muscle reaches at most 4 columns, one word), and of every
 * group's where rows are whole words but not whole vectors:
 * each window row is a matrix row (the border rule folds its index; constant: words of the
 * constant) read as words, and a halo word beyond the first or last column is made from that
 * row's end words by the border rule on bytes: wrap reads the other end's word, nearest repeats
 * the end byte, reflect reverses the end word, mirror reverses it shifted by one byte with a
 * byte of the next word, constant is the constant's word.  No byte loads and no branch but
 * selects, so an edge item costs about what an interior one does: through the border rule
 * byte by byte, edge groups ran ~2x an interior group's time on the H200 (Life uint8 at
 * 8192^2, 4 x 32 groups of 2 rows by 16 bytes: 47.7 us in all, 39.7 us with them skipped).
 * Items right of the last column read the last vector and store nothing. */
#define SKP_CVAL_WORD ((uint)(uchar)SKP_CVAL_IN * 0x01010101u)
/* bytes 3 2 1 0 of w as bytes 0 1 2 3 */
#define SKP_BSWAP(w) (((w) >> 24) | (((w) >> 8) & 0xff00u) | (((w) << 8) & 0xff0000u) | ((w) << 24))
/* the halo word left of column 0 from the row's words 0 and 1 and last (w0, w1, wl), and the
 * one right of the last column from its last, second last and first (wl, wp, w0) */
#if SKP_MODE == SKP_MODE_WRAP
#define SKP_HALO_LO(w0, w1, wl) (wl)
#define SKP_HALO_HI(wl, wp, w0) (w0)
#elif SKP_MODE == SKP_MODE_NEAREST
#define SKP_HALO_LO(w0, w1, wl) (((w0) & 0xffu) * 0x01010101u)
#define SKP_HALO_HI(wl, wp, w0) (((wl) >> 24) * 0x01010101u)
#elif SKP_MODE == SKP_MODE_REFLECT
#define SKP_HALO_LO(w0, w1, wl) SKP_BSWAP(w0)
#define SKP_HALO_HI(wl, wp, w0) SKP_BSWAP(wl)
#elif SKP_MODE == SKP_MODE_MIRROR
#define SKP_HALO_LO(w0, w1, wl) ((SKP_BSWAP(w0) << 8) | ((w1) & 0xffu))
#define SKP_HALO_HI(wl, wp, w0) ((SKP_BSWAP(wl) >> 8) | ((wp) & 0xff000000u))
#else
#define SKP_HALO_LO(w0, w1, wl) SKP_CVAL_WORD
#define SKP_HALO_HI(wl, wp, w0) SKP_CVAL_WORD
#endif
#define SKP_PACKED_EDGE_WORDS                                                          \
    {                                                                                  \
        uint pwin[SKP_WIN_R * SKP_PWIN];                                               \
        /* rows of whole vectors: the own words as one vector (items past the last      \
         * column read the last one); otherwise word by word, a word past the row's end \
         * being its halo word (the first; no stored cell reads the others) */          \
        const bool whole = cols % SKP_VEC == 0;                                        \
        const int cw = cols >> 2, wb = (whole ? min(cb, cols - SKP_VEC) : cb) >> 2;    \
        _Pragma("unroll")                                                              \
        for (int i = 0; i < SKP_WIN_R; ++i) {                                          \
            const int gr0 = min(rb - SKP_N + i, rows - 1 + SKP_S);                     \
            const int gr = SKP_FOLD_R(gr0, rows);                                      \
            /* constant: a row outside is the constant's (a select, no branch) */      \
            const bool cst = SKP_MODE == SKP_MODE_CONSTANT && gr != gr0;               \
            __global const uint* row = (__global const uint*)in + (SKP_IDX_T)gr * cw;  \
            uint* pw = pwin + i * SKP_PWIN;                                            \
            const uint hi = SKP_HALO_HI(row[cw - 1], row[cw - 2], row[0]);             \
            if (whole) {                                                               \
                SKP_PSTORE(*(__global const SKP_PVT*)(row + wb), pw + 1);              \
            } else {                                                                   \
                _Pragma("unroll")                                                      \
                for (int j = 1; j <= SKP_PW; ++j) {                                    \
                    const uint v = row[min(wb + j - 1, cw - 1)];                       \
                    pw[j] = wb + j - 1 < cw ? v : wb + j - 1 == cw ? hi : 0u;          \
                }                                                                      \
            }                                                                          \
            pw[0] = 0u;                                                                \
            pw[SKP_PW + 1] = 0u;                                                       \
            if (SKP_W > 0) {                                                           \
                const uint inner = row[max(wb, 1) - 1];                                \
                pw[0] = wb > 0 ? inner : SKP_HALO_LO(row[0], row[1], row[cw - 1]);     \
            }                                                                          \
            if (SKP_E > 0) {                                                           \
                const uint inner = row[min(wb + SKP_PW, cw - 1)];                      \
                pw[SKP_PW + 1] = wb + SKP_PW < cw ? inner                              \
                                 : wb + SKP_PW == cw ? hi : 0u;                        \
            }                                                                          \
            _Pragma("unroll")                                                          \
            for (int j = 0; j < SKP_PWIN; ++j)                                         \
                pw[j] = cst ? SKP_CVAL_WORD : pw[j];                                   \
        }                                                                              \
        _Pragma("unroll")                                                              \
        for (int k = 0; k < SKP_CR; ++k) {                                             \
            if (rb + k >= SKP_ROW_END || cb >= cols)                                   \
                break;                                                                 \
            uint res[SKP_PW];                                                          \
            SKP_PACKED_ROW(k, res);                                                    \
            __global uint* o = (__global uint*)(out + (SKP_IDX_T)(rb + k) * cols);     \
            if (whole) {                                                               \
                *(__global SKP_PVT*)(o + wb) = SKP_PLOAD(res);                         \
            } else {                                                                   \
                _Pragma("unroll")                                                      \
                for (int j = 0; j < SKP_PW; ++j)                                       \
                    if (wb + j < cw)                                                   \
                        o[wb + j] = res[j];                                            \
            }                                                                          \
        }                                                                              \
    }

/* The packed path of every work-item where rows are not whole words, or narrower than 8
 * columns (rows of whole words take SKP_PACKED_EDGE_WORDS): the window's words that lie inside
 * the matrix are read as words, the others byte by byte through the border rule (clamped to
 * the reach, as the local tile is: bytes beyond it sit in lanes no stored cell reads); stores
 * skip cells outside. All the group's items take it, so a warp never waits for one edge
 * item: with per-cell edge items (3-4 times an interior item's cost) in warps of interior
 * ones, the H200 ran Life uint8 at 54% of copy against 72% without them. */
#define SKP_PACKED_EDGE_PATH                                                           \
    {                                                                                  \
        uint pwin[SKP_WIN_R * SKP_PWIN];                                               \
        _Pragma("unroll")                                                              \
        for (int i = 0; i < SKP_WIN_R; ++i) {                                          \
            const int gr = min(rb - SKP_N + i, rows - 1 + SKP_S);                      \
            const bool row_in = gr >= 0 && gr < rows;                                  \
            __global const uchar* row =                                                \
                (__global const uchar*)in + (SKP_IDX_T)max(gr, 0) * cols;              \
            _Pragma("unroll")                                                          \
            for (int j = 0; j < SKP_PWIN; ++j) {                                       \
                const int c = cb - 4 + 4 * j;                                          \
                uint wv = 0u;                                                          \
                if (row_in && c >= 0 && c + 4 <= cols) {                               \
                    wv = (cols & 3) == 0 ? *(__global const uint*)(row + c)            \
                                         : as_uint(vload4(0, row + c));                \
                } else {                                                               \
                    _Pragma("unroll")                                                  \
                    for (int b = 0; b < 4; ++b) {                                      \
                        const int gc = clamp(c + b, -SKP_W, cols - 1 + SKP_E);         \
                        wv |= (uint)(uchar)SKP_BORDER_READ(in, gr, gc, rows, cols,     \
                                                           SKP_IN_ST) << (8 * b);      \
                    }                                                                  \
                }                                                                      \
                pwin[i * SKP_PWIN + j] = wv;                                           \
            }                                                                          \
        }                                                                              \
        _Pragma("unroll")                                                              \
        for (int k = 0; k < SKP_CR; ++k) {                                             \
            if (rb + k >= SKP_ROW_END)                                                 \
                break;                                                                 \
            __global uchar* o = (__global uchar*)out + (SKP_IDX_T)(rb + k) * cols;     \
            uint res[SKP_PW];                                                          \
            SKP_PACKED_ROW(k, res);                                                    \
            _Pragma("unroll")                                                          \
            for (int j = 0; j < SKP_PW; ++j) {                                         \
                const int c = cb + 4 * j;                                              \
                const uint r = res[j];                                                 \
                if (c + 4 <= cols && (cols & 3) == 0) {                                \
                    *(__global uint*)(o + c) = r;                                      \
                } else if (c + 4 <= cols) {                                            \
                    vstore4(as_uchar4(r), 0, o + c);                                   \
                } else {                                                               \
                    _Pragma("unroll")                                                  \
                    for (int b = 0; b < 4; ++b)                                        \
                        if (c + b < cols)                                              \
                            o[c + b] = (uchar)(r >> (8 * b));                          \
                }                                                                      \
            }                                                                          \
        }                                                                              \
    }
#endif

__kernel void skelpy_stencil(__global SKP_OUT_ST* restrict out,
                             __global const SKP_IN_ST* restrict in,
                             const int rows, const int cols
#if SKP_LOCAL
                             , __local SKP_IN_ST* tile
#endif
                             SKP_WINDOW_DECL SKP_EXTRA_DECL)
{
    const int lc = (int)get_local_id(0), lr = (int)get_local_id(1);
    const int wgc = (int)get_local_size(0), wgr = (int)get_local_size(1);
    const int tile_r = wgr * SKP_CR, tile_c = wgc * SKP_NCOL;
    const int r0 = SKP_ROW_START + (int)get_group_id(1) * tile_r;
    const int c0 = (int)get_group_id(0) * tile_c;
    /* Uniform per group: does the tile plus its halo lie inside the matrix (and the tile inside
     * the window)? */
    const bool interior = r0 >= SKP_N && c0 >= SKP_W
                          && r0 + tile_r + SKP_S <= rows && c0 + tile_c + SKP_E <= cols
#if SKP_ROW_WINDOW
                          && r0 + tile_r <= row_hi
#endif
                          ;

#if SKP_LOCAL
    const int halo_r = tile_r + SKP_N + SKP_S;
    const int skp_pitch = tile_c + SKP_W + SKP_E;
    if (interior) {
        __global const SKP_IN_ST* src = in + (SKP_IDX_T)(r0 - SKP_N) * cols + (c0 - SKP_W);
        for (int t = lr; t < halo_r; t += wgr)
            for (int u = lc; u < skp_pitch; u += wgc)
                tile[t * skp_pitch + u] = src[(SKP_IDX_T)t * cols + u];
    } else {
        /* halo cells past the reach of the last row or column are never read: clamped, they
         * stay within the border rule's range */
        for (int t = lr; t < halo_r; t += wgr) {
            const int gr = min(r0 - SKP_N + t, rows - 1 + SKP_S);
            for (int u = lc; u < skp_pitch; u += wgc)
                tile[t * skp_pitch + u] = SKP_BORDER_READ(
                    in, gr, min(c0 - SKP_W + u, cols - 1 + SKP_E), rows, cols, SKP_IN_ST);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#else
    const int skp_pitch = cols;
#endif

#if SKP_VEC > 1
    /* The vector path reads global memory only (no tile, no barrier), so interior is decided
     * per work-item: does its own window lie inside the matrix (and its rows inside the
     * window)?  Only the work-items at the border take the edge path, not whole groups: with
     * 8-byte vectors of uint8 a group of 8 x 32 work-items spans 256 columns, and whole edge
     * groups would be 1/8 of a 4096-column matrix. */
    const int rb = r0 + SKP_T(0), cb = c0 + SKP_U(0);
#if SKP_PACKED_ON
    /* packed plans: whole groups take one path (the byte window is not used: the legal
     * window counts words for them) */
    if (interior && cols % SKP_VEC == 0)
        SKP_PACKED_PATH
    else if ((cols & 3) == 0 && cols >= 8)
        SKP_PACKED_EDGE_WORDS
    else
        SKP_PACKED_EDGE_PATH
#else
    const bool item_interior = interior
        || (rb >= SKP_N && cb >= SKP_W && rb + SKP_CR + SKP_S <= rows
            && cb + SKP_VEC + SKP_E <= cols
#if SKP_ROW_WINDOW
            && rb + SKP_CR <= row_hi
#endif
           );
    if (item_interior) {
        if (cols % SKP_VEC == 0)
            SKP_WINDOW_PATH(1)
        else
            SKP_WINDOW_PATH(0)
    } else {
        SKP_CELLS(1, SKP_NB_EDGE, SKP_CALL_EDGE)
    }
#endif
#else
    if (interior) {
        SKP_CELLS(0, SKP_NB_FAST, SKP_CALL_FAST)
    } else {
#if SKP_EDGE_MUSCLE
        SKP_CELLS(1, SKP_NB_EDGE, SKP_CALL_EDGE)
#else
        SKP_CELLS(1, SKP_NB_FAST, SKP_CALL_FAST)
#endif
    }
#endif
}
