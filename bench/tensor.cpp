// tensor: the CUDA-only compute units beside the FMA pipes (kernels/cuda/tensor.cu):
//   compute/cuda/dp4a/int8          __dp4a chains, 8 integer ops per dp4a (4 mul + 4 add, as
//                                   clpeak counts); op_per_s
//   compute/cuda/mma/<type>         warp-level mma.sync on the tensor cores; flop_per_s
//                                   (op_per_s for int8), 2*M*N*K per mma
//   compute/cuda/wgmma/<type>       warpgroup wgmma.mma_async m64n256 (sm_90a), A in registers,
//                                   B in shared memory; flop_per_s
// Named under compute/ so that ^compute/cuda/ runs them with the FMA throughput they sit
// beside. Registered for CUDA devices only.
//
// Why the references are exact, bit for bit, without knowing any fragment layout: within a
// warp (mma) or block (wgmma) every entry of A is the same value a and every entry of B_j is
// the same value b_j, so every element of A*B_j is the same dot product K*a*b_j, wherever
// the hardware keeps it. Each thread stores its accumulator registers in the order it loaded
// them, so output element e is input element e plus the dot products of the mmas applied to
// it. Values: a, b in {+-1, +-2} (exact in every input type: fp16, bf16, tf32, e4m3, e5m2,
// int8), so each product is +-1, +-2 or +-4, a dot product is a multiple of K (8, 16 or 32)
// of at most 4K = 128, and accumulators start at odd integers in [-7, 7]. Each trip adds
// A*B_j then (-A)*B_j: the accumulator swings between c and c + K*a*b_j and never grows, so
// every value any mma ever holds (products, partial sums in any order, c) is an integer of
// magnitude <= 135: exact in f32 and f16 accumulators, and within the ~14 bits that the
// tensor cores keep when they align fp8 products. A last A*B_j makes the result c + K*a*b_j,
// which the check demands for every element; it shows that each mma did K products of the
// right operands. (The trip count itself cannot show in a value that never grows; the cost
// model counts 2*ITERS + 1 mmas per tile, as the kernel's loop does.)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fixtures/core/data.hpp"
#include "fixtures/core/kernels.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

// Geometry shared by the kernels: blocks that fill every SM several times (a multiple of
// 12 blocks per SM, so that 1, 2, 3, 4 or 6 resident blocks per SM make whole waves).
std::size_t blocks_for(const Plan& plan) {
  return plan.size == Size::test ? 2 : std::max<unsigned>(plan.device.compute_units, 1) * 12;
}

// ---- dp4a ----------------------------------------------------------------------------

// Host dp4a: signed bytes of x times signed bytes of k, plus c, wrapping at 32 bits.
std::uint32_t dp4a(std::uint32_t x, std::uint32_t k, std::uint32_t c) {
  std::int64_t s = static_cast<std::int32_t>(c);
  for (int i = 0; i < 4; ++i)
    s += std::int64_t(static_cast<std::int8_t>(x >> (8 * i))) * static_cast<std::int8_t>(k >> (8 * i));
  return static_cast<std::uint32_t>(s);
}

Workload make_dp4a(const Plan& plan) {
  const int chains = 8;  // independent chains per thread: with 8 warps per SMSP, latency is covered
  const bool test = plan.size == Size::test;
  const std::size_t local = test ? 64 : 256, items = blocks_for(plan) * local * (test ? 1 : 4);
  // 1 ms at 133.8 Tops is 16.7e9 dp4a: items (132 * 48 * 256) * chains * iters is 13e9.
  const int iters = test ? 3 : 1024;
  const std::uint32_t k = 0x03fd02ffu;  // bytes -1, 2, -3, 3

  Workload w;
  w.identify(identity({{"family", "compute"}, {"backend", plan.device.backend}, {"op", "dp4a"}, {"type", "int8"}}));
  w.kernel = {"tensor", "dp4a", {{"DP4A_CHAINS", std::to_string(chains)}, {"ITERS", std::to_string(iters)}}};
  w.range = Range::linear(items, local);
  const std::uint64_t seed = std::hash<std::string>{}(w.name);
  w.buffers = {{items * chains * 4,
                [seed](Bytes& b) {
                  Rng r(seed);
                  for (std::size_t i = 0; i < b.size() / 4; ++i) put<std::uint32_t>(b, i, static_cast<std::uint32_t>(r.next()));
                }},
               {items * 4, nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar(k)};
  w.cost.int_ops = (double(iters) * chains * 8 + (chains - 1)) * items;
  w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& tally) {
    for (std::size_t item = 0; item < items; item += every) {
      std::uint32_t x[chains];
      for (int c = 0; c < chains; ++c) x[c] = get<std::uint32_t>(in[0], item + c * items);
      for (int i = 0; i < iters; ++i)
        for (int c = 0; c < chains; ++c, tally.int_ops += 8) x[c] = dp4a(x[c], k, x[c]);
      std::uint32_t s = x[0];
      for (int c = 1; c < chains; ++c, tally.int_ops += 1) s += x[c];
      const std::uint32_t got = get<std::uint32_t>(out[1], item);
      if (got != s) return differs(item, s, got);
    }
    return std::string();
  };
  if (!plan.device.dp4a) w.skip = "dp4a needs sm_61";
  return w;
}

