// Where the last 1% of the FFMA peak goes: one wave of groups, each doing the same FFMA chains;
// every group records %globaltimer and clock64 at its start and end. Prints, per configuration:
// event-timed TFLOP/s, the in-kernel span (first start to last end) against the event time, the
// ramp (spread of starts) and tail (spread of ends), and the SM clock the cycles imply
// (clock64 delta / globaltimer delta), with the FFMA limit at that clock.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <int UNR>
__global__ void fma_kernel(float* out, float a, float b, int trips, unsigned long long* rec) {
  __shared__ unsigned long long t0, c0;
  if (threadIdx.x == 0) { t0 = gtimer(); c0 = clock64(); }
  float x[16];
#pragma unroll
  for (int c = 0; c < 16; ++c) x[c] = threadIdx.x + c;
  for (int i = 0; i < trips; ++i) {
#pragma unroll
    for (int u = 0; u < UNR; ++u) {
#pragma unroll
      for (int c = 0; c < 16; ++c) x[c] = fmaf(x[c], a, b);
#pragma unroll
      for (int c = 0; c < 16; ++c) x[c] = fmaf(x[c], b, a);
    }
  }
  float s = 0;
#pragma unroll
  for (int c = 0; c < 16; ++c) s += x[c];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long t1 = gtimer(), c1 = clock64();
    rec[4 * blockIdx.x + 0] = t0; rec[4 * blockIdx.x + 1] = t1;
    rec[4 * blockIdx.x + 2] = c0; rec[4 * blockIdx.x + 3] = c1;
  }
}

template <int UNR>
void run(int sms, int blocks_per_sm, int threads, double ms_target) {
  const int blocks = sms * blocks_per_sm;
  float* out; unsigned long long* rec;
  cudaMalloc(&out, sizeof(float) * blocks * threads);
  cudaMalloc(&rec, sizeof(unsigned long long) * 4 * blocks);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  // calibrate trips for ms_target
  int trips = 64;
  fma_kernel<UNR><<<blocks, threads>>>(out, 1.0001f, 0.9999f, trips, rec);
  cudaEventRecord(e0); fma_kernel<UNR><<<blocks, threads>>>(out, 1.0001f, 0.9999f, trips, rec); cudaEventRecord(e1);
  cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1);
  trips = std::max(1, int(trips * ms_target / ms));
  for (int w = 0; w < 3; ++w) fma_kernel<UNR><<<blocks, threads>>>(out, 1.0001f, 0.9999f, trips, rec);
  std::vector<double> t, span, ramp, tail, mhz;
  std::vector<unsigned long long> h(4 * blocks);
  for (int r = 0; r < 9; ++r) {
    cudaEventRecord(e0); fma_kernel<UNR><<<blocks, threads>>>(out, 1.0001f, 0.9999f, trips, rec); cudaEventRecord(e1);
    cudaEventSynchronize(e1); cudaEventElapsedTime(&ms, e0, e1);
    cudaMemcpy(h.data(), rec, sizeof(unsigned long long) * 4 * blocks, cudaMemcpyDeviceToHost);
    unsigned long long s0 = ~0ull, s1 = 0, e0m = ~0ull, e1m = 0; double f = 0;
    for (int b = 0; b < blocks; ++b) {
      s0 = std::min(s0, h[4 * b]); s1 = std::max(s1, h[4 * b]);
      e0m = std::min(e0m, h[4 * b + 1]); e1m = std::max(e1m, h[4 * b + 1]);
      f += double(h[4 * b + 3] - h[4 * b + 2]) / double(h[4 * b + 1] - h[4 * b]) * 1e3;
    }
    t.push_back(ms); span.push_back((e1m - s0) * 1e-6); ramp.push_back((s1 - s0) * 1e-3); tail.push_back((e1m - e0m) * 1e-3);
    mhz.push_back(f / blocks);
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  const double flops = 2.0 * 32 * UNR * double(trips) * blocks * threads;
  const double tf = flops / (med(t) * 1e-3) / 1e12, tf_span = flops / (med(span) * 1e-3) / 1e12;
  const double lim = sms * 128 * 2 * med(mhz) * 1e6 / 1e12;
  printf("unroll %2d  %2d groups/SM x %4d  trips %6d: event %.3f ms -> %.2f TFLOP/s | in-kernel span %.3f ms -> %.2f | ramp %.1f us, tail %.1f us | SM clock from cycles %.1f MHz -> limit %.2f, event %.2f%%, span %.2f%% of it\n",
         UNR, blocks_per_sm, threads, trips, med(t), tf, med(span), tf_span, med(ramp), med(tail), med(mhz), lim, 100 * tf / lim, 100 * tf_span / lim);
  cudaFree(out); cudaFree(rec);
}

int main() {
  cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);
  printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
  const int sms = p.multiProcessorCount;
  for (double ms : {2.0, 20.0}) {
    run<4>(sms, 6, 256, ms);
    run<16>(sms, 6, 256, ms);
    run<64>(sms, 6, 256, ms);
    run<16>(sms, 8, 256, ms);
    run<16>(sms, 4, 256, ms);
  }
  return 0;
}
