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
#define CASE(k) \
  case k:       \
    BODY(k) break;
#define CASES4(k) CASE(k) CASE(k + 1) CASE(k + 2) CASE(k + 3)

extern "C" __global__ void paths(const float* __restrict__ in, const float* __restrict__ coef,
                                 float* __restrict__ out, const uint iters) {
  const size_t gid = global_id(), n = global_size();
  float x0 = in[gid], x1 = in[gid + n], x2 = in[gid + 2 * n], x3 = in[gid + 3 * n];
#if PATHS == 1
  BODY(0)
#else
  const uint path = local_id() % PATHS;
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
