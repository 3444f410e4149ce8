// Pointer-chase latency seen from each SM: one chain per SM (the first block that lands on it,
// by %smid), all SMs at once (one load in flight each: no contention), timed in-kernel with
// clock64 over the timed hops after a warm pass. Prints min / median / max cycles a hop over the
// SMs for each working set, and the SMs at the extremes.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <numeric>
#include <random>
#include <cuda_runtime.h>

__device__ __forceinline__ unsigned smid() { unsigned r; asm volatile("mov.u32 %0, %%smid;" : "=r"(r)); return r; }

__global__ void chase(const uint64_t* __restrict__ start, int warm, int hops, int* claimed, double* cyc, uint64_t* sink) {
  if (threadIdx.x != 0) return;
  const unsigned sm = smid();
  if (atomicCAS(&claimed[sm], 0, 1) != 0) return;
  uint64_t p = reinterpret_cast<uint64_t>(start);
  for (int i = 0; i < warm; ++i) p = *reinterpret_cast<const volatile uint64_t*>(p);
  const long long t0 = clock64();
#pragma unroll 16
  for (int i = 0; i < hops; ++i) p = *reinterpret_cast<const volatile uint64_t*>(p);
  const long long t1 = clock64();
  cyc[sm] = double(t1 - t0) / hops;
  sink[sm] = p;
}

int main() {
  cudaDeviceProp prop; cudaGetDeviceProperties(&prop, 0);
  const int sms = prop.multiProcessorCount;
  printf("%s, %d SMs; cycles a hop per SM (one chain per SM, all at once)\n", prop.name, sms);
  const size_t line = 128;
  int* claimed; double* cyc; uint64_t* sink;
  cudaMalloc(&claimed, 1024 * sizeof(int)); cudaMalloc(&cyc, 1024 * sizeof(double)); cudaMalloc(&sink, 1024 * 8);
  for (size_t bytes : {size_t(16) << 10, size_t(1) << 20, size_t(4) << 20, size_t(16) << 20, size_t(256) << 20}) {
    const size_t n = bytes / line;
    uint64_t* buf; cudaMalloc(&buf, bytes);
    std::vector<size_t> order(n); std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin() + 1, order.end(), std::mt19937_64(42));
    std::vector<uint64_t> host(bytes / 8, 0);
    const uint64_t base = reinterpret_cast<uint64_t>(buf);
    for (size_t i = 0; i < n; ++i) host[order[i] * line / 8] = base + order[(i + 1) % n] * line;
    cudaMemcpy(buf, host.data(), bytes, cudaMemcpyHostToDevice);
    const int warm = int(std::min<size_t>(n, 1 << 20)), hops = 8192;
    std::vector<std::vector<double>> runs;
    for (int r = 0; r < 3; ++r) {
      cudaMemset(claimed, 0, 1024 * sizeof(int)); cudaMemset(cyc, 0, 1024 * sizeof(double));
      chase<<<sms * 8, 32>>>(buf, warm, hops, claimed, cyc, sink);
      if (cudaDeviceSynchronize() != cudaSuccess) { printf("launch failed\n"); return 1; }
      std::vector<double> c(sms); cudaMemcpy(c.data(), cyc, sms * sizeof(double), cudaMemcpyDeviceToHost);
      runs.push_back(c);
    }
    std::vector<double> med(sms);
    for (int s = 0; s < sms; ++s) { double v[3] = {runs[0][s], runs[1][s], runs[2][s]}; std::sort(v, v + 3); med[s] = v[1]; }
    std::vector<int> idx(sms); std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return med[a] < med[b]; });
    const int missing = int(std::count(med.begin(), med.end(), 0.0));
    printf("%9zu B: min %.1f (SM %d)  p10 %.1f  median %.1f  p90 %.1f  max %.1f (SM %d)%s\n", bytes, med[idx[missing]], idx[missing],
           med[idx[missing + (sms - missing) / 10]], med[idx[missing + (sms - missing) / 2]], med[idx[sms - 1 - (sms - missing) / 10]],
           med[idx[sms - 1]], idx[sms - 1], missing ? " (some SMs got no block)" : "");
    printf("   per SM:");
    for (int s = 0; s < sms; ++s) printf(" %.0f", med[s]);
    printf("\n");
    cudaFree(buf);
  }
  return 0;
}
