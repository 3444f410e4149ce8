// scalability: vector add over a fixed array against the number of work-items
// (seed 002 section 2.5, formula 3, Fig. 25). Work-item gid adds the s = length / N
// consecutive floats from gid * s; the work-group size is the seed's rule
// (seed_local_size). The counter `speedup` is the time of items:1 over the time of
// items:N in the same run.
//
// Array size: the seed says "the total size of arrays a, b and c are fixed as 1024*1024*64
// bytes". We read it as each array being 64 MiB (16 Mi floats, 192 MiB in all): a third of
// 64 MiB is not a whole number of floats, nor divisible by the seed's power-of-two
// work-item counts, while 2^24 floats are, for every N up to one float per work-item.
// items:1 is one thread walking 192 MiB: ~5 ms on 2 PoCL cores; on an H100 we expect a few
// hundred ms (an L1 hit per float and an HBM miss per 128-byte line, in order), and it runs
// about six times per quick run (check, warm-up, sizing, three repetitions): a few seconds.
#include <cstdint>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

Workload vector_add(const Plan& plan, std::size_t length, std::size_t N, const std::string& baseline) {
  const DeviceInfo& d = plan.device;
  const std::size_t s = length / N;
  Workload w;
  w.identify(identity({{"family", "scalability"}, {"backend", d.backend}, {"op", "vector_add"}}, {{"items", std::to_string(N)}}));
  w.kernel = {"scalability", "vector_add", {}};
  w.range = Range::linear(N, seed_local_size(d, N));
  auto arr = [length](std::uint64_t seed) {
    return BufferSpec{length * 4, [seed](Bytes& b) { fill_uniform<float>(b, seed, 1.0, 2.0); }};
  };
  w.buffers = {arr(31), arr(32), {length * 4, nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1), Arg::buf(2), Arg::scalar<std::uint32_t>(static_cast<std::uint32_t>(s))};
  w.cost = {double(length), 0, 8.0 * length, 4.0 * length, 0};
  w.relative = Relative{baseline, "speedup"};
  // An item is a work-item: each checked work-item's whole run is recomputed.
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& tally) {
    for (std::size_t g = 0; g < N; g += every) {
      for (std::size_t i = g * s; i < (g + 1) * s; ++i) {
        const float want = get<float>(in[0], i) + get<float>(in[1], i), got = get<float>(out[2], i);
        if (got != want) return differs(i, want, got) + " (work-item " + std::to_string(g) + ")";
      }
      tally += Cost{double(s), 0, 8.0 * s, 4.0 * s, 0};
    }
    return std::string();
  };
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  // Test: 16 KiB per array. Otherwise the seed's 64 MiB per array (see above).
  const std::size_t length = plan.size == Size::test ? (std::size_t(1) << 12) : (std::size_t(1) << 24);
  // From one work-item to one per float (the seed stops at 65536); quick steps by 4x.
  const std::size_t step = plan.size == Size::full ? 2 : 4;
  std::vector<Workload> out;
  // items:1 is its own baseline (speedup 1), so that every row has the counter.
  const std::string base =
      identity({{"family", "scalability"}, {"backend", plan.device.backend}, {"op", "vector_add"}}, {{"items", "1"}}).name;
  for (std::size_t N = 1; N <= length; N *= step) out.push_back(vector_add(plan, length, N, base));
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(scalability, build);

}  // namespace archbench
