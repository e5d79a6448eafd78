/* Scan: prefix sums under any associative operator (commutativity is never assumed).
 *
 * The data is cut into tiles of SKP_WG * SKP_ITEMS consecutive elements, one work-group per
 * tile. Within a tile (Harris et al., GPU Gems 3 ch. 39, with thread coarsening):
 *   1. the group loads the tile into local memory with coalesced reads;
 *   2. each work-item folds its own row of SKP_ITEMS consecutive elements (sequentially, or
 *      for floats as a tree that leaves the row's own prefixes in registers);
 *   3. the work-group scans the SKP_WG row totals with the work-efficient Blelloch up-sweep /
 *      down-sweep in local memory, padded so that the strided accesses avoid bank conflicts;
 *   4. each work-item rescans its row from its exclusive prefix (plus the tile's carry-in),
 *      writes it back to local memory, and the group stores the tile with coalesced writes.
 *
 * The carry-in of a tile (the fold of all earlier tiles) comes from one of two methods:
 *   skelpy_scan_lookback  single pass (Merrill & Garland's decoupled look-back): tiles take
 *                         ids from an atomic ticket in the order they start; each publishes its
 *                         aggregate, then walks back over its predecessors' published values
 *                         until it meets an inclusive prefix. Reads and writes n elements once.
 *   skelpy_scan_sums +    multi-level: fold every tile to sums[tile], scan the sums (the same
 *   skelpy_scan_tiles     kernels, recursively, while more than one tile remains), then scan
 *                         each tile from its carry. Portable, but reads the input twice.
 *
 * Launch-shape macros (-D): SKP_WG (a power of two), SKP_ITEMS (a power of two), SKP_SUMS
 * (1 when the input is the accumulator-typed sums of a lower level and that type differs from
 * the input's), and SKP_CARRY_IN (1 on a device group: the scan starts from a carry-in, the
 * fold of the devices before this one, read from carry_in[carry_at]; carry_at < 0: none). Everything else is a kernel argument, so that one program serves both methods
 * and both kinds of scan: `inclusive` (0: exclusive, SkelCL's default; 1: inclusive).
 * The generated header (skeletons/scan.py) supplies SKP_ACC / SKP_ACC_ST (compute and storage
 * types), SKP_IN_ST (input storage type), SKP_LOAD_IN(p, i) (input element i as SKP_ACC),
 * SKP_COMBINE(a, b) (the muscle), SKP_FLOAT_ACC (1 for float accumulators: row trees) and
 * SKP_COMPENSATED (1 for float sums: compensated look-back carries).
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
#ifndef SKP_SUMS
#define SKP_SUMS 0
#endif
#ifndef SKP_FLOAT_ACC
#define SKP_FLOAT_ACC 0
#endif
#ifndef SKP_COMPENSATED
#define SKP_COMPENSATED 0
#endif
#ifndef SKP_CARRY_IN
#define SKP_CARRY_IN 0
#endif
#if SKP_CARRY_IN
#define SKP_CARRY_DECL , __global const SKP_ACC_ST* restrict carry_in, const long carry_at
#else
#define SKP_CARRY_DECL
#endif

#define SKP_TILE (SKP_WG * SKP_ITEMS)
/* One padding word every 32 (the bank count) breaks the power-of-two strides. */
#define SKP_PAD(t) ((t) + ((t) >> 5))

#if SKP_SUMS
#define SKP_IN_T SKP_ACC_ST
#define SKP_READ(p, i) ((SKP_ACC)(p)[i])
#else
#define SKP_IN_T SKP_IN_ST
#define SKP_READ(p, i) SKP_LOAD_IN(p, i)
#endif

/* The input's kernel parameters. A fused input expression (skelpy.array: a pending elementwise
 * value scanned in the same kernel) has the header define SKP_EXPR_DECL (its leaves' and
 * constants' parameters) and SKP_EXPR_ARGS (their names); its SKP_LOAD_IN evaluates the
 * expression at index i and ignores p. Lower levels read the accumulator-typed sums. */
#if SKP_SUMS || !defined(SKP_EXPR_DECL)
#define SKP_IN_DECL __global const SKP_IN_T* restrict in
#define SKP_IN_DECL_ALIASED __global const SKP_IN_T* in
#define SKP_IN_ARGS in
#else
#define SKP_IN_DECL SKP_EXPR_DECL
#define SKP_IN_DECL_ALIASED SKP_EXPR_DECL
#define SKP_IN_ARGS SKP_EXPR_ARGS
#endif

