// TopDown level 1 over a CUDA program's run, one pass and no replay (seed 004 section 5.3, the
// evolution view): a CUPTI injection library (CUDA_INJECTION64_PATH, set up by
// tools/archbench_topdown.py --timeline) that samples the GPU's performance monitors with CUPTI's
// PM Sampling API while the program runs unchanged. Kernels are never replayed nor serialised:
// the hardware counts the whole device and a sample is taken every interval.
//
// The counters: those TopDown level 1 needs (fixtures/meters/topdown.hpp) that fit in ONE pass.
// A chip's PM sampling offers its counters plainly (sm__inst_executed, ...) and in single-pass
// collections Nsight Compute's PM sampling uses, named <unit>.<collection>.<counter> (GH100:
// TPC.TriageCompute.sm__cycles_active, TPC.TriageCompute.sm__inst_executed_realtime, ...). Each
// is searched (the IPC pair required; then warp efficiency, issued instructions, active warps and
// the stall reasons, each kept only while the Profiler Host API still counts one pass; a
// collection's set then grows with plain counters it lacks) and the set giving most of level 1 is
// taken. On GH100 (and AD102, GA102, GB100, GB202 by the host API) that is sm__cycles_active,
// sm__inst_executed, sm__thread_inst_executed_pred_on_realtime and sm__inst_issued: no
// smsp__warps_issue_stalled_<reason> can be sampled in one pass at all (each alone needs 2), nor
// smsp__thread_inst_executed. What the set allows is said in the config record (level1, notes,
// approximations): retire, divergence (warp efficiency from predicated-on thread instructions,
// said), and
//   - frontend and backend where every stall reason is counted (their shares, as topdown.cpp);
//   - where only some are, with the warps' active cycles: each counted reason's share of the
//     warps' cycles without an issue (active warp-cycles minus instructions issued), so frontend
//     or backend holds the counted reasons only (a lower bound) and stall_other the rest;
//   - else stall (frontend and backend together; archbench_topdown.py --stall-split shares it out
//     as a kernel-replay TopDown found).
// The set, its config image, the device's counter availability image and the chip's stall reasons
// are cached per chip and CUPTI version (ARCHBENCH_PM_CACHE), so that later runs neither query the
// availability (0.17 s on an H100) nor list the chip's counters nor search, and start without a
// host object (whose first initialisation, libnvperf_host's, took 0.4-0.5 s on a build
// machine).
//
// Start: a thread of the library prepares everything as soon as the library is loaded (the
// driver's initialisation, the chip, the counter availability, the set and its config image),
// while the program goes on creating its context. By default (ARCHBENCH_PM_START=early), where
// the process sees one device, it then starts the sampling there at once, ahead of the program's
// context (PM sampling is the device's); with several devices, or where that start fails, it
// starts on the device of the program's first context as soon as that exists (`context`, which
// started 0.12-0.2 s after the context on an H100). The program's first kernel launch waits for
// the start (at most ARCHBENCH_PM_WAIT_S; a `wait` record says how long), so that no kernel goes
// unsampled. With ARCHBENCH_PM_WAIT_S=0 the launches go on, and the kernels that ran before the
// start have no samples: the report counts them. With a cached config image the host
// object (to evaluate samples) is built on a second thread meanwhile; samples decoded before it
// is there are set aside and evaluated when it is. `launch`: the device part at the first launch (a process that creates a context but
// launches nothing leaves the device to others); `sync`: everything at the first launch, on the
// launching thread. `outside`: the device is sampled by another process, archbench_pmsampler
// (sampler.cpp: this library loaded with ARCHBENCH_PM_ROLE=sampler, started early before the program
// was; PM sampling counts the whole device, whichever process runs on it), so the program's process
// carries only the kernel records and the launches, flushed every second by a thread of the library;
// enabling, configuring and decoding are out of its way.
// The thread then decodes the hardware buffer every ARCHBENCH_PM_DECODE_MS and writes one line a
// sample as it goes (flushed): its GPU start and end, the raw counter values and the level-1
// fractions (the arithmetic of fixtures/meters/topdown.cpp, every part a fraction of IPC_MAX).
// Kernels are recorded as they run (CUPTI's concurrent-kernel activity records: name, GPU start
// and end) and as they are launched (host time). At exit, or when the sampled context is
// destroyed, sampling stops, the rest is decoded, PM sampling is disabled and an `end` line is
// written. Every step's time is recorded (injection; config: setup; wait; host; end: exit,
// decode) so that the overhead can be taken apart.
//
// The program is never broken: any CUPTI failure is one line on stderr (and an `error` record)
// and the program runs on unprofiled, with its own exit status; the library installs no signal
// handler and its threads block every signal.
//
// Records, one JSON object a line (tools/archbench/timeline.py reads them): process, injection,
// base_metrics, config, clock, name, launch, wait, host, kernel, sample, error, end.
// Environment (set by the command):
//   ARCHBENCH_PM_OUT           output file (default ./pmsampling-<pid>.jsonl)
//   ARCHBENCH_PM_INTERVAL_US   sampling interval in microseconds (default 100)
//   ARCHBENCH_PM_DECODE_MS     time between two decodes of the hardware buffer (default 20)
//   ARCHBENCH_PM_START         early (default), context, launch, sync or outside (see above)
//   ARCHBENCH_PM_ROLE          sampler: archbench_pmsampler's process (its records say "role":"sampler";
//                              a start that cannot be made early is an error, not a wait for a context)
//   ARCHBENCH_PM_DEVICE        the device (ordinal) the early start samples, however many the process sees
//   ARCHBENCH_PM_SLOW_DOWN     1 (default): archbench_pmsampler restarts at ten times the interval (up to
//                              1 ms) where its decoding falls behind (slow_down); 0: never
//   ARCHBENCH_PM_WAIT_S        at most this long a first launch waits for the start (default 10;
//                              0: it does not wait)
//   ARCHBENCH_PM_HW_BUFFER_MB  CUPTI's hardware buffer (default: 8 decodes' samples at the counter
//                              data's size per sample, 32 to 512 MB; 512 MB in archbench_pmsampler)
//   ARCHBENCH_PM_MAX_SAMPLES   slots of a counter-data image (default: 2 decodes' samples and 64
//                              more, 128 to 16384)
//   ARCHBENCH_PM_APPEND        oldest (default: an overflow stops the sampling, said) or latest
//   ARCHBENCH_PM_KERNELS       1 (default): kernel activity records; 0: launches only
//   ARCHBENCH_PM_DISABLE       1 (default): PM sampling disabled at the end (timed); 0: left to exit
//   ARCHBENCH_PM_METRICS       comma-separated metrics to collect instead of the search
//   ARCHBENCH_PM_LOCK_DIR      where the GPU's lock file is (default /tmp; see lock_device)
//   ARCHBENCH_PM_CACHE         file of the chip's one-pass set (default
//                              $XDG_CACHE_HOME/archbench/pmsampling-v2-<chip>.metrics; 0: none)
#include <cuda.h>
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/syscall.h>
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
#include <utility>
#include <vector>

#include "fixtures/meters/topdown.hpp"
#include "tools/analysis/trace/common.hpp"
#include "tools/analysis/trace/cupti_calls.hpp"

namespace ab = archbench;
namespace tr = archbench::trace;

namespace {

constexpr const char* kTag = "archbench-pmsampling";
constexpr const char* kCacheHeader = "# archbench-pmsampling one-pass set v2";

enum class Rearm { host_object, started, decoded };
void rearm_exit(Rearm point);

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

// Named durations (and instants) in nanoseconds, in the order they were taken.
struct Times {
  std::vector<std::pair<std::string, std::uint64_t>> parts;
  std::uint64_t last = tr::now_ns();
  // The time since the previous lap (or the start), as `name`.
  void lap(const std::string& name) {
    const std::uint64_t t = tr::now_ns();
    parts.emplace_back(name, t - last);
    last = t;
  }
  void put(const std::string& name, std::uint64_t v) { parts.emplace_back(name, v); }
  void add(const Times& o) { parts.insert(parts.end(), o.parts.begin(), o.parts.end()); }
  std::string json() const {
    std::string s = "{";
    for (const auto& [k, v] : parts) {
      if (s.size() > 1) s += ',';
      s += tr::JsonLine::quote(k) + ':' + std::to_string(v);
    }
    return s + "}";
  }
};

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
  std::size_t hw_buffer = 0;      // 0: sized from the counter data's size per sample
  std::uint32_t max_samples = 0;  // 0: from the interval and the decode period
  bool keep_latest = false, kernels = true, disable = true;
  double wait_s = 10;
  std::string start = "early";  // early, context, launch, sync or outside
  bool sampler = false;          // ARCHBENCH_PM_ROLE=sampler: archbench_pmsampler's process, its records marked
  bool adapt = true;             // ARCHBENCH_PM_SLOW_DOWN (1): the sampler restarts slower where its decoding falls behind
  int device = -1;               // ARCHBENCH_PM_DEVICE: the device started early, however many there are
  std::string metrics, cache;
  bool outside() const { return start == "outside"; }
};

// ---- The counters: which part of the level-1 formulas each collected metric feeds ----------

