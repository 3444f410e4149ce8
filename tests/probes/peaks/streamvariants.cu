// Stream variants on one GPU (issue 20): triad and copy of doubles, 1 GiB arrays, timed by
// events over batches of launches, medians over rounds that interleave the variants. Each
// output is poisoned before a variant and checked in full after it.
// nvcc -O3 -arch=sm_90 -o streamvariants streamvariants.cu
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <string>
#include <algorithm>
#include <functional>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ double2 ld_pf(const double2* p) {
  double2 v;
  asm volatile("ld.global.L2::256B.v2.f64 {%0, %1}, [%2];" : "=d"(v.x), "=d"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ double2 ld_nc(const double2* p) {
  double2 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v2.f64 {%0, %1}, [%2];" : "=d"(v.x), "=d"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ void st_evl(double2* p, double2 v) {
  asm volatile("st.global.L1::no_allocate.v2.f64 [%0], {%1, %2};" :: "l"(p), "d"(v.x), "d"(v.y) : "memory");
}

// --- triad a = b + s*c ---
template <int P>
__global__ void triad_item(double* __restrict__ a, const double* __restrict__ b, const double* __restrict__ c, double s) {
  const size_t n = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double x[P], y[P];
#pragma unroll
  for (int k = 0; k < P; ++k) { x[k] = b[i + k * n]; y[k] = c[i + k * n]; }
#pragma unroll
  for (int k = 0; k < P; ++k) a[i + k * n] = x[k] + s * y[k];
}
// P double2 a thread, a grid apart; LD 0 plain, 1 L2::256B prefetch, 2 nc+prefetch
template <int P, int LD>
__global__ void triad_v2(double2* __restrict__ a, const double2* __restrict__ b, const double2* __restrict__ c, double s) {
  const size_t n = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double2 x[P], y[P];
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (LD == 0) { x[k] = b[i + k * n]; y[k] = c[i + k * n]; }
    else if (LD == 1) { x[k] = ld_pf(b + i + k * n); y[k] = ld_pf(c + i + k * n); }
    else { x[k] = ld_nc(b + i + k * n); y[k] = ld_nc(c + i + k * n); }
  }
#pragma unroll
  for (int k = 0; k < P; ++k) a[i + k * n] = make_double2(x[k].x + s * y[k].x, x[k].y + s * y[k].y);
}
// Persistent: grid-stride over double2 with U in flight.
template <int U>
__global__ void triad_gs(double2* __restrict__ a, const double2* __restrict__ b, const double2* __restrict__ c, double s, size_t n2) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n2; i += U * stride) {
    double2 x[U], y[U];
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (i + k * stride < n2) { x[k] = b[i + k * stride]; y[k] = c[i + k * stride]; }
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (i + k * stride < n2) a[i + k * stride] = make_double2(x[k].x + s * y[k].x, x[k].y + s * y[k].y);
  }
}
// Block-contiguous: block g owns a contiguous chunk; U double2 per thread per step.
template <int U>
__global__ void triad_chunk(double2* __restrict__ a, const double2* __restrict__ b, const double2* __restrict__ c, double s, size_t n2) {
  const size_t chunk = n2 / gridDim.x, begin = size_t(blockIdx.x) * chunk, end = begin + chunk;
  for (size_t i = begin + threadIdx.x; i < end; i += U * blockDim.x) {
    double2 x[U], y[U];
#pragma unroll
    for (int k = 0; k < U; ++k) { x[k] = b[i + k * blockDim.x]; y[k] = c[i + k * blockDim.x]; }
#pragma unroll
    for (int k = 0; k < U; ++k) a[i + k * blockDim.x] = make_double2(x[k].x + s * y[k].x, x[k].y + s * y[k].y);
  }
}
template <int P>
__global__ void mul_item(double* __restrict__ b, const double* __restrict__ c, double s) {
  const size_t n = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double y[P];
#pragma unroll
  for (int k = 0; k < P; ++k) y[k] = c[i + k * n];
#pragma unroll
  for (int k = 0; k < P; ++k) b[i + k * n] = s * y[k];
}
template <int P>
__global__ void add_item(const double* __restrict__ a, const double* __restrict__ b, double* __restrict__ c) {
  const size_t n = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double x[P], y[P];
#pragma unroll
  for (int k = 0; k < P; ++k) { x[k] = a[i + k * n]; y[k] = b[i + k * n]; }
#pragma unroll
  for (int k = 0; k < P; ++k) c[i + k * n] = x[k] + y[k];
}
// --- copy c = a ---
template <int P>
__global__ void copy_item(const double* __restrict__ a, double* __restrict__ c) {
  const size_t n = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double x[P];
#pragma unroll
  for (int k = 0; k < P; ++k) x[k] = a[i + k * n];
#pragma unroll
  for (int k = 0; k < P; ++k) c[i + k * n] = x[k];
}
template <int P, int LD>
__global__ void copy_v2(const double2* __restrict__ a, double2* __restrict__ c) {
  const size_t n = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double2 x[P];
#pragma unroll
  for (int k = 0; k < P; ++k) x[k] = LD == 0 ? a[i + k * n] : LD == 1 ? ld_pf(a + i + k * n) : ld_nc(a + i + k * n);
#pragma unroll
  for (int k = 0; k < P; ++k) c[i + k * n] = x[k];
}
// --- read-only (sum, one store a thread) and write-only, the two ceilings ---
template <int P>
__global__ void read_v2(const double2* __restrict__ a, double* __restrict__ out) {
  const size_t n = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double s = 0;
#pragma unroll
  for (int k = 0; k < P; ++k) { double2 v = a[i + k * n]; s += v.x + v.y; }
  if (s == -1.0) out[i] = s;  // never true for inputs in [1,2): keeps the loads, writes nothing
}
template <int P>
__global__ void write_v2(double2* __restrict__ c, double v) {
  const size_t n = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < P; ++k) c[i + k * n] = make_double2(v + double(i), v);
}

