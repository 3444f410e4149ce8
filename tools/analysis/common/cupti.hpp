// The CUPTI layer of the four injection libraries (the CUDA tracer, TopDown, PC sampling, PM
// sampling): what each takes from CUPTI and the driver, written once. Header-only, so that a test
// can compile a library's source with CUPTI's device calls faked (tests/analysis/pmsampling) and
// the unit tests can decode fabricated callback data (tests/analysis/common). The records the
// libraries write are in tools/analysis/FORMAT.md; the host side (writer, exit, fork, signals) in
// common.hpp.
#pragma once
#include <cuda.h>
#include <cupti.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tools/analysis/common/common.hpp"

namespace archbench::trace {

// ---- Error text -----------------------------------------------------------------------------

// A driver result as words: its name (CUDA_ERROR_NO_DEVICE), else its number.
inline std::string cu_words(CUresult r) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  return name ? name : std::to_string(int(r));
}

// A CUPTI result as CUPTI words it (CUPTI_ERROR_INVALID_PARAMETER), else its number.
inline std::string cupti_words(CUptiResult r) {
  const char* e = nullptr;
  cuptiGetResultString(r, &e);
  return e ? e : "CUPTI error " + std::to_string(int(r));
}

// Where more than one copy of libcupti is mapped in this process: "; N copies of libcupti are
// loaded: A, B" (each is a CUPTI client of its own: the second is refused), else "".
inline std::string cupti_copies() {
  const std::vector<std::string> copies = mapped_libraries("libcupti");
  if (copies.size() < 2) return "";
  std::string s = "; " + std::to_string(copies.size()) + " copies of libcupti are loaded:";
  for (const std::string& c : copies) s += " " + c;
  return s;
}

// What a person can do about a refusal that CUPTI's words leave unsaid: " (...)", or "".
inline std::string cupti_advice(CUptiResult r) {
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    return " (another CUPTI client holds it: Nsight Systems, Nsight Compute, compute-sanitizer, a framework's "
           "profiler, or a second copy of libcupti in the process" + cupti_copies() + ")";
  if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES || r == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)
    return " (GPU performance counters are restricted to administrators on this machine: run as root, or load "
           "the driver with NVreg_RestrictProfilingToAdminUsers=0)";
  return "";
}

// "what: CUPTI's words (advice)".
inline std::string cupti_failure(const std::string& what, CUptiResult r) {
  return what + ": " + cupti_words(r) + cupti_advice(r);
}

// Throws cupti_failure(what, r) unless r is CUPTI_SUCCESS.
inline void cupti_check(CUptiResult r, const char* what) {
  if (r != CUPTI_SUCCESS) throw std::runtime_error(cupti_failure(what, r));
}

// A CUPTI parameter block: zeroed, with the size CUPTI checks its version by.
template <class P>
P params(std::size_t size) {
  P p{};
  p.structSize = size;
  return p;
}

// cuptiSubscribe under this library's name (CUPTI shows it to the next client as "CUPTI for
// <name>"); where another client holds CUPTI, `holder` gets the name CUPTI gives of it (another
// tool's subscriber, "CUPTI for ..."; Nsight; a framework's profiler), else stays empty.
inline CUptiResult subscribe(CUpti_SubscriberHandle* sub, CUpti_CallbackFunc callback, const char* name,
                             std::string* holder) {
  char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN * 4] = "";
  auto p = params<CUpti_SubscriberParams>(CUpti_SubscriberParams_STRUCT_SIZE);
  p.subscriberName = name;
  p.oldSubscriberName = old;
  p.oldSubscriberSize = sizeof old;
  const CUptiResult r = cuptiSubscribe_v2(sub, callback, nullptr, &p);
  if (holder) *holder = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? std::string(old) : "";
  return r;
}

// subscribe()'s refusal as a person reads it: what holds CUPTI and how to release it; the program
// runs on without this library.
inline std::string subscribe_failure(CUptiResult r, const std::string& holder) {
  if (r != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED || holder.empty()) return cupti_failure("cuptiSubscribe", r);
  return "CUPTI is held by \"" + holder + "\" (one client a process: stop that profiler in the program, e.g. "
         "torch.profiler or jax.profiler, or run without Nsight or compute-sanitizer" + cupti_copies() + ")";
}

// ---- Start-up -------------------------------------------------------------------------------

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

// ---- Callback lists -------------------------------------------------------------------------

// The driver calls after which a program has waited for its kernels (where the libraries decode or
// drain what they collected, so that little is left for the exit).
inline constexpr CUpti_CallbackId kSyncs[] = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,       CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,     CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpy_v2,            CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH,           CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,   CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer};
// The driver's kernel launches (launch_args decodes each).
inline constexpr CUpti_CallbackId kLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,           CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,         CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz};
// The runtime's kernel launches: the runtime call around a driver launch (its correlation id
// names the kernel's activity records too).
inline constexpr CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,           CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,       CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,        CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000};
// A CUDA graph's launch: its kernels have no launch call of their own.
inline constexpr CUpti_CallbackId kGraphLaunches[] = {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
                                                      CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};

