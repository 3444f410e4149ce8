// libarchbench_pmsampling's start, sampling and end without a GPU (ctest
// analysis/pmsampling/pmsampling_host): the library's source is compiled in with the CUDA driver and CUPTI's device calls defined here
// (a fake H100 that takes 30 ms to enable PM sampling and 10 ms to configure it, and completes 3
// samples of known counters a decode), while the Profiler Host API is libcupti's own, so the
// one-pass search, the cache and the host object are real. The program plays a CUDA program:
// InitializeInjection (as cuInit would), a context created after `ctx_ms` (unless "nocontext"; with
// FAKE_CONTEXT_AFTER_START, not before the sampling has started), three launches, exit. FAKE_DEVICES
// is the number of devices the process sees (default 1). With the argument "sampler" it is
// archbench_pmsampler instead (sampler.cpp's main after the library's load), sampling until its
// input ends. Sample times are the host's (CLOCK_MONOTONIC, as CUPTI's timestamps here): each
// decode's 3 samples share out the time since the one before, so that a sampler's samples cover a
// program's run. With FAKE_BEHIND=N, the decodes after the N-th find a full image of records
// without time (as CUPTI's do once the decoding has fallen behind), until PM sampling is enabled
// again. tests/analysis/pmsampling/pmsampling_host.py runs it and reads its records.
#include <cuda.h>
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace fake {
CUpti_CallbackFunc callback = nullptr;
int object = 0;  // what the fake handles point at
constexpr std::uint64_t kT0 = 1700000000000000000ull;
void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
std::uint64_t now() {  // CUPTI's timestamp: the host's monotonic clock, from kT0
  return kT0 + std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch()).count());
}
std::mutex mu;
std::uint64_t last = 0;                                       // the last decode's time
int decodes = 0, enables = 0;
bool behind() {  // FAKE_BEHIND=N: after N decodes, until enabled again
  const char* e = std::getenv("FAKE_BEHIND");
  return e && decodes > std::atoi(e) && enables < 2;
}
std::map<const void*, std::pair<std::uint64_t, std::uint64_t>> window;  // an image's samples' span
}  // namespace fake

