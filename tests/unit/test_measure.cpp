// Measure, meters and the results writer without hardware: a fake Device whose launches take
// scripted times, fake meters, and Google Benchmark run for real; the assertions are on the
// exact counter values and fields of the JSON archbench writes (as Google Benchmark's own
// output tests assert on its JSON).
#include <benchmark/benchmark.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "fixtures/core/json.hpp"
#include "fixtures/core/measure.hpp"
#include "fixtures/launcher/results.hpp"
#include "fixtures/launcher/summary.hpp"
#include "fixtures/meters/meters.hpp"

namespace ab = archbench;

namespace {

constexpr double kPerLaunch = 1e-3;  // seconds every fake launch takes

class FakeBuffer final : public ab::Buffer {
 public:
  explicit FakeBuffer(std::size_t n) : data(n) {}
  std::size_t bytes() const override { return data.size(); }
  std::vector<unsigned char> data;
};

class FakeLaunch final : public ab::Launch {
 public:
  explicit FakeLaunch(int& timed) : timed_(timed) {}
  void run(int) override {}
  void submit() override {}
  double time(int launches) override {
    timed_ += launches;
    return launches * kPerLaunch;
  }

 private:
  int& timed_;
};

class FakeDevice final : public ab::Device {
 public:
  FakeDevice() {
    info_.backend = "fake", info_.name = "Fake", info_.max_clock_mhz = 1000;
  }
  const ab::DeviceInfo& info() const override { return info_; }
  std::unique_ptr<ab::Buffer> alloc(std::size_t n) override { return std::make_unique<FakeBuffer>(n); }
  std::unique_ptr<ab::Buffer> alloc_image(std::size_t, std::size_t) override { throw ab::Skip("no images"); }
  void write(ab::Buffer& dst, const void* src, std::size_t n) override {
    std::memcpy(static_cast<FakeBuffer&>(dst).data.data(), src, n);
  }
  void read(ab::Buffer& src, void* dst, std::size_t n) override {
    std::memcpy(dst, static_cast<FakeBuffer&>(src).data.data(), n);
  }
  std::unique_ptr<ab::Launch> prepare(const ab::KernelSpec&, const std::vector<ab::KernelArg>&, const ab::Range&,
                                      ab::Timing) override {
    return std::make_unique<FakeLaunch>(timed);
  }
  std::unique_ptr<ab::Launch> prepare_transfer(const ab::TransferSpec&, ab::Buffer&, std::vector<unsigned char>&) override {
    throw ab::Skip("no transfers");
  }
  void finish() override {}
  std::unique_ptr<ab::CounterReader> counter_reader(std::string& why) override;
  int timed = 0;  // launches timed, warm-up and meters' passes included

