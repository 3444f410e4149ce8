// peer: bandwidth and latency between the GPUs of one machine (where the device has peer copies:
// CUDA), what nvbandwidth and CUDA's p2pBandwidthLatencyTest measure, issued from one process
// (Device::prepare_node): every ordered pair, the patterns that load a switch, and the latency
// of every pair. The machine's first GPU builds them (any other says so and skips), so that
// `--device=all` measures them once. Names peer/cuda/<variant>/src:S/dst:D/bytes:N, S and D
// CUDA ordinals:
//  ce_read, ce_write      the copy engine (cudaMemcpyPeerAsync, peer access enabled) of dst
//                         pulling from src (read), or of src pushing to dst (write)
//  sm_read, sm_write      a copy kernel on dst's SMs loading from src, or on src's storing to dst
//  ce_bidir, sm_bidir     both directions at once (S < D): S pushes a whole buffer to D while D
//                         pushes one to S, each from its own stream and engines, both held until
//                         submitted and started by one event, as nvbandwidth's bidirectional write
//                         tests do; the bandwidth is the sum of each direction's own (its bytes
//                         over its own window), as nvbandwidth reports it
//  latency                one thread on dst chasing a random chain in src's memory (the latency
//                         family's kernel): ns_per_access
//  ce_nop2p_read/_write   (full sweep, the first GPU's pairs) peer access disabled: the driver
//                         stages through host memory (p2pBandwidthLatencyTest's "P2P=Disabled")
// The patterns, every copy at once, each pushed by its source, the aggregate over the window
// (the start of the first copy to the end of the last, nvbandwidth's total bandwidth):
//  peer/cuda/<all_to_all|one_to_all|all_to_one|ring>/engine:ce|sm/gpus:N/bytes:B (one_to_all
//  and all_to_one: the first GPU; ring: each GPU to the next)
// Each copy moves a whole buffer of B bytes (256 MiB in the quick sweep, nvbandwidth's size
// class); each byte moved counts once (bytes_written). Fewer than two CUDA GPUs: one entry
// that skips with the reason.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

constexpr std::size_t kChunk = 4096;  // the check compares (and tallies) chunks of this many bytes

void fill_random(Bytes& b, std::uint64_t seed) {
  fill_uniform<std::uint32_t>(b, seed, 0.0, 4294967295.0);
}

// `len` bytes of `want` from `from` must be in `got` at the same offset (every `every`-th chunk).
std::string same(const Bytes& want, const Bytes& got, std::size_t from, std::size_t len, std::size_t every, Cost& t,
                 const char* where) {
  for (std::size_t c = from; c < from + len; c += kChunk * every) {
    const std::size_t n = std::min(kChunk, from + len - c);
    if (std::memcmp(want.data() + c, got.data() + c, n) != 0)
      return std::string(where) + ": the bytes from offset " + std::to_string(c) + " did not arrive";
    t.bytes_written += double(n);
  }
  return std::string();
}

Identity pair_name(const std::string& backend, const std::string& variant, int src, int dst, std::size_t bytes) {
  return identity({{"family", "peer"}, {"backend", backend}, {"op", variant}},
                  {{"src", std::to_string(src)}, {"dst", std::to_string(dst)}, {"bytes", std::to_string(bytes)}});
}

// A copy between this GPU (`self`) and `peer` with peer access disabled (the staged copy, one
// way). The check sees this GPU's buffer as in[0]/out[0] and the peer's (buffers[1], on the
// peer) as in.back()/out.back().
Workload staged(const std::string& backend, int self, int peer, Direction dir, std::size_t bytes) {
  Workload w;
  const bool pull = dir == Direction::to_device;
  w.identify(pair_name(backend, pull ? "ce_nop2p_read" : "ce_nop2p_write", pull ? peer : self, pull ? self : peer, bytes));
  w.buffers = {{bytes, [bytes](Bytes& b) { fill_random(b, 0x9EE1 + bytes); }},
               {bytes, [bytes](Bytes& b) { fill_random(b, 0x9EE2 + 7 * bytes); }}};  // the peer's
  w.buffers[1].peer = peer;
  w.transfer = Transfer{{dir, HostMemory::pageable, CopyMethod::staged}, nullptr, true};
  w.cost.bytes_written = double(bytes);
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    return pull ? same(in.back(), out[0], 0, bytes, every, t, "this GPU's buffer")
                : same(in[0], out.back(), 0, bytes, every, t, "the peer's buffer");
  };
  return w;
}

// Copies between GPUs at once (NodeWork::copies); their bytes count once each.
Workload node_copies(const Identity& id, std::vector<NodeCopy> copies, CopyMethod m, std::size_t bytes) {
  Workload w;
  w.identify(id);
  if (m == CopyMethod::sm) w.kernel = {"runtime", "archbench_copy", {}};  // what the backend launches (compile check)
  w.cost.bytes_written = double(bytes) * double(copies.size());
  w.node = NodeWork{NodeWork::copies, std::move(copies), m, bytes, ""};
  return w;
}

