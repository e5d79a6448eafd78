/* The border rule of the stencil kernels (stencil_common.cl, stencil_stream_common.cl): a
 * coordinate outside [0, n) mapped into it as scipy.ndimage does (ni_support.c,
 * NI_InitFilterOffsets).  `mode` is a compile-time constant wherever these are called, so the
 * compiler keeps one mode's code. */

#define SKP_MODE_CONSTANT 0
#define SKP_MODE_NEAREST 1
#define SKP_MODE_WRAP 2
#define SKP_MODE_REFLECT 3
#define SKP_MODE_MIRROR 4

/* One fold of a periodic mode: x reflected or shifted once across the edge it is beyond; exact
 * for x at most one period outside (x in [-n, 2n), mirror (-n, 2n - 1)).  Both candidates are
 * computed first and then selected: no branch.  With the arithmetic under the condition
 * (`x < 0 ? -x - 1 : ...`) clang kept reflect's folds as branches; a row index is invariant
 * in PoCL's inner work-item loop, so each such branch is an unswitching candidate, and with
 * many of them LLVM no longer splits the work-item loop into interior and edge copies: PoCL
 * then vectorized both under masks, the interior paying the edge's gathers (a 5x5 stencil with
 * reflect 7x slower than nearest).  Mirror's `x < 0 ? -x : x` on its own would become
 * llvm.abs, which oclgrind does not know. */
inline int skp_border_once(const int x, const int n, const int mode)
{
    const int below = mode == SKP_MODE_WRAP ? x + n : mode == SKP_MODE_REFLECT ? -x - 1 : -x;
    const int above = mode == SKP_MODE_WRAP ? x - n
                      : mode == SKP_MODE_REFLECT ? 2 * n - 1 - x : 2 * n - 2 - x;
    const int y = x >= n ? above : x;
    return x < 0 ? below : y;
}

/* The same fold with the high side tested first (skp_border_offset: folds of offsets on
 * opposite sides must not look alike, see there); mirror's low side as x - 2 min(x, 0). */
inline int skp_border_once_hi(const int x, const int n, const int mode)
{
    const int below = mode == SKP_MODE_WRAP ? x + n : mode == SKP_MODE_REFLECT ? -x - 1 : 0;
    const int above = mode == SKP_MODE_WRAP ? x - n
                      : mode == SKP_MODE_REFLECT ? 2 * n - 1 - x : 2 * n - 2 - x;
    const int y = mode == SKP_MODE_MIRROR ? x - 2 * (x < 0 ? x : 0) : x < 0 ? below : x;
    return x >= n ? above : y;
}

/* x mapped into [0, n) for any x (the periodic modes fold far reaches back again and again):
 * one fold when x is at most n outside, else a division.  For kernels whose reads are not
 * bounded by a compile-time reach (the streaming passes' overlapped tiles), and for reaches over
 * SKP_FOLD_MAX_REACH (below). */
inline int skp_border_index(int x, const int n, const int mode)
{
    if ((uint)x < (uint)n)
        return x;
    if (mode == SKP_MODE_CONSTANT || mode == SKP_MODE_NEAREST)
        return clamp(x, 0, n - 1);
    if (mode == SKP_MODE_MIRROR && n == 1)
        return 0;
    if (mode == SKP_MODE_MIRROR ? (x > -n && x < 2 * n - 1) : (x >= -n && x < 2 * n))
        return skp_border_once(x, n, mode);
    const int p = mode == SKP_MODE_WRAP ? n : mode == SKP_MODE_REFLECT ? 2 * n : 2 * n - 2;
    int y = x % p;
    if (y < 0)
        y += p;
    return mode == SKP_MODE_WRAP ? y : y < n ? y : (mode == SKP_MODE_REFLECT ? p - 1 - y : p - y);
}

/* The most folds skp_border_fold and skp_border_offset unroll: each edge read costs `reach`
 * compares and selects, so beyond it (a 129 x 129 neighbourhood, or a shape declared far wider
 * than the offsets read) a read maps its index with skp_border_index's division instead.  A
 * declared reach of 2^31 - 1 in reflect mode otherwise looped 2^31 times per edge read (a
 * 5 x 6 matrix took 6 minutes).  `reach` is a compile-time constant: a kernel keeps one way. */
#define SKP_FOLD_MAX_REACH 64

