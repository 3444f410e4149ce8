// builtins: throughput of every arithmetic instruction and built-in math function of seed 002
// Table 1 (section 2.1, groups benchmark-1 to benchmark-9), counted as calls per second (the
// seed's "invoked times per second"), for float and double at vector widths 1 and 4.
//
// Kernel (kernels/opencl/builtins.cl, like seed 002 Fig. 1 and clpeak): each work-item keeps
// several independent chains x = f(x) (or f(x, runtime scalar)) seeded from a pseudo-random
// buffer, two dependent calls per chain and trip, and stores the sum of its chains. Per
// built-in a "form" keeps every chain inside the function's domain and bounded for any
// number of trips, and non-expansive (|d x_next / d x| <= 1 about the orbit), so that
// rounding errors do not grow along a chain; some forms need a cheap operation or two around
// the call ("glue" below, not counted as calls).
//
// Validation. Exact built-ins (0 ulp or correctly rounded in OpenCL C's tables: add, sub,
// mul, double div, fmax, fmin, fract, frexp, ldexp, ilogb, ceil, copysign, fabs, fdim, floor,
// fma, fmod, logb, modf, remainder, rint, round, trunc, nextafter, remquo) are recomputed on
// the host in the device's type, glue included, and must agree exactly. The others are not
// correctly rounded: the host recomputes each chain in a wider type (double for float, long
// double for double) with its libm, and the device may differ by
//   4 * eps * sum over calls of (U + glue/2) * m
// where eps is the type's epsilon (ulp(v) <= eps*|v|), U the OpenCL C full-profile ulp bound
// of the built-in (plus 1 for double where long double is no wider than double), m the
// largest magnitude the call sees (argument, result, chain value), plus the rounding of the
// final sum. Because each chain is non-expansive, the error of every call reaches the stored
// sum at most undiminished, so sum(U * eps * m) bounds it; the factor 4 covers the steps of
// the orbit where a form is briefly a little expansive and the embedded profile's looser
// bounds. lgamma's bound is implementation-defined in the spec: it gets 64 ulp per call;
// mad (fma or a correctly rounded multiply then add) gets 2.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {


// Builtin calls per launch, one per vector lane: the call_per_s counter.
void count_calls(Cost& c, double calls) { c.calls += calls; }

enum class Fn {
  add, sub, mul, div, mad, fmax, fmin, sin, asin, cos, acos, tan, atan, exp, log, rsqrt, fract, frexp,
  hypot, ldexp, exp10, ilogb, log10, sinh, cosh, tanh, asinh, acosh, atanh, asinpi, acospi, atanpi, cbrt,
  ceil, copysign, fabs, fdim, floor, fma, fmod, atan2, atan2pi, sinpi, cospi, tanpi, sincos, log1p, logb,
  modf, lgamma, remainder, rint, round, trunc, erfc, erf, expm1, nextafter, pown, powr, remquo, rootn,
  tgamma
};

// How a chain calls the built-in; see builtins.cl. P, Q, K are (a, b, ka) in the first call
// of a trip and (b, a, kb) in the second; d is a third runtime scalar.
enum class Form {
  op_add, op_sub, op_mul, op_div,  // x = x + P, x - P, x * P, x / P
  pure,                            // x = f(x)
  mad,                             // x = f(x, P, Q)
  arg2,                            // x = f(x, P)
  rev2,                            // x = f(P, x)
  neg2,                            // x = f(-x, P)
  arg_k,                           // x = f(x, K)
  outmul,                          // x = f(x) * P
  outadd,                          // x = f(x) + P
  inmul,                           // x = f(x * P)
  inadd,                           // x = f(x + P)
  inadd_c,                         // x = f(x + P, d)
  inadd_k,                         // x = f(x + P, K)
  outmul_k,                        // x = f(x, K) * P
  ilogb,                           // x = (T)f(x) + P
  fract,                           // x = f(x + P, &t); acc += t
  frexp,                           // x = f(x * P, &e); iacc += e
  remquo,                          // x = f(x + P, d, &q); iacc += q
  sincos,                          // x = f(x, &c) + c
};

