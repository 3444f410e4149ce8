// What merely being a CUPTI injection costs a program: NULLINJ_LEVEL 0 returns at once; 1 subscribes
// to the launch callbacks; 2 also enables concurrent-kernel activity records; 3 also initialises
// CUPTI's profiler on a thread once cuInit has returned (as the timeline's library does).
#include <cuda.h>
#include <cupti.h>
#include <cupti_profiler_target.h>
#include <cupti_profiler_host.h>
#include <cupti_pmsampling.h>
#include <cupti_target.h>
#include <vector>
#include <string>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <chrono>
static CUpti_SubscriberHandle sub;
static void CUPTIAPI cb(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}
static void CUPTIAPI req(uint8_t** b, size_t* s, size_t* m) { *s = 4 << 20; *b = (uint8_t*)aligned_alloc(8, *s); *m = 0; }
static void CUPTIAPI done(CUcontext, uint32_t, uint8_t* b, size_t, size_t) { free(b); }
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  const char* e = getenv("NULLINJ_LEVEL");
  int level = e ? atoi(e) : 0;
  if (level >= 1) {
    cuptiSubscribe(&sub, cb, nullptr);
    cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
    cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  }
  if (level >= 2) {
    cuptiActivityRegisterCallbacks(req, done);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  }
  if (level >= 3) {
    std::thread([level] {
      for (int i = 0; i < 200; ++i) {
        int n = 0;
        if (cuDeviceGetCount(&n) == CUDA_SUCCESS) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      CUpti_Profiler_Initialize_Params p{};
      p.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
      cuptiProfilerInitialize(&p);
      if (level < 4) return;
      CUpti_Device_GetChipName_Params c{};
      c.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
      c.deviceIndex = 0;
      cuptiDeviceGetChipName(&c);
      static std::string chip = c.pChipName ? c.pChipName : "";
      if (level < 5) return;
      CUpti_PmSampling_GetCounterAvailability_Params a{};
      a.structSize = CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE;
      a.deviceIndex = 0;
      cuptiPmSamplingGetCounterAvailability(&a);
      static std::vector<uint8_t> img(a.counterAvailabilityImageSize);
      a.pCounterAvailabilityImage = img.data();
      cuptiPmSamplingGetCounterAvailability(&a);
      if (level < 6) return;
      CUpti_Profiler_Host_Initialize_Params h{};
      h.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
      h.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
      h.pChipName = chip.c_str();
      h.pCounterAvailabilityImage = img.data();
      cuptiProfilerHostInitialize(&h);  // never deinitialised: the experiment exits with it
    }).detach();
  }
  return 1;
}
