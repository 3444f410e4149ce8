// Energy: the cost-to-counter arithmetic, the window logic against a scripted sensor, and
// the real meters as this machine has them (PAPI without energy events, NVML without a driver).
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <cmath>
#include <cstdint>

#include "fixtures/meters/energy.hpp"
#include "fixtures/meters/energy_papi.hpp"
#include "fixtures/meters/nvml.hpp"
#include "tests/unit/counters.hpp"

using namespace archbench;
using benchmark::Counter;

using archbench_test::find;
using archbench_test::shown;

namespace {

// A sensor whose readings follow a script on a virtual clock: an energy counter that moves
// every `step` seconds, in millijoule units, at `idle` watts plus `busy` watts while launches
// run, with a fixed per-update noise; launches advance the clock by their time plus a gap.
class ScriptedMeter final : public EnergyMeter {
 public:
  ScriptedMeter(double step, double idle, double busy, double noise_j)
      : step_(step), idle_(idle), busy_(busy), noise_(noise_j) {}
  std::string method() const override { return "scripted"; }
  double joules() override {
    t_ += 2e-6;  // a read takes time, as NVML's does
    const auto k = static_cast<std::int64_t>(std::floor(t_ / step_));
    const double exact = idle_ * k * step_ + busy_ * busy_time_at(k * step_);
    // Deterministic noise per update, in [-noise, noise]; rounded to the 1 mJ unit.
    const double u = static_cast<double>((k * 2654435761u) % 1000) / 999.0 * 2 - 1;
    return std::floor((exact + noise_ * u) * 1e3) * 1e-3;
  }
  double quantum() const override { return 1e-3; }
  double now() const override { return t_; }
  void pause(double s) override { t_ += s; }
  // n launches of `each` seconds, then a host gap; returns their device time.
  double launch(int n, double each, double gap) {
    busy_spans_.push_back({t_, t_ + n * each});
    t_ += n * each + gap;
    return n * each;
  }

 private:
  double busy_time_at(double t) const {
    double s = 0;
    for (auto [a, b] : busy_spans_) s += std::clamp(t, a, b) - a;
    return s;
  }
  double step_, idle_, busy_, noise_;
  double t_ = 0;
  std::vector<std::pair<double, double>> busy_spans_;
};

}  // namespace

TEST(EnergyCounters, JoulePerLaunchIsShownAsGiven) {
  Cost c;
  c.flops = 2e9;
  EnergyFigures e{0.5, 0.01, 250, 5};
  auto cs = energy_counters(c, e);
  const auto* j = find(cs, "joule");
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->flags, Counter::kIsIterationInvariant | Counter::kAvgIterations);
  EXPECT_DOUBLE_EQ(shown(*j, 1234, 0.7), 0.5);  // per launch, whatever the iteration count
  EXPECT_DOUBLE_EQ(shown(*find(cs, "joule_err"), 1234, 0.7), 0.01);
  EXPECT_DOUBLE_EQ(shown(*find(cs, "watt"), 1234, 0.7), 250);
  EXPECT_DOUBLE_EQ(shown(*find(cs, "watt_err"), 1234, 0.7), 5);
  ASSERT_NE(find(cs, "flop_per_joule"), nullptr);
  EXPECT_DOUBLE_EQ(find(cs, "flop_per_joule")->value, 4e9);
  EXPECT_DOUBLE_EQ(find(cs, "flop_per_joule_err")->value, 4e9 * 0.01 / 0.5);  // relative error carries
  EXPECT_EQ(find(cs, "byte_per_joule"), nullptr);
  EXPECT_EQ(find(cs, "op_per_joule"), nullptr);
}

