// archbench_trace_cuda_apis: what a typical CUDA application does, written as one would outside
// this project (plain runtime and driver API, cuBLAS where the build found it), for the CUDA
// tracer's end-to-end test (tests/analysis/trace/cuda_trace_e2e.py). Each scenario checks its results and
// prints one deterministic line; the tracer must change neither that output nor the exit status.
//
//   archbench_trace_cuda_apis [all]     every scenario below but crash, in this order
//   archbench_trace_cuda_apis async     cudaMallocAsync from the default pool and
//                                       cudaMallocFromPoolAsync from a pool of its own
//   archbench_trace_cuda_apis threads   two std::threads, a stream each; one waits on the
//                                       other's event
//   archbench_trace_cuda_apis graph     a graph captured from a stream, instantiated, launched 5x
//   archbench_trace_cuda_apis nodes     a graph built node by node (memset, two kernels), 3x
//   archbench_trace_cuda_apis managed   cudaMallocManaged, prefetch to the device, kernel, back
//   archbench_trace_cuda_apis contexts  a second context (cuCtxCreate, cuCtxPushCurrent) runs a kernel
//   archbench_trace_cuda_apis cublas    cublasSgemm (when built with ARCHBENCH_APIS_CUBLAS)
//   archbench_trace_cuda_apis crash     3 kernels, a synchronisation, then a segmentation fault
//
// Exit 0 on success, 77 when there is no CUDA device, 1 on a failed call or a wrong result.
#include <cstdio>
#include <cstdlib>
#include <future>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#ifdef ARCHBENCH_APIS_CUBLAS
#include <cublas_v2.h>
#endif

#include "cuda_program.hpp"

namespace {

using cuda_program::check;
using cuda_program::entry;

constexpr int kN = 1 << 16;  // floats per buffer
constexpr int kBlock = 256;

float* device_floats() {
  float* p = nullptr;
  check(cudaMalloc(&p, kN * sizeof(float)), "cudaMalloc");
  return p;
}

void free_all(std::initializer_list<float*> ps) {
  for (float* p : ps) check(cudaFree(p), "cudaFree");
}

// Every element of the device buffer `d` (kN floats) equals `want`; else says which and exits 1.
void expect(const float* d, float want, const char* what) {
  std::vector<float> h(kN);
  check(cudaMemcpy(h.data(), d, kN * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  for (int i = 0; i < kN; ++i)
    if (h[i] != want) {
      fprintf(stderr, "cuda_apis: %s: element %d is %g, expected %g\n", what, i, h[i], want);
      exit(1);
    }
}

// x = v
__global__ void apis_fill(float* x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}

// y = a * x + y
__global__ void apis_axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

void fill(float* x, float v, cudaStream_t s = nullptr) {
  apis_fill<<<kN / kBlock, kBlock, 0, s>>>(x, v, kN);
  check(cudaGetLastError(), "apis_fill launch");
}

void axpy(float a, const float* x, float* y, cudaStream_t s = nullptr) {
  apis_axpy<<<kN / kBlock, kBlock, 0, s>>>(a, x, y, kN);
  check(cudaGetLastError(), "apis_axpy launch");
}

// Driver calls (cuda_program::entry: the program does not link libcuda), with the types of the
// versions asked for (CUDA 12.0's), whatever the headers' newest ones; but cuCtxCreate as of 12.5,
// cuCtxCreate_v4 (a CUctxCreateParams* before the flags), what cuda.h's cuCtxCreate is in CUDA 13:
// on CUDA 13 (driver 580) the one asked for as of 12.0, called with (ctx, flags, device), failed
// natively with CUDA_ERROR_INVALID_DEVICE (101), the arguments read as v4's.
struct Driver {
#if CUDA_VERSION >= 12050
  CUresult (*ctxCreate)(CUcontext*, CUctxCreateParams*, unsigned int, CUdevice);
#else
  CUresult (*ctxCreate)(CUcontext*, unsigned int, CUdevice);
#endif
  CUresult (*ctxDestroy)(CUcontext);
  CUresult (*ctxPushCurrent)(CUcontext);
  CUresult (*ctxPopCurrent)(CUcontext*);
  CUresult (*deviceGet)(CUdevice*, int);
};
Driver drv;

int* volatile g_null = nullptr;  // read at run time: the fault below is a real one

}  // namespace

// The scenarios: exported, not inlined, so that the tracer's call paths name them.

// Stream-ordered allocations: one from the device's default pool, one from a pool of our own.
__attribute__((noinline)) void apis_async_alloc() {
  int dev = 0, pools = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, dev), "cudaDeviceGetAttribute");
  if (!pools) {
    printf("async: the device has no memory pools\n");
    return;
  }
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = dev;
  cudaMemPool_t pool;
  check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  float *a = nullptr, *b = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&a), kN * sizeof(float), s), "cudaMallocAsync");
  check(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&b), kN * sizeof(float), pool, s), "cudaMallocFromPoolAsync");
  fill(a, 1.0f, s);
  fill(b, 2.0f, s);
  axpy(3.0f, a, b, s);  // b = 3 * 1 + 2
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  expect(b, 5.0f, "async");
  check(cudaFreeAsync(a, s), "cudaFreeAsync");
  check(cudaFreeAsync(b, s), "cudaFreeAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  check(cudaMemPoolDestroy(pool), "cudaMemPoolDestroy");
  printf("async: default pool and own pool, %d floats, 3 kernels, ok\n", kN);
}

