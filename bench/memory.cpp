// memory: stream kernels (BabelStream's byte counts), load/store per vector width (seed 000
// Table I) streaming and with reuse inside the kernel over work-group counts (seed 000 Fig. 9),
// the global-memory stride sweep (seed 002 formula 1), and row- against column-major access
// over bytes per work-item (seed 002 section 2.3.1) at our size and at the seed's.
// Flops (issue 17's agreement table, executed against the model): the stream kernels' arithmetic,
// the dot's tree of DOT_WG - 1 adds a group, stride_read's add of each word read. The byte kernels
// (row/col, load_store, copy) do none: the fp16 "flops" the H100 counts in them are ptxas'
// HFMA2.MMA moves of constants (archbench/traffic.py, MOVES). Device-memory bytes equal the model
// for the streams; row_write at 64 and 512 bytes a work-item is not a stream: each warp store
// touches 32 lines a byte each, so partially written sectors leave L2 and are filled again (the
// H100 moves 2.2x and 6.4x the bytes, read-for-fill included), the access pattern's real cost.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

// Bytes per stream array: several times the last-level cache of any current device.
std::size_t array_bytes(const Plan& plan) {
  const DeviceInfo& d = plan.device;
  if (plan.size == Size::test) return 64 << 10;
  std::size_t want = d.is_gpu ? (std::size_t(1) << 30) : (std::size_t(256) << 20);
  // Three arrays and their host copies must fit comfortably.
  while (want > (64u << 20) && (want > d.max_alloc || 3 * want > d.global_mem / 2)) want /= 2;
  return want;
}

std::size_t local_for(const DeviceInfo& d, std::size_t items) {
  std::size_t l = std::min<std::size_t>(256, d.max_work_group);
  while (l > 1 && items % l) l /= 2;
  return l;
}

template <class T>
std::string exact(const std::vector<Bytes>& out, int buf, std::size_t i, T want) {
  const T got = get<T>(out[buf], i);
  return got == want ? std::string() : differs(i, double(want), double(got));
}

// --- stream -------------------------------------------------------------------------------