const char* form_define(Form f) {
  switch (f) {
    case Form::op_add: return "OP_ADD";
    case Form::op_sub: return "OP_SUB";
    case Form::op_mul: return "OP_MUL";
    case Form::op_div: return "OP_DIV";
    case Form::pure: return "PURE";
    case Form::mad: return "MAD";
    case Form::arg2: return "ARG2";
    case Form::rev2: return "REV2";
    case Form::neg2: return "NEG2";
    case Form::arg_k: return "ARG_K";
    case Form::outmul: return "OUTMUL";
    case Form::outadd: return "OUTADD";
    case Form::inmul: return "INMUL";
    case Form::inadd: return "INADD";
    case Form::inadd_c: return "INADD_C";
    case Form::inadd_k: return "INADD_K";
    case Form::outmul_k: return "OUTMUL_K";
    case Form::ilogb: return "ILOGB";
    case Form::fract: return "FRACT";
    case Form::frexp: return "FREXP";
    case Form::remquo: return "REMQUO";
    case Form::sincos: return "SINCOS";
  }
  return "";
}

// 0: no accumulator, 1: a floating one (integer parts), 2: an integer one (exponents, quotients).
int acc_kind(Form f) { return f == Form::fract ? 1 : (f == Form::frexp || f == Form::remquo) ? 2 : 0; }

constexpr double kExact = -1;  // 0 ulp or correctly rounded: checked bit for bit
// Rotation steps 1/phi and 1/phi^3 (phi the golden ratio): orbits mod 1 that do not settle.
constexpr double kTurnA = 0.6180339887498949, kTurnB = 0.2360679774997897;

struct Builtin {
  const char* name;  // the OpenCL C name; the variant in benchmark names
  int group;         // seed 002 Table 1: benchmark-<group>
  Fn fn;
  Form form_a, form_b;
  double a, b, d;  // runtime scalars
  int ka, kb;      // runtime integers
  double lo, hi;   // inputs, uniform
  double ulp_float, ulp_double;  // full-profile bound per call, or kExact
  int glue;    // operations per call besides the call itself
  int weight;  // a call's cost relative to an add (PoCL on AVX-512, capped at 256): sizes the trips
};