enum class Role { cycles, executed, issued, thread, warps, stall, other };
const char* role_name(Role r) {
  switch (r) {
    case Role::cycles: return "cycles";
    case Role::executed: return "executed";
    case Role::issued: return "issued";
    case Role::thread: return "thread";
    case Role::warps: return "warps";
    case Role::stall: return "stall";
    default: return "other";
  }
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

// A metric's parts: "TPC.TriageCompute.sm__inst_executed_realtime.sum" is the counter
// sm__inst_executed_realtime of the unit TPC in the single-pass collection TriageCompute;
// "sm__inst_issued.sum" a plain counter (no collection).
struct Parts {
  std::string collection, counter;
};
Parts parts_of(const std::string& metric) {
  std::vector<std::string> p;
  std::string cur;
  for (char c : metric + '.') {
    if (c == '.') {
      p.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i].find("__") != std::string::npos) return {i >= 1 ? p[i - 1] : "", p[i]};
  return {"", p.empty() ? metric : p[0]};
}

// The counter without its collection, rollup and `_realtime` suffix (the real-time variant).
std::string base_of(const std::string& metric) {
  std::string b = parts_of(metric).counter;
  const std::string rt = "_realtime";
  if (b.size() > rt.size() && b.compare(b.size() - rt.size(), rt.size(), rt) == 0) b.resize(b.size() - rt.size());
  return b;
}

bool is_pred_on(const std::string& metric) {
  const std::string b = base_of(metric), p = "_pred_on";
  return b.size() > p.size() && b.compare(b.size() - p.size(), p.size(), p) == 0;
}

Role role_of(const std::string& metric, std::string* reason) {
  const std::string b = base_of(metric);
  if (b == "sm__cycles_active") return Role::cycles;
  if (b == "sm__inst_executed" || b == "smsp__inst_executed") return Role::executed;
  if (b == "sm__inst_issued" || b == "smsp__inst_issued") return Role::issued;
  if (b == "smsp__thread_inst_executed" || b == "sm__thread_inst_executed" || b == "smsp__thread_inst_executed_pred_on" ||
      b == "sm__thread_inst_executed_pred_on")
    return Role::thread;
  if (b == "smsp__warps_active" || b == "sm__warps_active" || b == "tpc__warps_active") return Role::warps;
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
bool frontend_class(ab::StallClass c) { return c == ab::StallClass::fetch || c == ab::StallClass::decode; }
bool backend_class(ab::StallClass c) { return c == ab::StallClass::memory || c == ab::StallClass::core; }

// The stall reasons by how much of a typical kernel's stalls they hold: where not all fit in one
// pass, the first ones are kept.
const std::vector<std::string>& stall_priority() {
  static const std::vector<std::string> k = {
      "long_scoreboard", "barrier", "no_instruction", "wait", "math_pipe_throttle", "short_scoreboard",
      "mio_throttle", "lg_throttle", "branch_resolving", "membar", "dispatch_stall", "drain", "imc_miss",
      "tex_throttle", "sleeping", "misc", "gmma"};
  return k;
}

// The classified stall reasons the chip counts (plain counters): what "every reason" means.
std::set<std::string> chip_reasons(const std::vector<std::string>& base) {
  std::set<std::string> out;
  for (const std::string& b : base) {
    std::string reason;
    if (!parts_of(b).collection.empty() || role_of(b, &reason) != Role::stall) continue;
    const ab::StallClass c = ab::stall_class(reason);
    if (c != ab::StallClass::not_a_stall && c != ab::StallClass::unclassified) out.insert(reason);
  }
  return out;
}

// What one collection of the chip's PM-sampling counters ("" for the plain ones) offers for level
// 1, in the order it is tried: the IPC pair (required), then groups of alternatives for one
// quantity each: warp efficiency, issued instructions, active warps, each stall reason.
struct Wanted {
  std::string collection;
  std::vector<std::string> required;
  std::vector<std::vector<std::string>> optional;
};
Wanted wanted_metrics(const std::vector<std::string>& base, const std::string& collection) {
  std::map<std::string, std::string> have;  // counter -> the base metric's full name
  for (const std::string& b : base) {
    const Parts p = parts_of(b);
    if (p.collection == collection) have.emplace(p.counter, b);
  }
  auto all = [&](std::initializer_list<const char*> names) {
    std::vector<std::string> out;
    for (const char* n : names)
      if (have.count(n)) out.push_back(have[n] + ".sum");
    return out;
  };
  Wanted w;
  w.collection = collection;
  const std::vector<std::string> cycles = all({"sm__cycles_active", "sm__cycles_active_realtime"});
  const std::vector<std::string> executed = all({"sm__inst_executed", "sm__inst_executed_realtime",
                                                 "smsp__inst_executed", "smsp__inst_executed_realtime"});
  if (cycles.empty() || executed.empty()) return w;  // no IPC from this collection
  w.required = {cycles[0], executed[0]};
  for (const std::vector<std::string>& g :
       {all({"smsp__thread_inst_executed", "smsp__thread_inst_executed_realtime", "sm__thread_inst_executed",
             "sm__thread_inst_executed_realtime", "smsp__thread_inst_executed_pred_on",
             "smsp__thread_inst_executed_pred_on_realtime", "sm__thread_inst_executed_pred_on",
             "sm__thread_inst_executed_pred_on_realtime"}),
        all({"sm__inst_issued", "sm__inst_issued_realtime", "smsp__inst_issued", "smsp__inst_issued_realtime"}),
        all({"smsp__warps_active", "smsp__warps_active_realtime", "sm__warps_active", "sm__warps_active_realtime",
             "tpc__warps_active", "tpc__warps_active_realtime"})})
    if (!g.empty()) w.optional.push_back(g);
  std::map<std::string, std::vector<std::string>> stalls;  // reason -> its counters (plain before _realtime)
  for (const auto& [counter, full] : have) {
    std::string reason;
    if (role_of(full, &reason) != Role::stall || ab::stall_class(reason) == ab::StallClass::not_a_stall) continue;
    auto& g = stalls[reason];
    if (counter.find("_realtime") == std::string::npos) g.insert(g.begin(), full + ".sum");
    else g.push_back(full + ".sum");
  }
  for (const std::string& r : stall_priority())
    if (stalls.count(r)) w.optional.push_back(stalls[r]), stalls.erase(r);
  for (const auto& [r, g] : stalls) w.optional.push_back(g);  // reasons a newer chip adds
  return w;
}

// The roles a group of alternatives serves (one metric of each group is enough).
std::string group_key(const std::vector<std::string>& g) {
  std::string reason;
  const Role r = role_of(g.front(), &reason);
  return r == Role::stall ? "stall_" + reason : role_name(r);
}

// ---- CUPTI's Profiler Host object for PM sampling: metric lists, config images, pass counts ---

class Host {
 public:
  // The availability image is the object's own copy: CUPTI may keep the pointer until deinit (a
  // host object built on a thread from the thread's copy crashed programs at exit on the H100).
  Host(const std::string& chip, const std::vector<std::uint8_t>& availability) : chip_(chip), availability_(availability) {
    auto p = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    p.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    p.pChipName = chip_.c_str();
    p.pCounterAvailabilityImage = availability_.data();
    check(cuptiProfilerHostInitialize(&p), "cuptiProfilerHostInitialize (PM sampling)");
    obj_ = p.pHostObject;
    rearm_exit(Rearm::host_object);
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
  std::string chip_;
  std::vector<std::uint8_t> availability_;
  CUpti_Profiler_Host_Object* obj_ = nullptr;
  std::vector<std::uint8_t> image_;
  std::vector<std::string> metrics_;
  std::vector<const char*> names_;
};

// ---- Choosing the one-pass set -------------------------------------------------------------

std::string cache_path(const Settings& cfg, const std::string& chip) {
  if (cfg.cache == "0" || cfg.cache == "off") return "";
  if (!cfg.cache.empty()) return cfg.cache;
  std::string dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = x;
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache";
  else return "";
  return dir + "/archbench/pmsampling-v2-" + chip + ".metrics";  // v2: collections, this library's wanted list
}

struct Choice {
  std::unique_ptr<Host> host;  // configured with the chosen metrics (none yet where the cache had it all)
  std::vector<std::string> metrics;
  std::vector<std::uint8_t> config;  // the config image for cuptiPmSamplingSetConfig
  std::uint64_t host_init_ns = 0;    // a first host object's initialisation took this long (the search's)
  std::string how;                   // environment, cache, search
  std::map<std::string, std::string> rejected;  // metric -> why it is not collected
  std::size_t trials = 0;
  std::set<std::string> chip_reasons;  // the chip's classified stall reasons (plain counters)
  std::string search = "[]";           // each collection's candidate set and its score (JSON)
  std::vector<std::string> notes;      // what the search found out (a stall reason alone needs 2 passes)
};

// The cached set for `chip` under this CUPTI, where the file is this library's and is about them.
struct Cached {
  std::vector<std::string> metrics;
  std::map<std::string, std::string> rejected;
  std::set<std::string> reasons;
  std::vector<std::string> notes;
  std::vector<std::uint8_t> config;  // the set's config image (hex in the file)
  std::vector<std::uint8_t> availability;  // the device's counter availability image (hex)
  std::uint64_t host_init_ns = 0;
};

std::string hex_of(const std::vector<std::uint8_t>& v) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(2 * v.size());
  for (std::uint8_t b : v) s += d[b >> 4], s += d[b & 15];
  return s;
}
std::vector<std::uint8_t> bytes_of(const std::string& hex) {
  auto nib = [](char c) { return c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0'; };
  std::vector<std::uint8_t> v;
  if (hex.size() % 2 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) return v;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) v.push_back(std::uint8_t(nib(hex[i]) << 4 | nib(hex[i + 1])));
  return v;
}
std::unique_ptr<Cached> read_cache(const std::string& path, const std::string& chip) {
  if (path.empty()) return nullptr;
  std::uint32_t version = 0;
  cuptiGetVersion(&version);
  std::ifstream f(path);
  std::string line;
  if (!std::getline(f, line) || line != kCacheHeader) return nullptr;
  auto c = std::make_unique<Cached>();
  bool chip_ok = false, version_ok = false;
  while (std::getline(f, line)) {
    const std::size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp), value = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "chip") chip_ok = value == chip;
    else if (key == "cupti") version_ok = value == std::to_string(version);
    else if (key == "metric") c->metrics.push_back(value);
    else if (key == "reason") c->reasons.insert(value);
    else if (key == "note") c->notes.push_back(value);
    else if (key == "config") c->config = bytes_of(value);
    else if (key == "availability") c->availability = bytes_of(value);
    else if (key == "host_init_ns") c->host_init_ns = std::strtoull(value.c_str(), nullptr, 10);
    else if (key == "rejected") {
      const std::size_t tab = value.find('\t');
      c->rejected[value.substr(0, tab)] = tab == std::string::npos ? "" : value.substr(tab + 1);
    }
  }
  return chip_ok && version_ok && !c->metrics.empty() ? std::move(c) : nullptr;
}

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

// How much of level 1 a set gives: warp efficiency (exact 4, from predicated-on instructions 3),
// the stall split (every reason 4; some reasons with the active warps 2, 1 more with a frontend
// reason), issued instructions (the replay part, near 0 on Hopper) 1.
int score_of(const std::vector<std::string>& metrics, const std::set<std::string>& reasons_on_chip) {
  bool thread = false, pred_on = false, issued = false, warps = false, front = false;
  std::set<std::string> reasons;
  for (const std::string& m : metrics) {
    std::string reason;
    switch (role_of(m, &reason)) {
      case Role::thread: thread = true, pred_on = is_pred_on(m); break;
      case Role::issued: issued = true; break;
      case Role::warps: warps = true; break;
      case Role::stall:
        if (reasons_on_chip.count(reason)) reasons.insert(reason), front |= frontend_class(ab::stall_class(reason));
        break;
      default: break;
    }
  }
  int score = (thread ? (pred_on ? 3 : 4) : 0) + (issued ? 1 : 0);
  if (!reasons.empty() && reasons == reasons_on_chip) score += 4;
  else if (!reasons.empty() && warps) score += 2 + (front ? 1 : 0);
  return score;
}

