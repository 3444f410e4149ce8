// latency: nanoseconds (and cycles) per dependent access over working sets from 1 KiB to
// beyond the largest cache: the staircase of seed 000 Fig. 10; and the same chase run by many
// work-items at once, as load bandwidth over the working set (seed 000 Fig. 6).
// chase_sm (devices whose SMs have ids, CUDA): the same chase over a working set in L2, run on
// one chosen SM at a time. L2 latency depends on the SM's distance to the L2 on the chip (H100:
// 268.8 cycles from the nearest SM, 281.3 the median, 300.3 the farthest), so the plain chase,
// on whatever SM the scheduler picks, moves between runs; per SM, the nearest, median and
// farthest are measured and reproducible. Names: latency/cuda/chase_sm/bytes:N/sm:S.
#include <cstdint>
#include <cmath>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

constexpr std::size_t kMinBytes = 1 << 10;
constexpr std::size_t kFloorTop = std::size_t(256) << 20;  // at least this far, whatever the caches report
constexpr std::size_t kMinL2Bytes = std::size_t(1) << 20;   // chase_sm's L2 working set: at least this

// One thread's walk of a random single cycle over the lines of `bytes`, as chase and chase_sm
// share it: the chain, the hop count, buffers, arguments, cost (one access a hop) and check,
// named `op` with `keyed` axes. The caller picks the kernel and the launch.
Workload walk(const Plan& plan, std::size_t bytes, const std::string& op, const Axes& keyed = {}) {
  const DeviceInfo& d = plan.device;
  const std::size_t line = std::max<std::size_t>(d.cacheline, 64);
  const std::size_t lines = bytes / line, stride = line / 4;  // stride in words
  // Every launch walks the whole cycle at least once: fewer hops would revisit the same few
  // lines each launch, and those would stay in a cache however large the working set.
  const std::uint32_t hops = plan.size == Size::test ? std::uint32_t(2 * lines + 3)
                                                     : std::uint32_t(std::max<std::size_t>(lines, 1u << 16));
  // Where buffers have addresses (CUDA), the chain holds them and each hop is one load whose
  // value is the next address (chase_ptr: no index arithmetic between loads, the load-to-use
  // latency itself); elsewhere 32-bit word indices (chase).
  const bool pointers = d.device_pointers;
  Axes named = {{"bytes", std::to_string(bytes)}};
  named.insert(named.end(), keyed.begin(), keyed.end());
  Workload w;
  w.identify(identity({{"family", "latency"}, {"backend", d.backend}, {"op", op}}, named, {{"hop", pointers ? "pointer" : "index"}}));
  w.buffers = {{bytes, [=](Bytes& b) { fill_chain(b, lines, stride, bytes, pointers); }}, {8, nullptr}};
  w.buffers[0].pointers = pointers;
  w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar<std::uint32_t>(0), Arg::scalar<std::uint32_t>(hops)};
  w.cost.accesses = hops;
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t, Cost& t) {
    const std::uint64_t want = follow_chain(in[0], hops, pointers);  // the walk, one access a hop
    t.accesses += hops;
    const std::uint64_t got = pointers ? get<std::uint64_t>(out[1], 0) : get<std::uint32_t>(out[1], 0);
    return got == want ? std::string() : "after " + std::to_string(hops) + " hops: expected " + (pointers ? "offset " : "index ") +
                                             std::to_string(want) + ", got " + std::to_string(got);
  };
  return w;
}

Workload chase(const Plan& plan, std::size_t bytes) {
  Workload w = walk(plan, bytes, "chase");
  w.kernel = {"latency", w.buffers[0].pointers ? "chase_ptr" : "chase", {}};  // as the chain holds
  w.range = Range::linear(1, 1);
  return w;
}

// Whether chase_sm can run: its chain holds addresses (chase_ptr's walk) and its blocks read
// the SM they run on, which PTX names (%smid): a device compiled for an sm_ architecture.
bool has_sm_ids(const DeviceInfo& d) { return d.device_pointers && d.arch.rfind("sm_", 0) == 0; }

// The walk on SM `sm` only (chase_ptr_sm): 4 one-thread blocks per SM, so that the scheduler
// puts one on every SM (a block elsewhere returns at once). Where none landed on `sm`, the
// output keeps its poison, which is no offset in the chain.
Workload chase_sm(const Plan& plan, std::size_t bytes, unsigned sm) {
  const std::size_t blocks = 4 * std::size_t(std::max<unsigned>(plan.device.compute_units, 1));
  Workload w = walk(plan, bytes, "chase_sm", {{"sm", std::to_string(sm)}});
  w.axes.push_back({"blocks", std::to_string(blocks)});
  w.kernel = {"latency", "chase_ptr_sm", {}};
  w.range = Range::linear(blocks, 1);
  w.args.push_back(Arg::scalar<std::uint32_t>(sm));
  const Check walked = w.check;
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    if (get<std::uint64_t>(out[1], 0) >= bytes)
      return "no block ran on SM " + std::to_string(sm) + " (of " + std::to_string(blocks) + " blocks launched)";
    return walked(in, out, every, t);
  };
  return w;
}

