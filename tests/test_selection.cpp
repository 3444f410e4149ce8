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
