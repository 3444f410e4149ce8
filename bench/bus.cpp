// bus: host<->device transfer bandwidth (seed 002 section 2.2) for each direction and each
// kind of host memory:
//  - pageable: clEnqueueWriteBuffer / clEnqueueReadBuffer from plain malloc'd memory;
//  - pinned:   the same from page-locked memory the runtime allocated (CL_MEM_ALLOC_HOST_PTR,
//              mapped once); a GPU's copy engine can reach it directly, so it should beat pageable;
//  - mapped:   clEnqueueMapBuffer of the device buffer, memcpy, unmap (timed by the host clock,
//              since the memcpy is host work). The seed's "memory-mapped copy".
// Names: bus/<backend>/<direction>_<memory>/bytes:N, direction to_device or to_host, over
// 4 KiB to 256 MiB on a log axis (quick every 4x, full every 2x plus the seed's own 4 MiB
// steps from 4 to 64 MiB), never beyond the device's largest allocation; a zero-copy device's
// quick sweep stops at 64 MiB (see sizes()).
//
// Zero copy: where the device shares host memory (DeviceInfo::unified_memory, recorded in the
// JSON context as host_unified_memory=yes, as with PoCL on a CPU), no bus is crossed: these
// "transfers" are memcpy within host memory (and a mapped one may be no copy on the device's
// side at all), so they measure host memory bandwidth and the runtime's overhead.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "fixtures/core/data.hpp"
#include "fixtures/core/kernels.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

constexpr std::size_t kChunk = 4096;  // the check compares (and tallies) chunks of this many bytes

// Pseudo-random bytes, eight at a time; different seeds on the two sides of a transfer so
// that a copy that did not happen (or went the wrong way) cannot match.
void fill_random(Bytes& b, std::uint64_t seed) {
  Rng r(seed);
  std::size_t i = 0;
  for (; i + 8 <= b.size(); i += 8) put<std::uint64_t>(b, i / 8, r.next());
  for (; i < b.size(); ++i) b[i] = static_cast<unsigned char>(r.next());
}

const char* memory_name(HostMemory m) {
  switch (m) {
    case HostMemory::pageable: return "pageable";
    case HostMemory::pinned: return "pinned";
    case HostMemory::mapped: return "mapped";
    case HostMemory::managed: return "managed";
  }
  return "?";
}

const char* direction_name(Direction d) {
  switch (d) {
    case Direction::to_device: return "to_device";
    case Direction::to_host: return "to_host";
    case Direction::both: return "both";
    case Direction::on_device: return "on_device";
  }
  return "?";
}

// One stretch of bytes that must have arrived: `len` bytes of `want` from `wo` must now be in
// `got` from `go`. The check compares chunk by chunk (every `every`-th chunk) and tallies the
// bytes it compared as read (moved towards the host) or written (towards the device).
struct Moved {
  bool from_inputs_device;  // want is the device buffer as uploaded (else the host side as filled)
  bool into_device;         // got is the device buffer after the launch (else the host side)
  std::size_t wo, go, len;
  bool counts_as_read;
};

std::string compare(const std::vector<Bytes>& in, const std::vector<Bytes>& out, const Moved& m, std::size_t every,
                    Cost& t) {
  const Bytes& want = m.from_inputs_device ? in[0] : in.back();
  const Bytes& got = m.into_device ? out[0] : out.back();
  if (want.size() < m.wo + m.len || got.size() < m.go + m.len) return "a side of the transfer is smaller than the buffer";
  const std::size_t chunks = (m.len + kChunk - 1) / kChunk;
  for (std::size_t c = 0; c < chunks; c += every) {
    const std::size_t begin = c * kChunk, n = std::min(kChunk, m.len - begin);
    const unsigned char* w = want.data() + m.wo + begin;
    const unsigned char* g = got.data() + m.go + begin;
    if (std::memcmp(w, g, n) != 0) {
      std::size_t i = 0;
      while (w[i] == g[i]) ++i;
      return std::string(m.into_device ? "device buffer" : "host memory") + " byte " + std::to_string(m.go + begin + i) +
             ": expected " + std::to_string(w[i]) + ", got " + std::to_string(g[i]) + " (" +
             (m.from_inputs_device ? "the device held" : "the host sent") + " something else)";
    }
    (m.counts_as_read ? t.bytes_read : t.bytes_written) += double(n);
  }
  return std::string();
}