template <class T>
Workload stream(const Plan& plan, const std::string& kernel, const char* tname) {
  const std::size_t n = array_bytes(plan) / sizeof(T);
  const double s = sizeof(T);
  const T scalar = static_cast<T>(0.4);
  const bool dbl = std::is_same_v<T, double>;
  Workload w;
  w.identify(identity({{"family", "memory"}, {"backend", plan.device.backend}, {"op", kernel}, {"type", tname}}));
  w.kernel = {"memory", "stream_" + kernel, {{"T", tname}, {"IS_DOUBLE", dbl ? "1" : "0"}}};
  auto arr = [n](std::uint64_t seed) {
    return BufferSpec{n * sizeof(T), [seed](Bytes& b) { fill_uniform<T>(b, seed, 1.0, 2.0); }};
  };
  const BufferSpec out{n * sizeof(T), nullptr};
  // Elements per work-item: on a GPU, enough that each work-item has 16 bytes of loads in
  // flight, as add and triad have with one element (two 8-byte loads). On the H100, copy of
  // double moves 2.93 TB/s at one element a work-item (BabelStream's 2.98), 3.02 at two, 2.99 at
  // four; triad 3.07 at one, 3.05 at two. A CPU runs work-items in SIMD lanes: one.
  const int loads = kernel == "add" || kernel == "triad" ? 2 : 1;
  std::size_t per_item = plan.device.is_gpu && kernel != "dot" ? std::max<std::size_t>(1, 16 / (loads * sizeof(T))) : 1;
  while (n % per_item) per_item /= 2;
  w.kernel.defines.push_back({"PER_ITEM", std::to_string(per_item)});
  // Work-groups of 128 on a GPU: on an H200 triad moved 4.41 TB/s in groups of 128 against 4.37
  // in groups of 256 (results/nvidia-h200/580-159-04/peaks-evidence/stream-blocks.txt).
  const std::size_t items = n / per_item;
  std::size_t local = local_for(plan.device, items);
  if (plan.device.is_gpu) local = std::min<std::size_t>(local, 128);
  w.range = Range::linear(items, local);
  if (kernel == "copy") {  // c = a
    w.buffers = {arr(1), out};
    w.args = {Arg::buf(0), Arg::buf(1)};
    w.cost = {0, 0, n * s, n * s, 0};
    w.check = [=](const auto& in, const auto& o, std::size_t every, Cost& t) {
      for (std::size_t i = 0; i < n; i += every) {
        if (auto e = exact<T>(o, 1, i, get<T>(in[0], i)); !e.empty()) return e;
        t += Cost{0, 0, s, s, 0};
      }
      return std::string();
    };
  } else if (kernel == "mul") {  // b = scalar * c
    w.buffers = {out, arr(3)};
    w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar(scalar)};
    w.cost = {double(n), 0, n * s, n * s, 0};
    w.check = [=](const auto& in, const auto& o, std::size_t every, Cost& t) {
      for (std::size_t i = 0; i < n; i += every) {
        if (auto e = exact<T>(o, 0, i, scalar * get<T>(in[1], i)); !e.empty()) return e;
        t += Cost{1, 0, s, s, 0};
      }
      return std::string();
    };
  } else if (kernel == "add") {  // c = a + b
    w.buffers = {arr(1), arr(2), out};
    w.args = {Arg::buf(0), Arg::buf(1), Arg::buf(2)};
    w.cost = {double(n), 0, 2 * n * s, n * s, 0};
    w.check = [=](const auto& in, const auto& o, std::size_t every, Cost& t) {
      for (std::size_t i = 0; i < n; i += every) {
        if (auto e = exact<T>(o, 2, i, get<T>(in[0], i) + get<T>(in[1], i)); !e.empty()) return e;
        t += Cost{1, 0, 2 * s, s, 0};
      }
      return std::string();
    };
  } else if (kernel == "triad") {  // a = b + scalar * c
    w.buffers = {out, arr(2), arr(3)};
    w.args = {Arg::buf(0), Arg::buf(1), Arg::buf(2), Arg::scalar(scalar)};
    w.cost = {2.0 * n, 0, 2 * n * s, n * s, 0};
    w.check = [=](const auto& in, const auto& o, std::size_t every, Cost& t) {
      for (std::size_t i = 0; i < n; i += every) {
        const T b = get<T>(in[1], i), c = get<T>(in[2], i), got = get<T>(o[0], i);
        // OpenCL C may contract b + s*c into one fma: either rounding is right.
        if (got != b + scalar * c && got != static_cast<T>(std::fma(scalar, c, b)))
          return differs(i, double(b + scalar * c), double(got));
        t += Cost{2, 0, 2 * s, s, 0};
      }
      return std::string();
    };
  } else {  // dot: per-group partial sums of a*b over contiguous chunks
    const DeviceInfo& d = plan.device;
    const std::size_t wg = std::min<std::size_t>(256, d.max_work_group);
    // A GPU: enough groups to fill every compute unit; a CPU: chunks that stay in its caches.
    const std::size_t groups = plan.size == Size::test ? 4
                               : d.is_gpu ? std::max<unsigned>(d.compute_units, 1) * 8
                                          : std::max<std::size_t>(n / (wg * 64), 1);
    // Whole work-groups of elements a chunk (the kernel's rounding): every group starts aligned.
    const std::size_t chunk = ((n + groups - 1) / groups + wg - 1) / wg * wg;
    w.kernel.defines.push_back({"DOT_WG", std::to_string(wg)});
    w.kernel.defines.push_back({"DOT_CONTIGUOUS", d.is_gpu ? "0" : "1"});
    w.range = Range::linear(groups * wg, wg);
    w.buffers = {arr(1), arr(2), {groups * sizeof(T), nullptr}};
    w.args = {Arg::buf(0), Arg::buf(1), Arg::buf(2), Arg::scalar<std::uint64_t>(n)};
    // Flops: a multiply and an add an element, and the group's tree of wg - 1 adds (the
    // hardware's count, issue 17's agreement table).
    w.cost = {2.0 * n + double(groups) * (wg - 1), 0, 2 * n * s, groups * s, 0};
    w.check = [=](const auto& in, const auto& o, std::size_t every, Cost& t) {
      const std::size_t group_every = std::max<std::size_t>(1, every * groups * wg / std::max<std::size_t>(n, 1));
      for (std::size_t g = 0; g < groups; g += group_every) {
        double want = 0;
        const std::size_t begin = g * chunk, end = std::min(begin + chunk, n);
        for (std::size_t i = begin; i < end; ++i) want += double(get<T>(in[0], i)) * get<T>(in[1], i);
        const double got = get<T>(o[2], g), elems = double(end > begin ? end - begin : 0);
        // Summation order differs from the device's tree: a relative tolerance.
        const double tol = (dbl ? 1e-12 : 1e-5) * std::max(1.0, std::sqrt(elems)) * std::fabs(want);
        if (!(std::fabs(got - want) <= tol)) return differs(g, want, got) + " (partial sum)";
        t += Cost{2 * elems + double(wg - 1), 0, 2 * s * elems, s, 0};
      }
      return std::string();
    };
  }
  if (dbl && !plan.device.fp64) w.skip = "the device has no fp64 (cl_khr_fp64)";
  return w;
}

