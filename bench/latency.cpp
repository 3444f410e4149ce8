// latency: nanoseconds (and cycles) per dependent access over working sets from 1 KiB to
// beyond the largest cache: the staircase of seed 000 Fig. 10; and the same chase run by many
// work-items at once, as load bandwidth over the working set (seed 000 Fig. 6).
#include <cstdint>
#include <cmath>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

constexpr std::size_t kMinBytes = 1 << 10;
constexpr std::size_t kFloorTop = std::size_t(256) << 20;  // at least this far, whatever the caches report

Workload chase(const Plan& plan, std::size_t bytes) {
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
  Workload w;
  w.identify(identity({{"family", "latency"}, {"backend", d.backend}, {"op", "chase"}}, {{"bytes", std::to_string(bytes)}}));
  w.axes.push_back({"hop", pointers ? "pointer" : "index"});
  w.kernel = {"latency", pointers ? "chase_ptr" : "chase", {}};
  w.range = Range::linear(1, 1);
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

std::vector<Workload> build(const Plan& plan) {
  const DeviceInfo& d = plan.device;
  std::vector<Workload> out;
  if (plan.size == Size::test) {
    for (std::size_t b : {kMinBytes, std::size_t(64) << 10}) out.push_back(chase(plan, b)), out.push_back(chase_load(plan, b));
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
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(latency, build);

}  // namespace archbench