// A transfer of `bytes` (Direction in fixtures/core/device.hpp says which part goes where). The
// transferred bytes are counted once, named as OpenCL names the command: towards the device
// they are bytes_written, towards the host bytes_read, so byte_per_s is exactly the bytes
// moved over the time (both directions together for `both`; for `on_device`, the half read
// plus the half written, BabelStream's convention: nvbandwidth's device-local copy reports
// half of that figure).
Workload transfer(const Plan& plan, Direction dir, HostMemory mem, std::size_t bytes) {
  Workload w;
  const std::string variant = dir == Direction::on_device ? std::string("on_device_ce")  // the copy engine
                                                          : std::string(direction_name(dir)) + "_" + memory_name(mem);
  w.identify(identity({{"family", "bus"}, {"backend", plan.device.backend}, {"op", variant}}, {{"bytes", std::to_string(bytes)}}));
  w.buffers = {{bytes, [bytes](Bytes& b) { fill_random(b, 0xD0D0 + bytes); }}};  // the device side
  w.transfer = Transfer{{dir, mem}, [bytes](Bytes& b) { fill_random(b, 0x4057 + 3 * bytes); }};  // the host side
  const std::size_t half = bytes / 2;
  std::vector<Moved> moved;
  switch (dir) {
    case Direction::to_device: moved = {{false, true, 0, 0, bytes, false}}; break;
    case Direction::to_host: moved = {{true, false, 0, 0, bytes, true}}; break;
    case Direction::both: moved = {{false, true, 0, 0, half, false}, {true, false, half, half, bytes - half, true}}; break;
    case Direction::on_device: moved = {{true, true, 0, half, half, false}}; break;
  }
  for (const Moved& m : moved) (m.counts_as_read ? w.cost.bytes_read : w.cost.bytes_written) += double(m.len);
  if (dir == Direction::on_device) w.cost.bytes_read += double(half);  // the copy engine reads the first half
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    for (const Moved& m : moved) {
      if (auto e = compare(in, out, m, every, t); !e.empty()) return e;
      if (dir == Direction::on_device) t.bytes_read = t.bytes_written;  // one read per byte written
    }
    return std::string();
  };
  return w;
}

