// tools/analysis/common/cupti.hpp without a GPU: launch decoding on fabricated callback data, the
// callback lists, CUPTI's error text (libcupti's own words), activity buffers and kernel records
// (cuptiActivityGetNextRecord faked over fabricated records), parameter blocks.
#include "tools/analysis/common/cupti.hpp"

#include <cupti_profiler_target.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <utility>
#include <vector>

namespace tr = archbench::trace;

// ---- Fakes of the driver and CUPTI calls the layer makes (defined here, they win over libcupti's).
namespace fake {
std::vector<const CUpti_Activity*> records;  // what the fake buffer holds, in order
std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> enabled;
}  // namespace fake

extern "C" {
CUptiResult cuptiActivityGetNextRecord(uint8_t*, size_t, CUpti_Activity** record) {
  std::size_t i = 0;
  if (*record)
    while (i < fake::records.size() && fake::records[i] != *record) ++i;
  const std::size_t next = *record ? i + 1 : 0;
  if (next >= fake::records.size()) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = const_cast<CUpti_Activity*>(fake::records[next]);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain d, CUpti_CallbackId id) {
  if (enable) fake::enabled.emplace_back(d, id);
  return CUPTI_SUCCESS;
}
CUresult cuGetErrorName(CUresult r, const char** name) {
  *name = r == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : nullptr;
  return *name ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
}

namespace {

CUfunction fn(std::uintptr_t v) { return reinterpret_cast<CUfunction>(v); }
CUstream stream(std::uintptr_t v) { return reinterpret_cast<CUstream>(v); }

CUpti_CallbackData callback_with(const void* params) {
  CUpti_CallbackData cb{};
  cb.functionParams = params;
  cb.callbackSite = CUPTI_API_ENTER;
  return cb;
}

TEST(LaunchArgs, CuLaunchKernel) {
  void* args[2] = {nullptr, nullptr};
  cuLaunchKernel_params p{};
  p.f = fn(0x10), p.gridDimX = 4, p.gridDimY = 3, p.gridDimZ = 2, p.blockDimX = 128, p.blockDimY = 1, p.blockDimZ = 1;
  p.sharedMemBytes = 96, p.hStream = stream(0x20), p.kernelParams = args;
  const CUpti_CallbackData cb = callback_with(&p);
  const tr::LaunchArgs a = tr::launch_args(&cb, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  EXPECT_EQ(a.f, fn(0x10));
  EXPECT_EQ(a.stream, stream(0x20));
  EXPECT_EQ(a.params, args);
  EXPECT_EQ(a.grid, (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(a.block, (std::vector<int64_t>{128, 1, 1}));
  EXPECT_EQ(a.smem, 96u);
}

TEST(LaunchArgs, CuLaunchCooperativeKernelPerThreadStream) {
  cuLaunchCooperativeKernel_ptsz_params p{};
  p.f = fn(0x11), p.gridDimX = 7, p.gridDimY = 1, p.gridDimZ = 1, p.blockDimX = 32, p.blockDimY = 2, p.blockDimZ = 1;
  const CUpti_CallbackData cb = callback_with(&p);
  const CUpti_CallbackId id = CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
  const tr::LaunchArgs a = tr::launch_args(&cb, id);
  EXPECT_EQ(a.f, fn(0x11));
  EXPECT_EQ(a.grid, (std::vector<int64_t>{7, 1, 1}));
  EXPECT_EQ(a.block, (std::vector<int64_t>{32, 2, 1}));
  EXPECT_EQ(a.stream, nullptr);                             // as passed
  EXPECT_EQ(tr::launch_stream(a, id), CU_STREAM_PER_THREAD);  // the calling thread's stream
  EXPECT_EQ(tr::launch_stream(a, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel), nullptr);
}

TEST(LaunchArgs, CuLaunchKernelExWithAndWithoutConfig) {
  CUlaunchConfig config{};
  config.gridDimX = 8, config.gridDimY = 8, config.gridDimZ = 1, config.blockDimX = 256, config.blockDimY = 1,
  config.blockDimZ = 1, config.sharedMemBytes = 1024, config.hStream = stream(0x30);
  void* args[1] = {nullptr};
  cuLaunchKernelEx_params p{};
  p.config = &config, p.f = fn(0x12), p.kernelParams = args;
  CUpti_CallbackData cb = callback_with(&p);
  ASSERT_TRUE(tr::is_launch_ex(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz));
  tr::LaunchArgs a = tr::launch_args(&cb, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz);
  EXPECT_EQ(a.f, fn(0x12));
  EXPECT_EQ(a.params, args);
  EXPECT_EQ(a.stream, stream(0x30));
  EXPECT_EQ(tr::launch_stream(a, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz), stream(0x30));
  EXPECT_EQ(a.grid, (std::vector<int64_t>{8, 8, 1}));
  EXPECT_EQ(a.block, (std::vector<int64_t>{256, 1, 1}));
  EXPECT_EQ(a.smem, 1024u);
  p.config = nullptr;  // no geometry to decode: the libraries skip such a launch
  a = tr::launch_args(&cb, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx);
  EXPECT_EQ(a.f, fn(0x12));
  EXPECT_TRUE(a.grid.empty());
  EXPECT_TRUE(a.block.empty());
  EXPECT_EQ(a.stream, nullptr);
}

TEST(LaunchArgs, ShapeKey) {
  EXPECT_EQ(tr::shape_key("_Z1kPf", {4, 1, 1}, {128, 1, 1}), "_Z1kPf|4|1|1|128|1|1");
  EXPECT_NE(tr::shape_key("k", {4, 1, 1}, {128, 1, 1}), tr::shape_key("k", {4, 1, 1}, {64, 2, 1}));
}

TEST(CallbackLists, EveryLaunchDecodedAndListsApart) {
  for (CUpti_CallbackId id : tr::kLaunches) {
    EXPECT_FALSE(tr::one_of(id, tr::kSyncs)) << id;
    EXPECT_FALSE(tr::one_of(id, tr::kGraphLaunches)) << id;
  }
  EXPECT_TRUE(tr::one_of(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, tr::kLaunches));
  EXPECT_TRUE(tr::one_of(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, tr::kSyncs));
  EXPECT_TRUE(tr::one_of(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, tr::kGraphLaunches));
  EXPECT_TRUE(tr::one_of(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, tr::kRuntimeLaunches));
  EXPECT_FALSE(tr::one_of(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc, tr::kLaunches));
}

TEST(CallbackLists, EnableCallbacksTurnsOnEachId) {
  fake::enabled.clear();
  tr::enable_callbacks(nullptr, CUPTI_CB_DOMAIN_DRIVER_API, tr::kSyncs);
  tr::enable_callbacks(nullptr, CUPTI_CB_DOMAIN_RESOURCE, {CUPTI_CBID_RESOURCE_CONTEXT_CREATED});
  ASSERT_EQ(fake::enabled.size(), std::size(tr::kSyncs) + 1);
  for (std::size_t i = 0; i < std::size(tr::kSyncs); ++i) {
    EXPECT_EQ(fake::enabled[i].first, CUPTI_CB_DOMAIN_DRIVER_API);
    EXPECT_EQ(fake::enabled[i].second, tr::kSyncs[i]);
  }
  EXPECT_EQ(fake::enabled.back().first, CUPTI_CB_DOMAIN_RESOURCE);
  EXPECT_EQ(fake::enabled.back().second, CUpti_CallbackId(CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
}

TEST(ErrorText, CuptisOwnWordsAndWhatToDo) {
  EXPECT_EQ(tr::cupti_words(CUPTI_ERROR_INVALID_PARAMETER), "CUPTI_ERROR_INVALID_PARAMETER");
  const std::string held = tr::cupti_failure("cuptiProfilerInitialize", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  EXPECT_EQ(held.rfind("cuptiProfilerInitialize: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (", 0), 0u) << held;
  EXPECT_NE(held.find("another CUPTI client"), std::string::npos) << held;
  EXPECT_NE(tr::cupti_failure("x", CUPTI_ERROR_INSUFFICIENT_PRIVILEGES).find("NVreg_RestrictProfilingToAdminUsers=0"),
            std::string::npos);
  EXPECT_EQ(tr::cupti_failure("cuptiSassMetricsEnable", CUPTI_ERROR_INVALID_PARAMETER),
            "cuptiSassMetricsEnable: CUPTI_ERROR_INVALID_PARAMETER");  // nothing to add
  EXPECT_NO_THROW(tr::cupti_check(CUPTI_SUCCESS, "ok"));
  try {
    tr::cupti_check(CUPTI_ERROR_NOT_INITIALIZED, "cuptiPmSamplingEnable");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "cuptiPmSamplingEnable: CUPTI_ERROR_NOT_INITIALIZED");
  }
  EXPECT_EQ(tr::cu_words(CUDA_ERROR_NO_DEVICE), "CUDA_ERROR_NO_DEVICE");
  EXPECT_EQ(tr::cu_words(CUresult(999)), "999");  // a result the driver cannot name
}

// Two copies of libcupti in one process are two CUPTI clients (the second is refused with
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED): the refusal's text names the copies loaded.
TEST(ErrorText, NamesTheCopiesOfLibcuptiLoaded) {
  const std::vector<std::string> one = tr::mapped_libraries("libcupti");
  ASSERT_EQ(one.size(), 1u);  // this test's own (linked)
  EXPECT_NE(one[0].find("/libcupti.so"), std::string::npos) << one[0];
  EXPECT_EQ(tr::cupti_copies(), "");
  // A second copy under another file name, as a framework's wheel brings (nvidia/cuda_cupti/lib).
  const std::string second = ::testing::TempDir() + "libcupti-copy-" + std::to_string(getpid()) + ".so";
  {
    std::ifstream in(one[0], std::ios::binary);
    std::ofstream out(second, std::ios::binary);
    out << in.rdbuf();
  }
  void* h = dlopen(second.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  std::vector<std::string> two = tr::mapped_libraries("libcupti");  // in the order of their addresses
  std::sort(two.begin(), two.end());
  std::vector<std::string> expected{one[0], second};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(two, expected);
  const std::string said = tr::cupti_failure("cuptiProfilerInitialize", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  EXPECT_NE(said.find("; 2 copies of libcupti are loaded: "), std::string::npos) << said;
  EXPECT_NE(said.find(one[0]), std::string::npos) << said;
  EXPECT_NE(said.find(second), std::string::npos) << said;
  EXPECT_EQ(said.back(), ')');
  std::remove(second.c_str());  // (mapped until the process ends)
}

TEST(Params, ZeroedWithItsSize) {
  const auto p = tr::params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  EXPECT_EQ(p.structSize, CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  EXPECT_EQ(p.pPriv, nullptr);
}

TEST(ActivityBuffers, RequestedSizeAndAlignment) {
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 7;
  tr::buffer_requested<std::size_t(4) << 20>(&buffer, &size, &max_records);
  ASSERT_NE(buffer, nullptr);
  EXPECT_EQ(size, std::size_t(4) << 20);
  EXPECT_EQ(max_records, 0u);  // as many as fit
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer) % 8, 0u);
  std::memset(buffer, 0, size);  // all of it is ours
  std::free(buffer);
}

TEST(ActivityBuffers, KernelRecordsAmongOthers) {
  CUpti_ActivityKernel10 k1{}, k2{};
  k1.kind = k2.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k1.name = "_Z3addPf", k1.gridX = 10, k1.gridY = 1, k1.gridZ = 1, k1.blockX = 256, k1.blockY = 1, k1.blockZ = 1;
  k1.start = 100, k1.end = 350, k1.correlationId = 5;
  k2.name = "_Z3mulPf", k2.gridX = 2, k2.gridY = 2, k2.gridZ = 2, k2.blockX = 8, k2.blockY = 8, k2.blockZ = 4;
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  fake::records = {reinterpret_cast<const CUpti_Activity*>(&k1), reinterpret_cast<const CUpti_Activity*>(&copy),
                   reinterpret_cast<const CUpti_Activity*>(&k2)};
  uint8_t buffer[8];
  std::vector<std::string> kernels;
  std::size_t seen = 0;
  tr::for_each_record(buffer, sizeof buffer, [&](const CUpti_Activity* r) {
    ++seen;
    if (const CUpti_ActivityKernel10* k = tr::kernel_record(r)) {
      kernels.push_back(k->name);
      if (kernels.size() == 1) {
        EXPECT_EQ(tr::grid_of(*k), (std::vector<int64_t>{10, 1, 1}));
        EXPECT_EQ(tr::block_of(*k), (std::vector<int64_t>{256, 1, 1}));
        EXPECT_EQ(k->end - k->start, 250u);
      } else {
        EXPECT_EQ(tr::grid_of(*k), (std::vector<int64_t>{2, 2, 2}));
        EXPECT_EQ(tr::block_of(*k), (std::vector<int64_t>{8, 8, 4}));
      }
    }
    return true;
  });
  EXPECT_EQ(seen, 3u);
  EXPECT_EQ(kernels, (std::vector<std::string>{"_Z3addPf", "_Z3mulPf"}));
  seen = 0;  // the taker stops the walk (the tracer, once its file is closed)
  tr::for_each_record(buffer, sizeof buffer, [&](const CUpti_Activity*) { return ++seen < 2; });
  EXPECT_EQ(seen, 2u);
  seen = 0;  // a null buffer (CUPTI's, at a flush with nothing to give) has no records
  tr::for_each_record(nullptr, 0, [&](const CUpti_Activity*) { return ++seen, true; });
  EXPECT_EQ(seen, 0u);
  fake::records.clear();
}

}  // namespace
