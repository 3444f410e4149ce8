// local: shared-memory bandwidth against the stride between threads (seed 002 section 2.3.2,
// Figs. 20-21: bank conflicts), the CUDA twin of kernels/opencl/local.cl. __shared__ is
// OpenCL's __local. Access k (0-based over the whole loop) of the thread with local id l is at
//   word(l, k) = (l*stride + k*STEP) & (WORDS - 1),  STEP = 32 words,
// so every access of a thread stays in one bank and a warp's lanes hit banks l*stride mod 32.
// Same addresses, same order, same sums and values as OpenCL, so the host references check
// both. The read loop is kept lean (masked addresses, no bounds checks, no address arithmetic
// in the loop) because at stride 1 it should run near the shared-memory limit of 128 B/clk
// per SM: with an address computation per access (two integer instructions besides the LDS
// and the FADD) the SM's instruction issue, not shared memory, would be the limit.
// Specialised with WORDS, LOOPS.
#include "archbench.cuh"

#define STEP 32u
#define MASK ((uint)(WORDS) - 1u)

// Fills the shared array from `in` (coalesced), then reads it with the stride; the sum of the
// values read, in order, is stored per thread.
extern "C" __global__ void local_read(const float* __restrict__ in, float* __restrict__ out, const uint stride) {
  __shared__ float lds[WORDS];
  const uint l = local_id(), wg = local_size();
  for (uint i = l; i < WORDS; i += wg) lds[i] = in[i];
  __syncthreads();
  const uint s = l * stride;
  float sum = 0.0f;
  // The words a thread reads repeat every PERIOD trips (16*STEP*PERIOD is a multiple of
  // WORDS), so over one period the addresses are loop-invariant: the loop keeps all 16*PERIOD
  // of them in registers and each access is one LDS and one FADD, no address arithmetic.
  // volatile keeps every read: seeing the same words read every period, the compiler would
  // otherwise load them once and only redo the additions. Same words, same order, same sum.
  constexpr int PERIOD = WORDS >= 16 * STEP ? WORDS / (16 * STEP) : 1;
  const volatile float* shared = lds;
  int t = 0;
  for (; t + PERIOD <= LOOPS; t += PERIOD) {
#pragma unroll
    for (int j = 0; j < 16 * PERIOD; ++j) sum += shared[(s + j * STEP) & MASK];
  }
  // The trips left over where LOOPS is not a multiple of PERIOD (the test size).
  for (uint n = uint(t) * 16u * STEP; t < LOOPS; ++t) {
#pragma unroll
    for (int k = 0; k < 16; ++k) sum += shared[(s + n + k * STEP) & MASK];
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
