// archbench: picks a device, registers every family's workloads with Google Benchmark, runs them.
#include <benchmark/benchmark.h>
#include <regex.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "fixtures/launcher/guard.hpp"
#include "fixtures/launcher/headline.hpp"
#include "fixtures/launcher/results.hpp"
#include "fixtures/meters/meters.hpp"
#include "fixtures/core/measure.hpp"
#include "fixtures/launcher/node.hpp"
#include "fixtures/launcher/selection.hpp"
#include "fixtures/core/workload.hpp"

namespace ab = archbench;

namespace {

const char* kUsage = R"(archbench: microbenchmarks that characterize a compute device.

Usage: archbench [archbench options] [Google Benchmark options]

archbench options:
  --list-devices         print every device with its facts and its selector, then exit
  --device=SELECTOR      device to run on (also: environment variable ARCHBENCH_DEVICE).
                         SELECTOR is an exact selector from --list-devices (cuda:0,
                         opencl:0.1), an index (0), a backend (cuda, opencl), a type (gpu,
                         cpu), or part of the device name (H100). Default: the first GPU
                         (CUDA before OpenCL), else the first device.
  --device=all[:FILTER]  every device, one after the other, each in its own process (a
                         device that fails or crashes is reported and the others go on):
                         every CUDA GPU where there is one, else every device; FILTER is a
                         backend or type (all:opencl, all:cpu). Sequential on purpose: the
                         devices of a node share host memory, PCIe switches and power, so
                         runs at once would measure each other. One JSON holds every
                         device's results, each entry tagged with its device (the output
                         rules below apply, with "-node" added to the file name), and
                         <file>-variability.json how they differ (min/median/max per
                         benchmark); exit 1 when any device failed.
  --sweep=quick|full     quick (default; also ARCHBENCH_SWEEP) or full (every size, width,
                         stride and count: hours on a CPU). With no --benchmark_filter and no
                         --record, the quick sweep is the default run: the headline first
                         (peak compute per precision, stream bandwidth, the latency
                         staircase, host transfers, launch latency), then a point or two of
                         every other family (fixtures/launcher/headline.cpp): 82 benchmarks
                         on PoCL, about 2 minutes of CPU time, within 3 minutes on an idle
                         2-core CPU; then a summary. A filter picks from the whole quick sweep
                         (--benchmark_filter=^builtins/ runs every builtin;
                         --benchmark_filter=all all 467, 7.6 minutes of CPU time on that
                         CPU), as --record does.
  --record[=SUITE]       write the JSON to results/<device>/<driver>/<SUITE>.json (SUITE
                         defaults to <backend>-<sweep>; the root is ARCHBENCH_RESULTS_ROOT
                         when set) with 5 repetitions unless given: a baseline that
                         tools/archbench_compare.py can test for regressions. A baseline
                         already there is never replaced silently: once the new run is
                         complete, the old one is kept as <SUITE>-<its archbench_version>.json
                         (-2, -3... if that name is taken) and the new one takes its place; a
                         run that fails to start, matches nothing or is interrupted leaves it
                         as it was. The context records filter, sweep and repetitions.
  --energy               also measure energy (also ARCHBENCH_ENERGY=1): after each
                         workload's timed loop, its launch runs back-to-back for 3 windows
                         of at least 1 s and 50 sensor updates, read by NVML (NVIDIA) or
                         PAPI (host RAPL); adds joule (per launch), watt, flop_per_joule /
                         op_per_joule / byte_per_joule / call_per_joule and their *_err
                         half-widths; idle power goes in the context (idle_watt). Where no
                         sensor answers, the context's energy_meter says why.
  --topdown=LEVEL        TopDown counters from the GPU's hardware counters (also ARCHBENCH_TOPDOWN):
                         0 off; 1 (default) td_retire, td_divergence, td_frontend, td_backend
                         (fractions of the SM's peak issue rate, IPC_MAX = 4, adding up to 1)
                         and td_ipc; 2 adds td_branch, td_replay, td_fetch, td_decode,
                         td_memory_bound, td_core_bound; 3 adds td_stall_<reason> for every
                         stall reason and td_issue_selected / td_issue_not_selected. After each
                         workload's timed loop, one launch is replayed once per counter pass
                         (CUPTI's range profiler; CUDA devices). Where counters cannot be read
                         (OpenCL, no CUPTI, no permission) the context's topdown says why.
  --traffic              measured traffic and executed operations (also ARCHBENCH_TRAFFIC=1), per
                         launch, from the GPU's hardware counters in the same kind of pass:
                         traffic_<l1|shared|l2|dram>_<read|write>_bytes, exec_flops_<fp64|fp32|
                         fp16> (SASS counts, FMA = 2), exec_int_inst, exec_tensor_ops_<path>;
                         a counter the chip lacks is left out and named in the context
                         (traffic_missing). tools/archbench_agreement.py checks them against
                         the cost model; archbench_roofline.py places benchmarks by them.
  --help                 this text, then Google Benchmark's options

Environment: ARCHBENCH_DEVICE, ARCHBENCH_SWEEP, ARCHBENCH_ENERGY, ARCHBENCH_TOPDOWN, ARCHBENCH_TRAFFIC, ARCHBENCH_RESULTS_DIR,
  ARCHBENCH_RESULTS_ROOT (see above);
  ARCHBENCH_CL_OPTIONS   extra OpenCL build options appended to every kernel's (they win);
                         recorded in the JSON context as cl_options
  ARCHBENCH_CUDA_OPTIONS extra NVRTC options appended to every CUDA kernel's (they win);
                         recorded in the JSON context as cuda_options
  ARCHBENCH_CUDA_ARCH    compile CUDA kernels for this target instead of the device's own
                         (default sm_XY, sm_90a on Hopper so that wgmma can be measured)
  ARCHBENCH_CUDA_INCLUDE the CUDA toolkit's include folder for NVRTC (cuda_fp16.h); default:
                         the one found at build time (a bundle sets it to its own copy)
  ARCHBENCH_CHAINS       independent chains per work-item of the compute family (default: 16
                         over the width on GPUs); the JSON's chains axis says which ran
  ARCHBENCH_WAVES        the compute family's peak figures on CUDA: work-items as a fraction
                         of those the SMs hold at once (default 0.75: one wave, every group
                         resident from the start)
  ARCHBENCH_CLOCK_WINDOW_MS  NVIDIA: how long the clock meter replays each workload while it
                         reads the SM clock (default 250: the power controller acts after ~100 ms)
  ARCHBENCH_DUMP_DIR     save every compiled program there (OpenCL: the driver's binary, PTX
                         on NVIDIA; CUDA: PTX and cubin) with its options
  ARCHBENCH_CUPTI        the libcupti.so that --topdown loads (default: the loader's search
                         path, then the CUDA toolkit's copy found at build time)

Defaults archbench sets unless you pass them yourself:
  --benchmark_min_time=0.1 --benchmark_repetitions=3 (the console shows one line a
  benchmark, its median; the JSON holds every repetition and the aggregates)
  --benchmark_out=results/local/archbench-<device>-<date>-<pid>.json --benchmark_out_format=json
  (the folder is ARCHBENCH_RESULTS_DIR when set)
--benchmark_format=console|json|csv decides stdout (json and csv come at the end of the run,
for a pipe); --benchmark_out_format=json|csv the file's; --benchmark_time_unit=ns|us|ms|s the
times'. Progress ([i/N], the time left) goes to stderr; at the end a summary of the headline
figures beside the device's published limits (tools/archbench/textbook.json) and where the
results went, on the console (stderr with --benchmark_format=json|csv). The JSON is Google
Benchmark's with archbench's schema 2: the context's schema_version, and on every entry its
axes (one key a name component, and what describes it: scalar, width, chains), name_format
(the axes rebuild the name), cost (the work of one launch: flops, int_ops, bytes_read,
bytes_written, accesses, calls) and, for divergence and scalability, the baseline the tools
compare it with. The CSV has every column any row has, the context as '#' lines
(pandas.read_csv(f, comment='#')).

Outputs: written to a temporary file and renamed when complete (SIGINT/SIGTERM leave the
previous file as it was and no temporary behind); nothing is written when nothing ran; a run
holds <output>.lock while it runs, so a second run aimed at the same file refuses at start.

Exit status: 0 every benchmark ran or was skipped for a feature or size the device lacks;
1 some benchmark failed (a kernel that did not build, a failed output check, an error while
timing), or a device could not be opened, or the results could not be written; 2 bad input
(an unknown flag, device or value, a filter that matches nothing, an output that cannot be
written, another run writing the same output).

Names are family/backend/variant/axis:value (Google Benchmark adds /manual_time; a filter
ending in '$' still matches); pick with --benchmark_filter=REGEX, e.g.
  --benchmark_filter='compute/opencl/mad/float'   --benchmark_filter='^memory/.*/triad'
Counters: flop_per_s, op_per_s, byte_per_s, call_per_s, ns_per_access, cycles_per_access
(at the SM clock the clock meter saw held, NVIDIA; else at the device's reported maximum, as
the context's clock_meter says), clock_mhz (NVIDIA: the clock held, counted by the SMs' cycle
counter where CUPTI can read it, else NVML's), clock_nvml_mhz and clock_throttle (NVML's clock
and the throttle reasons it saw; clock_throttled in the context names the workloads); the slowdown
(divergence) and speedup (scalability) against their baseline are derived by the tools
(tools/archbench), from the baseline in the JSON. Times are per launch: device events with the queue held
(warm-up excluded; CUDA holds the stream with a spin kernel), or the host clock where that is
what is measured (launch round_trip, OpenCL mapped transfers, the CUDA reuse study). Every benchmark is checked against its host reference before it is timed.
With --energy: joule (per launch), watt, *_per_joule, each with *_err (absolute half-width).
)";

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// An environment variable's value, or `fallback` where it is not set.
std::string env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

std::string slug(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c))
      out += static_cast<char>(std::tolower(c));
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "device" : out;
}

