// Conformance: every workload of every family, built at test size for the default device
// (or ARCHBENCH_DEVICE), runs once and must (1) agree with its host reference on every
// item and (2) have done exactly the work its cost model counts, as tallied by that reference.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>

#include "fixtures/measure.hpp"
#include "fixtures/selection.hpp"

namespace ab = archbench;

namespace {

ab::Device* g_device = nullptr;

class WorkloadTest : public testing::Test {
 public:
  explicit WorkloadTest(ab::Workload w) : w_(std::move(w)) {}
  void TestBody() override {
    ab::Outcome o;
    try {
      o = ab::run_once(*g_device, w_, 1);
    } catch (const ab::Skip& s) {
      if (!w_.skip.empty()) GTEST_SKIP() << s.what();  // the family said it cannot run here
      FAIL() << "could not run: " << s.what();
    }
    EXPECT_EQ(o.mismatch, "") << w_.name;
    EXPECT_EQ(o.tally, w_.cost) << w_.name << ": the reference tallied " << o.tally.str()
                                << " but the cost model counts " << w_.cost.str();
  }

 private:
  ab::Workload w_;
};

}  // namespace

// A size the device cannot hold is skipped with the reason, not attempted.
TEST(Measure, TooLargeForTheDeviceIsSkippedWithTheReason) {
  ab::Workload w;
  w.name = "oversize";
  w.kernel = {"latency", "chase", {}};
  w.buffers = {{static_cast<std::size_t>(g_device->info().max_alloc) + 4096, nullptr}};
  try {
    ab::run_once(*g_device, w, 1);
    FAIL() << "an allocation beyond the device's limit was attempted";
  } catch (const ab::Skip& s) {
    EXPECT_NE(std::string(s.what()).find("exceeds"), std::string::npos) << s.what();
  }
}

// A workload the family marked as impossible here is skipped with the family's reason.
TEST(Measure, FamilySkipReasonIsKept) {
  ab::Workload w;
  w.skip = "the device has no fp64";
  try {
    ab::run_once(*g_device, w, 1);
    FAIL();
  } catch (const ab::Skip& s) {
    EXPECT_STREQ(s.what(), "the device has no fp64");
  }
}

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::vector<ab::DeviceInfo> devices;
  std::unique_ptr<ab::Backend> backend = ab::make_opencl_backend();
  std::string problem;
  devices = backend->devices(problem);
  if (devices.empty()) {
    std::cout << "SKIPPED: no OpenCL device: " << problem << "\n";
    return 77;
  }
  const char* sel = std::getenv("ARCHBENCH_DEVICE");
  std::string error;
  const int chosen = ab::select_device(devices, sel ? sel : "", error);
  if (chosen < 0) {
    std::cerr << "ARCHBENCH_DEVICE=" << sel << ": " << error << "\n";
    return 2;
  }
  std::unique_ptr<ab::Device> device = backend->open(devices[chosen]);
  g_device = device.get();
  std::cout << "Conformance on " << ab::short_name(devices[chosen]) << "\n";
  const ab::Plan plan{devices[chosen], ab::Size::test};
  for (const ab::Family& f : ab::families())
    for (ab::Workload& w : f.build(plan)) {
      const std::string test_name = w.name;
      testing::RegisterTest(f.name, test_name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [w = std::move(w)]() -> testing::Test* { return new WorkloadTest(w); });
    }
  return RUN_ALL_TESTS();
}
