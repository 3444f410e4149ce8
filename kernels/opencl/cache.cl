// cache: read and read-modify-write bandwidth against the working set, with the reuse inside
// the kernel (seed 001 section 4, GPU "Kernel A": the trials loop inside the kernel), so that
// each level of the hierarchy shows as a plateau: L1 while a compute unit's share of the
// working set fits its L1, the last-level cache while the whole set fits it, device memory
// beyond.
// cache_read sweeps overlapping windows (below); cache_rmw, whose updates must not race, cuts
// the working set into `slices` contiguous slices of `slice_vecs` uint4 (16-byte vector
// loads) and work-group g sweeps slice g % slices `reps` times, work-item l taking vectors
// l, l + wg, l + 2 wg, ... (coalesced). When there are fewer slices than work-groups the
// groups share slices (the host decides; see bench/cache.cpp).
// Integer data so that the host can replay every load exactly:
//  - cache_read stores one uint per work-item, the wrapping sum of every lane it loaded, so
//    no load is dead;
//  - cache_rmw updates in place, x = x * a + b per pass (wrapping uint arithmetic).

// cache_read: work-group g sweeps the window of `win` vectors from vector (g * step) % span,
// span = vecs - win + 1 (so that a window never wraps), `reps` times: a compute unit's
// footprint is its groups' windows whatever the number of groups, so L1 holds sets up to a
// window, the last-level cache sets up to its size, and beyond that the windows come from
// device memory. WG (the work-group size) is a compile-time value; the stored value is the
// wrapping sum of every lane loaded.
#ifdef WG  // cache_read only (the rmw kernel is built without it)
__kernel void cache_read(__global const uint4* data, __global uint* restrict out, const uint span, const uint win,
                         const uint step, const uint reps) {
  __global const uint4* p = data + (uint)(((ulong)get_group_id(0) * step) % span) + get_local_id(0);
  const uint nk = win / WG;
  uint a0 = 0, a1 = 0;
  for (uint r = 0; r < reps; ++r) {
#pragma unroll 8
    for (uint k = 0; k < nk; ++k) {
      const uint4 v = p[(size_t)k * WG];
      a0 += v.x + v.y;
      a1 += v.z + v.w;
    }
  }
  out[get_global_id(0)] = a0 + a1;
}
#endif  // WG

__kernel void cache_rmw(__global uint4* restrict data, const uint slices, const uint slice_vecs, const uint reps,
                        const uint a, const uint b) {
  const uint l = (uint)get_local_id(0), wg = (uint)get_local_size(0);
  __global uint4* s = data + (size_t)(get_group_id(0) % slices) * slice_vecs;
  for (uint r = 0; r < reps; ++r) {
#pragma unroll 4
    for (uint i = l; i < slice_vecs; i += wg) s[i] = s[i] * a + b;
  }
}

// Kernel B of seed 001 section 4 ("global_tOnside"): one trial per launch, the reuse outside
// the kernel. The grid strides over all `vecs` vectors of the set once, x = x * a + b.
__kernel void cache_trial(__global uint4* restrict data, const uint vecs, const uint a, const uint b) {
  for (size_t i = get_global_id(0); i < vecs; i += get_global_size(0)) data[i] = data[i] * a + b;
}

// Kernel C of seed 001 section 4 ("sharemem"): group g's slice of `slice` vectors passes
// through local memory `tile` vectors (a power of two) at a time: loaded, `reps` passes of
// x = x * a + b there, stored back. In pass r work-item l updates tile vectors (i + r) mod
// tile for its i = l, l + wg, ...: each pass touches every vector once, neighbours take
// neighbours (no bank conflicts), and since a work-item's vectors change from pass to pass,
// with a barrier between passes, no compiler can keep them in registers instead.
__kernel void cache_shared(__global uint4* restrict data, __local uint4* tile_mem, const uint slice, const uint tile,
                           const uint reps, const uint a, const uint b) {
  const uint l = (uint)get_local_id(0), wg = (uint)get_local_size(0), mask = tile - 1;
  __global uint4* s = data + (size_t)get_group_id(0) * slice;
  for (uint base = 0; base < slice; base += tile) {
    for (uint i = l; i < tile; i += wg) tile_mem[i] = s[base + i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint r = 0; r < reps; ++r) {
      for (uint i = l; i < tile; i += wg) {
        const uint k = (i + r) & mask;
        tile_mem[k] = tile_mem[k] * a + b;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (uint i = l; i < tile; i += wg) s[base + i] = tile_mem[i];
  }
}
