// What the CUDA tracer's test programs share (cuda_planted.cu, cuda_apis.cu): checked calls,
// driver entry points taken from the runtime so that a program does not link libcuda (where
// there is no driver it starts and says so), and the skip where there is no device.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cerrno>  // program_invocation_short_name
#include <cstdio>
#include <cstdlib>

namespace cuda_program {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "%s: %s failed: %s\n", program_invocation_short_name, what, cudaGetErrorString(e));
    exit(1);
  }
}

inline void check(CUresult e, const char* what) {
  if (e != CUDA_SUCCESS) {
    fprintf(stderr, "%s: %s failed: CUresult %d\n", program_invocation_short_name, what, int(e));
    exit(1);
  }
}

// The driver's `name` as of CUDA `version` (cudaGetDriverEntryPointByVersion; 12000: 12.0): `fn`
// must have that version's type (cudaTypedefs.h names each, e.g. PFN_cuCtxCreate_v12050).
template <class F>
void entry(const char* name, F*& fn, int version = 12000) {
  cudaDriverEntryPointQueryResult q;
  void* p = nullptr;
  check(cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &q), name);
  if (q != cudaDriverEntryPointSuccess || !p) {
    fprintf(stderr, "%s: the driver has no %s\n", program_invocation_short_name, name);
    exit(1);
  }
  fn = reinterpret_cast<F*>(p);
}

// Exits 77 (ctest's skip), saying why, where no CUDA device answers; else makes the primary context.
inline void require_device() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "none");
    exit(77);
  }
  check(cudaFree(nullptr), "cudaFree(0) (context creation)");
}

}  // namespace cuda_program
