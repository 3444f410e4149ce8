// Which clock moved when archbench's SM-bound figures read 0.75% higher: 200 back-to-back launches
// of one wave of FFMA groups (about 0.4 s), timed by the host (steady_clock around the batch, after
// a synchronisation), by CUDA events around the same batch, and inside the kernels (each group's
// clock64 cycles, summed over the launches). Prints TFLOP/s by host time and by event time, the event/host ratio,
// and the SM clock from the longest group's cycles over host and over event time.
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

__global__ void fma16(float* out, float a, float b, int trips, unsigned long long* cyc) {
  const unsigned long long c0 = clock64();
  float x[16];
#pragma unroll
  for (int c = 0; c < 16; ++c) x[c] = threadIdx.x + c;
  for (int i = 0; i < trips; ++i) {
#pragma unroll
    for (int u = 0; u < 16; ++u) {
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
  if (threadIdx.x == 0) cyc[1 + blockIdx.x] += clock64() - c0;
}

int main() {
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  const int sms = p.multiProcessorCount, blocks = sms * 6, threads = 256, trips = 620, launches = 200;
  float* out;
  unsigned long long* cyc;
  cudaMalloc(&out, sizeof(float) * blocks * threads);
  cudaMalloc(&cyc, sizeof(unsigned long long) * (blocks + 1));
  cudaMemset(cyc, 0, sizeof(unsigned long long) * (blocks + 1));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int w = 0; w < 20; ++w) fma16<<<blocks, threads>>>(out, 1.0001f, 0.9999f, trips, cyc);
  cudaDeviceSynchronize();
  cudaMemset(cyc, 0, sizeof(unsigned long long) * (blocks + 1));
  const auto h0 = std::chrono::steady_clock::now();
  cudaEventRecord(e0);
  for (int l = 0; l < launches; ++l) fma16<<<blocks, threads>>>(out, 1.0001f, 0.9999f, trips, cyc);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  const auto h1 = std::chrono::steady_clock::now();
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  std::vector<unsigned long long> c(blocks + 1);
  cudaMemcpy(c.data(), cyc, sizeof(unsigned long long) * (blocks + 1), cudaMemcpyDeviceToHost);
  double cycles = 0;  // the longest group's cycles over all launches (groups end at different times)
  for (int b = 0; b < blocks; ++b) cycles = std::max(cycles, double(c[1 + b]));
  const double host_s = std::chrono::duration<double>(h1 - h0).count(), ev_s = ms * 1e-3;
  const double flops = 2.0 * 32 * 16 * double(trips) * blocks * threads * launches;
  std::printf("host %.4f s event %.4f s (event/host %.4f) | TFLOP/s by host %.2f, by event %.2f | the longest group's "
              "cycles over host time %.1f MHz, over event time %.1f MHz\n",
              host_s, ev_s, ev_s / host_s, flops / host_s / 1e12, flops / ev_s / 1e12, cycles / host_s / 1e6,
              cycles / ev_s / 1e6);
  return 0;
}