// ---- number formats of the tensor operands -------------------------------------------

// A floating format by its field widths (tf32 is stored as 32-bit float bits); int8 apart.
struct Format {
  int bits;          // storage bits per element
  int ebits, mbits;  // exponent and mantissa fields (0, 0: two's complement integer)
  int bias;
};
const Format fp16{16, 5, 10, 15}, bf16{16, 8, 7, 127}, tf32{32, 8, 23, 127}, e4m3{8, 4, 3, 7}, e5m2{8, 5, 2, 15},
    s8{8, 0, 0, 0}, f32{32, 8, 23, 127}, s32{32, 0, 0, 0};

// Exact encoding of a small normal value (here integers of magnitude <= 135) or zero.
std::uint32_t encode(const Format& f, double v) {
  if (f.ebits == 0) return static_cast<std::uint32_t>(static_cast<std::int64_t>(v)) & (f.bits == 32 ? ~0u : (1u << f.bits) - 1);
  if (v == 0) return 0;
  int e;
  const double m = std::frexp(std::fabs(v), &e);  // |v| = m * 2^e, m in [0.5, 1)
  const std::uint32_t mant = static_cast<std::uint32_t>(std::ldexp(m * 2 - 1, f.mbits));
  const std::uint32_t sign = v < 0 ? 1u << (f.bits - 1) : 0;
  return sign | (std::uint32_t(e - 1 + f.bias) << f.mbits) | mant;
}
double decode(const Format& f, std::uint32_t x) {
  if (f.ebits == 0) {
    const std::int64_t u = f.bits == 32 ? std::int64_t(x) : std::int64_t(x & ((1u << f.bits) - 1));
    return double(u >= (std::int64_t(1) << (f.bits - 1)) ? u - (std::int64_t(1) << f.bits) : u);
  }
  const double sign = (x >> (f.bits - 1)) & 1 ? -1.0 : 1.0;
  const int ex = (x >> f.mbits) & ((1u << f.ebits) - 1);
  const double mant = x & ((1u << f.mbits) - 1);
  if (ex == 0) return sign * std::ldexp(mant, 1 - f.bias - f.mbits);  // zero or subnormal
  return sign * std::ldexp(1 + std::ldexp(mant, -f.mbits), ex - f.bias);
}
// A 32-bit word of elements all equal to v.
std::uint32_t splat(const Format& f, double v) {
  const std::uint32_t e = encode(f, v);
  std::uint32_t w = 0;
  for (int s = 0; s < 32; s += f.bits) w |= e << s;
  return w;
}
// Element i of the words of a buffer.
double element(const Format& f, const Bytes& b, std::size_t i) {
  const int per = 32 / f.bits;
  const std::uint32_t w = get<std::uint32_t>(b, i / per);
  return decode(f, f.bits == 32 ? w : (w >> (f.bits * (i % per))) & ((1u << f.bits) - 1));
}

// The value of operand `which` (0: A, 1: B) for warp or block g, tile j: +-1 or +-2.
double operand(std::size_t g, std::size_t j, int which) {
  const double v[4] = {1, -2, -1, 2};
  return v[(g * 7 + j * 3 + which) % 4];
}

// ---- mma.sync --------------------------------------------------------------------------

struct MmaType {
  const char* name;    // in benchmark names
  const char* traits;  // the struct in tensor.cu
  int k;               // m16n8kK
  Format in, acc;
  int min_arch;
};

constexpr int kTiles = 8;  // independent accumulator tiles per warp (4 and 16 measured the same)

