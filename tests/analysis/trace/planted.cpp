// archbench_trace_planted: small OpenCL programs with one planted inefficiency each, for the
// tracer's end-to-end test (tests/analysis/trace/trace_e2e.py). Plain OpenCL host API, no archbench code.
//
//   archbench_trace_planted roundtrip   write A, kernel, read A back, write the same bytes again
//   archbench_trace_planted gap [ms]    kernel, finish, host work for ms (default 200) with the
//                                       device idle, kernel, finish
//   archbench_trace_planted twice       the same source built twice in one context and once in a second
//   archbench_trace_planted unused      a context on the first device only (the platform needs >1)
//   archbench_trace_planted inorder     an in-order queue running kernels on disjoint buffers, then
//                                       axpy on two distinct buffers and axpy_aliased given one
//                                       buffer twice
//
// Exit 0 on success, 77 when there is no OpenCL device (or, for unused, only one), 1 on error.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// Host-side work the device waits through: a named, exported, non-inlined function so that the
// sampled call paths (GPU_IDLE_CAUSE) can name it.
__attribute__((noinline)) double planted_host_work(double ms) {
  auto t0 = std::chrono::steady_clock::now();
  volatile double x = 1.0;
  while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < ms)
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

namespace {

const char* kSource = R"CL(
__kernel void scale(__global float* a, float f) { size_t i = get_global_id(0); a[i] = a[i] * f + 1.0f; }
__kernel void fill(__global float* a, float v) { a[get_global_id(0)] = v; }
__kernel void axpy(__global const float* x, __global float* y, float a) { size_t i = get_global_id(0); y[i] += a * x[i]; }
__kernel void axpy_aliased(__global const float* x, __global float* y, float a) { size_t i = get_global_id(0); y[i] += a * x[i]; }
)CL";

void check(cl_int err, const char* what) {
  if (err != CL_SUCCESS) {
    fprintf(stderr, "planted: %s failed: %d\n", what, err);
    exit(1);
  }
}

// The first device of the first platform that has one, its context and an in-order queue.
struct Cl {
  cl_platform_id platform = nullptr;
  std::vector<cl_device_id> devices;
  cl_context ctx = nullptr;
  cl_command_queue q = nullptr;

  Cl() {
    cl_uint np = 0;
    if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) no_device();
    std::vector<cl_platform_id> plats(np);
    clGetPlatformIDs(np, plats.data(), nullptr);
    for (cl_platform_id p : plats) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
      platform = p;
      devices.resize(nd);
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devices.data(), nullptr);
      break;
    }
    if (devices.empty()) no_device();
    cl_int err;
    ctx = clCreateContext(nullptr, 1, &devices[0], nullptr, nullptr, &err);  // the first device only
    check(err, "clCreateContext");
    q = clCreateCommandQueue(ctx, devices[0], 0, &err);  // no profiling asked: the tracer adds it
    check(err, "clCreateCommandQueue");
  }
  ~Cl() {
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
  }
  [[noreturn]] static void no_device() {
    printf("planted: no OpenCL device\n");
    exit(77);
  }
};

cl_program build(cl_context ctx, cl_device_id dev) {
  cl_int err;
  cl_program p = clCreateProgramWithSource(ctx, 1, &kSource, nullptr, &err);
  check(err, "clCreateProgramWithSource");
  check(clBuildProgram(p, 1, &dev, "", nullptr, nullptr), "clBuildProgram");
  return p;
}

cl_kernel kernel(cl_program p, const char* name, cl_mem buf, float v) {
  cl_int err;
  cl_kernel k = clCreateKernel(p, name, &err);
  check(err, "clCreateKernel");
  check(clSetKernelArg(k, 0, sizeof buf, &buf), "clSetKernelArg");
  check(clSetKernelArg(k, 1, sizeof v, &v), "clSetKernelArg");
  return k;
}

void run(cl_command_queue q, cl_kernel k, size_t n) {
  check(clEnqueueNDRangeKernel(q, k, 1, nullptr, &n, nullptr, 0, nullptr, nullptr), "clEnqueueNDRangeKernel");
}

constexpr size_t kN = 1 << 16;

cl_mem new_buffer(cl_context ctx) {
  cl_int err;
  cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, kN * sizeof(float), nullptr, &err);
  check(err, "clCreateBuffer");
  return m;
}

void release(cl_kernel k, cl_mem m, cl_program p) {
  clReleaseKernel(k);
  clReleaseMemObject(m);
  clReleaseProgram(p);
}

