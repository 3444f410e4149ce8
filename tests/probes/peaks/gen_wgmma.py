# Generates wgmmavariants.cu: wgmma m64nNk{16,32} with A from shared memory (SS) or registers
# (RS), N = 128 or 256, f16 and e4m3, uniform operands as archbench's (bench/tensor.cpp).
def dlist(n):
    return ", ".join(f"%{i}" for i in range(n))
def dops(n):
    return ", ".join(f'"+f"(d[{i}])' for i in range(n))
out = []
out.append(r'''// wgmma variants (issue 20): does a larger N (B reused over more flops, A read once for twice
// the work) or A from registers lower the power a flop draws, and so raise the clock the power
// cap allows? Uniform operands (every entry of A is a, of B is b: archbench's), accumulators
// checked exactly. nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o wgmmavariants wgmmavariants.cu
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <string>
#include <algorithm>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
typedef unsigned long long u64;
__device__ __forceinline__ u64 desc(const void* p) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  return u64((addr & 0x3FFFF) >> 4) | (u64(128 >> 4) << 16) | (u64(256 >> 4) << 32);
}
''')
for N in (128, 256):
    R = N // 2
    for ty, k, tail_ss, tail_rs in (("f16", 16, ", 0, 0", ", 0"), ("e4m3", 32, "", "")):
        insn = f"wgmma.mma_async.sync.aligned.m64n{N}k{k}.f32.{ty}.{ty}"
        out.append(f'''__device__ __forceinline__ void ss_{ty}_{N}(float (&d)[{R}], u64 da, u64 db) {{
  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{R+2}, 0;\\n{insn} {{{dlist(R)}}}, %{R}, %{R+1}, p, 1, 1{tail_ss};\\n}}\\n"
               : {dops(R)} : "l"(da), "l"(db), "r"(1));
}}
__device__ __forceinline__ void rs_{ty}_{N}(float (&d)[{R}], const unsigned (&a)[4], u64 db) {{
  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{R+5}, 0;\\n{insn} {{{dlist(R)}}}, {{%{R}, %{R+1}, %{R+2}, %{R+3}}}, %{R+4}, p, 1, 1{tail_rs};\\n}}\\n"
               : {dops(R)} : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}}
''')
out.append(r'''
// in: per block, A (2 KiB), -A (2 KiB), B (N*32 bytes) as 32-bit words; areg/nareg the packed a
// and -a; d: [block][R][128] floats. One warpgroup a block.
#define KERNEL(name, TY, N, RS)                                                                  \
__global__ void __launch_bounds__(128) name(const uint4* __restrict__ in, unsigned areg, unsigned nareg, \
                                            float* __restrict__ out, int iters) {                \
  constexpr int R = N / 2, WORDS16 = (4096 + N * 32) / 16;                                      \
  __shared__ __align__(128) uint4 tile[WORDS16];                                                \
  for (int i = threadIdx.x; i < WORDS16; i += blockDim.x) tile[i] = in[i];                      \
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");                                  \
  __syncthreads();                                                                              \
  float d[R];                                                                                   \
  _Pragma("unroll") for (int r = 0; r < R; ++r) d[r] = float((threadIdx.x + r) % 8) * 2.0f - 7.0f; \
  const u64 da = desc(&tile[0]), dna = desc(&tile[128]), db = desc(&tile[256]);                 \
  const unsigned a[4] = {areg, areg, areg, areg}, na[4] = {nareg, nareg, nareg, nareg};         \
  _Pragma("unroll") for (int r = 0; r < R; ++r) asm volatile("" : "+f"(d[r])::"memory");        \
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");                                       \
  for (int i = 0; i < iters; ++i) {                                                             \
    if (RS) { rs_##TY##_##N(d, a, db); rs_##TY##_##N(d, na, db); }                               \
    else { ss_##TY##_##N(d, da, db); ss_##TY##_##N(d, dna, db); }                                \
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");                              \
  }                                                                                             \
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");                                \
  _Pragma("unroll") for (int r = 0; r < R; ++r) asm volatile("" : "+f"(d[r])::"memory");        \
  _Pragma("unroll") for (int r = 0; r < R; ++r) out[(size_t(blockIdx.x) * R + r) * 128 + threadIdx.x] = d[r]; \
}
KERNEL(k_ss_f16_128, f16, 128, 0)
KERNEL(k_ss_f16_256, f16, 256, 0)
KERNEL(k_rs_f16_128, f16, 128, 1)
KERNEL(k_rs_f16_256, f16, 256, 1)
KERNEL(k_ss_e4m3_128, e4m3, 128, 0)
KERNEL(k_ss_e4m3_256, e4m3, 256, 0)
KERNEL(k_rs_e4m3_128, e4m3, 128, 1)
KERNEL(k_rs_e4m3_256, e4m3, 256, 1)

typedef void (*Kern)(const uint4*, unsigned, unsigned, float*, int);
struct V { const char* name; Kern k; int n, kk; bool fp8; std::vector<double> rates; int blocks = 0; };

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  const int rounds = argc > 2 ? atoi(argv[2]) : 3;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::vector<V> vs = {{"f16 SS n128", k_ss_f16_128, 128, 16, false}, {"f16 SS n256", k_ss_f16_256, 256, 16, false},
                       {"f16 RS n128", k_rs_f16_128, 128, 16, false}, {"f16 RS n256", k_rs_f16_256, 256, 16, false},
                       {"e4m3 SS n128", k_ss_e4m3_128, 128, 32, true}, {"e4m3 SS n256", k_ss_e4m3_256, 256, 32, true},
                       {"e4m3 RS n128", k_rs_e4m3_128, 128, 32, true}, {"e4m3 RS n256", k_rs_e4m3_256, 256, 32, true}};
  // Operands: a = 1 (f16 0x3C00, e4m3 0x38), b = 2 (f16 0x4000, e4m3 0x40); -a: sign bit.
  const int max_words = (4096 + 256 * 32) / 4;
  uint4* in_f16; uint4* in_e4m3; float* out;
  std::vector<unsigned> h(max_words);
  for (int i = 0; i < max_words; ++i) h[i] = i < 512 ? 0x3C003C00u : i < 1024 ? 0xBC00BC00u : 0x40004000u;
  CK(cudaMalloc(&in_f16, max_words * 4)); CK(cudaMemcpy(in_f16, h.data(), max_words * 4, cudaMemcpyHostToDevice));
  for (int i = 0; i < max_words; ++i) h[i] = i < 512 ? 0x38383838u : i < 1024 ? 0xB8B8B8B8u : 0x40404040u;
  CK(cudaMalloc(&in_e4m3, max_words * 4)); CK(cudaMemcpy(in_e4m3, h.data(), max_words * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&out, size_t(sms) * 16 * 128 * 128 * 4));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (auto& v : vs) {
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v.k, 128, 0));
    v.blocks = sms * per_sm;
    // check: after iters trips and no last +A*B the accumulators are back at their start values
    const int iters = 3;
    v.k<<<v.blocks, 128>>>(v.fp8 ? in_e4m3 : in_f16, v.fp8 ? 0x38383838u : 0x3C003C00u, v.fp8 ? 0xB8B8B8B8u : 0xBC00BC00u, out, iters);
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    const int R = v.n / 2;
    std::vector<float> o(size_t(v.blocks) * R * 128);
    CK(cudaMemcpy(o.data(), out, o.size() * 4, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t b = 0; b < size_t(v.blocks); ++b)
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < 128; ++t)
          if (o[(b * R + r) * 128 + t] != float((t + r) % 8) * 2.0f - 7.0f) ++bad;
    printf("%-14s %3d blocks an SM, check %s\n", v.name, per_sm, bad ? "FAILED" : "ok");
    if (bad) return 1;
  }
  // a launch of ~2 ms; batches for `seconds` per variant per round; rate of the second half
  for (int r = 0; r < rounds; ++r)
    for (auto& v : vs) {
      const double per_wgmma = 2.0 * 64 * v.n * v.kk;
      const int iters = int(2e-3 * 900e12 * (v.fp8 ? 2 : 1) / (per_wgmma * 2 * v.blocks));
      const double flops = per_wgmma * 2.0 * iters * v.blocks;
      std::vector<double> rates;
      double spent = 0;
      while (spent < seconds) {
        CK(cudaEventRecord(e0));
        for (int k = 0; k < 20; ++k) v.k<<<v.blocks, 128>>>(v.fp8 ? in_e4m3 : in_f16, 0x3C003C00u, 0xBC00BC00u, out, iters);
        CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
        spent += ms * 1e-3;
        rates.push_back(20 * flops / (ms * 1e-3) / 1e12);
      }
      std::sort(rates.begin() + rates.size() / 2, rates.end());
      v.rates.push_back(rates[rates.size() / 2 + rates.size() / 4]);
      printf("round %d %-14s %8.1f TFLOP/s (steady half; first batch %.1f)\n", r, v.name, v.rates.back(), rates[0]);
      fflush(stdout);
    }
  for (auto& v : vs) {
    std::sort(v.rates.begin(), v.rates.end());
    printf("%-14s median %8.1f TFLOP/s\n", v.name, v.rates[v.rates.size() / 2]);
  }
  return 0;
}
''')
open("wgmmavariants.cu", "w").write("".join(out))
