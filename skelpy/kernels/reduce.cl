/* Reduce and MapReduce: one associative operator folded over n elements.
 *
 * Three phases in ONE launch (kernel argument one_pass == 1):
 *   1. each work-group owns a contiguous range of `per` elements; each work-item folds its share
 *      (thread coarsening, SKP_ITEMS elements per step) -- pairwise for floats, see below;
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
 *   SKP_PAIRWISE           1 for float accumulators: pairwise folds within work-items (below)
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

/* -- Pairwise accumulation within a work-item ------------------------------------------------
 * Whatever the launch point, a float fold must round like a pairwise sum (error ~ log2(n)
 * roundings), not like a loop (one rounding per element): a work-item may fold millions of
 * elements. So with SKP_PAIRWISE (float accumulators, set by the host) a work-item folds its
 * share in *leaves* of SKP_LEAF elements (short serial runs, as NumPy's pairwise sum has at its
 * leaves; cheap per element), and combines the leaves like a binary counter: level l holds the
 * fold of 2^l consecutive leaves, and a new leaf merges upwards while the levels it meets are
 * full. The work-item's value is then a pairwise tree over its leaves, held in SKP_LEVELS
 * registers, for ~1 extra combine per leaf. Order is kept: a level always holds EARLIER
 * elements than what merges into it. Past 2^(SKP_LEVELS-1) leaves the top level folds
 * serially (the host keeps flat reductions below that). In the flat kernel the counter is the
 * same for every work-item of a group, so the merges do not diverge. Integer and bool folds
 * are exact in any order: without SKP_PAIRWISE the leaves are folded one after the other. */
#ifndef SKP_PAIRWISE
#define SKP_PAIRWISE 0
#endif
#define SKP_LEVELS 16
/* The levels' loops: fully unrolled on a GPU (SKP_UNROLL: the levels stay in registers); on a
 * CPU by 4 (PoCL, measured on a 2-core EPYC: full unrolling cost 3.4 s of compile for an
 * ordered Reduce program and 1.6 s for a commutative one, by 4 0.7 and 0.4 s, and the folds
 * run as fast or faster: 6.7 vs 6.6 GB/s commutative, 5.0 vs 3.9 GB/s ordered; no unrolling
 * lost 20-35%). */
#if SKP_UNROLL
#define SKP_LEVEL_UNROLL _Pragma("unroll")
#else
#define SKP_LEVEL_UNROLL _Pragma("unroll 4")
#endif
#define SKP_LEAF 16

#if SKP_PAIRWISE
/* Blocks of SKP_ITEMS elements per leaf in the flat kernel (the host sizes shares to match). */
#define SKP_LEAF_BLOCKS (SKP_ITEMS >= SKP_LEAF ? 1 : SKP_LEAF / SKP_ITEMS)

/* Push and total are macros over the levels with constant indices only (the loops unroll
 * fully), so the levels stay in registers: through a pointer to an inline function NVIDIA's
 * compiler kept them in a 128-byte stack frame and the float fold ran at 82% of copy. */
