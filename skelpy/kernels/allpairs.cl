/* AllPairs: C[i, j] = f(row i of A, row j of B) for A (n x d), B (m x d), C (n x m).
 *
 * skelpy_allpairs (the zip/reduce form, SkelCL's optimised AllPairs):
 *   C[i, j] = fold of RED over k of ZIP(A[i, k], B[j, k]), starting from the identity.
 *   A work-group computes a TM x TN block of C. It walks k in steps of TK, staging the TM x TK
 *   slice of A and the TN x TK slice of B in local memory (coalesced loads along k, stored
 *   transposed so that the inner loop reads them by row index), and each work-item keeps an
 *   RM x RN block of accumulators in registers: per k it reads RM values of A and RN of B from
 *   local memory and does RM * RN zip/reduce steps. Work-item (tx, ty) owns rows ty + r*LY and
 *   columns tx + c*LX (strided, so that local reads and global writes are conflict-free and
 *   coalesced). The next slice is fetched into registers while the current one is used.
 *
 * skelpy_allpairs_generic (the generic form): C[i, j] = F(a, b) where the muscle reads the
 *   rows through accessors. With SKP_LOCAL_ROWS the group's TM rows of A and TN rows of B are
 *   staged whole in local memory first (each is read by TN or TM work-items); otherwise the
 *   accessors read global memory.
 *
 * Launch-shape macros (-D): SKP_TM, SKP_TN (block of C per work-group), SKP_TK (slice depth),
 * SKP_RM, SKP_RN (outputs per work-item), SKP_LOCAL_ROWS (generic form), SKP_GENERIC.
 * Local size is (TN / RN, TM / RM).
 * The generated header (skeletons/allpairs.py) supplies SKP_A_ST, SKP_B_ST (storage types),
 * SKP_A_T, SKP_B_T (compute types), SKP_ACC, SKP_ACC_ST, SKP_PARAMS_DECL (extra arguments),
 * and SKP_ZIP(a, b) / SKP_RED(acc, z), or SKP_F(arow, brow) for the generic form.
 */

#ifndef SKP_TM
#define SKP_TM 16
#endif
#ifndef SKP_TN
#define SKP_TN 16
#endif
#ifndef SKP_TK
#define SKP_TK 8
#endif
#ifndef SKP_RM
#define SKP_RM 2
#endif
#ifndef SKP_RN
#define SKP_RN 2
#endif
#ifndef SKP_LOCAL_ROWS
#define SKP_LOCAL_ROWS 0
#endif

/* SKP_UNROLL (set by the host for GPUs) unrolls the k loop too; CPUs gain little from it and
 * pay in compile time. */
#ifndef SKP_UNROLL
#define SKP_UNROLL 0
#endif

#define SKP_LX (SKP_TN / SKP_RN)
#define SKP_LY (SKP_TM / SKP_RM)
#define SKP_NT (SKP_LX * SKP_LY)
/* An odd row stride spreads the transposed stores over the banks. */
#define SKP_AROW (SKP_TM + 1)
#define SKP_BROW (SKP_TN + 1)
/* Slice elements each work-item fetches per slice. */
#define SKP_AF ((SKP_TM * SKP_TK + SKP_NT - 1) / SKP_NT)
#define SKP_BF ((SKP_TN * SKP_TK + SKP_NT - 1) / SKP_NT)

#ifndef SKP_GENERIC

/* How A and B are read: their buffers, or (a fused input expression, skelpy.array) the
 * header's SKP_A_DECL / SKP_LOAD_A(i): the expression's leaves and constants as parameters
 * and its value at element i, evaluated as the slice is fetched. */
#ifndef SKP_A_DECL
#define SKP_A_DECL __global const SKP_A_ST* restrict A
#define SKP_LOAD_A(i) (A[i])
#endif
#ifndef SKP_B_DECL
#define SKP_B_DECL __global const SKP_B_ST* restrict B
#define SKP_LOAD_B(i) (B[i])
#endif

/* Fetch this work-item's share of the slice at k0 into registers (rows clamped to the last
 * real one, k past d read as zero and never used); LOAD(i) reads element i. */
#define SKP_FETCH(LOAD, ST, T0, ROWS, LIMIT, REG, F)                                         \
    for (int f = 0; f < F; ++f) {                                                            \
        const int e = tid + f * SKP_NT;                                                      \
        const int r = e / SKP_TK;                                                            \
        const long gk = k0 + (e % SKP_TK);                                                   \
        const long gr = min((T0) + r, (LIMIT) - 1);                                          \
        REG[f] = (e < (ROWS) * SKP_TK && gk < d) ? (ST)LOAD(gr * d + gk) : (ST)0;            \
    }