// One of two threads: thread 0 fills x and records its event; thread 1 has its stream wait for
// that event (recorded on another thread's stream), then adds x into y.
__attribute__((noinline)) void apis_thread_work(int i, float* x, float* y, cudaEvent_t* ev, std::promise<void>* recorded,
                                                std::shared_future<void> ready) {
  cudaStream_t s;
  check(cudaStreamCreate(&s), "cudaStreamCreate");
  if (i == 0) {
    fill(x, 4.0f, s);
    check(cudaEventRecord(ev[0], s), "cudaEventRecord");
    recorded->set_value();
    check(cudaEventSynchronize(ev[0]), "cudaEventSynchronize");
  } else {
    fill(y, 1.0f, s);
    ready.wait();
    check(cudaStreamWaitEvent(s, ev[0], 0), "cudaStreamWaitEvent");
    axpy(0.5f, x, y, s);  // y = 0.5 * 4 + 1
    check(cudaEventRecord(ev[1], s), "cudaEventRecord");
    check(cudaEventSynchronize(ev[1]), "cudaEventSynchronize");
  }
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
}

__attribute__((noinline)) void apis_threads() {
  float *x = device_floats(), *y = device_floats();
  cudaEvent_t ev[2];
  for (cudaEvent_t& e : ev) check(cudaEventCreate(&e), "cudaEventCreate");
  std::promise<void> recorded;
  std::shared_future<void> ready = recorded.get_future().share();
  std::thread t0(apis_thread_work, 0, x, y, ev, &recorded, ready);
  std::thread t1(apis_thread_work, 1, x, y, ev, &recorded, ready);
  t0.join();
  t1.join();
  expect(y, 3.0f, "threads");
  for (cudaEvent_t e : ev) check(cudaEventDestroy(e), "cudaEventDestroy");
  free_all({x, y});
  printf("threads: 2 threads, a stream each, an event waited for across them, ok\n");
}

// A graph captured from a stream (3 kernels), instantiated once and launched 5 times.
__attribute__((noinline)) void apis_graph_capture() {
  float *x = device_floats(), *y = device_floats();
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check(cudaMemsetAsync(y, 0, kN * sizeof(float), s), "cudaMemsetAsync");
  cudaGraph_t graph;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  fill(x, 1.0f, s);
  axpy(2.0f, x, y, s);
  axpy(1.0f, x, y, s);  // y += 3 per launch
  check(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int i = 0; i < 5; ++i) check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  expect(y, 15.0f, "graph");
  check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(graph), "cudaGraphDestroy");
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  free_all({x, y});
  printf("graph: captured 3 kernels, instantiated, launched 5 times, ok\n");
}

