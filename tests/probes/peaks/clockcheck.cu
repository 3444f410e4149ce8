// Issue 20 evidence: the SM clock held inside each compute peak kernel, read in the kernel
// (clock64 against %globaltimer, per block), and the work done per SM cycle at that clock.
// Kernels mirror archbench's timed loops (FFMA/DFMA/IMAD chains; mma.sync m16n8k16 with
// 8 accumulator tiles, A and -A). Event-timed medians of 7 launches after 2 warm-ups.
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <functional>
#include <string>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)
typedef unsigned int uint;
struct Rec { unsigned long long c0, c1, t0, t1; };
__device__ __forceinline__ unsigned long long gtime() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
#define BEGIN __syncthreads(); unsigned long long c0 = clock64(), t0 = gtime();
#define END __syncthreads(); if (threadIdx.x == 0) { rec[blockIdx.x] = {c0, (unsigned long long)clock64(), t0, gtime()}; }

template <class T, int CH>
__global__ void fma_chains(const T* in, T* out, T a, T b, int iters, Rec* rec) {
  size_t gid = blockIdx.x * size_t(blockDim.x) + threadIdx.x, n = size_t(gridDim.x) * blockDim.x;
  T x[CH];
#pragma unroll
  for (int c = 0; c < CH; ++c) x[c] = in[gid + c * n];
  BEGIN
#pragma unroll 16
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < CH; ++c) x[c] = fma(x[c], a, b);
#pragma unroll
    for (int c = 0; c < CH; ++c) x[c] = fma(x[c], b, a);
  }
  END
  T s = x[0];
#pragma unroll
  for (int c = 1; c < CH; ++c) s += x[c];
  out[gid] = s;
}

__global__ void imad_chains(const uint* in, uint* out, uint a, uint b, int iters, Rec* rec) {
  size_t gid = blockIdx.x * size_t(blockDim.x) + threadIdx.x, n = size_t(gridDim.x) * blockDim.x;
  uint x[16];
#pragma unroll
  for (int c = 0; c < 16; ++c) x[c] = in[gid + c * n];
  BEGIN
#pragma unroll 16
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < 16; c += 2) x[c] = x[c] * x[c + 1] + a;
#pragma unroll
    for (int c = 0; c < 16; c += 2) x[c + 1] = x[c + 1] * x[c] + b;
  }
  END
  uint s = 0;
#pragma unroll
  for (int c = 0; c < 16; ++c) s += x[c];
  out[gid] = s;
}

