/* Streaming stencil passes (stencil_stream.cl): the border rule of each stage and the reads the
 * stage muscles expand to.  The generated header comes first, the muscles follow this file, the
 * kernel comes last.
 *
 * Each stage of a pass has its own border mode (a fused StencilSequence mixes them), so the
 * rule takes the mode as an argument; it is a constant wherever it is used (the stage loop is
 * unrolled), and the compiler keeps only that mode's branch. */

/* The border rule is stencil_border.cl's (it comes first), the same as the single-step
 * kernel's; skp_border_index serves any reach (the overlapped tiles read far outside). */
#define SKP_TB_CONSTANT SKP_MODE_CONSTANT
#define SKP_TB_NEAREST SKP_MODE_NEAREST
#define SKP_TB_WRAP SKP_MODE_WRAP
#define SKP_TB_REFLECT SKP_MODE_REFLECT
#define SKP_TB_MIRROR SKP_MODE_MIRROR
#define skp_tb_remap skp_border_index

/* An extra matrix read around the cell (r, c) at offset (dr, dc) with a stage's border rule;
 * CV is the constant as the matrix's element type. */
#define SKP_TB_AROUND(mode, p, r, c, rows, cols, CV, dr, dc)                                \
    ((mode) == SKP_TB_CONSTANT                                                              \
         ? (((uint)((r) + (dr)) < (uint)(rows) && (uint)((c) + (dc)) < (uint)(cols))        \
                ? (p)[(SKP_IDX_T)((r) + (dr)) * (cols) + ((c) + (dc))] : (CV))              \
         : (p)[(SKP_IDX_T)skp_tb_remap((r) + (dr), (rows), (mode)) * (cols)                 \
               + skp_tb_remap((c) + (dc), (cols), (mode))])