// A graph built node by node: a memset and a fill, then an axpy after both; launched 3 times.
__attribute__((noinline)) void apis_graph_nodes() {
  float *x = device_floats(), *y = device_floats();
  cudaGraph_t graph;
  check(cudaGraphCreate(&graph, 0), "cudaGraphCreate");
  cudaMemsetParams ms = {};
  ms.dst = y;
  ms.value = 0;
  ms.elementSize = sizeof(float);
  ms.width = kN;
  ms.height = 1;
  cudaGraphNode_t node[3];
  check(cudaGraphAddMemsetNode(&node[0], graph, nullptr, 0, &ms), "cudaGraphAddMemsetNode");
  float two = 2.0f, three = 3.0f;
  int n = kN;
  void* fill_args[] = {&x, &two, &n};
  cudaKernelNodeParams k = {};
  k.func = reinterpret_cast<void*>(apis_fill);
  k.gridDim = dim3(kN / kBlock);
  k.blockDim = dim3(kBlock);
  k.kernelParams = fill_args;
  check(cudaGraphAddKernelNode(&node[1], graph, nullptr, 0, &k), "cudaGraphAddKernelNode");
  void* axpy_args[] = {&three, &x, &y, &n};
  k.func = reinterpret_cast<void*>(apis_axpy);
  k.kernelParams = axpy_args;
  check(cudaGraphAddKernelNode(&node[2], graph, node, 2, &k), "cudaGraphAddKernelNode");  // y = 3 * 2
  cudaGraphExec_t exec;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int i = 0; i < 3; ++i) check(cudaGraphLaunch(exec, nullptr), "cudaGraphLaunch");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  expect(y, 6.0f, "nodes");
  check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(graph), "cudaGraphDestroy");
  free_all({x, y});
  printf("nodes: a graph of a memset and 2 kernels, launched 3 times, ok\n");
}

// Managed memory written on the host, prefetched to the device, doubled there, read back.
__attribute__((noinline)) void apis_managed() {
  int dev = 0, concurrent = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, dev), "cudaDeviceGetAttribute");
  float* m;
  check(cudaMallocManaged(&m, kN * sizeof(float)), "cudaMallocManaged");
  for (int i = 0; i < kN; ++i) m[i] = float(i);
  cudaStream_t s;
  check(cudaStreamCreate(&s), "cudaStreamCreate");
#if CUDART_VERSION >= 13000
  cudaMemLocation to = {cudaMemLocationTypeDevice, dev}, back = {cudaMemLocationTypeHost, 0};
#endif
  if (concurrent) {  // prefetching needs it; without it the kernel pages the data in
#if CUDART_VERSION >= 13000
    check(cudaMemPrefetchAsync(m, kN * sizeof(float), to, 0, s), "cudaMemPrefetchAsync");
#else
    check(cudaMemPrefetchAsync(m, kN * sizeof(float), dev, s), "cudaMemPrefetchAsync");
#endif
  }
  axpy(1.0f, m, m, s);  // m = 2 m
  if (concurrent) {
#if CUDART_VERSION >= 13000
    check(cudaMemPrefetchAsync(m, kN * sizeof(float), back, 0, s), "cudaMemPrefetchAsync");
#else
    check(cudaMemPrefetchAsync(m, kN * sizeof(float), cudaCpuDeviceId, s), "cudaMemPrefetchAsync");
#endif
  }
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  for (int i = 0; i < kN; ++i)
    if (m[i] != 2.0f * float(i)) {
      fprintf(stderr, "cuda_apis: managed: element %d is %g, expected %g\n", i, m[i], 2.0f * float(i));
      exit(1);
    }
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  check(cudaFree(m), "cudaFree");
  printf("managed: %d floats written on the host, doubled on the device, ok\n", kN);
}