// --- load/store per vector width ------------------------------------------------------------

Workload load_store(const Plan& plan, int width) {
  const std::size_t bytes = array_bytes(plan), items = bytes / (4 * width);
  const std::string vt = vector_type("float", width);
  Workload w;
  w.identify(identity({{"family", "memory"}, {"backend", plan.device.backend}, {"op", "load_store"}, {"type", vt}}, {}, vector_axes("float", width)));
  // W: the CUDA kernel has no floatN types; it reads vec<float, W> (OpenCL ignores it).
  w.kernel = {"memory", "load_store", {{"VT", vt}, {"W", std::to_string(width)}}};
  w.range = Range::linear(items, local_for(plan.device, items));
  w.buffers = {{bytes, [](Bytes& b) { fill_uniform<float>(b, 11, -1.0, 1.0); }}, {bytes, nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1)};
  const double per = 4.0 * width;
  w.cost = {0, 0, items * per, items * per, 0};
  w.check = [=](const auto& in, const auto& o, std::size_t every, Cost& t) {
    for (std::size_t i = 0; i < items; i += every) {
      for (int l = 0; l < width; ++l)
        if (auto e = exact<float>(o, 1, i * width + l, get<float>(in[0], i * width + l)); !e.empty()) return e;
      t += Cost{0, 0, per, per, 0};
    }
    return std::string();
  };
  return w;
}

// --- load/store with reuse inside the kernel (seed 000 Fig. 9) ------------------------------