std::string timestamp() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

// Google Benchmark 1.7 aborts on a count or a time it cannot parse: they are checked first.
bool positive_count(const std::string& v) {
  return !v.empty() && v.size() < 10 && v.find_first_not_of("0123456789") == std::string::npos && std::stol(v) > 0;
}
bool seconds(const std::string& v) {  // Debian's 1.7 takes plain seconds: 0.5
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  return end != v.c_str() && *end == '\0' && std::isfinite(s) && s > 0;
}

// How many registered workloads Google Benchmark's filter will run (its POSIX extended regex;
// a leading '-' negates), for progress.
std::size_t matching(const std::deque<ab::Workload>& workloads, std::string filter) {
  if (filter.empty() || filter == "all" || filter == ".") return workloads.size();
  const bool negate = filter[0] == '-';
  if (negate) filter.erase(0, 1);
  regex_t re;
  if (regcomp(&re, filter.c_str(), REG_EXTENDED | REG_NOSUB) != 0) return workloads.size();
  std::size_t n = 0;
  for (const ab::Workload& w : workloads)
    n += (regexec(&re, (w.name + "/manual_time").c_str(), 0, nullptr, 0) == 0) != negate;
  regfree(&re);
  return n;
}

void add_context(const ab::DeviceInfo& d, const std::string& sweep, const std::string& filter,
                 const std::string& repetitions) {
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  const std::pair<const char*, std::string> facts[] = {
      {"archbench_version", ab::version()},
      {"host", host},
      {"backend", d.backend},
      {"device", d.name},
      {"device_selector", d.selector},
      {"device_vendor", d.vendor},
      {"device_type", d.is_gpu ? "gpu" : d.is_cpu ? "cpu" : "other"},
      {"platform", d.platform},
      {"platform_version", d.platform_version},
      {"driver_version", d.driver_version},
      {"runtime_version", d.runtime_version},
      {"kernel_language", d.c_version},
      {"compute_units", std::to_string(d.compute_units)},
      {"max_clock_mhz", std::to_string(d.max_clock_mhz)},
      {"global_mem_bytes", std::to_string(d.global_mem)},
      {"local_mem_bytes", std::to_string(d.local_mem)},
      {"cache_bytes", std::to_string(d.cache_size)},
      {"fp64", d.fp64 ? "yes" : "no"},
      {"fp16", d.fp16 ? "yes" : "no"},
      {"images", d.images ? "yes" : "no"},
      // Zero copy: the device works in host memory, so "transfers" need not cross a bus.
      {"host_unified_memory", d.unified_memory ? "yes" : "no"},
      {"bf16", d.bf16 ? "yes" : "no"},
      {"arch", d.arch},
      {"pci_bus_id", d.pci_bus_id},
      // What was asked for: a baseline says which benchmarks it holds and how often each ran.
      {"sweep", sweep},
      {"filter", filter},
      {"repetitions", repetitions},
      {"cl_options", env("ARCHBENCH_CL_OPTIONS")},
      {"cuda_options", env("ARCHBENCH_CUDA_OPTIONS")},
      // Every knob that changes a workload is in the context: the compute family's chains
      // per work-item (also each compute entry's "chains" axis), a forced CUDA architecture.
      {"chains_override", env("ARCHBENCH_CHAINS")},
      {"cuda_arch_override", env("ARCHBENCH_CUDA_ARCH")},
  };
  for (const auto& [k, v] : facts) benchmark::AddCustomContext(k, v);
}

