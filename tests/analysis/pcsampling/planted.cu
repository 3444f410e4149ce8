// Kernels whose stalls and warp efficiency are known before they are sampled
// (tests/analysis/pcsampling/pcsampling_gpu.py):
//   hot_chase   one line chases pointers through a random cycle in device memory (far beyond the
//               L2) among lines of independent arithmetic: that line is the hottest, and its
//               stalls are long-scoreboard waits for the loads.
//   lanes<P>    lanes take one of P paths by lane % P, each a dependent chain the compiler cannot
//               merge: P = 1..32 paths, warp efficiency about 1/P.
// Each checks its output on the host, so the kernels did the work the test reasons about.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../topdown/check.cuh"

__global__ void hot_chase(const unsigned* next, float* out, unsigned start, int steps, float a, float b) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned p = start + t;  // each thread from its own element of the one cycle
  float x = float(t), y = 1.0f, z = 2.0f;
  for (int i = 0; i < steps; ++i) {
    x = fmaf(x, a, b);
    y = fmaf(y, a, x);
    p = next[p];  // PLANTED: the chase
    z = fmaf(z, a, y);
    x = fmaf(x, b, z);
  }
  out[t] = x + y + z + float(p & 1u);
}

template <int P>
__global__ void lanes(float* out, int iters) {
  const int lane = threadIdx.x % P;
  float v = threadIdx.x;
  for (int p = 0; p < P; ++p)
    if (lane == p)
      for (int i = 0; i < iters; ++i) v = fmaf(v, 0.999f, float(p + 1));  // PLANTED: the paths
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

template <int P>
void run_lanes(float* f, std::vector<float>& host, int blocks, int threads, int iters) {
  lanes<P><<<blocks, threads>>>(f, iters);
  CHECK(cudaMemcpy(host.data(), f, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int t = 0; t < threads; ++t) {  // the first block against the host's chain
    const int lane = t % P;
    float v = t;
    for (int i = 0; i < iters; ++i) v = std::fma(v, 0.999f, float(lane + 1));
    if (std::fabs(host[t] - v) > 1e-3f * std::fabs(v) + 1e-3f)
      std::fprintf(stderr, "lanes<%d>: thread %d %g, expected %g\n", P, t, host[t], v), std::exit(1);
  }
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 3;
  int dev = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  // A single random cycle over 32 Mi elements (128 MiB, beyond any L2), Sattolo's shuffle.
  const unsigned n = 1u << 25;
  std::vector<unsigned> next(n);
  for (unsigned i = 0; i < n; ++i) next[i] = i;
  unsigned long long r = 88172645463325252ull;
  for (unsigned i = n - 1; i > 0; --i) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    std::swap(next[i], next[r % i]);
  }
  unsigned* d_next = nullptr;
  float* f = nullptr;
  const int threads = 256, blocks = sms * 4, steps = 2000;
  CHECK(cudaMalloc(&d_next, sizeof(unsigned) * n));
  CHECK(cudaMalloc(&f, sizeof(float) * blocks * threads));
  CHECK(cudaMemcpy(d_next, next.data(), sizeof(unsigned) * n, cudaMemcpyHostToDevice));
  std::vector<float> host(size_t(blocks) * threads);
  for (int rep = 0; rep < reps; ++rep) hot_chase<<<blocks, threads>>>(d_next, f, 12345u, steps, 0.5f, 0.25f);
  CHECK(cudaMemcpy(host.data(), f, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  {  // thread 0 on the host
    unsigned p = 12345u;
    float x = 0, y = 1, z = 2;
    for (int i = 0; i < steps; ++i) {
      x = std::fma(x, 0.5f, 0.25f), y = std::fma(y, 0.5f, x), p = next[p];
      z = std::fma(z, 0.5f, y), x = std::fma(x, 0.25f, z);
    }
    const float want = x + y + z + float(p & 1u);
    if (std::fabs(host[0] - want) > 1e-3f * std::fabs(want) + 1e-3f)
      return std::fprintf(stderr, "hot_chase: %g, expected %g\n", host[0], want), 1;
  }
  const int iters = 2048;
  for (int rep = 0; rep < reps; ++rep) {
    run_lanes<1>(f, host, blocks, threads, iters);
    run_lanes<2>(f, host, blocks, threads, iters);
    run_lanes<4>(f, host, blocks, threads, iters);
    run_lanes<8>(f, host, blocks, threads, iters);
    run_lanes<16>(f, host, blocks, threads, iters);
    run_lanes<32>(f, host, blocks, threads, iters);
  }
  CHECK(cudaFree(d_next));
  CHECK(cudaFree(f));
  std::printf("planted: hot_chase and lanes<1..32> checked\n");
  return 0;
}