 private:
  ab::DeviceInfo info_;
};

// Hardware counters as a recorded range (the values of tests/unit/test_topdown.cpp, and 1250 SM
// cycles in its 2500 ns): the TopDown and clock meters ask for their metrics, replay the
// launch, and turn the values into their counters.
class FakeReader final : public ab::CounterReader {
 public:
  std::vector<std::string> base_metrics() const override {
    std::vector<std::string> names;
    for (const auto& [k, v] : values()) names.push_back(k.substr(0, k.rfind('.')));
    return names;
  }
  std::size_t schedule(const std::vector<std::string>& metrics) override {
    scheduled = metrics;
    return 3;
  }
  std::map<std::string, double> read(const std::vector<std::string>& metrics, const std::string&,
                                     const std::function<void()>& launch) override {
    EXPECT_EQ(metrics, scheduled);
    for (int pass = 0; pass < 3; ++pass) launch();
    return values();
  }
  std::string describe() const override { return "fake reader, 3 passes"; }
  static std::map<std::string, double> values() {
    return {{"sm__cycles_active.sum", 1000}, {"sm__inst_executed.sum", 3000}, {"sm__inst_issued.sum", 3200},
            {"smsp__thread_inst_executed.sum", 3000 * 32 * 0.8}, {"smsp__warps_active.sum", 10000},
            {"gpu__time_duration.sum", 2500}, {"sm__cycles_elapsed.avg", 1250},
            {"smsp__warps_issue_stalled_long_scoreboard.sum", 400},
            {"smsp__warps_issue_stalled_lg_throttle.sum", 100}, {"smsp__warps_issue_stalled_math_pipe_throttle.sum", 200},
            {"smsp__warps_issue_stalled_wait.sum", 100}, {"smsp__warps_issue_stalled_no_instruction.sum", 100},
            {"smsp__warps_issue_stalled_barrier.sum", 50}, {"smsp__warps_issue_stalled_dispatch_stall.sum", 50},
            {"smsp__warps_issue_stalled_selected.sum", 3000}, {"smsp__warps_issue_stalled_not_selected.sum", 2000}};
  }
  std::vector<std::string> scheduled;
};

std::unique_ptr<ab::CounterReader> FakeDevice::counter_reader(std::string&) { return std::make_unique<FakeReader>(); }

// A meter with scripted counters; counts its passes. One that fails says why and adds nothing.
class FakeMeter final : public ab::Meter {
 public:
  explicit FakeMeter(bool fail) : fail_(fail) {}
  std::string name() const override { return fail_ ? "failing" : "fake"; }
  ab::ContextLines context() const override { return {{name() + "_meter", "scripted"}}; }
  ab::ContextLines summary() const override { return {{name() + "_passes", std::to_string(passes)}}; }
  bool active() const override { return true; }
  std::vector<ab::CounterValue> measure(const ab::Workload& w, const ab::MeterPass& pass) override {
    ++passes;
    if (fail_) throw std::runtime_error("scripted failure");
    // As the clock meter does: cycles per access at a "measured" 500 MHz replace the 1000 MHz ones.
    std::vector<ab::CounterValue> out = {{"fake_value", 42, benchmark::Counter::kDefaults},
                                         {"fake_seconds", pass.seconds_per_launch, benchmark::Counter::kDefaults}};
    for (ab::CounterValue& c : ab::counters(w.cost, 500))
      if (c.name == "cycles_per_access") out.push_back(c);
    return out;
  }
  int passes = 0;

