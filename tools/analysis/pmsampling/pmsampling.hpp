// What the parts of the PM sampling library share: inject.cpp (the injection library: the start,
// the sampling and its decoding, launches and kernel records, the exit) and metrics.cpp (the
// counters that fit in one pass, the cache of that choice, and what level 1 they allow).
#pragma once
#include <cuda.h>
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <sys/types.h>
#include <cupti_profiler_host.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fixtures/meters/topdown.hpp"
#include "tools/analysis/common/common.hpp"
#include "tools/analysis/common/cupti.hpp"

namespace archbench::pmsampling {

namespace ab = archbench;
namespace tr = archbench::trace;

constexpr const char* kTag = "archbench-pmsampling";
constexpr const char* kCacheHeader = "# archbench-pmsampling one-pass set v2";

enum class Rearm { host_object, started, decoded };
void rearm_exit(Rearm point);

using tr::cupti_words, tr::params;
// Throws with CUPTI's own words for `r`, and what to do about it (tools/analysis/common/cupti.hpp).
constexpr auto check = tr::cupti_check;

inline std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

inline std::string json_strings(const std::vector<std::string>& v) {
  std::string s = "[";
  for (const std::string& x : v) {
    if (s.size() > 1) s += ',';
    s += tr::JsonLine::quote(x);
  }
  return s + "]";
}

inline std::string json_object(const std::map<std::string, std::string>& m) {
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

// ---- The counters: which part of the level-1 formulas each collected metric feeds (metrics.cpp)

enum class Role { cycles, executed, issued, thread, warps, stall, other };
const char* role_name(Role r);
inline bool frontend_class(ab::StallClass c) { return c == ab::StallClass::fetch || c == ab::StallClass::decode; }
inline bool backend_class(ab::StallClass c) { return c == ab::StallClass::memory || c == ab::StallClass::core; }

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

// ---- Choosing the one-pass set (metrics.cpp) --------------------------------------------------

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

// The file the one-pass set of `chip` is cached in ("" where none is).
std::string cache_path(const Settings& cfg, const std::string& chip);
std::unique_ptr<Cached> read_cache(const std::string& path, const std::string& chip);
// The one-pass set: the user's, the cached one (`cached`, where it still takes one pass) or the
// search's over the chip's counters (`base`: listed only where there is no usable cache).
Choice choose(const Settings& cfg, const std::string& chip, std::vector<std::uint8_t>& availability,
              const std::vector<std::string>& base, const Cached* cached, Times& t);

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
Plan plan_of(const std::vector<std::string>& metrics, const std::set<std::string>& chip_reasons);

// ---- The library's state (inject.cpp, sampling.cpp, start.cpp) ------------------------------

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
  tr::TraceFile out;  // ARCHBENCH_PM_OUT (tools/analysis/FORMAT.md)
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

// The process's one state (never destroyed: callbacks and the threads may outlive exit).
State& state();
// Writes a record to the file (flushed where `flush`); nothing in a forked child.
void emit(State& s, tr::JsonLine&& line, bool flush = false);
// Says on stderr and in an error record why the sampling stops; the program runs on.
void fail(State& s, const std::string& why);
void set_phase(State& s, Phase p);
// Waits (at most `limit`) for the host object: true where it is there.
bool wait_for_host(State& s, std::chrono::milliseconds limit);

// ---- The PM sampling object and the decoding (sampling.cpp; the caller holds pm_mu) -----------

// Enables PM sampling on device `ordinal` (throws saying why it cannot).
void pm_enable(State& s, std::uint32_t ordinal);
// The counter-data image the enabled sampling decodes into: `slots` samples of `metrics`.
void pm_image(State& s, const std::vector<std::string>& metrics, std::uint32_t slots);
// CUPTI's configuration of the enabled sampling: `config` at the settings' interval, hardware
// buffer and append mode, by `trigger`; kept for a restart where CUPTI takes it.
CUptiResult set_config(State& s, const std::vector<std::uint8_t>& config, CUpti_PmSampling_TriggerMode trigger);
CUptiResult pm_start(State& s);
CUptiResult pm_stop(State& s);
// Disables it; the object is gone whatever CUPTI answers.
CUptiResult pm_disable(State& s);
// One decode of the hardware buffer into the image, evaluated where the host object is there
// (`host`); true where the image filled and the rest waits in the hardware buffer (decode again).
bool decode(State& s, bool host);
// A `clock` record: CUPTI's clock against the host's, now.
void clock_line(State& s, const char* when);
// Decodes every decode period until told to stop (the setup thread's, or a thread of its own).
void decode_loop();

// ---- The start (start.cpp) --------------------------------------------------------------------

// Everything host-side for device `ordinal`: the chip, its counter availability, the one-pass
// set (cache or search) and its config image, in a host object; timed into `t`.
struct Prep {
  std::uint32_t ordinal = 0;
  std::string chip, name, bus;
  std::vector<std::uint8_t> availability;
  Choice choice;
  std::size_t base_count = 0;
};

std::unique_ptr<Prep> prepare(State& s, std::uint32_t ordinal, Times& t);
// Enables PM sampling on the prepared device, configures it and starts it (throws saying why it
// cannot); writes the config record with the setup's times (`t`).
void start_device(State& s, Prep& prep, Times& t, const std::string& start_how);
// Starts `body` on a thread of the library with every signal blocked (it never takes one of the
// program's); false, said, where no thread could be made.
bool spawn(void (*body)(), const char* what);
// The setup thread's body.
void setup_entry();

}  // namespace archbench::pmsampling
