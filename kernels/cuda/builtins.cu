// builtins: throughput of the arithmetic instructions and built-in math functions of seed 002
// Table 1 (section 2.1), in calls per second: the CUDA twin of kernels/opencl/builtins.cl.
// The chains, forms (OP_ADD ... SINCOS), trips and stored sum are the same, so that one host
// reference (bench/builtins.cpp) checks both backends and the two rates compare call for call.
// Specialised by the host with T, W, CHAINS, ITERS, FN, FORM_A, FORM_B and ACC (see
// builtins.cl). VT, IT and CVT name OpenCL types and conversions and are not used here.
//
// FN is the OpenCL built-in's name; the table below maps each one to the CUDA function of the
// same meaning, per element type, as cl_<name>. Float calls name CUDA's float functions
// (sinf, not sin), so that no float chain is computed in double. Built-ins CUDA lacks are
// composed from CUDA functions below the table, as a CUDA programmer would write them; their
// cost is part of the call, as it is in an OpenCL library that composes them the same way.
// CUDA's math functions are scalar and a GPU has no vector math unit, so a W-wide chain calls
// the function lane by lane, as an OpenCL compiler for a GPU does with float4 built-ins.
// NVRTC runs without fast math (the default, non-intrinsic functions: sinf, not __sinf) and
// with --fmad=false, so the glue around a call (x*P, x+P) stays unfused as in builtins.cl's
// FP_CONTRACT OFF, and the exact built-ins agree bit for bit with the host.
#include "archbench.cuh"

#define CAT_(p, s) p##s
#define CAT(p, s) CAT_(p, s)

// OpenCL name -> CUDA float function, CUDA double function. Further arguments (y, z, an int,
// a pointer for a second result) pass through; overloads are chosen by the first argument.
#define MAP(name, f32, f64)                                                 \
  template <class... A>                                                     \
  __device__ __forceinline__ auto cl_##name(float x, A... r) {              \
    return f32(x, r...);                                                    \
  }                                                                         \
  template <class... A>                                                     \
  __device__ __forceinline__ auto cl_##name(double x, A... r) {             \
    return f64(x, r...);                                                    \
  }
MAP(fmax, fmaxf, fmax)
MAP(fmin, fminf, fmin)
MAP(sin, sinf, sin)
MAP(asin, asinf, asin)
MAP(cos, cosf, cos)
MAP(acos, acosf, acos)
MAP(tan, tanf, tan)
MAP(atan, atanf, atan)
MAP(exp, expf, exp)
MAP(log, logf, log)
MAP(rsqrt, rsqrtf, rsqrt)
MAP(frexp, frexpf, frexp)
MAP(hypot, hypotf, hypot)
MAP(ldexp, ldexpf, ldexp)
MAP(exp10, exp10f, exp10)
MAP(ilogb, ilogbf, ilogb)
MAP(log10, log10f, log10)
MAP(sinh, sinhf, sinh)
MAP(cosh, coshf, cosh)
MAP(tanh, tanhf, tanh)
MAP(asinh, asinhf, asinh)
MAP(acosh, acoshf, acosh)
MAP(atanh, atanhf, atanh)
MAP(cbrt, cbrtf, cbrt)
MAP(ceil, ceilf, ceil)
MAP(copysign, copysignf, copysign)
MAP(fabs, fabsf, fabs)
MAP(fdim, fdimf, fdim)
MAP(floor, floorf, floor)
MAP(fma, fmaf, fma)
MAP(fmod, fmodf, fmod)
MAP(atan2, atan2f, atan2)
MAP(sinpi, sinpif, sinpi)
MAP(cospi, cospif, cospi)
MAP(log1p, log1pf, log1p)
MAP(logb, logbf, logb)
MAP(modf, modff, modf)
MAP(lgamma, lgammaf, lgamma)
MAP(remainder, remainderf, remainder)
MAP(rint, rintf, rint)
MAP(round, roundf, round)
MAP(trunc, truncf, trunc)
MAP(erfc, erfcf, erfc)
MAP(erf, erff, erf)
MAP(expm1, expm1f, expm1)
MAP(tgamma, tgammaf, tgamma)
MAP(nextafter, nextafterf, nextafter)
// remquo: CUDA's quotient agrees with the exact one in its low 3 bits and sign (OpenCL asks
// for 7). The chains here divide by d = 1 values in [-0.27, 1.12], so the quotient is 0 or 1
// and every conforming remquo (and the host's) gives it exactly.
MAP(remquo, remquof, remquo)
// Not OpenCL built-ins of the table: CUDA functions the compositions below are made of.
MAP(pow, powf, pow)
MAP(sincos3, sincosf, sincos)  // CUDA's sincos(x, &sin, &cos)
#undef MAP