 private:
  bool fail_;
};

ab::Workload workload(const std::string& op, bool good) {
  ab::Workload w;
  w.identify(ab::identity({{"family", "fake"}, {"backend", "fake"}, {"op", op}}, {{"bytes", "64"}}, {{"width", "4"}}));
  w.buffers = {{64, nullptr}};
  w.cost.flops = 2e6;
  w.cost.accesses = 1000;
  w.check = [good](const std::vector<ab::Bytes>&, const std::vector<ab::Bytes>&, std::size_t, ab::Cost&) {
    return good ? std::string() : std::string("item 3 is 7, expected 8");
  };
  return w;
}

TEST(Measure, CountersFlagsMetersAndSchemaInTheWrittenJson) {
  FakeDevice dev;
  ab::Measure measure(dev);
  FakeMeter meter(false), failing(true);
  measure.add_meter(&meter);
  measure.add_meter(&failing);
  std::vector<ab::Workload> ws = {workload("base", true), workload("other", true), workload("broken", false)};
  ws[1].relative = ab::Relative{ws[0].name, "slowdown"};
  std::map<std::string, const ab::Workload*> by_name;
  for (const ab::Workload& w : ws) {
    by_name[w.name] = &w;
    benchmark::RegisterBenchmark(w.name.c_str(), [&measure, &w](benchmark::State& s) { measure.run(s, w); })
        ->UseManualTime();
  }
  const std::string out = testing::TempDir() + "/measure-" + std::to_string(getpid()) + ".json";
  std::vector<std::string> args = {"test", "--benchmark_min_time=0.01", "--benchmark_repetitions=3"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  int argc = int(argv.size());
  benchmark::Initialize(&argc, argv.data());
  ab::ResultsReporter::Options o;
  o.out = out;
  o.total = ws.size();
  std::ostringstream console;
  ab::ResultsReporter reporter(o, by_name, [&] { return ab::ContextLines{{"fake_passes", std::to_string(meter.passes)}}; });
  reporter.SetOutputStream(&console);
  EXPECT_EQ(benchmark::RunSpecifiedBenchmarks(&reporter), 3u);
  benchmark::ClearRegisteredBenchmarks();
  ASSERT_EQ(reporter.write_error(), "");
  EXPECT_EQ(reporter.failed(), 1u);

  std::ifstream f(out);
  std::stringstream text;
  text << f.rdbuf();
  const ab::Json doc = ab::Json::parse(text.str());
  std::remove(out.c_str());
  EXPECT_EQ(doc.find("context")->find("schema_version")->text(), "2");
  // One pass per workload that ran (2), however many repetitions; given at the end of the run.
  EXPECT_EQ(meter.passes, 2);
  EXPECT_EQ(doc.find("context")->find("fake_passes")->text(), "2");
  int rows = 0;
  for (const ab::Json& b : doc.find("benchmarks")->items()) {
    const std::string name = b.find("run_name")->text();
    ASSERT_NE(b.find("axes"), nullptr) << name;
    EXPECT_EQ(b.find("axes")->find("bytes")->kind(), ab::Json::number);  // numeric axes are numbers
    EXPECT_EQ(b.find("axes")->find("width")->text(), "4");
    EXPECT_EQ(b.find("name_format")->text(), "{family}/{backend}/{op}/bytes:{bytes}");
    EXPECT_EQ(b.find("cost")->find("flops")->as_number(), 2e6);
    if (name.find("broken") != std::string::npos) {
      EXPECT_TRUE(b.find("error_occurred") && b.find("error_occurred")->text() == "true");
      EXPECT_NE(b.find("error_message")->text().find("output check failed: item 3 is 7"), std::string::npos);
      continue;
    }
    if (name.find("other") != std::string::npos) {
      EXPECT_EQ(b.find("baseline")->text(), ws[0].name);
      EXPECT_EQ(b.find("relation")->text(), "slowdown");
    }
    if (b.find("run_type")->text() != "iteration") continue;
    ++rows;
    // Rates from the cost: 2e6 flops in 1 ms; 1000 accesses in 1 ms: 1000 ns each; at the
    // meter's 500 MHz, 500 cycles each (the device's 1000 MHz figure, 1000, is replaced).
    EXPECT_NEAR(b.find("flop_per_s")->as_number(), 2e9, 2e9 * 1e-9) << name;
    EXPECT_NEAR(b.find("ns_per_access")->as_number(), 1000, 1e-6) << name;
    EXPECT_NEAR(b.find("cycles_per_access")->as_number(), 500, 1e-6) << name;
    EXPECT_EQ(b.find("fake_value")->as_number(), 42) << name;  // every repetition's row
    EXPECT_NEAR(b.find("fake_seconds")->as_number(), kPerLaunch, 1e-15) << name;
    EXPECT_NEAR(b.find("real_time")->as_number(), kPerLaunch * 1e9, 1e-3) << name;  // nanoseconds, the default unit
  }
  EXPECT_EQ(rows, 6);  // 2 workloads x 3 repetitions
  // The console: one median line a benchmark, no /manual_time, the failure with its reason.
  EXPECT_EQ(console.str().find("manual_time"), std::string::npos);
  EXPECT_NE(console.str().find("fake/fake/broken/bytes:64"), std::string::npos);
  EXPECT_NE(console.str().find("output check failed"), std::string::npos);
}

TEST(Results, NothingRunNothingWritten) {
  const std::string out = testing::TempDir() + "/nothing-" + std::to_string(getpid()) + ".json";
  ab::ResultsReporter::Options o;
  o.out = out;
  ab::ResultsReporter reporter(o, {}, nullptr);
  reporter.Finalize();
  EXPECT_FALSE(std::ifstream(out).good());
}

TEST(Results, CsvHasEveryColumnOfEveryRow) {
  const ab::Json doc = ab::Json::parse(R"({"context": {"device": "X", "note": "a\nb"},
    "benchmarks": [{"name": "a", "op_per_s": 1, "axes": {"op": "add"}},
                   {"name": "b,c", "byte_per_s": 2.5, "axes": {"op": "x\"y"}}]})");
  EXPECT_EQ(ab::results_csv(doc),
            "# device: X\n# note: a b\n"
            "name,op_per_s,axes.op,byte_per_s\n"
            "a,1,add,\n"
            "\"b,c\",,\"x\"\"y\",2.5\n");
}

// The summary screen: each headline figure from the medians, beside the published limit of a
// device tools/archbench/textbook.json knows, and where the results went.
TEST(Results, SummaryShowsHeadlineFiguresBesideTheLimits) {
  const std::string rows = R"("benchmarks": [
    {"run_name": "compute/cuda/mad/float", "run_type": "aggregate", "aggregate_name": "mean", "flop_per_s": 1,
     "axes": {"family": "compute", "op": "mad", "type": "float", "scalar": "float"}},
    {"run_name": "compute/cuda/mad/float", "run_type": "aggregate", "aggregate_name": "median", "flop_per_s": 60.2e12,
     "axes": {"family": "compute", "op": "mad", "type": "float", "scalar": "float"}},
    {"run_name": "memory/cuda/triad/double", "run_type": "iteration", "byte_per_s": 3.0e12,
     "axes": {"family": "memory", "op": "triad", "type": "double"}},
    {"run_name": "latency/cuda/chase/bytes:1024", "run_type": "iteration", "ns_per_access": 30,
     "axes": {"family": "latency", "op": "chase", "bytes": 1024}},
    {"run_name": "latency/cuda/chase/bytes:2048", "run_type": "iteration", "ns_per_access": 31,
     "axes": {"family": "latency", "op": "chase", "bytes": 2048}},
    {"run_name": "latency/cuda/chase/bytes:268435456", "run_type": "iteration", "ns_per_access": 600,
     "axes": {"family": "latency", "op": "chase", "bytes": 268435456}},
    {"run_name": "bus/cuda/to_host_pinned/bytes:4096", "run_type": "iteration", "byte_per_s": 9e9,
     "axes": {"family": "bus", "op": "to_host_pinned", "bytes": 4096}},
    {"run_name": "bus/cuda/to_host_pinned/bytes:67108864", "run_type": "iteration", "byte_per_s": 5.5e10,
     "axes": {"family": "bus", "op": "to_host_pinned", "bytes": 67108864}},
    {"run_name": "launch/cuda/empty/dispatch/items:1", "run_type": "iteration", "real_time": 2100, "time_unit": "ns",
     "axes": {"family": "launch", "op": "empty", "timing": "dispatch", "items": 1}},
    {"run_name": "builtins/cuda/sin/float", "run_type": "iteration", "error_occurred": true, "call_per_s": 1,
     "axes": {"family": "builtins", "op": "sin"}}]})";
  const std::string s = ab::summary_screen(ab::Json::parse(R"({"context": {"device": "NVIDIA H100 80GB HBM3"}, )" + rows), "x.json");
  // The line that begins with `label`, after the indent.
  const auto line = [&s](const std::string& label) {
    const std::size_t at = s.find("\n  " + label);
    return at == std::string::npos ? std::string() : s.substr(at + 1, s.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(line("peak float (mad, float) ").find(" 60.2 TFLOP/s "), std::string::npos) << s;
  EXPECT_NE(line("peak float (mad, float) ").find(" of 66.9 TFLOP/s (90%)"), std::string::npos) << s;
  EXPECT_NE(line("stream (triad/double) ").find(" 3.00 TB/s "), std::string::npos) << s;
  EXPECT_NE(line("stream (triad/double) ").find(" of 3.35 TB/s (89.5%)"), std::string::npos) << s;
  EXPECT_NE(line("latency 1 KiB - 2 KiB ").find(" 30 ns per access"), std::string::npos) << s;
  EXPECT_NE(line("latency 256 MiB ").find(" 600 ns per access"), std::string::npos) << s;
  EXPECT_NE(line("to host pinned (64 MiB) ").find(" 55.0 GB/s"), std::string::npos) << s;
  EXPECT_NE(line("launch (dispatch) ").find(" 2.1 us per launch"), std::string::npos) << s;
  EXPECT_EQ(s.find("builtins"), std::string::npos) << s;
  EXPECT_NE(s.find("Summary: NVIDIA H100 80GB HBM3\n"), std::string::npos) << s;
  EXPECT_NE(s.find("limits: NVIDIA H100 SXM5"), std::string::npos) << s;
  EXPECT_NE(s.find("results: x.json"), std::string::npos) << s;
  const std::string other = ab::summary_screen(ab::Json::parse(R"({"context": {"device": "a CPU"}, )" + rows), "");
  EXPECT_NE(other.find("none published for this device"), std::string::npos) << other;
  EXPECT_EQ(other.find(" of "), std::string::npos) << other;
  EXPECT_EQ(ab::summary_screen(ab::Json::parse(R"({"benchmarks": []})"), "x.json"), "");
}

TEST(Json, NumbersKeepTheirTextAndErrorsSayWhere) {
  const std::string text = R"({"x": 1.0263547499999993e+02, "s": "q\"\\", "a": [true, null]})";
  EXPECT_EQ(ab::Json::parse(text).dump(-1), R"({"x":1.0263547499999993e+02,"s":"q\"\\","a":[true,null]})");
  EXPECT_THROW(ab::Json::parse(R"({"x": 1,})"), ab::JsonError);
  EXPECT_THROW(ab::Json::parse("[1] 2"), ab::JsonError);
}

}  // namespace

