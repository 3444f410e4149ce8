// cache: read and read-modify-write bandwidth over working sets from 4 KiB to 8x the
// last-level cache (at least 256 MiB, within max_alloc), for the memory ceilings of an
// empirical roofline (seed 001 sections 4-5, its GPU "Kernel A"; seed 000 section II).
// Names: cache/<backend>/read/bytes:N and cache/<backend>/rmw/bytes:N, N the working set as
// run (requested sizes are rounded down to whole slices); one point per octave (quick), four
// per octave (full).
//
// read: each work-group sweeps a window of min(working set, W) bytes starting at its own
// offset (g * (working set / groups)) mod (working set - window + 1), so windows never wrap,
// `reps` times inside the kernel. W is
// 128 KiB on a GPU (within an SM's L1) and 16 KiB on a CPU (within a core's L1d). A compute
// unit's footprint is then the working set itself up to W (every group reads all of it: the
// L1 plateau), its groups' windows beyond that (misses L1: the last-level cache's plateau while
// the whole set fits it), and device memory once the set exceeds the last-level cache. (Cutting
// the set into one slice per group instead shrinks each compute unit's share with the number of
// groups, so on a 132-SM GPU the set stays in L1 up to ~30 MB and L2 hardly shows.)
//
// rmw (kernels/opencl/cache.cl): the working set is cut into `slices` contiguous
// slices; a fixed number of work-groups (enough to fill the device) each sweep one slice
// `reps` times inside the kernel, coalesced 16-byte loads, so the reuse is inside a
// work-group and each compute unit keeps re-reading its own share: while that share fits in
// L1 the rate is L1's, while the whole set fits the last-level cache it is that cache's, and
// beyond that it is device memory's. A slice holds at least one vector per work-item (wg x 16
// bytes); when the working set is smaller than groups x that, there are fewer slices than
// work-groups and group g sweeps slice g % slices (several groups, mostly on different compute
// units, share a slice), so that small sets still keep every compute unit busy.
// `reps` is chosen so that a launch lasts about 0.75 ms on a GPU (from a rough rate for the
// level the set should sit in) and a few ms on a CPU.
//
// Cost: the bytes the kernel asks for, every group's sweeps counted (shared slices included):
// read: groups x slice x reps bytes read (plus nothing for the one uint stored per work-item,
// left out so that byte_per_s is the sweep's bandwidth; it is under 1/16 of the reads per rep);
// rmw: the same read and the same written.
// References (exact, integer data): read replays each work-item's loads and compares its
// wrapping uint sum; rmw replays x = x * a + b per pass. Where groups share a slice their rmw
// passes race (no order between work-groups): the host then uses a = 1, b = 1 and accepts any
// x0 + m with 1 <= m <= sharers x reps (each stored value is one more than some value read),
// and exactness only where a slice has one owner.
//
// Seed 001 section 4's three GPU kernels over working set (full sweep, one point per octave):
// kernel A is rmw above (trials inside the kernel); B, cache/<backend>/trial/block:K/bytes:N,
// one launch per trial (the reuse outside the kernel: each launch's grid strides over the set
// once, x = x * a + b); C, cache/<backend>/shared/block:K/bytes:N, the reuse through local
// (shared) memory (each group's slice a tile at a time: loaded, reps passes there, stored; see
// shared() and cache.cl). The block axis: the seed's grids of 224 blocks of 32 or 64 threads
// (K = 32x224, 64x224; kernel A too: cache/<backend>/rmw/block:K/bytes:N) and the device's
// best (K = best: kernel A's own block; A's series at it keeps its name without the axis).
// Flops: none (integer kernels). The fp16 'flops' the H100 counts in cache_rmw (2 a vector and 2 a
// work-item) are ptxas' HFMA2.MMA moves in its unrolled loop, no arithmetic (archbench/traffic.py, MOVES).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

constexpr std::size_t kVec = 16;  // bytes per load (uint4)

