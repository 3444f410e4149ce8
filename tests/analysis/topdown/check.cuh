// CHECK for the TopDown test programs: a failed CUDA call names itself and exits, with 77 (the
// ctest skip code) where there is no device or no driver.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                                  \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                               \
      std::exit(e_ == cudaErrorNoDevice || e_ == cudaErrorInsufficientDriver ? 77 : 1);           \
    }                                                                                             \
  } while (0)
