// peer: bandwidth and latency between GPUs of one machine (where the device has peer copies: CUDA), what nvbandwidth and
// CUDA's p2pBandwidthLatencyTest measure. The GPU archbench runs on measures every pair it is
// part of, issuing everything itself (buffers on the peer, BufferSpec::peer); `--device=all` over the GPUs gives
// every ordered pair. Names peer/cuda/<variant>/src:S/dst:D/bytes:N, S and D CUDA ordinals:
//  ce_read, ce_write      the copy engine (cudaMemcpyPeerAsync) with peer access enabled: this
//                         GPU pulls from src (read: this GPU is dst) or pushes to dst (write)
//  ce_nop2p_read/_write   the same with peer access disabled: the driver stages through host
//                         memory (p2pBandwidthLatencyTest's "P2P=Disabled")
//  sm_read, sm_write      a copy kernel on this GPU loading from, or storing to, the peer's memory
//  ce_bidir, sm_bidir     both directions at once, half of the buffer each way on two streams
//                         (src is this GPU)
//  latency                one thread on this GPU (dst) chasing a random chain in src's memory
//                         (the latency family's kernel): ns_per_access
// Bytes: each byte moved counts once (bytes_written), as the bus family counts transfers.
// Fewer than two CUDA GPUs: one entry that skips with the reason.
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

// A copy between this GPU (`self`) and `peer`. The check sees this GPU's buffer as in[0]/out[0]
// and the peer's (buffers[1], on the peer) as in.back()/out.back().
Workload copy(const std::string& backend, int self, int peer, CopyMethod method, Direction dir, std::size_t bytes) {
  const bool sm = method == CopyMethod::sm;
  const std::string how = sm ? "sm" : method == CopyMethod::copy_engine ? "ce" : "ce_nop2p";
  const char* way = dir == Direction::to_device ? "_read" : dir == Direction::to_host ? "_write" : "_bidir";
  Workload w;
  const bool pull = dir == Direction::to_device;
  w.identify(pair_name(backend, how + way, pull ? peer : self, pull ? self : peer, bytes));
  if (sm) w.kernel = {"runtime", "archbench_copy", {}};  // what the backend launches (for the compile check)
  w.buffers = {{bytes, [bytes](Bytes& b) { fill_random(b, 0x9EE1 + bytes); }},
               {bytes, [bytes](Bytes& b) { fill_random(b, 0x9EE2 + 7 * bytes); }}};  // the peer's
  w.buffers[1].peer = peer;
  w.transfer = Transfer{{dir, HostMemory::pageable, method}, nullptr, true};
  w.cost.bytes_written = double(bytes);
  const std::size_t half = dir == Direction::both ? bytes / 2 : 0;
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    std::string e;
    if (dir != Direction::to_host) e = same(in.back(), out[0], 0, half ? half : bytes, every, t, "this GPU's buffer");
    if (e.empty() && dir != Direction::to_device)
      e = same(in[0], out.back(), half, bytes - half, every, t, "the peer's buffer");
    return e;
  };
  return w;
}

// One thread on this GPU walks a random single cycle over the cache lines of `bytes` of the
// peer's memory (the whole cycle every launch, as the latency family does).
Workload latency(const Plan& plan, int self, int peer, std::size_t bytes) {
  const std::size_t line = std::max<std::size_t>(plan.device.cacheline, 64), lines = bytes / line;
  const std::uint32_t hops = std::uint32_t(plan.size == Size::test ? 2 * lines + 3 : lines);
  Workload w;
  w.identify(pair_name(plan.device.backend, "latency", peer, self, bytes));
  w.kernel = {"latency", "chase", {}};  // the latency family's chase(chain, out, start, hops)
  w.range = Range::linear(1, 1);
  w.buffers = {{bytes, nullptr},       // this GPU's: the kernel stores the last index in its first word
               {bytes, [=](Bytes& b) { fill_chain(b, lines, line / 4, bytes); }}};  // the chain, on the peer
  w.buffers[1].peer = peer;
  w.args = {Arg::buf(1), Arg::buf(0), Arg::scalar<std::uint32_t>(0), Arg::scalar<std::uint32_t>(hops)};
  w.cost.accesses = hops;
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t, Cost& t) {
    const std::uint32_t want = follow_chain(in.back(), hops), got = get<std::uint32_t>(out[0], 0);
    t.accesses += hops;
    return want == got ? std::string() : "after " + std::to_string(hops) + " hops: expected index " +
                                             std::to_string(want) + ", got " + std::to_string(got);
  };
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  const DeviceInfo& d = plan.device;
  if (!d.peer_copies) return {};
  if (d.peers.empty()) {
    Workload w;
    w.identify(identity({{"family", "peer"}, {"backend", d.backend}, {"op", "pairs"}}, {{"gpus", "1"}}));
    w.skip = "the peer family needs two CUDA GPUs; this machine has one";
    return {w};
  }
  const int self = std::atoi(d.selector.substr(d.selector.find(':') + 1).c_str());
  std::vector<std::size_t> sizes, chains;
  if (plan.size == Size::test) {
    sizes = {std::size_t(64) << 10, std::size_t(1) << 20};
    chains = {std::size_t(64) << 10};
  } else if (plan.size == Size::quick) {
    sizes = {std::size_t(4) << 20, std::size_t(64) << 20, std::size_t(256) << 20};
    chains = {std::size_t(1) << 20, std::size_t(256) << 20};  // in the peer's L2; beyond it
  } else {
    for (std::size_t b = std::size_t(64) << 10; b <= (std::size_t(1) << 30); b *= 4) sizes.push_back(b);
    for (std::size_t b = std::size_t(64) << 10; b <= (std::size_t(256) << 20); b *= 4) chains.push_back(b);
  }
  std::vector<Workload> out;
  for (int peer : d.peers) {
    for (std::size_t b : sizes) {
      if (d.max_alloc && b > d.max_alloc) continue;
      for (CopyMethod m : {CopyMethod::copy_engine, CopyMethod::sm, CopyMethod::staged})
        for (Direction dir : {Direction::to_device, Direction::to_host, Direction::both})
          if (m != CopyMethod::staged || dir != Direction::both) out.push_back(copy(d.backend, self, peer, m, dir, b));
    }
    for (std::size_t b : chains) out.push_back(latency(plan, self, peer, b));
  }
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(peer, build);

}  // namespace archbench