// The one-pass set: the user's, the cached one (`cached`, where it still takes one pass) or the
// search's over the chip's counters (`base`: listed only where there is no usable cache).
Choice choose(const Settings& cfg, const std::string& chip, std::vector<std::uint8_t>& availability,
              const std::vector<std::string>& base, const Cached* cached, Times& t) {
  Choice c;
  std::string why;
  c.chip_reasons = chip_reasons(base);
  if (!cfg.metrics.empty()) {  // the user's set, as given
    c.how = "ARCHBENCH_PM_METRICS";
    c.host = trial(chip, availability, split(cfg.metrics, ','), &why, &c.trials);
    if (!c.host) throw std::runtime_error("ARCHBENCH_PM_METRICS: " + why);
    c.metrics = c.host->metrics();
    c.config = c.host->image();
    return c;
  }
  if (cached && !cached->config.empty()) {  // the set and its config image: no host object needed to start
    c.how = "cache " + cache_path(cfg, chip) + " (config image too)";
    c.metrics = cached->metrics;
    c.config = cached->config;
    c.host_init_ns = cached->host_init_ns;
    c.rejected = cached->rejected;
    c.chip_reasons = cached->reasons;
    c.notes = cached->notes;
    t.lap("choose_ns");
    return c;
  }
  if (cached && (c.host = trial(chip, availability, cached->metrics, &why, &c.trials))) {
    c.how = "cache " + cache_path(cfg, chip);
    c.rejected = cached->rejected;
    c.chip_reasons = cached->reasons;
    c.notes = cached->notes;
    c.metrics = c.host->metrics();
    c.config = c.host->image();
    t.lap("choose_ns");
    return c;
  }
  if (base.empty()) throw std::runtime_error("the cached set does not take one pass any more: " + why);
  // Each collection's set: all it offers if they take one pass, else the IPC pair and, greedily,
  // the first alternative of each group that keeps one pass. A collection's set then grows the
  // same way with the plain counters for what it lacks.
  std::set<std::string> collections;
  for (const std::string& b : base) collections.insert(parts_of(b).collection);
  const Wanted plain = wanted_metrics(base, "");
  std::string search = "[";
  int best = -1;
  for (const std::string& col : collections) {
    const Wanted w = col.empty() ? plain : wanted_metrics(base, col);
    if (w.required.empty()) continue;
    std::map<std::string, std::string> rejected;
    std::vector<std::string> chosen = w.required;
    for (const auto& g : w.optional) chosen.push_back(g.front());
    std::unique_ptr<Host> host = trial(chip, availability, chosen, &why, &c.trials);
    std::set<std::string> covered;
    if (host) {
      for (const auto& g : w.optional) covered.insert(group_key(g));
    } else {
      chosen = w.required;
      host = trial(chip, availability, chosen, &why, &c.trials);
      if (!host) {
        search += std::string(search.size() > 1 ? "," : "") + "{\"collection\":" + tr::JsonLine::quote(col) +
                  ",\"error\":" + tr::JsonLine::quote("the IPC pair alone does not fit: " + why) + "}";
        continue;
      }
    }
    auto grow = [&](const std::vector<std::vector<std::string>>& groups) {
      for (const auto& g : groups) {
        if (covered.count(group_key(g))) continue;
        bool kept = false;
        for (const std::string& m : g) {
          chosen.push_back(m);
          if (auto h = trial(chip, availability, chosen, &why, &c.trials)) {
            host = std::move(h);
            kept = true;
            break;
          }
          chosen.pop_back();
          rejected[m] = why;
        }
        if (kept) {
          covered.insert(group_key(g));
          for (const std::string& m : g) rejected.erase(m);
        }
      }
    };
    if (covered.empty()) grow(w.optional);
    if (!col.empty()) grow(plain.optional);
    // Active warps serve only to share out a partial set of stall reasons.
    const bool stalls = std::any_of(chosen.begin(), chosen.end(), [](const std::string& m) {
      std::string r;
      return role_of(m, &r) == Role::stall;
    });
    auto warps = std::find_if(chosen.begin(), chosen.end(), [](const std::string& m) {
      std::string r;
      return role_of(m, &r) == Role::warps;
    });
    if (!stalls && warps != chosen.end()) {
      chosen.erase(warps);
      if (auto h = trial(chip, availability, chosen, &why, &c.trials)) host = std::move(h);
    }
    const int score = score_of(host->metrics(), c.chip_reasons);
    search += std::string(search.size() > 1 ? "," : "") + "{\"collection\":" + tr::JsonLine::quote(col) +
              ",\"metrics\":" + json_strings(host->metrics()) + ",\"score\":" + std::to_string(score) + "}";
    if (score > best) {
      best = score;
      c.host = std::move(host);
      c.rejected = rejected;
      c.how = "search (" + (col.empty() ? std::string("plain counters") : "collection " + col) + ")";
    }
  }
  c.search = search + "]";
  if (!c.host) throw std::runtime_error("no PM-sampling counter set of this GPU gives the IPC in one pass");
  // What the search tried and did not take, by the role it would have served.
  for (const auto& g : plain.optional)
    if (std::none_of(c.host->metrics().begin(), c.host->metrics().end(),
                     [&](const std::string& m) { return group_key({m}) == group_key(g); }) &&
        !c.rejected.count(g.front()))
      c.rejected[g.front()] = "not in the chosen collection's one-pass set";
  // Where no stall reason made it, whether one can at all: a reason alone.
  const bool stalls = std::any_of(c.host->metrics().begin(), c.host->metrics().end(), [](const std::string& m) {
    std::string r;
    return role_of(m, &r) == Role::stall;
  });
  for (const auto& g : plain.optional) {
    std::string reason;
    if (stalls || role_of(g.front(), &reason) != Role::stall) continue;
    if (trial(chip, availability, {g.front()}, &why, &c.trials))
      c.notes.push_back("a stall reason alone takes one pass (" + g.front() + ") but none fits beside the IPC counters");
    else
      c.notes.push_back("no stall reason can be sampled in one pass on " + chip + ": " + g.front() + " alone " +
                        why.substr(0, why.find(" with the others")) +
                        " (the Profiler Host API's pass count), so frontend and backend cannot be told apart here");
    break;
  }
  t.lap("choose_ns");
  c.metrics = c.host->metrics();
  c.config = c.host->image();
  for (const auto& [k, v] : t.parts)
    if (k == "host_init_ns") c.host_init_ns = v;
  const std::string cache = cache_path(cfg, chip);
  if (!cache.empty()) {  // remembered for the next run on this chip (best effort)
    std::uint32_t version = 0;
    cuptiGetVersion(&version);
    const std::string dir = cache.substr(0, cache.rfind('/'));
    mkdir(dir.substr(0, dir.rfind('/')).c_str(), 0755);
    mkdir(dir.c_str(), 0755);
    const std::string tmp = cache + "." + std::to_string(getpid());
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "%s\nchip %s\ncupti %u\n", kCacheHeader, chip.c_str(), version);
      for (const std::string& m : c.host->metrics()) std::fprintf(f, "metric %s\n", m.c_str());
      for (const std::string& r : c.chip_reasons) std::fprintf(f, "reason %s\n", r.c_str());
      for (const std::string& n : c.notes) std::fprintf(f, "note %s\n", n.c_str());
      std::fprintf(f, "host_init_ns %llu\nconfig %s\navailability %s\n", static_cast<unsigned long long>(c.host_init_ns),
                   hex_of(c.config).c_str(), hex_of(availability).c_str());
      for (const auto& [m, w] : c.rejected) std::fprintf(f, "rejected %s\t%s\n", m.c_str(), w.c_str());
      if (std::fclose(f) == 0) std::rename(tmp.c_str(), cache.c_str());
      else std::remove(tmp.c_str());
    }
  }
  return c;
}

// What the chosen set allows: each metric's role, the level-1 quantities and what is approximated.
enum class Split { full, partial, none };
struct Plan {
  std::vector<Role> roles;
  std::vector<std::string> reasons;  // per metric: its stall reason ("" for others)
  bool has_thread = false, has_issued = false, has_warps = false, has_front = false, has_back = false;
  Split split = Split::none;
  std::vector<std::string> quantities, notes, approximations;
  std::map<std::string, std::string> roles_json, classes;
};

Plan plan_of(const std::vector<std::string>& metrics, const std::set<std::string>& chip_reasons) {
  Plan p;
  bool cycles = false, executed = false, pred_on = false;
  std::set<std::string> counted;
  std::vector<std::string> front, back;
  for (const std::string& m : metrics) {
    std::string reason;
    const Role r = role_of(m, &reason);
    p.roles.push_back(r);
    p.reasons.push_back(reason);
    p.roles_json[m] = r == Role::stall ? "stall_" + reason : role_name(r);
    cycles |= r == Role::cycles;
    executed |= r == Role::executed;
    if (r == Role::thread) p.has_thread = true, pred_on = is_pred_on(m);
    p.has_issued |= r == Role::issued;
    p.has_warps |= r == Role::warps;
    if (r == Role::stall) {
      const ab::StallClass c = ab::stall_class(reason);
      p.classes[reason] = class_name(c);
      if (frontend_class(c)) front.push_back(reason), counted.insert(reason);
      if (backend_class(c)) back.push_back(reason), counted.insert(reason);
    }
  }
  if (!cycles || !executed)
    throw std::runtime_error("the sampled set has no " + std::string(cycles ? "sm__inst_executed" : "sm__cycles_active") +
                             ": no IPC, no TopDown");
  p.has_front = !front.empty();
  p.has_back = !back.empty();
  const bool every = !counted.empty() && std::includes(counted.begin(), counted.end(), chip_reasons.begin(),
                                                        chip_reasons.end());
  p.split = every ? Split::full : (!counted.empty() && p.has_warps ? Split::partial : Split::none);
  p.quantities = {"retire"};
  if (p.has_thread || p.has_issued) p.quantities.push_back("divergence");
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  if (p.split == Split::full) {
    p.quantities.insert(p.quantities.end(), {"frontend", "backend"});
    p.notes.push_back("frontend and backend share the stalls as every stall reason of the chip does (" +
                      std::to_string(counted.size()) + " reasons)");
  } else if (p.split == Split::partial) {
    if (p.has_front) p.quantities.push_back("frontend");
    if (p.has_back) p.quantities.push_back("backend");
    p.quantities.push_back("stall_other");
    std::vector<std::string> in_pass = front;
    in_pass.insert(in_pass.end(), back.begin(), back.end());
    const std::string who = p.has_front && p.has_back ? "frontend and backend hold"
                            : p.has_back               ? "backend holds"
                                                       : "frontend holds";
    p.approximations.push_back(
        who + " only the stall reasons in the pass (" + join(in_pass) + ": " + std::to_string(counted.size()) +
        " of the chip's " + std::to_string(chip_reasons.size()) + "), each as its share of the warps' active cycles " +
        "without an issue (active warp-cycles minus instructions issued, eligible warps not selected included): a " +
        "lower bound; stall_other is the rest of the stalls (" + (p.has_front ? "" : "all of frontend, ") +
        "the reasons not in the pass)");
  } else {
    p.quantities.push_back("stall");
    p.notes.push_back(counted.empty()
                          ? "no stall reason is in the pass: frontend and backend are shown together as stall "
                            "(archbench_topdown.py --timeline --stall-split TOPDOWN.json shares it out as a "
                            "kernel-replay TopDown did, kernel by kernel)"
                          : "some stall reasons fit in the pass but not the active warps: too little to share out "
                            "the stalls, so frontend and backend are shown together as stall");
  }
  if (!p.has_thread && !p.has_issued)
    p.notes.push_back("no divergence: neither thread instructions nor sm__inst_issued fit in the pass, so retire "
                      "includes what divergence would have taken");
  else if (!p.has_thread)
    p.approximations.push_back("divergence is its replay part only (no thread-instruction counter in the pass)");
  else if (!p.has_issued)
    p.approximations.push_back("divergence is its branch part only: no sm__inst_issued in the pass, so no replay part "
                               "(near 0 on Volta and later: the kernel-replay TopDown shows it)");
  if (pred_on)
    p.approximations.push_back("warp efficiency from predicated-on thread instructions (no smsp__thread_inst_executed "
                               "in the pass): lanes a predicate turned off count as idle, so divergence may read "
                               "higher than the kernel-replay TopDown's");
  return p;
}

