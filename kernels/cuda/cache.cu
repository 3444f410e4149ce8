// cache: read and read-modify-write bandwidth against the working set, the CUDA twin of
// kernels/opencl/cache.cl (same slices, same order of sweeps, same stored values), with the
// reuse inside the kernel (seed 001 section 4, GPU "Kernel A") so that L1, L2 and device
// memory each show as a plateau. read: block g sweeps a window from vector g * step; rmw: block
// g sweeps slice g % slices; `reps` times, thread l taking vectors l, l + blockDim, ... of 16
// bytes (vec<uint, 4>: one LDG.128 each). Plain global
// loads: on Hopper they are cached in L1, which the L1 plateau needs.
// Integer data, so the host replays it exactly: cache_read stores each thread's wrapping sum
// of every lane it loaded (no load is dead); cache_rmw does x = x * a + b in place per pass.
#include "archbench.cuh"

typedef vec<uint, 4> U4;

// Block g sweeps a window of `win` vectors from vector g * step, wrapping at `vecs` (cache.cl).
extern "C" __global__ void cache_read(const U4* __restrict__ data, uint* __restrict__ out, const uint vecs,
                                      const uint win, const uint step, const uint reps) {
  const uint l = local_id(), wg = local_size();
  const uint start = uint((ulong(group_id()) * step) % vecs);
  U4 acc(0u);
  for (uint r = 0; r < reps; ++r) {
#pragma unroll 4
    for (uint i = l; i < win; i += wg) {
      uint k = start + i;
      if (k >= vecs) k -= vecs;
      acc = acc + data[k];
    }
  }
  out[global_id()] = acc[0] + acc[1] + acc[2] + acc[3];
}

extern "C" __global__ void cache_rmw(U4* __restrict__ data, const uint slices, const uint slice_vecs,
                                     const uint reps, const uint a, const uint b) {
  const uint l = local_id(), wg = local_size();
  U4* s = data + size_t(group_id() % slices) * slice_vecs;
  for (uint r = 0; r < reps; ++r) {
#pragma unroll 4
    for (uint i = l; i < slice_vecs; i += wg) s[i] = s[i] * a + b;
  }
}
