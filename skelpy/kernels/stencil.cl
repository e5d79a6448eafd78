/* The stencil kernel; stencil_common.cl (macros, border rule) and the muscles come first.
 * See stencil_common.cl for the launch macros and the layout of work. */

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
        const int t = lr + k * wgr;                                                    \
        const int skp_r = r0 + t;                                                      \
        _Pragma("unroll")                                                              \
        for (int m = 0; m < SKP_CC; ++m) {                                             \
            const int u = lc + m * wgc;                                                \
            const int skp_c = c0 + u;                                                  \
            if (CHECK && (skp_r >= rows || skp_c >= cols))                             \
                continue;                                                              \
            const SKP_IDX_T skp_idx = (SKP_IDX_T)skp_r * cols + skp_c;                 \
            SKP_SPACE_IN const SKP_IN_ST* skp_nb = NBPTR(t, u);                        \
            out[skp_idx] = (SKP_OUT_ST)(CALL);                                         \
        }                                                                              \
    }

__kernel void skelpy_stencil(__global SKP_OUT_ST* restrict out,
                             __global const SKP_IN_ST* restrict in,
                             const int rows, const int cols
#if SKP_LOCAL
                             , __local SKP_IN_ST* restrict tile
#endif
                             SKP_EXTRA_DECL)
{
    const int lc = (int)get_local_id(0), lr = (int)get_local_id(1);
    const int wgc = (int)get_local_size(0), wgr = (int)get_local_size(1);
    const int tile_r = wgr * SKP_CR, tile_c = wgc * SKP_CC;
    const int r0 = (int)get_group_id(1) * tile_r, c0 = (int)get_group_id(0) * tile_c;
    /* Uniform per group: does the tile plus its halo lie inside the matrix? */
    const bool interior = r0 >= SKP_N && c0 >= SKP_W
                          && r0 + tile_r + SKP_S <= rows && c0 + tile_c + SKP_E <= cols;

#if SKP_LOCAL
    const int halo_r = tile_r + SKP_N + SKP_S;
    const int skp_pitch = tile_c + SKP_W + SKP_E;
    if (interior) {
        __global const SKP_IN_ST* src = in + (SKP_IDX_T)(r0 - SKP_N) * cols + (c0 - SKP_W);
        for (int t = lr; t < halo_r; t += wgr)
            for (int u = lc; u < skp_pitch; u += wgc)
                tile[t * skp_pitch + u] = src[(SKP_IDX_T)t * cols + u];
    } else {
        for (int t = lr; t < halo_r; t += wgr) {
            const int gr = r0 - SKP_N + t;
            for (int u = lc; u < skp_pitch; u += wgc)
                tile[t * skp_pitch + u] =
                    SKP_BORDER_READ(in, gr, c0 - SKP_W + u, rows, cols, SKP_CVAL_IN);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#else
    const int skp_pitch = cols;
#endif

    if (interior) {
        SKP_CELLS(0, SKP_NB_FAST, SKP_CALL_FAST)
    } else {
#if SKP_EDGE_MUSCLE
        SKP_CELLS(1, SKP_NB_EDGE, SKP_CALL_EDGE)
#else
        SKP_CELLS(1, SKP_NB_FAST, SKP_CALL_FAST)
#endif
    }
}
