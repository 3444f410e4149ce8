// TopDown level 1 over a CUDA program's run, one pass and no replay (seed 004 section 5.3, the
// evolution view): a CUPTI injection library (CUDA_INJECTION64_PATH, set up by
// tools/archbench_topdown.py --timeline) that samples the GPU's performance monitors with CUPTI's
// PM Sampling API while the program runs unchanged. Kernels are never replayed nor serialised:
// the hardware counts the whole device and a sample is taken every interval.
//
// At the first kernel (or graph) launch, PM sampling is enabled on the launching context's
// device with the counters TopDown level 1 needs (fixtures/meters/topdown.hpp) that fit in ONE
// pass: the IPC counters (sm__cycles_active, sm__inst_executed: required), then
// smsp__thread_inst_executed (warp efficiency: Divergence's branch part), sm__inst_issued
// (its replay part) and the smsp__warps_issue_stalled_<reason> counters (the Frontend / Backend
// split), each kept only while the Profiler Host API still counts one pass. The set a chip
// allows is cached (ARCHBENCH_PM_CACHE) so that later runs skip the search. A thread of the
// library decodes the hardware buffer every ARCHBENCH_PM_DECODE_MS and writes one line a sample
// as it goes (flushed): its GPU start and end, the raw counter values and the level-1 fractions
// the collected counters allow (the arithmetic of fixtures/meters/topdown.cpp, every part a
// fraction of IPC_MAX). Kernels are recorded as they run (CUPTI's concurrent-kernel activity
// records: name, GPU start and end) and as they are launched (host time), so that the timeline
// can say which kernel ran when. At exit, or when the sampled context is destroyed, sampling
// stops, the rest is decoded and an `end` line is written.
//
// The program is never broken: any CUPTI failure is one line on stderr (and an `error` record)
// and the program runs on unprofiled, with its own exit status; the library installs no signal
// handler and its thread blocks every signal.
//
// Records, one JSON object a line (tools/archbench/timeline.py reads them): process, config,
// base_metrics, clock, name, launch, kernel, sample, error, end.
// Environment (set by the command):
//   ARCHBENCH_PM_OUT           output file (default ./pmsampling-<pid>.jsonl)
//   ARCHBENCH_PM_INTERVAL_US   sampling interval in microseconds (default 100)
//   ARCHBENCH_PM_DECODE_MS     time between two decodes of the hardware buffer (default 20)
//   ARCHBENCH_PM_HW_BUFFER_MB  CUPTI's hardware buffer (default 64)
//   ARCHBENCH_PM_MAX_SAMPLES   slots of the counter-data image (default: 8 decodes' samples,
//                              512 to 16384)
//   ARCHBENCH_PM_APPEND        oldest (default: an overflow stops the sampling, said) or latest
//   ARCHBENCH_PM_KERNELS       1 (default): kernel activity records; 0: launches only
//   ARCHBENCH_PM_METRICS       comma-separated metrics to collect instead of the search
//   ARCHBENCH_PM_CACHE         file of the chip's one-pass set (default
//                              $XDG_CACHE_HOME/archbench/pmsampling-v1-<chip>.metrics; 0: none)
#include <cuda.h>
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <cxxabi.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fixtures/meters/topdown.hpp"
#include "tools/analysis/trace/common.hpp"
#include "tools/analysis/trace/cupti_calls.hpp"

namespace ab = archbench;
namespace tr = archbench::trace;

namespace {

constexpr const char* kTag = "archbench-pmsampling";

// A CUPTI parameter block: zeroed, with the size CUPTI checks its version by.
template <class P>
P params(std::size_t size) {
  P p{};
  p.structSize = size;
  return p;
}

std::string cupti_words(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "CUPTI error " + std::to_string(r);
}

// Throws with CUPTI's own words for `r`, and what to do where the reason is permission.
void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  std::string msg = std::string(what) + ": " + cupti_words(r);
  if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
    msg += " (GPU performance counters are restricted to administrators on this machine: run as root, or load "
           "the driver with NVreg_RestrictProfilingToAdminUsers=0)";
  throw std::runtime_error(msg);
}

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string demangle(const char* m) {
  int status = 0;
  char* d = abi::__cxa_demangle(m, nullptr, nullptr, &status);
  std::string r = status == 0 && d ? d : m;
  std::free(d);
  return r;
}

std::string json_strings(const std::vector<std::string>& v) {
  std::string s = "[";
  for (const std::string& x : v) {
    if (s.size() > 1) s += ',';
    s += tr::JsonLine::quote(x);
  }
  return s + "]";
}

std::string json_object(const std::map<std::string, std::string>& m) {
  std::string s = "{";
  for (const auto& [k, v] : m) {
    if (s.size() > 1) s += ',';
    s += tr::JsonLine::quote(k);
    s += ':';
    s += tr::JsonLine::quote(v);
  }
  return s + "}";
}

// A number from the environment; the default (said on stderr) where it is not one in [lo, hi].
double env_number(const char* name, double def, double lo, double hi) {
  const char* e = std::getenv(name);
  if (!e || !*e) return def;
  char* end = nullptr;
  const double v = std::strtod(e, &end);
  if (end == e || *end || !(v >= lo && v <= hi)) {
    std::fprintf(stderr, "%s: %s=%s is not a number in [%g, %g]; using %g\n", kTag, name, e, lo, hi, def);
    return def;
  }
  return v;
}

struct Settings {
  std::uint64_t interval_ns = 100000;
  unsigned decode_ms = 20;
  std::size_t hw_buffer = std::size_t(64) << 20;
  std::uint32_t max_samples = 512;
  bool keep_latest = false;
  bool kernels = true;
  std::string metrics, cache;
};

// ---- The counters: which part of the level-1 formulas each collected metric feeds ----------

