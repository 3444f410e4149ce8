// archbench_trace_cuda_planted: a small CUDA program with the inefficiencies the tracer's report
// must find (tests/analysis/trace/cuda_trace_e2e.py, ci/gpu-trace.sh). Plain CUDA runtime and driver API,
// no archbench code; run it under CUDA_INJECTION64_PATH=libarchbench_trace_cuda.so.
//
//   archbench_trace_cuda_planted [all]        every scenario below, in this order
//   archbench_trace_cuda_planted roundtrip    H2D, kernel, D2H, then the same bytes H2D again
//   archbench_trace_cuda_planted gap [ms]     kernel, cudaDeviceSynchronize, sleep ms (default
//                                             200) with the GPU idle, kernel, synchronize
//   archbench_trace_cuda_planted twice        the same PTX loaded (JIT-compiled) as two modules
//   archbench_trace_cuda_planted inorder      kernels on disjoint buffers, all on the legacy
//                                             default stream (serialised though independent)
//
// Exit 0 on success, 77 when there is no CUDA device, 1 on error.
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_program.hpp"

namespace {

using cuda_program::check;
using cuda_program::entry;

constexpr int kN = 1 << 20;  // floats per buffer (4 MiB)

// The driver API calls used (cuda_program::entry: the program does not link libcuda).
struct Driver {
  decltype(&cuModuleLoadData) moduleLoadData;
  decltype(&cuModuleGetFunction) moduleGetFunction;
  decltype(&cuModuleUnload) moduleUnload;
  decltype(&cuLaunchKernel) launchKernel;
};
Driver drv;

double now_ms() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// y = x + 1 (the runtime API's launch path).
__global__ void planted_add(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}

// PTX of `extern "C" __global__ void planted_scale(const float* x, float* y, float a, int n)`
// (y = a * x), loaded with cuModuleLoadData: the driver JIT-compiles it at each load.
const char* kPtx = R"PTX(
.version 8.0
.target sm_75
.address_size 64
.visible .entry planted_scale(.param .u64 px, .param .u64 py, .param .f32 pa, .param .u32 pn)
{
  .reg .pred %p<2>;
  .reg .f32 %f<4>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [px];
  ld.param.u64 %rd2, [py];
  ld.param.f32 %f1, [pa];
  ld.param.u32 %r2, [pn];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r1, %r3, %r4, %r5;
  setp.ge.s32 %p1, %r1, %r2;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd3, %rd1;
  mul.wide.s32 %rd4, %r1, 4;
  add.s64 %rd5, %rd3, %rd4;
  ld.global.f32 %f2, [%rd5];
  mul.f32 %f3, %f2, %f1;
  cvta.to.global.u64 %rd6, %rd2;
  add.s64 %rd7, %rd6, %rd4;
  st.global.f32 [%rd7], %f3;
DONE:
  ret;
}
)PTX";

float* device_buffer() {
  float* p = nullptr;
  check(cudaMalloc(&p, kN * sizeof(float)), "cudaMalloc");
  return p;
}

void add(const float* x, float* y) {
  planted_add<<<kN / 256, 256>>>(x, y, kN);
  check(cudaGetLastError(), "planted_add launch");
}

