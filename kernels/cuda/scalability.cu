// scalability: seed 002 section 2.5, formula 3, the CUDA twin of
// kernels/opencl/scalability.cl: thread gid adds its own run of s consecutive floats,
// c[gid*s + i] = a[gid*s + i] + b[gid*s + i], so how the time scales with the number of
// threads is the same experiment on both backends.
#include "archbench.cuh"

extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ c, const uint s) {
  const size_t base = global_id() * (size_t)s;
  for (uint i = 0; i < s; ++i) c[base + i] = a[base + i] + b[base + i];
}