Workload make_mma(const Plan& plan, const MmaType& t) {
  const bool test = plan.size == Size::test;
  const std::size_t local = test ? 64 : 256, items = blocks_for(plan) * local, warps = items / 32;
  // 1 ms at ~700 TFLOP/s is 7e11 flops: warps (132 * 12 * 8) * 16 mmas per trip * 4096 flops
  // (m16n8k16) per trip is 8.3e8, so about 850 trips; the K = 32 forms do twice the work
  // per mma at (up to) twice the rate.
  const int iters = test ? 2 : 1024;
  const int dregs = t.acc.bits == 16 ? 2 : 4;
  const double per_mma = 2.0 * 16 * 8 * t.k;
  const double mmas = double(2 * iters + 1) * kTiles;  // per warp
  const bool is_int = t.acc.ebits == 0;

  Workload w;
  w.identify(identity({{"family", "compute"}, {"backend", plan.device.backend}, {"op", "mma"}, {"type", t.name}}));
  w.kernel = {"tensor", "mma_sync", {{"MMA_TYPE", t.traits}, {"TILES", std::to_string(kTiles)}, {"ITERS", std::to_string(iters)}}};
  w.range = Range::linear(items, local);
  const Format in = t.in, acc = t.acc;
  const std::size_t a_words = warps * 8 * 32, b_words = warps * kTiles * 2 * 32, c_words = warps * kTiles * dregs * 32;
  const std::uint64_t seed = std::hash<std::string>{}(w.name);
  w.buffers = {{a_words * 4,  // a[warp][A, -A][4][32]
                [in](Bytes& b) {
                  for (std::size_t i = 0; i < b.size() / 4; ++i) {
                    const std::size_t warp = i / 256;
                    const double a = operand(warp, 0, 0);
                    put<std::uint32_t>(b, i, splat(in, (i / 128) % 2 ? -a : a));
                  }
                }},
               {b_words * 4,  // b[warp][tile][2][32]
                [in](Bytes& b) {
                  for (std::size_t i = 0; i < b.size() / 4; ++i)
                    put<std::uint32_t>(b, i, splat(in, operand(i / 64 / kTiles, i / 64 % kTiles, 1)));
                }},
               {c_words * 4,  // c[warp][tile][dregs][32]: odd integers in [-7, 7]
                [acc, seed](Bytes& b) {
                  Rng r(seed);
                  for (std::size_t i = 0; i < b.size() / 4; ++i) {
                    std::uint32_t w = 0;
                    for (int s = 0; s < 32; s += acc.bits) w |= encode(acc, 2.0 * double(r.next() % 8) - 7) << s;
                    put<std::uint32_t>(b, i, w);
                  }
                }},
               {c_words * 4, nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1), Arg::buf(2), Arg::buf(3)};
  (is_int ? w.cost.int_ops : w.cost.flops) = per_mma * mmas * warps;

  // Items are threads: each checked thread's 4 elements of each tile, mma by mma; every mma
  // adds the tile's dot product of K products to an element (2K operations per element).
  const int k = t.k;
  w.check = [=](const std::vector<Bytes>& inb, const std::vector<Bytes>& out, std::size_t every, Cost& tally) {
    double& counted = is_int ? tally.int_ops : tally.flops;
    const int per_word = 32 / acc.bits;
    for (std::size_t item = 0; item < items; item += every) {
      const std::size_t warp = item / 32, lane = item % 32;
      const double a = element(in, inb[0], (warp * 8 * 32 + lane) * (32 / in.bits));
      const double na = element(in, inb[0], ((warp * 8 + 4) * 32 + lane) * (32 / in.bits));
      for (int j = 0; j < kTiles; ++j) {
        const double b = element(in, inb[1], ((warp * kTiles + j) * 2 * 32 + lane) * (32 / in.bits));
        double dot = 0, ndot = 0;  // one row of A times one column of B_j, K products each
        for (int kk = 0; kk < k; ++kk) dot += a * b, ndot += na * b;
        for (int r = 0; r < dregs; ++r)
          for (int e = 0; e < per_word; ++e) {
            const std::size_t word = ((warp * kTiles + j) * dregs + r) * 32 + lane, idx = word * per_word + e;
            double v = element(acc, inb[2], idx);
            for (int i = 0; i < iters; ++i) v += dot, v += ndot;
            v += dot;
            counted += (2.0 * iters + 1) * 2 * k;
            const double got = element(acc, out[3], idx);
            if (got != v)
              return differs(idx, v, got) + " (warp " + std::to_string(warp) + ", lane " + std::to_string(lane) +
                     ", tile " + std::to_string(j) + ", register " + std::to_string(r) + ")";
          }
      }
    }
    return std::string();
  };
  if (!(t.min_arch >= 89 ? plan.device.mma_fp8 : plan.device.mma)) w.skip = std::string(t.name) + " mma needs sm_" + std::to_string(t.min_arch);
  return w;
}

// ---- wgmma -------------------------------------------------------------------------------

// One warpgroup a block and 3 blocks an SM, all resident at once (the kernel's 162 registers a
// thread allow 3): one wave, as the variants behind the kernel's form were measured.
constexpr std::size_t kBlocksPerUnit = 3;
constexpr int kN = 256;  // m64n256kK: 128 accumulator registers a thread

struct WgmmaType {
  const char* name;
  const char* traits;
  int k;  // m64n256kK
  Format in;
};