/* Steps 1-2: stage tile [base, base + TILE) (identity past n) and fold this work-item's row.
 * Leaves the row in vals[] and returns its fold. */
inline SKP_ACC skp_load_row(SKP_IN_DECL, const long n, const long base,
                            const SKP_ACC identity, __local SKP_ACC_ST* tile, const int lid,
                            SKP_ACC* vals)
{
    if (base + SKP_TILE <= n) {
#if SKP_UNROLL
#pragma unroll
#endif
        for (int m = 0; m < SKP_ITEMS; ++m) {
            const int t = m * SKP_WG + lid;
            tile[SKP_PAD(t)] = (SKP_ACC_ST)SKP_READ(in, base + t);
        }
    } else {
        for (int m = 0; m < SKP_ITEMS; ++m) {
            const int t = m * SKP_WG + lid;
            SKP_ACC v = identity;
            if (base + t < n)
                v = SKP_READ(in, base + t);
            tile[SKP_PAD(t)] = (SKP_ACC_ST)v;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#if SKP_FLOAT_ACC
    /* Float folds scan the row in registers as a tree (Sklansky: at step s, every element
     * whose index has bit s set takes in the last element of the half-block before it), so
     * that each vals[k] becomes the inclusive prefix v_0 + ... + v_k with ~log2(ITEMS)
     * roundings: a row's serial run would round ITEMS times at the magnitude of the sums, which
     * in the multi-level method's upper levels is the magnitude of the whole result. */
#pragma unroll
    for (int k = 0; k < SKP_ITEMS; ++k)
        vals[k] = (SKP_ACC)tile[SKP_PAD(lid * SKP_ITEMS + k)];
#pragma unroll
    for (int s = 1; s < SKP_ITEMS; s <<= 1) {
#pragma unroll
        for (int k = 0; k < SKP_ITEMS; ++k)
            if (k & s)
                vals[k] = SKP_COMBINE(vals[(k & ~(2 * s - 1)) + s - 1], vals[k]);
    }
    return vals[SKP_ITEMS - 1];
#else
    vals[0] = (SKP_ACC)tile[SKP_PAD(lid * SKP_ITEMS)];
    SKP_ACC acc = vals[0];
#if SKP_UNROLL
#pragma unroll
#endif
    for (int k = 1; k < SKP_ITEMS; ++k) {
        vals[k] = (SKP_ACC)tile[SKP_PAD(lid * SKP_ITEMS + k)];
        acc = SKP_COMBINE(acc, vals[k]);
    }
    return acc;
#endif
}

/* Step 3, up-sweep: s[PAD(i)] = row totals; returns the tile's aggregate. */
inline SKP_ACC skp_upsweep(__local SKP_ACC_ST* s, const SKP_ACC v, const int lid)
{
    s[SKP_PAD(lid)] = (SKP_ACC_ST)v;
    int offset = 1;
    for (int d = SKP_WG >> 1; d > 0; d >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < d) {
            const int ai = SKP_PAD(offset * (2 * lid + 1) - 1);
            const int bi = SKP_PAD(offset * (2 * lid + 2) - 1);
            s[bi] = (SKP_ACC_ST)SKP_COMBINE((SKP_ACC)s[ai], (SKP_ACC)s[bi]);
        }
        offset <<= 1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const SKP_ACC total = (SKP_ACC)s[SKP_PAD(SKP_WG - 1)];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}

/* Step 3, down-sweep: afterwards s[PAD(lid)] is the exclusive prefix of row lid in the tile. */
inline SKP_ACC skp_downsweep(__local SKP_ACC_ST* s, const SKP_ACC identity, const int lid)
{
    if (lid == 0)
        s[SKP_PAD(SKP_WG - 1)] = (SKP_ACC_ST)identity;
    int offset = SKP_WG;
    for (int d = 1; d < SKP_WG; d <<= 1) {
        offset >>= 1;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < d) {
            const int ai = SKP_PAD(offset * (2 * lid + 1) - 1);
            const int bi = SKP_PAD(offset * (2 * lid + 2) - 1);
            const SKP_ACC left = (SKP_ACC)s[ai];
            const SKP_ACC up = (SKP_ACC)s[bi];
            s[ai] = (SKP_ACC_ST)up;
            s[bi] = (SKP_ACC_ST)SKP_COMBINE(up, left);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return (SKP_ACC)s[SKP_PAD(lid)];
}

/* Step 4: rescan the row from `prefix`, then store the tile with coalesced writes.
 * Float folds (SKP_FLOAT_ACC) hold the row's own inclusive prefixes in vals[] (skp_load_row):
 * each output adds one of them to the prefix, one rounding at the prefix's magnitude. Other
 * folds are exact and run on from the prefix (one combine per element). */
inline void skp_store_row(__global SKP_ACC_ST* restrict out, const long n, const long base,
                          SKP_ACC prefix, __local SKP_ACC_ST* tile, const int lid,
                          const SKP_ACC* vals, const int inclusive)
{
#if SKP_FLOAT_ACC
    tile[SKP_PAD(lid * SKP_ITEMS)] = (SKP_ACC_ST)(inclusive ? SKP_COMBINE(prefix, vals[0])
                                                            : prefix);
#if SKP_UNROLL
#pragma unroll
#endif
    for (int k = 1; k < SKP_ITEMS; ++k)
        tile[SKP_PAD(lid * SKP_ITEMS + k)] = (SKP_ACC_ST)SKP_COMBINE(
            prefix, inclusive ? vals[k] : vals[k - 1]);
#else
    SKP_ACC run = prefix;
#if SKP_UNROLL
#pragma unroll
#endif
    for (int k = 0; k < SKP_ITEMS; ++k) {
        const SKP_ACC next = SKP_COMBINE(run, vals[k]);
        tile[SKP_PAD(lid * SKP_ITEMS + k)] = (SKP_ACC_ST)(inclusive ? next : run);
        run = next;
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    if (base + SKP_TILE <= n) {
#if SKP_UNROLL
#pragma unroll
#endif
        for (int m = 0; m < SKP_ITEMS; ++m) {
            const int t = m * SKP_WG + lid;
            out[base + t] = tile[SKP_PAD(t)];
        }
    } else {
        for (int m = 0; m < SKP_ITEMS; ++m) {
            const int t = m * SKP_WG + lid;
            if (base + t < n)
                out[base + t] = tile[SKP_PAD(t)];
        }
    }
}

#ifdef cl_khr_int64_base_atomics
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable

#define SKP_AGGREGATE 1u
#define SKP_PREFIX 2u
/* Predecessors inspected at once by the look-back. */
#define SKP_WIN (SKP_WG < 32 ? SKP_WG : 32)

/* The carries of the look-back form a chain across tiles: tile t publishes its inclusive prefix
 * P(t) = P(t-1) + A(t), so a float sum would round once per tile -- a serial sum of the tile
 * aggregates, far from pairwise accuracy when tiles are small. For sums (SKP_COMPENSATED, set
 * by the host when the muscle computes a + b over floats) a carry is therefore an unevaluated
 * pair hi + lo, added with TwoSum (Knuth) so that what each addition rounds off is kept in lo:
 * the chain's error stays at a few roundings however long it is. Other folds carry plain values
 * (exact for integers, min and max; a product rounds once per multiplication whatever the
 * order). */
#if SKP_COMPENSATED
typedef struct { SKP_ACC hi; SKP_ACC lo; } skp_carry;

inline skp_carry skp_carry_of(const SKP_ACC v)
{
    skp_carry c;
    c.hi = v;
    c.lo = (SKP_ACC)0;
    return c;
}

inline skp_carry skp_carry_add(const skp_carry a, const skp_carry b)
{
    skp_carry r;
    const SKP_ACC s = a.hi + b.hi;
    if (!isfinite(s)) {                  /* inf or nan: what the plain sum gives */
        r.hi = s;
        r.lo = (SKP_ACC)0;
        return r;
    }
    const SKP_ACC bb = s - a.hi;
    const SKP_ACC t = ((a.hi - (s - bb)) + (b.hi - bb)) + (a.lo + b.lo);
    r.hi = s + t;
    r.lo = t - (r.hi - s);
    return r;
}

#define SKP_CARRY_PREFIX(c, excl) ((c).hi + ((c).lo + (excl)))
#define SKP_VALUES 2
#else
typedef SKP_ACC skp_carry;
#define skp_carry_of(v) (v)
#define skp_carry_add(a, b) SKP_COMBINE((a), (b))
#define SKP_CARRY_PREFIX(c, excl) SKP_COMBINE((c), (excl))
#define SKP_VALUES 1
#endif

/* Tile statuses are published as 64-bit words (state << 32 | 32 bits of payload), each written
 * by one atomic exchange and polled with plain volatile loads: a reader sees a state and its
 * payload together, so no memory fence is needed (OpenCL 1.2's mem_fence is only
 * work-group-wide on some devices). A payload of more than 32 bits (a 64-bit value, or a
 * compensated pair) travels as several such words, low first; a reader accepts them only when
 * all carry the same state (states only grow, and each state's payload is written once).
 * SKP_BITS / SKP_UNBITS (from the header) convert values to and from bits. */
#if SKP_ACC_BITS == 64
#define SKP_VALUE_WORDS 2
#else
#define SKP_VALUE_WORDS 1
#endif
#define SKP_WORDS (SKP_VALUES * SKP_VALUE_WORDS)

inline void skp_pieces(const SKP_ACC v, uint* p)
{
#if SKP_ACC_BITS == 64
    const ulong b = SKP_BITS((SKP_ACC_ST)v);
    p[0] = (uint)(b & 0xffffffffUL);
    p[1] = (uint)(b >> 32);
#else
    p[0] = (uint)SKP_BITS((SKP_ACC_ST)v);
#endif
}

inline SKP_ACC skp_unpieces(const uint* p)
{
#if SKP_ACC_BITS == 64
    return (SKP_ACC)SKP_UNBITS(((ulong)p[1] << 32) | (ulong)p[0]);
#else
    return (SKP_ACC)SKP_UNBITS(p[0]);
#endif
}

inline void skp_publish(__global volatile ulong* status, const long t, const uint state,
                        const skp_carry v)
{
    __global volatile ulong* w = status + SKP_WORDS * t;
    uint p[SKP_WORDS];
#if SKP_COMPENSATED
    skp_pieces(v.hi, p);
    skp_pieces(v.lo, p + SKP_VALUE_WORDS);
#else
    skp_pieces(v, p);
#endif
    for (int i = 0; i < SKP_WORDS; ++i)
        atom_xchg(w + i, ((ulong)state << 32) | (ulong)p[i]);
}

inline uint skp_peek(__global volatile const ulong* status, const long t, skp_carry* v)
{
    __global volatile const ulong* w = status + SKP_WORDS * t;
    uint p[SKP_WORDS];
    const ulong first = w[0];
    p[0] = (uint)(first & 0xffffffffUL);
    for (int i = 1; i < SKP_WORDS; ++i) {
        const ulong x = w[i];
        if ((x >> 32) != (first >> 32))
            return 0u;                   /* caught between two writes: look again */
        p[i] = (uint)(x & 0xffffffffUL);
    }
#if SKP_COMPENSATED
    v->hi = skp_unpieces(p);
    v->lo = skp_unpieces(p + SKP_VALUE_WORDS);
#else
    *v = skp_unpieces(p);
#endif
    return (uint)(first >> 32);
}

/* Single pass with decoupled look-back. status holds SKP_WORDS words per tile and one more word
 * at the end, the tile ticket; the host zeroes it before every launch. */
__kernel __attribute__((reqd_work_group_size(SKP_WG, 1, 1)))
void skelpy_scan_lookback(__global SKP_ACC_ST* restrict out,
                          SKP_IN_DECL, const long n,
                          const SKP_ACC_ST identity_st, const int inclusive,
                          __global volatile ulong* status, const long tiles
                          SKP_CARRY_DECL)
{
    __local SKP_ACC_ST tile[SKP_PAD(SKP_TILE)];
    __local SKP_ACC_ST s[SKP_PAD(SKP_WG)];
    __local skp_carry win_v[SKP_WIN];
    __local uint win_s[SKP_WIN];
    __local long tile_id;
    __local long window_end;
    __local int found;
    __local skp_carry carry_l;
    const int lid = (int)get_local_id(0);
    const SKP_ACC identity = (SKP_ACC)identity_st;

    if (lid == 0)   /* tiles are numbered in the order their groups start: no deadlock */
        tile_id = (long)atom_inc(status + SKP_WORDS * tiles);
    barrier(CLK_LOCAL_MEM_FENCE);
    const long t = tile_id;
    const long base = t * SKP_TILE;

    SKP_ACC vals[SKP_ITEMS];
    const SKP_ACC row = skp_load_row(SKP_IN_ARGS, n, base, identity, tile, lid, vals);
    const SKP_ACC total = skp_upsweep(s, row, lid);
    if (lid == 0) {                      /* publish early, so that successors wait less */
#if SKP_CARRY_IN
        /* the first tile starts from the carry-in: it publishes carry-in + its total */
        const skp_carry first = skp_carry_of(carry_at >= 0 ? (SKP_ACC)carry_in[carry_at]
                                                           : identity);
        skp_publish(status, t, t == 0 ? SKP_PREFIX : SKP_AGGREGATE,
                    t == 0 ? skp_carry_add(first, skp_carry_of(total)) : skp_carry_of(total));
        carry_l = t == 0 ? first : skp_carry_of(identity);
#else
        skp_publish(status, t, t == 0 ? SKP_PREFIX : SKP_AGGREGATE, skp_carry_of(total));
        carry_l = skp_carry_of(identity);
#endif
        window_end = t - 1;
        found = t == 0;
    }
    const SKP_ACC excl = skp_downsweep(s, identity, lid);

    /* Look back over windows of SKP_WIN predecessors, read in parallel, until an inclusive
     * prefix is met; aggregates met on the way are folded in, right to left. */
    while (!found) {
        if (lid < SKP_WIN) {
            const long p = window_end - (SKP_WIN - 1 - lid);
            skp_carry v = skp_carry_of(identity);
            win_s[lid] = p >= 0 ? skp_peek(status, p, &v) : SKP_PREFIX;
            win_v[lid] = v;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid == 0) {
            int j = SKP_WIN - 1;
            while (j > 0 && win_s[j] == SKP_AGGREGATE)
                --j;
            if (win_s[j] != 0u) {        /* win[j+1 ..] are aggregates: fold them in */
                skp_carry c = win_v[j];
                for (int i = j + 1; i < SKP_WIN; ++i)
                    c = skp_carry_add(c, win_v[i]);
                carry_l = skp_carry_add(c, carry_l);
                if (win_s[j] == SKP_PREFIX)
                    found = 1;
                else
                    window_end -= SKP_WIN;   /* a whole window of aggregates */
            }
            /* else: a predecessor has published nothing yet; read the window again */
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const skp_carry carry = carry_l;
    if (lid == 0 && t > 0)
        skp_publish(status, t, SKP_PREFIX, skp_carry_add(carry, skp_carry_of(total)));
    skp_store_row(out, n, base, SKP_CARRY_PREFIX(carry, excl), tile, lid, vals, inclusive);
}

#endif  /* cl_khr_int64_base_atomics */

/* Multi-level method, pass 1: sums[t] = the fold of tile t. */
__kernel __attribute__((reqd_work_group_size(SKP_WG, 1, 1)))
void skelpy_scan_sums(__global SKP_ACC_ST* restrict sums, SKP_IN_DECL,
                      const long n, const SKP_ACC_ST identity_st)
{
    __local SKP_ACC_ST tile[SKP_PAD(SKP_TILE)];
    __local SKP_ACC_ST s[SKP_PAD(SKP_WG)];
    const int lid = (int)get_local_id(0);
    const long t = (long)get_group_id(0);
    SKP_ACC vals[SKP_ITEMS];
    const SKP_ACC row = skp_load_row(SKP_IN_ARGS, n, t * SKP_TILE, (SKP_ACC)identity_st, tile, lid, vals);
    const SKP_ACC total = skp_upsweep(s, row, lid);
    if (lid == 0)
        sums[t] = (SKP_ACC_ST)total;
}

/* Multi-level method, pass 2: scan tile t from carries[t] (the exclusive scan of the sums), or
 * from the identity when use_carry is 0 (a single tile). May run in place (out == in): each
 * tile is read completely before any of it is written. */
__kernel __attribute__((reqd_work_group_size(SKP_WG, 1, 1)))
void skelpy_scan_tiles(__global SKP_ACC_ST* out, SKP_IN_DECL_ALIASED, const long n,
                       const SKP_ACC_ST identity_st, const int inclusive,
                       __global const SKP_ACC_ST* restrict carries, const int use_carry
                       SKP_CARRY_DECL)
{
    __local SKP_ACC_ST tile[SKP_PAD(SKP_TILE)];
    __local SKP_ACC_ST s[SKP_PAD(SKP_WG)];
    const int lid = (int)get_local_id(0);
    const long t = (long)get_group_id(0);
    const long base = t * SKP_TILE;
    const SKP_ACC identity = (SKP_ACC)identity_st;
    SKP_ACC vals[SKP_ITEMS];
    const SKP_ACC row = skp_load_row(SKP_IN_ARGS, n, base, identity, tile, lid, vals);
    skp_upsweep(s, row, lid);
    const SKP_ACC excl = skp_downsweep(s, identity, lid);
    SKP_ACC carry = use_carry ? (SKP_ACC)carries[t] : identity;
#if SKP_CARRY_IN
    if (carry_at >= 0)
        carry = use_carry ? SKP_COMBINE((SKP_ACC)carry_in[carry_at], carry)
                          : (SKP_ACC)carry_in[carry_at];
#endif
    skp_store_row(out, n, base, SKP_COMBINE(carry, excl), tile, lid, vals, inclusive);
}
