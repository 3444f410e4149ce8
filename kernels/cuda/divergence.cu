// divergence: thread-dependent branches (seed 002 section 2.4, Fig. 8 and Table 3), the CUDA
// twin of kernels/opencl/divergence.cl. Thread `lid` of a block takes path lid % PATHS, so
// the lanes of one warp take different paths and the warp runs them one after another. Every
// path does the same work: 4 independent chains of `iters` dependent fmaf steps with its own
// runtime constants coef[2k], coef[2k+1] at an index fixed in the path's own code, so the
// compiler cannot merge the paths into one loop. PATHS == 1 has no branch. fmaf is one
// rounding and the sum is ((x0 + x1) + x2) + x3, as the host's std::fma reference computes.
#include "archbench.cuh"

#define BODY(k)                                           \
  {                                                       \
    const float a = coef[2 * (k)], b = coef[2 * (k) + 1]; \
    for (uint i = 0; i < iters; ++i) {                    \
      x0 = fmaf(x0, a, b);                                \
      x1 = fmaf(x1, a, b);                                \
      x2 = fmaf(x2, a, b);                                \
      x3 = fmaf(x3, a, b);                                \
    }                                                     \
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

extern "C" __global__ void paths(const float* __restrict__ in, const float* __restrict__ coef,
                                 float* __restrict__ out, const uint iters) {
  const size_t gid = global_id(), n = global_size();
  float x0 = in[gid], x1 = in[gid + n], x2 = in[gid + 2 * n], x3 = in[gid + 3 * n];
#if PATHS == 1
  BODY(0)
#else
  const uint path = local_id() % PATHS;
  switch (path) { PATH_CASES(BODY) }
#endif
  out[gid] = ((x0 + x1) + x2) + x3;
}

// The seed's own branch body, integer division and modulo (divergence.cl says how it is kept
// safe for any input).
#define DIVMOD(k)                                       \
  {                                                     \
    const uint a = coef[2 * (k)], b = coef[2 * (k) + 1]; \
    for (uint i = 0; i < iters; ++i) {                  \
      t1 = t1 / t2 + a;                                 \
      t2 = t2 % t1 + b;                                 \
    }                                                   \
  }

extern "C" __global__ void divmod(const uint* __restrict__ in, const uint* __restrict__ coef, uint* __restrict__ out,
                                  const uint iters) {
  const size_t gid = global_id(), n = global_size();
  uint t1 = in[gid], t2 = in[gid + n];
#if PATHS == 1
  DIVMOD(0)
#else
  const uint path = local_id() % PATHS;
  switch (path) { PATH_CASES(DIVMOD) }
#endif
  out[gid] = t1 + t2;
}