TEST(Meters, TopDownFromTheDevicesCounterReader) {
  FakeDevice dev;
  std::unique_ptr<ab::Meter> off = ab::make_topdown_meter(dev, 0);
  EXPECT_FALSE(off->active());
  EXPECT_EQ(off->context().back().second, "none: --topdown=0");
  std::unique_ptr<ab::Meter> td = ab::make_topdown_meter(dev, 2);
  ASSERT_TRUE(td->active());
  EXPECT_EQ(td->context()[1].second, "fake reader, 3 passes");
  int launches = 0;
  const ab::MeterPass pass{nullptr, [&launches] { ++launches; }, 1e-3};
  std::map<std::string, double> c;
  for (const ab::CounterValue& v : td->measure(workload("td", true), pass)) {
    c[v.name] = v.value;
    EXPECT_EQ(v.flags, benchmark::Counter::kDefaults) << v.name;
  }
  EXPECT_EQ(launches, 3);  // one launch a replay pass
  // Level 2 of the recorded range (tests/unit/test_topdown.cpp: retire 0.6, backend 0.16, ...).
  EXPECT_NEAR(c.at("td_retire"), 0.6, 1e-12);
  EXPECT_NEAR(c.at("td_divergence"), 0.2, 1e-12);
  EXPECT_NEAR(c.at("td_frontend"), 0.04, 1e-12);
  EXPECT_NEAR(c.at("td_backend"), 0.16, 1e-12);
  EXPECT_NEAR(c.at("td_memory_bound"), 0.1, 1e-12);
  EXPECT_NEAR(c.at("td_ipc"), 3.0, 1e-12);
  EXPECT_EQ(c.count("td_stall_long_scoreboard"), 0u);  // a level-3 counter
}

