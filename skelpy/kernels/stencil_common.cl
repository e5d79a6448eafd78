/* Stencil: out[r, c] = f(neighbourhood of in around (r, c), extras...) on a rows x cols matrix.
 * This file holds the macros and the border rule; the generated muscles follow it, and
 * stencil.cl (the kernel) comes last.
 *
 * The NDRange is 2-D: dimension 0 runs along columns (so consecutive work-items touch
 * consecutive addresses), dimension 1 along rows.  A work-group of WGR x WGC work-items owns
 * a tile of (WGR * SKP_CR) x (WGC * SKP_CC) output cells; work-item (lr, lc) computes the cells
 * (lr + k * WGR, lc + m * WGC) of that tile (interleaved coarsening keeps accesses coalesced).
 *
 * Launch-shape macros (-D, chosen by the tuner):
 *   SKP_LOCAL   1: each group stages its tile plus the halo in local memory first and the
 *                  muscle reads from there ([Cummins 2018] §2.4.2);
 *               0: the muscle reads global memory directly (caches do the reuse; on CPUs this
 *                  often wins).
 *   SKP_CR      cells per work-item along rows    (coarsening)
 *   SKP_CC      cells per work-item along columns (coarsening)
 *   SKP_VEC     1: scalar accesses.  2 to 16 (direct reads only, SKP_CC 1): each work-item
 *                  computes SKP_CR consecutive rows by SKP_VEC consecutive columns from a
 *                  register window filled with vector loads, and stores vectors.  On an H200
 *                  a 5-point stencil went from 83% to 95% of copy bandwidth at 4096^2.  The
 *                  tuner's `vec` counts 4-byte words: 1- and 2-byte elements get 4 or 2
 *                  columns per word (stencil_plan.vector_columns), up to a 16-byte uchar16.
 * Work-group rows x cols are not macros: they come from get_local_size(), so one program
 * serves every work-group shape.
 *
 * Borders.  A group whose tile plus halo lies wholly inside the matrix ("interior" group,
 * uniform per group) reads without any index check.  Only groups touching an edge remap
 * indices with scipy.ndimage's rule for SKP_MODE (stencil_border.cl, which comes first: a
 * muscle's read folds by its offset, skp_border_offset, a staged halo cell by the reach,
 * skp_border_fold; compares and selects only, no branch and no division, so PoCL still splits
 * its work-item loop into interior and edge copies and vectorizes both) or substitute the
 * constant.
 *
 * The generated header (skeletons/stencil.py) supplies:
 *   SKP_IN_ST, SKP_OUT_ST       storage types of input and output elements
 *   SKP_N, SKP_S, SKP_E, SKP_W  the stencil shape (reach north/south/east/west, >= 0)
 *   SKP_MODE                    border mode (SKP_MODE_CONSTANT ... SKP_MODE_MIRROR)
 *   SKP_CVAL_IN, SKP_CVAL_<st>  the constant border value as the input's and as each other
 *                               storage type in use
 *   skp_pick_<st>(inside, v)    (constant only) v where inside, else SKP_CVAL_<st>
 *   SKP_IDX_T                   int, or long for matrices of 2^31 cells or more
 *   SKP_DR(i), SKP_DC(i)        offset filters applied to muscle reads (identity, or a clamp
 *                               into the shape when offsets cannot be checked statically)
 *   SKP_EDGE_MUSCLE             1 when edge groups need their own muscle (no local tile, or
 *                               extra matrices read as neighbourhoods)
 *   SKP_EXTRA_DECL              the kernel parameters of the extra arguments (leading comma)
 *   SKP_CALL_FAST, SKP_CALL_EDGE  the muscle calls for interior and edge groups, written in
 *                               terms of skp_nb, skp_pitch, skp_idx, skp_r, skp_c, rows, cols
 * and, after this file, the muscle functions skp_muscle_fast (and skp_muscle_edge).
 */

#ifndef SKP_LOCAL
#define SKP_LOCAL 1
#endif
#ifndef SKP_CR
#define SKP_CR 1
#endif
#ifndef SKP_CC
#define SKP_CC 1
#endif
#ifndef SKP_VEC
#define SKP_VEC 1
#endif

/* The border rule (stencil_border.cl, which comes first) with the reach of each dimension:
 * every read of a computed cell lies within it (the kernel clamps the halo that a local tile
 * stages beyond the matrix's last row or column: no computed cell reads it). */
#define SKP_REACH_R (SKP_N > SKP_S ? SKP_N : SKP_S)
#define SKP_REACH_C (SKP_W > SKP_E ? SKP_W : SKP_E)