// Why each form stays bounded (fixed point x*, derivative there) is noted where not obvious.
const Builtin kBuiltins[] = {
    // benchmark-1: add/sub/mul/div/mad. add, sub: +0.125 / -0.125 per trip, exact; mul, div:
    // a product just under / over 1; mad: contracting (|a|, |b| < 1).
    {"add", 1, Fn::add, Form::op_add, Form::op_add, 0.375, -0.25, 0, 0, 0, 1, 2, kExact, kExact, 0, 1},
    {"sub", 1, Fn::sub, Form::op_sub, Form::op_sub, 0.375, -0.25, 0, 0, 0, 1, 2, kExact, kExact, 0, 1},
    {"mul", 1, Fn::mul, Form::op_mul, Form::op_mul, 1.25, 0.7998046875, 0, 0, 0, 1, 2, kExact, kExact, 0, 1},
    {"div", 1, Fn::div, Form::op_div, Form::op_div, 1.25, 0.7998046875, 0, 0, 0, 1, 2, 2.5, kExact, 0, 4},
    {"mad", 1, Fn::mad, Form::mad, Form::mad, 0.999, 0.0078125, 0, 0, 0, 1, 2, 2, 2, 0, 1},
    // benchmark-2: fmax/fmin of the negated chain (a plain fmax(fmax(x, a), b) chain could
    // be simplified by the compiler): |x| settles in [1, 1.5], the sign alternates.
    {"fmax", 2, Fn::fmax, Form::neg2, Form::neg2, -1.5, -1.25, 0, 0, 0, 1, 2, kExact, kExact, 1, 2},
    {"fmin", 2, Fn::fmin, Form::neg2, Form::neg2, 1.5, 1.25, 0, 0, 0, 1, 2, kExact, kExact, 1, 2},
    // benchmark-3. sin(x+1): x* = 0.93, |cos| <= 1. asin, tan: an odd function with slope >= 1
    // alternates a shrinking call f(x*a) with a shifting one f(x+b) (x* = 0.43, 0.36; slope
    // per trip 0.56, 0.46). cos: Dottie number. acos(x)*0.3: x* = 0.36, slope 0.32.
    // atan(x+1): x* = 1.13.
    {"sin", 3, Fn::sin, Form::inadd, Form::inadd, 1, 0.5, 0, 0, 0, -1, 1, 4, 4, 1, 64},
    {"asin", 3, Fn::asin, Form::inmul, Form::inadd, 0.5, 0.2, 0, 0, 0, 0, 1, 4, 4, 1, 32},
    {"cos", 3, Fn::cos, Form::pure, Form::pure, 0, 0, 0, 0, 0, -1.5, 1.5, 4, 4, 0, 64},
    {"acos", 3, Fn::acos, Form::outmul, Form::outmul, 0.3, 0.25, 0, 0, 0, -0.9, 0.9, 4, 4, 1, 32},
    {"tan", 3, Fn::tan, Form::inmul, Form::inadd, 0.4, 0.2, 0, 0, 0, -0.5, 1, 5, 5, 1, 64},
    {"atan", 3, Fn::atan, Form::inadd, Form::inadd, 1, 0.5, 0, 0, 0, -1, 1, 5, 5, 1, 128},
    // benchmark-4. exp(-x): x* = 0.567 (omega). log(x)+2: x* = 3.15, slope 0.32. rsqrt(x+1):
    // x* = 0.755. fract, fmod, remainder, remquo, modf: rotations by 1/phi and 1/phi^3.
    // frexp(x*3): the mantissa wanders in [0.5, 1). hypot(x, a): x grows as sqrt(trips).
    // ldexp by +3 then -3. ilogb and logb: small cycles. 10^(-0.4x): x* = 0.58.
    {"exp", 4, Fn::exp, Form::inmul, Form::inmul, -1, -0.9, 0, 0, 0, 0, 2, 3, 3, 1, 32},
    {"log", 4, Fn::log, Form::outadd, Form::outadd, 2, 1.5, 0, 0, 0, 1, 10, 3, 3, 1, 64},
    {"rsqrt", 4, Fn::rsqrt, Form::inadd, Form::inadd, 1, 0.5, 0, 0, 0, 0.3, 2, 2, 2, 1, 16},
    {"fract", 4, Fn::fract, Form::fract, Form::fract, kTurnA, kTurnB, 0, 0, 0, 0, 1, kExact, kExact, 2, 16},
    {"frexp", 4, Fn::frexp, Form::frexp, Form::frexp, 3, 1.75, 0, 0, 0, 0.5, 4, kExact, kExact, 2, 16},
    {"hypot", 4, Fn::hypot, Form::arg2, Form::arg2, 0.5, 0.25, 0, 0, 0, 0, 2, 4, 4, 0, 128},
    {"ldexp", 4, Fn::ldexp, Form::arg_k, Form::arg_k, 0, 0, 0, 3, -3, 1, 2, kExact, kExact, 0, 4},
    {"exp10", 4, Fn::exp10, Form::inmul, Form::inmul, -0.4, -0.3, 0, 0, 0, 0, 2, 3, 3, 1, 32},
    {"ilogb", 4, Fn::ilogb, Form::ilogb, Form::ilogb, 5.5, 100.25, 0, 0, 0, 1, 1000, kExact, kExact, 2, 8},
    {"log10", 4, Fn::log10, Form::outadd, Form::outadd, 2, 1, 0, 0, 0, 1, 100, 3, 3, 1, 64},
    // benchmark-5. sinh, atanh: alternating as asin (x* = 0.56, 0.21). cosh(x)*0.5: x* = 0.59.
    // tanh(x+0.5), asinh(x+1), acosh(x+2): slopes < 1 everywhere. asinpi(x)+0.5: x* = 0.79.
    // acospi(x): x* = 0.38, slope 0.34. atanpi(x)+0.5: x* = 0.69.
    {"sinh", 5, Fn::sinh, Form::inmul, Form::inadd, 0.5, 0.25, 0, 0, 0, 0, 1, 4, 4, 1, 64},
    {"cosh", 5, Fn::cosh, Form::outmul, Form::outmul, 0.5, 0.4, 0, 0, 0, -1, 1, 4, 4, 1, 64},
    {"tanh", 5, Fn::tanh, Form::inadd, Form::inadd, 0.5, 0.25, 0, 0, 0, -1, 1, 5, 5, 1, 64},
    {"asinh", 5, Fn::asinh, Form::inadd, Form::inadd, 1, 0.5, 0, 0, 0, -1, 2, 4, 4, 1, 128},
    {"acosh", 5, Fn::acosh, Form::inadd, Form::inadd, 2, 1.5, 0, 0, 0, 0, 3, 4, 4, 1, 128},
    {"atanh", 5, Fn::atanh, Form::inmul, Form::inadd, 0.5, 0.1, 0, 0, 0, 0, 0.8, 5, 5, 1, 128},
    {"asinpi", 5, Fn::asinpi, Form::outadd, Form::outadd, 0.5, 0.4, 0, 0, 0, 0, 0.9, 5, 5, 1, 32},
    {"acospi", 5, Fn::acospi, Form::pure, Form::pure, 0, 0, 0, 0, 0, -0.9, 0.9, 5, 5, 0, 32},
    {"atanpi", 5, Fn::atanpi, Form::outadd, Form::outadd, 0.5, 0.25, 0, 0, 0, -1, 2, 5, 5, 1, 32},
    // benchmark-6. cbrt(x)+1: x* = 2.32. ceil, floor, fabs, rint, round, trunc of x plus a
    // fraction: integers that step by about one per trip (exact far beyond any trip count).
    // copysign(x+P, -1): |x| grows by 0.25 per trip. fdim(2, x): x and 2-x alternate.
    // fma: as mad.
    {"cbrt", 6, Fn::cbrt, Form::outadd, Form::outadd, 1, 0.5, 0, 0, 0, 0.5, 4, 2, 2, 1, 128},
    {"ceil", 6, Fn::ceil, Form::inadd, Form::inadd, 0.75, -0.5, 0, 0, 0, -4, 4, kExact, kExact, 1, 8},
    {"copysign", 6, Fn::copysign, Form::inadd_c, Form::inadd_c, 0.5, -0.75, -1, 0, 0, 1, 2, kExact, kExact, 1, 1},
    {"fabs", 6, Fn::fabs, Form::inadd, Form::inadd, 0.5, -1.25, 0, 0, 0, -2, 2, kExact, kExact, 1, 1},
    {"fdim", 6, Fn::fdim, Form::rev2, Form::rev2, 2, 2, 0, 0, 0, 0.5, 1.5, kExact, kExact, 0, 4},
    {"floor", 6, Fn::floor, Form::inadd, Form::inadd, 0.75, -0.5, 0, 0, 0, -4, 4, kExact, kExact, 1, 8},
    {"fma", 6, Fn::fma, Form::mad, Form::mad, 0.999, 0.0078125, 0, 0, 0, 1, 2, kExact, kExact, 0, 1},
    {"fmod", 6, Fn::fmod, Form::inadd_c, Form::inadd_c, kTurnA, kTurnB, 1, 0, 0, 0, 1, kExact, kExact, 1, 64},
    // benchmark-7. atan2(a, x), atan2pi(a, x): x* = 0.86, 0.38, slope <= 1/a. sinpi(x)*0.4:
    // x* = 0.37; cospi(x)*0.25: x* = 0.2; tanpi alternating as asin (x* = 0.34). sincos:
    // x = sin(x) + cos(x), x* = 1.26, slope 0.65 on [0, pi/2]; both results count as one call.
    {"atan2", 7, Fn::atan2, Form::rev2, Form::rev2, 1, 1.5, 0, 0, 0, 0, 2, 6, 6, 0, 128},
    {"atan2pi", 7, Fn::atan2pi, Form::rev2, Form::rev2, 1, 0.5, 0, 0, 0, 0, 2, 6, 6, 0, 64},
    {"sinpi", 7, Fn::sinpi, Form::outmul, Form::outmul, 0.4, 0.375, 0, 0, 0, 0.25, 0.45, 4, 4, 1, 32},
    {"cospi", 7, Fn::cospi, Form::outmul, Form::outmul, 0.25, 0.3, 0, 0, 0, -1, 1, 4, 4, 1, 32},
    {"tanpi", 7, Fn::tanpi, Form::inmul, Form::inadd, 0.05, 0.05, 0, 0, 0, 0, 1, 6, 6, 1, 64},
    {"sincos", 7, Fn::sincos, Form::sincos, Form::sincos, 0, 0, 0, 0, 0, 0, 1.5, 8, 8, 1, 64},
    // benchmark-8. log1p(x+1): x* = 1.15. lgamma(x)+1.5: x* = 1.38 (|digamma| < 1 on
    // [0.8, 3.2]). modf: a rotation by +0.618, -0.854, so signs mix.
    {"log1p", 8, Fn::log1p, Form::inadd, Form::inadd, 1, 0.5, 0, 0, 0, 0, 2, 2, 2, 1, 64},
    {"logb", 8, Fn::logb, Form::outadd, Form::outadd, 100.5, 3.25, 0, 0, 0, 1, 1000, kExact, kExact, 1, 8},
    {"modf", 8, Fn::modf, Form::fract, Form::fract, kTurnA, -(kTurnA + kTurnB), 0, 0, 0, 0, 1, kExact, kExact, 2, 8},
    {"lgamma", 8, Fn::lgamma, Form::outadd, Form::outadd, 1.5, 2, 0, 0, 0, 1, 2.5, 64, 64, 1, 256},
    {"remainder", 8, Fn::remainder, Form::inadd_c, Form::inadd_c, kTurnA, kTurnB, 1, 0, 0, -0.5, 0.5, kExact, kExact, 1, 128},
    {"rint", 8, Fn::rint, Form::inadd, Form::inadd, 0.75, -0.5, 0, 0, 0, -4, 4, kExact, kExact, 1, 16},
    {"round", 8, Fn::round, Form::inadd, Form::inadd, 0.75, -0.5, 0, 0, 0, -4, 4, kExact, kExact, 1, 16},
    {"trunc", 8, Fn::trunc, Form::inadd, Form::inadd, 0.75, 1.5, 0, 0, 0, -4, 4, kExact, kExact, 1, 8},
    // benchmark-9. erfc(x+0.5): x* = 0.27. erf(x): x* = 0.89, slope 0.51. expm1(x-1):
    // x* = -0.84. nextafter toward 4 then 3: up two ulps per trip. pown(x+1, -2): x* = 0.47.
    // powr(0.5, x): x* = 0.64. rootn(x, 3)*2 then rootn(x, -3)*1.5: contracting in log x.
    // tgamma(x)+0.5: x* = 1.39.
    {"erfc", 9, Fn::erfc, Form::inadd, Form::inadd, 0.5, 0.25, 0, 0, 0, 0, 2, 16, 16, 1, 256},
    {"erf", 9, Fn::erf, Form::pure, Form::pure, 0, 0, 0, 0, 0, 0.5, 2, 16, 16, 0, 64},
    {"expm1", 9, Fn::expm1, Form::inadd, Form::inadd, -1, -0.5, 0, 0, 0, -1, 0, 3, 3, 1, 128},
    {"nextafter", 9, Fn::nextafter, Form::arg2, Form::arg2, 4, 3, 0, 0, 0, 1, 2, kExact, kExact, 0, 32},
    {"pown", 9, Fn::pown, Form::inadd_k, Form::inadd_k, 1, 0.9, 0, -2, -2, 0.3, 0.7, 16, 16, 1, 256},
    {"powr", 9, Fn::powr, Form::rev2, Form::rev2, 0.5, 0.4, 0, 0, 0, 0, 2, 16, 16, 0, 256},
    {"remquo", 9, Fn::remquo, Form::remquo, Form::remquo, kTurnA, kTurnB, 1, 0, 0, -0.5, 0.5, kExact, kExact, 2, 128},
    {"rootn", 9, Fn::rootn, Form::outmul_k, Form::outmul_k, 2, 1.5, 0, 3, -3, 0.5, 4, 16, 16, 1, 256},
    {"tgamma", 9, Fn::tgamma, Form::outadd, Form::outadd, 0.5, 1, 0, 0, 0, 1, 2.5, 16, 16, 1, 256},
};

