/* Reduce and MapReduce: one associative operator folded over n elements.
 *
 * Three phases in ONE launch (kernel argument one_pass == 1):
 *   1. each work-group owns a contiguous range of `per` elements; each work-item folds its share
 *      sequentially (thread coarsening, SKP_ITEMS elements per step);
 *   2. the group folds its work-items' values in local memory (an order-preserving tree);
 *   3. the group writes its value to partial[g]; the last group to finish (an atomic ticket)
 *      folds the partials, in group order, and writes result[0].
 * With one_pass == 0, phase 3 is a second launch of skelpy_reduce_final (one group).
 * The operator need not be commutative when SKP_ORDERED is 1: every fold keeps element order.
 *
 * Work-item shares (SKP_ORDERED):
 *   0  interleaved: at step j, work-item l folds elements start + j*WG*ITEMS + k*WG + l
 *      (k < ITEMS): every load is coalesced; this reorders operands, so it needs a commutative
 *      operator.
 *   1  order-preserving: the group's range is cut into WG consecutive sub-ranges, one per
 *      work-item. Each step stages a WG x ITEMS tile through local memory: the group loads it
 *      ITEMS consecutive elements per sub-range (sector-sized runs, so loads stay efficient),
 *      then each work-item folds its own row of the tile in order.
 *
 * Launch-shape macros (-D, chosen by the tuner): SKP_WG (work-group size, a power of two),
 * SKP_ITEMS (elements per work-item per step, a power of two). Only what must be known at
 * compile time is a macro (each distinct program costs a build); the tuner's other parameters
 * are kernel arguments: one_pass (stages), and for skelpy_reduce_axis `lanes` (work-items per
 * output, a power of two dividing SKP_WG) and `lane_fast` (1: the lanes of one output are
 * adjacent work-items, for axis=1; 0: the outputs are, for axis=0), so that loads are
 * coalesced either way. SKP_AXIS_ONLY selects the axis kernel alone.
 *
 * The generated header (skeletons/reduce.py) supplies:
 *   SKP_ACC, SKP_ACC_ST    compute and storage C types of the accumulator
 *   SKP_COMBINE(a, b)      the reduce muscle, result converted to SKP_ACC
 *   SKP_PARAMS_DECL        the kernel parameters of the inputs and extra arguments
 *   SKP_LOAD(i)            element i (after the map muscle, for MapReduce) as SKP_ACC
 *   SKP_ORDERED            see above
 */

/* SKP_UNROLL (set by the host for GPUs) unrolls the coarsening loops: many loads in flight
 * there; on CPUs it mostly costs compile time. */
#ifndef SKP_UNROLL
#define SKP_UNROLL 0
#endif
#ifndef SKP_WG
#define SKP_WG 64
#endif
#ifndef SKP_ITEMS
#define SKP_ITEMS 4
#endif

/* A fence that orders this work-item's global stores before its later ones for observers in
 * OTHER work-groups. OpenCL 1.2's mem_fence promises less, and NVIDIA compiles it to a
 * work-group-scope membar.cta, so on NVIDIA (SKP_NVIDIA, set by the host) it is the PTX
 * device-scope fence; the host allows one_pass == 1 only where this fence is known to work. */
#if defined(SKP_NVIDIA)
#define SKP_DEVICE_FENCE() asm volatile("membar.gl;" ::: "memory")
#else
#define SKP_DEVICE_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#endif

/* One padding word every 32 keeps the strided row reads of the tile free of bank conflicts. */
#define SKP_PAD(t) ((t) + ((t) >> 5))

#ifndef SKP_AXIS_ONLY

