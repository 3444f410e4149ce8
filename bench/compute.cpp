// compute: add, mul and mad throughput per type and vector width, and mad against the
// number of work-groups (seed 000 Table I and Figs. 7-8; seed 002 section 2.1). Types: int,
// float, double, half, and bfloat where the device has bf16 arithmetic (CUDA; 16-bit floats of
// even width run as packed pairs, HFMA2 and its bf16 twin).
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#ifndef CPU_CHAINS
#define CPU_CHAINS 16
#endif

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

enum class Op { add, mul, mad };
const char* op_name(Op op) { return op == Op::add ? "add" : op == Op::mul ? "mul" : "mad"; }

// Host arithmetic that matches the device bit for bit. H is the host storage type;
// `half` is stored as IEEE binary16 bits and computed exactly in double, rounded once.
struct Half {
  std::uint16_t bits;
};
// bfloat16 is stored as its bits (the top half of a float: 8 significant bits).
struct BFloat {
  std::uint16_t bits;
};

// Rounds d to bfloat16 once, to nearest even, straight from the double (rounding to float
// first could round twice). Subnormals step by 2^-133; beyond the largest finite, infinity.
std::uint16_t double_to_bfloat(double d) {
  if (std::isnan(d)) return 0x7fc0;
  const std::uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  const double m = std::fabs(d);
  if (m == 0) return sign;
  int e;
  std::frexp(m, &e);                                          // m in [2^(e-1), 2^e)
  const int lsb = std::max(e - 8, -133);                      // weight of the last kept bit
  const double v = std::ldexp(std::nearbyint(std::ldexp(m, -lsb)), lsb);  // ties to even
  if (v >= 0x1p128) return sign | 0x7f80;
  const float f = static_cast<float>(v);  // exact: 8 significant bits in float's range
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return sign | static_cast<std::uint16_t>(u >> 16);
}
double bfloat_to_double(std::uint16_t b) {
  const std::uint32_t u = std::uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class H>
struct Arith {
  static H add(H x, H p) { return x + p; }
  static H mul(H x, H p) { return x * p; }
  static H mad(H x, H p, H q) {
    if constexpr (std::is_integral_v<H>) return x * p + q;
    else return std::fma(x, p, q);
  }
  static double value(H x) { return static_cast<double>(x); }
  static H from(double d) { return static_cast<H>(d); }
};
// 16-bit floats, stored as their bits: each step is computed exactly in double and rounded
// once, as OpenCL's half arithmetic and CUDA's __hfma/__hadd/__hmul (and their packed twins)
// on half and bfloat16 do; the exact result of one step fits a double here.
template <class H, double (*F)(std::uint16_t), std::uint16_t (*R)(double)>
struct Arith16 {
  static double f(H x) { return F(x.bits); }
  static H r(double d) { return {R(d)}; }
  static H add(H x, H p) { return r(f(x) + f(p)); }
  static H mul(H x, H p) { return r(f(x) * f(p)); }
  static H mad(H x, H p, H q) { return r(f(x) * f(p) + f(q)); }
  static double value(H x) { return f(x); }
  static H from(double d) { return r(d); }
};
double half_to_double(std::uint16_t h) { return half_to_float(h); }
template <>
struct Arith<Half> : Arith16<Half, half_to_double, double_to_half> {};
template <>
struct Arith<BFloat> : Arith16<BFloat, bfloat_to_double, double_to_bfloat> {};

struct Shape {
  std::size_t items, local;
  int iters;
};

struct Type {
  const char* name;   // in benchmark names
  const char* cl;     // OpenCL scalar type
};

// One step as the kernel does it, and the operations it did: an add or a multiply is one, a
// mad (a multiply and an add, fused or not) two. The reference's tally comes from here, never
// from the cost model's constant.
template <class H>
H step(Op op, H x, H p, H q, double* ops = nullptr) {
  using A = Arith<H>;
  if (ops) *ops += op == Op::mad ? 2 : 1;
  return op == Op::add ? A::add(x, p) : op == Op::mul ? A::mul(x, p) : A::mad(x, p, q);
}

// Runtime scalars a, b per op: they keep every floating chain bounded (no overflow, no
// denormals) while making the result depend on every step. Integers wrap.
template <class H>
std::pair<double, double> scalars(Op op) {
  if constexpr (std::is_integral_v<H>) return {2654435761.0, 40503.0};
  switch (op) {
    case Op::add: return {0.375, -0.25};  // +0.125 per trip, exact in every precision
    case Op::mul: return {1.25, 0.7998046875};  // product just under 1: a slow, exact-ish decay
    default: return {0.999, 0.0078125};
  }
}

// Independent accumulators per work-item: enough to cover the FMA latency of a CPU core's
// wide pipes (it runs work-items in SIMD lanes, one thread per core), few enough to keep a
// GPU's registers free for occupancy (it hides latency with other warps).
int chains_for(const DeviceInfo& d, int width) {
  const char* env = std::getenv("ARCHBENCH_CHAINS");
  if (env) return std::clamp(std::atoi(env) / 2 * 2, 2, 16);  // the kernel pairs its chains
  return d.is_gpu ? std::max(2, 16 / width) : std::max(CPU_CHAINS, 16 / width);
}

template <class H>
Workload make(const Plan& plan, Op op, const Type& t, int width, const Shape& s, const Identity& label) {
  using A = Arith<H>;
  const int chains = chains_for(plan.device, width);
  const int opflops = op == Op::mad ? 2 : 1;
  // Steps per chain per trip: floating chains take both steps (a, then b); integer chains go
  // in pairs that feed each other, so each integer chain takes one (compute.cl).
  const int steps = std::is_integral_v<H> ? 1 : 2;
  const double per_item = (double(s.iters) * steps * chains * opflops + (chains - 1)) * width;
  const bool is_int = std::is_integral_v<H>;
  const std::string vt = width == 1 ? std::string(t.cl) : std::string(t.cl) + std::to_string(width);

  Workload w;
  w.identify(label);
  w.axes.push_back({"chains", std::to_string(chains)});  // describes it (ARCHBENCH_CHAINS changes it), not in its name
  w.kernel = {"compute", "compute",
              {{"T", t.cl}, {"VT", vt}, {"W", std::to_string(width)}, {"CHAINS", std::to_string(chains)},
               {"ITERS", std::to_string(s.iters)}, {std::string("OP_") + (op == Op::add ? "ADD" : op == Op::mul ? "MUL" : "MAD"), "1"},
               {"IS_INT", is_int ? "1" : "0"}, {"IS_HALF", std::is_same_v<H, Half> ? "1" : "0"},
               {"IS_DOUBLE", std::is_same_v<H, double> ? "1" : "0"}}};
  w.range = Range::linear(s.items, s.local);
  const std::size_t lanes = s.items * width;  // elements per chain
  const std::uint64_t seed = std::hash<std::string>{}(label.name);
  w.buffers = {{lanes * chains * sizeof(H),
                [seed](Bytes& b) {
                  if constexpr (std::is_integral_v<H>) {
                    Rng r(seed);
                    // Odd, so that products of chains never collapse to zero.
                    for (std::size_t i = 0; i < b.size() / sizeof(H); ++i) put<H>(b, i, static_cast<H>(r.next() | 1));
                  } else if constexpr (std::is_same_v<H, Half>) {
                    fill_uniform<std::uint16_t>(b, seed, 1.0, 2.0);
                  } else if constexpr (std::is_same_v<H, BFloat>) {
                    Rng r(seed);
                    for (std::size_t i = 0; i < b.size() / 2; ++i) put<BFloat>(b, i, {double_to_bfloat(1.0 + r.uniform())});
                  } else {
                    fill_uniform<H>(b, seed, 1.0, 2.0);
                  }
                }},
               {lanes * sizeof(H), nullptr}};
  const auto [da, db] = scalars<H>(op);
  const H a = A::from(da), b = A::from(db);
  w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar(a), Arg::scalar(b)};
  if constexpr (std::is_same_v<H, Half> || std::is_same_v<H, BFloat>) {
    // Some kernels take 16-bit scalars as packed pairs (CUDA's: compute.cu says why).
    struct Pair {
      H lo, hi;
    };
    if (plan.device.packed_half_args) w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar(Pair{a, a}), Arg::scalar(Pair{b, b})};
  }
  if (is_int) w.cost.int_ops = per_item * s.items;
  else w.cost.flops = per_item * s.items;

  // The reference replays every lane of a checked work-item operation by operation and
  // counts what it did (not what the cost model says), so the conformance test's tally ==
  // cost comparison checks the cost model against the kernel's real structure.
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& tally) {
    double& counted = is_int ? tally.int_ops : tally.flops;
    auto counted_step = [&](H x, H p, H q) { return step(op, x, p, q, &counted); };
    for (std::size_t item = 0; item < s.items; item += every) {
      for (int l = 0; l < width; ++l) {
        H x[16] = {};
        for (int c = 0; c < chains; ++c) x[c] = get<H>(in[0], (item + c * s.items) * width + l);
        for (int i = 0; i < s.iters; ++i) {
          if constexpr (std::is_integral_v<H>) {  // pairs feed each other (see compute.cl)
            for (int c = 0; c < chains; c += 2) x[c] = counted_step(x[c], x[c + 1], a);
            for (int c = 0; c < chains; c += 2) x[c + 1] = counted_step(x[c + 1], x[c], b);
          } else {
            for (int c = 0; c < chains; ++c) x[c] = counted_step(x[c], a, b);
            for (int c = 0; c < chains; ++c) x[c] = counted_step(x[c], b, a);
          }
        }
        H sum = x[0];
        for (int c = 1; c < chains; ++c, counted += 1) sum = A::add(sum, x[c]);
        const H got = get<H>(out[1], item * width + l);
        if (std::memcmp(&got, &sum, sizeof(H)) != 0)
          return differs(item * width + l, A::value(sum), A::value(got)) + " (lane " + std::to_string(l) + ")";
      }
    }
    return std::string();
  };
  if (std::is_same_v<H, double> && !plan.device.fp64) w.skip = "the device has no fp64 (cl_khr_fp64)";
  if (std::is_same_v<H, Half> && !plan.device.fp16) w.skip = "the device has no fp16 (cl_khr_fp16)";
  return w;
}

