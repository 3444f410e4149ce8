// flops: the flops-per-element sweep of seed 001 section 5 (seed 000 section IV), the
// compute side of an empirical roofline: each work-item loads elements of T, applies N flops
// to each (N = 1: one multiply; N >= 2: N/2 dependent fma(x, a, b), a and b runtime) and
// stores them back, so the arithmetic intensity is AI = N / (2 sizeof(T)) FLOP/byte, swept by
// powers of two from 1/8 to 1024 FLOP/byte (float: N = 1..8192, double: N = 2..16384).
// Names: flops/<backend>/<dram|cache>/<float|double>/flops:N. Counters: flop_per_s and
// byte_per_s from the cost. (half is not built yet.)
//
// Geometry (kernels/opencl/flops.cl): 16 independent elements per work-item (instruction-
// level parallelism, as the compute family's 16 chains), work-group g owning a contiguous
// slice of wg x 16 elements, updated in place `passes` times.
//  - dram: one pass over an array of at least 4x the last-level cache (like memory's stream
//    arrays), so every element comes from and goes back to device memory. On a CPU the array
//    is cut for the high-N points to keep a launch near 3e8 flops (those points are compute
//    bound: where the data sits no longer matters there), never below one slice per group.
//  - cache (kernel flops_cache): a few work-groups per compute unit (GPU: 4, 64 KiB of float
//    per SM), each re-reading its own small slice `passes` times inside the kernel (the reuse
//    of the cache family), so the data stays in L1 (a CPU: the core's L1/L2). The passes only
//    read: each chain accumulates in a register (N = 1: one add; N >= 2: the first fma takes
//    the accumulator as its addend) and the accumulators are stored once, because in-place
//    stores would go through to L2 on NVIDIA (write-through L1) and bound every pass by L2
//    writes. AI = N / sizeof(T) per pass (float: 1/4 .. 2048); `passes` is chosen for about
//    1 ms a launch on a GPU, a few ms on a CPU.
// Cost per launch: flops = N x elements x passes; dram: bytes_read = bytes_written = sizeof(T)
// x elements; cache: bytes_read = sizeof(T) x elements x passes, bytes_written = sizeof(T) x
// elements. The references replay the same chains with std::fma in the same order and compare
// bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

constexpr std::size_t kChains = 16;  // flops.cl CHAINS

struct Geometry {
  std::size_t wg = 1, groups = 1;
  std::uint32_t passes = 1;
  std::size_t elements() const { return wg * groups * kChains; }
};

template <class T>
Geometry geometry(const Plan& plan, bool cache, std::uint32_t n_flops) {
  const DeviceInfo& d = plan.device;
  const std::size_t cus = std::max<unsigned>(d.compute_units, 1);
  const bool test = plan.size == Size::test;
  const double s = sizeof(T);
  Geometry g;
  const std::size_t cap = std::min<std::size_t>(test ? 64 : 256, std::max<std::size_t>(d.max_work_group, 1));
  while (g.wg * 2 <= cap) g.wg *= 2;
  const std::size_t slice = g.wg * kChains;
  if (!cache) {
    if (test) {
      g.groups = 4;
      return g;
    }
    // At least 4x the last-level cache, a power of two, within what the device allows.
    std::size_t bytes = std::size_t(64) << 20;
    while (bytes < 4 * d.cache_size) bytes *= 2;
    while (bytes > (std::size_t(16) << 20) && (bytes > d.max_alloc || bytes > d.global_mem / 4)) bytes /= 2;
    std::size_t n = bytes / sizeof(T);
    if (!d.is_gpu) n = std::min<std::size_t>(n, std::size_t(3e8 / n_flops));
    g.groups = std::max<std::size_t>(n / slice, 1);
    return g;
  }
  g.groups = test ? 2 : d.is_gpu ? cus * 4 : cus * 2;
  if (test) {
    g.passes = 3;
    return g;
  }
  // Rough rates (per compute unit and clock) to pick the passes for the target launch time.
  const double hz = (d.max_clock_mhz ? d.max_clock_mhz : 2000) * 1e6;
  const double flop_rate = cus * hz * (d.is_gpu ? 256.0 : 16.0) * (sizeof(T) == 8 ? 0.5 : 1.0);
  const double byte_rate = cus * hz * (d.is_gpu ? 64.0 : 3.0);
  const double per_pass = std::max(g.elements() * s / byte_rate, double(g.elements()) * n_flops / flop_rate);
  const double seconds = d.is_gpu ? 1e-3 : 4e-3;
  g.passes = std::uint32_t(std::clamp(std::round(seconds / per_pass), 1.0, 1e6));
  return g;
}

