// divergence: thread-dependent branches (seed 002 section 2.4, Fig. 8 and Table 3).
// Specialised by the host with PATHS (1, 2, 4, ..., 64): work-item `lid` takes path
// lid % PATHS, so neighbouring work-items of one warp / sub-group / SIMD vector take
// different paths. Every path does the same work: CHAINS (4) independent chains of `iters`
// dependent fma steps x = fma(x, a_k, b_k), with its own runtime constants a_k, b_k read
// from `coef` at an index fixed in the path's own code. The paths' bodies differ only in
// that index, so a compiler cannot turn the switch into a select without first proving
// that 64 loops are one loop with a loaded constant; none does. PATHS == 1 has no branch.
// No contraction, and fma() is one rounding: the host's std::fma reference is bit-exact.
#pragma OPENCL FP_CONTRACT OFF

#define BODY(k)                                      \
  {                                                  \
    const float a = coef[2 * (k)], b = coef[2 * (k) + 1]; \
    for (uint i = 0; i < iters; ++i) {               \
      x0 = fma(x0, a, b);                            \
      x1 = fma(x1, a, b);                            \
      x2 = fma(x2, a, b);                            \
      x3 = fma(x3, a, b);                            \
    }                                                \
  }
#define CASE(k) \
  case k:       \
    BODY(k) break;
#define CASES4(k) CASE(k) CASE(k + 1) CASE(k + 2) CASE(k + 3)

__kernel void paths(__global const float* restrict in, __global const float* restrict coef,
                    __global float* restrict out, const uint iters) {
  const size_t gid = get_global_id(0), n = get_global_size(0);
  float x0 = in[gid], x1 = in[gid + n], x2 = in[gid + 2 * n], x3 = in[gid + 3 * n];
#if PATHS == 1
  BODY(0)
#else
  const uint path = (uint)get_local_id(0) % PATHS;
  switch (path) {
    CASE(0)
    CASE(1)
#if PATHS > 2
    CASE(2)
    CASE(3)
#endif
#if PATHS > 4
    CASES4(4)
#endif
#if PATHS > 8
    CASES4(8) CASES4(12)
#endif
#if PATHS > 16
    CASES4(16) CASES4(20) CASES4(24) CASES4(28)
#endif
#if PATHS > 32
    CASES4(32) CASES4(36) CASES4(40) CASES4(44) CASES4(48) CASES4(52) CASES4(56) CASES4(60)
#endif
  }
#endif
  out[gid] = ((x0 + x1) + x2) + x3;
}
