// flops: the flops-per-element sweep of seed 001 section 5, the CUDA twin of
// kernels/opencl/flops.cl (same slices, same element order, same arithmetic): each thread
// loads CHAINS elements of T, applies N flops to each (steps = 0: one multiply; else `steps`
// dependent fma_(x, a, b), one rounding each), stores them back in place, `passes` times
// (1: from device memory; many: the block's slice stays in L1). Pass p maps chain c to element
// (c + p * shift) % CHAINS, so no element stays in a register between passes.
// The independent chains give the FMA pipes their instruction-level parallelism (compute.cu
// reaches 66.3 TFLOP/s fp32 with 16 chains). NVRTC runs with --fmad=false; fma_ is explicit.
#include "archbench.cuh"

// Trips per unrolled loop body: with 16 chains the loop's counter and branch are ~1% of the
// issue slots (compute.cu measured 16 against 4 as 66.3 against 65.3 TFLOP/s).
#ifndef UNROLL
#define UNROLL 16
#endif
constexpr int kUnroll = UNROLL;

extern "C" __global__ void flops(T* __restrict__ data, const T a, const T b, const uint steps, const uint passes,
                                 const uint shift) {
  const uint wg = local_size();
  T* s = data + size_t(group_id()) * wg * CHAINS + local_id();
  for (uint p = 0; p < passes; ++p) {
    const uint rot = p * shift;
    T x[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = s[((c + rot) & (CHAINS - 1)) * wg];
    if (steps == 0) {
#pragma unroll
      for (int c = 0; c < CHAINS; ++c) x[c] = x[c] * a;
    } else {
#pragma unroll kUnroll
      for (uint i = 0; i < steps; ++i) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) x[c] = fma_(x[c], a, b);
      }
    }
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) s[((c + rot) & (CHAINS - 1)) * wg] = x[c];
  }
}

// The cache points (flops.cl says why): read-only passes, the results accumulated in registers and stored once
// at the end, so that every pass is served by the cache alone (NVIDIA's L1 is write-through:
// in-place stores would make each pass an L2 write stream). Chain c keeps an accumulator; in
// pass p it loads element j = (c + p * shift) % CHAINS and, for N = 1, adds it (one add);
// for N = 2 steps, y = fma(x, a, acc), then steps - 1 more y = fma(y, a, b), and acc = y.
// After the last pass, element c of the work-item holds acc of chain c.
extern "C" __global__ void flops_cache(T* __restrict__ data, const T a, const T b, const uint steps, const uint passes,
                          const uint shift) {
  const uint wg = local_size();
  T* s = data + size_t(group_id()) * wg * CHAINS + local_id();
  T acc[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) acc[c] = T(0);
  for (uint p = 0; p < passes; ++p) {
    const uint rot = p * shift;
    T y[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) y[c] = s[((c + rot) & (CHAINS - 1)) * wg];
    if (steps == 0) {
#pragma unroll
      for (int c = 0; c < CHAINS; ++c) acc[c] = acc[c] + y[c];
    } else {
#pragma unroll
      for (int c = 0; c < CHAINS; ++c) y[c] = fma_(y[c], a, acc[c]);
#pragma unroll kUnroll
      for (uint i = 1; i < steps; ++i) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) y[c] = fma_(y[c], a, b);
      }
#pragma unroll
      for (int c = 0; c < CHAINS; ++c) acc[c] = y[c];
    }
  }
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) s[c * wg] = acc[c];
}
