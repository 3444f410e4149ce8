// divergence: the cost of thread-dependent branches (seed 002 section 2.4, Fig. 8, Table 3).
// Work-item lid takes path lid % P; every path does the same fma work with its own
// constants, so on a SIMT device a warp runs its P paths one after another (expect a
// slowdown near P up to the warp size), while a CPU may hardly notice (Table 3). The
// counter `slowdown` is the time of paths:P over the time of paths:1 (no branch) in the
// same run; flop_per_s counts the work each work-item really does.
// divmod (full sweep): the same paths with the seed's own body (Fig. 8: t1 /= t2; t2 %= t1),
// integer division and modulo in one dependent chain (divergence.cl says how it is kept safe
// for any input); op_per_s counts a divide, a modulo and two adds a step, and the final add.
// Names: divergence/<backend>/paths/paths:P (fma), divergence/<backend>/divmod/paths:P.
// The H100 executes exactly the model's fp32 flops on every path count (issue 17); the 2 fp16
// 'flops' a work-item it also counts are ptxas' HFMA2.MMA moves (archbench/traffic.py, MOVES).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

constexpr int kChains = 4;     // independent fma chains per work-item (divergence.cl)
constexpr int kMaxPaths = 64;  // paths the kernel has code for

struct Shape {
  std::size_t items, local;
  std::uint32_t iters;
};

// A GPU: enough work-items to fill every SM several times and about a millisecond of fma
// without branches (an H100 then takes ~30 ms at 32 paths). A CPU: a few work-groups per
// core, about a millisecond on 2 PoCL cores. (PoCL 3.1 runs the work-items of a group one
// after another, each path's chains in one SIMD register, since the fma loop keeps its
// work-item loop from being vectorized: no lanes to diverge, so its slowdown stays near 1.)
Shape shape(const Plan& plan) {
  const DeviceInfo& d = plan.device;
  const std::size_t local = std::min<std::size_t>(256, d.max_work_group);
  if (plan.size == Size::test) return {2 * local, local, 3};
  const std::size_t cu = std::max<unsigned>(d.compute_units, 1);
  if (d.is_gpu) return {cu * 8192 / local * local, local, 8192};
  return {cu * 1024 / local * local, local, 1024};
}

Workload paths(const Plan& plan, int P, const std::string& baseline) {
  const Shape s = shape(plan);
  const double per_item = 2.0 * kChains * s.iters + (kChains - 1);  // fmas, then the sum
  Workload w;
  w.identify(identity({{"family", "divergence"}, {"backend", plan.device.backend}, {"op", "paths"}}, {{"paths", std::to_string(P)}}));
  w.kernel = {"divergence", "paths", {{"PATHS", std::to_string(P)}}};
  w.range = Range::linear(s.items, s.local);
  w.buffers = {{s.items * kChains * 4, [](Bytes& b) { fill_uniform<float>(b, 8, 1.0, 2.0); }},
               {2 * kMaxPaths * 4,
                [](Bytes& b) {
                  // a in [0.9, 0.999), b in [0.001, 0.01): every chain stays near b / (1 - a),
                  // far from overflow and denormals, and each path's fixed point is its own.
                  Rng r(88);
                  for (int k = 0; k < kMaxPaths; ++k) {
                    put<float>(b, 2 * k, static_cast<float>(0.9 + 0.099 * r.uniform()));
                    put<float>(b, 2 * k + 1, static_cast<float>(0.001 + 0.009 * r.uniform()));
                  }
                }},
               {s.items * 4, nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1), Arg::buf(2), Arg::scalar<std::uint32_t>(s.iters)};
  w.cost.flops = per_item * s.items;
  w.relative = Relative{baseline, "slowdown"};
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& tally) {
    // With a sample (every > 1), step the item by k % P as well, so that a stride that is
    // a multiple of P still visits every path.
    for (std::size_t k = 0;; ++k) {
      const std::size_t g = k * every + (every > 1 ? k % P : 0);
      if (g >= s.items) break;
      const std::size_t path = (g % s.local) % P;
      const float a = get<float>(in[1], 2 * path), b = get<float>(in[1], 2 * path + 1);
      float x[kChains];
      for (int c = 0; c < kChains; ++c) x[c] = get<float>(in[0], g + c * s.items);
      // Count what the reference does (2 flops an fma, then 3 adds), not the cost formula.
      for (std::uint32_t i = 0; i < s.iters; ++i)
        for (int c = 0; c < kChains; ++c, tally.flops += 2) x[c] = std::fma(x[c], a, b);
      const float want = ((x[0] + x[1]) + x[2]) + x[3];
      tally.flops += kChains - 1;
      const float got = get<float>(out[2], g);
      if (std::memcmp(&want, &got, 4) != 0)
        return differs(g, want, got) + " (path " + std::to_string(path) + ")";
    }
    return std::string();
  };
  return w;
}

