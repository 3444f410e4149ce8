// local: shared-memory bandwidth against the stride between threads (seed 002 section 2.3.2,
// Figs. 20-21: bank conflicts), the CUDA twin of kernels/opencl/local.cl. __shared__ is
// OpenCL's __local. Access k (0-based over the whole loop) of the thread with local id l is at
//   word(l, k) = (l*stride + k*STEP) & (WORDS - 1),  STEP = 32 words,
// so every access of a thread stays in one bank and a warp's lanes hit banks l*stride mod 32.
// Same addresses, same order, same sums and values as OpenCL, so the host references check
// both. The read loop is kept lean (no mask, no bounds checks, no address arithmetic in the
// loop: local_read says how) because at stride 1 it should run near the shared-memory limit of
// 128 B/clk per SM: with an address computation per access (two integer instructions besides
// the LDS and the FADD) the SM's instruction issue, not shared memory, would be the limit.
// Specialised with WORDS, LOOPS.
#include "archbench.cuh"

#define STEP 32u
#define MASK ((uint)(WORDS) - 1u)

// Fills the shared array from `in` (coalesced), then reads it with the stride; the sum of the
// values read, in order, is stored per thread.
// The words a thread reads repeat every PERIOD trips (16*STEP*PERIOD is a multiple of WORDS).
// The array is laid out twice over (SPAN = WORDS + 16*STEP*PERIOD words, word i holding word
// i & MASK), so that over a period a thread's reads need no mask: the j-th is at its base
// (l*stride) & MASK plus the constant j*STEP, one LDS with an immediate offset and one FADD.
// With masked addresses the loop kept all 16*PERIOD of them in registers (153 a thread at 4096
// words): one group of 256 an SM at a time, each group's fill (latency-bound, before its
// barrier) unhidden, 32.38 TB/s at stride 1 on the H100 and the H200; with the second copy 23
// registers, the 4 groups an SM all at once, and 33.10 TB/s on the H200 (99% of 128 B/clk at
// 1980 MHz; results/nvidia-h200/580-159-04/peaks.md). The fill reads each word of `in` once and
// writes it to each of its copies.
// volatile keeps every read: seeing the same words read every period, the compiler would
// otherwise load them once and only redo the additions. Same words, same order, same sum.
#define PERIOD (WORDS >= 16 * STEP ? WORDS / (16 * STEP) : 1)
#define SPAN (WORDS + 16 * STEP * PERIOD)
extern "C" __global__ void local_read(const float* __restrict__ in, float* __restrict__ out, const uint stride) {
  __shared__ float lds[SPAN];
  const uint l = local_id(), wg = local_size();
  for (uint i = l; i < WORDS; i += wg) {
    const float v = in[i];
    for (uint j = i; j < SPAN; j += WORDS) lds[j] = v;
  }
  __syncthreads();
  const uint s = (l * stride) & MASK;
  float sum = 0.0f;
  const volatile float* shared = lds + s;
  int t = 0;
  for (; t + int(PERIOD) <= LOOPS; t += PERIOD) {
#pragma unroll
    for (int j = 0; j < int(16 * PERIOD); ++j) sum += shared[j * STEP];
  }
  // The trips left over where LOOPS is not a multiple of PERIOD (the test size).
  for (uint n = uint(t) * 16u * STEP; t < LOOPS; ++t) {
#pragma unroll
    for (int k = 0; k < 16; ++k) sum += lds[(s + n + k * STEP) & MASK];
    n += 16 * STEP;
  }
  out[global_id()] = sum;
}

// Fills the shared array with a sentinel (-1), writes the value k*wg + l (exact as a float) at
// word(l, k), and copies the array out to this block's slice of `out`.
extern "C" __global__ void local_write(float* __restrict__ out, const uint stride) {
  __shared__ float lds[WORDS];
  const uint l = local_id(), wg = local_size();
  for (uint i = l; i < WORDS; i += wg) lds[i] = -1.0f;
  __syncthreads();
  const uint s = l * stride;
  uint n = 0, v = l;
  for (int t = 0; t < LOOPS; ++t) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      lds[(s + n) & MASK] = (float)v;
      n += STEP;
      v += wg;
    }
  }
  __syncthreads();
  float* slice = out + (size_t)group_id() * WORDS;
  for (uint i = l; i < WORDS; i += wg) slice[i] = lds[i];
}