// A second context of device 0, made current with cuCtxPushCurrent: the runtime's calls use it.
__attribute__((noinline)) void apis_second_context() {
  CUdevice dev;
  check(drv.deviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
#if CUDA_VERSION >= 12050
  CUctxCreateParams params = {};  // no execution affinity, no CIG
  check(drv.ctxCreate(&ctx, &params, 0, dev), "cuCtxCreate");  // current on this thread now: pop it
#else
  check(drv.ctxCreate(&ctx, 0, dev), "cuCtxCreate");
#endif
  check(drv.ctxPopCurrent(nullptr), "cuCtxPopCurrent");
  check(drv.ctxPushCurrent(ctx), "cuCtxPushCurrent");
  float *x = device_floats(), *y = device_floats();
  fill(x, 7.0f);
  fill(y, 1.0f);
  axpy(1.0f, x, y);  // y = 7 + 1
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  expect(y, 8.0f, "contexts");
  free_all({x, y});
  CUcontext popped;
  check(drv.ctxPopCurrent(&popped), "cuCtxPopCurrent");
  check(drv.ctxDestroy(ctx), "cuCtxDestroy");
  printf("contexts: a second context ran 3 kernels, ok\n");
}

#ifdef ARCHBENCH_APIS_CUBLAS
// C = A B for 64x64 matrices of ones and twos: every element 128.
__attribute__((noinline)) void apis_cublas() {
  constexpr int n = 64;
  float *a, *b, *c;
  for (float** p : {&a, &b, &c}) check(cudaMalloc(p, n * n * sizeof(float)), "cudaMalloc");
  std::vector<float> ones(n * n, 1.0f), twos(n * n, 2.0f), out(n * n);
  check(cudaMemcpy(a, ones.data(), n * n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  check(cudaMemcpy(b, twos.data(), n * n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "cuda_apis: cublasCreate failed\n");
    exit(1);
  }
  const float alpha = 1.0f, beta = 0.0f;
  if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, n, b, n, &beta, c, n) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "cuda_apis: cublasSgemm failed\n");
    exit(1);
  }
  check(cudaMemcpy(out.data(), c, n * n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  for (int i = 0; i < n * n; ++i)
    if (out[i] != 2.0f * n) {
      fprintf(stderr, "cuda_apis: cublas: element %d is %g, expected %g\n", i, out[i], 2.0f * n);
      exit(1);
    }
  cublasDestroy(h);
  for (float* p : {a, b, c}) check(cudaFree(p), "cudaFree");
  printf("cublas: sgemm %dx%d, ok\n", n, n);
}
#endif

// Three kernels, waited for, then a segmentation fault of the program's own.
__attribute__((noinline)) void apis_crash() {
  float* x = device_floats();
  for (int i = 0; i < 3; ++i) fill(x, float(i));
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  printf("crash: 3 kernels done, now a segmentation fault\n");
  fflush(stdout);
  *g_null = 1;
}

int main(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "all";
  cuda_program::require_device();
#if CUDA_VERSION >= 12050
  entry("cuCtxCreate", drv.ctxCreate, 12050);  // cuCtxCreate_v4
#else
  entry("cuCtxCreate", drv.ctxCreate);
#endif
  entry("cuCtxDestroy", drv.ctxDestroy);
  entry("cuCtxPushCurrent", drv.ctxPushCurrent);
  entry("cuCtxPopCurrent", drv.ctxPopCurrent);
  entry("cuDeviceGet", drv.deviceGet);
  bool all = what == "all", known = all;
  auto run = [&](const char* name, void (*f)()) {
    if (!all && what != name) return;
    known = true;
    f();
  };
  run("async", apis_async_alloc);
  run("threads", apis_threads);
  run("graph", apis_graph_capture);
  run("nodes", apis_graph_nodes);
  run("managed", apis_managed);
  run("contexts", apis_second_context);
#ifdef ARCHBENCH_APIS_CUBLAS
  run("cublas", apis_cublas);
#else
  if (all || what == "cublas") printf("cublas: not built (no cuBLAS at configure time)\n");
  known = known || what == "cublas";
#endif
  if (what == "crash") apis_crash();  // does not return
  if (!known) {
    fprintf(stderr, "usage: %s [all|async|threads|graph|nodes|managed|contexts|cublas|crash]\n", argv[0]);
    return 2;
  }
  return 0;
}
