// compute: arithmetic throughput (seed 000 Table I, seed 002 section 2.1), the CUDA twin of
// kernels/opencl/compute.cl: the same chains, steps and stored sum, written once over the
// element type T and the width W (vec<T, W>; 16-bit floats of even width use the packed
// HFMA2/HADD2/HMUL2 instructions). Specialised by the host with T, W, CHAINS, ITERS,
// OP_ADD | OP_SUB | OP_MUL | OP_DIV | OP_MAD and IS_INT (see compute.cl for why integer chains go in pairs).
// NVRTC runs with --fmad=false: x*p+q stays two roundings unless fma is asked for, as the host
// reference assumes.
#include "archbench.cuh"

// (VT, the OpenCL vector type name, is defined too: it is not used here.)
typedef vec<T, W> V;

// The runtime scalars a and b as the kernel takes them: T, except 16-bit floats, which come
// as a packed pair (both halves equal). The packed steps then read them straight from the
// parameter bank, and ptxas issues about half of the HFMA2s on the second (.MMA) pipe: on an
// H100 that doubles half2 throughput (66 -> 120+ TFLOP/s); built in a register from a scalar,
// every HFMA2 goes to the FMA pipe.
template <class X, bool = is_16bit<X>::value>
struct scalar_arg {
  typedef X type;
  static __device__ __forceinline__ X one(X s) { return s; }
};
template <class X>
struct scalar_arg<X, true> {
  typedef typename pair_of<X>::type type;
  static __device__ __forceinline__ X one(type s) { return s.x; }
};
typedef typename scalar_arg<T>::type S;

#if IS_INT
// Integer chains go in pairs and feed each other (compute.cl).
__device__ __forceinline__ V step(const V& x, const V& p, const T q) {
#if OP_ADD
  return x + p;
#elif OP_SUB
  return x - p;
#elif OP_MUL
  return x * p;
#else
  return x * p + q;
#endif
}
#else
// 16-bit floats through float, both ways (round to nearest even); a template, so that only a
// 16-bit T instantiates it.
template <class X> struct via_float;
template <> struct via_float<half> {
  static __device__ __forceinline__ float to(half h) { return __half2float(h); }
  static __device__ __forceinline__ half from(float f) { return __float2half_rn(f); }
};
template <> struct via_float<bfloat> {
  static __device__ __forceinline__ float to(bfloat h) { return __bfloat162float(h); }
  static __device__ __forceinline__ bfloat from(float f) { return __float2bfloat16_rn(f); }
};

template <class E = T>  // a template, so that the branch not taken is not compiled
__device__ __forceinline__ V step(const V& x, const S p, const S q) {
#if OP_DIV
  // 16-bit division: CUDA's __hdiv/__h2div multiply by an approximate reciprocal and do not
  // always give the correctly rounded quotient; the float quotient (IEEE under -prec-div)
  // rounded once to 16 bits does (24 >= 2 x 11 + 2 bits), as the host reference and OpenCL.
  if constexpr (is_16bit<E>::value) {
    typedef via_float<E> F;
    const float ps = F::to(scalar_arg<E>::one(p));
    V r;
#pragma unroll
    for (int i = 0; i < W; ++i) r.v[i] = F::from(F::to(x.v[i]) / ps);
    return r;
  } else
#endif
  if constexpr (is_16bit<E>::value && W % 2 == 0) {  // packed pairs, scalars as pairs
    typedef typename pair_of<E>::type P;
    V r;
#pragma unroll
    for (int i = 0; i < W; i += 2) {
      const P xi = *reinterpret_cast<const P*>(&x.v[i]);
#if OP_ADD
      *reinterpret_cast<P*>(&r.v[i]) = __hadd2(xi, p);
#elif OP_SUB
      *reinterpret_cast<P*>(&r.v[i]) = __hsub2(xi, p);
#elif OP_MUL
      *reinterpret_cast<P*>(&r.v[i]) = __hmul2(xi, p);
#else
      *reinterpret_cast<P*>(&r.v[i]) = __hfma2(xi, p, q);
#endif
    }
    return r;
  } else {
    const T ps = scalar_arg<T>::one(p), qs = scalar_arg<T>::one(q);
#if OP_ADD
    return x + ps;
#elif OP_SUB
    return x - ps;
#elif OP_MUL
    return x * ps;
#elif OP_DIV
    return x / ps;  // IEEE division (NVRTC's default -prec-div=true), as the host reference
#else
    return fma_(x, V(ps), V(qs));
#endif
  }
}
#endif

// Trips per unrolled loop body: the loop's own counter and branch must be a small share of the
// issue slots for a rate within 1% of the FMA peak. On the H100, 16 against 4: float8 66.3
// against 65.3 TFLOP/s, double 33.48 against 33.28, half2 129 against 120. UNROLL may be set
// with ARCHBENCH_CUDA_OPTIONS (-DUNROLL=8).
#ifndef UNROLL
#define UNROLL 16
#endif
constexpr int kUnroll = UNROLL;

#if IS_INT
extern "C" __global__ void compute(const V* __restrict__ in, V* __restrict__ out, const T a, const T b) {
#else
extern "C" __global__ void compute(const V* __restrict__ in, V* __restrict__ out, const S a, const S b) {
#endif
  const size_t gid = global_id(), n = global_size();
  V x[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) x[c] = in[gid + size_t(c) * n];
#pragma unroll kUnroll
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