enum class Role { cycles, executed, issued, thread, stall, other };
const char* role_name(Role r) {
  switch (r) {
    case Role::cycles: return "cycles";
    case Role::executed: return "executed";
    case Role::issued: return "issued";
    case Role::thread: return "thread";
    case Role::stall: return "stall";
    default: return "other";
  }
}

// The name without rollup and without a `_realtime` suffix (the PM-sampling variant of a counter).
std::string base_of(const std::string& metric) {
  std::string b = metric.substr(0, metric.find('.'));
  const std::string rt = "_realtime";
  if (b.size() > rt.size() && b.compare(b.size() - rt.size(), rt.size(), rt) == 0) b.resize(b.size() - rt.size());
  return b;
}

Role role_of(const std::string& metric, std::string* reason) {
  const std::string b = base_of(metric);
  if (b == "sm__cycles_active") return Role::cycles;
  if (b == "sm__inst_executed" || b == "smsp__inst_executed") return Role::executed;
  if (b == "sm__inst_issued" || b == "smsp__inst_issued") return Role::issued;
  if (b == "smsp__thread_inst_executed" || b == "sm__thread_inst_executed") return Role::thread;
  if (b.rfind(ab::kStallPrefix, 0) == 0 && b.find("not_issued") == std::string::npos) {
    *reason = b.substr(std::string(ab::kStallPrefix).size());
    return Role::stall;
  }
  return Role::other;
}

const char* class_name(ab::StallClass c) {
  switch (c) {
    case ab::StallClass::fetch: return "fetch";
    case ab::StallClass::decode: return "decode";
    case ab::StallClass::memory: return "memory";
    case ab::StallClass::core: return "core";
    case ab::StallClass::not_a_stall: return "not_a_stall";
    default: return "unclassified";
  }
}

// The stall reasons by how much of a typical kernel's stalls they hold: where not all fit in one
// pass, the first ones are kept.
const std::vector<std::string>& stall_priority() {
  static const std::vector<std::string> k = {
      "long_scoreboard", "barrier", "no_instruction", "wait", "math_pipe_throttle", "short_scoreboard",
      "mio_throttle", "lg_throttle", "branch_resolving", "membar", "dispatch_stall", "drain", "imc_miss",
      "tex_throttle", "sleeping", "misc", "gmma"};
  return k;
}

// What the chip's PM-sampling counters offer for level 1, in the order they are tried: the two
// required IPC counters first, then the optional ones, then the stall reasons.
struct Wanted {
  std::vector<std::string> required, optional;
};
Wanted wanted_metrics(const std::vector<std::string>& base) {
  const std::set<std::string> have(base.begin(), base.end());
  auto first = [&](std::initializer_list<const char*> names) -> std::string {
    for (const char* n : names)
      if (have.count(n)) return std::string(n) + ".sum";
    return "";
  };
  Wanted w;
  const std::string cycles = first({"sm__cycles_active", "sm__cycles_active_realtime"});
  const std::string executed = first({"sm__inst_executed", "sm__inst_executed_realtime", "smsp__inst_executed",
                                      "smsp__inst_executed_realtime"});
  if (cycles.empty() || executed.empty())
    throw std::runtime_error(std::string("this GPU's PM sampling has no ") +
                             (cycles.empty() ? "sm__cycles_active" : "sm__inst_executed") + " counter: no IPC, no TopDown");
  w.required = {cycles, executed};
  for (const std::string& m : {first({"smsp__thread_inst_executed", "smsp__thread_inst_executed_realtime"}),
                               first({"sm__inst_issued", "sm__inst_issued_realtime", "smsp__inst_issued"})})
    if (!m.empty()) w.optional.push_back(m);
  std::map<std::string, std::string> stalls;  // reason -> metric (the plain counter over its _realtime twin)
  for (const std::string& b : base) {
    std::string reason;
    if (role_of(b, &reason) != Role::stall || ab::stall_class(reason) == ab::StallClass::not_a_stall) continue;
    if (!stalls.count(reason) || b.find("_realtime") == std::string::npos) stalls[reason] = b + ".sum";
  }
  for (const std::string& r : stall_priority())
    if (stalls.count(r)) w.optional.push_back(stalls[r]), stalls.erase(r);
  for (const auto& [r, m] : stalls) w.optional.push_back(m);  // reasons a newer chip adds
  return w;
}

// ---- CUPTI's Profiler Host object for PM sampling: metric lists, config images, pass counts ---

class Host {
 public:
  Host(const std::string& chip, std::vector<std::uint8_t>& availability) {
    auto p = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    p.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    p.pChipName = chip.c_str();
    p.pCounterAvailabilityImage = availability.data();
    check(cuptiProfilerHostInitialize(&p), "cuptiProfilerHostInitialize (PM sampling)");
    obj_ = p.pHostObject;
  }
  ~Host() {
    auto p = params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    p.pHostObject = obj_;
    cuptiProfilerHostDeinitialize(&p);
  }
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  std::vector<std::string> base_metrics() const {
    auto p = params<CUpti_Profiler_Host_GetBaseMetrics_Params>(CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE);
    p.pHostObject = obj_;
    p.metricType = CUPTI_METRIC_TYPE_COUNTER;
    check(cuptiProfilerHostGetBaseMetrics(&p), "cuptiProfilerHostGetBaseMetrics");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < p.numMetrics; ++i)
      if (p.ppMetricNames[i]) out.emplace_back(p.ppMetricNames[i]);
    return out;
  }

  // Schedules `metrics` (one call: a host object takes one set) and returns the passes they need.
  std::size_t configure(const std::vector<std::string>& metrics) {
    metrics_ = metrics;
    names_.clear();
    for (const std::string& m : metrics_) names_.push_back(m.c_str());
    auto add = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    add.pHostObject = obj_;
    add.ppMetricNames = names_.data();
    add.numMetrics = names_.size();
    check(cuptiProfilerHostConfigAddMetrics(&add), "cuptiProfilerHostConfigAddMetrics");
    auto size = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    size.pHostObject = obj_;
    check(cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize");
    image_.assign(size.configImageSize, 0);
    auto img = params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
    img.pHostObject = obj_;
    img.configImageSize = image_.size();
    img.pConfigImage = image_.data();
    check(cuptiProfilerHostGetConfigImage(&img), "cuptiProfilerHostGetConfigImage");
    auto passes = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
    passes.configImageSize = image_.size();
    passes.pConfigImage = image_.data();
    check(cuptiProfilerHostGetNumOfPasses(&passes), "cuptiProfilerHostGetNumOfPasses");
    return passes.numOfPasses;
  }

  CUpti_Profiler_Host_Object* get() const { return obj_; }
  const std::vector<std::uint8_t>& image() const { return image_; }
  const std::vector<std::string>& metrics() const { return metrics_; }
  std::vector<const char*>& names() { return names_; }

 private:
  CUpti_Profiler_Host_Object* obj_ = nullptr;
  std::vector<std::uint8_t> image_;
  std::vector<std::string> metrics_;
  std::vector<const char*> names_;
};

