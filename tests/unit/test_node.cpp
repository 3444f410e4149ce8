// A node without a GPU: nccl-tests' bus bandwidth factors, NCCL missing as a reason to skip,
// NVLink multicast refused unless it is off, and --device=all's children run at once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "fixtures/core/device.hpp"
#include "fixtures/launcher/node.hpp"
#ifdef ARCHBENCH_HAVE_CUDA
#include "fixtures/backends/cuda/nccl.hpp"
#endif

namespace ab = archbench;

TEST(BusFactor, IsNcclTestsDefinition) {
  EXPECT_DOUBLE_EQ(ab::bus_factor("all_reduce", 4), 1.5);   // 2(n-1)/n
  EXPECT_DOUBLE_EQ(ab::bus_factor("all_reduce", 8), 1.75);
  EXPECT_DOUBLE_EQ(ab::bus_factor("all_gather", 4), 0.75);  // (n-1)/n
  EXPECT_DOUBLE_EQ(ab::bus_factor("reduce_scatter", 8), 0.875);
  EXPECT_DOUBLE_EQ(ab::bus_factor("all_to_all", 2), 0.5);
  EXPECT_DOUBLE_EQ(ab::bus_factor("broadcast", 4), 1.0);
  EXPECT_DOUBLE_EQ(ab::bus_factor("all_reduce", 1), 0.0);  // one GPU moves nothing over a bus
  EXPECT_DOUBLE_EQ(ab::bus_factor("gossip", 4), 0.0);
}

#ifdef ARCHBENCH_HAVE_CUDA
TEST(Nccl, MissingIsAReasonToSkip) {
  setenv("ARCHBENCH_NCCL", "/nonexistent/libnccl.so.2", 1);
  std::string why;
  EXPECT_EQ(ab::cuda::load_nccl(why), nullptr);
  EXPECT_NE(why.find("NCCL not found"), std::string::npos) << why;
  EXPECT_NE(why.find("ARCHBENCH_NCCL"), std::string::npos) << why;  // it says how to point at one
}

TEST(Nccl, MulticastMustBeOff) {
  unsetenv("NCCL_MNNVL_ENABLE");
  unsetenv("NCCL_NVLS_ENABLE");
  EXPECT_NE(ab::cuda::nvls_refusal().find("NCCL_NVLS_ENABLE=0"), std::string::npos);
  setenv("NCCL_NVLS_ENABLE", "1", 1);
  EXPECT_NE(ab::cuda::nvls_refusal(), "");
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  EXPECT_EQ(ab::cuda::nvls_refusal(), "");
  setenv("NCCL_MNNVL_ENABLE", "1", 1);
  EXPECT_NE(ab::cuda::nvls_refusal(), "");
  unsetenv("NCCL_MNNVL_ENABLE");
}
#endif

TEST(Children, RunAtOnceWithTheirLinesPrefixed) {
  const auto t0 = std::chrono::steady_clock::now();
  testing::internal::CaptureStdout();
  const std::vector<ab::ChildResult> r =
      ab::run_children({{"/bin/sh", "-c", "sleep 1; echo one"}, {"/bin/sh", "-c", "sleep 1; echo two; exit 3"}},
                       {"[a] ", "[b] "});
  const std::string out = testing::internal::GetCapturedStdout();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 1.8) << "two children of one second each took " << s << " s: not at once";
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].status, 0);
  EXPECT_EQ(r[1].status, 3);
  EXPECT_EQ(r[1].tail, "two\n");
  EXPECT_NE(out.find("[a] one\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[b] two\n"), std::string::npos) << out;
}
