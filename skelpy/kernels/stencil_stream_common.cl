/* Streaming stencil passes (stencil_stream.cl): the border rule of each stage and the reads the
 * stage muscles expand to.  The generated header comes first, the muscles follow this file, the
 * kernel comes last.
 *
 * Each stage of a pass has its own border mode (a fused StencilSequence mixes them), so the
 * rule takes the mode as an argument; it is a constant wherever it is used (the stage loop is
 * unrolled), and the compiler keeps only that mode's branch. */

#define SKP_TB_CONSTANT 0
#define SKP_TB_NEAREST 1
#define SKP_TB_WRAP 2
#define SKP_TB_REFLECT 3
#define SKP_TB_MIRROR 4

/* Coordinate x mapped into [0, n) by scipy.ndimage's rule for `mode` (as skp_remap in
 * stencil_common.cl; periodic for reaches beyond the matrix).  Constant: any cell of the matrix
 * (the caller replaces the value by the constant). */
inline int skp_tb_remap(int x, const int n, const int mode)
{
    if ((uint)x < (uint)n)
        return x;
    if (mode == SKP_TB_CONSTANT)
        return clamp(x, 0, n - 1);
    if (mode == SKP_TB_NEAREST)
        return x < 0 ? 0 : n - 1;
    if (mode == SKP_TB_WRAP) {
        if (x >= -n && x < 2 * n)
            return x < 0 ? x + n : x - n;
        const int y = x % n;
        return y < 0 ? y + n : y;
    }
    if (mode == SKP_TB_REFLECT) {
        if (x >= -n && x < 2 * n)
            return x < 0 ? -x - 1 : 2 * n - 1 - x;
        const int p = 2 * n;
        int y = x % p;
        if (y < 0)
            y += p;
        return y < n ? y : p - 1 - y;
    }
    /* mirror: period 2n - 2; a single cell mirrors onto itself */
    if (n == 1)
        return 0;
    if (x > -n && x < 2 * n - 1)
        return x < 0 ? -x : 2 * n - 2 - x;
    const int p = 2 * n - 2;
    int y = x % p;
    if (y < 0)
        y += p;
    return y < n ? y : p - y;
}

/* An extra matrix read around the cell (r, c) at offset (dr, dc) with a stage's border rule;
 * CV is the constant as the matrix's element type. */
#define SKP_TB_AROUND(mode, p, r, c, rows, cols, CV, dr, dc)                                \
    ((mode) == SKP_TB_CONSTANT                                                              \
         ? (((uint)((r) + (dr)) < (uint)(rows) && (uint)((c) + (dc)) < (uint)(cols))        \
                ? (p)[(SKP_IDX_T)((r) + (dr)) * (cols) + ((c) + (dc))] : (CV))              \
         : (p)[(SKP_IDX_T)skp_tb_remap((r) + (dr), (rows), (mode)) * (cols)                 \
               + skp_tb_remap((c) + (dc), (cols), (mode))])