TEST(EnergyCounters, WorkKindsFollowTheCost) {
  Cost c;
  c.bytes_read = 300, c.bytes_written = 100, c.int_ops = 10, c.calls = 8;
  auto cs = energy_counters(c, {2.0, 0.1, 100, 1});
  EXPECT_DOUBLE_EQ(find(cs, "byte_per_joule")->value, 200);
  EXPECT_DOUBLE_EQ(find(cs, "op_per_joule")->value, 5);
  EXPECT_DOUBLE_EQ(find(cs, "call_per_joule")->value, 4);
  EXPECT_EQ(find(cs, "flop_per_joule"), nullptr);
}

TEST(EnergyCounters, NothingMeasuredMeansNoCounters) {
  Cost c;
  c.flops = 1;
  EXPECT_TRUE(energy_counters(c, EnergyFigures{}).empty());
}

TEST(EnergyFiguresTest, MeansAndHalfWidths) {
  // Two windows of 1 s, 1000 launches: 100 J and 110 J.
  std::vector<EnergyWindow> ws{{100, 1, 1, 1000}, {110, 1, 1, 1000}};
  const EnergyFigures f = energy_figures(ws, 0.02, 1e-3);
  EXPECT_DOUBLE_EQ(f.joule, 0.105);
  EXPECT_DOUBLE_EQ(f.watt, 105);
  // Granularity: power * period + quantum at each window, per launch; spread: half the range.
  const double gran = ((100 * 0.02 + 1e-3) + (110 * 0.02 + 1e-3)) / 2;
  EXPECT_NEAR(f.joule_err, gran / 1000 + 0.005, 1e-12);
  EXPECT_NEAR(f.watt_err, gran + 5, 1e-9);
}

TEST(EnergyWindowLength, AtLeastOneSecondAndFiftySteps) {
  EXPECT_DOUBLE_EQ(energy_window_seconds(0.015), 1.0);     // 50 steps are 0.75 s: 1 s wins
  EXPECT_DOUBLE_EQ(energy_window_seconds(0.1), 5.0);       // 50 steps of 100 ms
  EXPECT_DOUBLE_EQ(energy_window_seconds(1.0), kEnergyMaxWindow);  // capped
}

TEST(ScriptedSensor, CalibrationFindsTheStep) {
  ScriptedMeter m(0.015, 60, 0, 0);
  m.calibrate();
  ASSERT_TRUE(m.available()) << m.why();
  EXPECT_NEAR(m.period(), 0.015, 5e-4);
}

TEST(ScriptedSensor, ACounterThatNeverMovesIsUnavailable) {
  ScriptedMeter m(0.015, 0, 0, 0);  // no power: the reading stays at 0
  m.calibrate(1.0);
  EXPECT_FALSE(m.available());
  EXPECT_NE(m.why().find("did not change"), std::string::npos) << m.why();
}

TEST(ScriptedSensor, WindowsAreLengthenedAndTheTruthIsWithinTheError) {
  // 15 ms steps, 70 W idle + 230 W busy, 50 mJ of noise per update; 40 us launches with a
  // 10 us host gap per chunk.
  ScriptedMeter m(0.015, 70, 230, 0.05);
  m.calibrate();
  ASSERT_TRUE(m.available());
  std::vector<EnergyWindow> ws;
  const double each = 40e-6;
  const EnergyFigures f = measure_energy(m, [&](int n) { return m.launch(n, each, 10e-6); }, each, &ws);
  ASSERT_EQ(ws.size(), static_cast<std::size_t>(kEnergyWindows));
  for (const EnergyWindow& w : ws) {
    EXPECT_GE(w.seconds, energy_window_seconds(m.period()));
    EXPECT_GE(w.seconds / m.period(), kEnergyMinSteps);
    EXPECT_LT(w.seconds, 1.2);  // not much beyond what is needed
    EXPECT_NEAR(w.device_seconds, w.launches * each, 1e-9);
  }
  // The truth: each launch costs 300 W for 40 us, plus idle power over its share of gaps.
  const double busy_share = 1 / (1 + 10e-6 / (1250 * each));  // 1250 launches per 50 ms chunk
  const double truth = (70 + 230 * busy_share) * each / busy_share;
  EXPECT_GT(f.joule_err, 0);
  EXPECT_LT(f.joule_err / f.joule, 0.05);
  EXPECT_NEAR(f.joule, truth, f.joule_err);
  EXPECT_NEAR(f.watt, 70 + 230 * busy_share, f.watt_err);
}