#define SKP_PW_STATE(identity) SKP_ACC pw_s[SKP_LEVELS]; uint pw_n = 0u;
#define SKP_PW_PUSH(leaf)                                                                    \
    {                                                                                        \
        SKP_ACC v_ = (leaf);                                                                 \
        const uint c_ = pw_n++;                                                              \
        int open_ = 1;                                                                       \
        SKP_LEVEL_UNROLL                                                                      \
        for (int l_ = 0; l_ < SKP_LEVELS - 1; ++l_) {                                        \
            if (open_) {                                                                     \
                if ((c_ >> l_) & 1u) {                                                       \
                    v_ = SKP_COMBINE(pw_s[l_], v_);                                          \
                } else {                                                                     \
                    pw_s[l_] = v_;                                                           \
                    open_ = 0;                                                               \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        if (open_)                                                                           \
            pw_s[SKP_LEVELS - 1] = (c_ >> (SKP_LEVELS - 1))                                  \
                ? SKP_COMBINE(pw_s[SKP_LEVELS - 1], v_) : v_;                                \
    }
/* The total, folded from the top level down (earlier elements first); a statement that
 * declares `name`. */
#define SKP_PW_TOTAL_INTO(name, identity)                                                    \
    SKP_ACC name = (pw_n >> (SKP_LEVELS - 1)) ? pw_s[SKP_LEVELS - 1] : (identity);            \
    SKP_LEVEL_UNROLL                                                                          \
    for (int l_ = SKP_LEVELS - 2; l_ >= 0; --l_)                                             \
        if ((pw_n >> l_) & 1u)                                                               \
            name = SKP_COMBINE(name, pw_s[l_]);
#else
#define SKP_LEAF_BLOCKS 1
#define SKP_PW_STATE(identity) SKP_ACC pw_acc = (identity);
#define SKP_PW_PUSH(leaf) (pw_acc = SKP_COMBINE(pw_acc, (leaf)))
#define SKP_PW_TOTAL_INTO(name, identity) SKP_ACC name = pw_acc;
#endif

/* Fold LOAD_K(k) for k = k0, k0 + ks, ... < e into the work-item's state, leaf by leaf. */
#define SKP_PW_RANGE(LOAD_K, k0, ks, e)                                                      \
    {                                                                                        \
        long k_ = (k0);                                                                      \
        for (; k_ + (SKP_LEAF - 1) * (ks) < (e); k_ += SKP_LEAF * (ks)) {                    \
            SKP_ACC leaf_ = LOAD_K(k_);                                                      \
            _Pragma("unroll")                                                                \
            for (int r_ = 1; r_ < SKP_LEAF; ++r_)                                            \
                leaf_ = SKP_COMBINE(leaf_, LOAD_K(k_ + r_ * (ks)));                          \
            SKP_PW_PUSH(leaf_);                                                              \
        }                                                                                    \
        if (k_ < (e)) {                                                                      \
            SKP_ACC leaf_ = LOAD_K(k_);                                                      \
            for (k_ += (ks); k_ < (e); k_ += (ks))                                           \
                leaf_ = SKP_COMBINE(leaf_, LOAD_K(k_));                                      \
            SKP_PW_PUSH(leaf_);                                                              \
        }                                                                                    \
    }

/* Fold v[0 .. SKP_ITEMS) in place as a balanced tree, in order; the result is v[0]. */
#define SKP_BLOCK_FOLD(v)                                                                    \
    _Pragma("unroll")                                                                        \
    for (int s_ = 1; s_ < SKP_ITEMS; s_ <<= 1) {                                             \
        _Pragma("unroll")                                                                    \
        for (int k_ = 0; k_ + s_ < SKP_ITEMS; k_ += 2 * s_)                                  \
            v[k_] = SKP_COMBINE(v[k_], v[k_ + s_]);                                          \
    }

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
#define SKP_PARTIAL(k) ((SKP_ACC)p[k])
inline SKP_ACC skp_fold_array(__global const volatile SKP_ACC_ST* p, const long count,
                              const SKP_ACC identity, __local SKP_ACC_ST* scratch, const int lid)
{
    const long share = (count + SKP_WG - 1) / SKP_WG;
    const long b = lid * share;
    SKP_PW_STATE(identity)
    SKP_PW_RANGE(SKP_PARTIAL, b, 1, min(b + share, count))
    SKP_PW_TOTAL_INTO(total, identity)
    return skp_group_fold(scratch, total, lid);
}

/* A leaf of the flat kernel: SKP_LEAF_BLOCKS blocks of SKP_ITEMS elements, the block at step r
 * loaded by LOAD_BLOCK(r) into v[] (which it may stage through local memory) and folded as a
 * tree; the blocks are folded in order into `leaf`. */
#define SKP_FLAT_LEAF(LOAD_BLOCK)                                                            \
    {                                                                                        \
        SKP_ACC leaf;                                                                        \
        _Pragma("unroll")                                                                    \
        for (int r = 0; r < SKP_LEAF_BLOCKS; ++r) {                                          \
            LOAD_BLOCK(r)                                                                    \
            SKP_BLOCK_FOLD(v)                                                                \
            leaf = r ? SKP_COMBINE(leaf, v[0]) : v[0];                                       \
        }                                                                                    \
        SKP_PW_PUSH(leaf);                                                                   \
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
    SKP_PW_STATE(identity)
    SKP_ACC v[SKP_ITEMS];

#if SKP_ORDERED
    /* each work-item's sub-range; `per` is a multiple of SKP_WG * SKP_ITEMS * SKP_LEAF_BLOCKS */
    const long sub = per / SKP_WG;
/* Stage block r of the leaf at j as a WG x ITEMS tile (ITEMS consecutive elements of every
 * sub-range: sector-sized runs) and take this work-item's row. The barriers are outside any
 * branch; `full` (the same for the whole group) spares the bounds checks. */
#define SKP_ROW(r)                                                                           \
        SKP_STAGE_UNROLL                                                                     \
        for (int m = 0; m < SKP_ITEMS; ++m) {                                                \
            const int t = m * SKP_WG + lid;                                                  \
            const long i = start + (long)(t / SKP_ITEMS) * sub + j + (r) * SKP_ITEMS         \
                           + (t % SKP_ITEMS);                                                \
            SKP_ACC x = identity;                                                            \
            if (full || i < end)                                                             \
                x = SKP_LOAD(i);                                                             \
            tile[SKP_PAD(t)] = (SKP_ACC_ST)x;                                                \
        }                                                                                    \
        barrier(CLK_LOCAL_MEM_FENCE);                                                        \
        _Pragma("unroll")                                                                    \
        for (int k = 0; k < SKP_ITEMS; ++k)                                                  \
            v[k] = (SKP_ACC)tile[SKP_PAD(lid * SKP_ITEMS + k)];                              \
        barrier(CLK_LOCAL_MEM_FENCE);
#if SKP_UNROLL
#define SKP_STAGE_UNROLL _Pragma("unroll")
#else
#define SKP_STAGE_UNROLL
#endif
    for (long j = 0; j < sub; j += SKP_ITEMS * SKP_LEAF_BLOCKS)
        SKP_FLAT_LEAF(SKP_ROW)
#else
    /* interleaved: block r of a leaf at b is b + r * step + k * SKP_WG, k < SKP_ITEMS */
    const long step = (long)SKP_WG * SKP_ITEMS;
#if SKP_UNROLL
#define SKP_BLOCK_FULL(r)                                                                    \
        _Pragma("unroll")                                                                    \
        for (int k = 0; k < SKP_ITEMS; ++k)                                                  \
            v[k] = SKP_LOAD(b + (r) * step + k * SKP_WG);
#else
#define SKP_BLOCK_FULL(r)                                                                    \
        for (int k = 0; k < SKP_ITEMS; ++k)                                                  \
            v[k] = SKP_LOAD(b + (r) * step + k * SKP_WG);
#endif
#define SKP_BLOCK_PART(r)                                                                    \
        for (int k = 0; k < SKP_ITEMS; ++k) {                                                \
            const long i = b + (r) * step + k * SKP_WG;                                      \
            v[k] = identity;                                                                 \
            if (i < end)                                                                     \
                v[k] = SKP_LOAD(i);                                                          \
        }
    if (full) {
        for (long b = start + lid; b < end; b += step * SKP_LEAF_BLOCKS)
            SKP_FLAT_LEAF(SKP_BLOCK_FULL)
    } else {                           /* the same number of leaves for every work-item */
        for (long b = start + lid; b - lid < end; b += step * SKP_LEAF_BLOCKS)
            SKP_FLAT_LEAF(SKP_BLOCK_PART)
    }
#endif
    SKP_PW_TOTAL_INTO(acc, identity)

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
    const SKP_ACC identity = (SKP_ACC)identity_st;
    SKP_PW_STATE(identity)
    if (o < outer) {
        const long base = o * so;
#define SKP_AXIS_LOAD(k) SKP_LOAD(base + (k) * sk)
#if SKP_ORDERED
        const long share = (inner + lanes - 1) / lanes;
        const long b = lane * share;
        SKP_PW_RANGE(SKP_AXIS_LOAD, b, 1, min(b + share, inner))
#else
        SKP_PW_RANGE(SKP_AXIS_LOAD, lane, lanes, inner)
#endif
    }
    SKP_PW_TOTAL_INTO(acc, identity)
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