void scale(CUfunction f, const float* x, float* y) {
  float a = 2.0f;
  int n = kN;
  void* args[] = {&x, &y, &a, &n};
  check(drv.launchKernel(f, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel");
}

}  // namespace

// The scenarios: exported, not inlined, so that the tracer's call paths name them.

// A kernel's output comes back to the host and goes, unchanged, back to the device.
__attribute__((noinline)) int planted_round_trip() {
  std::vector<float> h(kN), back(kN);
  for (int i = 0; i < kN; ++i) h[i] = float((i * 2654435761u) >> 8);  // not zeros: not compressible
  float *a = device_buffer(), *b = device_buffer(), *c = device_buffer();
  check(cudaMemcpy(a, h.data(), kN * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  add(a, b);
  check(cudaMemcpy(back.data(), b, kN * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  check(cudaMemcpy(c, back.data(), kN * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy H2D again");
  add(c, a);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (float* p : {a, b, c}) check(cudaFree(p), "cudaFree");
  printf("planted round trip: %d floats H2D, kernel, D2H, the same bytes H2D again\n", kN);
  return 0;
}

// The host sleeps until `ms` after it starts, whatever signals interrupt it (the sampler's do).
__attribute__((noinline)) double planted_sleep(double ms) {
  double t0 = now_ms();
  timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  long long ns = until.tv_nsec + (long long)(ms * 1e6);
  until.tv_sec += ns / 1000000000;
  until.tv_nsec = ns % 1000000000;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
  }
  return now_ms() - t0;
}

// The GPU idles while the host sleeps between two kernels.
__attribute__((noinline)) int planted_gap(double ms) {
  float *a = device_buffer(), *b = device_buffer();
  add(a, b);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  double took = planted_sleep(ms);
  add(b, a);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (float* p : {a, b}) check(cudaFree(p), "cudaFree");
  printf("planted gap: slept %.1f ms (asked %.1f ms) between two kernels\n", took, ms);
  return 0;
}

// The same PTX JIT-compiled twice, as two modules of one context.
__attribute__((noinline)) int planted_jit_twice() {
  float *a = device_buffer(), *b = device_buffer();
  CUmodule m[2];
  for (CUmodule& mod : m) {
    check(drv.moduleLoadData(&mod, kPtx), "cuModuleLoadData");
    CUfunction f;
    check(drv.moduleGetFunction(&f, mod, "planted_scale"), "cuModuleGetFunction");
    scale(f, a, b);
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (CUmodule mod : m) check(drv.moduleUnload(mod), "cuModuleUnload");
  for (float* p : {a, b}) check(cudaFree(p), "cudaFree");
  printf("planted repeated JIT: one PTX loaded as two modules\n");
  return 0;
}

// Independent kernels (disjoint buffers) serialised on the legacy default stream.
__attribute__((noinline)) int planted_in_order() {
  CUmodule mod;
  check(drv.moduleLoadData(&mod, kPtx), "cuModuleLoadData");
  CUfunction f;
  check(drv.moduleGetFunction(&f, mod, "planted_scale"), "cuModuleGetFunction");
  std::vector<float*> x, y;
  for (int i = 0; i < 4; ++i) {
    x.push_back(device_buffer());
    y.push_back(device_buffer());
  }
  for (int i = 0; i < 4; ++i) scale(f, x[i], y[i]);  // driver launches, stream 0
  for (int i = 0; i < 4; ++i) add(y[i], x[i]);       // runtime launches, stream 0
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check(drv.moduleUnload(mod), "cuModuleUnload");
  for (int i = 0; i < 4; ++i) {
    check(cudaFree(x[i]), "cudaFree");
    check(cudaFree(y[i]), "cudaFree");
  }
  printf("planted in-order: 8 independent kernels on the default stream\n");
  return 0;
}

int main(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "all";
  cuda_program::require_device();
  entry("cuModuleLoadData", drv.moduleLoadData);
  entry("cuModuleGetFunction", drv.moduleGetFunction);
  entry("cuModuleUnload", drv.moduleUnload);
  entry("cuLaunchKernel", drv.launchKernel);
  if (what == "roundtrip") return planted_round_trip();
  if (what == "gap") return planted_gap(argc > 2 ? atof(argv[2]) : 200.0);
  if (what == "twice") return planted_jit_twice();
  if (what == "inorder") return planted_in_order();
  if (what == "all")
    return planted_round_trip() | planted_gap(argc > 2 ? atof(argv[2]) : 200.0) | planted_jit_twice() |
           planted_in_order();
  fprintf(stderr, "usage: %s [all|roundtrip|gap [ms]|twice|inorder]\n", argv[0]);
  return 2;
}