struct Geometry {
  std::size_t wg = 1, groups = 1, slices = 1, slice_vecs = 1;
  std::size_t win_vecs = 1, step = 0;  // read: each group's window and the offset between groups
  std::uint32_t reps = 1;
  std::size_t bytes() const { return slices * slice_vecs * kVec; }
  // Groups that sweep slice s.
  std::size_t sharers(std::size_t s) const { return groups / slices + (s < groups % slices ? 1 : 0); }
};

// A launch's blocks: work-group size and count. The device's best (what kernel A has always
// run: 256 work-items, 8 groups per compute unit on a GPU, 4 on a CPU) or the seed's fixed
// grids of 224 blocks of 32 or 64 threads (`seed_threads`).
struct Block {
  std::size_t wg = 1, groups = 1;
  std::string name;  // the block axis' value: "32x224", "64x224", "best"
};

Block block(const Plan& plan, std::size_t seed_threads = 0) {
  const DeviceInfo& d = plan.device;
  const bool test = plan.size == Size::test;
  Block b;
  if (seed_threads) {
    b.wg = std::min<std::size_t>(seed_threads, std::max<std::size_t>(d.max_work_group, 1));
    b.groups = test ? 8 : 224;
    b.name = std::to_string(seed_threads) + "x224";
    return b;
  }
  const std::size_t cap = std::min<std::size_t>(test ? 64 : 256, std::max<std::size_t>(d.max_work_group, 1));
  while (b.wg * 2 <= cap) b.wg *= 2;
  const std::size_t cus = std::max<unsigned>(d.compute_units, 1);
  b.groups = test ? 8 : d.is_gpu ? cus * 8 : cus * 4;
  b.name = "best";
  return b;
}

Geometry geometry(const Plan& plan, std::size_t want, bool rmw, const Block& blk) {
  const DeviceInfo& d = plan.device;
  const std::size_t cus = std::max<unsigned>(d.compute_units, 1);
  const bool test = plan.size == Size::test;
  Geometry g;
  g.wg = blk.wg;
  g.groups = blk.groups;
  const std::size_t vecs = std::max(want / kVec, g.wg);
  g.slices = std::clamp<std::size_t>(vecs / g.wg, 1, g.groups);
  g.slice_vecs = vecs / g.slices / g.wg * g.wg;
  // The read's windows: the same working set (whole slices), a window of at most W bytes.
  const std::size_t window_cap = (test ? 2 : d.is_gpu ? 128 : 16) << 10;
  g.win_vecs = std::max<std::size_t>(std::min(g.bytes(), window_cap) / kVec / g.wg * g.wg, g.wg);
  g.step = g.bytes() / kVec / g.groups;
  if (test) {
    g.reps = 3;
    return g;
  }
  // A rough rate for where the set should sit, and the bytes a launch should move.
  const double set = double(g.bytes());
  double rate, seconds;
  if (d.is_gpu) {
    const double l1 = rmw ? double(cus) * (128 << 10) : double(128 << 10);  // read: one window
    rate = set <= l1 ? 25e12 : set <= 0.75 * double(d.cache_size) ? 8e12 : 3e12;
    seconds = 0.75e-3;
  } else {
    const double l1 = rmw ? double(cus) * (256 << 10) : double(16 << 10);
    rate = set <= l1 ? 30e9 : set <= double(d.cache_size) ? 8e9 : 4e9;
    seconds = 3e-3;
  }
  const double per_rep = double(g.groups) * (rmw ? 2.0 * g.slice_vecs : double(g.win_vecs)) * kVec;
  g.reps = std::uint32_t(std::clamp(std::round(rate * seconds / per_rep), 1.0, 1e6));
  return g;
}