// --- host reference ---------------------------------------------------------------------

template <class R>
constexpr R kPi = R(3.141592653589793238462643383279502884L);

// The built-in on the host, in R. `aux`/`iaux` take a second result (integer part, cosine;
// exponent, quotient).
template <class R>
R call(Fn fn, R x, R y, R z, int k, R& aux, int& iaux) {
  switch (fn) {
    case Fn::add: return x + y;
    case Fn::sub: return x - y;
    case Fn::mul: return x * y;
    case Fn::div: return x / y;
    case Fn::mad: return x * y + z;  // only ever evaluated in a wider type (not exact)
    case Fn::fmax: return std::fmax(x, y);
    case Fn::fmin: return std::fmin(x, y);
    case Fn::sin: return std::sin(x);
    case Fn::asin: return std::asin(x);
    case Fn::cos: return std::cos(x);
    case Fn::acos: return std::acos(x);
    case Fn::tan: return std::tan(x);
    case Fn::atan: return std::atan(x);
    case Fn::exp: return std::exp(x);
    case Fn::log: return std::log(x);
    case Fn::rsqrt: return R(1) / std::sqrt(x);
    case Fn::fract: {  // OpenCL: fmin(x - floor(x), 0x1.fffffep-1f), *iptr = floor(x)
      aux = std::floor(x);
      return std::fmin(x - aux, std::nextafter(R(1), R(0)));
    }
    case Fn::frexp: return std::frexp(x, &iaux);
    case Fn::hypot: return std::hypot(x, y);
    case Fn::ldexp: return std::ldexp(x, k);
    case Fn::exp10: return std::pow(R(10), x);
    case Fn::ilogb: iaux = std::ilogb(x); return R(iaux);
    case Fn::log10: return std::log10(x);
    case Fn::sinh: return std::sinh(x);
    case Fn::cosh: return std::cosh(x);
    case Fn::tanh: return std::tanh(x);
    case Fn::asinh: return std::asinh(x);
    case Fn::acosh: return std::acosh(x);
    case Fn::atanh: return std::atanh(x);
    case Fn::asinpi: return std::asin(x) / kPi<R>;
    case Fn::acospi: return std::acos(x) / kPi<R>;
    case Fn::atanpi: return std::atan(x) / kPi<R>;
    case Fn::cbrt: return std::cbrt(x);
    case Fn::ceil: return std::ceil(x);
    case Fn::copysign: return std::copysign(x, y);
    case Fn::fabs: return std::fabs(x);
    case Fn::fdim: return std::fdim(x, y);
    case Fn::floor: return std::floor(x);
    case Fn::fma: return std::fma(x, y, z);
    case Fn::fmod: return std::fmod(x, y);
    case Fn::atan2: return std::atan2(x, y);
    case Fn::atan2pi: return std::atan2(x, y) / kPi<R>;
    case Fn::sinpi: return std::sin(kPi<R> * x);
    case Fn::cospi: return std::cos(kPi<R> * x);
    case Fn::tanpi: return std::tan(kPi<R> * x);
    case Fn::sincos: aux = std::cos(x); return std::sin(x);
    case Fn::log1p: return std::log1p(x);
    case Fn::logb: return std::logb(x);
    case Fn::modf: return std::modf(x, &aux);
    case Fn::lgamma: return std::lgamma(x);
    case Fn::remainder: return std::remainder(x, y);
    case Fn::rint: return std::rint(x);
    case Fn::round: return std::round(x);
    case Fn::trunc: return std::trunc(x);
    case Fn::erfc: return std::erfc(x);
    case Fn::erf: return std::erf(x);
    case Fn::expm1: return std::expm1(x);
    case Fn::nextafter: return std::nextafter(x, y);
    case Fn::pown: return std::pow(x, R(k));
    case Fn::powr: return std::pow(x, y);
    case Fn::remquo: return std::remquo(x, y, &iaux);
    case Fn::rootn: return std::pow(x, R(1) / R(k));
    case Fn::tgamma: return std::tgamma(x);
  }
  return R(0);
}