TEST(ScriptedSensor, ASlowCounterGetsLongerWindows) {
  ScriptedMeter m(0.1, 70, 230, 0);
  m.calibrate();
  std::vector<EnergyWindow> ws;
  const EnergyFigures f = measure_energy(m, [&](int n) { return m.launch(n, 1e-3, 0); }, 1e-3, &ws);
  for (const EnergyWindow& w : ws) EXPECT_GE(w.seconds, 5.0);
  EXPECT_NEAR(f.watt, 300, f.watt_err);
  EXPECT_LT(f.watt_err / f.watt, 0.03);
}

TEST(ScriptedSensor, IdlePower) {
  ScriptedMeter m(0.015, 65, 230, 0.02);
  m.calibrate();
  const IdlePower idle = idle_power(m);
  EXPECT_GE(idle.seconds, 1.0);
  EXPECT_GT(idle.watt_err, 0);
  EXPECT_NEAR(idle.watt, 65, idle.watt_err);
}

// The power-sampling meter (NVML boards without the energy counter) on a fake power source,
// in real time: 100 W integrated over ~0.3 s, with the sampler's cost reported.
TEST(SamplingMeter, IntegratesPowerAndReportsItsCost) {
  auto m = make_sampling_meter([] { return 100.0; }, 0.01, "fake-power", "");
  m->calibrate();
  ASSERT_TRUE(m->available()) << m->why();
  EXPECT_NEAR(m->period(), 0.01, 0.01);
  const double e0 = m->joules(), t0 = m->now();
  m->pause(0.3);
  const double e1 = m->joules(), t1 = m->now();
  EXPECT_NEAR((e1 - e0) / (t1 - t0), 100, 100 * 2 * m->period() / (t1 - t0) + 1);
  EXPECT_NE(m->detail().find("sampler CPU"), std::string::npos) << m->detail();
}

// NVML: without NVIDIA's driver the meter says the library is missing; with it (the GPU
// machine), a device that is not NVIDIA's is not found, with a reason.
TEST(NvmlMeter, UnavailableWithAReasonWithoutTheDevice) {
  DeviceInfo d;
  d.name = "no such device";
  d.vendor = "NVIDIA Corporation";
  auto m = make_nvml_meter(d);
  EXPECT_FALSE(m->available());
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    EXPECT_NE(m->why().find("libnvidia-ml.so.1 not found"), std::string::npos) << m->why();
  } else {
    EXPECT_EQ(m->why().find("not found"), std::string::npos) << m->why();
    EXPECT_FALSE(m->why().empty());
    dlclose(lib);
  }
}

// PAPI: this VM has no energy event, and the meter must say so naming what it looked for;
// a machine with RAPL must read a positive energy over a busy second. Both are checked.
TEST(PapiMeter, UnavailableWithWhatItLookedForOrReadsEnergy) {
  DeviceInfo cpu;
  cpu.is_cpu = true;
  auto m = make_papi_meter(cpu);
  if (!m->available()) {
    ASSERT_FALSE(m->why().empty());
    std::cout << "PAPI meter unavailable: " << m->why() << "\n";
    const bool built_without = m->why().find("built without PAPI") != std::string::npos;
    if (!built_without) {
      EXPECT_NE(m->why().find("ENERGY"), std::string::npos) << m->why();
    }
    return;
  }
  std::cout << "PAPI meter: " << m->method() << "\n";
  m->calibrate();
  ASSERT_TRUE(m->available()) << m->why();
  const double e0 = m->joules();
  volatile double x = 0;
  for (auto t = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t < std::chrono::seconds(1);)
    for (int i = 0; i < 1000; ++i) x = x + i * 1e-9;
  EXPECT_GT(m->joules() - e0, 0);
}

