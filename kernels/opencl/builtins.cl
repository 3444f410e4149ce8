// builtins: throughput of the arithmetic instructions and built-in math functions of
// seed 002 Table 1 (section 2.1), in calls per second.
// Specialised by the host with:
//   T (float | double), VT (T or T4), IT (int | int4: VT's integer type), CVT (convert_VT),
//   W (width), CHAINS (independent chains per work-item, 1..8), ITERS (loop trips),
//   FN (the built-in), FORM_A and FORM_B (how a chain calls it, below), ACC (0: none,
//   1: a VT accumulator, 2: an IT accumulator), IS_DOUBLE (extension pragma).
// Each trip makes every chain call FN once in form A (with the runtime scalars a, b, d, ka)
// and once in form B (with b, a, kb): two dependent calls per chain and trip. Every chain
// starts from its own pseudo-random input and the sum of the chains is stored, so nothing
// is dead, and the runtime scalars keep the compiler from folding anything.
// The forms keep every chain inside FN's domain and bounded for any number of trips; some
// need one or two cheap operations around the call ("glue", listed per built-in in
// bench/builtins.cpp), which the call count does not include:
//   OP_ADD/SUB/MUL/DIV  x = x + P (-, *, /)   the arithmetic instructions of benchmark-1
//   PURE      x = FN(x)                        MAD       x = FN(x, P, Q)
//   ARG2      x = FN(x, P)                     REV2      x = FN(P, x)
//   NEG2      x = FN(-x, P)                    ARG_K     x = FN(x, K)
//   OUTMUL    x = FN(x) * P                    OUTADD    x = FN(x) + P
//   INMUL     x = FN(x * P)                    INADD     x = FN(x + P)
//   INADD_C   x = FN(x + P, d)                 INADD_K   x = FN(x + P, K)
//   OUTMUL_K  x = FN(x, K) * P                 ILOGB     x = CVT(FN(x)) + P
//   FRACT     x = FN(x + P, &t), f += t        FREXP     x = FN(x * P, &e), i += e
//   REMQUO    x = FN(x + P, d, &q), i += q     SINCOS    x = FN(x, &cosine) + cosine
// (P, Q, K) is (a, b, ka) in form A and (b, a, kb) in form B. Second results (the integer
// part, exponent, quotient, cosine) go into the chain or its accumulator, so they are live.
// No contraction: glue a*b+c stays two roundings, as the host reference assumes.
#pragma OPENCL FP_CONTRACT OFF
#if IS_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#define CAT_(p, s) p##s
#define CAT(p, s) CAT_(p, s)

#define V(s) ((VT)(s))
#define STEP_OP_ADD(x, f, i, P, Q, K) x = x + V(P);
#define STEP_OP_SUB(x, f, i, P, Q, K) x = x - V(P);
#define STEP_OP_MUL(x, f, i, P, Q, K) x = x * V(P);
#define STEP_OP_DIV(x, f, i, P, Q, K) x = x / V(P);
#define STEP_PURE(x, f, i, P, Q, K) x = FN(x);
#define STEP_MAD(x, f, i, P, Q, K) x = FN(x, V(P), V(Q));
#define STEP_ARG2(x, f, i, P, Q, K) x = FN(x, V(P));
#define STEP_REV2(x, f, i, P, Q, K) x = FN(V(P), x);
#define STEP_NEG2(x, f, i, P, Q, K) x = FN(-x, V(P));
#define STEP_ARG_K(x, f, i, P, Q, K) x = FN(x, (IT)(K));
#define STEP_OUTMUL(x, f, i, P, Q, K) x = FN(x) * V(P);
#define STEP_OUTADD(x, f, i, P, Q, K) x = FN(x) + V(P);
#define STEP_INMUL(x, f, i, P, Q, K) x = FN(x * V(P));
#define STEP_INADD(x, f, i, P, Q, K) x = FN(x + V(P));
#define STEP_INADD_C(x, f, i, P, Q, K) x = FN(x + V(P), V(d));
#define STEP_INADD_K(x, f, i, P, Q, K) x = FN(x + V(P), (IT)(K));
#define STEP_OUTMUL_K(x, f, i, P, Q, K) x = FN(x, (IT)(K)) * V(P);
#define STEP_ILOGB(x, f, i, P, Q, K) x = CVT(FN(x)) + V(P);
#define STEP_FRACT(x, f, i, P, Q, K) { VT t_; x = FN(x + V(P), &t_); f = f + t_; }
#define STEP_FREXP(x, f, i, P, Q, K) { IT e_; x = FN(x * V(P), &e_); i = i + e_; }
#define STEP_REMQUO(x, f, i, P, Q, K) { IT q_; x = FN(x + V(P), V(d), &q_); i = i + q_; }
#define STEP_SINCOS(x, f, i, P, Q, K) { VT c_; x = FN(x, &c_); x = x + c_; }

#define FOR_CHAINS(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#define DECL(c) VT x##c = (c < CHAINS) ? in[gid + (size_t)(c) * n] : V(0); VT f##c = V(0); IT i##c = (IT)(0);
#define STEP_A(c) if (c < CHAINS) { CAT(STEP_, FORM_A)(x##c, f##c, i##c, a, b, ka) }
#define STEP_B(c) if (c < CHAINS) { CAT(STEP_, FORM_B)(x##c, f##c, i##c, b, a, kb) }
#define SUM(c) if (c > 0 && c < CHAINS) { s = s + x##c; }
#if ACC == 1
#define SUM_ACC(c) if (c < CHAINS) { s = s + f##c; }
#elif ACC == 2
#define SUM_ACC(c) if (c < CHAINS) { s = s + CVT(i##c); }
#else
#define SUM_ACC(c)
#endif

__kernel void builtins(__global const VT* restrict in, __global VT* restrict out, const T a, const T b,
                       const T d, const int ka, const int kb) {
  const size_t gid = get_global_id(0);
  const size_t n = get_global_size(0);
  FOR_CHAINS(DECL)
  for (int t = 0; t < ITERS; ++t) {
    FOR_CHAINS(STEP_A)
    FOR_CHAINS(STEP_B)
  }
  VT s = x0;
  FOR_CHAINS(SUM)
  FOR_CHAINS(SUM_ACC)
  out[gid] = s;
}
