// collective: NCCL's collectives over every GPU of the machine, one process driving them all
// (ncclCommInitAll; Device::prepare_node), what nccl-tests measures. Names
// collective/cuda/<op>/gpus:N/bytes:B, op all_reduce, all_gather, reduce_scatter, all_to_all
// (grouped sends and receives) or broadcast (from the first GPU), B nccl-tests' size (the
// message: all_gather's receive buffer, reduce_scatter's send buffer), floats that rank r
// sends as r + 1, so that every result is exact and checked. byte_per_s is nccl-tests' algbw
// (B over the time), bus_byte_per_s their busbw (algbw times bus_factor: all_reduce 2(n-1)/n;
// all_gather, reduce_scatter, all_to_all (n-1)/n; broadcast 1), to hold against the link's
// limit. NCCL is found at run time (libnccl.so.2, or ARCHBENCH_NCCL); where it is not, or is
// not NCCL 2, or there is one GPU: one entry that skips with the reason. NCCL_NVLS_ENABLE must
// be 0 (NVLink SHARP multicast stays off), else every entry skips saying so. The machine's
// first GPU builds them (any other says so and skips), so that `--device=all` runs them once.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

std::vector<Workload> build(const Plan& plan) {
  const DeviceInfo& d = plan.device;
  if (!d.peer_copies) return {};
  const std::string& be = d.backend;
  const int n = int(d.peers.size()) + 1;
  const int self = std::atoi(d.selector.substr(d.selector.find(':') + 1).c_str());
  const int first = std::min(self, d.peers.empty() ? self : *std::min_element(d.peers.begin(), d.peers.end()));
  const std::string why = !d.no_collectives.empty() ? d.no_collectives
                          : self != first ? "the machine's first GPU (" + be + ":" + std::to_string(first) +
                                                ") runs the collectives"
                                          : "";
  if (!why.empty()) {
    Workload w;
    w.identify(identity({{"family", "collective"}, {"backend", be}, {"op", "nccl"}}, {{"gpus", std::to_string(n)}}));
    w.skip = why;
    return {w};
  }
  // 8 B to 1 GiB in x8 steps (x2 in the full sweep), each a whole number of floats per GPU.
  std::vector<std::size_t> sizes;
  const std::size_t top = plan.size == Size::test ? 4096 : std::size_t(1) << 30;
  for (std::size_t b = 8; b <= top; b *= plan.size == Size::full ? 2 : 8) sizes.push_back(b);
  const std::size_t unit = 4 * std::size_t(n);
  std::vector<Workload> out;
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"})
    for (std::size_t asked : sizes) {
      const std::size_t b = std::max(unit, (asked + unit - 1) / unit * unit);
      if (!out.empty() && out.back().node->bytes == b && out.back().node->op == op) continue;  // 8 B and 64 B may round alike
      Workload w;
      w.identify(identity({{"family", "collective"}, {"backend", be}, {"op", op}},
                          {{"gpus", std::to_string(n)}, {"bytes", std::to_string(b)}}));
      w.cost.bytes_written = double(b);
      w.cost.bus_bytes = double(b) * bus_factor(op, n);
      w.node = NodeWork{NodeWork::collective, {}, CopyMethod::copy_engine, b, op};
      out.push_back(std::move(w));
    }
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(collective, build);

}  // namespace archbench
