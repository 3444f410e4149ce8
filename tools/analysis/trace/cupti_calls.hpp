// The CUDA driver calls the CUPTI injection libraries (TopDown's, PC sampling's) subscribe to:
// kernel launches, and the calls after which a program has waited for its kernels (where they
// decode or drain what they collected, so that little is left for the exit). Header-only: only
// the libraries built with CUPTI include it.
#pragma once
#include <cuda.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <thread>

#include <cupti.h>

namespace archbench::trace {

// A driver result as words: its name (CUDA_ERROR_NO_DEVICE), else its number.
inline std::string cu_words(CUresult r) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  return name ? name : std::to_string(int(r));
}

// On a thread of an injection library, after its InitializeInjection has returned (which the
// program's cuInit, the call that loaded it, waits for): the driver initialised here, retried for
// up to 0.5 s while that cuInit finishes; CUDA_SUCCESS, or the error that says there is no driver
// or device to wait for. Before it, CUPTI cannot name the chip ("Unknown").
inline CUresult driver_ready() {
  CUresult r = CUDA_ERROR_NOT_INITIALIZED;
  for (int i = 0; i < 100 && (r = cuInit(0)) != CUDA_SUCCESS && r != CUDA_ERROR_NO_DEVICE &&
                  r != CUDA_ERROR_SYSTEM_DRIVER_MISMATCH && r != CUDA_ERROR_NOT_SUPPORTED && r != CUDA_ERROR_STUB_LIBRARY;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return r;
}

inline constexpr CUpti_CallbackId kSyncs[] = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,       CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,     CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpy_v2,            CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH,           CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,   CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer};
inline constexpr CUpti_CallbackId kLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,           CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,         CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz};

// Whether `id` is one of `ids`.
template <std::size_t N>
bool one_of(CUpti_CallbackId id, const CUpti_CallbackId (&ids)[N]) {
  for (CUpti_CallbackId i : ids)
    if (i == id) return true;
  return false;
}

}  // namespace archbench::trace
