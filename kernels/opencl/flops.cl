// flops: the flops-per-element sweep of seed 001 section 5 (its Fig. 3 polynomial kernel),
// for the empirical roofline: each work-item loads CHAINS elements of T, applies N flops to
// each and stores them back, so the arithmetic intensity is N / (2 sizeof(T)) FLOP/byte.
//  - steps = 0: N = 1, one multiply x = x * a;
//  - steps > 0: N = 2 steps, `steps` dependent x = fma(x, a, b) per element, a and b runtime
//    scalars; fma() is one rounding, so the host replays it bit-exactly with std::fma.
// The CHAINS elements of a work-item are independent chains (instruction-level parallelism),
// so that high-N points reach the FMA peak and low-N points keep loads in flight.
// Work-group g owns the contiguous slice [g * wg * CHAINS, (g + 1) * wg * CHAINS); work-item
// l owns its elements l + j * wg (j < CHAINS), coalesced for each j. The slice is updated in
// place `passes` times (1 for the device-memory points: the whole array streams once; many
// for the cache points: the slice stays in the cache, reuse inside the kernel). In pass p,
// chain c takes element j = (c + p * shift) % CHAINS: the same elements each pass in a
// different order (shift is 1 at runtime), so the compiler cannot keep an element in a
// register from one pass to the next, and every work-item still touches only its own
// elements (no barrier).
#pragma OPENCL FP_CONTRACT OFF
#if IS_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

__kernel void flops(__global T* restrict data, const T a, const T b, const uint steps, const uint passes,
                    const uint shift) {
  const uint wg = (uint)get_local_size(0);
  __global T* s = data + get_group_id(0) * wg * CHAINS + get_local_id(0);
  for (uint p = 0; p < passes; ++p) {
    const uint rot = p * shift;
    T x[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = s[((c + rot) & (CHAINS - 1)) * wg];
    if (steps == 0) {
#pragma unroll
      for (int c = 0; c < CHAINS; ++c) x[c] = x[c] * a;
    } else {
#pragma unroll 8
      for (uint i = 0; i < steps; ++i) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) x[c] = fma(x[c], a, b);
      }
    }
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) s[((c + rot) & (CHAINS - 1)) * wg] = x[c];
  }
}

// The cache points: read-only passes, the results accumulated in registers and stored once
// at the end, so that every pass is served by the cache alone (NVIDIA's L1 is write-through:
// in-place stores would make each pass an L2 write stream). Chain c keeps an accumulator; in
// pass p it loads element j = (c + p * shift) % CHAINS and, for N = 1, adds it (one add);
// for N = 2 steps, y = fma(x, a, acc), then steps - 1 more y = fma(y, a, b), and acc = y.
// After the last pass, element c of the work-item holds acc of chain c.
__kernel void flops_cache(__global T* restrict data, const T a, const T b, const uint steps, const uint passes,
                          const uint shift) {
  const uint wg = (uint)get_local_size(0);
  __global T* s = data + get_group_id(0) * wg * CHAINS + get_local_id(0);
  T acc[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) acc[c] = (T)0;
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
      for (int c = 0; c < CHAINS; ++c) y[c] = fma(y[c], a, acc[c]);
#pragma unroll 8
      for (uint i = 1; i < steps; ++i) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) y[c] = fma(y[c], a, b);
      }
#pragma unroll
      for (int c = 0; c < CHAINS; ++c) acc[c] = y[c];
    }
  }
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) s[c * wg] = acc[c];
}