Workload read(const Plan& plan, const Geometry& g) {
  Workload w;
  const std::size_t items = g.groups * g.wg, nk = g.win_vecs / g.wg, wg = g.wg;
  const std::size_t vecs = g.bytes() / kVec;
  const std::size_t span = vecs - g.win_vecs + 1;  // window starts: a window never wraps
  const std::uint32_t sp = std::uint32_t(span), win = std::uint32_t(g.win_vecs), step = std::uint32_t(g.step),
                      reps = g.reps;
  w.identify(identity({{"family", "cache"}, {"backend", plan.device.backend}, {"op", "read"}}, {{"bytes", std::to_string(g.bytes())}}));
  w.kernel = {"cache", "cache_read", {{"WG", std::to_string(g.wg)}}};
  w.range = Range::linear(items, g.wg);
  w.buffers = {{g.bytes(), [](Bytes& b) { Rng r(0xcac4e); for (std::size_t i = 0; i < b.size() / 4; ++i) put<std::uint32_t>(b, i, std::uint32_t(r.next() >> 40)); }},
               {items * 4, nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar(sp), Arg::scalar(win), Arg::scalar(step), Arg::scalar(reps)};
  const double per_item = double(reps) * nk * kVec;
  w.cost.bytes_read = per_item * items;
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    for (std::size_t gid = 0; gid < items; gid += every) {
      const std::size_t start = (gid / wg) * std::size_t(step) % span, l = gid % wg;
      std::uint32_t once = 0;  // the lanes of one sweep; reps sweeps add it reps times
      double loaded = 0;       // bytes of one sweep, as replayed
      for (std::size_t k = 0; k < nk; ++k) {
        const std::size_t v = start + l + k * wg;
        for (int lane = 0; lane < 4; ++lane) once += get<std::uint32_t>(in[0], v * 4 + lane), loaded += 4;
      }
      const std::uint32_t want = once * reps, got = get<std::uint32_t>(out[1], gid);
      if (got != want)
        return differs(gid, want, got) + " (wrapping sum of the lanes work-item " + std::to_string(gid) + " loaded)";
      t.bytes_read += loaded * reps;
    }
    return std::string();
  };
  return w;
}

// The name of a workload of this family: kernel A's read and rmw at the best block keep their
// names of old; other blocks and kernels B and C name their block.
Identity name_of(const Plan& plan, const std::string& op, const Block& blk, std::size_t bytes) {
  Axes keyed = {{"bytes", std::to_string(bytes)}};
  if (blk.name != "best" || op == "trial" || op == "shared") keyed.insert(keyed.begin(), {"block", blk.name});
  return identity({{"family", "cache"}, {"backend", plan.device.backend}, {"op", op}}, keyed);
}

Workload rmw(const Plan& plan, const Geometry& g, const Block& blk) {
  Workload w;
  const std::size_t vecs = g.slices * g.slice_vecs, sv = g.slice_vecs;
  const std::uint32_t slices = std::uint32_t(g.slices), reps = g.reps;
  const bool shared = g.groups > g.slices;
  // A shared slice is updated by racing groups: a = 1 keeps the outcome boundable (see top).
  const std::uint32_t a = shared ? 1u : 0x9e3779b1u, b = shared ? 1u : 0x7f4a7c15u;
  w.identify(name_of(plan, "rmw", blk, g.bytes()));
  w.kernel = {"cache", "cache_rmw", {}};
  w.range = Range::linear(g.groups * g.wg, g.wg);
  w.buffers = {{g.bytes(), [](Bytes& b) { Rng r(0x4e3); for (std::size_t i = 0; i < b.size() / 4; ++i) put<std::uint32_t>(b, i, std::uint32_t(r.next() >> 40)); }}};
  w.args = {Arg::buf(0), Arg::scalar(slices), Arg::scalar(std::uint32_t(sv)), Arg::scalar(reps), Arg::scalar(a), Arg::scalar(b)};
  const double per_rep = double(g.groups) * sv * kVec;
  w.cost.bytes_read = w.cost.bytes_written = per_rep * reps;
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    for (std::size_t v = 0; v < vecs; v += every) {
      const std::size_t k = g.sharers(v / sv);
      for (std::size_t lane = 0; lane < 4; ++lane) {
        const std::size_t i = v * 4 + lane;
        const std::uint32_t x0 = get<std::uint32_t>(in[0], i), got = get<std::uint32_t>(out[0], i);
        if (k == 1) {
          std::uint32_t x = x0;
          for (std::uint32_t r = 0; r < reps; ++r) x = x * a + b;
          if (got != x) return differs(i, x, got) + " (word " + std::to_string(i) + " after " + std::to_string(reps) + " passes)";
        } else if (std::uint32_t m = got - x0; m < 1 || m > k * reps) {
          return "word " + std::to_string(i) + " went from " + std::to_string(x0) + " to " + std::to_string(got) +
                 ", not up by 1 to " + std::to_string(k * reps) + " (" + std::to_string(k) + " groups x " +
                 std::to_string(reps) + " passes of +1)";
        }
      }
      t.bytes_read += double(k) * reps * kVec;
      t.bytes_written += double(k) * reps * kVec;
    }
    return std::string();
  };
  return w;
}