// One chain of one lane, as the kernel runs it.
template <class R>
struct Chain {
  R x = 0;
  R acc = 0;              // ACC 1
  std::int32_t iacc = 0;  // ACC 2
  double magnitude = 0;   // sum over calls of the largest magnitude each call saw
};

template <class R>
void step(Fn fn, Form form, Chain<R>& ch, R p, R q, R d, int k) {
  using std::fabs;
  const R x = ch.x;
  R arg = x, r = 0, y = 0, aux = 0;
  int iaux = 0;
  switch (form) {
    case Form::op_add: y = r = x + p; break;
    case Form::op_sub: y = r = x - p; break;
    case Form::op_mul: y = r = x * p; break;
    case Form::op_div: y = r = x / p; break;
    case Form::pure: y = r = call(fn, x, R(0), R(0), 0, aux, iaux); break;
    case Form::mad: y = r = call(fn, x, p, q, 0, aux, iaux); break;
    case Form::arg2: y = r = call(fn, x, p, R(0), 0, aux, iaux); break;
    case Form::rev2: y = r = call(fn, p, x, R(0), 0, aux, iaux); break;
    case Form::neg2: arg = -x; y = r = call(fn, arg, p, R(0), 0, aux, iaux); break;
    case Form::arg_k: y = r = call(fn, x, R(0), R(0), k, aux, iaux); break;
    case Form::outmul: r = call(fn, x, R(0), R(0), 0, aux, iaux); y = r * p; break;
    case Form::outadd: r = call(fn, x, R(0), R(0), 0, aux, iaux); y = r + p; break;
    case Form::inmul: arg = x * p; y = r = call(fn, arg, R(0), R(0), 0, aux, iaux); break;
    case Form::inadd: arg = x + p; y = r = call(fn, arg, R(0), R(0), 0, aux, iaux); break;
    case Form::inadd_c: arg = x + p; y = r = call(fn, arg, d, R(0), 0, aux, iaux); break;
    case Form::inadd_k: arg = x + p; y = r = call(fn, arg, R(0), R(0), k, aux, iaux); break;
    case Form::outmul_k: r = call(fn, x, R(0), R(0), k, aux, iaux); y = r * p; break;
    case Form::ilogb: r = call(fn, x, R(0), R(0), 0, aux, iaux); y = r + p; break;
    case Form::fract:
      arg = x + p;
      y = r = call(fn, arg, R(0), R(0), 0, aux, iaux);
      ch.acc = ch.acc + aux;
      break;
    case Form::frexp:
      arg = x * p;
      y = r = call(fn, arg, R(0), R(0), 0, aux, iaux);
      ch.iacc += iaux;
      break;
    case Form::remquo:
      arg = x + p;
      y = r = call(fn, arg, d, R(0), 0, aux, iaux);
      ch.iacc += iaux;
      break;
    case Form::sincos: r = call(fn, x, R(0), R(0), 0, aux, iaux); y = r + aux; break;
  }
  ch.x = y;
  ch.magnitude += static_cast<double>(std::max({fabs(x), fabs(arg), fabs(r), fabs(y), fabs(aux)}));
}