#define SKP_STASH(L, ROWS, STRIDE, REG, F)                                                   \
    for (int f = 0; f < F; ++f) {                                                            \
        const int e = tid + f * SKP_NT;                                                      \
        if (e < (ROWS) * SKP_TK)                                                             \
            L[(e % SKP_TK) * (STRIDE) + e / SKP_TK] = REG[f];                                \
    }

#define SKP_STEP(kk)                                                                         \
    {                                                                                        \
        SKP_A_T a[SKP_RM];                                                                   \
        SKP_B_T b[SKP_RN];                                                                   \
        _Pragma("unroll")                                                                    \
        for (int r = 0; r < SKP_RM; ++r)                                                     \
            a[r] = (SKP_A_T)As[(kk) * SKP_AROW + ty + r * SKP_LY];                           \
        _Pragma("unroll")                                                                    \
        for (int c = 0; c < SKP_RN; ++c)                                                     \
            b[c] = (SKP_B_T)Bs[(kk) * SKP_BROW + tx + c * SKP_LX];                           \
        _Pragma("unroll")                                                                    \
        for (int r = 0; r < SKP_RM; ++r) {                                                   \
            _Pragma("unroll")                                                                \
            for (int c = 0; c < SKP_RN; ++c)                                                 \
                SKP_PART[r][c] = SKP_RED(SKP_PART[r][c], SKP_ZIP(a[r], b[c]));               \
        }                                                                                    \
    }

/* Float folds along k (SKP_BLOCKED, set by the host) accumulate each output in chunks of
 * `chunk_tiles` slices (about sqrt(d) elements, chosen by the host): part[][] folds a chunk,
 * then is folded into acc[][]. A running sum over all of d would round d times at the
 * magnitude of the result. For a sum (SKP_COMPENSATED: the reduce muscle computes a + b), each
 * chunk is added to acc with TwoSum and what that addition rounds off starts the next chunk's
 * part[][] (compensated summation with the compensation kept in part: no extra registers), so
 * the error is that of one chunk's serial fold -- ~sqrt(d) roundings at the magnitude of a
 * chunk, a small fraction of the result's -- plus a rounding or two, whatever d is. Other
 * float folds restart part[][] from the identity (blocking alone: error ~ sqrt(d) roundings,
 * not d). The cost is one more register per output and a few operations per output per chunk.
 * Integer folds are exact: they fold into acc[][] directly. */
#ifndef SKP_BLOCKED
#define SKP_BLOCKED 0
#endif
#ifndef SKP_COMPENSATED
#define SKP_COMPENSATED 0
#endif
#if SKP_BLOCKED
#define SKP_PART part
#else
#define SKP_PART acc
#endif

