/* Fused stencil sequences (stencil_fused.cl): the launch macros and the reads of the stage
 * muscles, which come after this file and before the kernel.  See stencil_fused.cl. */

#ifndef SKP_FU_WC
#define SKP_FU_WC 32
#endif
#ifndef SKP_FU_WR
#define SKP_FU_WR 8
#endif
#ifndef SKP_FU_CR
#define SKP_FU_CR 1
#endif
#ifndef SKP_FU_CC
#define SKP_FU_CC 1
#endif
#ifndef SKP_FU_FLAT
#define SKP_FU_FLAT 1
#endif

#define SKP_FU_TH (SKP_FU_WR * SKP_FU_CR)
#define SKP_FU_TW (SKP_FU_WC * SKP_FU_CC)
#define SKP_FU_CAT_(a, b) a##b
#define SKP_FU_CAT(a, b) SKP_FU_CAT_(a, b)
/* rows and columns of level k's region (its pitch) */
#define SKP_FU_RR(k) (SKP_FU_TH + SKP_FU_CAT(SKP_FU_HN, k) + SKP_FU_CAT(SKP_FU_HS, k))
#define SKP_FU_RC(k) (SKP_FU_TW + SKP_FU_CAT(SKP_FU_GW, k) + SKP_FU_CAT(SKP_FU_GE, k))

/* A stage's read of the level before it in an edge tile: p is the level's region, whose
 * first cell is matrix cell (rb, cb); (r, c) the cell computed; the stage's rule applies. */
#define SKP_FU_READ_EDGE(mode, p, pitch, r, c, rows, cols, rb, cb, CV, dr, dc)              \
    ((mode) == SKP_TB_CONSTANT                                                              \
         ? (((uint)((r) + (dr)) < (uint)(rows) && (uint)((c) + (dc)) < (uint)(cols))        \
                ? (p)[((r) + (dr) - (rb)) * (pitch) + ((c) + (dc) - (cb))] : (CV))          \
         : (p)[(skp_tb_remap((r) + (dr), (rows), (mode)) - (rb)) * (pitch)                  \
               + (skp_tb_remap((c) + (dc), (cols), (mode)) - (cb))])