// The seed's kernel repeats a[i] = b[i] ITERATIONS times over a buffer that stays in cache; as
// written, a compiler keeps one copy (the seed notes the same of its load-only attempt). Here
// trip j of work-item g copies element (g + j*items) mod n of a cache-resident pair of buffers,
// so every trip is a load and a store of its own, neighbouring work-items touch neighbouring
// elements, and the buffers (in + out: half the cache the device reports, at most 4 MiB) are
// reused from cache trip after trip. Work-items: `groups` work-groups of 256.
Workload load_store_reuse(const Plan& plan, int width, std::size_t groups) {
  const DeviceInfo& d = plan.device;
  const bool test = plan.size == Size::test;
  const double per = 4.0 * width;
  // Elements (vectors) per buffer: a power of two, so that the wrap is a mask.
  std::size_t cache = test ? (64u << 10) : std::clamp<std::size_t>(d.cache_size, 64u << 10, 8u << 20);
  std::size_t n = 1;
  while (2 * (2 * n * per) <= double(cache)) n *= 2;  // in + out within half the cache
  const std::size_t local = std::min<std::size_t>(256, d.max_work_group), items = groups * local;
  const int trips = test ? 5 : d.is_gpu ? 256 : 64;
  const std::string vt = vector_type("float", width);
  Workload w;
  w.identify(identity({{"family", "memory"}, {"backend", d.backend}, {"op", "load_store_reuse"}, {"type", vt}},
                      {{"groups", std::to_string(groups)}}, vector_axes("float", width)));
  w.axes.push_back({"buffer_bytes", std::to_string(std::size_t(n * per))});
  w.kernel = {"memory", "load_store_reuse", {{"VT", vt}, {"W", std::to_string(width)}, {"TRIPS", std::to_string(trips)}}};
  w.range = Range::linear(items, local);
  w.buffers = {{std::size_t(n * per), [](Bytes& b) { fill_uniform<float>(b, 13, -1.0, 1.0); }}, {std::size_t(n * per), nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar<std::uint32_t>(std::uint32_t(n - 1))};
  w.cost = {0, 0, items * trips * per, items * trips * per, 0};
  w.check = [=](const auto& in, const auto& o, std::size_t every, Cost& t) {
    for (std::size_t g = 0; g < items; g += every)
      for (int j = 0; j < trips; ++j) {
        const std::size_t k = (g + std::size_t(j) * items) & (n - 1);
        for (int l = 0; l < width; ++l)
          if (auto e = exact<float>(o, 1, k * width + l, get<float>(in[0], k * width + l)); !e.empty()) return e;
        t += Cost{0, 0, per, per, 0};
      }
    return std::string();
  };
  return w;
}

// --- stride (formula 1) -------------------------------------------------------------------

Workload stride(const Plan& plan, bool write, unsigned stride_words) {
  const DeviceInfo& d = plan.device;
  const bool test = plan.size == Size::test;
  // A power of two: formula 1 masks. At the test size, 2^20 words hold every access of a
  // work-item at its own address (32 x 32768 words): with 2^16 they wrapped onto two offsets,
  // and a kernel running half its loops wrote the same addresses and passed the check.
  const std::uint32_t words = test ? (1u << 20) : (1u << 24);
  const std::uint32_t mask = words - 1;
  const std::size_t items = test ? 256 : std::max<unsigned>(d.compute_units, 1) * (d.is_gpu ? 2048 : 1024);
  const int loops = test ? 2 : 8;
  const double accesses = 16.0 * loops;
  Workload w;
  w.identify(identity({{"family", "memory"}, {"backend", d.backend}, {"op", write ? "stride_write" : "stride_read"}}, {{"stride", std::to_string(stride_words)}}));
  w.kernel = {"memory", write ? "stride_write" : "stride_read", {{"LOOPS", std::to_string(loops)}}};
  w.range = Range::linear(items, local_for(d, items));
  // Address of access k (0-based over the whole loop) of work-item g.
  auto addr = [=](std::size_t g, int k) { return (std::uint32_t(g) * stride_words + 32768u * std::uint32_t(k)) & mask; };
  if (!write) {
    w.buffers = {{words * 4ull, [](Bytes& b) { fill_uniform<float>(b, 5, 0.0, 1.0); }}, {items * 4, nullptr}};
    w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar<std::uint32_t>(stride_words), Arg::scalar<std::uint32_t>(mask)};
    // Flops: the add of each word read into the sum (the hardware's count, issue 17).
    w.cost = {items * accesses, 0, items * accesses * 4, items * 4.0, 0};
    w.check = [=](const auto& in, const auto& o, std::size_t every, Cost& t) {
      for (std::size_t g = 0; g < items; g += every) {
        float sum = 0;
        for (int k = 0; k < 16 * loops; ++k) sum += get<float>(in[0], addr(g, k));
        if (auto e = exact<float>(o, 1, g, sum); !e.empty()) return e;
        t += Cost{accesses, 0, accesses * 4, 4, 0};
      }
      return std::string();
    };
  } else {
    w.buffers = {{words * 4ull, nullptr}};
    w.args = {Arg::buf(0), Arg::scalar<std::uint32_t>(stride_words), Arg::scalar<std::uint32_t>(mask)};
    w.cost = {0, 0, 0, items * accesses * 4, 0};
    // Work-items that share an address race; the kernel writes a value that depends on the
    // work-item and the access, so the check accepts any writer's value at that address.
    w.check = [=](const auto&, const auto& o, std::size_t every, Cost& t) {
      for (std::size_t g = 0; g < items; g += every) {
        for (int k = 0; k < 16 * loops; ++k) {
          const std::uint32_t a = addr(g, k);
          const float got = get<float>(o[0], a);
          bool ok = false;
          // Writers of `a`: every (g2, k2) with g2*stride + 32768*k2 == a (mod words).
          for (int k2 = 0; k2 < 16 * loops && !ok; ++k2) {
            const std::uint32_t rest = (a - 32768u * std::uint32_t(k2)) & mask;
            if (stride_words == 0) {
              ok = rest == 0 && std::fmod(double(got), 1.0) == 0 && got >= 32768.0f * k2 &&
                   got < 32768.0f * k2 + items;  // some work-item's value for access k2
            } else if (rest % stride_words == 0 && rest / stride_words < items) {
              const std::uint32_t g2 = rest / stride_words;
              ok = got == float(g2 + 32768u * std::uint32_t(k2));
            } else {
              // (g2*stride) may wrap past the mask: try the wrapped pre-images too.
              for (std::uint64_t r = rest + words; r / stride_words < items && !ok; r += words)
                if (r % stride_words == 0) ok = got == float(std::uint32_t(r / stride_words) + 32768u * std::uint32_t(k2));
            }
          }
          if (!ok) return "address " + std::to_string(a) + " (work-item " + std::to_string(g) + ", access " +
                          std::to_string(k) + ") holds " + std::to_string(got) + ", which no work-item wrote there";
        }
        t += Cost{0, 0, 0, accesses * 4, 0};
      }
      return std::string();
    };
  }
  return w;
}