// ---- The library's state -------------------------------------------------------------------

struct Stats {
  std::uint64_t samples = 0, idle = 0, empty = 0, lost = 0, decodes = 0, decode_errors = 0, reinits = 0, full = 0;
  std::uint64_t decode_ns = 0, decode_max_ns = 0, reinit_ns = 0, most_per_decode = 0, set_aside = 0;
  bool overflow = false;
  std::string last_error;
};

// A counter-data image: CUPTI decodes the hardware buffer into it, the host object evaluates it.
struct Image {
  std::unique_ptr<std::uint8_t[]> data;
  std::size_t size = 0;
  std::size_t completed = 0;  // samples CUPTI completed in it (an image set aside)
};

// The sampling's phases. The setup thread (or, with ARCHBENCH_PM_START=sync, the first launch)
// moves them on; a launch waits until one of the last three.
enum class Phase { none, preparing, prepared, starting, sampling, failed, stopped };

struct State {
  Settings cfg;
  pid_t pid = 0;
  std::string out_path;
  FILE* out = nullptr;
  std::mutex out_mu;  // the file; never held while calling CUPTI
  int device_lock = -1;  // the GPU's lock file, held (flock) while this process samples it
  CUpti_SubscriberHandle sub = nullptr;

  std::mutex ctl_mu;  // phase, the device asked for, the threads' control
  std::condition_variable ctl_cv;
  bool setup_returned = false;  // the setup thread's function has returned, its locals destroyed
  std::uint64_t last_decode_ns = 0, last_stop_ns = 0;  // last_decode's, on the library's thread
  Phase phase = Phase::none;
  std::atomic<bool> settled{false};  // phase is sampling, failed or stopped
  std::atomic<bool> gave_up{false};  // a launch waited ARCHBENCH_PM_WAIT_S in vain: the others do not wait
  std::atomic<bool> decode_spawned{false};  // ARCHBENCH_PM_START=sync: the decode thread
  int want_device = -1;              // the device to sample, once a context exists or a launch asks
  CUcontext want_ctx = nullptr;
  std::string trigger;  // what asked: "context created" or "first launch"
  std::uint64_t trigger_ns = 0;
  bool stop_thread = false, thread_running = false, injection_done = false;
  std::uint64_t first_wait_ns = 0;
  bool first_waited = false;
  std::uint64_t flush_ns = 0;

  std::mutex host_mu;  // the host object, where a helper thread builds it (a cached config image)
  std::condition_variable host_cv;
  bool host_ready = false, host_failed = false;
  std::uint64_t host_started_ns = 0;

  std::timed_mutex pm_mu;  // the PM sampling object, its image and the host object
  std::unique_ptr<Host> host;
  CUpti_PmSampling_Object* pm = nullptr;
  Image image;                 // the image decodes go into
  std::vector<Image> pending;  // images decoded before the host object was there, to evaluate in order
  Plan plan;
  std::size_t capacity = 0;
  std::uint64_t last_end = 0;  // the last sample written ends here (GPU time)
  Stats stats;
  // What the sampling was enabled and configured with, for a restart at a longer interval
  // (slow_down); whether the last evaluation found the decoding behind; the first sample after a
  // restart reaches back over the gap with nothing counted, and is dropped.
  std::uint32_t ordinal = 0;
  std::vector<std::string> metric_names;
  std::vector<std::uint8_t> config_used;
  CUpti_PmSampling_TriggerMode trigger_mode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
  bool behind = false, drop_next = false;
  bool stopped = false;  // cuptiPmSamplingStop called: nothing more to decode
  std::atomic<bool> sampling{false};
  CUcontext ctx = nullptr;

  std::mutex names_mu;  // kernel names seen at launch -> id
  std::unordered_map<std::string, std::uint64_t> names;
  std::atomic<std::uint64_t> launches{0}, kernel_records{0};
  std::atomic<bool> finished{false};
  std::string activity;  // "CUPTI concurrent-kernel activity records", or why not
  bool activity_on = false;
};

State& state() {
  static State* s = new State;  // never destroyed: callbacks and the threads may outlive exit
  return *s;
}

void emit(State& s, tr::JsonLine&& line, bool flush = false) {
  std::lock_guard<std::mutex> lock(s.out_mu);
  if (!s.out || getpid() != s.pid) return;
  if (s.cfg.sampler) line.str("role", "sampler");  // told apart from the program's once the files are merged
  line.write(s.out);
  if (flush) std::fflush(s.out);
}

void fail(State& s, const std::string& why) {
  std::fprintf(stderr, "%s: %s; the program runs on unprofiled\n", kTag, why.c_str());
  emit(s, std::move(tr::JsonLine("error").str("reason", why).unum("host_ns", tr::now_ns())), true);
}

void set_phase(State& s, Phase p) {
  std::lock_guard<std::mutex> lk(s.ctl_mu);
  s.phase = p;
  s.settled = p == Phase::sampling || p == Phase::failed || p == Phase::stopped;
  s.ctl_cv.notify_all();
}

// The host object for evaluating samples, built on a helper thread (the cached config image lets the
// sampling start without it): a `host` record says how long it took.
void build_host(std::string chip, std::vector<std::uint8_t> availability, std::vector<std::string> metrics,
                std::vector<std::uint8_t> config) {
  State& s = state();
  Times t;
  std::unique_ptr<Host> h;
  std::string error, note;
  try {
    h = std::make_unique<Host>(chip, availability);
    t.lap("init_ns");
    const std::size_t passes = h->configure(metrics);
    t.lap("configure_ns");
    if (passes != 1)
      error = "the cached set needs " + std::to_string(passes) + " passes now (remove the cache file: ARCHBENCH_PM_CACHE)";
    else if (h->image() != config)
      note = "the cached config image differs from the host object's (the cached one is in use)";
  } catch (const std::exception& e) {
    error = e.what();
  }
  const std::uint64_t ready = tr::now_ns();
  tr::JsonLine line("host");  // written before finish can be told the host object is there
  line.raw("times", t.json()).unum("since_start_ns", ready - s.host_started_ns).unum("ready_ns", ready);
  if (!note.empty()) line.str("note", note);
  if (!error.empty()) line.str("error", error);
  emit(s, std::move(line), true);
  {
    std::lock_guard<std::mutex> lk(s.host_mu);
    if (error.empty()) s.host = std::move(h), s.host_ready = true;
    else s.host_failed = true;
    s.host_cv.notify_all();
  }
  if (!error.empty()) fail(s, "the samples cannot be evaluated: " + error);
}

void start_host_builder(State& s, const std::string& chip, const std::vector<std::uint8_t>& availability,
                        const std::vector<std::string>& metrics, const std::vector<std::uint8_t>& config) {
  s.host_started_ns = tr::now_ns();
  if (!tr::spawn_quiet([=] { build_host(chip, availability, metrics, config); }))
    build_host(chip, availability, metrics, config);  // built here, then
}

// Waits (at most `limit`) for the host object: true where it is there.
bool wait_for_host(State& s, std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lk(s.host_mu);
  s.host_cv.wait_for(lk, limit, [&] { return s.host_ready || s.host_failed; });
  return s.host_ready;
}

// ---- Samples -------------------------------------------------------------------------------

// The level-1 fractions of one sample, as JSON (null where the SMs executed nothing).
std::string level1(const State& s, const std::vector<double>& v, double dt_ns) {
  const Plan& p = s.plan;
  ab::Metrics m;
  double executed = 0, issued = 0, warps = 0, front = 0, back = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    switch (p.roles[i]) {
      case Role::cycles: m["sm__cycles_active.sum"] += v[i]; break;
      case Role::executed: m["sm__inst_executed.sum"] += v[i], executed += v[i]; break;
      case Role::issued: m["sm__inst_issued.sum"] += v[i], issued += v[i]; break;
      case Role::thread: m["smsp__thread_inst_executed.sum"] += v[i]; break;
      case Role::warps: warps += v[i]; break;
      case Role::stall: {
        m[std::string(ab::kStallPrefix) + p.reasons[i] + ".sum"] += v[i];
        const ab::StallClass c = ab::stall_class(p.reasons[i]);
        if (frontend_class(c)) front += v[i];
        if (backend_class(c)) back += v[i];
        break;
      }
      default: break;
    }
  }
  // What was not collected counts as nothing lost to it: no replay, every lane active.
  if (!p.has_issued) m["sm__inst_issued.sum"] = issued = executed;
  if (!p.has_thread) m["smsp__thread_inst_executed.sum"] = executed * 32;
  m["smsp__warps_active.sum"] = warps;
  m["gpu__time_duration.sum"] = dt_ns;
  try {
    const ab::TopDown t = ab::topdown(m);
    std::string j = "{\"retire\":" + number(t.retire);
    if (p.has_thread || p.has_issued) j += ",\"divergence\":" + number(t.divergence);
    const double stall = t.frontend + t.backend;
    if (p.split == Split::full) {
      j += ",\"frontend\":" + number(t.frontend) + ",\"backend\":" + number(t.backend);
    } else if (p.split == Split::partial) {
      // Each counted reason's share of the warps' cycles without an issue (timeline.py: level1).
      const double idle = warps - issued;
      double fs = idle > 0 ? front / idle : 0.0, bs = idle > 0 ? back / idle : 0.0;
      if (fs + bs > 1) {
        const double sum = fs + bs;
        fs /= sum;
        bs /= sum;
      }
      if (p.has_front) j += ",\"frontend\":" + number(stall * fs);
      if (p.has_back) j += ",\"backend\":" + number(stall * bs);
      j += ",\"stall_other\":" + number(stall - stall * fs - stall * bs);
    } else {
      j += ",\"stall\":" + number(stall);
    }
    return j + ",\"ipc\":" + number(t.ipc) + "}";
  } catch (const ab::EmptyRange&) {
    return "null";
  }
}