// Where the JSON goes when no --benchmark_out is given (see the usage text).
std::filesystem::path default_out(const ab::DeviceInfo& info, bool record, const std::string& suite,
                                  const std::string& sweep, const std::string& tag) {
  const std::filesystem::path dir =
      record ? std::filesystem::path(env("ARCHBENCH_RESULTS_ROOT", "results")) / slug(info.name) /
                   slug(info.driver_version)
             : std::filesystem::path(env("ARCHBENCH_RESULTS_DIR", "results/local"));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // A plain run's name has the time and the process id: two runs started in the same second
  // write two files.
  return record ? dir / ((suite.empty() ? info.backend + "-" + sweep : suite) + tag + ".json")
                : dir / ("archbench-" + slug(info.name) + tag + "-" + timestamp() + "-" + std::to_string(getpid()) + ".json");
}

// Locks `out` for this run (fixtures/launcher/guard.hpp), before anything runs: an output that
// cannot be written, or that another run is writing, is bad input (exit 2), not an hour's
// results lost at the end. False, having said why, where it cannot.
bool hold(std::optional<ab::OutputLock>& lock, const std::string& out) {
  try {
    lock.emplace(out);
    return true;
  } catch (const std::exception& e) {
    std::cerr << "archbench: " << e.what() << "\n";
    return false;
  }
}