// ---- The library's state -------------------------------------------------------------------

struct Stats {
  std::uint64_t samples = 0, idle = 0, empty = 0, lost = 0, decodes = 0, decode_errors = 0, reinits = 0, full = 0;
  bool overflow = false;
  std::string last_error;
};

struct State {
  Settings cfg;
  pid_t pid = 0;
  std::string out_path;
  FILE* out = nullptr;
  std::mutex out_mu;  // the file; never held while calling CUPTI
  CUpti_SubscriberHandle sub = nullptr;

  std::mutex setup_mu;  // the first launch's setup
  std::atomic<bool> tried{false}, sampling{false};
  CUcontext ctx = nullptr;

  std::timed_mutex pm_mu;  // the PM sampling object, its image and the host object
  std::unique_ptr<Host> host;
  CUpti_PmSampling_Object* pm = nullptr;
  std::vector<std::uint8_t> image;
  std::vector<Role> roles;
  std::vector<std::string> reasons;  // per metric: its stall reason ("" for others)
  bool has_thread = false, has_issued = false, has_split = false;
  std::size_t capacity = 0;
  std::uint64_t last_end = 0;  // the last sample written ends here (GPU time)
  Stats stats;
  bool stopped = false;  // cuptiPmSamplingStop called: nothing more to decode

  std::mutex ctl_mu;  // the decode thread's control
  std::condition_variable ctl_cv;
  bool stop_thread = false, thread_running = false;

  std::mutex names_mu;  // kernel names seen at launch -> id
  std::unordered_map<std::string, std::uint64_t> names;
  std::atomic<std::uint64_t> launches{0}, kernel_records{0};
  std::atomic<bool> finished{false};
  std::string activity;  // "CUPTI concurrent-kernel activity records", or why not
  bool activity_on = false;
};

State& state() {
  static State* s = new State;  // never destroyed: callbacks and the decode thread may outlive exit
  return *s;
}

void emit(State& s, tr::JsonLine&& line, bool flush = false) {
  std::lock_guard<std::mutex> lock(s.out_mu);
  if (!s.out || getpid() != s.pid) return;
  line.write(s.out);
  if (flush) std::fflush(s.out);
}

void fail(State& s, const std::string& why) {
  std::fprintf(stderr, "%s: %s; the program runs on unprofiled\n", kTag, why.c_str());
  emit(s, std::move(tr::JsonLine("error").str("reason", why).unum("host_ns", tr::now_ns())), true);
}

// ---- Choosing the one-pass set -------------------------------------------------------------

