// Does a PM sampling start ahead of the context hold the device's primary context? A program that
// sets its device flags after its first CUDA call (cuInit) must still be allowed to.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <unistd.h>
__global__ void k(int* p) { p[threadIdx.x] = threadIdx.x; }
int main() {
  int n = 0;
  cudaError_t e0 = cudaGetDeviceCount(&n);
  usleep(600000);  // the library's start, ahead of any context, has happened by now
  unsigned flags = 0; int active = -1;
  cuDevicePrimaryCtxGetState(0, &flags, &active);
  const int before = active;
  cudaError_t e = cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
  int* d = nullptr;
  cudaMalloc(&d, 256 * sizeof(int));
  k<<<1, 256>>>(d);
  cudaError_t e2 = cudaDeviceSynchronize();
  cuDevicePrimaryCtxGetState(0, &flags, &active);
  unsigned f2 = 0; cudaGetDeviceFlags(&f2);
  std::printf("devices %d (%s); primary context active before the program's first use: %d; setflags %s; launch %s; flags now 0x%x\n",
              n, cudaGetErrorName(e0), before, cudaGetErrorName(e), cudaGetErrorName(e2), f2);
  return e == cudaSuccess && e2 == cudaSuccess ? 0 : 3;
}
