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

#include "fixtures/data.hpp"
#include "fixtures/workload.hpp"

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
  }
  return "?";
}

Workload transfer(const Plan& plan, Direction dir, HostMemory mem, std::size_t bytes) {
  const bool to_device = dir == Direction::to_device;
  Workload w;
  w.name = name({"bus", plan.device.backend, std::string(to_device ? "to_device_" : "to_host_") + memory_name(mem),
                 "bytes:" + std::to_string(bytes)});
  w.buffers = {{bytes, [bytes](Bytes& b) { fill_random(b, 0xD0D0 + bytes); }}};  // the device side
  w.transfer = Transfer{{dir, mem}, [bytes](Bytes& b) { fill_random(b, 0x4057 + 3 * bytes); }};  // the host side
  // The transferred bytes are counted once, named as OpenCL names the command: a host-to-device
  // copy writes the buffer (bytes_written), a device-to-host copy reads it (bytes_read). So
  // byte_per_s is exactly the transferred bytes over the time.
  if (to_device)
    w.cost.bytes_written = double(bytes);
  else
    w.cost.bytes_read = double(bytes);
  // to_device: the device buffer (out[0]) must now hold what the host sent (in[last]);
  // to_host: the host side (out[last]) must now hold the device buffer's contents (in[0]).
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    const Bytes& want = to_device ? in.back() : in[0];
    const Bytes& got = to_device ? out[0] : out.back();
    if (want.size() < bytes || got.size() < bytes) return std::string("a side of the transfer is smaller than the buffer");
    const std::size_t chunks = (bytes + kChunk - 1) / kChunk;
    for (std::size_t c = 0; c < chunks; c += every) {
      const std::size_t begin = c * kChunk, n = std::min(kChunk, bytes - begin);
      if (std::memcmp(want.data() + begin, got.data() + begin, n) != 0) {
        std::size_t i = begin;
        while (want[i] == got[i]) ++i;
        return std::string(to_device ? "device buffer" : "host memory") + " byte " + std::to_string(i) + " of " +
               std::to_string(bytes) + ": expected " + std::to_string(want[i]) + ", got " + std::to_string(got[i]) +
               (to_device ? " (the host sent something else)" : " (the device held something else)");
      }
      if (to_device)
        t.bytes_written += double(n);
      else
        t.bytes_read += double(n);
    }
    return std::string();
  };
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
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(bus, build);

}  // namespace archbench