template <class T>
Workload flops(const Plan& plan, bool cache, const char* tname, std::uint32_t n_flops) {
  const Geometry g = geometry<T>(plan, cache, n_flops);
  const std::size_t n = g.elements();
  const std::uint32_t steps = n_flops / 2, passes = g.passes;
  // N = 1: x * -1 (exact, and the values stay put however many launches run); fma: x -> 1.
  const T a = steps == 0 ? T(-1) : T(0.75), b = T(0.25);
  const bool dbl = std::is_same_v<T, double>;
  Workload w;
  w.identify(identity({{"family", "flops"}, {"backend", plan.device.backend}, {"source", cache ? "cache" : "dram"}, {"type", tname}},
                      {{"flops", std::to_string(n_flops)}}));
  w.kernel = {"flops", cache ? "flops_cache" : "flops",
              {{"T", tname}, {"IS_DOUBLE", dbl ? "1" : "0"}, {"CHAINS", std::to_string(kChains)}}};
  w.range = Range::linear(g.wg * g.groups, g.wg);
  w.buffers = {{n * sizeof(T), [](Bytes& buf) { fill_uniform<T>(buf, 0xf10b5, 1.0, 2.0); }}};
  w.args = {Arg::buf(0), Arg::scalar(a), Arg::scalar(b), Arg::scalar(steps), Arg::scalar(passes),
            Arg::scalar(std::uint32_t(1))};
  const double sz = sizeof(T);
  const Cost per{double(n_flops) * passes, 0, sz * passes, cache ? sz : sz * passes, 0};  // per element
  w.cost = per * double(n);
  const std::size_t wg = g.wg;
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    // The tally counts what the replay does: one load and one store of sizeof(T) per pass
    // (dram: in place) or a load per pass and one store (cache), a multiply or add as one flop,
    // an fma as two.
    Cost done;
    for (std::size_t i = 0; i < n; i += every) {
      T x;
      if (!cache) {  // element i, updated in place each pass
        x = get<T>(in[0], i);
        for (std::uint32_t p = 0; p < passes; ++p) {
          done.bytes_read += sizeof(T);
          if (steps == 0) x = x * a, done.flops += 1;
          for (std::uint32_t k = 0; k < steps; ++k) x = std::fma(x, a, b), done.flops += 2;
          done.bytes_written += sizeof(T);
        }
      } else {  // element i = chain c of its work-item: the accumulator over the rotated loads
        const std::size_t slice = wg * kChains, base = i / slice * slice, c = i % slice / wg, l = i % wg;
        x = T(0);
        for (std::uint32_t p = 0; p < passes; ++p) {
          const T v = get<T>(in[0], base + (c + p) % kChains * wg + l);
          done.bytes_read += sizeof(T);
          if (steps == 0) {
            x = x + v, done.flops += 1;
          } else {
            T y = std::fma(v, a, x);
            for (std::uint32_t k = 1; k < steps; ++k) y = std::fma(y, a, b);
            x = y, done.flops += 2.0 * steps;
          }
        }
        done.bytes_written += sizeof(T);
      }
      if (const T got = get<T>(out[0], i); got != x)
        return differs(i, double(x), double(got)) + " (element " + std::to_string(i) + " after " +
               std::to_string(passes) + " passes of " + std::to_string(n_flops) + " flops)";
    }
    t += done;
    return std::string();
  };
  if (dbl && !plan.device.fp64) w.skip = "the device has no fp64 (cl_khr_fp64)";
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  std::vector<Workload> out;
  const bool test = plan.size == Size::test;
  for (bool cache : {false, true}) {
    // AI = N / (2 sizeof(T)): 1/8 .. 1024 FLOP/byte; at the test size a low, a mid and a high point.
    for (std::uint32_t n = 1; n <= 8192; n *= 2)
      if (!test || n == 1 || n == 2 || n == 64) out.push_back(flops<float>(plan, cache, "float", n));
    for (std::uint32_t n = 2; n <= 16384; n *= 2)
      if (!test || n == 2 || n == 64) out.push_back(flops<double>(plan, cache, "double", n));
  }
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(flops, build);

}  // namespace archbench
