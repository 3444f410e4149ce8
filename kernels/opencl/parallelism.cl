// parallelism: seed 001 section 5.2, instruction- against thread-level parallelism. Each
// work-item runs CHAINS (1 to 16, a -D value) independent chains of `iters` dependent steps
// x = fma(x, a, b), a and b runtime scalars, then stores ((x0 + x1) + x2) + ... . Chain c
// starts from in[gid + c * n]. No contraction; fma() is one rounding, as the host's std::fma.
#pragma OPENCL FP_CONTRACT OFF

__kernel void fma_chains(__global const float* restrict in, __global float* restrict out, const float a,
                         const float b, const uint iters) {
  const size_t gid = get_global_id(0), n = get_global_size(0);
  float x[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) x[c] = in[gid + c * n];
  for (uint i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = fma(x[c], a, b);
  }
  float sum = x[0];
#pragma unroll
  for (int c = 1; c < CHAINS; ++c) sum += x[c];
  out[gid] = sum;
}