// Seed 001 section 6 (Fig. 6): per launch, `bytes` of doubles go to the device (copied for
// pageable and pinned memory; zero copy and managed memory are used in place), `reuse` kernel
// passes add 1 to every double, the data comes back and the host adds 1 to every double.
// Bytes as the seed counts them: 2 x size x (reuse + 1) per launch (each pass reads and writes
// every double). Timed by the host clock, since the host pass is part of it.
// OpenCL: pageable is malloc'd memory and pinned a mapped CL_MEM_ALLOC_HOST_PTR buffer, both
// copied by clEnqueueWrite/ReadBuffer; managed is a fine-grained SVM buffer (host and kernels
// on the same memory, as CUDA's managed memory), where the device has it; zero copy (mapped)
// is skipped with the reason (the backend's alloc_host says why).
Workload reuse(const Plan& plan, HostMemory mem, std::size_t bytes, int passes) {
  Workload w;
  w.identify(identity({{"family", "bus"}, {"backend", plan.device.backend}, {"op", std::string("reuse_") + memory_name(mem)}},
                      {{"bytes", std::to_string(bytes)}, {"reuse", std::to_string(passes)}}));
  // The device's buffer, and the host's data in memory of kind `mem` (the check's in/out.back()).
  w.buffers = {{bytes, nullptr}, {bytes, [bytes](Bytes& b) { fill_uniform<double>(b, bytes, 1.0, 2.0); }}};
  w.buffers[1].host = mem;
  const bool copied = mem == HostMemory::pageable || mem == HostMemory::pinned;
  Step pass;
  pass.kernel = {"bus", "reuse_pass", {}};
  pass.range = Range::linear(std::size_t(std::max<unsigned>(plan.device.compute_units, 1)) * 8 * 256, 256);
  pass.args = {Arg::buf(copied ? 0 : 1), Arg::scalar<std::uint64_t>(bytes / sizeof(double))};
  Step host;
  host.buffer = 1;
  host.host = [](void* data, std::size_t n) {
    double* h = static_cast<double*>(data);
    for (std::size_t k = 0; k < n / sizeof(double); ++k) h[k] += 1.0;
  };
  if (copied) w.steps.push_back({TransferSpec{Direction::to_device, mem}});
  w.steps.insert(w.steps.end(), passes, pass);
  if (copied) w.steps.push_back({TransferSpec{Direction::to_host, mem}});
  w.steps.push_back(host);
  w.timing = Timing::round_trip;
  const double moved = double(bytes) * (passes + 1);
  w.cost.bytes_read = moved;
  w.cost.bytes_written = moved;
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    const Bytes& before = in.back();
    const Bytes& after = out.back();
    const std::size_t n = bytes / sizeof(double), per_chunk = kChunk / sizeof(double);
    // The reference adds passes + 1 times a double: chunks spread over the buffer, about 2^26
    // additions in all (every double of 1 GiB at 1024 passes took the H100's host minutes).
    every = std::max(every, (n + per_chunk) * std::size_t(passes + 1) >> 26);
    for (std::size_t c = 0; c * per_chunk < n; c += every) {
      for (std::size_t i = c * per_chunk; i < std::min(n, (c + 1) * per_chunk); ++i) {
        double want = get<double>(before, i);
        for (int k = 0; k <= passes; ++k) want += 1.0;  // one rounding per pass, as the passes do
        const double got = get<double>(after, i);
        if (got != want) return differs(i, want, got) + " (after " + std::to_string(passes) + " device passes and one host pass)";
        t.bytes_read += double(sizeof(double)) * (passes + 1);
        t.bytes_written += double(sizeof(double)) * (passes + 1);
      }
    }
    return std::string();
  };
  return w;
}

// Device to device by an SM kernel (the copy-engine twin is the on_device transfer): the
// buffer's first half copied to its second half, 16 bytes per thread per step.
Workload sm_copy(const Plan& plan, std::size_t bytes) {
  const DeviceInfo& d = plan.device;
  Workload w;
  w.identify(identity({{"family", "bus"}, {"backend", d.backend}, {"op", "on_device_sm"}}, {{"bytes", std::to_string(bytes)}}));
  w.kernel = {"bus", "sm_copy", {}};
  const std::size_t half = bytes / 2;
  const std::size_t threads = std::min<std::size_t>(std::max<unsigned>(d.compute_units, 1) * 2048, std::max<std::size_t>(half / 16, 1));
  const std::size_t local = std::min<std::size_t>(256, threads);
  w.range = Range::linear(threads / local * local, local);
  w.buffers = {{bytes, [bytes](Bytes& b) { fill_random(b, 0x5C0B + bytes); }}};
  w.args = {Arg::buf(0), Arg::scalar<std::uint64_t>(half)};
  w.cost.bytes_read = double(half);
  w.cost.bytes_written = double(half);
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    std::vector<Bytes> as_transfer = {in[0], in[0]};  // compare() reads the uploaded device side as in[0]
    const Moved m{true, true, 0, half, half, false};
    auto e = compare(as_transfer, out, m, every, t);
    t.bytes_read = t.bytes_written;
    return e;
  };
  if (half % 16) w.skip = "the SM copy moves 16-byte words: the half buffer must be a multiple of 16 bytes";
  return w;
}