// Whether `id` is one of `ids`.
template <std::size_t N>
bool one_of(CUpti_CallbackId id, const CUpti_CallbackId (&ids)[N]) {
  for (CUpti_CallbackId i : ids)
    if (i == id) return true;
  return false;
}

// Turns on the callbacks `ids` of `domain` for `sub`.
template <std::size_t N>
void enable_callbacks(CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain, const CUpti_CallbackId (&ids)[N]) {
  for (CUpti_CallbackId id : ids) cuptiEnableCallback(1, sub, domain, id);
}

// ---- Launch decoding ------------------------------------------------------------------------

// A driver launch's function, stream, arguments and geometry, from its callback's parameters.
struct LaunchArgs {
  CUfunction f = nullptr;           // a CUfunction, or a CUkernel as the runtime of CUDA 12+ may pass
  CUstream stream = nullptr;        // as passed (null: the default stream; see launch_stream)
  void** params = nullptr;          // kernelParams (null where the launch passed `extra`)
  std::vector<int64_t> grid, block;  // empty: a cuLaunchKernelEx without a config
  std::size_t smem = 0;             // dynamic shared memory, bytes
};

inline bool is_launch_ex(CUpti_CallbackId id) {
  return id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx || id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz;
}

// Decodes a callback of one of kLaunches.
inline LaunchArgs launch_args(const CUpti_CallbackData* cb, CUpti_CallbackId id) {
  LaunchArgs a;
  if (is_launch_ex(id)) {
    const auto* p = static_cast<const cuLaunchKernelEx_params*>(cb->functionParams);
    a.f = p->f, a.params = p->kernelParams;
    if (p->config) {
      a.stream = p->config->hStream;
      a.grid = {p->config->gridDimX, p->config->gridDimY, p->config->gridDimZ};
      a.block = {p->config->blockDimX, p->config->blockDimY, p->config->blockDimZ};
      a.smem = p->config->sharedMemBytes;
    }
  } else {  // cuLaunchKernel and cuLaunchCooperativeKernel: the same leading fields
    const auto* p = static_cast<const cuLaunchCooperativeKernel_params*>(cb->functionParams);
    a.f = p->f, a.stream = p->hStream, a.params = p->kernelParams;
    a.grid = {p->gridDimX, p->gridDimY, p->gridDimZ};
    a.block = {p->blockDimX, p->blockDimY, p->blockDimZ};
    a.smem = p->sharedMemBytes;
  }
  return a;
}

// The stream a launch runs on: the null stream of a per-thread-default-stream launch (_ptsz) is
// the calling thread's stream.
inline CUstream launch_stream(const LaunchArgs& a, CUpti_CallbackId id) {
  if (!a.stream && (id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz || id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz ||
                    id == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz))
    return CU_STREAM_PER_THREAD;
  return a.stream;
}

// The size of a launch's argument `i` (false past the last): the driver describes a function's
// parameters, or, where the handle is a context-independent kernel (CUkernel), the kernel's.
inline bool param_size(CUfunction f, std::size_t i, std::size_t* size) {
  std::size_t off = 0;
  return cuFuncGetParamInfo(f, i, &off, size) == CUDA_SUCCESS ||
         cuKernelGetParamInfo(reinterpret_cast<CUkernel>(f), i, &off, size) == CUDA_SUCCESS;
}

// "mangled|gx|gy|gz|bx|by|bz": a kernel and its launch shape, as one key.
inline std::string shape_key(const std::string& mangled, const std::vector<int64_t>& grid,
                             const std::vector<int64_t>& block) {
  std::string k = mangled;
  for (const auto* dims : {&grid, &block})
    for (int64_t v : *dims) k.append(1, '|').append(std::to_string(v));
  return k;
}

// ---- Activity buffers and kernel records ----------------------------------------------------

// CUPTI's buffer request (cuptiActivityRegisterCallbacks), `Bytes` a buffer; the completion
// callback frees it with std::free.
template <std::size_t Bytes>
void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = Bytes;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, Bytes));
  *max_records = 0;
}

// Calls `take(record)` for each record of a completed buffer, while it returns true.
template <class Take>
void for_each_record(uint8_t* buffer, size_t valid, Take take) {
  CUpti_Activity* r = nullptr;
  while (buffer && cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS)
    if (!take(r)) break;
}

// The kernel record `r` is, or null for a record of another kind.
inline const CUpti_ActivityKernel10* kernel_record(const CUpti_Activity* r) {
  return r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ? reinterpret_cast<const CUpti_ActivityKernel10*>(r) : nullptr;
}
inline std::vector<int64_t> grid_of(const CUpti_ActivityKernel10& k) { return {k.gridX, k.gridY, k.gridZ}; }
inline std::vector<int64_t> block_of(const CUpti_ActivityKernel10& k) { return {k.blockX, k.blockY, k.blockZ}; }

}  // namespace archbench::trace
