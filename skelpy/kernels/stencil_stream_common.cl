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

/* Levels of mixed dtypes (SKP_TB_MIXED 1, a sequence float -> int -> uchar) are held as words
 * (SKP_ST: uint, or ulong where a level has 8 bytes): per storage type, a value into a word
 * (exactly the bits a store of that type leaves) and a word back into the value. */
#if defined(SKP_TB_MIXED) && SKP_TB_MIXED
#define SKP_TB_TOW_float(x) ((SKP_ST)as_uint((float)(x)))
#define SKP_TB_OFW_float(w) as_float((uint)(w))
#define SKP_TB_TOW_double(x) ((SKP_ST)as_ulong((double)(x)))
#define SKP_TB_OFW_double(w) as_double((ulong)(w))
#define SKP_TB_TOW_int(x) ((SKP_ST)as_uint((int)(x)))
#define SKP_TB_OFW_int(w) as_int((uint)(w))
#define SKP_TB_TOW_uint(x) ((SKP_ST)((uint)(x)))
#define SKP_TB_OFW_uint(w) ((uint)(w))
#define SKP_TB_TOW_long(x) ((SKP_ST)as_ulong((long)(x)))
#define SKP_TB_OFW_long(w) as_long((ulong)(w))
#define SKP_TB_TOW_ulong(x) ((SKP_ST)((ulong)(x)))
#define SKP_TB_OFW_ulong(w) ((ulong)(w))
#define SKP_TB_TOW_short(x) ((SKP_ST)as_ushort((short)(x)))
#define SKP_TB_OFW_short(w) as_short((ushort)(w))
#define SKP_TB_TOW_ushort(x) ((SKP_ST)((ushort)(x)))
#define SKP_TB_OFW_ushort(w) ((ushort)(w))
#define SKP_TB_TOW_char(x) ((SKP_ST)as_uchar((char)(x)))
#define SKP_TB_OFW_char(w) as_char((uchar)(w))
#define SKP_TB_TOW_uchar(x) ((SKP_ST)((uchar)(x)))
#define SKP_TB_OFW_uchar(w) ((uchar)(w))
#endif