// Work-items that fill the device several times over, and trips per item that make a
// launch long enough (about a millisecond on a GPU) for event timing to be exact.
Shape filling(const Plan& plan, int width, int chains) {
  const DeviceInfo& d = plan.device;
  const std::size_t local = std::min<std::size_t>(256, d.max_work_group);
  if (plan.size == Size::test) return {2 * local, local, 3};
  const std::size_t items = std::max<std::size_t>(d.compute_units, 1) * (d.is_gpu ? 8192 : 4096);
  const int lane_steps = d.is_gpu ? 16384 : 2048;  // per chain-lane pair of steps, per item
  return {items, local, std::max(1, lane_steps / (chains * width))};
}

std::vector<Workload> build(const Plan& plan) {
  std::vector<Workload> out;
  const std::string be = plan.device.backend;
  // bfloat (CUDA's __nv_bfloat16) only where the device has bf16 arithmetic: never OpenCL.
  const Type types[] = {{"int", "uint"}, {"float", "float"}, {"double", "double"}, {"half", "half"}, {"bfloat", "bfloat"}};
  for (Op op : {Op::add, Op::mul, Op::mad})
    for (const Type& t : types)
      for (int width : {1, 2, 4, 8, 16}) {
        if (std::string(t.name) == "bfloat" && !plan.device.bf16) continue;
        const Shape s = filling(plan, width, chains_for(plan.device, width));
        const Identity label = identity({{"family", "compute"}, {"backend", be}, {"op", op_name(op)}, {"type", vector_type(t.name, width)}},
                                        {}, vector_axes(t.name, width));
        const std::string tn = t.name;
        if (tn == "int") out.push_back(make<std::uint32_t>(plan, op, t, width, s, label));
        else if (tn == "float") out.push_back(make<float>(plan, op, t, width, s, label));
        else if (tn == "double") out.push_back(make<double>(plan, op, t, width, s, label));
        else if (tn == "half") out.push_back(make<Half>(plan, op, t, width, s, label));
        else out.push_back(make<BFloat>(plan, op, t, width, s, label));
      }
  // Throughput against the number of work-groups (seed 000 Figs. 7 and 8): float mad.
  const Shape full = filling(plan, 1, chains_for(plan.device, 1));
  const std::size_t filled_groups = full.items / full.local;
  const std::size_t step = plan.size == Size::full ? 2 : 4;
  const std::vector<int> widths = plan.size == Size::full ? std::vector<int>{1, 2, 4, 8, 16} : std::vector<int>{1};
  for (int width : widths)
    for (std::size_t g = 1; g <= 2 * filled_groups; g *= step) {
      Shape s = filling(plan, width, chains_for(plan.device, width));
      s.items = g * s.local;
      const Identity label = identity({{"family", "compute"}, {"backend", be}, {"op", "mad"}, {"type", vector_type("float", width)}},
                                      {{"groups", std::to_string(g)}}, vector_axes("float", width));
      out.push_back(make<float>(plan, Op::mad, types[1], width, s, label));
      if (plan.size == Size::test) break;
    }
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(compute, build);

}  // namespace archbench