__global__ void fill(double* p, size_t n, unsigned long long seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned long long z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull; z = (z ^ (z >> 27)) * 0x94D049BB133111EBull; z ^= z >> 31;
    p[i] = 1.0 + double(z >> 11) * 0x1.0p-53;
  }
}
__global__ void poison(double* p, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = __longlong_as_double(-1ll);
}
__global__ void check_triad(const double* a, const double* b, const double* c, double s, size_t n, unsigned long long* bad) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const double want = b[i] + s * c[i];
    if (!(a[i] == want || a[i] == fma(s, c[i], b[i]))) atomicAdd(bad, 1ull);
  }
}
__global__ void check_copy(const double* a, const double* c, size_t n, unsigned long long* bad) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    if (a[i] != c[i]) atomicAdd(bad, 1ull);
}

struct Variant {
  std::string name;
  double bytes;
  std::function<void()> launch;
  std::function<unsigned long long()> check;  // mismatches after one launch on a poisoned output
  std::vector<double> rates;
};

int main(int argc, char** argv) {
  const size_t n = size_t(1) << (argc > 1 ? atoi(argv[1]) : 27);  // doubles an array
  const int batch = 10, rounds = argc > 2 ? atoi(argv[2]) : 7;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  printf("%s, %d SMs, %zu doubles an array (%.0f MiB)\n", prop.name, sms, n, n * 8.0 / (1 << 20));
  // Arrays in one allocation at chosen offsets (bytes): the offset of b and c from a's end.
  const size_t pad_max = size_t(4) << 20;
  char* base;
  CK(cudaMalloc(&base, 3 * n * 8 + 3 * pad_max));
  unsigned long long* bad;
  CK(cudaMalloc(&bad, 8));
  const double s = 0.4;
  std::vector<Variant> vs;
  auto add_triad = [&](std::string name, size_t pad, std::function<void(double*, double*, double*)> f) {
    double* a = (double*)base;
    double* b = (double*)(base + n * 8 + pad);
    double* c = (double*)(base + 2 * (n * 8 + pad));
    vs.push_back({"triad " + name + (pad ? " pad:" + std::to_string(pad) : ""), 3.0 * n * 8, [=] { f(a, b, c); },
                  [=] {
                    poison<<<sms * 8, 256>>>(a, n);
                    f(a, b, c);
                    CK(cudaMemset(bad, 0, 8));
                    check_triad<<<sms * 8, 256>>>(a, b, c, s, n, bad);
                    unsigned long long h;
                    CK(cudaMemcpy(&h, bad, 8, cudaMemcpyDeviceToHost));
                    return h;
                  }, {}});
  };
  auto add_copy = [&](std::string name, std::function<void(double*, double*)> f) {
    double* a = (double*)(base + n * 8);
    double* c = (double*)base;
    vs.push_back({"copy " + name, 2.0 * n * 8, [=] { f(a, c); },
                  [=] {
                    poison<<<sms * 8, 256>>>(c, n);
                    f(a, c);
                    CK(cudaMemset(bad, 0, 8));
                    check_copy<<<sms * 8, 256>>>(a, c, n, bad);
                    unsigned long long h;
                    CK(cudaMemcpy(&h, bad, 8, cudaMemcpyDeviceToHost));
                    return h;
                  }, {}});
  };
  using D = double; using D2 = double2;
  const bool bsmode = argc > 3 && std::string(argv[3]) == "bs";
  if (bsmode) {
    // archbench's stream kernels (bench/memory.cpp: copy and mul 2 elements a work-item, add and
    // triad 1) over the work-group size; mul and add checked as triad's shape (outputs compared
    // by the triad check with s folded in is not possible: they are timed only, after triad's and
    // copy's checks prove the indexing the four share).
    for (int bs : {32, 64, 96, 128, 192, 256, 512})
      add_triad("item1 bs:" + std::to_string(bs), 0, [=](D* a, D* b, D* c) { triad_item<1><<<n / bs, bs>>>(a, b, c, s); });
    for (int bs : {64, 128, 256}) {
      add_copy("item2 bs:" + std::to_string(bs), [=](D* a, D* c) { copy_item<2><<<n / 2 / bs, bs>>>(a, c); });
      double* a = (double*)base; double* b = (double*)(base + n * 8); double* c = (double*)(base + 2 * n * 8);
      vs.push_back({"mul item2 bs:" + std::to_string(bs), 2.0 * n * 8, [=] { mul_item<2><<<n / 2 / bs, bs>>>(b, c, s); }, [] { return 0ull; }, {}});
      vs.push_back({"add item1 bs:" + std::to_string(bs), 3.0 * n * 8, [=] { add_item<1><<<n / bs, bs>>>(a, b, c); }, [] { return 0ull; }, {}});
    }
  } else {
  for (int bs : {128, 256, 512, 1024})
    add_triad("item1 bs:" + std::to_string(bs), 0, [=](D* a, D* b, D* c) { triad_item<1><<<n / bs, bs>>>(a, b, c, s); });
  add_triad("item2 bs:256", 0, [=](D* a, D* b, D* c) { triad_item<2><<<n / 512, 256>>>(a, b, c, s); });
  add_triad("item4 bs:256", 0, [=](D* a, D* b, D* c) { triad_item<4><<<n / 1024, 256>>>(a, b, c, s); });
  for (size_t pad : {size_t(256), size_t(4096), size_t(65536), size_t(1) << 20, (size_t(1) << 20) + 4096 + 256})
    add_triad("item1 bs:256", pad, [=](D* a, D* b, D* c) { triad_item<1><<<n / 256, 256>>>(a, b, c, s); });
  for (int bs : {128, 256, 512, 1024})
    add_triad("v2x1 bs:" + std::to_string(bs), 0, [=](D* a, D* b, D* c) { triad_v2<1, 0><<<n / 2 / bs, bs>>>((D2*)a, (D2*)b, (D2*)c, s); });
  add_triad("v2x2 bs:256", 0, [=](D* a, D* b, D* c) { triad_v2<2, 0><<<n / 4 / 256, 256>>>((D2*)a, (D2*)b, (D2*)c, s); });
  add_triad("v2x4 bs:256", 0, [=](D* a, D* b, D* c) { triad_v2<4, 0><<<n / 8 / 256, 256>>>((D2*)a, (D2*)b, (D2*)c, s); });
  add_triad("v2x1 pf256 bs:256", 0, [=](D* a, D* b, D* c) { triad_v2<1, 1><<<n / 2 / 256, 256>>>((D2*)a, (D2*)b, (D2*)c, s); });
  add_triad("v2x2 pf256 bs:256", 0, [=](D* a, D* b, D* c) { triad_v2<2, 1><<<n / 4 / 256, 256>>>((D2*)a, (D2*)b, (D2*)c, s); });
  add_triad("v2x1 nc bs:256", 0, [=](D* a, D* b, D* c) { triad_v2<1, 2><<<n / 2 / 256, 256>>>((D2*)a, (D2*)b, (D2*)c, s); });
  for (size_t pad : {size_t(4096), (size_t(1) << 20) + 4096 + 256})
    add_triad("v2x1 bs:256", pad, [=](D* a, D* b, D* c) { triad_v2<1, 0><<<n / 2 / 256, 256>>>((D2*)a, (D2*)b, (D2*)c, s); });
  for (int per_sm : {4, 8, 16})
    add_triad("gs u2 blocks/sm:" + std::to_string(per_sm), 0, [=](D* a, D* b, D* c) { triad_gs<2><<<sms * per_sm, 256>>>((D2*)a, (D2*)b, (D2*)c, s, n / 2); });
  add_triad("gs u4 blocks/sm:8", 0, [=](D* a, D* b, D* c) { triad_gs<4><<<sms * 8, 256>>>((D2*)a, (D2*)b, (D2*)c, s, n / 2); });
  add_triad("chunk u4 blocks:1024", 0, [=](D* a, D* b, D* c) { triad_chunk<4><<<1024, 256>>>((D2*)a, (D2*)b, (D2*)c, s, n / 2); });
  add_triad("chunk u2 blocks:8192", 0, [=](D* a, D* b, D* c) { triad_chunk<2><<<8192, 256>>>((D2*)a, (D2*)b, (D2*)c, s, n / 2); });
  add_copy("item1 bs:256", [=](D* a, D* c) { copy_item<1><<<n / 256, 256>>>(a, c); });
  add_copy("item2 bs:256", [=](D* a, D* c) { copy_item<2><<<n / 512, 256>>>(a, c); });
  add_copy("v2x1 bs:256", [=](D* a, D* c) { copy_v2<1, 0><<<n / 2 / 256, 256>>>((D2*)a, (D2*)c); });
  add_copy("v2x2 bs:256", [=](D* a, D* c) { copy_v2<2, 0><<<n / 4 / 256, 256>>>((D2*)a, (D2*)c); });
  add_copy("v2x1 pf256 bs:256", [=](D* a, D* c) { copy_v2<1, 1><<<n / 2 / 256, 256>>>((D2*)a, (D2*)c); });
  add_copy("v2x2 nc bs:256", [=](D* a, D* c) { copy_v2<2, 2><<<n / 4 / 256, 256>>>((D2*)a, (D2*)c); });
  {
    double* a = (double*)(base + n * 8);
    double* out = (double*)base;
    vs.push_back({"read-only v2x2", 1.0 * n * 8, [=] { read_v2<2><<<n / 4 / 256, 256>>>((D2*)a, out); }, [] { return 0ull; }, {}});
    vs.push_back({"write-only v2x2", 1.0 * n * 8, [=] { write_v2<2><<<n / 4 / 256, 256>>>((D2*)out, 1.5); }, [] { return 0ull; }, {}});
  }
  }
  // Inputs: every array region filled (pads included) with values in [1, 2).
  fill<<<sms * 8, 256>>>((double*)base, (3 * n * 8 + 3 * pad_max) / 8, 12345);
  CK(cudaDeviceSynchronize());
  for (auto& v : vs) {
    const unsigned long long m = v.check();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    if (m) { printf("FAILED %s: %llu wrong (left out)\n", v.name.c_str(), m); v.bytes = 0; }
  }
  // The copy variants wrote over a's region; refill the inputs.
  fill<<<sms * 8, 256>>>((double*)base, (3 * n * 8 + 3 * pad_max) / 8, 12345);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int r = 0; r < rounds; ++r)
    for (auto& v : vs) {
      if (v.bytes == 0) continue;
      for (int w = 0; w < 3; ++w) v.launch();
      CK(cudaEventRecord(e0));
      for (int k = 0; k < batch; ++k) v.launch();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      v.rates.push_back(v.bytes * batch / (ms * 1e-3) / 1e12);
    }
  CK(cudaGetLastError());
  printf("%-40s %8s %8s %8s  (TB/s over %d rounds of %d launches)\n", "variant", "median", "min", "max", rounds, batch);
  for (auto& v : vs) {
    if (v.rates.empty()) continue;
    std::sort(v.rates.begin(), v.rates.end());
    printf("%-40s %8.4f %8.4f %8.4f\n", v.name.c_str(), v.rates[v.rates.size() / 2], v.rates.front(), v.rates.back());
  }
  return 0;
}
