// parallelism: instruction- against thread-level parallelism (seed 001 section 5.2, Fig. 4):
// fma throughput as a function of the independent chains each work-item runs (explicit ILP,
// the seed's unrolling) and of the work-items each compute unit holds (TLP, the seed's
// threads per core; on a GPU, warps per SM).
// Names: parallelism/<backend>/fma/chains:C/threads:T, C = 1, 2, 4, 8, 16 chains, T work-items
// per compute unit (GPU: 32 to 2048, one warp to a full Hopper SM; CPU: 1 to 64), the launch
// compute units x T work-items in groups of min(T, 256). Full sweep only.
//
// Work: every work-item does the same 2^16 (GPU) or 2^14 (CPU) fmas whatever C, split into C
// chains of iters = N / C dependent steps x = fma(x, a, b) (a, b runtime scalars, one rounding:
// the host's std::fma replays them bit for bit), then sums its chains and stores the sum.
// So at a fixed T the time falls with C only as far as the chains hide the fma latency, and
// at a fixed C with T only as far as more threads hide it: the seed's two axes on one grid.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

constexpr float kA = 0.999f, kB = 0.0015f;  // fixed point b / (1 - a) = 1.5: never overflows

Workload fma_grid(const Plan& plan, int chains, std::size_t threads) {
  const DeviceInfo& d = plan.device;
  const bool test = plan.size == Size::test;
  const std::size_t cus = test ? 2 : std::max<unsigned>(d.compute_units, 1);
  const std::size_t items = cus * threads, local = std::min<std::size_t>({threads, 256, d.max_work_group});
  const std::uint32_t per_item = test ? 48 : d.is_gpu ? 1u << 16 : 1u << 14, iters = per_item / chains;
  Workload w;
  w.identify(identity({{"family", "parallelism"}, {"backend", d.backend}, {"op", "fma"}},
                      {{"chains", std::to_string(chains)}, {"threads", std::to_string(threads)}}));
  w.kernel = {"parallelism", "fma_chains", {{"CHAINS", std::to_string(chains)}}};
  w.range = Range::linear(items, local);
  w.buffers = {{items * chains * 4, [](Bytes& b) { fill_uniform<float>(b, 0x11f, 1.0, 2.0); }}, {items * 4, nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar(kA), Arg::scalar(kB), Arg::scalar(iters)};
  w.cost.flops = (2.0 * chains * iters + (chains - 1)) * items;
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    for (std::size_t g = 0; g < items; g += every) {
      float sum = 0;
      for (int c = 0; c < chains; ++c) {
        float x = get<float>(in[0], g + c * items);
        for (std::uint32_t i = 0; i < iters; ++i, t.flops += 2) x = std::fma(x, kA, kB);
        sum = c == 0 ? x : sum + x;  // the kernel's order: ((x0 + x1) + x2) + ...
        if (c) t.flops += 1;
      }
      const float got = get<float>(out[1], g);
      if (std::memcmp(&sum, &got, 4) != 0) return differs(g, sum, got) + " (work-item " + std::to_string(g) + ")";
    }
    return std::string();
  };
  if (local && threads % local) w.skip = "the device's work-group limit does not divide " + std::to_string(threads);
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  std::vector<Workload> out;
  if (plan.size == Size::quick) return out;
  const bool test = plan.size == Size::test;
  std::vector<std::size_t> threads;
  if (test) threads = {1, 32};
  else if (plan.device.is_gpu) threads = {32, 64, 128, 256, 512, 1024, 2048};
  else threads = {1, 2, 4, 8, 16, 32, 64};
  for (int chains : {1, 2, 4, 8, 16})
    for (std::size_t t : threads) out.push_back(fma_grid(plan, chains, t));
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(parallelism, build);

}  // namespace archbench