void reinit_image(State& s, Image& img) {
  const std::uint64_t t0 = tr::now_ns();
  auto init = params<CUpti_PmSampling_CounterDataImage_Initialize_Params>(
      CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  init.pPmSamplingObject = s.pm;
  init.counterDataSize = img.size;
  init.pCounterData = img.data.get();
  check(cuptiPmSamplingCounterDataImageInitialize(&init), "cuptiPmSamplingCounterDataImageInitialize");
  img.completed = 0;
  ++s.stats.reinits;
  s.stats.reinit_ns += tr::now_ns() - t0;
}

// A fresh image of the same size (not zeroed: CUPTI initialises it).
Image new_image(State& s, std::size_t size) {
  Image img;
  img.data.reset(new std::uint8_t[size]);
  img.size = size;
  reinit_image(s, img);
  return img;
}

// ---- The PM sampling object's calls (the caller holds pm_mu) ----------------------------------

// Enables PM sampling on device `ordinal` (throws saying why it cannot).
void pm_enable(State& s, std::uint32_t ordinal) {
  auto en = params<CUpti_PmSampling_Enable_Params>(CUpti_PmSampling_Enable_Params_STRUCT_SIZE);
  en.deviceIndex = ordinal;
  check(cuptiPmSamplingEnable(&en), "cuptiPmSamplingEnable");
  s.pm = en.pPmSamplingObject;
  s.ordinal = ordinal;
}

// The counter-data image the enabled sampling decodes into: `slots` samples of `metrics`.
void pm_image(State& s, const std::vector<std::string>& metrics, std::uint32_t slots) {
  std::vector<const char*> names;
  for (const std::string& m : metrics) names.push_back(m.c_str());
  auto size = params<CUpti_PmSampling_GetCounterDataSize_Params>(CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE);
  size.pPmSamplingObject = s.pm;
  size.pMetricNames = names.data();
  size.numMetrics = names.size();
  size.maxSamples = slots;
  check(cuptiPmSamplingGetCounterDataSize(&size), "cuptiPmSamplingGetCounterDataSize");
  s.image = new_image(s, size.counterDataSize);
  s.capacity = slots;
  s.metric_names = metrics;
}

// CUPTI's configuration of the enabled sampling (caller holds pm_mu): `config`, the counter set's
// image, at the settings' interval, hardware buffer and append mode, by `trigger`; kept for a
// restart (slow_down) where CUPTI takes it.
CUptiResult set_config(State& s, const std::vector<std::uint8_t>& config, CUpti_PmSampling_TriggerMode trigger) {
  auto set = params<CUpti_PmSampling_SetConfig_Params>(CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE);
  set.pPmSamplingObject = s.pm;
  set.configSize = config.size();
  set.pConfig = config.data();
  set.hardwareBufferSize = s.cfg.hw_buffer;
  set.samplingInterval = s.cfg.interval_ns;
  set.triggerMode = trigger;
  set.hwBufferAppendMode = s.cfg.keep_latest ? CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST
                                             : CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
  const CUptiResult r = cuptiPmSamplingSetConfig(&set);
  if (r == CUPTI_SUCCESS) {
    if (&config != &s.config_used) s.config_used = config;
    s.trigger_mode = trigger;
  }
  return r;
}

CUptiResult pm_start(State& s) {
  auto p = params<CUpti_PmSampling_Start_Params>(CUpti_PmSampling_Start_Params_STRUCT_SIZE);
  p.pPmSamplingObject = s.pm;
  return cuptiPmSamplingStart(&p);
}

CUptiResult pm_stop(State& s) {
  auto p = params<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
  p.pPmSamplingObject = s.pm;
  return cuptiPmSamplingStop(&p);
}

// Disables it; the object is gone whatever CUPTI answers.
CUptiResult pm_disable(State& s) {
  auto p = params<CUpti_PmSampling_Disable_Params>(CUpti_PmSampling_Disable_Params_STRUCT_SIZE);
  p.pPmSamplingObject = s.pm;
  const CUptiResult r = cuptiPmSamplingDisable(&p);
  s.pm = nullptr;
  return r;
}

// A line for each sample of `img` CUPTI completed (the host object's values and the level-1
// fractions), written out.
void evaluate(State& s, const Image& img) {
  const std::uint64_t empty0 = s.stats.empty;
  std::vector<double> values(s.plan.roles.size());
  std::vector<tr::JsonLine> lines;
  for (std::size_t i = 0; i < img.completed; ++i) {
    auto si = params<CUpti_PmSampling_CounterData_GetSampleInfo_Params>(
        CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE);
    si.pPmSamplingObject = s.pm;
    si.pCounterDataImage = img.data.get();
    si.counterDataImageSize = img.size;
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
    if (s.drop_next) {
      s.drop_next = false;
      continue;
    }
    auto ev = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    ev.pHostObject = s.host->get();
    ev.pCounterDataImage = img.data.get();
    ev.counterDataImageSize = img.size;
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
  // Most of a full image without time: the decoding has fallen behind (slow_down).
  if (img.completed >= 64 && 2 * (s.stats.empty - empty0) >= img.completed) s.behind = true;
  std::lock_guard<std::mutex> lock(s.out_mu);
  if (s.out && getpid() == s.pid) {
    for (tr::JsonLine& l : lines) l.write(s.out);
    std::fflush(s.out);
  }
}

// One decode of the hardware buffer into the image (caller holds pm_mu). With the host object
// there, the images set aside before it are evaluated, then this one, which is initialised again
// for the next decode; without it (a cached config image started the sampling before the host
// object was built), an image with samples is set aside and a fresh one takes its place, so that
// the hardware buffer keeps being emptied. A sample still being written stays in the hardware
// buffer for the next decode. The image holds two decodes' samples; where it fills, the rest
// stays in the hardware buffer and this returns true (decode again).
bool decode(State& s, bool host) {
  if (!s.pm || (s.stats.overflow && !s.cfg.keep_latest)) return false;
  const std::uint64_t t0 = tr::now_ns();
  if (host && !s.pending.empty()) {
    for (const Image& img : s.pending) evaluate(s, img);
    s.pending.clear();
  }
  auto dec = params<CUpti_PmSampling_DecodeData_Params>(CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE);
  dec.pPmSamplingObject = s.pm;
  dec.pCounterDataImage = s.image.data.get();
  dec.counterDataImageSize = s.image.size;
  const CUptiResult r = cuptiPmSamplingDecodeData(&dec);
  ++s.stats.decodes;
  if ((r == CUPTI_ERROR_OUT_OF_MEMORY || dec.overflow) && !s.stats.overflow) {
    // Keeping the oldest records, an overflow is permanent: later decodes return nothing.
    s.stats.overflow = true;
    const std::string why = "the PM sampling hardware buffer overflowed: samples after " +
                            std::to_string(s.stats.samples + s.stats.set_aside) +
                            " are lost (raise ARCHBENCH_PM_HW_BUFFER_MB or ARCHBENCH_PM_INTERVAL_US, or lower "
                            "ARCHBENCH_PM_DECODE_MS)";
    std::fprintf(stderr, "%s: %s\n", kTag, why.c_str());
    emit(s, std::move(tr::JsonLine("error").str("reason", why).unum("host_ns", tr::now_ns())), true);
    if (r != CUPTI_SUCCESS) return false;
  } else if (r != CUPTI_SUCCESS) {
    ++s.stats.decode_errors;
    s.stats.last_error = "cuptiPmSamplingDecodeData: " + cupti_words(r);
    return false;
  }
  auto info = params<CUpti_PmSampling_GetCounterDataInfo_Params>(CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = s.image.data.get();
  info.counterDataImageSize = s.image.size;
  check(cuptiPmSamplingGetCounterDataInfo(&info), "cuptiPmSamplingGetCounterDataInfo");
  s.image.completed = std::min(info.numCompletedSamples, s.capacity);
  s.stats.most_per_decode = std::max<std::uint64_t>(s.stats.most_per_decode, s.image.completed);
  const bool full = dec.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
  if (full) ++s.stats.full;
  if (host) {
    evaluate(s, s.image);
    rearm_exit(Rearm::decoded);  // after the first evaluation's statics too
    if (full || info.numPopulatedSamples > 0) reinit_image(s, s.image);
  } else if (full || info.numPopulatedSamples > 0) {
    s.stats.set_aside += s.image.completed;
    s.pending.push_back(std::move(s.image));
    s.image = new_image(s, s.pending.back().size);
  }
  const std::uint64_t dt = tr::now_ns() - t0;
  s.stats.decode_ns += dt;
  s.stats.decode_max_ns = std::max(s.stats.decode_max_ns, dt);
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
    line.str("name", k->name ? tr::demangle(k->name) : "?").unum("start", k->start).unum("end", k->end)
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
    emit(s, std::move(tr::JsonLine("name").unum("id", it->second).str("name", tr::demangle(mangled)).str("mangled", mangled)));
  return it->second;
}

// ---- Start, the decode loop, stop -----------------------------------------------------------

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

// The last decodes and the stop, on the thread that decoded all along, before it ends: made on
// the program's thread at its exit or at cudaDeviceReset (after this thread had ended), the
// decode crashed the program (SIGSEGV in libnvperf_host on the H100).
void last_decode(State& s) {
  {
    std::lock_guard<std::mutex> hl(s.host_mu);
    if (!s.host_ready) return;  // finish waits for the host object and says what it could do
  }
  std::unique_lock<std::timed_mutex> pm(s.pm_mu, std::defer_lock);
  if (!pm.try_lock_for(std::chrono::seconds(5)) || s.stopped || !s.sampling || !s.pm) return;
  try {
    const std::uint64_t t0 = tr::now_ns();
    for (int i = 0; i < 16 && decode(s, true); ++i) {
    }
    const std::uint64_t t1 = tr::now_ns();
    s.last_decode_ns = t1 - t0;
    check(pm_stop(s), "cuptiPmSamplingStop");
    s.last_stop_ns = tr::now_ns() - t1;
  } catch (const std::exception& e) {
    ++s.stats.decode_errors;
    s.stats.last_error = e.what();
  }
  s.stopped = true;
  clock_line(s, "end");
}

// archbench_pmsampler only (ARCHBENCH_PM_SLOW_DOWN=0: never). CUPTI decodes a sample in 40-100 us,
// about as long as the default interval, so on a busy run of more than about half a second the
// decoding falls behind; the records decoded into a full image then carry one repeated timestamp,
// and go on doing so after a stop and a new configuration. Disabled and enabled again, the sampling
// recovers: it restarts here at ten times the interval, up to 1 ms, after a gap of about 0.45 s on
// an H100 (gpu-stream, 5.5 s: all six kernels sampled to the end, against the first 0.4 s without
// this). Said in an `interval` record; the program, in another process, never waits for it.
void slow_down(State& s) {
  s.behind = false;
  if (!s.cfg.sampler || !s.cfg.adapt || s.cfg.interval_ns >= 1000000 || !s.pm || s.stopped) return;
  const std::uint64_t t0 = tr::now_ns(), from = s.cfg.interval_ns;
  std::string error;
  try {
    check(pm_stop(s), "cuptiPmSamplingStop");
    check(pm_disable(s), "cuptiPmSamplingDisable");
    pm_enable(s, s.ordinal);
    s.cfg.interval_ns = std::min<std::uint64_t>(from * 10, 1000000);
    pm_image(s, s.metric_names, std::uint32_t(s.capacity));
    check(set_config(s, s.config_used, s.trigger_mode), "cuptiPmSamplingSetConfig");
    check(pm_start(s), "cuptiPmSamplingStart");
    s.drop_next = true;
  } catch (const std::exception& e) {
    error = e.what();  // nothing more comes: the report's coverage says how much of the run was sampled
    s.stopped = true;
  }
  emit(s, std::move(tr::JsonLine("interval").unum("from_ns", from).unum("interval_ns", s.cfg.interval_ns)
                        .unum("host_ns", t0).unum("gap_ns", tr::now_ns() - t0)
                        .str("why", "the decoding fell behind (most of a full image's records had no time)")
                        .str("error", error)),
       true);
}

// Decodes every decode period until told to stop (the setup thread's, or a thread of its own).
void decode_loop() {
  State& s = state();
  const auto period = std::chrono::milliseconds(s.cfg.decode_ms);
  auto last_flush = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lk(s.ctl_mu);
  while (!s.stop_thread) {
    s.ctl_cv.wait_for(lk, period, [&] { return s.stop_thread; });
    if (s.stop_thread) break;
    lk.unlock();
    bool host;
    {
      std::lock_guard<std::mutex> hl(s.host_mu);
      host = s.host_ready;  // until the host object is there, decoded images are set aside
    }
    {
      std::unique_lock<std::timed_mutex> pm(s.pm_mu, std::try_to_lock);
      if (pm.owns_lock() && !s.stopped) try {
          for (int i = 0; i < 4 && decode(s, host); ++i) {
          }
          if (s.behind) slow_down(s);
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
  lk.unlock();
  last_decode(s);
  lk.lock();
  s.thread_running = false;
  s.ctl_cv.notify_all();
}

// Starts `body` on a thread of the library with every signal blocked (it never takes one of the
// program's); false where no thread could be made.
bool spawn(void (*body)(), const char* what) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    s.thread_running = true;
  }
  const bool ok = tr::spawn_quiet(body);
  if (!ok) {
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    s.thread_running = false;
    std::fprintf(stderr, "%s: no %s thread\n", kTag, what);
  }
  return ok;
}

// Everything host-side for device `ordinal`: the chip, its counter availability, the one-pass
// set (cache or search) and its config image, in a host object; timed into `t`.
struct Prep {
  std::uint32_t ordinal = 0;
  std::string chip, name, bus;
  std::vector<std::uint8_t> availability;
  Choice choice;
  std::size_t base_count = 0;
};

std::unique_ptr<Prep> prepare(State& s, std::uint32_t ordinal, Times& t) {
  auto p = std::make_unique<Prep>();
  p->ordinal = ordinal;
  CUdevice dev = 0;
  char name[256] = "", bus[32] = "";
  if (cuDeviceGet(&dev, int(ordinal)) == CUDA_SUCCESS) {
    cuDeviceGetName(name, sizeof name, dev);
    cuDeviceGetPCIBusId(bus, sizeof bus, dev);
  }
  p->name = name;
  p->bus = bus;
  auto init = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  if (const CUptiResult r = cuptiProfilerInitialize(&init); r != CUPTI_ERROR_INVALID_OPERATION)  // done already
    check(r, "cuptiProfilerInitialize");
  t.lap("profiler_init_ns");
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
  p->chip = chip.pChipName ? chip.pChipName : "";
  t.lap("chip_ns");
  // The counter availability image: the cache's where it holds one with its config image (the
  // query took 0.17 s on an H100, on the path to the first launch; a set the device then refuses
  // fails at cuptiPmSamplingSetConfig, which says why), else the device's.
  std::unique_ptr<Cached> cached = s.cfg.metrics.empty() ? read_cache(cache_path(s.cfg, p->chip), p->chip) : nullptr;
  auto query_availability = [&] {
    auto avail = params<CUpti_PmSampling_GetCounterAvailability_Params>(
        CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE);
    avail.deviceIndex = ordinal;
    check(cuptiPmSamplingGetCounterAvailability(&avail), "cuptiPmSamplingGetCounterAvailability");
    p->availability.resize(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = p->availability.data();
    check(cuptiPmSamplingGetCounterAvailability(&avail), "cuptiPmSamplingGetCounterAvailability");
    t.lap("availability_ns");
  };
  if (cached && !cached->config.empty() && !cached->availability.empty()) {
    p->availability = cached->availability;
    t.lap("availability_cached_ns");
  } else {
    query_availability();
  }
  // The chip's counters are listed only where the set is not cached (a cache hit: one host object;
  // a cached set that no longer takes one pass: listed, and searched again).
  std::vector<std::string> base;
  auto list = [&] {
    Host lister(p->chip, p->availability);
    t.lap("host_init_ns");
    base = lister.base_metrics();
    t.lap("base_metrics_ns");
    emit(s, std::move(tr::JsonLine("base_metrics").str("chip", p->chip).raw("metrics", json_strings(base))));
  };
  if (!cached) list();
  try {
    p->choice = choose(s.cfg, p->chip, p->availability, base, cached.get(), t);
  } catch (const std::exception&) {
    if (!cached) throw;
    if (p->availability == cached->availability) query_availability();
    list();
    p->choice = choose(s.cfg, p->chip, p->availability, base, nullptr, t);
  }
  p->base_count = base.size();
  if (!p->choice.host) start_host_builder(s, p->chip, p->availability, p->choice.metrics, p->choice.config);
  return p;
}

// Takes the GPU's lock (ARCHBENCH_PM_LOCK_DIR, default /tmp: archbench-pmsampling-<PCI bus>.lock),
// held until the process ends; throws where another process holds it. A second PM-sampling
// session's enable stops the first one's samples (seen on the H100: the first kept 1 sample) before
// CUPTI refuses its configuration, so two archbench timelines on one GPU never try at once.
void lock_device(State& s, const Prep& prep) {
  if (s.device_lock >= 0) return;
  const char* dir = std::getenv("ARCHBENCH_PM_LOCK_DIR");
  const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/archbench-pmsampling-" +
                           (prep.bus.empty() ? std::to_string(prep.ordinal) : prep.bus) + ".lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);  // another user's file
  if (fd < 0) return;  // no lock to be had: CUPTI alone decides
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = "";
    const ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
    pid[n > 0 ? n : 0] = '\0';
    close(fd);
    std::string who = pid;
    while (!who.empty() && std::isspace(static_cast<unsigned char>(who.back()))) who.pop_back();
    throw std::runtime_error("another archbench timeline samples this GPU (process " + (who.empty() ? "?" : who) +
                             ", " + path + "): not started, which would have stopped its sampling");
  }
  if (ftruncate(fd, 0) == 0) {
    const std::string me = std::to_string(getpid()) + "\n";
    if (pwrite(fd, me.data(), me.size(), 0) < 0) {
    }
  }
  s.device_lock = fd;
}

// Enables PM sampling on the prepared device, with a counter-data image and hardware buffer sized
// to the interval and the decode period, and starts it (throws saying why it cannot); writes the
// config record with the setup's times (`t`).
void start_device(State& s, Prep& prep, Times& t, const std::string& start_how) {
  lock_device(s, prep);
  Plan plan = plan_of(prep.choice.metrics, prep.choice.chip_reasons);
  plan.notes.insert(plan.notes.end(), prep.choice.notes.begin(), prep.choice.notes.end());
  const std::vector<std::string> metrics = prep.choice.metrics;
  std::unique_lock<std::timed_mutex> pm(s.pm_mu);
  pm_enable(s, prep.ordinal);
  t.lap("enable_ns");
  if (prep.choice.host) {
    std::lock_guard<std::mutex> lk(s.host_mu);
    s.host = std::move(prep.choice.host);
    s.host_ready = true;
  }
  s.plan = plan;
  std::string trigger = "gpu time";
  std::size_t slot = 0;
  const double per_decode = double(s.cfg.decode_ms) * 1e6 / double(std::max<std::uint64_t>(s.cfg.interval_ns, 1));
  try {
    // The image: two decodes' samples and 64 more (a decode that fills it decodes again).
    const std::uint32_t slots =
        s.cfg.max_samples ? s.cfg.max_samples : std::uint32_t(std::clamp(2 * per_decode + 64, 128.0, 16384.0));
    pm_image(s, metrics, slots);
    slot = s.image.size / std::max<std::uint32_t>(slots, 1);
    s.stats.reinits = 0;
    s.stats.reinit_ns = 0;
    t.lap("counter_data_ns");
    // The hardware buffer: 8 decodes' samples at the image's size per sample (the raw records are
    // not larger), 32 to 512 MB, unless given; in archbench_pmsampler's process 512 MB (CUPTI
    // Python's default): a 5.5 s memory-bound run on an H100 overflowed 74 MB, as the first decodes
    // waited for the host object, and none of six overflowed 512 MB (where the decoding falls
    // behind all the same, slow_down restarts the sampling).
    std::size_t hw = s.cfg.hw_buffer;
    if (!hw && s.cfg.sampler) hw = std::size_t(512) << 20;
    if (!hw) {
      const double want = double(slot) * std::max(per_decode, 1.0) * 8;
      hw = std::size_t(std::clamp(std::ceil(want / double(1 << 20)), 32.0, 512.0)) << 20;
    }
    s.cfg.hw_buffer = hw;
    const std::vector<std::uint8_t>* config = &prep.choice.config;
    CUptiResult r = set_config(s, *config, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL);
    if (r != CUPTI_SUCCESS && !prep.choice.host && wait_for_host(s, std::chrono::seconds(10))) {
      config = &s.host->image();  // the cached image refused: the host object's
      r = set_config(s, *config, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL);
    }
    if (r != CUPTI_SUCCESS) {
      // Chips without the time trigger (Turing, GA100): the interval in SYS clock cycles, taken at 1 GHz.
      const std::string first = "cuptiPmSamplingSetConfig (GPU time trigger: " + cupti_words(r) + "; SYS clock trigger)";
      check(set_config(s, *config, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL), first.c_str());
      trigger = "sysclk cycles (interval taken at 1 GHz)";
    }
    t.lap("set_config_ns");
    check(pm_start(s), "cuptiPmSamplingStart");
    t.lap("start_ns");
    rearm_exit(Rearm::started);
  } catch (...) {  // leave the device as it was
    pm_disable(s);
    throw;
  }
  const std::uint64_t started = tr::now_ns();
  pm.unlock();
  clock_line(s, "start");
  std::uint64_t total = 0;
  for (const auto& [k, v] : t.parts)
    if (k != "cu_init_ns" && k != "waited_for_context_ns") total += v;
  const Choice& c = prep.choice;
  emit(s, std::move(tr::JsonLine("config")
                        .str("chip", prep.chip).unum("device", prep.ordinal).str("device_name", prep.name)
                        .str("pci_bus_id", prep.bus).unum("interval_ns", s.cfg.interval_ns).str("trigger", trigger)
                        .unum("hw_buffer_bytes", s.cfg.hw_buffer).unum("max_samples", s.capacity)
                        .unum("counter_data_bytes", s.image.size).unum("counter_data_sample_bytes", slot)
                        .unum("decode_ms", s.cfg.decode_ms).str("append", s.cfg.keep_latest ? "latest" : "oldest")
                        .unum("passes", 1).raw("metrics", json_strings(metrics)).raw("roles", json_object(plan.roles_json))
                        .raw("stall_class", json_object(plan.classes)).raw("level1", json_strings(plan.quantities))
                        .str("split", plan.split == Split::full ? "full" : plan.split == Split::partial ? "partial" : "none")
                        .raw("notes", json_strings(plan.notes)).raw("approximations", json_strings(plan.approximations))
                        .raw("not_collected", json_object(c.rejected)).str("selection", c.how)
                        .unum("selection_trials", c.trials).raw("search", c.search).unum("base_metrics", prep.base_count)
                        .unum("chip_stall_reasons", c.chip_reasons.size()).str("activity", s.activity)
                        .str("start", start_how).raw("setup", t.json()).unum("setup_ns", total)
                        .unum("start_ns", started)),
       true);
  s.sampling = true;
  std::string q;
  for (const std::string& x : plan.quantities) q += (q.empty() ? "" : ", ") + x;
  std::fprintf(stderr, "%s: sampling %s every %g us (%zu counters, one pass: %s)\n", kTag, prep.name.c_str(),
               double(s.cfg.interval_ns) / 1e3, metrics.size(), q.c_str());
}

// ARCHBENCH_PM_START=early: where the process sees one device and no context has asked yet, the
// sampling starts there now, ahead of the program's context (PM sampling is the device's, not a
// context's), so that the program's context creation and its first steps hide CUPTI's enable and
// set-up (0.1-0.15 s on an H100, on the first launch's path otherwise). Where it sees several
// devices, or the start fails, it waits for the first context as `context` does (said in the
// config record's `start`). Returns how the start was made, or why not ahead.
std::string start_early(State& s, Prep& prep, Times& t) {
  int count = 0;
  if (s.cfg.device < 0 && (cuDeviceGetCount(&count) != CUDA_SUCCESS || count != 1))
    return "context (not ahead: " + std::to_string(count) + " devices, the first context's sampled)";
  {
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    if (s.want_device >= 0 || s.stop_thread) return "context (a context came first)";
    s.want_device = int(prep.ordinal);  // a context created meanwhile is only recorded (ask_for)
    s.trigger = "library loaded (one device)";
    s.trigger_ns = tr::now_ns();
    s.phase = Phase::starting;
  }
  try {
    start_device(s, prep, t, "early (one device, ahead of the program's context)");
    return std::string();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    if (!s.ctx) s.want_device = -1;  // the first context will ask again
    else s.trigger = "context created";  // it asked meanwhile
    s.phase = Phase::prepared;
    return std::string("context (not ahead: ") + e.what() + ")";
  }
}

// The library's thread (ARCHBENCH_PM_START early, context or launch): prepares as soon as the
// driver is initialised, starts the sampling at once (early, one device) or on the device asked
// for (the first context's, or the first launch's), then decodes until the end.
void setup_main() {
  State& s = state();
  Times t;
  {  // the driver's initialisation is the program's cuInit, which loaded this library: let it return
    std::unique_lock<std::mutex> lk(s.ctl_mu);
    s.ctl_cv.wait_for(lk, std::chrono::seconds(10), [&] { return s.injection_done || s.stop_thread; });
    s.phase = Phase::preparing;
  }
  const CUresult r = tr::driver_ready();
  t.lap("cu_init_ns");
  std::unique_ptr<Prep> prep;
  std::string error;
  if (r != CUDA_SUCCESS) {
    error = "cuInit: " + tr::cu_words(r);  // no device: the program says so itself
  } else {
    try {
      prep = prepare(s, std::uint32_t(std::max(s.cfg.device, 0)), t);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  int device = -1;
  std::string start_how = s.cfg.start;
  if (prep && s.cfg.start == "early") start_how = start_early(s, *prep, t);
  if (s.cfg.sampler && !s.sampling && error.empty())
    error = "archbench_pmsampler could not start the sampling ahead of the program: " + start_how;
  if (s.sampling) {
    device = int(prep->ordinal);
  } else if (error.empty()) {
    std::unique_lock<std::mutex> lk(s.ctl_mu);
    if (prep) {
      s.phase = Phase::prepared;
      s.ctl_cv.notify_all();
      const std::uint64_t w0 = tr::now_ns();
      s.ctl_cv.wait(lk, [&] { return s.want_device >= 0 || s.stop_thread; });
      t.put("waited_for_context_ns", tr::now_ns() - w0);
      t.last = tr::now_ns();
      device = s.stop_thread ? -1 : s.want_device;
      start_how += " (" + s.trigger + ")";
      if (device >= 0) s.phase = Phase::starting;
    }
  }
  if (!error.empty()) {
    if (r == CUDA_SUCCESS) fail(s, error);
    else emit(s, std::move(tr::JsonLine("error").str("reason", error).unum("host_ns", tr::now_ns())), true);
  } else if (device >= 0 && !s.sampling) {
    try {
      if (std::uint32_t(device) != prep->ordinal) prep = prepare(s, std::uint32_t(device), t);
      start_device(s, *prep, t, start_how);
    } catch (const std::exception& e) {
      fail(s, e.what());
    }
  }
  set_phase(s, s.sampling ? Phase::sampling : (device >= 0 || !error.empty() ? Phase::failed : Phase::stopped));
  if (s.sampling) {
    decode_loop();
    return;
  }
  std::lock_guard<std::mutex> lk(s.ctl_mu);
  s.thread_running = false;
  s.ctl_cv.notify_all();
}

// The setup thread's body: setup_main, then a word that it has returned, so that finish can wait
// until the thread's own objects (CUPTI's among them) are destroyed before the process goes on
// with its exit (an uncached first run, whose search made them, hung or died at exit otherwise).
void setup_entry() {
  setup_main();
  State& s = state();
  std::lock_guard<std::mutex> lk(s.ctl_mu);
  s.setup_returned = true;
  s.ctl_cv.notify_all();
}

// Stops sampling, decodes the rest, disables PM sampling and writes the end record, once (at exit
// or when the sampled context is destroyed). Never waits for long: a thread or a CUPTI call that
// does not return in time is left, and said.
void finish(const char* why, int wait_s) {
  State& s = state();
  if (getpid() != s.pid || s.finished.exchange(true)) return;  // a forked child, or done already
  Times t;
  std::string trouble;
  {
    std::unique_lock<std::mutex> lk(s.ctl_mu);
    s.stop_thread = true;
    s.ctl_cv.notify_all();
    if (!s.ctl_cv.wait_for(lk, std::chrono::seconds(wait_s), [&] {
          return !s.thread_running && (s.setup_returned || s.cfg.start == "sync");
        }))
      trouble = "the library's thread did not stop within " + std::to_string(wait_s) + " s";
  }
  t.lap("join_ns");
  if (s.stopped) {  // by last_decode, on the library's thread
    t.put("final_decode_ns", s.last_decode_ns);
    t.put("stop_ns", s.last_stop_ns);
  }
  const bool host = !s.sampling || wait_for_host(s, std::chrono::seconds(wait_s));
  t.lap("host_wait_ns");
  std::unique_lock<std::timed_mutex> pm(s.pm_mu, std::defer_lock);
  if (!host) {
    trouble = "no host object to evaluate the samples with (see the host record): none written";
    if (pm.try_lock_for(std::chrono::seconds(wait_s)) && s.pm) {
      pm_stop(s);
      pm_disable(s);
      s.stopped = true;
    }
  } else if (!pm.try_lock_for(std::chrono::seconds(wait_s))) {
    trouble = "CUPTI did not return within " + std::to_string(wait_s) + " s: the last samples are not decoded";
  } else if (s.sampling && !s.stopped) {
    try {
      // Where the library's thread could not (see last_decode).
      for (int i = 0; i < 16 && decode(s, true); ++i) {
      }
      t.lap("final_decode_ns");
      check(pm_stop(s), "cuptiPmSamplingStop");
      t.lap("stop_ns");
    } catch (const std::exception& e) {
      trouble = e.what();
    }
    s.stopped = true;
    clock_line(s, "end");
    if (s.cfg.disable) {
      if (const CUptiResult r = pm_disable(s); r != CUPTI_SUCCESS && trouble.empty())
        trouble = "cuptiPmSamplingDisable: " + cupti_words(r);
      t.lap("disable_ns");
    }
  }
  if (pm.owns_lock()) pm.unlock();
  std::uint64_t total = s.flush_ns;
  for (const auto& [k, v] : t.parts) total += v;
  t.put("flush_ns", s.flush_ns);
  t.put("total_ns", total);
  const Stats st = s.stats;
  if (!st.last_error.empty() && trouble.empty()) trouble = st.last_error;
  const char* phase = s.sampling        ? "sampled"
                      : s.cfg.outside() ? "outside (archbench_pmsampler sampled the device)"
                      : s.phase == Phase::failed ? "failed"
                      : s.phase == Phase::preparing || s.phase == Phase::prepared ? "never started (no context or launch)"
                                                                                   : "never started";
  emit(s, std::move(tr::JsonLine("end").str("why", why).str("sampling", phase).unum("samples", st.samples)
                        .unum("idle", st.idle).unum("lost", st.lost).unum("empty", st.empty).unum("decodes", st.decodes)
                        .unum("decode_errors", st.decode_errors).unum("image_reinits", st.reinits)
                        .unum("image_full", st.full).boolean("overflow", st.overflow)
                        .unum("launches", s.launches.load()).unum("kernel_records", s.kernel_records.load())
                        .unum("first_launch_wait_ns", s.first_wait_ns)
                        .raw("decode", "{\"total_ns\":" + std::to_string(st.decode_ns) + ",\"max_ns\":" +
                                           std::to_string(st.decode_max_ns) + ",\"reinit_ns\":" +
                                           std::to_string(st.reinit_ns) + ",\"most_samples\":" +
                                           std::to_string(st.most_per_decode) + ",\"set_aside\":" +
                                           std::to_string(st.set_aside) + "}")
                        .raw("exit", t.json()).str("trouble", trouble).unum("end_ns", tr::now_ns())),
       true);
  if (s.cfg.outside())
    std::fprintf(stderr, "%s: %llu kernel records, %llu launches (the device sampled by archbench_pmsampler); %s\n",
                 kTag, static_cast<unsigned long long>(s.kernel_records.load()),
                 static_cast<unsigned long long>(s.launches.load()), s.out_path.c_str());
  else if (s.sampling)
    std::fprintf(stderr, "%s: %llu samples%s, %llu kernel records, %llu launches; %s\n", kTag,
                 static_cast<unsigned long long>(st.samples), st.lost ? " (some lost)" : "",
                 static_cast<unsigned long long>(s.kernel_records.load()),
                 static_cast<unsigned long long>(s.launches.load()), s.out_path.c_str());
  if (!trouble.empty()) std::fprintf(stderr, "%s: %s\n", kTag, trouble.c_str());
}

// Once, from tr::exit_first (which says why it runs before anything else).
void at_exit() {
  State& s = state();
  try {
    const std::uint64_t t0 = tr::now_ns();
    if (s.activity_on) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // before finish: no lock of ours held
    s.flush_ns = tr::now_ns() - t0;
    finish("exit", 10);
  } catch (...) {
  }
}

// Registered again once CUPTI's lazily built objects exist (the first host object, the start,
// the first decode evaluated), so that at_exit runs before their destructors (tr::exit_first).
void rearm_exit(Rearm point) {
  static std::atomic<bool> done[3];
  if (!done[int(point)].exchange(true)) tr::exit_first(at_exit);
}

// The device of `ctx` asked for (the first context, or the first launch's): the setup thread
// starts the sampling there.
void ask_for(State& s, CUcontext ctx, const char* trigger) {
  std::uint32_t ordinal = 0;
  if (cuptiGetDeviceId(ctx, &ordinal) != CUPTI_SUCCESS) return;
  std::lock_guard<std::mutex> lk(s.ctl_mu);
  if (s.want_device >= 0) {  // started early, or starting: the first context on that device is the one sampled
    if (!s.ctx && int(ordinal) == s.want_device) s.ctx = ctx;
    return;
  }
  s.want_device = int(ordinal);
  s.want_ctx = ctx;
  s.ctx = ctx;
  s.trigger = trigger;
  s.trigger_ns = tr::now_ns();
  s.ctl_cv.notify_all();
}

// The first launch, or any launch while the start is under way: waits for it (at most
// ARCHBENCH_PM_WAIT_S; 0: not at all), so that no kernel goes unsampled; the first wait is
// recorded.
void wait_for_start(State& s, CUcontext ctx) {
  ask_for(s, ctx, "first launch");
  const bool no_wait = s.cfg.wait_s <= 0;  // launches go on, unsampled until the start (the report says how many)
  const std::uint64_t t0 = tr::now_ns();
  bool settled = true;
  {
    std::unique_lock<std::mutex> lk(s.ctl_mu);
    if (!no_wait)
      settled = s.ctl_cv.wait_for(lk, std::chrono::milliseconds(std::int64_t(s.cfg.wait_s * 1000)),
                                  [&] { return s.settled.load() || !s.thread_running; });
    if (s.first_waited) return;
    s.first_waited = true;
  }
  s.first_wait_ns = no_wait ? 0 : tr::now_ns() - t0;
  tr::JsonLine wait("wait");
  wait.unum("waited_ns", s.first_wait_ns).unum("host_ns", tr::now_ns())
      .unum("since_trigger_ns", tr::now_ns() - s.trigger_ns).str("trigger", s.trigger)
      .boolean("sampling", s.sampling.load()).boolean("timed_out", !settled);
  if (no_wait) wait.boolean("no_wait", true);
  emit(s, std::move(wait), true);
  if (!settled) {
    s.gave_up = true;
    const std::string why = "the first launch waited " + number(s.cfg.wait_s) +
                            " s for the sampling to start and went on: its kernels may be unsampled";
    std::fprintf(stderr, "%s: %s\n", kTag, why.c_str());
    emit(s, std::move(tr::JsonLine("error").str("reason", why).unum("host_ns", tr::now_ns())), true);
  }
}

// Every launch is recorded; the first waits for the sampling to start (or, with
// ARCHBENCH_PM_START=sync, starts it here).
void on_launch(State& s, const CUpti_CallbackData* cb, CUpti_CallbackId id) {
  if (cb->callbackSite != CUPTI_API_ENTER || s.finished) return;
  if (!s.settled && !s.gave_up) {
    if (s.cfg.start == "sync") {
      {
        std::lock_guard<std::mutex> lock(s.ctl_mu);  // the first launch's setup, every other launch waiting
        if (!s.settled) {
          const std::uint64_t t0 = tr::now_ns();
          Times t;
          try {
            std::uint32_t ordinal = 0;
            check(cuptiGetDeviceId(cb->context, &ordinal), "cuptiGetDeviceId");
            s.ctx = cb->context;
            auto prep = prepare(s, ordinal, t);
            start_device(s, *prep, t, "sync (first launch)");
          } catch (const std::exception& e) {
            fail(s, e.what());
          }
          s.phase = s.sampling ? Phase::sampling : Phase::failed;
          s.settled = true;
          s.first_waited = true;
          s.first_wait_ns = tr::now_ns() - t0;
          emit(s, std::move(tr::JsonLine("wait").unum("waited_ns", s.first_wait_ns).unum("host_ns", tr::now_ns())
                                .unum("since_trigger_ns", s.first_wait_ns).str("trigger", "first launch (sync)")
                                .boolean("sampling", s.sampling.load()).boolean("timed_out", false)),
               true);
        }
      }
      if (s.sampling && !s.decode_spawned.exchange(true)) spawn(decode_loop, "decode");
    } else {
      wait_for_start(s, cb->context);
    }
  }
  if (!s.sampling && !s.cfg.outside()) return;
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
    } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
      if (s.cfg.start == "context" || s.cfg.start == "early") ask_for(s, static_cast<const CUpti_ResourceData*>(data)->context, "context created");
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
  const std::uint64_t t0 = tr::now_ns();
  s.pid = getpid();
  Settings& c = s.cfg;
  c.interval_ns = std::uint64_t(env_number("ARCHBENCH_PM_INTERVAL_US", 100, 0.001, 1e7) * 1e3);
  c.decode_ms = unsigned(env_number("ARCHBENCH_PM_DECODE_MS", 20, 1, 10000));
  c.hw_buffer = std::size_t(env_number("ARCHBENCH_PM_HW_BUFFER_MB", 0, 0, 65536)) << 20;
  c.max_samples = std::uint32_t(env_number("ARCHBENCH_PM_MAX_SAMPLES", 0, 0, 1 << 20));
  c.wait_s = env_number("ARCHBENCH_PM_WAIT_S", 10, 0, 3600);
  if (c.max_samples && c.max_samples < 16) c.max_samples = 16;
  if (const char* e = std::getenv("ARCHBENCH_PM_APPEND")) c.keep_latest = std::string(e) == "latest";
  if (const char* e = std::getenv("ARCHBENCH_PM_KERNELS")) c.kernels = std::string(e) != "0";
  if (const char* e = std::getenv("ARCHBENCH_PM_DISABLE")) c.disable = std::string(e) != "0";
  if (const char* e = std::getenv("ARCHBENCH_PM_METRICS")) c.metrics = e;
  if (const char* e = std::getenv("ARCHBENCH_PM_CACHE")) c.cache = e;
  if (const char* e = std::getenv("ARCHBENCH_PM_START"); e && *e) {
    const std::string v = e;
    if (v == "early" || v == "context" || v == "launch" || v == "sync" || v == "outside") c.start = v;
    else std::fprintf(stderr, "%s: ARCHBENCH_PM_START=%s is not early, context, launch, sync or outside; using early\n", kTag, e);
  }
  if (const char* e = std::getenv("ARCHBENCH_PM_ROLE")) c.sampler = std::string(e) == "sampler";
  if (const char* e = std::getenv("ARCHBENCH_PM_SLOW_DOWN")) c.adapt = std::string(e) != "0";
  c.device = int(env_number("ARCHBENCH_PM_DEVICE", -1, -1, 1 << 16));
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
                        .unum("start_ns", t0).str("date", date)),
       true);
  if (const CUptiResult r = cuptiSubscribe(&s.sub, callback, nullptr); r != CUPTI_SUCCESS) {
    fail(s, "cuptiSubscribe: " + cupti_words(r) + " (another CUPTI client, such as Nsight, may hold it)");
    return 0;
  }
  for (CUpti_CallbackId id : tr::kLaunches) cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  for (CUpti_CallbackId id : {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz})
    cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
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
  tr::exit_first(at_exit);
  if (c.outside()) {  // archbench_pmsampler samples the device: kernels and launches only, flushed as they go
    clock_line(s, "program");
    set_phase(s, Phase::stopped);
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    s.setup_returned = true;
  }
  if (c.outside() ? !spawn(decode_loop, "flush") : c.start != "sync" && !spawn(setup_entry, "setup")) {
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    s.setup_returned = true;  // no thread to wait for
  }
  {
    std::lock_guard<std::mutex> lk(s.ctl_mu);
    s.injection_done = true;
    s.ctl_cv.notify_all();
  }
  emit(s, std::move(tr::JsonLine("injection").str("start", c.start).unum("init_ns", tr::now_ns() - t0)), true);
  return 1;
}
