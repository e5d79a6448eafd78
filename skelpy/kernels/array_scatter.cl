/* Writing a block into a view: dst[off + r*s0 + c*s1] = src[i], i = r*cols + c (i < n).
 *
 * The view's elements need not be consecutive (v[::2], m[:, j], m.T[a:b]); a 1-D view is
 * written with cols = n and s0 = 0. SKP_T (-D) is the storage type of the elements.
 * Used by skelpy.array.views for ``v[a:b] = w`` and ``m[...] op= x`` on the device.
 */

__kernel void skelpy_scatter(__global SKP_T* restrict dst, const long n, const long off,
                             const long s0, const long s1, const long cols,
                             __global const SKP_T* restrict src)
{
    const long i = (long)get_global_id(0);
    if (i >= n)
        return;
    const long r = i / cols;
    const long c = i - r * cols;
    dst[off + r * s0 + c * s1] = src[i];
}
