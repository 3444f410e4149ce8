// TopDown arithmetic (seed 004 eqs. 4.2-4.13) from recorded metric values: host only.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <stdexcept>

#include "fixtures/meters/topdown.hpp"

namespace ab = archbench;

namespace {

// One range as CUPTI reports it: 1000 SM-cycles, 3000 warp-instructions executed (IPC 3),
// 3200 issued (replays 0.2 IPC), 80% of lanes active; stall warp-cycles by reason.
ab::Metrics recorded() {
  return {
      {"sm__cycles_active.sum", 1000},
      {"sm__inst_executed.sum", 3000},
      {"sm__inst_issued.sum", 3200},
      {"smsp__thread_inst_executed.sum", 3000 * 32 * 0.8},
      {"smsp__warps_active.sum", 10000},
      {"gpu__time_duration.sum", 2500},
      {"smsp__warps_issue_stalled_long_scoreboard.sum", 400},
      {"smsp__warps_issue_stalled_lg_throttle.sum", 100},
      {"smsp__warps_issue_stalled_math_pipe_throttle.sum", 200},
      {"smsp__warps_issue_stalled_wait.sum", 100},
      {"smsp__warps_issue_stalled_no_instruction.sum", 100},
      {"smsp__warps_issue_stalled_barrier.sum", 50},
      {"smsp__warps_issue_stalled_dispatch_stall.sum", 50},
      {"smsp__warps_issue_stalled_gmma.sum", 0},
      {"smsp__warps_issue_stalled_selected.sum", 3000},
      {"smsp__warps_issue_stalled_not_selected.sum", 2000},
  };
}

}  // namespace

TEST(TopDown, Level1FromRecordedValues) {
  const ab::TopDown t = ab::topdown(recorded());
  // IPC 3, efficiency 0.8: retire 2.4, branch 0.6, replay 0.2, stall 4 - 3.2 = 0.8 (IPC units).
  EXPECT_DOUBLE_EQ(t.ipc, 3.0);
  EXPECT_DOUBLE_EQ(t.ipc_issued, 3.2);
  EXPECT_NEAR(t.warp_efficiency, 0.8, 1e-12);
  EXPECT_NEAR(t.retire, 2.4 / 4, 1e-12);
  EXPECT_NEAR(t.branch, 0.6 / 4, 1e-12);
  EXPECT_NEAR(t.replay, 0.2 / 4, 1e-12);
  EXPECT_NEAR(t.divergence, 0.8 / 4, 1e-12);
  // Stall reasons sum to 1000: frontend 200 (fetch 150, decode 50), backend 800 (memory 500, core 300).
  EXPECT_NEAR(t.frontend, 0.2 * 0.2, 1e-12);
  EXPECT_NEAR(t.backend, 0.2 * 0.8, 1e-12);
  EXPECT_NEAR(t.retire + t.divergence + t.frontend + t.backend, 1.0, 1e-12);
  EXPECT_NEAR(t.seconds, 2.5e-6, 1e-18);
}

TEST(TopDown, Level2And3AddUp) {
  const ab::TopDown t = ab::topdown(recorded());
  EXPECT_NEAR(t.fetch, 0.2 * 0.15, 1e-12);
  EXPECT_NEAR(t.decode, 0.2 * 0.05, 1e-12);
  EXPECT_NEAR(t.memory_bound, 0.2 * 0.5, 1e-12);
  EXPECT_NEAR(t.core_bound, 0.2 * 0.3, 1e-12);
  double stalls = 0;
  for (const auto& [r, v] : t.stalls) stalls += v;
  EXPECT_NEAR(stalls, t.frontend + t.backend, 1e-12);
  // selected / not_selected are shares of active warp-cycles, not part of the stall sum.
  ASSERT_EQ(t.issue.size(), 2u);
  for (const auto& [r, v] : t.issue) EXPECT_NEAR(v, r == "selected" ? 0.3 : 0.2, 1e-12);
  const auto l1 = ab::topdown_counters(t, 1), l2 = ab::topdown_counters(t, 2), l3 = ab::topdown_counters(t, 3);
  EXPECT_EQ(l1.size(), 5u);
  EXPECT_EQ(l2.size(), 11u);
  EXPECT_EQ(l3.size(), 11u + t.stalls.size() + t.issue.size());
  EXPECT_TRUE(ab::topdown_counters(t, 0).empty());
  EXPECT_EQ(l3.back().first.rfind("td_issue_", 0), 0u);
}

TEST(TopDown, UnknownReasonIsShownNotSummed) {
  ab::Metrics m = recorded();
  m["smsp__warps_issue_stalled_future_unit.sum"] = 500;
  const ab::TopDown t = ab::topdown(m);
  EXPECT_EQ(ab::stall_class("future_unit"), ab::StallClass::unclassified);
  EXPECT_NEAR(t.retire + t.divergence + t.frontend + t.backend, 1.0, 1e-12);
  bool shown = false;
  for (const auto& [r, v] : t.stalls) shown |= r == "future_unit" && v > 0;
  EXPECT_TRUE(shown);
}

