/* Microbenchmarks of the cost model (skelpy/costmodel/calibrate.py), after [Pöppl 2014]
 * §5.2-5.5 and App. B.1: one work-item per element, each kernel isolating one term.
 *
 * Compile-time macros (-D):
 *   SKC_T      element type of every kernel
 *   SKC_FLOAT  defined when SKC_T is a floating-point type (division and math kernels)
 *   SKC_OPS    steps of arithmetic per work-item
 *
 * Each kernel writes one element per work-item so that nothing is optimised away; the cost
 * of that write is measured on its own (skc_write) and subtracted.
 */

#ifndef SKC_T
#define SKC_T float
#endif
#ifndef SKC_OPS
#define SKC_OPS 64
#endif

/* launch base: an empty kernel that only asks for its id ([Pöppl 2014] §5.2) */
__kernel void skc_empty(__global SKC_T* out)
{
    if (get_global_id(0) == (size_t)-1)
        out[0] = (SKC_T)0;
}

/* one coalesced write per work-item */
__kernel void skc_write(__global SKC_T* out)
{
    const size_t i = get_global_id(0);
    out[i] = (SKC_T)i;
}

/* one coalesced read and one write: continuous access */
__kernel void skc_copy(__global const SKC_T* restrict in, __global SKC_T* restrict out)
{
    const size_t i = get_global_id(0);
    out[i] = in[i];
}

/* one read at a fixed stride (each read in its own cache line / memory segment) */
__kernel void skc_strided(__global const SKC_T* restrict in, __global SKC_T* restrict out,
                          const ulong stride, const ulong mask)
{
    const size_t i = get_global_id(0);
    out[i] = in[(i * stride) & mask];
}

/* one read at a data-dependent (random) index: a gather */
__kernel void skc_gather(__global const SKC_T* restrict in, __global const uint* restrict idx,
                         __global SKC_T* restrict out)
{
    const size_t i = get_global_id(0);
    out[i] = in[idx[i]];
}

/* one read of the same element by every work-item: constant access */
__kernel void skc_constant(__global const SKC_T* restrict in, __global SKC_T* restrict out)
{
    const size_t i = get_global_id(0);
    out[i] = in[0] + (SKC_T)1;
}

/* nine reads of a 3x3 neighbourhood of a row-major matrix with ``cols`` columns: one new
 * element per work-item, eight re-reads of elements that neighbours read too (the "cached"
 * class). ``in`` has a margin of cols + 1 elements on either side, so no index is clamped:
 * the interior of a stencil, where nearly all of its cells are. */
__kernel void skc_neighbours(__global const SKC_T* restrict in, __global SKC_T* restrict out,
                             const long cols)
{
    const long i = get_global_id(0) + cols + 1;
    SKC_T s = (SKC_T)0;
    for (long dr = -1; dr <= 1; ++dr)
        for (long dc = -1; dc <= 1; ++dc)
            s += in[i + dr * cols + dc];
    out[i - cols - 1] = s;
}

/* arithmetic in registers: SKC_OPS iterations of four independent chains, one class per
 * kernel ([Pöppl 2014] §5.4: an operation costs the time beyond a write-only kernel). Four
 * chains, because a muscle's operations are mostly independent of each other: one chain
 * would measure the latency of an operation, not its throughput. */
#define SKC_CHAINS(init, step)                                                            \
    const size_t i = get_global_id(0);                                                    \
    SKC_T x0 = (SKC_T)(i & 255) init, x1 = x0 + (SKC_T)1, x2 = x0 + (SKC_T)2,             \
          x3 = x0 + (SKC_T)3;                                                             \
    for (int k = 0; k < SKC_OPS / 4; ++k) {                                               \
        x0 = step(x0); x1 = step(x1); x2 = step(x2); x3 = step(x3);                       \
    }                                                                                     \
    out[i] = x0 + x1 + x2 + x3;

#define SKC_ALU(x) ((x) * a + b)                /* two counted operations */
__kernel void skc_alu(__global SKC_T* out, const SKC_T a, const SKC_T b)
{
    SKC_CHAINS(+ b, SKC_ALU)
}

#ifdef SKC_FLOAT
#define SKC_DIV(x) (a / ((x) + b))              /* one division, one addition */
__kernel void skc_div(__global SKC_T* out, const SKC_T a, const SKC_T b)
{
    SKC_CHAINS(+ b, SKC_DIV)
}

#define SKC_MATH(x) (sin(x) + sqrt((x) + b))    /* two math calls, two additions */
__kernel void skc_math(__global SKC_T* out, const SKC_T a, const SKC_T b)
{
    SKC_CHAINS(* a + b, SKC_MATH)
}
#endif

/* a copy with ``ops`` iterations of arithmetic between the read and the write: how much of
 * the arithmetic hides behind memory ([Pöppl 2014] §5.4.1) */
__kernel void skc_mixed(__global const SKC_T* restrict in, __global SKC_T* restrict out,
                        const SKC_T a, const SKC_T b, const int ops)
{
    const size_t i = get_global_id(0);
    SKC_T x = in[i];
    for (int k = 0; k < ops; ++k)
        x = x * a + b;
    out[i] = x;
}