// The reference type: the device's own for exact built-ins, a wider one for the others.
template <class T>
struct Wider {
  using type = double;
};
template <>
struct Wider<double> {
  using type = long double;
};

struct Shape {
  std::size_t items, local;
  int chains, iters;
};

// Work-items that fill the device several times over (as compute's filling()), and trips
// that make a launch last about a millisecond on a GPU and a few on a CPU: `weight`
// scales them by a call's rough cost. The host check recomputes 512 items' worth of the
// launch, so the trips also bound its time (~0.05 s in long double).
Shape shape(const Plan& plan, const Builtin& f, int width) {
  const DeviceInfo& d = plan.device;
  const std::size_t local = std::min<std::size_t>(256, d.max_work_group);
  const int chains = width == 1 && f.weight <= 2 ? 8 : 4;  // more for the cheapest, to hide latency
  if (plan.size == Size::test) return {2 * local, local, chains, 3};
  const std::size_t items = std::max<std::size_t>(d.compute_units, 1) * (d.is_gpu ? 8192 : 4096);
  const double calls_per_item = d.is_gpu ? 32768 : 6144;  // in weight-1 calls
  const int iters = std::max(2, static_cast<int>(calls_per_item / (2.0 * f.weight * width * chains)));
  return {items, local, chains, iters};
}