// The factory: a CPU device (PoCL) goes to PAPI, an NVIDIA device to NVML.
TEST(EnergyMeterFactory, ChoosesBySensorOfTheDevice) {
  DeviceInfo cpu;
  cpu.name = "cpu";
  cpu.vendor = "GenuineIntel";
  cpu.is_cpu = true;
  auto m = make_energy_meter(cpu);
  if (!m->available()) {
    EXPECT_NE(m->why().find("PAPI"), std::string::npos) << m->why();
  } else {
    EXPECT_EQ(m->method().rfind("papi:", 0), 0u);
  }
  DeviceInfo gpu;
  gpu.name = "no such device";
  gpu.vendor = "NVIDIA Corporation";
  auto g = make_energy_meter(gpu);
  EXPECT_FALSE(g->available());
  EXPECT_TRUE(g->why().find("NVML") != std::string::npos || g->why().find("libnvidia-ml") != std::string::npos)
      << g->why();
}

// NVML's units through a fake function table (no driver needed): the energy counter counts
// millijoules and the power reading milliwatts; the meter must give joules and watts.
namespace {
struct FakeNvml {
  static inline unsigned long long mj = 0;
  static inline unsigned mw = 0;
  static inline bool has_energy = true;
  static nvmlDevice_t handle() { return reinterpret_cast<nvmlDevice_t>(&mj); }
  static std::unique_ptr<Nvml> table() {
    auto n = std::make_unique<Nvml>();  // not initialized: its destructor calls nothing
    n->count = [](unsigned* c) { return *c = 1, 0; };
    n->by_index = [](unsigned, nvmlDevice_t* d) { return *d = handle(), 0; };
    n->by_pci = [](const char*, nvmlDevice_t*) { return 1; };
    n->pci_info = [](nvmlDevice_t, nvmlPciInfo_t*) { return 1; };
    n->name = [](nvmlDevice_t, char* b, unsigned len) { return std::snprintf(b, len, "Fake GPU"), 0; };
    n->energy = [](nvmlDevice_t, unsigned long long* v) { return has_energy ? (*v = mj, 0) : 3; };
    n->power = [](nvmlDevice_t, unsigned* v) { return *v = mw, 0; };
    n->error = [](nvmlReturn_t) { return "fake error"; };
    return n;
  }
};
DeviceInfo fake_gpu() {
  DeviceInfo d;
  d.name = "Fake GPU";
  d.vendor = "NVIDIA Corporation";
  return d;
}
}  // namespace

TEST(NvmlMeter, EnergyCounterMillijoulesBecomeJoules) {
  FakeNvml::has_energy = true;
  FakeNvml::mj = 123456;
  auto m = make_nvml_meter(FakeNvml::table(), fake_gpu(), 0.015);
  ASSERT_TRUE(m->available()) << m->why();
  EXPECT_EQ(m->method(), "nvml");
  EXPECT_DOUBLE_EQ(m->joules(), 123.456);
  FakeNvml::mj += 2500;  // 2.5 J later
  EXPECT_DOUBLE_EQ(m->joules(), 125.956);
  EXPECT_DOUBLE_EQ(m->quantum(), 1e-3);
}

