// Device selection: defaults, exact selectors, names, types, indices, and errors.
#include <gtest/gtest.h>

#include "fixtures/launcher/selection.hpp"

using archbench::DeviceInfo;
using archbench::select_device;

namespace {
DeviceInfo dev(const std::string& name, const std::string& sel, bool gpu) {
  DeviceInfo d;
  d.backend = "opencl";
  d.name = name;
  d.selector = sel;
  d.is_gpu = gpu;
  d.is_cpu = !gpu;
  return d;
}
const std::vector<DeviceInfo> kCpuThenGpus = {dev("pthread-AMD EPYC", "opencl:0.0", false),
                                              dev("NVIDIA H100 80GB HBM3", "opencl:1.0", true),
                                              dev("NVIDIA H200", "opencl:1.1", true)};
int pick(const std::vector<DeviceInfo>& all, const std::string& s) {
  std::string error;
  return select_device(all, s, error);
}
}  // namespace

TEST(Selection, DefaultPrefersTheFirstGpu) { EXPECT_EQ(pick(kCpuThenGpus, ""), 1); }

TEST(Selection, DefaultFallsBackToTheFirstDevice) {
  EXPECT_EQ(pick({dev("cpu a", "opencl:0.0", false), dev("cpu b", "opencl:0.1", false)}, ""), 0);
}

TEST(Selection, ExactSelectorIndexTypeAndBackend) {
  EXPECT_EQ(pick(kCpuThenGpus, "opencl:1.1"), 2);
  EXPECT_EQ(pick(kCpuThenGpus, "OpenCL:0.0"), 0);
  EXPECT_EQ(pick(kCpuThenGpus, "2"), 2);
  EXPECT_EQ(pick(kCpuThenGpus, "cpu"), 0);
  EXPECT_EQ(pick(kCpuThenGpus, "gpu"), 1);
  EXPECT_EQ(pick(kCpuThenGpus, "opencl"), 1);
}

TEST(Selection, NamePartMustNameOneDevice) {
  EXPECT_EQ(pick(kCpuThenGpus, "h100"), 1);
  EXPECT_EQ(pick(kCpuThenGpus, "epyc"), 0);
  std::string error;
  EXPECT_EQ(select_device(kCpuThenGpus, "nvidia", error), -1);
  EXPECT_NE(error.find("matches 2 devices"), std::string::npos) << error;
}

TEST(Selection, UnknownSelectorsSayWhy) {
  std::string error;
  EXPECT_EQ(select_device(kCpuThenGpus, "tpu-9000", error), -1);
  EXPECT_NE(error.find("no device matches"), std::string::npos) << error;
  EXPECT_EQ(select_device(kCpuThenGpus, "7", error), -1);
  EXPECT_NE(error.find("out of range"), std::string::npos) << error;
  // Beyond any integer: an answer, not an exception.
  EXPECT_EQ(select_device(kCpuThenGpus, "99999999999999999999999", error), -1);
  EXPECT_NE(error.find("out of range"), std::string::npos) << error;
  EXPECT_EQ(select_device({dev("cpu", "opencl:0.0", false)}, "gpu", error), -1);
  EXPECT_NE(error.find("no gpu device"), std::string::npos) << error;
  EXPECT_EQ(select_device({}, "", error), -1);
}

TEST(Selection, ListingShowsSelectorsAndFacts) {
  const std::string s = archbench::describe_devices(kCpuThenGpus);
  EXPECT_NE(s.find("--device=opencl:1.0"), std::string::npos);
  EXPECT_NE(s.find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(s.find("fp64"), std::string::npos);
}

// Mixed backends and device types, in backend preference order: CUDA's GPUs, then an OpenCL
// platform with only a CPU, then one with an accelerator that is neither GPU nor CPU (an FPGA).
namespace {
DeviceInfo typed(const std::string& backend, const std::string& name, const std::string& sel, bool gpu, bool cpu) {
  DeviceInfo d = dev(name, sel, gpu);
  d.backend = backend;
  d.is_cpu = cpu;
  return d;
}
const std::vector<DeviceInfo> kMixed = {
    typed("cuda", "NVIDIA H100 80GB HBM3", "cuda:0", true, false),
    typed("cuda", "NVIDIA H200", "cuda:1", true, false),
    typed("opencl", "pthread-AMD EPYC 9654", "opencl:0.0", false, true),
    typed("opencl", "Intel FPGA Emulation Device", "opencl:1.0", false, false),
};
// The accelerator listed first, then a CPU, then a GPU: "gpu" and the default must skip the first two.
const std::vector<DeviceInfo> kAcceleratorFirst = {
    typed("opencl", "Intel FPGA Emulation Device", "opencl:0.0", false, false),
    typed("opencl", "pthread-AMD EPYC 9654", "opencl:1.0", false, true),
    typed("opencl", "AMD Instinct MI300X", "opencl:2.0", true, false),
};
}  // namespace

TEST(Selection, ABackendWithoutAGpuGivesItsOwnFirstDevice) {
  EXPECT_EQ(pick(kMixed, "opencl"), 2);  // its CPU, not device 0 (CUDA's GPU), not the FPGA
  EXPECT_EQ(pick(kMixed, "cuda"), 0);
  EXPECT_EQ(pick(kMixed, "OpenCL"), 2);
}

TEST(Selection, GpuMeansAGpuNotAnyAccelerator) {
  EXPECT_EQ(pick(kAcceleratorFirst, "gpu"), 2);
  EXPECT_EQ(pick(kAcceleratorFirst, ""), 2);
  EXPECT_EQ(pick(kAcceleratorFirst, "cpu"), 1);
  EXPECT_EQ(pick(kMixed, "gpu"), 0);
  EXPECT_EQ(pick(kMixed, "cpu"), 2);
  // Only an accelerator and a CPU: no GPU, with the reason, never device 0.
  const std::vector<DeviceInfo> no_gpu(kAcceleratorFirst.begin(), kAcceleratorFirst.begin() + 2);
  std::string error;
  EXPECT_EQ(select_device(no_gpu, "gpu", error), -1);
  EXPECT_NE(error.find("no gpu device"), std::string::npos) << error;
  EXPECT_EQ(pick(no_gpu, ""), 0);  // the default falls back to the first device
  const std::vector<DeviceInfo> only_accelerator(kAcceleratorFirst.begin(), kAcceleratorFirst.begin() + 1);
  EXPECT_EQ(select_device(only_accelerator, "cpu", error), -1);
  EXPECT_EQ(select_device(only_accelerator, "gpu", error), -1);
}

TEST(Selection, ExactSelectorsIndexesAndNamesAcrossBackends) {
  for (std::size_t i = 0; i < kMixed.size(); ++i) {
    SCOPED_TRACE(kMixed[i].selector);
    EXPECT_EQ(pick(kMixed, kMixed[i].selector), static_cast<int>(i));
    EXPECT_EQ(pick(kMixed, std::to_string(i)), static_cast<int>(i));
    EXPECT_EQ(pick(kMixed, kMixed[i].name), static_cast<int>(i));
  }
  EXPECT_EQ(pick(kMixed, "fpga"), 3);
  EXPECT_EQ(pick(kMixed, "h200"), 1);
  EXPECT_EQ(pick(kMixed, "4"), -1);
  std::string error;
  EXPECT_EQ(select_device(kMixed, "NVIDIA", error), -1);  // two devices: an exact selector is needed
  EXPECT_NE(error.find("matches 2 devices"), std::string::npos) << error;
}
