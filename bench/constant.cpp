// constant: constant-memory read bandwidth against the stride of formula 2 (seed 002
// section 2.3.3, Fig. 22). Names: constant/<backend>/chase/stride:S, S = 1, 2, 4, ..., 128
// (full: every S from 1 to 128).
// The host fills a __constant array with chain[i] = (i + S) % size; every work-item starts at
// its global id mod size and makes `hops` dependent reads p = chain[p], then stores p.
// The cost counts 4 bytes per hop per work-item, the constant-memory reads being measured;
// the one 4-byte result per work-item (1/hops of that) is left out on purpose.
// Flops: none (an integer chase). The 2 fp16 'flops' a work-item the H100 counts are ptxas'
// HFMA2.MMA moves of constants, no arithmetic (archbench/traffic.py, MOVES; issue 17).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

std::size_t local_for(const DeviceInfo& d, std::size_t items) {
  std::size_t l = std::min<std::size_t>(256, std::max<std::size_t>(d.max_work_group, 1));
  while (l > 1 && items % l) l /= 2;
  return l;
}

Workload chase(const Plan& plan, std::uint32_t stride) {
  const DeviceInfo& d = plan.device;
  const bool test = plan.size == Size::test;
  // 16 KiB (a quarter of the 64 KiB a full-profile device must offer), a power of two,
  // never more than the device's constant buffer; 1 KiB at test size so that chains wrap.
  std::uint32_t words = test ? 256 : 4096;
  while (words > 1 && std::uint64_t(words) * 4 > d.constant_mem) words /= 2;
  const std::uint32_t mask = words - 1;
  const std::size_t cus = std::max<unsigned>(d.compute_units, 1);
  const std::size_t items = test ? 512 : cus * (d.is_gpu ? 2048 : 1024);
  const std::uint32_t hops = test ? 61 : 1024;
  Workload w;
  w.identify(identity({{"family", "constant"}, {"backend", d.backend}, {"op", "chase"}}, {{"stride", std::to_string(stride)}}));
  w.kernel = {"constant", "chase", {}};
  w.range = Range::linear(items, local_for(d, items));
  w.buffers = {{words * 4ull,
                [=](Bytes& b) {
                  for (std::uint32_t i = 0; i < words; ++i) put<std::uint32_t>(b, i, (i + stride) % words);  // formula 2
                }},
               {items * 4, nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar<std::uint32_t>(hops), Arg::scalar<std::uint32_t>(mask)};
  w.cost = {0, 0, double(items) * hops * 4, 0, 0};
  // Replays each checked work-item's chain through the array as uploaded.
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
    for (std::size_t gid = 0; gid < items; gid += every) {
      std::uint32_t p = std::uint32_t(gid) & mask;
      for (std::uint32_t h = 0; h < hops; ++h) p = get<std::uint32_t>(in[0], p);
      const std::uint32_t got = get<std::uint32_t>(out[1], gid);
      if (got != p)
        return "work-item " + std::to_string(gid) + ": after " + std::to_string(hops) + " hops from index " +
               std::to_string(gid & mask) + " expected index " + std::to_string(p) + ", got " + std::to_string(got);
      t.bytes_read += hops * 4.0;
    }
    return std::string();
  };
  if (d.constant_mem < 1024)
    w.skip = "the device reports " + std::to_string(d.constant_mem) + " bytes of constant memory (at least 1 KiB needed)";
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  std::vector<Workload> out;
  if (plan.size == Size::full)
    for (std::uint32_t s = 1; s <= 128; ++s) out.push_back(chase(plan, s));
  else
    for (std::uint32_t s = 1; s <= 128; s *= 2) out.push_back(chase(plan, s));
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(constant, build);

}  // namespace archbench