/* Element (r, c) of a rows x cols matrix p of storage type T, with the border rule applied.
 * Constant reads the nearest cell and hands it to skp_pick_<T>(inside, v) (the generated
 * header defines one per storage type: `inside ? v : the constant`): a function's arguments
 * are evaluated unconditionally, so no branch goes around the load (it would sink into a
 * branch on the row, see skp_border_fold).  `inside` compares the folded indices with the
 * given ones in one test: a row test and a column test side by side let LLVM's SLP vectorizer
 * pair them into vector instructions, and PoCL's work-item loop does not vectorize a loop that
 * holds any (a 5x5 LoG and Game of Life then ran 3x slower than nearest). */
#define SKP_PASTE_(a, b) a##b
#define SKP_PASTE(a, b) SKP_PASTE_(a, b)
#define SKP_FOLD_R(r, rows) skp_border_fold((r), (rows), SKP_MODE, SKP_REACH_R)
#define SKP_FOLD_C(c, cols) skp_border_fold((c), (cols), SKP_MODE, SKP_REACH_C)
#define SKP_FOLDED_READ(p, r, c, rows, cols) \
    ((p)[(SKP_IDX_T)SKP_FOLD_R(r, rows) * (cols) + SKP_FOLD_C(c, cols)])
/* The same for a computed cell (r, c), inside the matrix, at offset (dr, dc): folds by the
 * offset (skp_border_offset), what the muscle's reads in edge groups use. */
#define SKP_FOLD_AT_R(r, d, rows) skp_border_offset((r), (d), (rows), SKP_MODE, SKP_REACH_R)
#define SKP_FOLD_AT_C(c, d, cols) skp_border_offset((c), (d), (cols), SKP_MODE, SKP_REACH_C)
#define SKP_FOLDED_READ_AT(p, r, c, dr, dc, rows, cols) \
    ((p)[(SKP_IDX_T)SKP_FOLD_AT_R(r, dr, rows) * (cols) + SKP_FOLD_AT_C(c, dc, cols)])
#if SKP_MODE == SKP_MODE_CONSTANT
#define SKP_BORDER_READ(p, r, c, rows, cols, T) \
    SKP_PASTE(skp_pick_, T)(((SKP_FOLD_R(r, rows) ^ (r)) | (SKP_FOLD_C(c, cols) ^ (c))) == 0, \
                            SKP_FOLDED_READ(p, r, c, rows, cols))
#define SKP_BORDER_READ_AT(p, r, c, dr, dc, rows, cols, T) \
    SKP_PASTE(skp_pick_, T)(((SKP_FOLD_AT_R(r, dr, rows) ^ ((r) + (dr))) \
                             | (SKP_FOLD_AT_C(c, dc, cols) ^ ((c) + (dc)))) == 0, \
                            SKP_FOLDED_READ_AT(p, r, c, dr, dc, rows, cols))
#else
#define SKP_BORDER_READ(p, r, c, rows, cols, T) SKP_FOLDED_READ(p, r, c, rows, cols)
#define SKP_BORDER_READ_AT(p, r, c, dr, dc, rows, cols, T) \
    SKP_FOLDED_READ_AT(p, r, c, dr, dc, rows, cols)
#endif

/* Reads the muscle's accessors expand to.  DIRECT: the pointer is at the cell, the pitch is
 * the row length (of the matrix, or of the local tile).  EDGE_IN: the input neighbourhood in
 * an edge group (from the tile when staged, else global with remapping).  EDGE: an extra
 * matrix read as a neighbourhood in an edge group. */
#define SKP_READ_DIRECT(p, pitch, dr, dc) ((p)[SKP_DR(dr) * (pitch) + SKP_DC(dc)])
/* SKP_SPACE_NB: where the fast muscle's neighbourhood lives (the register window of the
 * vector path, else the same place as the input's). */
#if SKP_VEC > 1
#define SKP_SPACE_NB __private
#elif SKP_LOCAL
#define SKP_SPACE_NB __local
#else
#define SKP_SPACE_NB __global
#endif
#if SKP_LOCAL
#define SKP_SPACE_IN __local
#define SKP_READ_EDGE_IN(p, pitch, r, c, rows, cols, T, dr, dc) \
    SKP_READ_DIRECT(p, pitch, dr, dc)
#else
#define SKP_SPACE_IN __global
#define SKP_READ_EDGE_IN(p, pitch, r, c, rows, cols, T, dr, dc) \
    SKP_BORDER_READ_AT(p, r, c, SKP_DR(dr), SKP_DC(dc), rows, cols, T)
#endif
#define SKP_READ_EDGE(p, r, c, rows, cols, T, dr, dc) \
    SKP_BORDER_READ_AT(p, r, c, SKP_DR(dr), SKP_DC(dc), rows, cols, T)