TEST(TopDown, MetricListFollowsTheChip) {
  const std::vector<std::string> base = {"sm__cycles_active", "sm__inst_executed", "sm__inst_issued",
                                         "smsp__thread_inst_executed", "smsp__warps_active", "gpu__time_duration",
                                         "smsp__warps_issue_stalled_gmma", "smsp__warps_issue_stalled_wait",
                                         "smsp__warps_issue_stalled_wait_not_issued", "dram__bytes"};
  const auto m = ab::topdown_metrics(base);
  EXPECT_EQ(m.size(), 8u);
  EXPECT_EQ(m.back(), "smsp__warps_issue_stalled_wait.sum");
  EXPECT_THROW(ab::topdown_metrics({"sm__cycles_active"}), std::runtime_error);
}

TEST(TopDown, FullIssueRateRetiresEverything) {
  // An ideal FMA chain: 4 warp-instructions a cycle, every lane active, no stall counted.
  ab::Metrics m = {{"sm__cycles_active.sum", 100}, {"sm__inst_executed.sum", 400}, {"sm__inst_issued.sum", 400},
                   {"smsp__thread_inst_executed.sum", 400 * 32}, {"smsp__warps_active.sum", 400},
                   {"gpu__time_duration.sum", 1}, {"smsp__warps_issue_stalled_selected.sum", 400}};
  const ab::TopDown t = ab::topdown(m);
  EXPECT_DOUBLE_EQ(t.retire, 1.0);
  EXPECT_DOUBLE_EQ(t.divergence + t.frontend + t.backend, 0.0);
}

TEST(TopDown, MissingOrEmptyRangeThrows) {
  ab::Metrics m = recorded();
  m.erase("sm__inst_issued.sum");
  EXPECT_THROW(ab::topdown(m), std::runtime_error);
  ab::Metrics idle = recorded();
  idle["sm__inst_executed.sum"] = 0;
  EXPECT_THROW(ab::topdown(idle), ab::EmptyRange);
}

namespace {

// Seed 004's tables (chapter 4) for Hopper's 19 reasons, with the README's decisions where the
// seed is silent: mio_throttle and short_scoreboard Memory, wait and gmma Core, selected and
// not_selected not stalls. One row per reason, so a class moved is one failing row.
struct Golden {
  const char* reason;
  ab::StallClass cls;
};
const Golden kHopperStalls[] = {
    {"no_instruction", ab::StallClass::fetch},     {"barrier", ab::StallClass::fetch},
    {"membar", ab::StallClass::fetch},             {"sleeping", ab::StallClass::fetch},
    {"branch_resolving", ab::StallClass::fetch},   {"misc", ab::StallClass::decode},
    {"dispatch_stall", ab::StallClass::decode},    {"long_scoreboard", ab::StallClass::memory},
    {"imc_miss", ab::StallClass::memory},          {"drain", ab::StallClass::memory},
    {"lg_throttle", ab::StallClass::memory},       {"tex_throttle", ab::StallClass::memory},
    {"mio_throttle", ab::StallClass::memory},      {"short_scoreboard", ab::StallClass::memory},
    {"math_pipe_throttle", ab::StallClass::core},  {"wait", ab::StallClass::core},
    {"gmma", ab::StallClass::core},                {"selected", ab::StallClass::not_a_stall},
    {"not_selected", ab::StallClass::not_a_stall},
};

}  // namespace

TEST(TopDown, EveryHopperStallReasonHasItsSeedClass) {
  ASSERT_EQ(std::size(kHopperStalls), 19u);
  for (const Golden& g : kHopperStalls) {
    SCOPED_TRACE(g.reason);
    EXPECT_EQ(ab::stall_class(g.reason), g.cls);
    // The same reason alone in a range: its whole stall lands in its level-2 part.
    ab::Metrics m = {{"sm__cycles_active.sum", 1000}, {"sm__inst_executed.sum", 2000},
                     {"sm__inst_issued.sum", 2000}, {"smsp__thread_inst_executed.sum", 2000 * 32},
                     {"smsp__warps_active.sum", 8000}, {"gpu__time_duration.sum", 1},
                     {std::string(ab::kStallPrefix) + g.reason + ".sum", 700}};
    const ab::TopDown t = ab::topdown(m);
    const double stall = 0.5;  // (4 - 2) / 4
    EXPECT_NEAR(t.fetch, g.cls == ab::StallClass::fetch ? stall : 0, 1e-12);
    EXPECT_NEAR(t.decode, g.cls == ab::StallClass::decode ? stall : 0, 1e-12);
    EXPECT_NEAR(t.memory_bound, g.cls == ab::StallClass::memory ? stall : 0, 1e-12);
    const bool core = g.cls == ab::StallClass::core || g.cls == ab::StallClass::not_a_stall;  // no stall: loss kept as core
    EXPECT_NEAR(t.core_bound, core ? stall : 0, 1e-12);
    if (g.cls == ab::StallClass::not_a_stall) {
      ASSERT_EQ(t.issue.size(), 1u);
      EXPECT_NEAR(t.issue[0].second, 700.0 / 8000, 1e-12);
      EXPECT_TRUE(t.stalls.empty());
    } else {
      EXPECT_TRUE(t.issue.empty());
    }
  }
}
