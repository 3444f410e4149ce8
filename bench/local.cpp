// local: local-memory read and write bandwidth against the stride between neighbouring
// work-items, the bank-conflict sweep of seed 002 section 2.3.2 (Figs. 20-21).
// Names: local/<backend>/read/stride:S and local/<backend>/write/stride:S, S = 1..32
// (full: 1..64). See kernels/opencl/local.cl for the addressing.
//
// What the cost counts: the strided local-memory accesses, 4 bytes each (and the read
// kernel's add of each word, a flop), because that
// is the bandwidth the figure is about. Left out on purpose, so that byte_per_s is local
// bandwidth and not a blend: the coalesced fill of the local array (WORDS global reads and
// WORDS local writes per group, twice that on CUDA, whose read kernel lays the array out twice:
// kernels/cuda/local.cu), the copy-out of the write kernel (WORDS local reads and WORDS global
// writes per group) and the read kernel's one 4-byte result per work-item.
// Per group that is at most 3*WORDS words against wg*16*LOOPS strided words: under 1% on a
// CPU and under 0.2% on a GPU at the quick size (it is large only at the tiny test size).
// The references tally exactly the strided accesses they replay, so the tally equals the cost.
// The H100 executes exactly these flops in fp32 (issue 17); the 2 fp16 'flops' a work-item it
// also counts are ptxas' HFMA2.MMA moves of constants, no arithmetic (archbench/traffic.py, MOVES).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

constexpr std::uint32_t kStep = 32;  // words between the accesses of a work-item (local.cl STEP)

struct Geometry {
  std::size_t wg = 1, groups = 1;
  std::uint32_t words = 4096;  // local array, a power of two
  int loops = 1;               // trips of 16 accesses
  std::string skip;
  std::size_t items() const { return wg * groups; }
  std::uint32_t accesses() const { return 16u * std::uint32_t(loops); }
};

Geometry geometry(const Plan& plan) {
  const DeviceInfo& d = plan.device;
  Geometry g;
  // 256 work-items where the device allows (a power of two, so warps are whole).
  const std::size_t cap = std::min<std::size_t>(256, std::max<std::size_t>(d.max_work_group, 1));
  while (g.wg * 2 <= cap) g.wg *= 2;
  // 16 KiB, or less so that the array takes at most half of the device's local memory.
  while (g.words > 64 && std::uint64_t(g.words) * 4 * 2 > d.local_mem) g.words /= 2;
  if (std::uint64_t(g.words) * 4 > d.local_mem)
    g.skip = "the device has " + std::to_string(d.local_mem) + " bytes of local memory; the sweep needs " +
             std::to_string(g.words * 4);
  const std::size_t cus = std::max<unsigned>(d.compute_units, 1);
  if (plan.size == Size::test) {
    // 10 trips: at the default 4096 words one whole period of CUDA's unmasked read loop (8 trips)
    // and 2 of its masked remainder, so that the conformance test checks both.
    g.groups = 2;
    g.loops = 10;
  } else if (d.is_gpu) {
    // About a millisecond at stride 1 on a large GPU (tens of TB/s of shared memory), in few long
    // groups: a group's fill of the array from global memory (latency-bound, before its
    // barrier) is time its SM reads no shared memory unless another group reads meanwhile
    // (CUDA's read kernel holds all 4 groups an SM at once: kernels/cuda/local.cu). 4096 trips,
    // the most that keeps the write kernel's values exact at 256 work-items: 33.10 TB/s on an
    // H200, 99% of its 33.45 limit.
    g.groups = cus * 4;
    g.loops = 4096;
  } else {
    // A few milliseconds on a CPU, where local memory is ordinary cached memory.
    g.groups = cus * 4;
    g.loops = 256;
  }
  // The write kernel's values k*wg + l must be exact floats.
  if (std::uint64_t(g.accesses()) * g.wg > (1u << 24)) g.skip = "too many accesses per work-item for exact float values";
  return g;
}

// Word of access k (0-based over the whole loop) of the work-item with local id l.
inline std::uint32_t word(std::uint32_t l, std::uint32_t k, std::uint32_t stride, std::uint32_t mask) {
  return (l * stride + k * kStep) & mask;
}