// Seed 000 Fig. 6: many work-items chase the same chain at once, each from its own line
// (work-item g from line g mod lines, a random place in the cycle), so the loads of different
// work-items overlap; the rate is the bytes the loads ask for (4 a hop), the seed's "load"
// bandwidth. Work-items: enough to keep every compute unit busy with independent chains.
Workload chase_load(const Plan& plan, std::size_t bytes) {
  const DeviceInfo& d = plan.device;
  const bool test = plan.size == Size::test;
  const std::size_t line = std::max<std::size_t>(d.cacheline, 64);
  const std::size_t lines = bytes / line, stride = line / 4;
  const std::size_t local = std::min<std::size_t>(256, d.max_work_group);
  const std::size_t items = test ? 2 * local : std::max<unsigned>(d.compute_units, 1) * (d.is_gpu ? 2048 : 256);
  // Enough hops that the work-items together walk the working set twice over (so that a
  // working set beyond a cache is not served from it), and a launch is long against its start.
  const std::uint32_t hops = test ? 7u : std::uint32_t(std::max<std::size_t>(2 * lines / items + 1, 1024));
  Workload w;
  w.identify(identity({{"family", "latency"}, {"backend", d.backend}, {"op", "chase_load"}}, {{"bytes", std::to_string(bytes)}}));
  w.axes.push_back({"items", std::to_string(items)});
  w.kernel = {"latency", "chase_many", {}};
  w.range = Range::linear(items, local);
  w.buffers = {{bytes, [=](Bytes& b) { fill_chain(b, lines, stride, bytes); }}, {items * 4, nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar<std::uint32_t>(std::uint32_t(stride)),
            Arg::scalar<std::uint32_t>(std::uint32_t(lines)), Arg::scalar<std::uint32_t>(hops)};
  w.cost = {0, 0, 4.0 * hops * items, 4.0 * items, 0};
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    for (std::size_t g = 0; g < items; g += every) {
      std::uint32_t p = std::uint32_t((g % lines) * stride);
      for (std::uint32_t i = 0; i < hops; ++i) p = get<std::uint32_t>(in[0], p), t.bytes_read += 4;
      t.bytes_written += 4;
      const std::uint32_t got = get<std::uint32_t>(out[1], g);
      if (got != p)
        return "work-item " + std::to_string(g) + " after " + std::to_string(hops) + " hops: expected index " +
               std::to_string(p) + ", got " + std::to_string(got);
    }
    return std::string();
  };
  return w;
}

// chase_sm's points, appended to `out`. Test: a tiny chain on the first and the last SM.
// Otherwise one working set in L2 and far beyond L1: the largest power of two at most an
// eighth of the reported L2, at least 1 MiB (4 MiB on the H100's 50 MiB, a point the staircase
// has too); and the smallest working set (L1, where distance cannot matter) on SM 0 only, to
// compare with the plain chase's. The full sweep takes every SM. Quick takes every 3rd and the
// last: a point costs about 0.8 s whatever its hops (Google Benchmark's minimum time over its
// repetitions, and the clock meter's window), so all 132 SMs of an H100 would add about 2
// minutes to the quick sweep, a third of them 40 s. The stride is odd so that the subset holds
// SMs of both parities and of every group, whether ids run through TPCs and GPCs in order or
// interleaved by powers of two.
void add_chase_sm(const Plan& plan, std::vector<Workload>& out) {
  const DeviceInfo& d = plan.device;
  if (!has_sm_ids(d)) return;
  const unsigned sms = std::max<unsigned>(d.compute_units, 1);
  if (plan.size == Size::test) {
    out.push_back(chase_sm(plan, kMinBytes, 0));
    if (sms > 1) out.push_back(chase_sm(plan, kMinBytes, sms - 1));
    return;
  }
  std::size_t l2 = kMinL2Bytes;
  while (2 * l2 <= d.cache_size / 8 && 2 * l2 <= d.max_alloc) l2 *= 2;
  out.push_back(chase_sm(plan, kMinBytes, 0));
  const unsigned step = plan.size == Size::full ? 1 : 3;
  for (unsigned sm = 0; sm < sms; sm += step) out.push_back(chase_sm(plan, l2, sm));
  if ((sms - 1) % step) out.push_back(chase_sm(plan, l2, sms - 1));
}

std::vector<Workload> build(const Plan& plan) {
  const DeviceInfo& d = plan.device;
  std::vector<Workload> out;
  if (plan.size == Size::test) {
    for (std::size_t b : {kMinBytes, std::size_t(64) << 10}) out.push_back(chase(plan, b)), out.push_back(chase_load(plan, b));
    add_chase_sm(plan, out);
    return out;
  }
  // Up to 4x the largest cache the device reports (at least 256 MiB), within one allocation.
  std::size_t top = std::max<std::size_t>(4 * d.cache_size, kFloorTop);
  while (top > kMinBytes && top > d.max_alloc) top /= 2;
  // Quick: one point per octave; full: four.
  const int per_octave = plan.size == Size::full ? 4 : 1;
  for (std::size_t octave = kMinBytes; octave <= top; octave *= 2)
    for (int k = 0; k < per_octave; ++k) {
      const std::size_t line = std::max<std::size_t>(d.cacheline, 64);
      const std::size_t b = std::size_t(octave * std::pow(2.0, double(k) / per_octave)) / line * line;
      if (b <= top) out.push_back(chase(plan, b));
    }
  // Fig. 6, full sweep only: one point per octave.
  if (plan.size == Size::full)
    for (std::size_t b = kMinBytes; b <= top; b *= 2) out.push_back(chase_load(plan, b));
  add_chase_sm(plan, out);
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(latency, build);

}  // namespace archbench