// --- row- and column-major access (seed 002 section 2.3.1) --------------------------------

// `seed_size`: the seed's array of 1024 x 1024 bytes (it fits the caches: the seed's CPU
// figures are cache effects), named with its array size; else ours, beyond the last-level
// cache (main memory's access pattern), named as before with the array size as an axis.
Workload major(const Plan& plan, bool column, bool write, int bpw, bool seed_size = false) {
  const DeviceInfo& d = plan.device;
  const std::size_t bytes = seed_size ? (1u << 20) : plan.size == Size::test ? (64 << 10) : (d.is_gpu ? (256u << 20) : (64u << 20));
  const std::size_t items = bytes / bpw;
  const std::string variant = std::string(column ? "col" : "row") + (write ? "_write" : "_read");
  Workload w;
  const Axis array{"array", std::to_string(bytes)};
  if (seed_size)
    w.identify(identity({{"family", "memory"}, {"backend", d.backend}, {"op", variant}}, {{"bytes", std::to_string(bpw)}, array}));
  else
    w.identify(identity({{"family", "memory"}, {"backend", d.backend}, {"op", variant}}, {{"bytes", std::to_string(bpw)}}, {array}));
  w.kernel = {"memory", variant, {{"BPW", std::to_string(bpw)}}};
  w.range = Range::linear(items, seed_local_size(d, items));
  auto at = [=](std::size_t g, int k) { return column ? k * items + g : g * bpw + k; };
  if (!write) {
    w.buffers = {{bytes, [](Bytes& b) { Rng r(17); for (auto& c : b) c = static_cast<unsigned char>(r.next()); }},
                 {items * 4, nullptr}};
    w.args = {Arg::buf(0), Arg::buf(1)};
    w.cost = {0, 0, double(bytes), items * 4.0, 0};
    w.check = [=](const auto& in, const auto& o, std::size_t every, Cost& t) {
      for (std::size_t g = 0; g < items; g += every) {
        std::uint32_t sum = 0;
        for (int k = 0; k < bpw; ++k) sum += in[0][at(g, k)];
        if (auto e = exact<std::uint32_t>(o, 1, g, sum); !e.empty()) return e;
        t += Cost{0, 0, double(bpw), 4, 0};
      }
      return std::string();
    };
  } else {
    w.buffers = {{bytes, nullptr}};
    w.args = {Arg::buf(0)};
    w.cost = {0, 0, 0, double(bytes), 0};
    w.check = [=](const auto&, const auto& o, std::size_t every, Cost& t) {
      for (std::size_t g = 0; g < items; g += every) {
        for (int k = 0; k < bpw; ++k)
          if (auto e = exact<unsigned char>(o, 0, at(g, k), static_cast<unsigned char>(g * 7 + k)); !e.empty()) return e;
        t += Cost{0, 0, 0, double(bpw), 0};
      }
      return std::string();
    };
  }
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  std::vector<Workload> out;
  const bool full = plan.size == Size::full;
  const bool fp64 = plan.device.fp64;
  for (const char* k : {"copy", "mul", "add", "triad", "dot"}) {
    // BabelStream's default is double; a device without fp64 gets float instead.
    if (fp64 || plan.size == Size::test) out.push_back(stream<double>(plan, k, "double"));
    if (full || !fp64 || plan.size == Size::test) out.push_back(stream<float>(plan, k, "float"));
  }
  for (int width : {1, 2, 4, 8, 16}) out.push_back(load_store(plan, width));
  // Fig. 9: full sweep only (one work-group count per width at the test size).
  if (plan.size != Size::quick)
    for (int width : {1, 2, 4, 8, 16})
      for (std::size_t g : group_counts(plan.device)) {
        out.push_back(load_store_reuse(plan, width, g));
        if (plan.size == Size::test) break;
      }
  for (bool write : {false, true})
    for (unsigned s = 0; s <= 16; ++s) out.push_back(stride(plan, write, s));
  const std::vector<int> bpws = full || plan.size == Size::test ? std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
                                                                 : std::vector<int>{1, 4, 16, 64, 512};
  for (bool column : {false, true})
    for (bool write : {false, true})
      for (int bpw : bpws) {
        out.push_back(major(plan, column, write, bpw));
        if (plan.size != Size::quick) out.push_back(major(plan, column, write, bpw, true));  // full sweep only
      }
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(memory, build);

}  // namespace archbench