extern "C" {
CUresult cuInit(unsigned) { fake::sleep_ms(20); return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice* d, int ordinal) { *d = ordinal; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int* n) {  // FAKE_DEVICES (default 1)
  const char* e = std::getenv("FAKE_DEVICES");
  *n = e ? std::atoi(e) : 1;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char* n, int len, CUdevice) { std::strncpy(n, "Fake H100", len); return CUDA_SUCCESS; }
CUresult cuDeviceGetPCIBusId(char* n, int len, CUdevice) { std::strncpy(n, "0000:00:06.0", len); return CUDA_SUCCESS; }
CUresult cuGetErrorName(CUresult, const char** s) { *s = "CUDA_ERROR_FAKE"; return CUDA_SUCCESS; }
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* s, CUpti_CallbackFunc f, void*) {
  *s = reinterpret_cast<CUpti_SubscriberHandle>(&fake::object);
  fake::callback = f;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* s, CUpti_CallbackFunc f, void* u, CUpti_SubscriberParams*) {
  return cuptiSubscribe(s, f, u);
}
CUptiResult cuptiEnableCallback(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnable(CUpti_ActivityKind) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivityFlushAll(uint32_t) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivityGetNextRecord(uint8_t*, size_t, CUpti_Activity**) { return CUPTI_ERROR_MAX_LIMIT_REACHED; }
CUptiResult cuptiGetDeviceId(CUcontext, uint32_t* o) { *o = 0; return CUPTI_SUCCESS; }
CUptiResult cuptiGetTimestamp(uint64_t* t) { *t = fake::now(); return CUPTI_SUCCESS; }
CUptiResult cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiProfilerDeviceSupported(CUpti_Profiler_DeviceSupported_Params* p) {
  p->isSupported = CUPTI_PROFILER_CONFIGURATION_SUPPORTED;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params* p) { p->pChipName = "GH100"; return CUPTI_SUCCESS; }
CUptiResult cuptiPmSamplingGetCounterAvailability(CUpti_PmSampling_GetCounterAvailability_Params* p) {
  p->counterAvailabilityImageSize = 0;  // none: the chip's whole list
  return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingEnable(CUpti_PmSampling_Enable_Params* p) {
  fake::sleep_ms(30);
  {
    std::lock_guard<std::mutex> lk(fake::mu);
    ++fake::enables;
  }
  p->pPmSamplingObject = reinterpret_cast<CUpti_PmSampling_Object*>(&fake::object);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingDisable(CUpti_PmSampling_Disable_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiPmSamplingGetCounterDataSize(CUpti_PmSampling_GetCounterDataSize_Params* p) {
  p->counterDataSize = std::size_t(p->maxSamples) * 41600;  // the H100's size per sample
  return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingCounterDataImageInitialize(CUpti_PmSampling_CounterDataImage_Initialize_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiPmSamplingSetConfig(CUpti_PmSampling_SetConfig_Params* p) {
  fake::sleep_ms(10);
  return p->configSize > 0 && p->pConfig ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}
CUptiResult cuptiPmSamplingStart(CUpti_PmSampling_Start_Params*) {
  std::lock_guard<std::mutex> lk(fake::mu);
  fake::last = fake::now();
  return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingStop(CUpti_PmSampling_Stop_Params*) { return CUPTI_SUCCESS; }
CUptiResult cuptiPmSamplingDecodeData(CUpti_PmSampling_DecodeData_Params* p) {
  {
    std::lock_guard<std::mutex> lk(fake::mu);
    const std::uint64_t t = fake::now();
    fake::window[p->pCounterDataImage] = {fake::last, t};
    fake::last = t;
    ++fake::decodes;
    p->decodeStopReason = fake::behind() ? CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
                                         : CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS;
  }
  p->overflow = 0;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingGetCounterDataInfo(CUpti_PmSampling_GetCounterDataInfo_Params* p) {
  std::lock_guard<std::mutex> lk(fake::mu);
  p->numTotalSamples = 128;
  p->numPopulatedSamples = p->numCompletedSamples = fake::behind() ? 128 : 3;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiPmSamplingCounterDataGetSampleInfo(CUpti_PmSampling_CounterData_GetSampleInfo_Params* p) {
  std::lock_guard<std::mutex> lk(fake::mu);
  if (fake::behind()) {  // one repeated, earlier time
    p->startTimestamp = p->endTimestamp = fake::kT0 + 1;
    return CUPTI_SUCCESS;
  }
  const auto [a, b] = fake::window[p->pCounterDataImage];
  p->startTimestamp = a + (b - a) * p->sampleIndex / 3;
  p->endTimestamp = a + (b - a) * (p->sampleIndex + 1) / 3;
  return CUPTI_SUCCESS;
}
// IPC 2 (of 4), warp efficiency 0.75, issued IPC 2.2: retire 0.375, divergence 0.175, stall 0.45.
CUptiResult cuptiProfilerHostEvaluateToGpuValues(CUpti_Profiler_Host_EvaluateToGpuValues_Params* p) {
  for (std::size_t i = 0; i < p->numMetrics; ++i) {
    const std::string m = p->ppMetricNames[i];
    p->pMetricValues[i] = m.find("cycles_active") != std::string::npos  ? 1000
                          : m.find("thread_inst") != std::string::npos  ? 48000
                          : m.find("inst_issued") != std::string::npos  ? 2200
                          : m.find("inst_executed") != std::string::npos ? 2000
                                                                          : 0;
  }
  return CUPTI_SUCCESS;
}
}

#include "tools/analysis/pmsampling/inject.cpp"
#include "tools/analysis/pmsampling/metrics.cpp"
#include "tools/analysis/pmsampling/sampling.cpp"
#include "tools/analysis/pmsampling/start.cpp"
#define ARCHBENCH_PMSAMPLER_NO_MAIN
#include "tools/analysis/pmsampling/sampler.cpp"

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "sampler") {  // archbench_pmsampler, its library loaded by cuInit
    if (!InitializeInjection()) return 1;
    return sampler_main();
  }
  const int ctx_ms = argc > 1 ? std::atoi(argv[1]) : 50;
  const bool context = !(argc > 2 && std::string(argv[2]) == "nocontext");
  if (!InitializeInjection() || !fake::callback) return 1;
  fake::sleep_ms(ctx_ms);  // the program's context creation
  if (std::getenv("FAKE_CONTEXT_AFTER_START")) {  // made only once the library's config record is out
    const char* out = std::getenv("ARCHBENCH_PM_OUT");
    for (int i = 0; i < 2000 && out; ++i, fake::sleep_ms(10)) {
      std::ifstream f(out);
      const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (text.find("\"type\":\"config\"") != std::string::npos) break;
    }
  }
  CUpti_ResourceData rd{};
  rd.context = reinterpret_cast<CUcontext>(&fake::object);
  if (context) fake::callback(nullptr, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, &rd);
  fake::sleep_ms(5);
  CUpti_CallbackData cb{};
  cb.callbackSite = CUPTI_API_ENTER;
  cb.context = rd.context;
  cb.symbolName = "_Z1aPf";
  for (unsigned i = 0; i < 3; ++i) {
    cb.correlationId = i + 1;
    fake::callback(nullptr, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
  }
  fake::sleep_ms(60);
  return 0;  // at_exit: the end
}