// --device=all: this binary again on each chosen device, one at a time, each writing its own
// JSON; then one merged file. `args` are archbench's own, passed on except those it replaces.
int run_every_device(const std::vector<ab::DeviceInfo>& devices, const std::vector<int>& chosen,
                     const std::vector<std::string>& args, const std::string& out, bool record, bool has_reps) {
  char tmpl[] = "/tmp/archbench-node-XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::cerr << "archbench: --device=all: cannot make a temporary folder\n";
    return 1;
  }
  const std::string dir = tmpl;
  std::vector<ab::RunRecord> runs;
  int failed = 0;
  for (int i : chosen) {
    const ab::DeviceInfo& d = devices[i];
    std::vector<std::string> argv = {ab::self_path()};
    for (std::size_t k = 1; k < args.size(); ++k)
      if (!starts_with(args[k], "--device=") && !starts_with(args[k], "--record") &&
          !starts_with(args[k], "--benchmark_out"))
        argv.push_back(args[k]);
    ab::RunRecord r;
    r.json = dir + "/" + std::to_string(i) + ".json";
    argv.insert(argv.end(), {"--device=" + d.selector, "--benchmark_out=" + r.json, "--benchmark_out_format=json"});
    if (record && !has_reps) argv.push_back("--benchmark_repetitions=5");  // as --record does for one device
    // A record holds the whole quick sweep, not the default run's selection (see --sweep).
    if (record && std::none_of(args.begin(), args.end(), [](const std::string& a) { return starts_with(a, "--benchmark_filter="); }))
      argv.push_back("--benchmark_filter=all");
    std::cerr << "archbench: --device=all: " << ab::short_name(d) << "\n";
    r.result = ab::run_child(argv, "[" + d.selector + "] ");
    r.tags = {{"device", d.name}, {"device_selector", d.selector}};
    if (r.result.status != 0) {
      ++failed;
      std::cerr << "archbench: --device=all: " << ab::short_name(d) << " failed (exit " << r.result.status
                << "); going on\n";
    }
    runs.push_back(std::move(r));
  }
  const int merged = ab::merge_runs(runs, out, record);  // 1: some run failed, counted above
  if (merged == 2) {
    std::cerr << "archbench: --device=all: the per-device results are kept in " << dir << "\n";
    return 1;
  }
  std::filesystem::remove_all(dir);
  std::cerr << "archbench: --device=all: " << chosen.size() - failed << " of " << chosen.size()
            << " devices ran; JSON in " << out << "\n";
  return failed || merged == 2 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::string selector = env("ARCHBENCH_DEVICE");
  std::string sweep = env("ARCHBENCH_SWEEP", "quick");
  bool list_devices = false, help = false, listing_tests = false;
  bool energy = env("ARCHBENCH_ENERGY") == "1";
  std::string topdown = env("ARCHBENCH_TOPDOWN", "1");
  bool traffic = env("ARCHBENCH_TRAFFIC") == "1";
  bool has_out = false, has_min_time = false, has_reps = false, has_unit = false, record = false;
  std::string out_path, out_format = "json", stdout_format = "console";
  std::string suite, filter, repetitions;
  std::vector<std::string> gb{args[0]};
  for (std::size_t i = 1; i < args.size(); ++i) {
    // archbench's own options that take a value take it as the next word too (--device cuda:0).
    for (const char* o : {"--device", "--sweep", "--topdown"})
      if (args[i] == o) {
        if (i + 1 == args.size() || starts_with(args[i + 1], "--")) {
          std::cerr << "archbench: " << o << " needs a value (" << o << "=VALUE or " << o << " VALUE; see --help)\n";
          return 2;
        }
        args[i] += "=" + args[i + 1];
        args.erase(args.begin() + std::ptrdiff_t(i) + 1);
      }
    const std::string& a = args[i];
    if (a == "--list-devices") list_devices = true;
    else if (starts_with(a, "--device=")) selector = a.substr(9);
    else if (starts_with(a, "--sweep=")) sweep = a.substr(8);
    else if (a == "--record") record = true;
    else if (a == "--energy") energy = true;
    else if (starts_with(a, "--topdown=")) topdown = a.substr(10);
    else if (a == "--traffic") traffic = true;
    else if (starts_with(a, "--record=")) record = true, suite = a.substr(9);
    else if (a == "--help" || a == "-h") help = true;
    else {
      // The outputs are archbench's own (fixtures/launcher/results.hpp), not the library's.
      if (starts_with(a, "--benchmark_out=")) {
        has_out = true, out_path = a.substr(16);
        continue;
      }
      if (starts_with(a, "--benchmark_out_format=")) {
        out_format = a.substr(23);
        continue;
      }
      if (starts_with(a, "--benchmark_format=")) {
        stdout_format = a.substr(19);
        continue;
      }
      has_unit |= starts_with(a, "--benchmark_time_unit=");
      if (starts_with(a, "--benchmark_min_time=")) {
        has_min_time = true;
        if (!seconds(a.substr(21))) {
          std::cerr << "archbench: --benchmark_min_time must be a number of seconds above 0 (0.5), not '"
                    << a.substr(21) << "'\n";
          return 2;
        }
      }
      if (starts_with(a, "--benchmark_repetitions=")) {
        has_reps = true, repetitions = a.substr(24);
        if (!positive_count(repetitions)) {
          std::cerr << "archbench: --benchmark_repetitions must be a whole number from 1, not '" << repetitions << "'\n";
          return 2;
        }
      }
      if (starts_with(a, "--benchmark_filter=")) filter = a.substr(19);
      listing_tests |= starts_with(a, "--benchmark_list_tests") && a != "--benchmark_list_tests=false";
      // Manual timing makes Google Benchmark append "/manual_time" to every name; let a
      // filter anchored with '$' still match the names archbench documents.
      if (starts_with(a, "--benchmark_filter=") && a.size() > 19 && a.back() == '$' && a[a.size() - 2] != '\\')
        gb.push_back(a.substr(0, a.size() - 1) + "(/manual_time)?$");
      else
        gb.push_back(a);
    }
  }
  if (help) {
    std::cout << kUsage << "\nGoogle Benchmark options:\n";
    gb.push_back("--help");  // Google Benchmark prints its own flags and exits
  }
  for (const auto& [flag, value] : {std::pair{"--benchmark_format", stdout_format}, {"--benchmark_out_format", out_format}})
    if (value != "console" && value != "json" && value != "csv") {
      std::cerr << "archbench: " << flag << " must be console, json or csv, not '" << value << "'\n";
      return 2;
    }
  if (out_format == "console") out_format = "json";  // a file is for programs
  if (record && has_out) {
    std::cerr << "archbench: --record chooses the output file; drop --benchmark_out\n";
    return 2;
  }
  if (topdown.size() != 1 || topdown[0] < '0' || topdown[0] > '3') {
    std::cerr << "archbench: --topdown must be 0, 1, 2 or 3, not '" << topdown << "'\n";
    return 2;
  }
  if (sweep != "quick" && sweep != "full") {
    std::cerr << "archbench: --sweep must be quick or full, not '" << sweep << "'\n";
    return 2;
  }
  if (!has_reps) repetitions = record ? "5" : "3";
  // The backends save programs there as they build them: a folder that is not there would
  // lose them without a word, hours into a run.
  if (const char* dump = std::getenv("ARCHBENCH_DUMP_DIR"); dump && !std::filesystem::is_directory(dump)) {
    std::cerr << "archbench: ARCHBENCH_DUMP_DIR=" << dump << " is not a folder; make it first\n";
    return 2;
  }

  // Devices of every backend.
  std::vector<std::unique_ptr<ab::Backend>> backends = ab::backends();
  ab::Found found = ab::find_devices(backends);
  std::vector<ab::DeviceInfo>& devices = found.devices;
  const std::vector<ab::Backend*>& owner = found.owner;
  const std::string& problems = found.problems;
  if (list_devices) {
    std::cout << (devices.empty() ? "no devices found\n" : ab::describe_devices(devices));
    if (!problems.empty()) std::cout << problems;
    return devices.empty() ? 1 : 0;
  }
  if (devices.empty() && !help) {
    std::cerr << "archbench: no device to run on.\n" << problems;
    return 1;
  }
  if (!devices.empty() && (selector == "all" || starts_with(selector, "all:"))) {
    const std::vector<int> chosen = ab::node_devices(devices, selector.size() > 4 ? selector.substr(4) : "");
    if (chosen.empty()) {
      std::cerr << "archbench: --device=" << selector << ": no such device. The devices are:\n"
                << ab::describe_devices(devices) << problems;
      return 2;
    }
    std::string out;
    for (const std::string& a : args)
      if (starts_with(a, "--benchmark_out=")) out = a.substr(16);
    if (out.empty()) out = default_out(devices[chosen[0]], record, suite, sweep, "-node").string();
    if (!help && !listing_tests) {
      std::optional<ab::OutputLock> lock;
      if (!hold(lock, out)) return 2;
      return run_every_device(devices, chosen, args, out, record, has_reps);
    }
    selector = devices[chosen[0]].selector;  // the names and options, as the first device has them
  }

  std::unique_ptr<ab::Device> device;
  std::deque<ab::Workload> workloads;  // stable addresses for the registered lambdas
  std::unique_ptr<ab::Measure> measure;
  std::vector<std::unique_ptr<ab::Meter>> meters;  // outlive the benchmarks that read them
  if (!devices.empty()) {
    std::string error;
    const int chosen = ab::select_device(devices, selector, error);
    if (chosen < 0) {
      std::cerr << "archbench: --device=" << selector << ": " << error << ". The devices are:\n"
                << ab::describe_devices(devices) << problems;  // and why a backend has none
      return 2;
    }
    const ab::DeviceInfo& info = devices[chosen];
    try {
      device = owner[chosen]->open(info);
    } catch (const std::exception& e) {
      std::cerr << "archbench: cannot open " << ab::short_name(info) << ": " << e.what() << "\n";
      return 1;
    }
    measure = std::make_unique<ab::Measure>(*device);
    const ab::Plan plan{info, sweep == "full" ? ab::Size::full : ab::Size::quick};
    std::vector<ab::Workload> built;
    for (const ab::Family& f : ab::families())
      for (ab::Workload& w : f.build(plan)) built.push_back(std::move(w));
    // The headline first; with no filter and no --record, the quick sweep is the default run's
    // selection only (see --sweep in the usage text).
    ab::order_for_run(built, sweep == "quick" && !record && filter.empty() && env("BENCHMARK_FILTER").empty());
    for (ab::Workload& w : built) {
      const ab::Workload& stored = workloads.emplace_back(std::move(w));
      benchmark::RegisterBenchmark(stored.name.c_str(),
                                   [m = measure.get(), &stored](benchmark::State& s) { m->run(s, stored); })
          ->UseManualTime()
          ->Unit(has_unit ? benchmark::GetDefaultTimeUnit() : benchmark::kMicrosecond);
    }
    add_context(info, sweep, filter, repetitions);
    if (!help && !listing_tests) {
      meters.push_back(ab::make_energy_pass(info, energy));
      meters.push_back(ab::make_topdown_meter(*device, topdown[0] - '0'));
      meters.push_back(ab::make_traffic_meter(*device, traffic));
      meters.push_back(ab::make_clock_meter(*device));
      for (const auto& m : meters) {
        measure->add_meter(m.get());
        for (const auto& [k, v] : m->context()) benchmark::AddCustomContext(k, v);
      }
    }
    if (!has_out && !listing_tests && !help) {
      const auto out = default_out(info, record, suite, sweep, "");
      out_path = out.string();
      std::cerr << "archbench: running on " << ab::short_name(info) << "; JSON goes to " << out.string() << "\n";
    }
  }
  if (!has_min_time) gb.push_back("--benchmark_min_time=0.1");
  if (!has_reps) gb.push_back("--benchmark_repetitions=" + repetitions);

  std::vector<char*> gb_argv;
  for (std::string& s : gb) gb_argv.push_back(s.data());
  int gb_argc = static_cast<int>(gb_argv.size());
  benchmark::Initialize(&gb_argc, gb_argv.data());
  if (benchmark::ReportUnrecognizedArguments(gb_argc, gb_argv.data())) return 2;
  std::map<std::string, const ab::Workload*> by_name;
  for (const ab::Workload& w : workloads) by_name[w.name] = &w;
  ab::ResultsReporter::Options o;
  o.stdout_format = stdout_format;
  o.out = listing_tests || help ? "" : out_path;
  o.out_format = out_format;
  // Colours for a terminal only: a log file or a parent's pipe (--device=all, MPI) gets plain text.
  o.color = isatty(STDOUT_FILENO);
  o.total = matching(workloads, benchmark::GetBenchmarkFilter());
  o.keep_previous = record;
  std::optional<ab::OutputLock> lock;
  if (!o.out.empty() && !hold(lock, o.out)) return 2;
  ab::ResultsReporter reporter(o, by_name, [&meters] {
    ab::ContextLines lines;
    for (const auto& m : meters)
      for (auto& l : m->summary()) lines.push_back(std::move(l));
    return lines;
  });
  const std::size_t ran = benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (ran == 0 && !listing_tests) {
    std::cerr << "archbench: no benchmark matched the filter\n";
    return 2;
  }
  if (!reporter.write_error().empty()) {
    std::cerr << "archbench: the results were not written: " << reporter.write_error() << "\n";
    return 1;
  }
  if (!reporter.kept().empty()) std::cerr << "archbench: the previous " << o.out << " is kept as " << reporter.kept() << "\n";
  if (!o.out.empty() && ran > 0)
    std::cerr << "archbench: " << reporter.ran() << " benchmarks, " << reporter.skipped() << " skipped, "
              << reporter.failed() << " failed; results in " << o.out << "\n";
  return reporter.failed() ? 1 : 0;  // a skip (a feature the device lacks) is not a failure
}