Workload make_wgmma(const Plan& plan, const WgmmaType& t) {
  const bool test = plan.size == Size::test;
  const std::size_t local = 128, blocks = test ? 2 : std::max<unsigned>(plan.device.compute_units, 1) * kBlocksPerUnit;
  const std::size_t items = blocks * local, warpgroups = blocks;
  // About 1 ms at ~900 TFLOP/s: warpgroups (132 * 3) * 2 wgmmas per trip * 2 * 64 * 256 * 16
  // flops is 4.2e8 per trip, so about 2100 trips (fp8: twice the work per wgmma at twice the rate).
  const int iters = test ? 2 : 2048;
  const double per_wgmma = 2.0 * 64 * kN * t.k;

  Workload w;
  w.identify(identity({{"family", "compute"}, {"backend", plan.device.backend}, {"op", "wgmma"}, {"type", t.name}}));
  w.kernel = {"tensor", "wgmma", {{"WGMMA_TYPE", t.traits}, {"ITERS", std::to_string(iters)}}};
  w.range = Range::linear(items, local);
  const Format in = t.in;
  const std::size_t regs = kN / 2, c_floats = warpgroups * regs * 128;
  const std::uint64_t seed = std::hash<std::string>{}(w.name);
  w.buffers = {{blocks * 12288,  // per block: A (2048 bytes), -A (2048), B (8192)
                [in](Bytes& b) {
                  for (std::size_t i = 0; i < b.size() / 4; ++i) {
                    const std::size_t block = i / 3072, word = i % 3072;
                    const double a = operand(block, 0, 0), v = word < 512 ? a : word < 1024 ? -a : operand(block, 0, 1);
                    put<std::uint32_t>(b, i, splat(in, v));
                  }
                }},
               {c_floats * 4,  // c[warpgroup][128][128]: odd integers in [-7, 7]
                [seed](Bytes& b) {
                  Rng r(seed);
                  for (std::size_t i = 0; i < b.size() / 4; ++i) put<float>(b, i, float(2.0 * double(r.next() % 8) - 7));
                }},
               {c_floats * 4, nullptr}};
  w.args = {Arg::buf(0), Arg::buf(1), Arg::buf(2)};
  w.cost.flops = per_wgmma * (2.0 * iters + 1) * warpgroups;

  const int k = t.k;
  w.check = [=](const std::vector<Bytes>& inb, const std::vector<Bytes>& out, std::size_t every, Cost& tally) {
    const int per_word = 32 / in.bits;
    for (std::size_t item = 0; item < items; item += every) {
      const std::size_t wg = item / local, thread = item % local;  // one warpgroup a block
      const double a = element(in, inb[0], wg * 3072 * per_word);
      const double na = element(in, inb[0], (wg * 3072 + 512) * per_word);
      const double b = element(in, inb[0], (wg * 3072 + 1024) * per_word);
      double dot = 0, ndot = 0;
      for (int kk = 0; kk < k; ++kk) dot += a * b, ndot += na * b;
      for (std::size_t r = 0; r < regs; ++r) {
        const std::size_t idx = (wg * regs + r) * 128 + thread;
        double v = get<float>(inb[1], idx);
        for (int i = 0; i < iters; ++i) v += dot, v += ndot;
        v += dot;
        tally.flops += (2.0 * iters + 1) * 2 * k;
        const double got = get<float>(out[2], idx);
        if (got != v)
          return differs(idx, v, got) + " (warpgroup " + std::to_string(wg) + ", thread " + std::to_string(thread) +
                 ", register " + std::to_string(r) + ")";
      }
    }
    return std::string();
  };
  if (!plan.device.wgmma) w.skip = "wgmma needs sm_90a";
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  std::vector<Workload> out;
  if (!has_kernel(plan.device, "tensor")) return out;  // PTX inline assembly: a backend with tensor.<ext>
  out.push_back(make_dp4a(plan));
  const MmaType mmas[] = {{"fp16", "mma_f16_f32", 16, fp16, f32, 80},      {"fp16_f16acc", "mma_f16_f16", 16, fp16, fp16, 80},
                          {"bf16", "mma_bf16_f32", 16, bf16, f32, 80},     {"tf32", "mma_tf32_f32", 8, tf32, f32, 80},
                          {"fp8_e4m3", "mma_e4m3_f32", 32, e4m3, f32, 89}, {"fp8_e5m2", "mma_e5m2_f32", 32, e5m2, f32, 89},
                          {"int8", "mma_s8_s32", 32, s8, s32, 80}};
  for (const MmaType& t : mmas) out.push_back(make_mma(plan, t));
  const WgmmaType wgmmas[] = {{"fp16", "wgmma_f16", 16, fp16}, {"bf16", "wgmma_bf16", 16, bf16}, {"fp8_e4m3", "wgmma_e4m3", 32, e4m3}};
  for (const WgmmaType& t : wgmmas) out.push_back(make_wgmma(plan, t));
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(tensor, build);

}  // namespace archbench