std::string cache_path(const Settings& cfg, const std::string& chip) {
  if (cfg.cache == "0" || cfg.cache == "off") return "";
  if (!cfg.cache.empty()) return cfg.cache;
  std::string dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = x;
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache";
  else return "";
  return dir + "/archbench/pmsampling-v1-" + chip + ".metrics";  // v1: this library's wanted list
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text + sep) {
    if (c == sep || c == '\n') {
      while (!cur.empty() && std::isspace(static_cast<unsigned char>(cur.back()))) cur.pop_back();
      const std::size_t b = cur.find_first_not_of(" \t");
      if (b != std::string::npos) out.push_back(cur.substr(b));
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

struct Choice {
  std::unique_ptr<Host> host;  // configured with the chosen metrics
  std::string how;             // environment, cache, all fit, search
  std::map<std::string, std::string> rejected;  // metric -> why it is not collected
  std::size_t trials = 0;
};

// A fresh host object configured with `metrics`: it, when they take one pass; else null and why.
std::unique_ptr<Host> trial(const std::string& chip, std::vector<std::uint8_t>& availability,
                            const std::vector<std::string>& metrics, std::string* why, std::size_t* trials) {
  ++*trials;
  try {
    auto h = std::make_unique<Host>(chip, availability);
    const std::size_t passes = h->configure(metrics);
    if (passes == 1) return h;
    *why = "needs " + std::to_string(passes) + " passes with the others";
  } catch (const std::exception& e) {
    *why = e.what();
  }
  return nullptr;
}

Choice choose(const Settings& cfg, const std::string& chip, std::vector<std::uint8_t>& availability,
              const std::vector<std::string>& base) {
  Choice c;
  std::string why;
  if (!cfg.metrics.empty()) {  // the user's set, as given
    c.how = "ARCHBENCH_PM_METRICS";
    c.host = trial(chip, availability, split(cfg.metrics, ','), &why, &c.trials);
    if (!c.host) throw std::runtime_error("ARCHBENCH_PM_METRICS: " + why);
    return c;
  }
  const Wanted w = wanted_metrics(base);
  std::vector<std::string> all = w.required;
  all.insert(all.end(), w.optional.begin(), w.optional.end());
  const std::string cache = cache_path(cfg, chip);
  if (!cache.empty()) {
    std::ifstream f(cache);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::vector<std::string> cached = split(text, '\n');
    if (!cached.empty() && (c.host = trial(chip, availability, cached, &why, &c.trials))) {
      c.how = "cache " + cache;
      for (const std::string& m : all)
        if (std::find(cached.begin(), cached.end(), m) == cached.end()) c.rejected[m] = "not in the cached one-pass set";
      return c;
    }
  }
  if ((c.host = trial(chip, availability, all, &why, &c.trials))) {
    c.how = "all fit";
  } else {
    // Greedy: the required pair, then each optional counter while the set still takes one pass.
    std::vector<std::string> chosen = w.required;
    c.host = trial(chip, availability, chosen, &why, &c.trials);
    if (!c.host) throw std::runtime_error("the IPC counters alone cannot be sampled in one pass: " + why);
    for (const std::string& m : w.optional) {
      chosen.push_back(m);
      if (auto h = trial(chip, availability, chosen, &why, &c.trials)) {
        c.host = std::move(h);
      } else {
        chosen.pop_back();
        c.rejected[m] = why;
      }
    }
    c.how = "search";
  }
  if (!cache.empty()) {  // remembered for the next run on this chip (best effort)
    const std::string dir = cache.substr(0, cache.rfind('/'));
    mkdir(dir.substr(0, dir.rfind('/')).c_str(), 0755);
    mkdir(dir.c_str(), 0755);
    const std::string tmp = cache + "." + std::to_string(getpid());
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      for (const std::string& m : c.host->metrics()) std::fprintf(f, "%s\n", m.c_str());
      if (std::fclose(f) == 0) std::rename(tmp.c_str(), cache.c_str());
      else std::remove(tmp.c_str());
    }
  }
  return c;
}

// ---- Samples -------------------------------------------------------------------------------

// The level-1 fractions of one sample, as JSON (null where the SMs executed nothing).
std::string level1(const State& s, const std::vector<double>& v, double dt_ns) {
  ab::Metrics m;
  double executed = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    switch (s.roles[i]) {
      case Role::cycles: m["sm__cycles_active.sum"] = v[i]; break;
      case Role::executed: m["sm__inst_executed.sum"] = executed = v[i]; break;
      case Role::issued: m["sm__inst_issued.sum"] = v[i]; break;
      case Role::thread: m["smsp__thread_inst_executed.sum"] = v[i]; break;
      case Role::stall:
        m[std::string(ab::kStallPrefix) + s.reasons[i] + ".sum"] = v[i];
        break;
      default: break;
    }
  }
  // What was not collected counts as nothing lost to it: no replay, every lane active.
  if (!s.has_issued) m["sm__inst_issued.sum"] = executed;
  if (!s.has_thread) m["smsp__thread_inst_executed.sum"] = executed * 32;
  m["smsp__warps_active.sum"] = 0;
  m["gpu__time_duration.sum"] = dt_ns;
  try {
    const ab::TopDown t = ab::topdown(m);
    std::string j = "{\"retire\":" + number(t.retire);
    if (s.has_thread || s.has_issued) j += ",\"divergence\":" + number(t.divergence);
    if (s.has_split)
      j += ",\"frontend\":" + number(t.frontend) + ",\"backend\":" + number(t.backend);
    else
      j += ",\"stall\":" + number(t.frontend + t.backend);
    return j + ",\"ipc\":" + number(t.ipc) + "}";
  } catch (const ab::EmptyRange&) {
    return "null";
  }
}

