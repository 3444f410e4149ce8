// parallelism: seed 001 section 5.2, the CUDA twin of kernels/opencl/parallelism.cl: CHAINS
// independent chains of `iters` dependent fmaf steps per thread, then their sum in order.
#include "archbench.cuh"

extern "C" __global__ void fma_chains(const float* __restrict__ in, float* __restrict__ out, const float a,
                                      const float b, const uint iters) {
  const size_t gid = global_id(), n = global_size();
  float x[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) x[c] = in[gid + c * n];
  for (uint i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = fmaf(x[c], a, b);
  }
  float sum = x[0];
#pragma unroll
  for (int c = 1; c < CHAINS; ++c) sum = __fadd_rn(sum, x[c]);
  out[gid] = sum;
}
