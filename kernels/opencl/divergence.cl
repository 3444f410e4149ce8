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
#define CASE(B, k) \
  case k:          \
    B(k) break;
#define CASES4(B, k) CASE(B, k) CASE(B, k + 1) CASE(B, k + 2) CASE(B, k + 3)
// PATH_CASES(B): a case for each of the PATHS paths, each running body B with its own index.
#if PATHS > 32
#define CASES_ABOVE_32(B) \
  CASES4(B, 32) CASES4(B, 36) CASES4(B, 40) CASES4(B, 44) CASES4(B, 48) CASES4(B, 52) CASES4(B, 56) CASES4(B, 60)
#else
#define CASES_ABOVE_32(B)
#endif
#if PATHS > 16
#define CASES_ABOVE_16(B) CASES4(B, 16) CASES4(B, 20) CASES4(B, 24) CASES4(B, 28) CASES_ABOVE_32(B)
#else
#define CASES_ABOVE_16(B)
#endif
#if PATHS > 8
#define CASES_ABOVE_8(B) CASES4(B, 8) CASES4(B, 12) CASES_ABOVE_16(B)
#else
#define CASES_ABOVE_8(B)
#endif
#if PATHS > 4
#define CASES_ABOVE_4(B) CASES4(B, 4) CASES_ABOVE_8(B)
#else
#define CASES_ABOVE_4(B)
#endif
#if PATHS > 2
#define CASES_ABOVE_2(B) CASE(B, 2) CASE(B, 3) CASES_ABOVE_4(B)
#else
#define CASES_ABOVE_2(B)
#endif
#define PATH_CASES(B) CASE(B, 0) CASE(B, 1) CASES_ABOVE_2(B)

__kernel void paths(__global const float* restrict in, __global const float* restrict coef,
                    __global float* restrict out, const uint iters) {
  const size_t gid = get_global_id(0), n = get_global_size(0);
  float x0 = in[gid], x1 = in[gid + n], x2 = in[gid + 2 * n], x3 = in[gid + 3 * n];
#if PATHS == 1
  BODY(0)
#else
  const uint path = (uint)get_local_id(0) % PATHS;
  switch (path) { PATH_CASES(BODY) }
#endif
  out[gid] = ((x0 + x1) + x2) + x3;
}

// The seed's own branch body (Fig. 8: repeat128(t1 /= t2; t2 %= t1;)), made safe for any
// input: one chain of `iters` steps t1 = t1 / t2 + a_k, t2 = t2 % t1 + b_k, unsigned, with the
// path's own runtime constants (a_k >= 1, b_k >= 2 from `coef`): t1 and t2 never reach zero
// and stay below 2^17 (t2 >= 2 halves t1 each step), so no division by zero, no overflow.
// Integer division and modulo are long instruction sequences on a GPU (no divide unit), so
// this body costs far more per step than an fma, as the seed's did.
#define DIVMOD(k)                                       \
  {                                                     \
    const uint a = coef[2 * (k)], b = coef[2 * (k) + 1]; \
    for (uint i = 0; i < iters; ++i) {                  \
      t1 = t1 / t2 + a;                                 \
      t2 = t2 % t1 + b;                                 \
    }                                                   \
  }

__kernel void divmod(__global const uint* restrict in, __global const uint* restrict coef,
                     __global uint* restrict out, const uint iters) {
  const size_t gid = get_global_id(0), n = get_global_size(0);
  uint t1 = in[gid], t2 = in[gid + n];
#if PATHS == 1
  DIVMOD(0)
#else
  const uint path = (uint)get_local_id(0) % PATHS;
  switch (path) { PATH_CASES(DIVMOD) }
#endif
  out[gid] = t1 + t2;
}
