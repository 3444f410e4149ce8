// launch: what one kernel launch costs, with an (almost) empty kernel (the clpeak "kernel
// launch latency" test; anchors: 23.8 us round trip on PoCL, 19.4 us NVIDIA OpenCL).
//  - dispatch: device events over back-to-back launches (Measure's batches): the device's
//    time per launch, the gaps between kernels included, host submission excluded;
//  - round_trip: host clock around enqueue + clFinish of each single launch: what a caller
//    that waits for every kernel pays;
//  - graph (CUDA): the batch of launches captured once in a CUDA graph and replayed; device
//    time per kernel of the graph (what graphs save against stream launches, dispatch).
// Axis items: one work-item, or a full device's worth (256 per compute unit; 2048 per
// compute unit as well in the full sweep), to see what the work-groups themselves cost.
// Nothing is counted: the time per launch (Google Benchmark's time column, us) is the result.
#include <cstdint>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

constexpr std::uint32_t kValue = 0x600DF00Du;  // what work-item 0 stores; not the poison

Workload empty(const Plan& plan, Timing timing, std::size_t items) {
  const DeviceInfo& d = plan.device;
  const std::size_t local = std::min<std::size_t>({256, d.max_work_group, items});
  Workload w;
  const char* how = timing == Timing::device ? "dispatch" : timing == Timing::graph ? "graph" : "round_trip";
  w.identify(identity({{"family", "launch"}, {"backend", d.backend}, {"op", "empty"}, {"timing", how}}, {{"items", std::to_string(items)}}));
  w.kernel = {"launch", "empty", {}};
  w.range = Range::linear(items / local * local, local);
  w.timing = timing;
  w.buffers = {{4, nullptr}};
  w.args = {Arg::buf(0), Arg::scalar<std::uint32_t>(kValue)};
  w.check = [](const std::vector<Bytes>&, const std::vector<Bytes>& out, std::size_t, Cost&) {
    const std::uint32_t got = get<std::uint32_t>(out[0], 0);
    return got == kValue ? std::string() : "work-item 0 did not store its argument: " + differs(0, kValue, got);
  };
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  const DeviceInfo& d = plan.device;
  const std::size_t cu = std::max<unsigned>(d.compute_units, 1);
  std::vector<std::size_t> sizes = {1, plan.size == Size::test ? 2 * std::min<std::size_t>(256, d.max_work_group)
                                                               : cu * 256};
  if (plan.size == Size::full) sizes.push_back(cu * 2048);
  std::vector<Workload> out;
  std::vector<Timing> timings = {Timing::device, Timing::round_trip};
  if (d.graphs) timings.push_back(Timing::graph);
  for (Timing t : timings)
    for (std::size_t items : sizes) out.push_back(empty(plan, t, items));
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(launch, build);

}  // namespace archbench