// The clock meter where the SMs' cycles can be counted and NVML cannot answer (a device not
// NVIDIA's): the clock is the count over the window's time, 1250 cycles in 2500 ns, 500 MHz, and
// cycles per access are at it; there is no NVML reading and no throttle counter.
TEST(Meters, ClockCountedByTheSMs) {
  FakeDevice dev;
  std::unique_ptr<ab::Meter> clock = ab::make_clock_meter(dev);
  ASSERT_TRUE(clock->active());
  const std::string how = clock->context().at(0).second;
  EXPECT_NE(how.find("SM cycles counted over 250 ms"), std::string::npos) << how;
  EXPECT_NE(how.find("no NVML: no clock sensor for this vendor's devices"), std::string::npos) << how;
  int launches = 0;
  const ab::MeterPass pass{[&launches](int n) { return launches += n, n * kPerLaunch; }, nullptr, kPerLaunch};
  std::map<std::string, double> c;
  for (const ab::CounterValue& v : clock->measure(workload("clock", true), pass)) c[v.name] = v.value;
  EXPECT_EQ(launches, 3 * 250);  // the 250 ms window of 1 ms launches, once a replay pass
  EXPECT_NEAR(c.at("clock_mhz"), 500, 1e-9);
  EXPECT_NEAR(c.at("cycles_per_access"), 1000 / 500e6, 1e-18);  // accesses over cycles, inverted by the reporter
  EXPECT_EQ(c.count("clock_nvml_mhz") + c.count("clock_throttle"), 0u);
  EXPECT_TRUE(clock->summary().empty());
}