TEST(NvmlMeter, PowerMilliwattsBecomeWattsWhereNoEnergyCounter) {
  FakeNvml::has_energy = false;
  FakeNvml::mw = 200000;  // 200 W
  auto m = make_nvml_meter(FakeNvml::table(), fake_gpu(), 0.005);
  ASSERT_TRUE(m->available()) << m->why();
  EXPECT_EQ(m->method(), "nvml-power");
  // Integrated power over a span (not a tight timing: a factor of 2 either way still tells
  // watts from milliwatts, and a loaded machine only delays the samples, which carry their times).
  auto changed = [&](double from) {
    for (double t0 = m->now(); m->now() - t0 < 20;) {
      if (const double e = m->joules(); e != from) return e;
      m->pause(0.001);
    }
    return from;
  };
  const double e0 = changed(0), t0 = m->now();
  m->pause(0.3);
  const double e1 = changed(m->joules()), t1 = m->now();
  ASSERT_GT(e1, e0);
  const double watts = (e1 - e0) / (t1 - t0);
  EXPECT_GT(watts, 100) << watts;
  EXPECT_LT(watts, 400) << watts;
  FakeNvml::has_energy = true;
}

// PAPI's energy events: the scale from the units PAPI states or from the event's name.
TEST(PapiMeter, JoulesPerCountFollowTheEventsUnits) {
  EXPECT_DOUBLE_EQ(papi_joules_per_count("powercap:::ENERGY_UJ:ZONE0", ""), 1e-6);  // microjoules
  EXPECT_DOUBLE_EQ(papi_joules_per_count("powercap:::ENERGY_UJ:ZONE0", "uJ"), 1e-6);
  EXPECT_DOUBLE_EQ(papi_joules_per_count("rapl::RAPL_ENERGY_PKG", "nJ"), 1e-9);     // nanojoules
  EXPECT_DOUBLE_EQ(papi_joules_per_count("some::ENERGY", "uJ"), 1e-6);
  EXPECT_DOUBLE_EQ(papi_joules_per_count("some::ENERGY", "mJ"), 1e-3);
  EXPECT_DOUBLE_EQ(papi_joules_per_count("some::ENERGY", "J"), 1.0);
  EXPECT_DOUBLE_EQ(papi_joules_per_count("rapl::RAPL_ENERGY_PKG", ""), std::ldexp(1.0, -32));  // perf_event RAPL
  // A reading of 2.5e6 counts of powercap is 2.5 J, of a nJ event 2.5 mJ.
  EXPECT_DOUBLE_EQ(2.5e6 * papi_joules_per_count("powercap:::ENERGY_UJ:ZONE0", ""), 2.5);
  EXPECT_DOUBLE_EQ(2.5e6 * papi_joules_per_count("rapl::RAPL_ENERGY_PKG", "nJ"), 2.5e-3);
}

// PAPI through a scripted table (no RAPL needed): which event is read for which device, and
// its counts in joules as PAPI states the units.
namespace {
struct FakePapi {
  explicit FakePapi(std::vector<std::pair<std::string, std::string>> e) : events(std::move(e)) {}
  std::vector<std::pair<std::string, std::string>> events;  // name, units, in PAPI's order
  long long count = 0;
  std::string started;  // the event counted
  bool stopped = false;
  std::unique_ptr<Papi> table() {
    auto p = std::make_unique<Papi>();
    p->version = "7.0";
    p->find = [this](const std::string& n, int* code) {
      for (std::size_t i = 0; i < events.size(); ++i)
        if (events[i].first == n) return *code = int(i), true;
      return false;
    };
    p->units = [this](int code) { return events.at(code).second; };
    p->native_events = [this](std::string* components) {
      *components = "perf_event, rapl";
      std::vector<std::pair<std::string, int>> out;
      for (std::size_t i = 0; i < events.size(); ++i) out.push_back({events[i].first, int(i)});
      return out;
    };
    p->start = [this](int code) { return started = events.at(code).first, std::string(); };
    p->read = [this] { return count; };
    p->stop = [this] { stopped = true; };
    return p;
  }
};
DeviceInfo device(bool gpu) {
  DeviceInfo d;
  d.is_gpu = gpu, d.is_cpu = !gpu;
  d.name = gpu ? "Intel(R) UHD Graphics 630" : "cpu";
  d.vendor = "Intel(R) Corporation";
  return d;
}
}  // namespace

