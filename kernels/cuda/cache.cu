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

// Block g sweeps the `win` vectors from vector `start` (cache.cl says how start is chosen: a
// window never wraps). WG, the block size, is a compile-time value so that the unrolled loads
// take immediate offsets; two accumulators of two lanes each (IADD3): about three instructions
// a 16-byte load, so that the loads, not their bookkeeping, set the rate. Plain loads (no
// __restrict__): the L1 path, not the read-only one.
#ifdef WG  // cache_read only (the rmw kernel is built without it)
extern "C" __global__ void cache_read(const U4* data, uint* __restrict__ out, const uint span, const uint win,
                                      const uint step, const uint reps) {
  const U4* p = data + uint((ulong(group_id()) * step) % span) + local_id();
  const uint nk = win / WG;
  uint a0 = 0, a1 = 0;
  for (uint r = 0; r < reps; ++r) {
#pragma unroll 8
    for (uint k = 0; k < nk; ++k) {
      const U4 v = p[size_t(k) * WG];
      a0 += v[0] + v[1];
      a1 += v[2] + v[3];
    }
  }
  out[global_id()] = a0 + a1;
}
#endif  // WG

extern "C" __global__ void cache_rmw(U4* __restrict__ data, const uint slices, const uint slice_vecs,
                                     const uint reps, const uint a, const uint b) {
  const uint l = local_id(), wg = local_size();
  U4* s = data + size_t(group_id() % slices) * slice_vecs;
  for (uint r = 0; r < reps; ++r) {
#pragma unroll 4
    for (uint i = l; i < slice_vecs; i += wg) s[i] = s[i] * a + b;
  }
}

// Kernel B of seed 001 section 4: one trial per launch (cache.cl says why each of B and C
// looks as it does); the grid strides over the set once, x = x * a + b.
extern "C" __global__ void cache_trial(U4* __restrict__ data, const uint vecs, const uint a, const uint b) {
  for (size_t i = global_id(); i < vecs; i += global_size()) data[i] = data[i] * a + b;
}

// Kernel C of seed 001 section 4: the slice through shared memory a tile at a time, `reps`
// rotated passes with a barrier between them (dynamic shared memory: the launch's local
// argument).
extern "C" __global__ void cache_shared(U4* __restrict__ data, const uint slice, const uint tile, const uint reps,
                                        const uint a, const uint b) {
  extern __shared__ uint4 shared_words[];  // a built-in 16-byte type: no constructor runs on shared memory
  U4* tile_mem = reinterpret_cast<U4*>(shared_words);
  const uint l = local_id(), wg = local_size(), mask = tile - 1;
  U4* s = data + size_t(group_id()) * slice;
  for (uint base = 0; base < slice; base += tile) {
    for (uint i = l; i < tile; i += wg) tile_mem[i] = s[base + i];
    __syncthreads();
    for (uint r = 0; r < reps; ++r) {
      for (uint i = l; i < tile; i += wg) {
        const uint k = (i + r) & mask;
        tile_mem[k] = tile_mem[k] * a + b;
      }
      __syncthreads();
    }
    for (uint i = l; i < tile; i += wg) s[base + i] = tile_mem[i];
  }
}
