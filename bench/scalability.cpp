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
//
// The host baseline (full sweep): scalability/<backend>/host_threads/threads:N, the same
// vector add over the same arrays (in host memory) on N plain std::threads, thread g adding
// the s = length / N consecutive floats from g * s, N = 1 to 64; timed by the host clock
// around the threads' start and join (what a host caller of such a loop waits for), a Step
// of host work as seed 001's reuse study has. Its `speedup` is over threads:1 of the same
// run, and its times sit beside the device's items:N on one chart.
#include <algorithm>
#include <cstdint>
#include <thread>

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

Workload host_threads(const Plan& plan, std::size_t length, std::size_t N, const std::string& baseline) {
  const std::size_t s = length / N;
  Workload w;
  w.identify(identity({{"family", "scalability"}, {"backend", plan.device.backend}, {"op", "host_threads"}},
                      {{"threads", std::to_string(N)}}));
  // One host buffer: a, b (the device's arrays, same seeds), then c (poisoned).
  w.buffers = {{3 * length * 4, [length](Bytes& b) {
                  for (std::uint64_t seed : {31, 32}) {
                    Bytes part(length * 4);
                    fill_uniform<float>(part, seed, 1.0, 2.0);
                    std::copy(part.begin(), part.end(), b.begin() + (seed - 31) * length * 4);
                  }
                }}};
  w.buffers[0].host = HostMemory::pageable;
  Step add;
  add.buffer = 0;
  add.host = [length, N, s](void* data, std::size_t) {
    const float* a = static_cast<const float*>(data);
    const float* b = a + length;
    float* c = static_cast<float*>(data) + 2 * length;
    std::vector<std::thread> threads;
    for (std::size_t g = 0; g < N; ++g)
      threads.emplace_back([=] {
        for (std::size_t i = g * s; i < (g + 1) * s; ++i) c[i] = a[i] + b[i];
      });
    for (std::thread& t : threads) t.join();
  };
  w.steps = {add};
  w.timing = Timing::round_trip;
  w.cost = {double(length), 0, 8.0 * length, 4.0 * length, 0};
  w.relative = Relative{baseline, "speedup"};
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& tally) {
    for (std::size_t g = 0; g < N; g += every) {
      for (std::size_t i = g * s; i < (g + 1) * s; ++i) {
        const float want = get<float>(in[0], i) + get<float>(in[0], length + i), got = get<float>(out[0], 2 * length + i);
        if (got != want) return differs(i, want, got) + " (host thread " + std::to_string(g) + ")";
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
  if (plan.size == Size::quick) return out;
  const std::string host_base =
      identity({{"family", "scalability"}, {"backend", plan.device.backend}, {"op", "host_threads"}}, {{"threads", "1"}}).name;
  for (std::size_t N : plan.size == Size::test ? std::vector<std::size_t>{1, 4} : std::vector<std::size_t>{1, 2, 4, 8, 16, 32, 64})
    out.push_back(host_threads(plan, length, N, host_base));
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(scalability, build);

}  // namespace archbench
