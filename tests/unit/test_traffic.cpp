// Traffic arithmetic (fixtures/meters/traffic.cpp) from recorded counter values: host only.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "fixtures/meters/traffic.hpp"

namespace ab = archbench;

namespace {

// The base metrics of a Hopper-like chip (a subset: what the plan looks for, and the tensor
// paths with their sparsity variants).
std::vector<std::string> hopper() {
  return {"l1tex__t_bytes_pipe_lsu_mem_global_op_ld", "l1tex__t_bytes_pipe_lsu_mem_global_op_st",
          "sm__sass_data_bytes_mem_shared_op_ld", "sm__sass_data_bytes_mem_shared_op_st",
          "lts__t_sectors_srcunit_tex_op_read", "lts__t_sectors_srcunit_tex_op_write", "lts__t_sectors_op_read",
          "dram__bytes_read", "dram__bytes_write", "gpu__time_duration",
          "sm__sass_thread_inst_executed_op_ffma_pred_on", "sm__sass_thread_inst_executed_op_fadd_pred_on",
          "sm__sass_thread_inst_executed_op_fmul_pred_on", "sm__sass_thread_inst_executed_op_dfma_pred_on",
          "sm__sass_thread_inst_executed_op_dadd_pred_on", "sm__sass_thread_inst_executed_op_dmul_pred_on",
          "sm__sass_thread_inst_executed_op_hfma_pred_on", "sm__sass_thread_inst_executed_op_hadd_pred_on",
          "sm__sass_thread_inst_executed_op_hmul_pred_on", "sm__sass_thread_inst_executed_op_integer_pred_on",
          "sm__ops_path_tensor_src_fp16_dst_fp32", "sm__ops_path_tensor_src_fp16_dst_fp32_sparsity_on",
          "sm__inst_executed"};
}

std::map<std::string, double> values(const ab::TrafficPlan& plan, const ab::Metrics& m) {
  std::map<std::string, double> out;
  for (const auto& [k, v] : ab::traffic_values(plan, m)) out[k] = v;
  return out;
}

}  // namespace

TEST(Traffic, PlanTakesTheFirstAlternativeAndEveryTensorPath) {
  const ab::TrafficPlan p = ab::traffic_plan(hopper());
  EXPECT_TRUE(p.missing.empty()) << p.missing.front();
  // The srcunit_tex sectors, not every source's, for L2; one tensor counter, no sparsity split.
  EXPECT_NE(p.describe().find("traffic_l2_read_bytes=lts__t_sectors_srcunit_tex_op_read*32"), std::string::npos);
  EXPECT_NE(p.describe().find("exec_tensor_ops_src_fp16_dst_fp32=sm__ops_path_tensor_src_fp16_dst_fp32"), std::string::npos);
  EXPECT_EQ(p.describe().find("sparsity"), std::string::npos);
  EXPECT_EQ(p.counters.size(), 13u);
  EXPECT_EQ(p.metrics.back(), "gpu__time_duration.sum");
}

TEST(Traffic, BytesAndFlopsFromRecordedValues) {
  const ab::TrafficPlan p = ab::traffic_plan(hopper());
  ab::Metrics m;
  for (const std::string& name : p.metrics) m[name] = 0;
  // A triad over 2^20 doubles: 16 MiB read, 8 MiB written at every level, one FMA per element.
  m["l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum"] = 16 << 20;
  m["l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum"] = 8 << 20;
  m["lts__t_sectors_srcunit_tex_op_read.sum"] = (16 << 20) / 32;
  m["lts__t_sectors_srcunit_tex_op_write.sum"] = (8 << 20) / 32;
  m["dram__bytes_read.sum"] = 16 << 20;
  m["dram__bytes_write.sum"] = 8 << 20;
  m["sm__sass_thread_inst_executed_op_dfma_pred_on.sum"] = 1 << 20;
  m["sm__sass_thread_inst_executed_op_fadd_pred_on.sum"] = 3;
  m["sm__sass_thread_inst_executed_op_ffma_pred_on.sum"] = 5;
  m["sm__sass_thread_inst_executed_op_hfma_pred_on.sum"] = 7;
  m["sm__ops_path_tensor_src_fp16_dst_fp32.sum"] = 4096;
  const auto v = values(p, m);
  EXPECT_EQ(v.at("traffic_l1_read_bytes"), 16 << 20);
  EXPECT_EQ(v.at("traffic_l2_read_bytes"), 16 << 20);
  EXPECT_EQ(v.at("traffic_l2_write_bytes"), 8 << 20);
  EXPECT_EQ(v.at("traffic_dram_write_bytes"), 8 << 20);
  EXPECT_EQ(v.at("traffic_shared_read_bytes"), 0);
  EXPECT_EQ(v.at("exec_flops_fp64"), 2 << 20);  // FMA counted as two
  EXPECT_EQ(v.at("exec_flops_fp32"), 2 * 5 + 3);
  EXPECT_EQ(v.at("exec_flops_fp16"), 14);
  EXPECT_EQ(v.at("exec_tensor_ops_src_fp16_dst_fp32"), 4096);
}

TEST(Traffic, AMissingMetricLeavesItsCounterOutAndSaysSo) {
  std::vector<std::string> base = hopper();
  std::erase(base, "dram__bytes_write");
  std::erase(base, "lts__t_sectors_srcunit_tex_op_read");  // falls back to every source's sectors
  std::erase(base, "sm__sass_thread_inst_executed_op_hmul_pred_on");
  const ab::TrafficPlan p = ab::traffic_plan(base);
  ASSERT_EQ(p.missing.size(), 2u);
  EXPECT_EQ(p.missing[0], "traffic_dram_write_bytes (no metric dram__bytes_write, dram__sectors_write on this chip)");
  EXPECT_EQ(p.missing[1], "exec_flops_fp16 (no metric sm__sass_thread_inst_executed_op_hmul_pred_on on this chip)");
  EXPECT_NE(p.describe().find("traffic_l2_read_bytes=lts__t_sectors_op_read*32"), std::string::npos);
  ab::Metrics m;
  for (const std::string& name : p.metrics) m[name] = 1;
  EXPECT_EQ(values(p, m).count("traffic_dram_write_bytes"), 0u);
  EXPECT_THROW(ab::traffic_values(p, {}), std::runtime_error);  // a planned metric not collected
  EXPECT_THROW(ab::traffic_plan({"sm__inst_executed"}), std::runtime_error);
}