Workload read(const Plan& plan, std::uint32_t stride) {
  const DeviceInfo& d = plan.device;
  const Geometry g = geometry(plan);
  const std::size_t items = g.items(), wg = g.wg;
  const std::uint32_t words = g.words, mask = words - 1, K = g.accesses();
  Workload w;
  w.identify(identity({{"family", "local"}, {"backend", d.backend}, {"op", "read"}}, {{"stride", std::to_string(stride)}}));
  w.kernel = {"local", "local_read", {{"WORDS", std::to_string(words)}, {"LOOPS", std::to_string(g.loops)}}};
  w.range = Range::linear(items, wg);
  // WORDS distinct floats in [1, 2): the top mantissa bits are the word index, the low ones
  // random, so the sum a work-item stores identifies the words it read (and their order).
  int bits = 0;
  while ((1u << bits) < words) ++bits;
  const int low = 23 - bits;
  w.buffers = {{words * 4ull,
                [=](Bytes& b) {
                  Rng r(0x10ca1 + words);
                  for (std::uint32_t i = 0; i < words; ++i) {
                    const std::uint32_t mant = (i << low) | std::uint32_t(r.next() & ((1u << low) - 1));
                    put<float>(b, i, 1.0f + float(mant) * 0x1.0p-23f);
                  }
                }},
               {items * 4, nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar<std::uint32_t>(stride)};
  // And the add of each word read into the work-item's sum (one flop a read; the hardware
  // counts them: issue 17's agreement table).
  w.cost = {double(items) * K, 0, double(items) * K * 4, 0, 0};
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    for (std::size_t gid = 0; gid < items; gid += every) {
      const std::uint32_t l = std::uint32_t(gid % wg);
      float sum = 0;
      for (std::uint32_t k = 0; k < K; ++k) sum += get<float>(in[0], word(l, k, stride, mask));
      const float got = get<float>(out[1], gid);
      if (got != sum)
        return differs(gid, sum, got) + " (sum of the " + std::to_string(K) + " words work-item " +
               std::to_string(gid) + " reads from local memory)";
      t.bytes_read += K * 4.0;
      t.flops += K;
    }
    return std::string();
  };
  w.skip = g.skip;
  return w;
}

Workload write(const Plan& plan, std::uint32_t stride) {
  const DeviceInfo& d = plan.device;
  const Geometry g = geometry(plan);
  const std::size_t items = g.items(), wg = g.wg;
  const std::uint32_t words = g.words, mask = words - 1, K = g.accesses();
  const std::uint32_t period = words / kStep;  // a work-item revisits a word every `period` accesses
  Workload w;
  w.identify(identity({{"family", "local"}, {"backend", d.backend}, {"op", "write"}}, {{"stride", std::to_string(stride)}}));
  w.kernel = {"local", "local_write", {{"WORDS", std::to_string(words)}, {"LOOPS", std::to_string(g.loops)}}};
  w.range = Range::linear(items, wg);
  w.buffers = {{g.groups * words * 4ull, nullptr}};
  w.args = {Arg::buf(0), Arg::scalar<std::uint32_t>(stride)};
  w.cost = {0, 0, 0, double(items) * K * 4, 0};
  w.check = [=](const std::vector<Bytes>&, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    // Which words some work-item of a group writes: the others must keep the sentinel.
    std::vector<char> written(words, 0);
    for (std::uint32_t l = 0; l < wg; ++l)
      for (std::uint32_t k = 0; k < std::min(K, period); ++k) written[word(l, k, stride, mask)] = 1;
    // Whether `v` may be in word `a` after the kernel: the sentinel where nobody writes,
    // else the value k2*wg + l2 of a work-item l2 whose access k2 is at `a` and is its last
    // one there (a work-item's own later write to the same word replaces it).
    auto legitimate = [&](std::uint32_t a, float v) {
      if (v == -1.0f) return !written[a];
      if (!(v >= 0.0f) || v >= float(std::uint64_t(K) * wg) || v != std::floor(v)) return false;
      const std::uint32_t value = std::uint32_t(v), l2 = value % wg, k2 = value / wg;
      return word(l2, k2, stride, mask) == a && k2 + period >= K;
    };
    auto where = [&](std::size_t group, std::uint32_t a, float v) {
      return "group " + std::to_string(group) + ", local word " + std::to_string(a) + " holds " + std::to_string(v) +
             ", which is not what the last work-item to write there wrote" +
             (written[a] ? "" : " (no work-item writes there: it should hold the sentinel -1)");
    };
    std::size_t checked_group = items;  // none yet
    for (std::size_t gid = 0; gid < items; gid += every) {
      const std::size_t group = gid / wg;
      const std::uint32_t l = std::uint32_t(gid % wg);
      const std::size_t base = group * words;
      // Every word of this group's array: written ones by a legitimate writer, the rest untouched.
      if (group != checked_group) {
        for (std::uint32_t a = 0; a < words; ++a)
          if (const float v = get<float>(out[0], base + a); !legitimate(a, v)) return where(group, a, v);
        checked_group = group;
      }
      // The words this work-item writes, access by access.
      for (std::uint32_t k = 0; k < K; ++k) {
        const std::uint32_t a = word(l, k, stride, mask);
        if (const float v = get<float>(out[0], base + a); !legitimate(a, v) || v == -1.0f)
          return "work-item " + std::to_string(gid) + ", access " + std::to_string(k) + ": " + where(group, a, v);
      }
      t.bytes_written += K * 4.0;
    }
    return std::string();
  };
  w.skip = g.skip;
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  std::vector<Workload> out;
  const std::uint32_t top = plan.size == Size::full ? 64 : 32;
  for (bool is_write : {false, true})
    for (std::uint32_t s = 1; s <= top; ++s) out.push_back(is_write ? write(plan, s) : read(plan, s));
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(local, build);

}  // namespace archbench