// The seed's body: one chain of t1 = t1 / t2 + a, t2 = t2 % t1 + b per work-item (a GPU
// takes ~40 instructions a step, so fewer steps than the fma body: ~1 ms without branches).
Workload divmod(const Plan& plan, int P, const std::string& baseline) {
  const Shape s = shape(plan);
  const std::uint32_t iters = plan.size == Size::test ? 3 : plan.device.is_gpu ? 512 : 256;
  Workload w;
  w.identify(identity({{"family", "divergence"}, {"backend", plan.device.backend}, {"op", "divmod"}}, {{"paths", std::to_string(P)}}));
  w.kernel = {"divergence", "divmod", {{"PATHS", std::to_string(P)}}};
  w.range = Range::linear(s.items, s.local);
  w.buffers = {{s.items * 2 * 4, [](Bytes& b) { Rng r(0xd17); for (std::size_t i = 0; i < b.size() / 4; ++i) put<std::uint32_t>(b, i, std::uint32_t(2 + r.next() % 65534)); }},
               {2 * kMaxPaths * 4,
                [](Bytes& b) {  // a in [1, 2^16), b in [2, 256): see divergence.cl
                  Rng r(89);
                  for (int k = 0; k < kMaxPaths; ++k) {
                    put<std::uint32_t>(b, 2 * k, std::uint32_t(1 + r.next() % 65535));
                    put<std::uint32_t>(b, 2 * k + 1, std::uint32_t(2 + r.next() % 254));
                  }
                }},
               {s.items * 4, nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1), Arg::buf(2), Arg::scalar<std::uint32_t>(iters)};
  w.cost.int_ops = (4.0 * iters + 1) * s.items;
  w.relative = Relative{baseline, "slowdown"};
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& tally) {
    for (std::size_t k = 0;; ++k) {
      const std::size_t g = k * every + (every > 1 ? k % P : 0);  // every path, as paths() does
      if (g >= s.items) break;
      const std::size_t path = (g % s.local) % P;
      const std::uint32_t a = get<std::uint32_t>(in[1], 2 * path), b = get<std::uint32_t>(in[1], 2 * path + 1);
      std::uint32_t t1 = get<std::uint32_t>(in[0], g), t2 = get<std::uint32_t>(in[0], g + s.items);
      for (std::uint32_t i = 0; i < iters; ++i, tally.int_ops += 4) {
        t1 = t1 / t2 + a;
        t2 = t2 % t1 + b;
      }
      const std::uint32_t want = t1 + t2, got = get<std::uint32_t>(out[2], g);
      tally.int_ops += 1;
      if (got != want) return differs(g, want, got) + " (path " + std::to_string(path) + ")";
    }
    return std::string();
  };
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  std::vector<Workload> out;
  // Seed 002 has 1 (no branch), 4, 16 and 32 paths; every power of two up to the warp size
  // here, and 64 (an AMD wavefront) in the full sweep.
  std::vector<int> ps = {1, 2, 4, 8, 16, 32};
  if (plan.size == Size::full) ps.push_back(64);
  // paths:1 is its own baseline (slowdown 1), so that every row has the counter.
  const std::string base =
      identity({{"family", "divergence"}, {"backend", plan.device.backend}, {"op", "paths"}}, {{"paths", "1"}}).name;
  for (int P : ps) out.push_back(paths(plan, P, base));
  if (plan.size == Size::quick) return out;
  const std::string divmod_base =
      identity({{"family", "divergence"}, {"backend", plan.device.backend}, {"op", "divmod"}}, {{"paths", "1"}}).name;
  for (int P : ps) out.push_back(divmod(plan, P, divmod_base));
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(divergence, build);

}  // namespace archbench