__device__ __forceinline__ void hmma(uint (&d)[4], const uint (&a)[4], const uint (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// MODE 0: archbench's loop (D_j += A B_j for all j, then D_j += (-A) B_j). MODE 1: A only.
// MODE 2: one B, A_j per tile (A changes every mma, B reused).
template <int TILES, int MODE>
__global__ void mma_k(const uint* in, uint* out, int iters, Rec* rec) {
  const uint lane = threadIdx.x % 32;
  uint a[4], na[4], b[TILES][2], d[TILES][4], aj[MODE == 2 ? TILES : 1][4];
#pragma unroll
  for (int r = 0; r < 4; ++r) { a[r] = in[r * 32 + lane]; na[r] = in[(4 + r) * 32 + lane]; }
#pragma unroll
  for (int j = 0; j < TILES; ++j) {
    b[j][0] = in[(8 + (j & 1)) * 32 + lane]; b[j][1] = in[(10 + (j & 1)) * 32 + lane];
#pragma unroll
    for (int r = 0; r < 4; ++r) d[j][r] = 0;
    if (MODE == 2) for (int r = 0; r < 4; ++r) aj[MODE == 2 ? j : 0][r] = in[((j & 1) ? 4 + r : r) * 32 + lane];
  }
  BEGIN
  for (int i = 0; i < iters; ++i) {
    if (MODE == 0) {
#pragma unroll
      for (int j = 0; j < TILES; ++j) hmma(d[j], a, b[j]);
#pragma unroll
      for (int j = 0; j < TILES; ++j) hmma(d[j], na, b[j]);
    } else if (MODE == 1) {
#pragma unroll
      for (int j = 0; j < 2 * TILES; ++j) hmma(d[j % TILES], a, b[j % TILES]);
    } else {
#pragma unroll
      for (int j = 0; j < 2 * TILES; ++j) hmma(d[j % TILES], aj[MODE == 2 ? j % TILES : 0], b[0]);
    }
  }
  END
  uint s = 0;
#pragma unroll
  for (int j = 0; j < TILES; ++j) for (int r = 0; r < 4; ++r) s ^= d[j][r];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

int sms;
void run(const char* name, const void* fn, int threads, int blocks_per_sm, double work_per_thread,
         std::function<void(int blocks, Rec*)> launch) {
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, threads, 0));
  cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, fn));
  int bps = blocks_per_sm > 0 ? blocks_per_sm : occ;
  int blocks = bps * sms;
  Rec* rec; CK(cudaMalloc(&rec, blocks * sizeof(Rec)));
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  std::vector<double> ms, mhz, act;
  for (int r = 0; r < 9; ++r) {
    cudaEventRecord(e0); launch(blocks, rec); cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
    float t; cudaEventElapsedTime(&t, e0, e1);
    std::vector<Rec> h(blocks); CK(cudaMemcpy(h.data(), rec, blocks * sizeof(Rec), cudaMemcpyDeviceToHost));
    std::vector<double> f; double tmin = 1e30, tmax = 0;
    for (auto& x : h) { f.push_back(double(x.c1 - x.c0) / double(x.t1 - x.t0) * 1e3); tmin = std::min(tmin, double(x.t0)); tmax = std::max(tmax, double(x.t1)); }
    std::sort(f.begin(), f.end());
    if (r >= 2) { ms.push_back(t); mhz.push_back(f[f.size() / 2]); act.push_back((tmax - tmin) * 1e-6); }
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  double work = work_per_thread * double(blocks) * threads;
  double rate = work / (med(ms) * 1e-3);
  double rate_in = work / (med(act) * 1e-3);
  double clk = med(mhz);
  printf("%-34s regs %3d occ %2d blocks/SM %2d (%s) | event %.4f ms %8.3f T/s | in-kernel span %.4f ms %8.3f T/s | clock %7.1f MHz | per SM-cycle %8.1f (event) %8.1f (span)\n",
         name, fa.numRegs, occ, bps, bps <= occ ? "1 wave" : "waves", med(ms), rate * 1e-12, med(act), rate_in * 1e-12, clk,
         rate / (sms * clk * 1e6), rate_in / (sms * clk * 1e6));
  cudaFree(rec);
}

// Soak: the same launch back to back for `seconds`; every 100 ms, the median in-kernel clock
// of the launches in it and their rate, so that a controller's reaction shows over time.
void soak(const char* name, const void* fn, int threads, double work_per_thread, double seconds,
          std::function<void(int blocks, Rec*)> launch) {
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, threads, 0));
  int blocks = occ * sms;
  Rec* rec; CK(cudaMalloc(&rec, blocks * sizeof(Rec)));
  std::vector<Rec> h(blocks);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  double t = 0, next = 0; std::vector<double> f, r;
  printf("soak %s: t_ms in-kernel_MHz T/s (medians over each 100 ms)\n", name);
  while (t < seconds * 1e3) {
    cudaEventRecord(e0); launch(blocks, rec); cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
    float ms; cudaEventElapsedTime(&ms, e0, e1); t += ms;
    CK(cudaMemcpy(h.data(), rec, blocks * sizeof(Rec), cudaMemcpyDeviceToHost));
    std::vector<double> g; for (auto& x : h) g.push_back(double(x.c1 - x.c0) / double(x.t1 - x.t0) * 1e3);
    std::sort(g.begin(), g.end()); f.push_back(g[g.size() / 2]); r.push_back(work_per_thread * blocks * threads / (ms * 1e-3));
    if (t >= next) {
      std::sort(f.begin(), f.end()); std::sort(r.begin(), r.end());
      printf("  %7.1f %7.1f %8.3f\n", t, f[f.size() / 2], r[r.size() / 2] * 1e-12);
      f.clear(); r.clear(); next += 100;
    }
  }
  cudaFree(rec);
}