// Kernel B: one launch is one trial, x = x * a + b once over the whole set by a grid-stride
// loop of the block's grid (the reuse is outside the kernel, across launches).
Workload trial(const Plan& plan, std::size_t want, const Block& blk) {
  const std::size_t vecs = std::max<std::size_t>(want / kVec, 1);
  const std::uint32_t a = 0x9e3779b1u, b = 0x7f4a7c15u;
  Workload w;
  w.identify(name_of(plan, "trial", blk, vecs * kVec));
  w.kernel = {"cache", "cache_trial", {}};
  w.range = Range::linear(blk.groups * blk.wg, blk.wg);
  w.buffers = {{vecs * kVec, [](Bytes& b) { Rng r(0x7b1a); for (std::size_t i = 0; i < b.size() / 4; ++i) put<std::uint32_t>(b, i, std::uint32_t(r.next() >> 40)); }}};
  w.args = {Arg::buf(0), Arg::scalar(std::uint32_t(vecs)), Arg::scalar(a), Arg::scalar(b)};
  w.cost.bytes_read = w.cost.bytes_written = double(vecs * kVec);
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    for (std::size_t v = 0; v < vecs; v += every) {
      for (std::size_t i = v * 4; i < v * 4 + 4; ++i)
        if (const std::uint32_t want = get<std::uint32_t>(in[0], i) * a + b, got = get<std::uint32_t>(out[0], i); got != want)
          return differs(i, want, got) + " (word " + std::to_string(i) + " after one trial)";
      t.bytes_read += kVec;
      t.bytes_written += kVec;
    }
    return std::string();
  };
  return w;
}