template <class T, class R>
Workload make(const Plan& plan, const Builtin& f, int width, const char* tname, const Identity& label) {
  const Shape s = shape(plan, f, width);
  const bool exact = std::is_same_v<T, R>;
  const std::string vt = width == 1 ? std::string(tname) : std::string(tname) + std::to_string(width);
  const std::string it = width == 1 ? std::string("int") : "int" + std::to_string(width);
  const int acc = acc_kind(f.form_a);

  Workload w;
  w.identify(label);
  w.kernel = {"builtins", "builtins",
              {{"T", tname}, {"VT", vt}, {"IT", it}, {"CVT", "convert_" + vt}, {"W", std::to_string(width)},
               {"CHAINS", std::to_string(s.chains)}, {"ITERS", std::to_string(s.iters)}, {"FN", f.name},
               {"FORM_A", form_define(f.form_a)}, {"FORM_B", form_define(f.form_b)},
               {"ACC", std::to_string(acc)}, {"IS_DOUBLE", std::is_same_v<T, double> ? "1" : "0"}}};
  w.range = Range::linear(s.items, s.local);
  const std::size_t lanes = s.items * width;  // elements per chain
  const std::uint64_t seed = std::hash<std::string>{}(label.name);
  const double lo = f.lo, hi = f.hi;
  w.buffers = {{lanes * s.chains * sizeof(T), [seed, lo, hi](Bytes& b) { fill_uniform<T>(b, seed, lo, hi); }},
               {lanes * sizeof(T), nullptr}};
  const T a = static_cast<T>(f.a), b = static_cast<T>(f.b), dd = static_cast<T>(f.d);
  const int ka = f.ka, kb = f.kb;
  w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar(a), Arg::scalar(b), Arg::scalar(dd), Arg::scalar(ka),
            Arg::scalar(kb)};
  const double per_item = 2.0 * s.iters * s.chains * width;
  count_calls(w.cost, per_item * s.items);

  const double ulp = std::is_same_v<T, float> ? f.ulp_float : f.ulp_double;
  const double host_ulp = std::numeric_limits<R>::digits > std::numeric_limits<T>::digits + 8 ? 0 : 1;
  const double units = ulp + 0.5 * f.glue + host_ulp;  // per call, in ulp of the largest magnitude
  const double eps = std::numeric_limits<T>::epsilon();
  const Fn fn = f.fn;
  const Form fa = f.form_a, fb = f.form_b;
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& tally) {
    const R ra = a, rb = b, rd = dd;
    for (std::size_t item = 0; item < s.items; item += every) {
      for (int l = 0; l < width; ++l) {
        Chain<R> ch[8];
        for (int c = 0; c < s.chains; ++c) ch[c].x = get<T>(in[0], (item + c * s.items) * width + l);
        // Count the calls the reference makes (one per step per lane), not the cost formula.
        for (int i = 0; i < s.iters; ++i) {
          for (int c = 0; c < s.chains; ++c) step(fn, fa, ch[c], ra, rb, rd, ka);
          for (int c = 0; c < s.chains; ++c) step(fn, fb, ch[c], rb, ra, rd, kb);
          count_calls(tally, 2.0 * s.chains);
        }
        // The kernel's sum, in its order: the chains, then their accumulators.
        R sum = ch[0].x;
        double size = std::fabs(static_cast<double>(sum)), calls_magnitude = ch[0].magnitude;
        for (int c = 1; c < s.chains; ++c) {
          sum = sum + ch[c].x;
          size += std::fabs(static_cast<double>(ch[c].x));
          calls_magnitude += ch[c].magnitude;
        }
        for (int c = 0; c < s.chains; ++c) {
          if (acc == 1) sum = sum + ch[c].acc;
          if (acc == 2) sum = sum + static_cast<R>(ch[c].iacc);
        }
        const std::size_t index = item * width + l;
        const T got = get<T>(out[1], index);
        const std::string where = " (lane " + std::to_string(l) + ")";
        if (exact) {
          if (!(got == static_cast<T>(sum))) return differs(index, static_cast<double>(sum), got) + where;
        } else {
          const double tolerance = 4 * eps * units * calls_magnitude + eps * s.chains * size;
          const double error = std::fabs(static_cast<double>(static_cast<R>(got) - sum));
          if (!(error <= tolerance))
            return differs(index, static_cast<double>(sum), got) + where + ": off by " + std::to_string(error) +
                   ", more than the tolerance " + std::to_string(tolerance);
        }
      }
    }
    return std::string();
  };
  if (std::is_same_v<T, double> && !plan.device.fp64) w.skip = "the device has no fp64 (cl_khr_fp64)";
  return w;
}