int main(int argc, char** argv) {
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0)); sms = p.multiProcessorCount;
  int drv; cudaDriverGetVersion(&drv);
  printf("%s, %d SMs, driver API %d\n", p.name, sms, drv);
  const size_t N = size_t(sms) * 2048 * 16;
  void *in, *out; CK(cudaMalloc(&in, N * 8)); CK(cudaMalloc(&out, N * 8));
  { std::vector<float> h(N * 2); for (size_t i = 0; i < h.size(); ++i) h[i] = 1.0f + (i % 1000) * 1e-3f; CK(cudaMemcpy(in, h.data(), N * 8, cudaMemcpyHostToDevice)); }
  if (argc > 1) {
    soak("mma fp16 A,-A 8 tiles, 4 blocks/SM", (const void*)mma_k<8, 0>, 256, 4096.0 / 32 * 16 * 2048, 3.0,
         [&](int b, Rec* r) { mma_k<8, 0><<<b, 256>>>((uint*)in, (uint*)out, 2048, r); });
    soak("ffma 16 chains, 8 blocks/SM", (const void*)fma_chains<float, 16>, 256, 2.0 * 32 * 16384, 2.0,
         [&](int b, Rec* r) { fma_chains<float, 16><<<b, 256>>>((float*)in, (float*)out, 0.999f, 0.0078125f, 16384, r); });
    return 0;
  }
  for (int round = 0; round < 2; ++round) {
    printf("-- round %d\n", round);
    for (int bps : {6, 0}) {
      int it = 16384 * 8 / 6 * 6 / (bps ? bps : 8);
      run("ffma 16 chains (512 FFMA/loop)", (const void*)fma_chains<float, 16>, 256, bps, 2.0 * 32 * it, [&](int b, Rec* r) { fma_chains<float, 16><<<b, 256>>>((float*)in, (float*)out, 0.999f, 0.0078125f, it, r); });
    }
    for (int bps : {6, 0}) {
      int it = 8192 * 8 / 6 * 6 / (bps ? bps : 8);
      run("dfma 16 chains", (const void*)fma_chains<double, 16>, 256, bps, 2.0 * 32 * it, [&](int b, Rec* r) { fma_chains<double, 16><<<b, 256>>>((double*)in, (double*)out, 0.999, 0.0078125, it, r); });
      run("imad 16 chains (pairs)", (const void*)imad_chains, 256, bps, 2.0 * 16 * it, [&](int b, Rec* r) { imad_chains<<<b, 256>>>((uint*)in, (uint*)out, 2654435761u, 40503u, it, r); });
    }
    for (int bps : {12, 0, 1, 2}) {
      int it = 2048;
      run(("mma A,-A 8 tiles, bps " + std::to_string(bps)).c_str(), (const void*)mma_k<8, 0>, 256, bps, 4096.0 / 32 * 16 * it, [&](int b, Rec* r) { mma_k<8, 0><<<b, 256>>>((uint*)in, (uint*)out, it, r); });
    }
    run("mma A only 8 tiles", (const void*)mma_k<8, 1>, 256, 0, 4096.0 / 32 * 16 * 2048, [&](int b, Rec* r) { mma_k<8, 1><<<b, 256>>>((uint*)in, (uint*)out, 2048, r); });
    run("mma B shared, A_j 8 tiles", (const void*)mma_k<8, 2>, 256, 0, 4096.0 / 32 * 16 * 2048, [&](int b, Rec* r) { mma_k<8, 2><<<b, 256>>>((uint*)in, (uint*)out, 2048, r); });
    run("mma A,-A 4 tiles, 128 thr", (const void*)mma_k<4, 0>, 128, 0, 4096.0 / 32 * 8 * 4096, [&](int b, Rec* r) { mma_k<4, 0><<<b, 128>>>((uint*)in, (uint*)out, 4096, r); });
    run("mma A,-A 16 tiles", (const void*)mma_k<16, 0>, 256, 0, 4096.0 / 32 * 32 * 1024, [&](int b, Rec* r) { mma_k<16, 0><<<b, 256>>>((uint*)in, (uint*)out, 1024, r); });
  }
  return 0;
}