std::vector<std::size_t> sizes(const Plan& plan) {
  std::vector<std::size_t> out;
  if (plan.size == Size::test) {
    out = {std::size_t(4) << 10, std::size_t(1) << 20};
  } else {
    const std::size_t step = plan.size == Size::full ? 2 : 4;
    // A zero-copy device's quick sweep stops at 64 MiB: its "transfers" are host memcpy, flat
    // long before that, and each 256 MiB point costs seconds of host-side setup (the harness
    // keeps several host copies of the buffer for the check).
    const std::size_t top = std::size_t(plan.size == Size::quick && plan.device.unified_memory ? 64 : 256) << 20;
    for (std::size_t b = std::size_t(4) << 10; b <= top; b *= step) out.push_back(b);
    // The seed's sweep: 4 MiB to 64 MiB in 4 MiB steps (quick has 4, 16 and 64 MiB of it).
    if (plan.size == Size::full)
      for (std::size_t b = std::size_t(4) << 20; b <= (std::size_t(64) << 20); b += std::size_t(4) << 20) out.push_back(b);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  const std::uint64_t cap = plan.device.max_alloc;
  out.erase(std::remove_if(out.begin(), out.end(), [cap](std::size_t b) { return cap && b > cap; }), out.end());
  return out;
}

std::vector<Workload> build(const Plan& plan) {
  std::vector<Workload> out;
  for (Direction dir : {Direction::to_device, Direction::to_host})
    for (HostMemory mem : {HostMemory::pageable, HostMemory::pinned, HostMemory::mapped})
      for (std::size_t b : sizes(plan)) out.push_back(transfer(plan, dir, mem, b));
  const DeviceInfo& d = plan.device;
  if (!has_kernel(d, "bus")) return out;
  // Where the device has copy engines (nvbandwidth's tests): both directions at once from
  // pinned memory, device to device by the copy engine and by the SMs.
  if (d.async_copies)
    for (std::size_t b : sizes(plan)) {
      out.push_back(transfer(plan, Direction::both, HostMemory::pinned, b));
      out.push_back(transfer(plan, Direction::on_device, HostMemory::pinned, b));
      out.push_back(sm_copy(plan, b));
    }
  // Seed 001 section 6's study, working set against reuse: quick (devices with copy engines
  // only) 1, 16 and 256 MiB with 1, 16 and 256 passes; full every 4x from 64 KiB to 1 GiB with
  // 1 to 1024 passes (the seed's figure reaches 1000), leaving out the points whose passes move
  // more than a launch should (seconds each): zero copy beyond 4 GiB of passes (quick) or 16 GiB
  // (full, about a second over PCIe), anything beyond 4 GiB on a CPU device.
  if (plan.size == Size::quick && !d.async_copies) return out;
  std::vector<std::size_t> sets;
  std::vector<int> reuses;
  if (plan.size == Size::test) {
    sets = {std::size_t(64) << 10};
    reuses = {1, 3};
  } else if (plan.size == Size::quick) {
    sets = {std::size_t(1) << 20, std::size_t(16) << 20, std::size_t(256) << 20};
    reuses = {1, 16, 256};
  } else {
    for (std::size_t b = std::size_t(64) << 10; b <= (std::size_t(1) << 30); b *= 4) sets.push_back(b);
    for (int r = 1; r <= 1024; r *= 4) reuses.push_back(r);
  }
  const double gib = double(std::size_t(1) << 30);
  for (HostMemory mem : {HostMemory::pageable, HostMemory::pinned, HostMemory::mapped, HostMemory::managed})
    for (std::size_t b : sets)
      for (int r : reuses) {
        if (d.max_alloc && b > d.max_alloc) continue;
        const double passes = double(b) * r;
        if (mem == HostMemory::mapped && passes > (plan.size == Size::quick ? 4 : 16) * gib) continue;
        if (!d.is_gpu && passes > 4 * gib) continue;
        Workload w = reuse(plan, mem, b, r);
        if (mem == HostMemory::mapped && !d.mapped_host)
          w.skip = "the device has no zero-copy host memory that its kernels reach while the host works on it";
        if (mem == HostMemory::managed && !d.managed_memory)
          w.skip = "the device has no managed memory (CUDA) or fine-grained SVM buffers (OpenCL)";
        if (!d.fp64) w.skip = "the device has no fp64 (the study's data are doubles)";
        out.push_back(std::move(w));
      }
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(bus, build);

}  // namespace archbench