/* x mapped into [0, n) for x within `reach` of the matrix, x in [-reach, n - 1 + reach] (the
 * caller keeps x there: reads of computed cells are, and a local tile's halo beyond the matrix
 * is clamped first).  Constant: the nearest cell (callers replace the value).
 *
 * Written for PoCL's vectorizer, which runs a work-group's work-items as the lanes of one loop
 * and gives up on the whole loop (interior work-groups too) for any of:
 * - a division (it may trap, so it cannot run under a mask): `reach` folds instead, a constant,
 *   so the loop unrolls into compares and selects; one fold serves the common one-cell reach,
 *   and each brings x at least one cell closer, so `reach` folds serve even a matrix smaller
 *   than the reach.  With `%` here wrap, reflect and mirror ran 8-125x slower than nearest;
 * - vector-typed instructions, which LLVM's SLP vectorizer makes of the row and column clamps
 *   (clamp() is min/max): selects instead, nearest included;
 * - a branch in the edge code on a row index (see skp_border_once); mirror's single-cell case
 *   is a mask, not a branch, for the same reason (edge groups' reads fold by offset,
 *   skp_border_offset, which masks the offset instead).
 * `static`: no out-of-line copy, whose loop (reach unknown there) clang warns it cannot unroll. */
static inline int skp_border_fold(int x, const int n, const int mode, const int reach)
{
    if (mode == SKP_MODE_CONSTANT || mode == SKP_MODE_NEAREST)
        return x < 0 ? 0 : x >= n ? n - 1 : x;
    if (reach > SKP_FOLD_MAX_REACH)
        return skp_border_index(x, n, mode);
#pragma unroll
    for (int i = 0; i < reach; ++i)
        x = skp_border_once(x, n, mode);
    /* mirror: a single cell mirrors onto itself (a select on an invariant, not a branch) */
    return mode == SKP_MODE_MIRROR ? x & -(n != 1) : x;
}

/* c + d mapped into [0, n) for a cell c in [0, n) and an offset d (a compile-time constant
 * wherever the muscle's offsets are: the selects on d then fold away): c + d is at most |d|
 * cells outside, so |d| folds serve (none for d = 0), and only the side it can be beyond is
 * tested first.  Besides saving work in edge groups, this keeps the folds of different offsets
 * apart: folding every offset alike made the folds of c - 2 and c + 2 (and of c - 1 and
 * c + 1) isomorphic, LLVM's SLP vectorizer paired them into vector instructions, and PoCL's
 * work-item loop over an edge group then did not vectorize at all (a 5x5 LoG's periodic modes
 * 1.3-1.6x nearest where edge groups are a quarter of all, 4x64 groups at 512^2). */
static inline int skp_border_offset(const int c, const int d, const int n, const int mode,
                                    const int reach)
{
    /* mirror: a single cell mirrors onto itself, so there the offset counts as 0 (a mask on
     * the offset, invariant, not on the result: LLVM then still sees consecutive cells read
     * consecutive columns and loads them as vectors; masking the result cost mirror 1.6x) */
    int x = c + (mode == SKP_MODE_MIRROR ? d & -(n != 1) : d);
    if (mode == SKP_MODE_CONSTANT || mode == SKP_MODE_NEAREST)
        return d < 0 ? (x < 0 ? 0 : x) : (x >= n ? n - 1 : x);
    if (reach > SKP_FOLD_MAX_REACH)
        return skp_border_index(x, n, mode);
    /* the first fold: x can only be beyond the side d points to (mirror's low side written
     * as x - 2 min(x, 0): `x < 0 ? -x : x` becomes llvm.abs, see skp_border_once) */
    const int lo = mode == SKP_MODE_WRAP ? x + n : -x - 1;
    const int hi = mode == SKP_MODE_WRAP ? x - n
                   : mode == SKP_MODE_REFLECT ? 2 * n - 1 - x : 2 * n - 2 - x;
    const int low_fold = mode == SKP_MODE_MIRROR ? x - 2 * (x < 0 ? x : 0) : x < 0 ? lo : x;
    x = d < 0 ? low_fold : x >= n ? hi : x;
    /* the others (a matrix smaller than the offset): either side */
    const int folds = d < 0 ? -d : d;
#pragma unroll
    for (int i = 1; i < reach; ++i) {
        const int y = d < 0 ? skp_border_once(x, n, mode) : skp_border_once_hi(x, n, mode);
        x = i < folds ? y : x;
    }
    return x;
}
