// compute: arithmetic throughput (seed 000 Table I, seed 002 section 2.1), the CUDA twin of
// kernels/opencl/compute.cl: the same chains, steps and stored sum, written once over the
// element type T and the width W (vec<T, W>; 16-bit floats of even width use the packed
// HFMA2/HADD2/HMUL2 instructions). Specialised by the host with T, W, CHAINS, ITERS,
// OP_ADD | OP_MUL | OP_MAD and IS_INT (see compute.cl for why integer chains go in pairs).
// NVRTC runs with --fmad=false: x*p+q stays two roundings unless fma is asked for, as the host
// reference assumes.
#include "archbench.cuh"

// (VT, the OpenCL vector type name, is defined too: it is not used here.)
typedef vec<T, W> V;

template <class X, class P>
__device__ __forceinline__ X step(const X& x, const P& p, const T q) {
#if OP_ADD
  return x + p;
#elif OP_MUL
  return x * p;
#elif IS_INT
  return x * p + q;
#else
  return fma_(x, V(p), V(q));
#endif
}

extern "C" __global__ void compute(const V* __restrict__ in, V* __restrict__ out, const T a, const T b) {
  const size_t gid = global_id(), n = global_size();
  V x[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) x[c] = in[gid + size_t(c) * n];
#pragma unroll 4
  for (int i = 0; i < ITERS; ++i) {
#if IS_INT
#pragma unroll
    for (int c = 0; c < CHAINS; c += 2) x[c] = step(x[c], x[c + 1], a);
#pragma unroll
    for (int c = 0; c < CHAINS; c += 2) x[c + 1] = step(x[c + 1], x[c], b);
#else
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = step(x[c], a, b);
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = step(x[c], b, a);
#endif
  }
  V s = x[0];
#pragma unroll
  for (int c = 1; c < CHAINS; ++c) s = s + x[c];
  out[gid] = s;
}
