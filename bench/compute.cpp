// compute: add, sub, mul, div and mad throughput per type and vector width (seed 000 Table I,
// seed 002 section 2.1 and Table 1), add and mad against the number of work-groups (seed 000
// Figs. 7-8), and mad over seed 002's geometry search (work-items x work-group size). Types:
// int, float, double, half, and bfloat where the device has bf16 arithmetic (CUDA; 16-bit floats
// of even width run as packed pairs, HFMA2 and its bf16 twin). Integers have no div (seed 002
// measures FLOPS; integer division is a library routine on GPUs, not an instruction).
#include <cctype>
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#ifndef CPU_CHAINS
#define CPU_CHAINS 16
#endif

#include "fixtures/core/data.hpp"
#include "fixtures/core/env.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

enum class Op { add, sub, mul, div, mad };
const char* op_name(Op op) {
  switch (op) {
    case Op::add: return "add";
    case Op::sub: return "sub";
    case Op::mul: return "mul";
    case Op::div: return "div";
    default: return "mad";
  }
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

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
  static H sub(H x, H p) { return x - p; }
  static H mul(H x, H p) { return x * p; }
  static H div(H x, H p) { return x / p; }
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
  static H sub(H x, H p) { return r(f(x) - f(p)); }
  static H mul(H x, H p) { return r(f(x) * f(p)); }
  // A quotient of two 16-bit floats rounded to double and then to 16 bits is the correctly
  // rounded one (53 >= 2 x 11 + 2 bits), as the device's is.
  static H div(H x, H p) { return r(f(x) / f(p)); }
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

// One step as the kernel does it, and the operations it did: an add, sub, multiply or divide is
// one, a mad (a multiply and an add, fused or not) two. The reference's tally comes from here, never
// from the cost model's constant.
template <class H>
H step(Op op, H x, H p, H q, double* ops = nullptr) {
  using A = Arith<H>;
  if (ops) *ops += op == Op::mad ? 2 : 1;
  switch (op) {
    case Op::add: return A::add(x, p);
    case Op::sub: return A::sub(x, p);
    case Op::mul: return A::mul(x, p);
    case Op::div: return A::div(x, p);
    default: return A::mad(x, p, q);
  }
}

// Runtime scalars a, b per op: they keep every floating chain bounded (no overflow, no
// denormals) while making the result depend on every step. Integers wrap.
template <class H>
std::pair<double, double> scalars(Op op) {
  if constexpr (std::is_integral_v<H>) return {2654435761.0, 40503.0};
  switch (op) {
    case Op::add: return {0.375, -0.25};  // +0.125 per trip, exact in every precision
    case Op::sub: return {0.25, -0.375};  // +0.125 per trip, as add
    case Op::mul: return {1.25, 0.7998046875};  // product just under 1: a slow, exact-ish decay
    case Op::div: return {1.25, 0.7998046875};  // quotient just over 1: a slow growth
    default: return {0.999, 0.0078125};
  }
}

// Independent accumulators per work-item: enough to cover the FMA latency of a CPU core's
// wide pipes (it runs work-items in SIMD lanes, one thread per core), few enough to keep a
// GPU's registers free for occupancy (it hides latency with other warps).
int chains_for(const DeviceInfo& d, int width) {
  if (const std::optional<double> n = env_number("ARCHBENCH_CHAINS")) return int(*n);  // even, 2 to 16: env.cpp
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
               {"ITERS", std::to_string(s.iters)}, {"OP_" + upper(op_name(op)), "1"},
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
    // The same host work whatever the shape: an item of many trips (peak_shape) is checked
    // at fewer items, about 512 x 1024 trips in all.
    every = std::max(every, every * std::size_t(s.iters) / 1024);
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

// The peak figures' shape: on a device that says how many work-items a compute unit holds at
// once (CUDA), one wave of groups, all resident from the start, each item doing more trips.
// Several waves of equal groups lose up to 9% on the H100 to SMs idle at the wave boundaries
// (scalar float mad at 4 waves: 60.1 TFLOP/s, ncu: SM active 91% of the elapsed cycles at
// 3.98 IPC; 1 wave: 65.5). ARCHBENCH_WAVES (default 0.75: 48 of the 64 warps an SM holds, so
// that kernels of up to 40 registers a thread still fit at once) sets the fill. The launch
// does 8 times filling()'s work, about 8 ms of FMAs on an H100, so that what a launch costs
// beside its loop (its start, the inputs' first loads, the last blocks' tail: 10-20 us on an
// H200, event time against the SMs' own span) is 0.1-0.2% of it: at 2 ms, double16 read 33.33
// TFLOP/s, int16 33.32 Top/s and float16 66.03; at 8 ms 33.39, 33.42 and 66.13.
Shape peak_shape(const Plan& plan, int width, int chains) {
  Shape s = filling(plan, width, chains);
  const DeviceInfo& d = plan.device;
  if (plan.size == Size::test || d.resident_per_unit == 0) return s;
  const double waves = env_number("ARCHBENCH_WAVES").value_or(0.75);
  const double work = 8.0 * double(s.items) * s.iters;
  const auto items = static_cast<std::size_t>(waves * d.compute_units * d.resident_per_unit) / s.local * s.local;
  s.items = std::max(items, s.local);
  s.iters = std::max(1, static_cast<int>(work / double(s.items)));
  return s;
}

// One workload of a type given by name.
Workload make_named(const Plan& plan, Op op, const Type& t, int width, const Shape& s, const Identity& label) {
  const std::string tn = t.name;
  if (tn == "int") return make<std::uint32_t>(plan, op, t, width, s, label);
  if (tn == "float") return make<float>(plan, op, t, width, s, label);
  if (tn == "double") return make<double>(plan, op, t, width, s, label);
  if (tn == "half") return make<Half>(plan, op, t, width, s, label);
  return make<BFloat>(plan, op, t, width, s, label);
}

std::vector<Workload> build(const Plan& plan) {
  std::vector<Workload> out;
  const std::string be = plan.device.backend;
  const bool quick = plan.size == Size::quick, test = plan.size == Size::test;
  // bfloat (CUDA's __nv_bfloat16) only where the device has bf16 arithmetic: never OpenCL.
  const Type types[] = {{"int", "uint"}, {"float", "float"}, {"double", "double"}, {"half", "half"}, {"bfloat", "bfloat"}};
  // sub and div (seed 002 Table 1) in the full sweep only: the quick run keeps add, mul, mad.
  for (Op op : {Op::add, Op::mul, Op::mad, Op::sub, Op::div}) {
    if (quick && (op == Op::sub || op == Op::div)) continue;
    for (const Type& t : types)
      for (int width : {1, 2, 4, 8, 16}) {
        if (std::string(t.name) == "bfloat" && !plan.device.bf16) continue;
        if (op == Op::div && std::string(t.name) == "int") continue;
        const Shape s = peak_shape(plan, width, chains_for(plan.device, width));
        const Identity label = identity({{"family", "compute"}, {"backend", be}, {"op", op_name(op)}, {"type", vector_type(t.name, width)}},
                                        {}, vector_axes(t.name, width));
        out.push_back(make_named(plan, op, t, width, s, label));
      }
  }
  // Throughput against the number of work-groups (seed 000 Figs. 7 and 8): add and mad of int,
  // float and double at every width, over group_counts() (1 to 8x the compute units). Float mad
  // also keeps its earlier points (x2 steps up to twice the groups that fill the device; x4 and
  // scalar only in the quick run), so their names and the quick run stay as they were.
  const Shape full = filling(plan, 1, chains_for(plan.device, 1));
  const std::size_t filled_groups = full.items / full.local;
  for (Op op : {Op::mad, Op::add})
    for (const Type* t : {&types[1], &types[0], &types[2]})
      for (int width : {1, 2, 4, 8, 16}) {
        const bool float_mad = op == Op::mad && t == &types[1];
        std::vector<std::size_t> counts;
        if (float_mad && (!quick || width == 1))
          for (std::size_t g = 1; g <= 2 * filled_groups; g *= quick ? 4 : 2) counts.push_back(g);
        if (!quick)
          for (std::size_t g : group_counts(plan.device))
            if (std::find(counts.begin(), counts.end(), g) == counts.end()) counts.push_back(g);
        std::sort(counts.begin(), counts.end());
        if (test && counts.size() > 1) counts.erase(counts.begin() + 1, counts.end());
        for (std::size_t g : counts) {
          Shape s = filling(plan, width, chains_for(plan.device, width));
          s.items = g * s.local;
          const Identity label = identity({{"family", "compute"}, {"backend", be}, {"op", op_name(op)}, {"type", vector_type(t->name, width)}},
                                          {{"groups", std::to_string(g)}}, vector_axes(t->name, width));
          out.push_back(make_named(plan, op, *t, width, s, label));
        }
      }
  // Seed 002 section 2.1's search: mad over work-items 1024 to 524288 x work-group size 32 to
  // 256 (x2 steps), each geometry its own benchmark; the best of them is the seed's figure
  // (tools/archbench_search.py picks it, with its geometry). The work per item is the filling
  // shape's, so a launch's time grows with the work-items. Full sweep only.
  if (!quick)
    for (const Type* t : {&types[1], &types[2]})
      for (int width : {1, 2, 4, 8, 16})
        for (std::size_t items = 1024; items <= (test ? 1024 : 524288); items *= 2)
          for (std::size_t group = 32; group <= 256; group *= 2) {
            if (group > plan.device.max_work_group) continue;
            Shape s = filling(plan, width, chains_for(plan.device, width));
            s.items = test ? 2 * group : items;
            s.local = group;
            const Identity label = identity({{"family", "compute"}, {"backend", be}, {"op", "mad"}, {"type", vector_type(t->name, width)}, {"study", "search"}},
                                            {{"items", std::to_string(items)}, {"group", std::to_string(group)}}, vector_axes(t->name, width));
            out.push_back(make_named(plan, Op::mad, *t, width, s, label));
            if (test) break;
          }
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(compute, build);

}  // namespace archbench
