/* Map and Zip: out[i] = f(in_0[i], ..., extras) for i in [0, n).
 *
 * Launch-shape macros (-D, chosen by the tuner):
 *   SKP_COARSEN   items (chunks) each work-item computes                     1, 2, 4, ...
 *   SKP_BLOCKED   0: interleaved - a group's items are consecutive per step, loads coalesce
 *                 1: blocked     - each work-item takes SKP_COARSEN consecutive chunks
 *   SKP_VW        elements per chunk: vector loads/stores of that width (1 = scalar)
 *
 * The generated header (skeletons/elementwise.py) supplies:
 *   SKP_PARAMS_DECL       the kernel parameters after `out` and `n` (with a leading comma)
 *   SKP_PARAMS_PASS       their names, to pass them on (with a leading comma)
 *   SKP_OUT_ST            storage type of the output
 *   SKP_ELEMENT(i)        the muscle applied to element i, reading every input at i
 *   SKP_VLOAD(j)          declarations loading chunk j of every vectorisable input (SKP_VW > 1)
 *   SKP_ELEMENT_V(i, c)   the muscle applied to element i = j*SKP_VW + c, reading component c
 *                         of the loaded chunk
 */

#ifndef SKP_COARSEN
#define SKP_COARSEN 1
#endif
#ifndef SKP_BLOCKED
#define SKP_BLOCKED 0
#endif
#ifndef SKP_VW
#define SKP_VW 1
#endif

#define SKP_CAT_(a, b) a##b
#define SKP_CAT(a, b) SKP_CAT_(a, b)

#if SKP_VW > 1
#define SKP_VLOADN SKP_CAT(vload, SKP_VW)
#define SKP_VSTOREN SKP_CAT(vstore, SKP_VW)
#endif

inline void skp_chunk(__global SKP_OUT_ST* restrict out, const long n, const long j
                      SKP_PARAMS_DECL)
{
#if SKP_VW == 1
    if (j < n)
        out[j] = (SKP_OUT_ST)(SKP_ELEMENT(j));
#else
    const long first = j * SKP_VW;
    if (first + SKP_VW <= n) {
        SKP_VLOAD(j)
        SKP_OUT_ST r[SKP_VW];
#pragma unroll
        for (int c = 0; c < SKP_VW; ++c)
            r[c] = (SKP_OUT_ST)(SKP_ELEMENT_V(first + c, c));
        SKP_VSTOREN(SKP_VLOADN(0, r), j, out);
    } else {
        for (long i = first; i < n; ++i)
            out[i] = (SKP_OUT_ST)(SKP_ELEMENT(i));
    }
#endif
}

__kernel void skelpy_elementwise(__global SKP_OUT_ST* restrict out, const long n
                                 SKP_PARAMS_DECL)
{
    const long chunks = (n + SKP_VW - 1) / SKP_VW;
#if SKP_BLOCKED
    const long base = (long)get_global_id(0) * SKP_COARSEN;
#pragma unroll
    for (int k = 0; k < SKP_COARSEN; ++k) {
        const long j = base + k;
        if (j < chunks)
            skp_chunk(out, n, j SKP_PARAMS_PASS);
    }
#else
    const long lsz = (long)get_local_size(0);
    const long base = (long)get_group_id(0) * lsz * SKP_COARSEN + (long)get_local_id(0);
#pragma unroll
    for (int k = 0; k < SKP_COARSEN; ++k) {
        const long j = base + k * lsz;
        if (j < chunks)
            skp_chunk(out, n, j SKP_PARAMS_PASS);
    }
#endif
}
