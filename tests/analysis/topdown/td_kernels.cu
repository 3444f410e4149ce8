// Kernels whose TopDown is known before it is measured (tests/analysis/topdown/topdown_gpu.py): an FMA
// chain that can issue every cycle (Retire), a stream that waits on device memory (Backend,
// Memory Bound), and a switch over P lane groups (Divergence grows with P). Each checks its
// output on the host, so the kernels did the work the test reasons about.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

// 8 independent FMA chains a thread: enough to issue one FFMA per scheduler per cycle.
__global__ void fma_chain(float* out, float a, float b, int iters) {
  float x[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) x[j] = threadIdx.x + j;
#pragma unroll 16
  for (int i = 0; i < iters; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = fmaf(x[j], a, b);
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += x[j];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// STREAM triad, grid-stride.
__global__ void stream_triad(double* a, const double* b, const double* c, double s, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    a[i] = b[i] + s * c[i];
}

// Lanes take one of `paths` branches by lane % paths; each branch is a dependent chain the
// compiler cannot merge with the others (its constant differs), so the warp runs them in turn.
__global__ void divergent(float* out, int paths, int iters) {
  const int lane = threadIdx.x % paths;
  float v = threadIdx.x;
  for (int p = 0; p < paths; ++p)
    if (lane == p)
      for (int i = 0; i < iters; ++i) v = fmaf(v, 0.999f, float(p + 1));
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

int main() {
  int dev = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int threads = 256, blocks = sms * 8, iters = 4096;
  float* f = nullptr;
  CHECK(cudaMalloc(&f, sizeof(float) * blocks * threads));
  std::vector<float> host(blocks * threads);
  for (int rep = 0; rep < 2; ++rep) fma_chain<<<blocks, threads>>>(f, 0.5f, 1.0f, iters);
  CHECK(cudaMemcpy(host.data(), f, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  // x -> 0.5x + 1 converges to 2: each chain ends at 2, the sum of eight at 16.
  for (float v : host)
    if (std::fabs(v - 16.0f) > 1e-3f) return std::fprintf(stderr, "fma_chain: %g, expected 16\n", v), 1;

  const size_t n = size_t(1) << 25;  // 3 x 256 MiB: far beyond the L2
  double *a, *b, *c;
  CHECK(cudaMalloc(&a, n * 8));
  CHECK(cudaMalloc(&b, n * 8));
  CHECK(cudaMalloc(&c, n * 8));
  std::vector<double> hb(n, 1.0), hc(n, 2.0), ha(n);
  CHECK(cudaMemcpy(b, hb.data(), n * 8, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(c, hc.data(), n * 8, cudaMemcpyHostToDevice));
  for (int rep = 0; rep < 2; ++rep) stream_triad<<<sms * 4, 1024>>>(a, b, c, 3.0, n);
  CHECK(cudaMemcpy(ha.data(), a, n * 8, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i += 4099)
    if (ha[i] != 7.0) return std::fprintf(stderr, "stream_triad: a[%zu] = %g, expected 7\n", i, ha[i]), 1;

  for (int paths : {1, 2, 4, 8, 16, 32}) {
    divergent<<<blocks, threads>>>(f, paths, 512);
    CHECK(cudaMemcpy(host.data(), f, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (int t = 0; t < threads; ++t) {  // block 0 against the same chain on the host
      float v = t;
      for (int i = 0; i < 512; ++i) v = std::fmaf(v, 0.999f, float(t % paths + 1));
      if (std::fabs(host[t] - v) > 1e-3f * std::fabs(v))
        return std::fprintf(stderr, "divergent(%d): thread %d: %g, expected %g\n", paths, t, host[t], v), 1;
    }
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("td_kernels: outputs checked\n");
  return 0;
}