// Composed (no CUDA function of that name). Constants are rounded to X.
template <class X> __device__ __forceinline__ X inv_pi() { return X(0.318309886183790671537767526745028724); }
// mad: a * b + c computed as the implementation likes (the reference allows fma or a rounded
// product then sum); a GPU's mad is one fma.
template <class X> __device__ __forceinline__ X cl_mad(X x, X y, X z) { return cl_fma(x, y, z); }
// asinpi, acospi, atanpi, atan2pi: the angle in half-turns, times a rounded 1/pi.
template <class X> __device__ __forceinline__ X cl_asinpi(X x) { return cl_asin(x) * inv_pi<X>(); }
template <class X> __device__ __forceinline__ X cl_acospi(X x) { return cl_acos(x) * inv_pi<X>(); }
template <class X> __device__ __forceinline__ X cl_atanpi(X x) { return cl_atan(x) * inv_pi<X>(); }
template <class X> __device__ __forceinline__ X cl_atan2pi(X y, X x) { return cl_atan2(y, x) * inv_pi<X>(); }
// tanpi: tan(pi * x) would round pi * x first (large relative error near the poles);
// sinpi and cospi take x exactly.
template <class X> __device__ __forceinline__ X cl_tanpi(X x) { return cl_sinpi(x) / cl_cospi(x); }
// fract: OpenCL's definition, fmin(x - floor(x), the largest X below 1), *i = floor(x); exact.
template <class X> __device__ __forceinline__ X cl_fract(X x, X* i) {
  const X fl = cl_floor(x);
  *i = fl;
  return cl_fmin(x - fl, X(sizeof(X) == 4 ? 0x1.fffffep-1 : 0x1.fffffffffffffp-1));
}
// sincos: OpenCL returns the sine and stores the cosine.
template <class X> __device__ __forceinline__ X cl_sincos(X x, X* c) {
  X s;
  cl_sincos3(x, &s, c);
  return s;
}
// pown(x, n) = x^n: pow with an integral exponent (which pow handles for x < 0 too).
template <class X> __device__ __forceinline__ X cl_pown(X x, int n) { return cl_pow(x, X(n)); }
// powr(x, y) = x^y for x >= 0 (OpenCL: NaN for x < 0, never reached here); pow for x >= 0.
template <class X> __device__ __forceinline__ X cl_powr(X x, X y) { return cl_pow(x, y); }
// rootn(x, n) = x^(1/n); a negative x has a real root for odd n only (even n: pow gives NaN,
// as OpenCL asks). 1/n is loop-invariant here, so the compiler hoists the division.
template <class X> __device__ __forceinline__ X cl_rootn(X x, int n) {
  const bool odd = n & 1;
  const X r = cl_pow(odd ? cl_fabs(x) : x, X(1) / X(n));
  return odd ? cl_copysign(r, x) : r;
}

#define CALL CAT(cl_, FN)

// One lane of one chain: the forms of builtins.cl on scalars (x, its float accumulator f and
// its integer accumulator i), with (P, Q, K) = (a, b, ka) in form A and (b, a, kb) in form B.
#define STEP_OP_ADD(x, f, i, P, Q, K) x = x + P;
#define STEP_OP_SUB(x, f, i, P, Q, K) x = x - P;
#define STEP_OP_MUL(x, f, i, P, Q, K) x = x * P;
#define STEP_OP_DIV(x, f, i, P, Q, K) x = x / P;
#define STEP_PURE(x, f, i, P, Q, K) x = CALL(x);
#define STEP_MAD(x, f, i, P, Q, K) x = CALL(x, P, Q);
#define STEP_ARG2(x, f, i, P, Q, K) x = CALL(x, P);
#define STEP_REV2(x, f, i, P, Q, K) x = CALL(P, x);
#define STEP_NEG2(x, f, i, P, Q, K) x = CALL(-x, P);
#define STEP_ARG_K(x, f, i, P, Q, K) x = CALL(x, K);
#define STEP_OUTMUL(x, f, i, P, Q, K) x = CALL(x) * P;
#define STEP_OUTADD(x, f, i, P, Q, K) x = CALL(x) + P;
#define STEP_INMUL(x, f, i, P, Q, K) x = CALL(x * P);
#define STEP_INADD(x, f, i, P, Q, K) x = CALL(x + P);
#define STEP_INADD_C(x, f, i, P, Q, K) x = CALL(x + P, d);
#define STEP_INADD_K(x, f, i, P, Q, K) x = CALL(x + P, K);
#define STEP_OUTMUL_K(x, f, i, P, Q, K) x = CALL(x, K) * P;
#define STEP_ILOGB(x, f, i, P, Q, K) x = T(CALL(x)) + P;
#define STEP_FRACT(x, f, i, P, Q, K) { T t_; x = CALL(x + P, &t_); f = f + t_; }
#define STEP_FREXP(x, f, i, P, Q, K) { int e_; x = CALL(x * P, &e_); i = i + e_; }
#define STEP_REMQUO(x, f, i, P, Q, K) { int q_; x = CALL(x + P, d, &q_); i = i + q_; }
#define STEP_SINCOS(x, f, i, P, Q, K) { T c_; x = CALL(x, &c_); x = x + c_; }

typedef vec<T, W> V;
typedef vec<int, W> VI;

extern "C" __global__ void builtins(const V* __restrict__ in, V* __restrict__ out, const T a, const T b,
                                    const T d, const int ka, const int kb) {
  const size_t gid = global_id(), n = global_size();
  V x[CHAINS], f[CHAINS];
  VI i[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) {
    x[c] = in[gid + size_t(c) * n];
    f[c] = V(T(0));
    i[c] = VI(0);
  }
  for (int t = 0; t < ITERS; ++t) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
#pragma unroll
      for (int l = 0; l < W; ++l) { CAT(STEP_, FORM_A)(x[c][l], f[c][l], i[c][l], a, b, ka) }
    }
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
#pragma unroll
      for (int l = 0; l < W; ++l) { CAT(STEP_, FORM_B)(x[c][l], f[c][l], i[c][l], b, a, kb) }
    }
  }
  // The sum in builtins.cl's order: the chains, then their accumulators.
  V s = x[0];
#pragma unroll
  for (int c = 1; c < CHAINS; ++c) s = s + x[c];
#if ACC == 1
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) s = s + f[c];
#elif ACC == 2
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) {
#pragma unroll
    for (int l = 0; l < W; ++l) s[l] = s[l] + T(i[c][l]);
  }
#endif
  out[gid] = s;
}