TEST(PapiMeter, AGpuReadsTheGpuDomainInNanojoules) {
  // PAPI's rapl component: PACKAGE_ENERGY and PP1_ENERGY per package, in nJ.
  FakePapi f{{{"rapl:::PACKAGE_ENERGY:PACKAGE0", "nJ"}, {"rapl:::PP1_ENERGY:PACKAGE0", "nJ"}}};
  {
    auto m = make_papi_meter(f.table(), device(true));
    ASSERT_TRUE(m->available()) << m->why();
    EXPECT_EQ(m->method(), "papi:rapl:::PP1_ENERGY:PACKAGE0");
    EXPECT_EQ(f.started, "rapl:::PP1_ENERGY:PACKAGE0");
    EXPECT_NE(m->detail().find("domain gpu"), std::string::npos) << m->detail();
    f.count = 2500000000LL;  // 2.5e9 nJ
    EXPECT_DOUBLE_EQ(m->joules(), 2.5);
    EXPECT_DOUBLE_EQ(m->quantum(), 1e-9);
  }
  EXPECT_TRUE(f.stopped);
}

TEST(PapiMeter, ACpuReadsThePackageNeverTheGpuDomain) {
  FakePapi f{{{"rapl::RAPL_ENERGY_GPU", ""}, {"rapl::RAPL_ENERGY_PKG", ""}}};
  auto m = make_papi_meter(f.table(), device(false));
  ASSERT_TRUE(m->available()) << m->why();
  EXPECT_EQ(m->method(), "papi:rapl::RAPL_ENERGY_PKG");
  EXPECT_NE(m->detail().find("domain package"), std::string::npos) << m->detail();
  f.count = 3LL << 32;  // perf_event's RAPL counts 2^-32 J
  EXPECT_DOUBLE_EQ(m->joules(), 3.0);
  // Only the GPU domain: a CPU device does not read it.
  FakePapi g{{{"rapl::RAPL_ENERGY_GPU", ""}}};
  auto n = make_papi_meter(g.table(), device(false));
  EXPECT_FALSE(n->available());
  EXPECT_NE(n->why().find("RAPL_ENERGY_PKG"), std::string::npos) << n->why();
}

TEST(PapiMeter, AGpuWithoutItsDomainReadsThePackageAndSaysSo) {
  FakePapi f{{{"powercap:::ENERGY_UJ:ZONE0", ""}}};
  auto m = make_papi_meter(f.table(), device(true));
  ASSERT_TRUE(m->available()) << m->why();
  EXPECT_EQ(m->method(), "papi:powercap:::ENERGY_UJ:ZONE0");
  EXPECT_NE(m->detail().find("domain package"), std::string::npos) << m->detail();
  EXPECT_NE(m->detail().find("no GPU energy event"), std::string::npos) << m->detail();
  f.count = 1500000;  // powercap counts microjoules
  EXPECT_DOUBLE_EQ(m->joules(), 1.5);
}

TEST(PapiMeter, AnyNativeEnergyEventElseAReason) {
  FakePapi f{{{"perf::CYCLES", ""}, {"acme:::BOARD_ENERGY", "mJ"}}};
  auto m = make_papi_meter(f.table(), device(false));
  ASSERT_TRUE(m->available()) << m->why();
  EXPECT_EQ(m->method(), "papi:acme:::BOARD_ENERGY");
  f.count = 42;
  EXPECT_DOUBLE_EQ(m->joules(), 0.042);
  FakePapi none{{{"perf::CYCLES", ""}}};
  auto n = make_papi_meter(none.table(), device(true));
  EXPECT_FALSE(n->available());
  EXPECT_NE(n->why().find("RAPL_ENERGY_GPU"), std::string::npos) << n->why();
  EXPECT_NE(n->why().find("perf_event, rapl"), std::string::npos) << n->why();
}
