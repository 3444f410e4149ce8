// The cost-to-counter arithmetic: which counters a cost makes, with which flags and values.
#include <benchmark/benchmark.h>
#include <gtest/gtest.h>

#include <iterator>

#include "fixtures/core/cost.hpp"
#include "tests/unit/counters.hpp"

using archbench::Cost;
using archbench::counters;
using benchmark::Counter;

using archbench_test::find;
using archbench_test::shown;

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

namespace {
// A cost with work of every kind, each a different number, so a unit reading the wrong field shows.
Cost every_kind() { return Cost{3e9, 5e9, 7e9, 11e9, 13e9, 17e9, 19e9}; }
}  // namespace

// Every unit of the table: its rate counter is the unit's work per second over the whole run
// (iterations x work per iteration / seconds), whatever the iteration count; inverted units
// are seconds per `scale` units of work. A wrong flag is off by the iteration count.
TEST(Cost, EveryUnitOfTheTableIsWorkPerSecond) {
  const Cost c = every_kind();
  const auto cs = counters(c, 0);
  ASSERT_EQ(cs.size(), archbench::kUnits.size());
  for (const archbench::Unit& u : archbench::kUnits) {
    SCOPED_TRACE(u.rate);
    const auto* v = find(cs, u.rate);
    ASSERT_NE(v, nullptr);
    const int want = u.inverted ? Counter::kIsIterationInvariantRate | Counter::kInvert
                                : Counter::kIsIterationInvariantRate;
    EXPECT_EQ(v->flags, want);
    for (double iterations : {1.0, 7.0, 1000.0}) {
      const double seconds = 0.25 * iterations;
      const double per_s = u.work(c) * iterations / seconds;
      EXPECT_DOUBLE_EQ(shown(*v, iterations, seconds), u.inverted ? 1 / (per_s * u.scale) : per_s);
    }
  }
}

// The same by name, with the work written out: a row whose rate, flag or field moved is caught
// even if the table and the test were to agree with each other.
TEST(Cost, EveryCounterByNameWithItsFlagsAndValue) {
  const Cost c = every_kind();
  const auto cs = counters(c, 1500);  // 1.5 GHz
  const double it = 40, s = 2;        // 40 iterations in 2 s: 20 per second
  struct Row {
    const char* name;
    int flags;
    double value;
  };
  const int rate = Counter::kIsIterationInvariantRate, inv = rate | Counter::kInvert;
  const Row rows[] = {
      {"flop_per_s", rate, 3e9 * 20},
      {"op_per_s", rate, 5e9 * 20},
      {"byte_per_s", rate, (7e9 + 11e9) * 20},
      {"call_per_s", rate, 17e9 * 20},
      {"bus_byte_per_s", rate, 19e9 * 20},
      {"ns_per_access", inv, 1e9 / (13e9 * 20)},            // ns per access
      {"cycles_per_access", inv, 1.5e9 / (13e9 * 20)},      // cycles at 1.5 GHz per access
  };
  EXPECT_EQ(cs.size(), std::size(rows));
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const auto* v = find(cs, r.name);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->flags, r.flags);
    EXPECT_NEAR(shown(*v, it, s), r.value, 1e-9 * r.value);
  }
}

// Energy counters by name: joule per launch, watt as given, every work kind per joule (each
// with its _err twin): shown values independent of the iteration count.
TEST(Cost, EveryEnergyCounterByNameWithItsFlagsAndValue) {
  const Cost c = every_kind();
  const archbench::EnergyFigures e{0.5, 0.05, 200, 4};  // 10% relative error
  const auto cs = archbench::energy_counters(c, e);
  const int per_launch = Counter::kIsIterationInvariant | Counter::kAvgIterations, plain = Counter::kDefaults;
  struct Row {
    const char* name;
    int flags;
    double value;
  };
  const Row rows[] = {
      {"joule", per_launch, 0.5},        {"joule_err", per_launch, 0.05},
      {"watt", plain, 200},              {"watt_err", plain, 4},
      {"flop_per_joule", plain, 6e9},    {"flop_per_joule_err", plain, 6e8},
      {"op_per_joule", plain, 10e9},     {"op_per_joule_err", plain, 10e8},
      {"byte_per_joule", plain, 36e9},   {"byte_per_joule_err", plain, 36e8},
      {"call_per_joule", plain, 34e9},   {"call_per_joule_err", plain, 34e8},
  };
  EXPECT_EQ(cs.size(), std::size(rows));  // no per-joule counter for accesses
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const auto* v = find(cs, r.name);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->flags, r.flags);
    for (double it : {1.0, 333.0}) EXPECT_NEAR(shown(*v, it, 0.1 * it + 0.3), r.value, 1e-9 * r.value);
  }
  // And through the table: every unit with a per-joule counter has it, work over joules.
  for (const archbench::Unit& u : archbench::kUnits)
    if (u.per_joule) {
      SCOPED_TRACE(u.per_joule);
      ASSERT_NE(find(cs, u.per_joule), nullptr);
      EXPECT_DOUBLE_EQ(find(cs, u.per_joule)->value, u.work(c) / e.joule);
    }
}
