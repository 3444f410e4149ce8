// compute: arithmetic throughput (seed 000 Table I, seed 002 section 2.1).
// Specialised by the host with:
//   T (scalar type), VT (vector type, T when W is 1), W (width), CHAINS (independent
//   accumulators per work-item, even, 2..16), ITERS (loop trips), OP_ADD | OP_SUB | OP_MUL |
//   OP_DIV | OP_MAD (no OP_DIV for integers),
//   IS_HALF / IS_DOUBLE (extension pragmas).
// Each trip applies two dependent steps to every chain; every chain starts from its own
// input and the sum of the chains is stored, so nothing is dead.
// Floating point: the steps use the runtime scalars a then b (add: x+a, x+b; sub: x-a, x-b;
// mul: x*a, x*b; div: x/a, x/b; mad: fma(x,a,b), fma(x,b,a)); without fast-math a compiler may
// not reassociate them, nor turn x/a into x*(1/a). Division is IEEE on the devices checked
// (PoCL, CUDA without -prec-div=false): the reference's exact quotient is what they store.
// Floating mad uses fma(): one rounding, so the host reference is bit-exact.
// Integers (unsigned, so wrap-around is defined) may be reassociated, and a chain of
// x+a+b+... has a closed form a compiler finds; so chains go in pairs that feed each
// other (add: x+=y, y+=x; mul: x*=y, y*=x; mad: x=x*y+a, y=y*x+b), which has none.
// No contraction: a*b+c stays two roundings unless the kernel asks for fma(), so the device
// computes exactly what the host reference does (and the op count is what the source says).
#pragma OPENCL FP_CONTRACT OFF
#if IS_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#if IS_HALF
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#endif

#if OP_ADD
#define STEP(x, p, q) x = x + p
#elif OP_SUB
#define STEP(x, p, q) x = x - p
#elif OP_MUL
#define STEP(x, p, q) x = x * p
#elif OP_DIV
#define STEP(x, p, q) x = x / p
#elif OP_MAD && IS_INT
#define STEP(x, p, q) x = x * p + q
#else
#define STEP(x, p, q) x = fma(x, (VT)(p), (VT)(q))
#endif

#define FOR_CHAINS(M) \
  M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)
#define FOR_PAIRS(M) M(0, 1) M(2, 3) M(4, 5) M(6, 7) M(8, 9) M(10, 11) M(12, 13) M(14, 15)
#define DECL(c) VT x##c = (c < CHAINS) ? in[gid + (size_t)(c) * n] : (VT)(0);
#if IS_INT
#define STEP_A(e, o) if (o < CHAINS) { STEP(x##e, x##o, a); }
#define STEP_B(e, o) if (o < CHAINS) { STEP(x##o, x##e, b); }
#else
#define STEP_A(e, o) if (o < CHAINS) { STEP(x##e, a, b); STEP(x##o, a, b); }
#define STEP_B(e, o) if (o < CHAINS) { STEP(x##e, b, a); STEP(x##o, b, a); }
#endif
#define SUM(c) if (c > 0 && c < CHAINS) { s = s + x##c; }

__kernel void compute(__global const VT* restrict in, __global VT* restrict out, const T a, const T b) {
  const size_t gid = get_global_id(0);
  const size_t n = get_global_size(0);
  FOR_CHAINS(DECL)
  for (int i = 0; i < ITERS; ++i) {
    FOR_PAIRS(STEP_A)
    FOR_PAIRS(STEP_B)
  }
  VT s = x0;
  FOR_CHAINS(SUM)
  out[gid] = s;
}