__kernel __attribute__((reqd_work_group_size(SKP_LX, SKP_LY, 1)))
void skelpy_allpairs(__global SKP_ACC_ST* restrict C, SKP_A_DECL,
                     SKP_B_DECL, const long n, const long m,
                     const long d, const int chunk_tiles,
                     const SKP_ACC_ST identity_st SKP_PARAMS_DECL)
{
    __local SKP_A_ST As[SKP_TK * SKP_AROW];
    __local SKP_B_ST Bs[SKP_TK * SKP_BROW];
    const int tx = (int)get_local_id(0);
    const int ty = (int)get_local_id(1);
    const int tid = ty * SKP_LX + tx;
    const long i0 = (long)get_group_id(1) * SKP_TM;
    const long j0 = (long)get_group_id(0) * SKP_TN;

    SKP_ACC acc[SKP_RM][SKP_RN];
#pragma unroll
    for (int r = 0; r < SKP_RM; ++r) {
#pragma unroll
        for (int c = 0; c < SKP_RN; ++c)
            acc[r][c] = (SKP_ACC)identity_st;
    }
#if SKP_BLOCKED
    SKP_ACC part[SKP_RM][SKP_RN];
#pragma unroll
    for (int r = 0; r < SKP_RM; ++r) {
#pragma unroll
        for (int c = 0; c < SKP_RN; ++c)
            part[r][c] = (SKP_ACC)identity_st;
    }
    int chunk_left = chunk_tiles;
#endif

    SKP_A_ST ra[SKP_AF];
    SKP_B_ST rb[SKP_BF];
    long k0 = 0;
    SKP_FETCH(SKP_LOAD_A, SKP_A_ST, i0, SKP_TM, n, ra, SKP_AF)
    SKP_FETCH(SKP_LOAD_B, SKP_B_ST, j0, SKP_TN, m, rb, SKP_BF)
    for (; k0 < d; ) {
        SKP_STASH(As, SKP_TM, SKP_AROW, ra, SKP_AF)
        SKP_STASH(Bs, SKP_TN, SKP_BROW, rb, SKP_BF)
        barrier(CLK_LOCAL_MEM_FENCE);
        const long here = k0;
        k0 += SKP_TK;
        if (k0 < d) {                   /* the next slice is in flight during the steps */
            SKP_FETCH(SKP_LOAD_A, SKP_A_ST, i0, SKP_TM, n, ra, SKP_AF)
            SKP_FETCH(SKP_LOAD_B, SKP_B_ST, j0, SKP_TN, m, rb, SKP_BF)
        }
#if SKP_UNROLL
        if (here + SKP_TK <= d) {       /* full slices: unrolled */
#pragma unroll
            for (int kk = 0; kk < SKP_TK; ++kk)
                SKP_STEP(kk)
        } else {                        /* the last, partial slice: kept small (registers) */
            const int kmax = (int)(d - here);
#pragma unroll 1
            for (int kk = 0; kk < kmax; ++kk)
                SKP_STEP(kk)
        }
#else
        const int kmax = (int)min((long)SKP_TK, d - here);
        for (int kk = 0; kk < kmax; ++kk)
            SKP_STEP(kk)
#endif
        barrier(CLK_LOCAL_MEM_FENCE);
#if SKP_BLOCKED
        if (--chunk_left == 0 || k0 >= d) {     /* the chunk is complete (or d is) */
#pragma unroll
            for (int r = 0; r < SKP_RM; ++r) {
#pragma unroll
                for (int c = 0; c < SKP_RN; ++c) {
#if SKP_COMPENSATED
                    const SKP_ACC x = acc[r][c], y = part[r][c];
                    const SKP_ACC s = x + y;
                    const SKP_ACC yy = s - x;
                    const SKP_ACC err = (x - (s - yy)) + (y - yy);
                    acc[r][c] = s;
                    part[r][c] = isfinite(s) ? err : (SKP_ACC)0;
#else
                    acc[r][c] = SKP_RED(acc[r][c], part[r][c]);
                    part[r][c] = (SKP_ACC)identity_st;
#endif
                }
            }
            chunk_left = chunk_tiles;
        }
#endif
    }

#pragma unroll
    for (int r = 0; r < SKP_RM; ++r) {
        const long i = i0 + ty + r * SKP_LY;
#pragma unroll
        for (int c = 0; c < SKP_RN; ++c) {
            const long j = j0 + tx + c * SKP_LX;
            if (i < n && j < m)
#if SKP_COMPENSATED
                C[i * m + j] = (SKP_ACC_ST)(acc[r][c] + part[r][c]);
#else
                C[i * m + j] = (SKP_ACC_ST)acc[r][c];
#endif
        }
    }
}

#else  /* SKP_GENERIC */

__kernel __attribute__((reqd_work_group_size(SKP_LX, SKP_LY, 1)))
void skelpy_allpairs_generic(__global SKP_ACC_ST* restrict C,
                             __global const SKP_A_ST* restrict A,
                             __global const SKP_B_ST* restrict B, const long n, const long m,
                             const long d
#if SKP_LOCAL_ROWS
                             , __local SKP_A_ST* As, __local SKP_B_ST* Bs
#endif
                             SKP_PARAMS_DECL)
{
    const int tx = (int)get_local_id(0);
    const int ty = (int)get_local_id(1);
    const long i0 = (long)get_group_id(1) * SKP_TM;
    const long j0 = (long)get_group_id(0) * SKP_TN;
#if SKP_LOCAL_ROWS
    const int tid = ty * SKP_LX + tx;
    const long rows_a = min((long)SKP_TM, n - i0);
    const long rows_b = min((long)SKP_TN, m - j0);
    for (long e = tid; e < rows_a * d; e += SKP_NT)
        As[e] = A[i0 * d + e];
    for (long e = tid; e < rows_b * d; e += SKP_NT)
        Bs[e] = B[j0 * d + e];
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
#pragma unroll
    for (int r = 0; r < SKP_RM; ++r) {
        const long li = ty + r * SKP_LY;
        const long i = i0 + li;
#pragma unroll
        for (int c = 0; c < SKP_RN; ++c) {
            const long lj = tx + c * SKP_LX;
            const long j = j0 + lj;
            if (i < n && j < m) {
#if SKP_LOCAL_ROWS
                C[i * m + j] = (SKP_ACC_ST)SKP_F(As + li * d, Bs + lj * d);
#else
                C[i * m + j] = (SKP_ACC_ST)SKP_F(A + i * d, B + j * d);
#endif
            }
        }
    }
}

#endif  /* SKP_GENERIC */