void reinit_image(State& s) {
  auto init = params<CUpti_PmSampling_CounterDataImage_Initialize_Params>(
      CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  init.pPmSamplingObject = s.pm;
  init.counterDataSize = s.image.size();
  init.pCounterData = s.image.data();
  check(cuptiPmSamplingCounterDataImageInitialize(&init), "cuptiPmSamplingCounterDataImageInitialize");
  ++s.stats.reinits;
}

// One decode of the hardware buffer into the image and a line for each sample it completed;
// then the image is initialised again for the next (caller holds pm_mu). A sample still being
// written stays in the hardware buffer for the next decode. The image holds several decodes'
// samples, so that it never fills: a decode that fills it loses samples, whatever comes next.
// Returns true when the image filled before the buffer was drained (decode again).
bool decode(State& s) {
  if (!s.pm || (s.stats.overflow && !s.cfg.keep_latest)) return false;
  auto dec = params<CUpti_PmSampling_DecodeData_Params>(CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE);
  dec.pPmSamplingObject = s.pm;
  dec.pCounterDataImage = s.image.data();
  dec.counterDataImageSize = s.image.size();
  const CUptiResult r = cuptiPmSamplingDecodeData(&dec);
  ++s.stats.decodes;
  if ((r == CUPTI_ERROR_OUT_OF_MEMORY || dec.overflow) && !s.stats.overflow) {
    // Keeping the oldest records, an overflow is permanent: later decodes return nothing.
    s.stats.overflow = true;
    const std::string why = "the PM sampling hardware buffer overflowed: samples after " +
                            std::to_string(s.stats.samples) + " are lost (raise ARCHBENCH_PM_HW_BUFFER_MB or "
                            "ARCHBENCH_PM_INTERVAL_US, or lower ARCHBENCH_PM_DECODE_MS)";
    std::fprintf(stderr, "%s: %s\n", kTag, why.c_str());
    emit(s, std::move(tr::JsonLine("error").str("reason", why).unum("host_ns", tr::now_ns())), true);
    if (r != CUPTI_SUCCESS) return false;
  } else if (r != CUPTI_SUCCESS) {
    ++s.stats.decode_errors;
    s.stats.last_error = "cuptiPmSamplingDecodeData: " + cupti_words(r);
    return false;
  }
  auto info = params<CUpti_PmSampling_GetCounterDataInfo_Params>(CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = s.image.data();
  info.counterDataImageSize = s.image.size();
  check(cuptiPmSamplingGetCounterDataInfo(&info), "cuptiPmSamplingGetCounterDataInfo");
  const std::size_t completed = std::min(info.numCompletedSamples, s.capacity);
  std::vector<double> values(s.roles.size());
  std::vector<tr::JsonLine> lines;
  for (std::size_t i = 0; i < completed; ++i) {
    auto si = params<CUpti_PmSampling_CounterData_GetSampleInfo_Params>(
        CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE);
    si.pPmSamplingObject = s.pm;
    si.pCounterDataImage = s.image.data();
    si.counterDataImageSize = s.image.size();
    si.sampleIndex = i;
    if (cuptiPmSamplingCounterDataGetSampleInfo(&si) != CUPTI_SUCCESS || si.startTimestamp == 0) {
      ++s.stats.lost;  // a slot without time: its sample is gone
      continue;
    }
    if (si.endTimestamp <= si.startTimestamp || si.endTimestamp <= s.last_end) {
      ++s.stats.empty;  // covers no time (as after a stop), or was written already
      continue;
    }
    s.last_end = si.endTimestamp;
    auto ev = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    ev.pHostObject = s.host->get();
    ev.pCounterDataImage = s.image.data();
    ev.counterDataImageSize = s.image.size();
    ev.rangeIndex = i;
    ev.ppMetricNames = s.host->names().data();
    ev.numMetrics = s.host->names().size();
    ev.pMetricValues = values.data();
    if (cuptiProfilerHostEvaluateToGpuValues(&ev) != CUPTI_SUCCESS) {
      ++s.stats.lost;
      continue;
    }
    std::string v = "[";
    for (double x : values) {
      if (v.size() > 1) v += ',';
      v += number(x);
    }
    const std::string l1 = level1(s, values, double(si.endTimestamp - si.startTimestamp));
    if (l1 == "null") ++s.stats.idle;
    tr::JsonLine line("sample");
    line.unum("i", s.stats.samples++).unum("start", si.startTimestamp).unum("end", si.endTimestamp)
        .raw("values", v + "]").raw("level1", l1);
    lines.push_back(std::move(line));
  }
  const bool full = dec.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
  if (full) ++s.stats.full;
  if (full || info.numPopulatedSamples > 0) reinit_image(s);
  {
    std::lock_guard<std::mutex> lock(s.out_mu);
    if (s.out && getpid() == s.pid) {
      for (tr::JsonLine& l : lines) l.write(s.out);
      std::fflush(s.out);
    }
  }
  return full;
}

// ---- Kernels: activity records (GPU time) and launches (host time) --------------------------

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = std::size_t(4) << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI on_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) try {
  State& s = state();
  std::vector<tr::JsonLine> lines;
  CUpti_Activity* r = nullptr;
  while (buffer && cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
    tr::JsonLine line("kernel");
    line.str("name", k->name ? demangle(k->name) : "?").unum("start", k->start).unum("end", k->end)
        .unum("correlation", k->correlationId).unum("stream", k->streamId).unum("device", k->deviceId)
        .nums("grid", {k->gridX, k->gridY, k->gridZ}).nums("block", {k->blockX, k->blockY, k->blockZ});
    lines.push_back(std::move(line));
  }
  s.kernel_records += lines.size();
  if (!lines.empty()) {
    std::lock_guard<std::mutex> lock(s.out_mu);
    if (s.out && getpid() == s.pid) {
      for (tr::JsonLine& l : lines) l.write(s.out);
      std::fflush(s.out);
    }
  }
  std::free(buffer);
} catch (...) {
  std::free(buffer);
}

std::uint64_t name_id(State& s, const char* mangled) {
  std::lock_guard<std::mutex> lock(s.names_mu);
  auto [it, added] = s.names.try_emplace(mangled, s.names.size());
  if (added)
    emit(s, std::move(tr::JsonLine("name").unum("id", it->second).str("name", demangle(mangled)).str("mangled", mangled)));
  return it->second;
}

// ---- Start, the decode thread, stop ---------------------------------------------------------

void clock_line(State& s, const char* when) {
  timespec rt;
  const std::uint64_t a = tr::now_ns();
  std::uint64_t cupti = 0;
  cuptiGetTimestamp(&cupti);
  const std::uint64_t b = tr::now_ns();
  clock_gettime(CLOCK_REALTIME, &rt);
  emit(s, std::move(tr::JsonLine("clock").str("when", when).unum("mono_ns", a + (b - a) / 2).unum("cupti_ns", cupti)
                        .unum("realtime_ns", std::uint64_t(rt.tv_sec) * 1000000000ull + std::uint64_t(rt.tv_nsec))),
       true);
}

void decode_loop() {
  State& s = state();
  const auto period = std::chrono::milliseconds(s.cfg.decode_ms);
  auto last_flush = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lk(s.ctl_mu);
  while (!s.stop_thread) {
    s.ctl_cv.wait_for(lk, period, [&] { return s.stop_thread; });
    if (s.stop_thread) break;
    lk.unlock();
    {
      std::unique_lock<std::timed_mutex> pm(s.pm_mu, std::try_to_lock);
      if (pm.owns_lock() && !s.stopped) try {
          for (int i = 0; i < 4 && decode(s); ++i) {
          }
        } catch (const std::exception& e) {
          ++s.stats.decode_errors;
          s.stats.last_error = e.what();
        } catch (...) {
          ++s.stats.decode_errors;
        }
    }
    // Kernel records as the run goes (CUPTI calls back on this thread: no lock of ours is held).
    if (s.activity_on && std::chrono::steady_clock::now() - last_flush > std::chrono::seconds(1)) {
      cuptiActivityFlushAll(0);
      last_flush = std::chrono::steady_clock::now();
    }
    lk.lock();
  }
  s.thread_running = false;
  s.ctl_cv.notify_all();
}

// Starts the decode thread with every signal blocked (it never takes one of the program's).
void start_thread(State& s) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  {
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    s.thread_running = true;
  }
  try {
    std::thread(decode_loop).detach();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    s.thread_running = false;
    std::fprintf(stderr, "%s: no decode thread (%s): samples are decoded at the end only\n", kTag, e.what());
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// Enables PM sampling on the device of `ctx` and starts it (throws saying why it cannot).
void start_sampling(State& s, CUcontext ctx) {
  const std::uint64_t t0 = tr::now_ns();
  std::uint32_t ordinal = 0;
  check(cuptiGetDeviceId(ctx, &ordinal), "cuptiGetDeviceId");
  CUdevice dev = 0;
  char name[256] = "", bus[32] = "";
  if (cuDeviceGet(&dev, int(ordinal)) == CUDA_SUCCESS) {
    cuDeviceGetName(name, sizeof name, dev);
    cuDeviceGetPCIBusId(bus, sizeof bus, dev);
  }
  auto init = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  if (const CUptiResult r = cuptiProfilerInitialize(&init); r != CUPTI_ERROR_INVALID_OPERATION)  // done already
    check(r, "cuptiProfilerInitialize");
  auto sup = params<CUpti_Profiler_DeviceSupported_Params>(CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE);
  sup.cuDevice = dev;
  sup.api = CUPTI_PROFILER_PM_SAMPLING;
  if (cuptiProfilerDeviceSupported(&sup) == CUPTI_SUCCESS && sup.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
    std::string why = "PM sampling is not supported on this device";
    if (sup.architecture != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " (architecture)";
    if (sup.vGpu == CUPTI_PROFILER_CONFIGURATION_DISABLED) why += " (vGPU with profiling disabled)";
    else if (sup.vGpu != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " (vGPU)";
    if (sup.confidentialCompute != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " (confidential computing)";
    if (sup.cmp != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " (CMP)";
    if (sup.wsl != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why += " (WSL)";
    throw std::runtime_error(why);
  }
  auto chip = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  chip.deviceIndex = ordinal;
  check(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName");
  const std::string chip_name = chip.pChipName ? chip.pChipName : "";
  auto avail = params<CUpti_PmSampling_GetCounterAvailability_Params>(
      CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE);
  avail.deviceIndex = ordinal;
  check(cuptiPmSamplingGetCounterAvailability(&avail), "cuptiPmSamplingGetCounterAvailability");
  std::vector<std::uint8_t> availability(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = availability.data();
  check(cuptiPmSamplingGetCounterAvailability(&avail), "cuptiPmSamplingGetCounterAvailability");

  std::vector<std::string> base;
  {
    Host lister(chip_name, availability);
    base = lister.base_metrics();
  }
  emit(s, std::move(tr::JsonLine("base_metrics").str("chip", chip_name).raw("metrics", json_strings(base))));
  Choice choice = choose(s.cfg, chip_name, availability, base);
  const std::vector<std::string> metrics = choice.host->metrics();

  // What each collected counter feeds, and which level-1 quantities that allows.
  std::map<std::string, std::string> roles, classes;
  s.roles.clear();
  s.reasons.clear();
  std::size_t classified = 0;
  bool cycles = false, executed = false;
  for (const std::string& m : metrics) {
    std::string reason;
    const Role r = role_of(m, &reason);
    s.roles.push_back(r);
    s.reasons.push_back(reason);
    roles[m] = r == Role::stall ? "stall_" + reason : role_name(r);
    cycles |= r == Role::cycles;
    executed |= r == Role::executed;
    s.has_thread |= r == Role::thread;
    s.has_issued |= r == Role::issued;
    if (r == Role::stall) {
      const ab::StallClass c = ab::stall_class(reason);
      classes[reason] = class_name(c);
      classified += c != ab::StallClass::unclassified && c != ab::StallClass::not_a_stall;
    }
  }
  if (!cycles || !executed)
    throw std::runtime_error("the sampled set has no " + std::string(cycles ? "sm__inst_executed" : "sm__cycles_active") +
                             ": no IPC, no TopDown");
  s.has_split = classified > 0;
  std::vector<std::string> quantities = {"retire"}, notes;
  if (s.has_thread || s.has_issued) quantities.push_back("divergence");
  if (s.has_split) quantities.insert(quantities.end(), {"frontend", "backend"});
  else quantities.push_back("stall");
  if (!s.has_thread && !s.has_issued)
    notes.push_back("no divergence: neither smsp__thread_inst_executed nor sm__inst_issued fits in the pass, so "
                    "retire includes what divergence would have taken");
  else if (!s.has_thread)
    notes.push_back("divergence is its replay part only (no smsp__thread_inst_executed in the pass)");
  else if (!s.has_issued)
    notes.push_back("divergence is its branch part only (no sm__inst_issued in the pass)");
  std::size_t reasons_on_chip = 0;
  for (const std::string& b : base) {
    std::string reason;
    if (b.find("_realtime") == std::string::npos && role_of(b, &reason) == Role::stall &&
        ab::stall_class(reason) != ab::StallClass::not_a_stall)
      ++reasons_on_chip;
  }
  if (s.has_split)
    notes.push_back("frontend and backend share the stalls as " + std::to_string(classified) + " of the chip's " +
                    std::to_string(reasons_on_chip) + " stall reasons do (the others do not fit in one pass)");
  else
    notes.push_back("no stall reason fits in the pass: frontend and backend are shown together as stall");

  // The sampler: enabled on the device, its counter-data image, its configuration, started.
  auto en = params<CUpti_PmSampling_Enable_Params>(CUpti_PmSampling_Enable_Params_STRUCT_SIZE);
  en.deviceIndex = ordinal;
  check(cuptiPmSamplingEnable(&en), "cuptiPmSamplingEnable");
  s.pm = en.pPmSamplingObject;
  s.host = std::move(choice.host);
  std::string trigger = "gpu time";
  try {
    auto size = params<CUpti_PmSampling_GetCounterDataSize_Params>(CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE);
    size.pPmSamplingObject = s.pm;
    size.pMetricNames = s.host->names().data();
    size.numMetrics = s.host->names().size();
    size.maxSamples = s.cfg.max_samples;
    check(cuptiPmSamplingGetCounterDataSize(&size), "cuptiPmSamplingGetCounterDataSize");
    s.image.assign(size.counterDataSize, 0);
    s.capacity = s.cfg.max_samples;
    reinit_image(s);
    s.stats.reinits = 0;
    auto set = params<CUpti_PmSampling_SetConfig_Params>(CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE);
    set.pPmSamplingObject = s.pm;
    set.configSize = s.host->image().size();
    set.pConfig = s.host->image().data();
    set.hardwareBufferSize = s.cfg.hw_buffer;
    set.samplingInterval = s.cfg.interval_ns;
    set.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    set.hwBufferAppendMode = s.cfg.keep_latest ? CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST
                                               : CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
    if (const CUptiResult r = cuptiPmSamplingSetConfig(&set); r != CUPTI_SUCCESS) {
      // Chips without the time trigger (Turing, GA100): the interval in SYS clock cycles, taken at 1 GHz.
      set.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL;
      const std::string first = "cuptiPmSamplingSetConfig (GPU time trigger: " + cupti_words(r) + "; SYS clock trigger)";
      check(cuptiPmSamplingSetConfig(&set), first.c_str());
      trigger = "sysclk cycles (interval taken at 1 GHz)";
    }
    auto start = params<CUpti_PmSampling_Start_Params>(CUpti_PmSampling_Start_Params_STRUCT_SIZE);
    start.pPmSamplingObject = s.pm;
    check(cuptiPmSamplingStart(&start), "cuptiPmSamplingStart");
  } catch (...) {  // leave the device as it was
    auto dis = params<CUpti_PmSampling_Disable_Params>(CUpti_PmSampling_Disable_Params_STRUCT_SIZE);
    dis.pPmSamplingObject = s.pm;
    cuptiPmSamplingDisable(&dis);
    s.pm = nullptr;
    throw;
  }
  const std::uint64_t started = tr::now_ns();
  s.ctx = ctx;
  clock_line(s, "start");
  emit(s, std::move(tr::JsonLine("config")
                        .str("chip", chip_name).unum("device", ordinal).str("device_name", name).str("pci_bus_id", bus)
                        .unum("interval_ns", s.cfg.interval_ns).str("trigger", trigger)
                        .unum("hw_buffer_bytes", s.cfg.hw_buffer).unum("max_samples", s.capacity)
                        .unum("counter_data_bytes", s.image.size()).unum("decode_ms", s.cfg.decode_ms)
                        .str("append", s.cfg.keep_latest ? "latest" : "oldest").unum("passes", 1)
                        .raw("metrics", json_strings(metrics)).raw("roles", json_object(roles))
                        .raw("stall_class", json_object(classes)).raw("level1", json_strings(quantities))
                        .raw("notes", json_strings(notes)).raw("not_collected", json_object(choice.rejected))
                        .str("selection", choice.how).unum("selection_trials", choice.trials)
                        .unum("base_metrics", base.size()).str("activity", s.activity)
                        .unum("setup_ns", started - t0).unum("start_ns", started)),
       true);
  s.sampling = true;
  std::fprintf(stderr, "%s: sampling %s every %g us (%zu counters, one pass: %s)\n", kTag, name,
               double(s.cfg.interval_ns) / 1e3, metrics.size(), [&] {
                 std::string q;
                 for (const std::string& x : quantities) q += (q.empty() ? "" : ", ") + x;
                 return q;
               }().c_str());
}

// Stops sampling, decodes the rest and writes the end record, once (at exit or when the sampled
// context is destroyed). Never waits for long: a decode thread or a CUPTI call that does not
// return in time is left, and said.
void finish(const char* why, int wait_s) {
  State& s = state();
  if (getpid() != s.pid || s.finished.exchange(true)) return;  // a forked child, or done already
  std::string trouble;
  {
    std::unique_lock<std::mutex> lk(s.ctl_mu);
    s.stop_thread = true;
    s.ctl_cv.notify_all();
    if (!s.ctl_cv.wait_for(lk, std::chrono::seconds(wait_s), [&] { return !s.thread_running; }))
      trouble = "the decode thread did not stop within " + std::to_string(wait_s) + " s";
  }
  std::unique_lock<std::timed_mutex> pm(s.pm_mu, std::defer_lock);
  if (!pm.try_lock_for(std::chrono::seconds(wait_s))) {
    trouble = "CUPTI did not return within " + std::to_string(wait_s) + " s: the last samples are not decoded";
  } else if (s.sampling && !s.stopped) {
    try {
      auto stop = params<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
      stop.pPmSamplingObject = s.pm;
      check(cuptiPmSamplingStop(&stop), "cuptiPmSamplingStop");
      for (int i = 0; i < 16 && decode(s); ++i) {
      }
    } catch (const std::exception& e) {
      trouble = e.what();
    }
    s.stopped = true;
    clock_line(s, "end");
  }
  const Stats st = s.stats;
  if (!st.last_error.empty() && trouble.empty()) trouble = st.last_error;
  emit(s, std::move(tr::JsonLine("end").str("why", why).unum("samples", st.samples).unum("idle", st.idle)
                        .unum("lost", st.lost).unum("empty", st.empty).unum("decodes", st.decodes)
                        .unum("decode_errors", st.decode_errors).unum("image_reinits", st.reinits)
                        .unum("image_full", st.full).boolean("overflow", st.overflow)
                        .unum("launches", s.launches.load()).unum("kernel_records", s.kernel_records.load())
                        .str("trouble", trouble).unum("end_ns", tr::now_ns())),
       true);
  if (s.sampling)
    std::fprintf(stderr, "%s: %llu samples%s, %llu kernel records, %llu launches; %s\n", kTag,
                 static_cast<unsigned long long>(st.samples), st.lost ? " (some lost)" : "",
                 static_cast<unsigned long long>(s.kernel_records.load()),
                 static_cast<unsigned long long>(s.launches.load()), s.out_path.c_str());
  if (!trouble.empty()) std::fprintf(stderr, "%s: %s\n", kTag, trouble.c_str());
}

void at_exit() {
  State& s = state();
  if (getpid() != s.pid) return;
  try {
    if (s.activity_on) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // before finish: no lock of ours held
    finish("exit", 10);
  } catch (...) {
  }
}

// The first launch starts sampling on its context's device; every launch is recorded.
void on_launch(State& s, const CUpti_CallbackData* cb, CUpti_CallbackId id) {
  if (cb->callbackSite != CUPTI_API_ENTER || s.finished) return;
  if (!s.tried) {
    std::lock_guard<std::mutex> lock(s.setup_mu);
    if (!s.tried) {
      try {
        start_sampling(s, cb->context);
        start_thread(s);
      } catch (const std::exception& e) {
        fail(s, e.what());
      }
      s.tried = true;
    }
  }
  if (!s.sampling) return;
  const bool graph = id == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch || id == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
  ++s.launches;
  tr::JsonLine line("launch");
  line.unum("host_ns", tr::now_ns()).unum("correlation", cb->correlationId);
  if (graph) line.str("graph", "cuGraphLaunch");
  else line.unum("name", name_id(s, cb->symbolName ? cb->symbolName : "?"));
  emit(s, std::move(line));
}

void CUPTIAPI callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  State& s = state();
  if (getpid() != s.pid) return;
  try {  // nothing thrown here may reach the program
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
      on_launch(s, static_cast<const CUpti_CallbackData*>(data), id);
    } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
      const auto* r = static_cast<const CUpti_ResourceData*>(data);
      if (s.sampling && r->context == s.ctx) finish("context destroyed", 3);  // the program waits here
    }
  } catch (...) {
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  State& s = state();
  if (s.pid == getpid()) return 1;
  s.pid = getpid();
  Settings& c = s.cfg;
  c.interval_ns = std::uint64_t(env_number("ARCHBENCH_PM_INTERVAL_US", 100, 0.001, 1e7) * 1e3);
  c.decode_ms = unsigned(env_number("ARCHBENCH_PM_DECODE_MS", 20, 1, 10000));
  c.hw_buffer = std::size_t(env_number("ARCHBENCH_PM_HW_BUFFER_MB", 64, 1, 65536)) << 20;
  // The image holds 8 decodes' samples (at least 512, at most 16384 slots of some 16 KB each).
  const double per_decode = double(c.decode_ms) * 1e6 / double(std::max<std::uint64_t>(c.interval_ns, 1));
  c.max_samples = std::uint32_t(env_number("ARCHBENCH_PM_MAX_SAMPLES", std::clamp(8 * per_decode, 512.0, 16384.0),
                                           16, 1 << 20));
  if (const char* e = std::getenv("ARCHBENCH_PM_APPEND")) c.keep_latest = std::string(e) == "latest";
  if (const char* e = std::getenv("ARCHBENCH_PM_KERNELS")) c.kernels = std::string(e) != "0";
  if (const char* e = std::getenv("ARCHBENCH_PM_METRICS")) c.metrics = e;
  if (const char* e = std::getenv("ARCHBENCH_PM_CACHE")) c.cache = e;
  const char* path = std::getenv("ARCHBENCH_PM_OUT");
  s.out_path = path && *path ? path : "pmsampling-" + std::to_string(getpid()) + ".jsonl";
  s.out = std::fopen(s.out_path.c_str(), "w");
  if (!s.out) {
    std::fprintf(stderr, "%s: cannot write %s (%s); the program runs unprofiled\n", kTag, s.out_path.c_str(),
                 std::strerror(errno));
    return 0;
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  emit(s, std::move(tr::JsonLine("process").num("pid", getpid()).str("command", tr::command_line())
                        .unum("start_ns", tr::now_ns()).str("date", date)),
       true);
  if (const CUptiResult r = cuptiSubscribe(&s.sub, callback, nullptr); r != CUPTI_SUCCESS) {
    fail(s, "cuptiSubscribe: " + cupti_words(r) + " (another CUPTI client, such as Nsight, may hold it)");
    return 0;
  }
  for (CUpti_CallbackId id : tr::kLaunches) cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  for (CUpti_CallbackId id : {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz})
    cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  if (c.kernels) {
    CUptiResult r = cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed);
    if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    s.activity_on = r == CUPTI_SUCCESS;
    s.activity = r == CUPTI_SUCCESS ? "CUPTI concurrent-kernel activity records"
                                    : "none (cuptiActivityEnable: " + cupti_words(r) + "): launches only";
  } else {
    s.activity = "none (ARCHBENCH_PM_KERNELS=0): launches only";
  }
  std::atexit(at_exit);
  return 1;
}
