// The cost-to-counter arithmetic: which counters a cost makes, with which flags and values.
#include <benchmark/benchmark.h>
#include <gtest/gtest.h>

#include "fixtures/core/cost.hpp"

using archbench::Cost;
using archbench::counters;
using benchmark::Counter;

namespace {
const archbench::CounterValue* find(const std::vector<archbench::CounterValue>& cs, const std::string& n) {
  for (const auto& c : cs)
    if (c.name == n) return &c;
  return nullptr;
}
}  // namespace

TEST(Cost, FlopsBecomeAnIterationInvariantRate) {
  Cost c;
  c.flops = 1e9;
  auto cs = counters(c, 0);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].name, "flop_per_s");
  EXPECT_DOUBLE_EQ(cs[0].value, 1e9);
  EXPECT_EQ(cs[0].flags, Counter::kIsIterationInvariantRate);
}

TEST(Cost, BytesReadAndWrittenAddUp) {
  Cost c;
  c.bytes_read = 200;
  c.bytes_written = 100;
  auto cs = counters(c, 0);
  ASSERT_NE(find(cs, "byte_per_s"), nullptr);
  EXPECT_DOUBLE_EQ(find(cs, "byte_per_s")->value, 300);
  EXPECT_EQ(find(cs, "flop_per_s"), nullptr);
  EXPECT_EQ(find(cs, "op_per_s"), nullptr);
}

TEST(Cost, IntegerOpsAreNotFlops) {
  Cost c;
  c.int_ops = 42;
  auto cs = counters(c, 0);
  ASSERT_NE(find(cs, "op_per_s"), nullptr);
  EXPECT_EQ(find(cs, "flop_per_s"), nullptr);
}

// What Google Benchmark will print: an inverted iteration-invariant rate. Reproduce its
// arithmetic (value * iterations / seconds, then 1/x) to check the units come out right.
TEST(Cost, LatencyCountersComeOutInNanosecondsAndCycles) {
  Cost c;
  c.accesses = 1000;  // per iteration
  auto cs = counters(c, 2000);  // 2 GHz
  const auto* ns = find(cs, "ns_per_access");
  const auto* cyc = find(cs, "cycles_per_access");
  ASSERT_NE(ns, nullptr);
  ASSERT_NE(cyc, nullptr);
  EXPECT_EQ(ns->flags, Counter::kIsIterationInvariantRate | Counter::kInvert);
  const double iterations = 10, seconds = 10 * 1000 * 50e-9;  // 50 ns per access
  EXPECT_NEAR(1.0 / (ns->value * iterations / seconds), 50.0, 1e-9);
  EXPECT_NEAR(1.0 / (cyc->value * iterations / seconds), 100.0, 1e-9);  // 50 ns at 2 GHz
}

TEST(Cost, NoClockNoCycles) {
  Cost c;
  c.accesses = 1;
  EXPECT_EQ(find(counters(c, 0), "cycles_per_access"), nullptr);
}

TEST(Cost, ArithmeticAndEquality) {
  Cost a{1, 2, 3, 4, 5, 0};
  Cost b = a * 2;
  EXPECT_EQ(b, (Cost{2, 4, 6, 8, 10}));
  b += a;
  EXPECT_EQ(b, (Cost{3, 6, 9, 12, 15}));
  EXPECT_NE(b.str().find("flops 3"), std::string::npos);
}

TEST(Cost, CallsBecomeCallsPerSecond) {
  Cost c;
  c.calls = 64;
  auto cs = counters(c, 0);
  ASSERT_NE(find(cs, "call_per_s"), nullptr);
  EXPECT_EQ(find(cs, "call_per_s")->flags, Counter::kIsIterationInvariantRate);
  EXPECT_EQ(find(cs, "flop_per_s"), nullptr);
}