/* Fold scratch[0 .. SKP_WG) in order (pairs of neighbours, then pairs of pairs, ...). */
inline SKP_ACC skp_group_fold(__local SKP_ACC_ST* scratch, const SKP_ACC v, const int lid)
{
    scratch[lid] = (SKP_ACC_ST)v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = 1; s < SKP_WG; s <<= 1) {
        const int a = 2 * s * lid;
        if (a + s < SKP_WG)
            scratch[a] = (SKP_ACC_ST)SKP_COMBINE((SKP_ACC)scratch[a], (SKP_ACC)scratch[a + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const SKP_ACC r = (SKP_ACC)scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* Fold p[0 .. count) in order with one work-group. */
inline SKP_ACC skp_fold_array(__global const volatile SKP_ACC_ST* p, const long count,
                              const SKP_ACC identity, __local SKP_ACC_ST* scratch, const int lid)
{
    const long share = (count + SKP_WG - 1) / SKP_WG;
    const long b = lid * share;
    const long e = min(b + share, count);
    SKP_ACC acc = identity;
    for (long i = b; i < e; ++i)
        acc = SKP_COMBINE(acc, (SKP_ACC)p[i]);
    return skp_group_fold(scratch, acc, lid);
}

__kernel __attribute__((reqd_work_group_size(SKP_WG, 1, 1)))
void skelpy_reduce(__global SKP_ACC_ST* restrict partial, __global SKP_ACC_ST* restrict result,
                   __global volatile uint* restrict counter, const long n, const long per,
                   const int one_pass, const SKP_ACC_ST identity_st SKP_PARAMS_DECL)
{
    __local SKP_ACC_ST scratch[SKP_WG];
    __local int is_last;
#if SKP_ORDERED
    __local SKP_ACC_ST tile[SKP_PAD(SKP_WG * SKP_ITEMS)];
#endif
    const int lid = (int)get_local_id(0);
    const long g = (long)get_group_id(0);
    const long groups = (long)get_num_groups(0);
    const SKP_ACC identity = (SKP_ACC)identity_st;
    const long start = g * per;
    const long end = min(start + per, n);
    const int full = start + per <= n;
    SKP_ACC acc = identity;

#if SKP_ORDERED
    const long sub = per / SKP_WG;           /* each work-item's sub-range, a multiple of ITEMS */
    for (long j = 0; j < sub; j += SKP_ITEMS) {
        if (full) {
#if SKP_UNROLL
#pragma unroll
#endif
            for (int m = 0; m < SKP_ITEMS; ++m) {
                const int t = m * SKP_WG + lid;
                const long i = start + (long)(t / SKP_ITEMS) * sub + j + (t % SKP_ITEMS);
                tile[SKP_PAD(t)] = (SKP_ACC_ST)(SKP_LOAD(i));
            }
        } else {
            for (int m = 0; m < SKP_ITEMS; ++m) {
                const int t = m * SKP_WG + lid;
                const long i = start + (long)(t / SKP_ITEMS) * sub + j + (t % SKP_ITEMS);
                SKP_ACC v = identity;
                if (i < end)
                    v = SKP_LOAD(i);
                tile[SKP_PAD(t)] = (SKP_ACC_ST)v;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#if SKP_UNROLL
#pragma unroll
#endif
        for (int k = 0; k < SKP_ITEMS; ++k)
            acc = SKP_COMBINE(acc, (SKP_ACC)tile[SKP_PAD(lid * SKP_ITEMS + k)]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#else
    const long step = (long)SKP_WG * SKP_ITEMS;
    if (full) {
        for (long b = start + lid; b < end; b += step) {
#if SKP_UNROLL
#pragma unroll
#endif
            for (int k = 0; k < SKP_ITEMS; ++k)
                acc = SKP_COMBINE(acc, SKP_LOAD(b + k * SKP_WG));
        }
    } else {
        for (long b = start + lid; b < end; b += step) {
            for (int k = 0; k < SKP_ITEMS; ++k) {
                const long i = b + k * SKP_WG;
                if (i < end)
                    acc = SKP_COMBINE(acc, SKP_LOAD(i));
            }
        }
    }
#endif

    const SKP_ACC total = skp_group_fold(scratch, acc, lid);
    if (groups == 1) {
        if (lid == 0)
            result[0] = (SKP_ACC_ST)total;
        return;
    }
    if (!one_pass) {
        if (lid == 0)
            partial[g] = (SKP_ACC_ST)total;
        return;
    }
    if (lid == 0) {
        partial[g] = (SKP_ACC_ST)total;
        SKP_DEVICE_FENCE();                     /* publish before taking a ticket */
        is_last = atomic_inc(counter) == (uint)(groups - 1);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (is_last) {
        SKP_DEVICE_FENCE();
        const SKP_ACC r = skp_fold_array(partial, groups, identity, scratch, lid);
        if (lid == 0) {
            result[0] = (SKP_ACC_ST)r;
            *counter = 0u;                      /* ready for the next launch */
        }
    }
}

/* The second stage when one_pass == 0: one work-group folds the partials. */
__kernel __attribute__((reqd_work_group_size(SKP_WG, 1, 1)))
void skelpy_reduce_final(__global const SKP_ACC_ST* restrict partial,
                         __global SKP_ACC_ST* restrict result, const long count,
                         const SKP_ACC_ST identity_st)
{
    __local SKP_ACC_ST scratch[SKP_WG];
    const int lid = (int)get_local_id(0);
    const SKP_ACC r = skp_fold_array(partial, count, (SKP_ACC)identity_st, scratch, lid);
    if (lid == 0)
        result[0] = (SKP_ACC_ST)r;
}

#else  /* SKP_AXIS_ONLY */

/* Reductions along one axis of a matrix: output o folds elements o*so + k*sk, k < inner.
 * `lanes` work-items share one output; a group computes SKP_WG / lanes outputs. */
__kernel __attribute__((reqd_work_group_size(SKP_WG, 1, 1)))
void skelpy_reduce_axis(__global SKP_ACC_ST* restrict out, const long outer, const long inner,
                        const long so, const long sk, const int lanes, const int lane_fast,
                        const SKP_ACC_ST identity_st SKP_PARAMS_DECL)
{
    __local SKP_ACC_ST scratch[SKP_WG];
    const int lid = (int)get_local_id(0);
    const int segs = SKP_WG / lanes;
    const int lane = lane_fast ? lid % lanes : lid / segs;
    const int seg = lane_fast ? lid / lanes : lid % segs;
    const long o = (long)get_group_id(0) * segs + seg;
    SKP_ACC acc = (SKP_ACC)identity_st;
    if (o < outer) {
        const long base = o * so;
#if SKP_ORDERED
        const long share = (inner + lanes - 1) / lanes;
        const long b = lane * share;
        const long e = min(b + share, inner);
        for (long k = b; k < e; ++k)
            acc = SKP_COMBINE(acc, SKP_LOAD(base + k * sk));
#else
        for (long k = lane; k < inner; k += lanes)
            acc = SKP_COMBINE(acc, SKP_LOAD(base + k * sk));
#endif
    }
    __local SKP_ACC_ST* row = scratch + seg * lanes;
    row[lane] = (SKP_ACC_ST)acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = 1; s < lanes; s <<= 1) {
        const int a = 2 * s * lane;
        if (a + s < lanes)
            row[a] = (SKP_ACC_ST)SKP_COMBINE((SKP_ACC)row[a], (SKP_ACC)row[a + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lane == 0 && o < outer)
        out[o] = row[0];
}

#endif  /* SKP_AXIS_ONLY */