// One thread on GPU `dst` walks a random single cycle over the cache lines of `bytes` of GPU
// `src`'s memory (the whole cycle every launch, as the latency family does).
Workload latency(const Plan& plan, int src, int dst, std::size_t bytes) {
  const std::size_t line = std::max<std::size_t>(plan.device.cacheline, 64);
  Workload w;
  w.identify(pair_name(plan.device.backend, "latency", src, dst, bytes));
  w.kernel = {"latency", "chase", {}};
  w.cost.accesses = double(bytes / line);
  w.node = NodeWork{NodeWork::chase, {{src, dst, dst}}, CopyMethod::sm, bytes, ""};
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  const DeviceInfo& d = plan.device;
  if (!d.peer_copies) return {};
  const std::string& be = d.backend;
  if (d.peers.empty()) {
    Workload w;
    w.identify(identity({{"family", "peer"}, {"backend", be}, {"op", "pairs"}}, {{"gpus", "1"}}));
    w.skip = "the peer family needs two CUDA GPUs; this machine has one";
    return {w};
  }
  const int self = std::atoi(d.selector.substr(d.selector.find(':') + 1).c_str());
  std::vector<int> gpus = d.peers;
  gpus.push_back(self);
  std::sort(gpus.begin(), gpus.end());
  const int n = int(gpus.size());
  if (self != gpus[0]) {
    Workload w;
    w.identify(identity({{"family", "peer"}, {"backend", be}, {"op", "pairs"}}, {{"gpus", std::to_string(n)}}));
    w.skip = "the machine's first GPU (" + be + ":" + std::to_string(gpus[0]) + ") measures every pair";
    return {w};
  }
  const std::size_t MiB = std::size_t(1) << 20;
  std::vector<std::size_t> sizes, chains;
  std::size_t pattern = 256 * MiB;
  if (plan.size == Size::test) {
    sizes = {64 << 10}, chains = {64 << 10}, pattern = 64 << 10;
  } else if (plan.size == Size::quick) {
    sizes = {256 * MiB}, chains = {MiB};  // the chain in the peer's L2
  } else {
    for (std::size_t b = 64 << 10; b <= 1024 * MiB; b *= 4) sizes.push_back(b);
    for (std::size_t b = 64 << 10; b <= 256 * MiB; b *= 4) chains.push_back(b);
  }
  std::vector<Workload> out;
  for (std::size_t b : sizes) {
    if (d.max_alloc && b > d.max_alloc) continue;
    for (CopyMethod m : {CopyMethod::copy_engine, CopyMethod::sm}) {
      const std::string how = m == CopyMethod::sm ? "sm" : "ce";
      for (int s : gpus)
        for (int t : gpus) {
          if (s == t) continue;
          out.push_back(node_copies(pair_name(be, how + "_read", s, t, b), {{s, t, t}}, m, b));
          out.push_back(node_copies(pair_name(be, how + "_write", s, t, b), {{s, t, s}}, m, b));
          if (s < t) {
            out.push_back(node_copies(pair_name(be, how + "_bidir", s, t, b), {{s, t, s}, {t, s, t}}, m, b));
            out.back().node->sum_streams = true;  // as nvbandwidth reports bidirectional copies
          }
        }
    }
  }
  for (CopyMethod m : {CopyMethod::copy_engine, CopyMethod::sm}) {
    std::vector<std::pair<std::string, std::vector<NodeCopy>>> patterns = {
        {"all_to_all", {}}, {"one_to_all", {}}, {"all_to_one", {}}, {"ring", {}}};
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j)
        if (i != j) patterns[0].second.push_back({gpus[i], gpus[j], gpus[i]});
      if (i) patterns[1].second.push_back({gpus[0], gpus[i], gpus[0]}), patterns[2].second.push_back({gpus[i], gpus[0], gpus[i]});
      patterns[3].second.push_back({gpus[i], gpus[(i + 1) % n], gpus[i]});
    }
    if (n == 2) patterns.pop_back();  // a ring of two is the bidirectional pair
    for (auto& [name, copies] : patterns)
      out.push_back(node_copies(identity({{"family", "peer"}, {"backend", be}, {"op", name}},
                                         {{"engine", m == CopyMethod::sm ? "sm" : "ce"}, {"gpus", std::to_string(n)},
                                          {"bytes", std::to_string(pattern)}}),
                                std::move(copies), m, pattern));
  }
  for (std::size_t b : chains)
    for (int s : gpus)
      for (int t : gpus)
        if (s != t) out.push_back(latency(plan, s, t, b));
  if (plan.size == Size::full)
    for (int peer : d.peers)
      for (std::size_t b : sizes)
        if (!d.max_alloc || b <= d.max_alloc)
          for (Direction dir : {Direction::to_device, Direction::to_host})
            out.push_back(staged(be, self, peer, dir, b));
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(peer, build);

}  // namespace archbench