// Kernel C: each group's slice passes through local (shared) memory a tile at a time; the
// tile takes `reps` passes of x = x * a + b there, a barrier between passes, then goes back.
// The tile is at most 16 KiB and half the device's local memory, a power of two of vectors.
// Groups: as many as the set has tiles, at most the block's count (each owns its slice: no
// races). Cost: the global load and store of the set once, and reps local passes that each
// read and write it: (reps + 1) x set bytes each way.
Workload shared(const Plan& plan, std::size_t want, const Block& blk) {
  const DeviceInfo& d = plan.device;
  const bool test = plan.size == Size::test;
  std::size_t tile = 1;
  // (Test: 1 KiB, so that a slice takes several tiles.)
  const std::size_t cap = std::min<std::size_t>(std::max<std::size_t>(want / kVec, blk.wg),
                                                std::min<std::size_t>(test ? 1 << 10 : 16 << 10, d.local_mem / 2) / kVec);
  while (tile * 2 <= cap) tile *= 2;
  const std::size_t groups = std::clamp<std::size_t>(want / kVec / tile, 1, blk.groups);
  const std::size_t slice = std::max<std::size_t>(want / kVec / groups / tile, 1) * tile, vecs = groups * slice;
  std::uint32_t reps = 3;
  if (!test) {  // about 0.75 ms (GPU) or 3 ms (CPU) of local passes at a rough rate, at least 8
    const double rate = d.is_gpu ? 20e12 : 30e9, seconds = d.is_gpu ? 0.75e-3 : 3e-3;
    reps = std::uint32_t(std::clamp(std::round(rate * seconds / (2.0 * vecs * kVec)), 8.0, 1e6));
  }
  const std::uint32_t a = 0x9e3779b1u, b = 0x7f4a7c15u;
  Workload w;
  w.identify(name_of(plan, "shared", blk, vecs * kVec));
  w.kernel = {"cache", "cache_shared", {}};
  w.range = Range::linear(groups * blk.wg, blk.wg);
  w.buffers = {{vecs * kVec, [](Bytes& b) { Rng r(0x5a3d); for (std::size_t i = 0; i < b.size() / 4; ++i) put<std::uint32_t>(b, i, std::uint32_t(r.next() >> 40)); }}};
  w.args = {Arg::buf(0), Arg::local(tile * kVec), Arg::scalar(std::uint32_t(slice)), Arg::scalar(std::uint32_t(tile)),
            Arg::scalar(reps), Arg::scalar(a), Arg::scalar(b)};
  w.cost.bytes_read = w.cost.bytes_written = double(vecs * kVec) * (reps + 1);
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    for (std::size_t v = 0; v < vecs; v += every) {
      for (std::size_t i = v * 4; i < v * 4 + 4; ++i) {
        std::uint32_t x = get<std::uint32_t>(in[0], i);
        for (std::uint32_t r = 0; r < reps; ++r) x = x * a + b;
        if (const std::uint32_t got = get<std::uint32_t>(out[0], i); got != x)
          return differs(i, x, got) + " (word " + std::to_string(i) + " after " + std::to_string(reps) + " passes)";
      }
      t.bytes_read += double(kVec) * (reps + 1);
      t.bytes_written += double(kVec) * (reps + 1);
    }
    return std::string();
  };
  if (tile < blk.wg) w.skip = "the device's local memory holds fewer vectors than a work-group has work-items";
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  const DeviceInfo& d = plan.device;
  std::vector<std::size_t> sizes;
  if (plan.size == Size::test) {
    sizes = {4 << 10, 32 << 10};  // 4 KiB: slices shared by two groups; 32 KiB: one owner each
  } else {
    std::size_t top = std::max<std::size_t>(8 * d.cache_size, std::size_t(256) << 20);
    while (top > (std::size_t(16) << 20) && (top > d.max_alloc || top > d.global_mem / 4)) top /= 2;
    const int per_octave = plan.size == Size::full ? 4 : 1;
    for (int k = 0;; ++k) {
      const std::size_t s = std::size_t(std::llround(4096.0 * std::exp2(double(k) / per_octave)));
      if (s > top) {
        if (sizes.back() < top) sizes.push_back(top);  // 8x the last-level cache itself
        break;
      }
      sizes.push_back(s);
    }
  }
  std::vector<Workload> out;
  const Block best = block(plan);
  for (bool is_rmw : {false, true}) {
    std::size_t last = 0;
    for (std::size_t s : sizes) {
      const Geometry g = geometry(plan, s, is_rmw, best);
      if (g.bytes() == last) continue;  // rounded onto the previous point
      last = g.bytes();
      out.push_back(is_rmw ? rmw(plan, g, best) : read(plan, g));
    }
  }
  if (plan.size == Size::quick) return out;
  // Seed 001 section 4's GPU study (full sweep): kernel A (rmw) on the seed's grids, kernels B
  // (trial) and C (shared) on them and on the best block; one point per octave (test: 4 and
  // 32 KiB).
  std::vector<std::size_t> octaves;
  for (std::size_t s : sizes)
    if (plan.size == Size::test || (s & (s - 1)) == 0 || s == sizes.back()) octaves.push_back(s);
  for (const Block& blk : {block(plan, 32), block(plan, 64), best}) {
    std::size_t last = 0;
    for (std::size_t s : octaves) {
      if (blk.name == "best") break;  // kernel A's best block is the series above
      const Geometry g = geometry(plan, s, true, blk);
      if (g.bytes() == last) continue;
      last = g.bytes();
      out.push_back(rmw(plan, g, blk));
    }
    for (std::size_t s : octaves) out.push_back(trial(plan, s, blk));
    for (std::size_t s : octaves)
      if (Workload w = shared(plan, s, blk); out.back().name != w.name) out.push_back(std::move(w));  // not rounded onto the last
  }
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(cache, build);

}  // namespace archbench