int roundtrip() {
  Cl cl;
  cl_program p = build(cl.ctx, cl.devices[0]);
  cl_mem a = new_buffer(cl.ctx);
  std::vector<float> host(kN);
  for (size_t i = 0; i < kN; ++i) host[i] = float(i % 97);
  cl_kernel k = kernel(p, "scale", a, 2.0f);
  check(clEnqueueWriteBuffer(cl.q, a, CL_FALSE, 0, kN * sizeof(float), host.data(), 0, nullptr, nullptr), "write");
  run(cl.q, k, kN);
  // Non-blocking read: the tracer hashes it when the program's clFinish says it has arrived.
  check(clEnqueueReadBuffer(cl.q, a, CL_FALSE, 0, kN * sizeof(float), host.data(), 0, nullptr, nullptr), "read");
  check(clFinish(cl.q), "clFinish");
  // The planted inefficiency: the same bytes go straight back (a kernel could have kept them).
  check(clEnqueueWriteBuffer(cl.q, a, CL_TRUE, 0, kN * sizeof(float), host.data(), 0, nullptr, nullptr), "write again");
  run(cl.q, k, kN);
  check(clFinish(cl.q), "clFinish");
  release(k, a, p);
  printf("planted roundtrip: %zu bytes read back and written again unchanged\n", kN * sizeof(float));
  return 0;
}

int gap(double ms) {
  Cl cl;
  cl_program p = build(cl.ctx, cl.devices[0]);
  cl_mem a = new_buffer(cl.ctx);
  cl_kernel k = kernel(p, "fill", a, 1.0f);
  run(cl.q, k, kN);
  check(clFinish(cl.q), "clFinish");
  auto t0 = std::chrono::steady_clock::now();
  planted_host_work(ms);  // the planted gap: the device has nothing to do
  double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  run(cl.q, k, kN);
  check(clFinish(cl.q), "clFinish");
  release(k, a, p);
  printf("planted gap: host work of %.1f ms (asked %.1f ms) between two kernels\n", took, ms);
  return 0;
}

int twice() {
  Cl cl;
  cl_program p1 = build(cl.ctx, cl.devices[0]);
  cl_program p2 = build(cl.ctx, cl.devices[0]);  // the same source again, same context
  cl_int err;
  cl_context ctx2 = clCreateContext(nullptr, 1, &cl.devices[0], nullptr, nullptr, &err);
  check(err, "clCreateContext");
  cl_program p3 = build(ctx2, cl.devices[0]);  // and in a second context
  clReleaseProgram(p1);
  clReleaseProgram(p2);
  clReleaseProgram(p3);
  clReleaseContext(ctx2);
  printf("planted twice: one source built 3 times, in 2 contexts\n");
  return 0;
}

int unused() {
  Cl cl;
  if (cl.devices.size() < 2) {
    printf("planted unused: the platform has only one device, nothing to leave unused\n");
    return 77;
  }
  cl_program p = build(cl.ctx, cl.devices[0]);
  cl_mem a = new_buffer(cl.ctx);
  cl_kernel k = kernel(p, "fill", a, 3.0f);
  run(cl.q, k, kN);
  check(clFinish(cl.q), "clFinish");
  release(k, a, p);
  printf("planted unused: %zu devices, a context on the first only\n", cl.devices.size());
  return 0;
}

int inorder() {
  Cl cl;
  cl_program p = build(cl.ctx, cl.devices[0]);
  cl_int err;
  std::vector<cl_mem> bufs;
  std::vector<cl_kernel> ks;
  for (int i = 0; i < 4; ++i) {
    bufs.push_back(new_buffer(cl.ctx));
    ks.push_back(kernel(p, "fill", bufs.back(), float(i)));
  }
  for (cl_kernel k : ks) run(cl.q, k, kN);  // no data between them, yet the queue serialises them
  // Two buffers that never overlap (axpy could be compiled as restrict), then the same code in place
  // (x and y one buffer: aliased, so no restrict).
  cl_kernel axpy = clCreateKernel(p, "axpy", &err);
  check(err, "clCreateKernel");
  const float a = 2.0f;
  check(clSetKernelArg(axpy, 0, sizeof(cl_mem), &bufs[0]), "clSetKernelArg");
  check(clSetKernelArg(axpy, 1, sizeof(cl_mem), &bufs[1]), "clSetKernelArg");
  check(clSetKernelArg(axpy, 2, sizeof a, &a), "clSetKernelArg");
  run(cl.q, axpy, kN);
  cl_kernel aliased = clCreateKernel(p, "axpy_aliased", &err);
  check(err, "clCreateKernel");
  check(clSetKernelArg(aliased, 0, sizeof(cl_mem), &bufs[2]), "clSetKernelArg");
  check(clSetKernelArg(aliased, 1, sizeof(cl_mem), &bufs[2]), "clSetKernelArg");
  check(clSetKernelArg(aliased, 2, sizeof a, &a), "clSetKernelArg");
  run(cl.q, aliased, kN);
  check(clFinish(cl.q), "clFinish");
  clReleaseKernel(axpy);
  clReleaseKernel(aliased);
  for (cl_kernel k : ks) clReleaseKernel(k);
  for (cl_mem b : bufs) clReleaseMemObject(b);
  clReleaseProgram(p);
  printf("planted inorder: 4 independent kernels on one in-order queue, axpy on distinct then aliased buffers\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "";
  if (what == "roundtrip") return roundtrip();
  if (what == "gap") return gap(argc > 2 ? atof(argv[2]) : 200.0);
  if (what == "twice") return twice();
  if (what == "unused") return unused();
  if (what == "inorder") return inorder();
  fprintf(stderr, "usage: %s roundtrip|gap [ms]|twice|unused|inorder\n", argv[0]);
  return 2;
}