template <class T>
Workload make_for(const Plan& plan, const Builtin& f, int width, const char* tname, const Identity& label) {
  const double ulp = std::is_same_v<T, float> ? f.ulp_float : f.ulp_double;
  if (ulp == kExact) return make<T, T>(plan, f, width, tname, label);
  return make<T, typename Wider<T>::type>(plan, f, width, tname, label);
}

std::vector<Workload> build(const Plan& plan) {
  std::vector<Workload> out;
  const std::string be = plan.device.backend;
  // Every built-in of Table 1. The full sweep (and the conformance test) runs float and
  // double at widths 1 and 4. The quick sweep keeps float at width 1: a workload costs
  // Google Benchmark's minimum time three times over (about 0.5 s here) whatever its trips,
  // so 63 of them already take about 40 s on a 2-core CPU.
  struct Variant {
    const char* type;
    int width;
  };
  std::vector<Variant> variants = {{"float", 1}};
  if (plan.size != Size::quick) variants = {{"float", 1}, {"float", 4}, {"double", 1}, {"double", 4}};
  for (const Builtin& f : kBuiltins)
    for (const Variant& v : variants) {
      const std::string type = v.type;
      const Identity label = identity({{"family", "builtins"}, {"backend", be}, {"function", f.name}, {"type", vector_type(type, v.width)}},
                                      {}, vector_axes(type, v.width));
      if (type == "float") out.push_back(make_for<float>(plan, f, v.width, v.type, label));
      else out.push_back(make_for<double>(plan, f, v.width, v.type, label));
    }
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(builtins, build);

}  // namespace archbench
