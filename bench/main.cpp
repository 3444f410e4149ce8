// archbench: picks a device, registers every family's workloads with Google Benchmark, runs
// them with the meters that registered themselves, and writes the results. The options, the
// context, --device=all and the results writer are the launcher's (fixtures/launcher/).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fixtures/core/measure.hpp"
#include "fixtures/core/workload.hpp"
#include "fixtures/launcher/guard.hpp"
#include "fixtures/launcher/headline.hpp"
#include "fixtures/launcher/node.hpp"
#include "fixtures/launcher/options.hpp"
#include "fixtures/launcher/results.hpp"
#include "fixtures/launcher/selection.hpp"

namespace ab = archbench;

namespace {

int run(int argc, char** argv) {
  ab::Options o;
  if (const std::optional<int> rc = ab::parse_options(argc, argv, o)) return *rc;
  const std::vector<std::unique_ptr<ab::Backend>> backends = ab::backends();
  const ab::Found found = ab::find_devices(backends);
  const std::vector<ab::DeviceInfo>& devices = found.devices;
  if (o.list_devices) {
    std::cout << (devices.empty() ? "no devices found\n" : ab::describe_devices(devices)) << found.problems;
    return devices.empty() ? 1 : 0;
  }
  if (devices.empty() && !o.help) {
    std::cerr << "archbench: no device to run on.\n" << found.problems;
    return 1;
  }
  if (const std::optional<int> rc = ab::run_every_device(found, o)) return *rc;

  const bool running = !o.help && !o.listing_tests;
  std::unique_ptr<ab::Device> device;
  std::deque<ab::Workload> workloads;  // stable addresses for the registered lambdas
  std::unique_ptr<ab::Measure> measure;
  std::vector<std::unique_ptr<ab::Meter>> meters;  // outlive the benchmarks that read them
  if (!devices.empty()) {
    std::string error;
    const int chosen = ab::select_device(devices, o.device, error);
    if (chosen < 0) {
      std::cerr << "archbench: --device=" << o.device << ": " << error << ". The devices are:\n"
                << ab::describe_devices(devices) << found.problems;  // and why a backend has none
      return 2;
    }
    const ab::DeviceInfo& info = devices[chosen];
    try {
      device = found.owner[chosen]->open(info);
    } catch (const std::exception& e) {
      std::cerr << "archbench: cannot open " << ab::short_name(info) << ": " << e.what() << "\n";
      return 1;
    }
    measure = std::make_unique<ab::Measure>(*device);
    const ab::Plan plan{info, o.sweep == "full" ? ab::Size::full : ab::Size::quick};
    std::vector<ab::Workload> built;
    for (const ab::Family& f : ab::families())
      for (ab::Workload& w : f.build(plan)) built.push_back(std::move(w));
    ab::order_for_run(built, o.default_run());  // the headline first
    for (ab::Workload& w : built) {
      const ab::Workload& stored = workloads.emplace_back(std::move(w));
      benchmark::RegisterBenchmark(stored.name.c_str(), [m = measure.get(), &stored](benchmark::State& s) { m->run(s, stored); })
          ->UseManualTime()
          ->Unit(o.has_unit ? benchmark::GetDefaultTimeUnit() : benchmark::kMicrosecond);
    }
    ab::add_context(info, o.sweep, o.filter, o.repetitions);
    if (running)
      for (const ab::MeterKind& kind : ab::meter_kinds()) {  // fixtures/meters/meters.hpp
        meters.push_back(kind.make(*device, o.meters));
        measure->add_meter(meters.back().get());
        for (const auto& [k, v] : meters.back()->context()) benchmark::AddCustomContext(k, v);
      }
    if (!o.has_out && running) {
      o.out = ab::results_path(info, o.record, o.suite, o.sweep, "");
      std::cerr << "archbench: running on " << ab::short_name(info) << "; JSON goes to " << o.out << "\n";
    }
  }

  if (!ab::initialize_benchmark(o)) return 2;
  std::map<std::string, const ab::Workload*> by_name;
  for (const ab::Workload& w : workloads) by_name[w.name] = &w;
  // Colours for a terminal only: a log file or a parent's pipe (--device=all, MPI) gets plain text.
  const ab::ResultsReporter::Options ro{.stdout_format = o.stdout_format, .out = running ? o.out : "",
                                        .out_format = o.out_format, .color = isatty(STDOUT_FILENO) == 1,
                                        .total = ab::count_selected(workloads, benchmark::GetBenchmarkFilter()),
                                        .keep_previous = o.record};
  std::optional<ab::OutputLock> lock;
  if (!ro.out.empty() && !ab::hold(lock, ro.out, o.record)) return 2;
  ab::ResultsReporter reporter(ro, by_name, [&meters] {
    ab::ContextLines lines;
    for (const auto& m : meters)
      for (auto& l : m->summary()) lines.push_back(std::move(l));
    return lines;
  });
  const std::size_t ran = benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return reporter.finish(ran, o.listing_tests);
}

}  // namespace

int main(int argc, char** argv) {
  ab::guard_stdout();  // a closed pipe or a full disk on stdout loses nothing else
  return ab::stdout_status(run(argc, argv));
}
