// TopDown for any CUDA program, unchanged: a CUPTI injection library (CUDA_INJECTION64_PATH,
// set up by tools/archbench_topdown.py). Every kernel launch that passes the filter is one range
// of CUPTI's range profiler in auto-range, kernel-replay mode (CUPTI replays the kernel as many
// passes as the counters need, restoring its memory in between); its counters go through the
// same TopDown arithmetic as archbench's own td_* counters (fixtures/meters/topdown.cpp) and one JSON
// line per launch is written at exit. Environment (set by the command):
//   ARCHBENCH_TOPDOWN_OUT     output file (default ./topdown-<pid>.jsonl)
//   ARCHBENCH_TOPDOWN_KERNEL  ECMAScript regex; only kernels whose demangled or mangled name
//                             matches it are profiled (others run natively, unobserved)
//   ARCHBENCH_TOPDOWN_MAX     profile at most this many launches of each kernel (0: all)
//   ARCHBENCH_TOPDOWN_SAMPLE  profile the first N launches of each kernel and launch shape (grid,
//                             block), default 2; 0: every launch. The others run natively, and
//                             their GPU time (CUPTI's activity records, or where those cannot be
//                             had, the shape's measured mean) weights the profiled ones.
//   ARCHBENCH_TOPDOWN_BUDGET  at most this many seconds of replays for each second of the program's
//                             own time so far (default 0: no limit); a launch that would be profiled
//                             over it runs natively and counts by its GPU time ("over_budget"), and
//                             a later launch of its shape is profiled when the budget allows
//   ARCHBENCH_TOPDOWN_FLUSH_MS  the pending launches are decoded at a synchronisation at most this
//                             often (default 500; 0: at every one), and after 64 launches, at a
//                             launch left unprofiled and at exit: each decode ends CUPTI's session,
//                             and the next profiled launch pays for a new one (about 14 ms on an H100)
//   ARCHBENCH_TOPDOWN_WATCHDOG_S  seconds a profiled launch may replay before the library says
//                             on stderr that it may never end (default 20)
//   ARCHBENCH_TOPDOWN_PREPARE  1 (default): CUPTI's set-up is done ahead, on threads of the library,
//                             while the program makes its context and its data: the host side (the
//                             chip's host object, the counter set's config image: 0.1-0.5 s on an
//                             H100) from the library's load, and as soon as the program's first
//                             context exists, the range profiler enabled on it, configured and
//                             primed (a first, empty session started and stopped: CUPTI's first
//                             start took 0.2-0.3 s, later ones a few ms), while no launch is in its
//                             call (launches hold a gate from their call's entry to its exit; one
//                             that comes meanwhile waits). The first profiled launch waits only for
//                             what is left of it. 0: all of it at the first profiled launch. The end
//                             line says how long each took and how long the first launch waited
//                             (prepare_s, enable_ahead_s, enable_ahead, prepare_wait_s).
//   ARCHBENCH_TOPDOWN_METRICS "traffic": collect the traffic set instead (fixtures/meters/traffic.hpp:
//                             bytes per level, flops by precision) and write it as each launch's
//                             "traffic" object (archbench_roofline.py --program); default TopDown's.
//                             "warp": warp-instruction and thread-instruction counts (issue 18) as
//                             each launch's "warp" object (archbench_pcsample.py's per-kernel warp
//                             efficiency where CUPTI's SASS metrics have no records for a kernel)
//                             "raw:M1,M2,...": these counters (full names), written raw as "warp" is
//                             (what a counter set costs: passes and replay time in the end line)
//
// What cannot be replayed is not: a launch whose arguments point into host memory (mapped or
// registered) may read a flag the host sets only after the launch returns (a spin kernel, as in
// nvbandwidth or archbench's own CUDA timer), which a replay inside the launch call would wait
// for forever; and a replay cannot restore host memory a kernel writes. Such a launch runs
// natively and an "unreplayable" record says why.
#include <cuda.h>
#include <cupti.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <shared_mutex>
#include <thread>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "fixtures/meters/cupti/cupti.hpp"
#include "fixtures/meters/topdown.hpp"
#include "fixtures/meters/traffic.hpp"
#include "tools/analysis/trace/common.hpp"
#include "tools/analysis/trace/cupti_calls.hpp"

namespace ab = archbench;
namespace tr = archbench::trace;

namespace {

constexpr std::size_t kRangesPerFlush = 64;  // launches decoded together

struct Launch {
  std::string name, mangled, shape;
  std::vector<int64_t> grid, block;
  std::uint64_t seq = 0, invocation = 0, host_ns = 0;
};

// One CUDA context's profiler and the launches it is counting now.
struct Context {
  std::unique_ptr<ab::RangeProfiler> profiler;
  std::string broken;             // why this context cannot be profiled ("" when it can)
  std::vector<Launch> pending;    // profiled since the last flush, in launch order
  std::uint64_t flushed_ns = 0;   // when the last flush was
  bool prepared = false;          // the profiler is the one made ahead (see Prepared)
  bool prepared_failed = false;   // ... and could not start: this context makes its own
};

struct State {
  std::mutex mu;
  CUpti_SubscriberHandle sub = nullptr;
  FILE* out = nullptr;
  std::string out_path;
  std::unique_ptr<std::regex> filter;
  std::uint64_t max_per_kernel = 0;
  std::map<CUcontext, Context> contexts;
  std::map<std::string, std::uint64_t> launched;  // kernel -> launches seen
  // Per kernel and launch shape: launches, those profiled, those that could not be.
  struct Shape {
    std::string name, mangled;
    std::vector<int64_t> grid, block;
    std::uint64_t launches = 0, profiled = 0, unreplayable = 0, over_budget = 0;
  };
  std::map<std::string, Shape> shapes;                // shape key -> totals
  std::map<std::string, std::uint64_t> profiled_of;  // kernel -> launches profiled
  std::uint64_t sample = 2;                           // first N launches of each shape (0: all)
  bool activity = false;                              // CUPTI kernel activity records enabled
  std::string activity_detail;
  std::uint64_t seq = 0, profiled = 0, skipped = 0, unreplayable = 0, captured = 0;
  std::size_t passes = 0;
  bool traffic = false;     // ARCHBENCH_TOPDOWN_METRICS=traffic: the traffic set, not TopDown's
  bool warp = false;        // ARCHBENCH_TOPDOWN_METRICS=warp: the warp-efficiency set
  std::vector<std::string> warp_metrics;  // the warp set's full names this chip has
  ab::TrafficPlan plan;     // the traffic set's plan (the chip's, from the first profiler made)
  std::uint64_t flush_period_ns = 500'000'000;  // ARCHBENCH_TOPDOWN_FLUSH_MS
  double budget = 0;         // ARCHBENCH_TOPDOWN_BUDGET (0: none)
  std::uint64_t start_ns = 0, over_budget = 0;
  std::vector<std::string> raw_metrics;  // ARCHBENCH_TOPDOWN_METRICS=raw:...
  // Where profiling's time goes (ns of the program's thread): making profilers and starting their
  // sessions, the profiled launch calls (CUPTI's replays), decoding; and the sessions started.
  std::uint64_t setup_ns = 0, replay_ns = 0, decode_ns = 0, sessions = 0;
  bool done = false;
};

State& state() {
  static State* s = new State;  // never destroyed: callbacks may come during exit
  return *s;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// One profiled launch's line: its counters, and TopDown's (or the traffic or warp set's) values.
void write_launch(State& s, CUcontext ctx, const Launch& l, const ab::Metrics& m) {
  std::string metrics = "{", td = "{", traffic = "{", warp = "{", err;
  for (const auto& [k, v] : m) metrics += (metrics.size() > 1 ? "," : "") + tr::JsonLine::quote(k) + ":" + number(v);
  if (s.warp)  // the raw counters, named as collected; the tool does the arithmetic
    for (const auto& [k, v] : m)
      if (k != "gpu__time_duration.sum") warp += (warp.size() > 1 ? "," : "") + tr::JsonLine::quote(k) + ":" + number(v);
  if (!s.warp) try {
    auto& out = s.traffic ? traffic : td;
    for (const auto& [k, v] : s.traffic ? ab::traffic_values(s.plan, m) : ab::topdown_counters(ab::topdown(m), 3))
      out += (out.size() > 1 ? "," : "") + tr::JsonLine::quote(k) + ":" + number(v);
  } catch (const std::exception& e) {
    err = e.what();
  }
  tr::JsonLine line("kernel");
  line.str("name", l.name).str("mangled", l.mangled).unum("seq", l.seq).unum("invocation", l.invocation)
      .nums("grid", l.grid).nums("block", l.block).unum("host_ns", l.host_ns)
      .unum("context", reinterpret_cast<std::uintptr_t>(ctx))
      .raw("duration_ns", number(m.count("gpu__time_duration.sum") ? m.at("gpu__time_duration.sum") : 0))
      .raw("metrics", metrics + "}").raw("topdown", td + "}");
  if (s.traffic) line.raw("traffic", traffic + "}");
  if (s.warp) line.raw("warp", warp + "}");
  if (!err.empty()) line.str("error", err);
  line.write(s.out);
  ++s.profiled;
}

// Decodes what the context's profiler counted since its start and writes one line a launch.
void flush(State& s, CUcontext ctx, Context& c) {
  if (!c.profiler || !c.profiler->started()) return;
  const std::uint64_t t0 = tr::now_ns();
  std::vector<ab::Metrics> ranges;
  try {
    ranges = c.profiler->collect();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "archbench-topdown: decoding %zu launches failed: %s\n", c.pending.size(), e.what());
  }
  if (ranges.size() != c.pending.size() && !ranges.empty())
    std::fprintf(stderr, "archbench-topdown: %zu ranges for %zu launches; pairing them in order\n", ranges.size(),
                 c.pending.size());
  for (std::size_t i = 0; i < c.pending.size() && i < ranges.size(); ++i) write_launch(s, ctx, c.pending[i], ranges[i]);
  c.pending.clear();
  std::fflush(s.out);  // what was measured survives a crash later in the program
  c.flushed_ns = tr::now_ns();
  s.decode_ns += c.flushed_ns - t0;
}

void finish();

// Chooses the counter set of the run (TopDown's, traffic, warp or raw) for profiler `p` and
// schedules it. Writes the set's state (plan, warp_metrics, passes): on the preparing thread
// before any launch reads them, or on the launching thread.
void choose_metrics(State& s, ab::RangeProfiler& p) {
  if (s.traffic) {
    s.plan = ab::traffic_plan(p.base_metrics());
    p.set_metrics(s.plan.metrics);
  } else if (!s.raw_metrics.empty()) {
    s.warp_metrics = s.raw_metrics;
    p.set_metrics(s.warp_metrics);
  } else if (s.warp) {
    const std::vector<std::string> base = p.base_metrics();
    const std::set<std::string> have(base.begin(), base.end());
    s.warp_metrics.clear();
    for (const char* m : {"smsp__inst_executed.sum", "smsp__thread_inst_executed.sum",
                          "smsp__thread_inst_executed_pred_on.sum", "gpu__time_duration.sum"}) {
      const std::string full(m);
      if (have.count(full.substr(0, full.find('.')))) s.warp_metrics.push_back(full);
    }
    if (!have.count("smsp__inst_executed") || !have.count("smsp__thread_inst_executed"))
      throw std::runtime_error("warp set: this GPU has no smsp__inst_executed / smsp__thread_inst_executed counters");
    p.set_metrics(s.warp_metrics);
  } else {
    p.set_metrics(ab::topdown_metrics(p.base_metrics()));
  }
  s.passes = p.passes();
}

// The host side made ahead (ARCHBENCH_TOPDOWN_PREPARE): a profiler without a context for device
// 0, its counter set chosen, made on a thread of the library from the library's load on; and, as
// soon as the program's first context exists, enabled on it by another such thread (when that
// context is of device 0). That context's first profiled launch takes it; any other context
// makes its own.
// Launches hold it shared from their call's entry to its exit; the first context's priming holds
// it alone (see enable_ahead).
std::shared_timed_mutex g_gate;
thread_local bool t_gated = false;

struct Prepared {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<pid_t> pid{0};  // the process that started it (a forked child has no such thread, and
                              // never takes the lock, which the fork may have copied held)
  bool injection_done = false;  // InitializeInjection has returned (the program's cuInit goes on)
  bool running = false;       // the preparation: started and not yet returned
  bool enabling = false;      // the enable on the first context: started and not yet returned
  CUcontext ctx = nullptr;    // that context (the profiler is attached to it)
  bool enabled = false;       // ... and enabled on it
  std::unique_ptr<ab::RangeProfiler> profiler;
  std::string error;          // why it could not be made or enabled
  std::string enable_state = "no context yet";  // the enable ahead: enabled, or why not
  std::uint64_t start_ns = 0, end_ns = 0, wait_ns = 0, enable_ns = 0;
};
Prepared& prepared() {
  static Prepared* p = new Prepared;  // never destroyed: its threads may outlive exit's start
  return *p;
}

void prepare(State& s) {
  Prepared& pr = prepared();
  std::unique_ptr<ab::RangeProfiler> p;
  std::string error;
  // The driver's initialisation is the program's cuInit, which loaded this library: let it return,
  // then have the driver ready here (as the timeline's setup thread does); before that CUPTI names
  // the chip "Unknown" (seen on a fresh H100 machine: CUPTI_ERROR_INVALID_CHIP_NAME).
  {
    std::unique_lock<std::mutex> lk(pr.mu);
    pr.cv.wait_for(lk, std::chrono::seconds(10), [&] { return pr.injection_done; });
  }
  const CUresult r = tr::driver_ready();
  try {
    if (r != CUDA_SUCCESS) throw std::runtime_error("cuInit failed (" + tr::cu_words(r) + ")");
    p = std::make_unique<ab::RangeProfiler>(nullptr, 0);
    tr::exit_first(finish);  // again: CUPTI's host objects exist now
    choose_metrics(s, *p);
  } catch (const std::exception& e) {
    p.reset(), error = e.what();
  }
  std::lock_guard<std::mutex> lk(pr.mu);
  pr.profiler = std::move(p), pr.error = error, pr.end_ns = tr::now_ns(), pr.running = false;
  pr.cv.notify_all();
}

// Waits (at most `limit`; none in a forked child) for the preparation and the enable: true where
// both have returned.
bool prepared_wait(std::chrono::milliseconds limit) {
  Prepared& pr = prepared();
  if (pr.pid.load() != getpid()) return false;
  std::unique_lock<std::mutex> lk(pr.mu);
  return pr.cv.wait_for(lk, limit, [&] { return !pr.running && !pr.enabling; });
}

// On the library's thread: the prepared profiler enabled on the program's first context `ctx`
// (made current on this thread only), if it is of device 0.
void enable_ahead(CUcontext ctx) {
  Prepared& pr = prepared();
  ab::RangeProfiler* p = nullptr;
  {
    std::unique_lock<std::mutex> lk(pr.mu);
    pr.cv.wait(lk, [&] { return !pr.running; });
    p = pr.profiler.get();
  }
  const std::uint64_t t0 = tr::now_ns();
  std::string error, state;
  bool enabled = false;
  CUdevice dev = -1;
  const auto said = [](const char* what, CUresult r) { return std::string(what) + " failed (" + tr::cu_words(r) + ")"; };
  if (!p) {
    state = "not prepared";
  } else if (CUresult r = cuCtxPushCurrent(ctx); r != CUDA_SUCCESS) {
    state = said("cuCtxPushCurrent", r);
  } else {
    if (CUresult g = cuCtxGetDevice(&dev); g != CUDA_SUCCESS) {
      state = said("cuCtxGetDevice", g);
    } else if (dev != 0) {
      state = "the first context is of device " + std::to_string(dev);
    } else {
      try {
        p->attach(ctx);
        // Primed (a first session started and stopped) only while no launch is in a call: the
        // launches hold the gate from their call's entry to its exit, and one that comes meanwhile
        // waits for it. A launch already in its call may itself wait for this thread (its first
        // profiled launch waits for the preparation): then only configured, after 50 ms at most.
        std::unique_lock<std::shared_timed_mutex> gate(g_gate, std::defer_lock);
        if (gate.try_lock_for(std::chrono::milliseconds(50))) {
          p->prime(kRangesPerFlush);
          state = "enabled, primed and configured";
        } else {
          p->prepare_start(kRangesPerFlush);
          state = "enabled and configured (a launch was in its call: not primed)";
        }
        enabled = true;
      } catch (const std::exception& e) {
        error = e.what(), state = "enable failed";
      }
    }
    CUcontext popped = nullptr;
    cuCtxPopCurrent(&popped);
  }
  std::lock_guard<std::mutex> lk(pr.mu);
  pr.enabled = enabled, pr.enable_ns = tr::now_ns() - t0, pr.enabling = false, pr.enable_state = state;
  if (!enabled) pr.ctx = nullptr;  // not this context's: the first profiled launch attaches it (device 0)
  if (!error.empty()) pr.error = "enable: " + error;
  pr.cv.notify_all();
}

// A new context: the first one gets the prepared profiler enabled on it, by a thread of the library.
void on_context_created(CUcontext ctx) {
  Prepared& pr = prepared();
  if (pr.pid.load() != getpid()) return;
  std::lock_guard<std::mutex> lk(pr.mu);
  if (pr.ctx || pr.enabling || (!pr.running && !pr.profiler)) return;
  pr.ctx = ctx, pr.enabling = true, pr.enable_state = "started";
  if (!tr::spawn_quiet([ctx] { enable_ahead(ctx); }))
    pr.ctx = nullptr, pr.enabling = false, pr.enable_state = "no thread";
}

// Context `ctx` is being destroyed: a prepared profiler enabled on it and never taken is left (not
// torn down, as at exit), and no later context gets one.
void forget_prepared(CUcontext ctx) {
  Prepared& pr = prepared();
  if (!prepared_wait(std::chrono::seconds(10))) return;
  std::lock_guard<std::mutex> lk(pr.mu);
  if (pr.ctx == ctx && pr.profiler) (void)pr.profiler.release();
}

// The prepared profiler for context `ctx` of device `dev`: once, and only where it was made for
// it (enabled on it, or not yet attached to any context).
std::unique_ptr<ab::RangeProfiler> take_prepared(CUcontext ctx, CUdevice dev) {
  Prepared& pr = prepared();
  const std::uint64_t t0 = tr::now_ns();
  if (dev != 0 || !prepared_wait(std::chrono::minutes(2))) return nullptr;
  std::lock_guard<std::mutex> lk(pr.mu);
  pr.wait_ns = tr::now_ns() - t0;
  if (!pr.error.empty())
    std::fprintf(stderr, "archbench-topdown: the profiler made ahead failed (%s); making it for the context\n",
                 pr.error.c_str());
  pr.error.clear();
  if (pr.ctx && pr.ctx != ctx) return nullptr;  // enabled on another context
  if (pr.profiler && !pr.ctx) pr.profiler->attach(ctx);
  pr.ctx = ctx;
  return std::move(pr.profiler);
}

// The context's profiler, made on its first profiled launch (or taken from the preparation); null
// (said once) where it cannot be.
ab::RangeProfiler* profiler_for(State& s, CUcontext ctx, Context& c) {
  if (c.profiler) return c.profiler.get();
  if (!c.broken.empty()) return nullptr;
  try {
    CUdevice dev = 0;
    if (cuCtxGetDevice(&dev) != CUDA_SUCCESS) throw std::runtime_error("cuCtxGetDevice failed");
    std::unique_ptr<ab::RangeProfiler> p = c.prepared_failed ? nullptr : take_prepared(ctx, dev);
    c.prepared = p != nullptr;
    if (!p) {
      p = std::make_unique<ab::RangeProfiler>(ctx, static_cast<int>(dev));
      tr::exit_first(finish);  // again: the profiler's host objects exist now
      choose_metrics(s, *p);
    }
    char name[256] = "", bus[32] = "";
    cuDeviceGetName(name, sizeof name, dev);
    cuDeviceGetPCIBusId(bus, sizeof bus, dev);
    tr::JsonLine("profiler").str("chip", p->chip()).unum("passes", p->passes()).unum("metrics", p->metrics().size())
        .unum("device", static_cast<std::uint64_t>(dev)).str("device_name", name).str("pci_bus_id", bus)
        .boolean("prepared", c.prepared)
        .str("metric_set", s.traffic ? "traffic" : !s.raw_metrics.empty() ? "raw" : s.warp ? "warp" : "topdown").str("traffic_counters", s.traffic ? s.plan.describe() : "")
        .str("traffic_missing", s.traffic ? join(s.plan.missing) : "")
        .str("warp_counters", s.warp ? join(s.warp_metrics) : "")
        .write(s.out);
    c.profiler = std::move(p);
  } catch (const std::exception& e) {
    c.broken = e.what();
    std::fprintf(stderr, "archbench-topdown: cannot profile this context: %s\n", e.what());
    tr::JsonLine("error").str("reason", c.broken).write(s.out);
    return nullptr;
  }
  return c.profiler.get();
}

bool wanted(State& s, const std::string& name, const std::string& mangled) {
  if (s.filter && !std::regex_search(name, *s.filter) && !std::regex_search(mangled, *s.filter)) return false;
  return s.max_per_kernel == 0 || s.profiled_of[name] < s.max_per_kernel;
}

// The kernel activity records (GPU time of the launches not profiled), kept apart from the state
// above: CUPTI delivers them on its own thread, also while the state's lock is held (at exit).
struct Activity {
  struct Time {
    std::string mangled;
    std::vector<int64_t> grid, block;
    std::uint64_t records = 0;
    double ns = 0;
  };
  std::mutex mu;
  std::set<std::uint32_t> profiled;     // correlation ids (driver and runtime) of profiled launches
  std::map<std::string, Time> by_shape;  // shape -> the unprofiled launches' records and time
};
Activity& activity() {
  static Activity* a = new Activity;
  return *a;
}

std::string shape_key(const std::string& mangled, const std::vector<int64_t>& grid, const std::vector<int64_t>& block) {
  std::string k = mangled;
  for (const auto* dims : {&grid, &block})
    for (int64_t v : *dims) k.append(1, '|').append(std::to_string(v));
  return k;
}

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 1 << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI on_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Activity& a = activity();
  CUpti_Activity* r = nullptr;
  {
    std::lock_guard<std::mutex> lock(a.mu);
    while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
      if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
      if (a.profiled.count(k->correlationId) || !k->name) continue;  // replays: timed by the profiler
      const std::vector<int64_t> grid{k->gridX, k->gridY, k->gridZ}, block{k->blockX, k->blockY, k->blockZ};
      auto& t = a.by_shape[shape_key(k->name, grid, block)];
      if (t.records++ == 0) t.mangled = k->name, t.grid = grid, t.block = block;
      t.ns += double(k->end - k->start);
    }
  }
  std::free(buffer);
}

// A launch's function, arguments and geometry, from its driver call's parameters.
struct LaunchArgs {
  CUfunction f = nullptr;
  CUstream stream = nullptr;
  void** params = nullptr;
  std::vector<int64_t> grid, block;
};
LaunchArgs launch_args(const CUpti_CallbackData* cb, CUpti_CallbackId id) {
  LaunchArgs a;
  if (id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx || id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) {
    const auto* p = static_cast<const cuLaunchKernelEx_params*>(cb->functionParams);
    a.f = p->f, a.params = p->kernelParams;
    if (p->config) {
      a.stream = p->config->hStream;
      a.grid = {p->config->gridDimX, p->config->gridDimY, p->config->gridDimZ};
      a.block = {p->config->blockDimX, p->config->blockDimY, p->config->blockDimZ};
    }
  } else {  // cuLaunchKernel and cuLaunchCooperativeKernel: the same leading fields
    const auto* p = static_cast<const cuLaunchCooperativeKernel_params*>(cb->functionParams);
    a.f = p->f, a.stream = p->hStream, a.params = p->kernelParams;
    a.grid = {p->gridDimX, p->gridDimY, p->gridDimZ};
    a.block = {p->blockDimX, p->blockDimY, p->blockDimZ};
  }
  return a;
}

// The size of a launch's argument `i` (false past the last): the driver describes a function's
// parameters, or, where the handle is a context-independent kernel (CUkernel, as the runtime of
// CUDA 12 and later may pass), the kernel's.
bool param_size(CUfunction f, std::size_t i, std::size_t* size) {
  std::size_t off = 0;
  return cuFuncGetParamInfo(f, i, &off, size) == CUDA_SUCCESS ||
         cuKernelGetParamInfo(reinterpret_cast<CUkernel>(f), i, &off, size) == CUDA_SUCCESS;
}

// Why a launch cannot be replayed ("" when it can): an argument that points into host memory.
std::string unreplayable(const LaunchArgs& a) {
  if (!a.f || !a.params) return "";
  std::size_t size = 0;
  for (std::size_t i = 0; param_size(a.f, i, &size); ++i) {
    if (size != sizeof(std::uint64_t)) continue;
    std::uint64_t v = 0;
    std::memcpy(&v, a.params[i], sizeof v);
    unsigned int type = 0;
    if (v && cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, static_cast<CUdeviceptr>(v)) == CUDA_SUCCESS &&
        type == CU_MEMORYTYPE_HOST)
      return "argument " + std::to_string(i) +
             " points into host memory: a replay cannot restore it, and the kernel may wait for the host";
  }
  return "";
}

// The watchdog's view of the launch being replayed now (0: none).
std::atomic<std::uint64_t> g_replay_since{0};
std::atomic<std::uint64_t> g_replay_seq{0};
thread_local bool t_profiling = false;              // this thread's launch call is being profiled
thread_local std::uint64_t t_enter_ns = 0;           // ... since then
thread_local std::uint32_t t_runtime_corr = 0;      // the runtime launch call around it, if any
std::mutex g_replay_mu;                              // guards g_replay_name
std::string g_replay_name;

void watchdog(double limit_s) {
  std::uint64_t warned = ~std::uint64_t(0);
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const std::uint64_t since = g_replay_since.load(), seq = g_replay_seq.load();
    if (!since || seq == warned || double(tr::now_ns() - since) * 1e-9 < limit_s) continue;
    warned = seq;
    std::string name;
    {
      std::lock_guard<std::mutex> lock(g_replay_mu);
      name = g_replay_name;
    }
    std::fprintf(stderr,
                 "archbench-topdown: launch %llu (%s) has been replaying for %.0f s: it may wait for the host or "
                 "for another kernel, which a replay never provides. Stop the program and exclude the kernel with "
                 "--kernel, or profile fewer launches.\n",
                 static_cast<unsigned long long>(seq), name.c_str(), limit_s);
  }
}
void on_launch(State& s, const CUpti_CallbackData* cb, CUpti_CallbackId id) {
  if (s.done || !cb->symbolName) return;
  if (cb->callbackSite == CUPTI_API_EXIT) {
    if (!t_profiling) return;
    t_profiling = false;
    g_replay_since = 0;
    s.replay_ns += tr::now_ns() - t_enter_ns;
    Context& c = s.contexts[cb->context];
    if (c.profiler && c.pending.size() >= kRangesPerFlush) flush(s, cb->context, c);
    return;
  }
  const LaunchArgs args = launch_args(cb, id);
  // A launch into a stream being captured (a CUDA graph being built) does not run now: it is
  // neither profiled nor a reason to stop the profiler (which would break the capture). Its
  // runs, as graph launches, count by their GPU time (activity records).
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  if (cuStreamIsCapturing(args.stream, &capturing) == CUDA_SUCCESS && capturing != CU_STREAM_CAPTURE_STATUS_NONE) {
    ++s.captured;
    return;
  }
  const std::string mangled = cb->symbolName, name = tr::demangle(cb->symbolName);
  Launch l{name, mangled, shape_key(mangled, args.grid, args.block), args.grid, args.block, s.seq++,
           s.launched[name]++, tr::now_ns()};
  State::Shape& sh = s.shapes[l.shape];
  if (sh.launches++ == 0) sh.name = name, sh.mangled = mangled, sh.grid = args.grid, sh.block = args.block;
  Context& c = s.contexts[cb->context];
  bool take = wanted(s, name, mangled) && (s.sample == 0 || sh.profiled < s.sample);
  if (take && s.budget > 0) {  // the replays so far against the program's own time so far
    const std::uint64_t spent = s.setup_ns + s.replay_ns + s.decode_ns, elapsed = tr::now_ns() - s.start_ns;
    if (double(s.replay_ns) > s.budget * double(elapsed > spent ? elapsed - spent : 0)) {
      take = false;
      ++sh.over_budget, ++s.over_budget;
    }
  }
  if (take) {
    const std::string why = unreplayable(args);
    if (!why.empty()) {
      take = false;
      if (sh.unreplayable++ == 0) {
        tr::JsonLine("unreplayable").str("name", name).str("mangled", mangled).unum("seq", l.seq).str("reason", why)
            .write(s.out);
        std::fprintf(stderr, "archbench-topdown: %s runs unprofiled: %s\n", name.c_str(), why.c_str());
      }
    }
  }
  if (!take) {
    flush(s, cb->context, c);  // so that this kernel runs unobserved
    ++s.skipped;
    return;
  }
  const std::uint64_t t0 = tr::now_ns();
  ab::RangeProfiler* p = profiler_for(s, cb->context, c);
  if (!p) return;
  for (;;) {  // a profiler made ahead that cannot start gives way, once, to the context's own
    try {
      if (!p->started()) p->start(kRangesPerFlush), ++s.sessions;
      break;
    } catch (const std::exception& e) {
      if (!c.prepared || c.prepared_failed) {
        c.broken = e.what();
        std::fprintf(stderr, "archbench-topdown: cannot start profiling: %s\n", e.what());
        return;
      }
      // Made without the context's counter availability.
      std::fprintf(stderr, "archbench-topdown: the profiler made ahead cannot start (%s); making it for the "
                   "context\n", e.what());
      c.prepared_failed = true;
      c.profiler.reset();  // disabled on the context, so that the context's own can be enabled there
      if (!(p = profiler_for(s, cb->context, c))) return;
    }
  }
  s.setup_ns += tr::now_ns() - t0;
  ++sh.profiled;
  ++s.profiled_of[name];
  {
    std::lock_guard<std::mutex> lock(activity().mu);
    activity().profiled.insert(cb->correlationId);
    if (t_runtime_corr) activity().profiled.insert(t_runtime_corr);
  }
  {
    std::lock_guard<std::mutex> lock(g_replay_mu);
    g_replay_name = name;
  }
  g_replay_seq = l.seq;
  g_replay_since = t_enter_ns = tr::now_ns();
  t_profiling = true;
  c.pending.push_back(std::move(l));
}

// Launches, and the calls after which the program has waited for its kernels (the pending ranges
// are decoded there, so that little is left for the exit, when the CUDA runtime may be tearing
// down): tools/analysis/trace/cupti_calls.hpp.
using tr::kLaunches, tr::kSyncs, tr::one_of;
constexpr CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,           CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,       CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,        CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000};

void CUPTIAPI callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {  // a runtime launch: its id names the kernel's records
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    t_runtime_corr = cb->callbackSite == CUPTI_API_ENTER ? cb->correlationId : 0;
    return;
  }
  // A launch call holds the gate shared from its entry to its exit (one pair a thread at a time).
  const bool launch = domain == CUPTI_CB_DOMAIN_DRIVER_API && !one_of(id, kSyncs);
  const bool entry = launch && static_cast<const CUpti_CallbackData*>(data)->callbackSite == CUPTI_API_ENTER;
  if (entry && !t_gated) g_gate.lock_shared(), t_gated = true;
  struct Ungate {
    bool exit;
    ~Ungate() {
      if (exit && t_gated) t_gated = false, g_gate.unlock_shared();
    }
  } ungate{launch && !entry};
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API && one_of(id, kSyncs)) {
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    auto it = s.contexts.find(cb->context);
    if (cb->callbackSite == CUPTI_API_EXIT && !s.done && it != s.contexts.end() && !it->second.pending.empty() &&
        tr::now_ns() - it->second.flushed_ns >= s.flush_period_ns)
      flush(s, cb->context, it->second);
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    on_launch(s, static_cast<const CUpti_CallbackData*>(data), id);
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    on_context_created(static_cast<const CUpti_ResourceData*>(data)->context);
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    const auto* r = static_cast<const CUpti_ResourceData*>(data);
    forget_prepared(r->context);
    auto it = s.contexts.find(r->context);
    if (it != s.contexts.end()) {
      flush(s, r->context, it->second);
      (void)it->second.profiler.release();  // left, not torn down, as at exit (see finish)
      s.contexts.erase(it);  // a new context may come back with the same handle
    }
  }
}

// At exit: what is still pending, each launch shape with the GPU time of its unprofiled launches,
// then the totals line.
void finish() {
  State& s = state();
  // A preparation still inside CUPTI must return before the process goes on with its exit (whose
  // destructors would pull CUPTI's objects from under it), at most 10 s.
  prepared_wait(std::chrono::seconds(10));
  if (s.activity) cuptiActivityFlushAll(1);  // before the state's lock: CUPTI calls back on its thread
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.done) return;
  // What is still pending (launches since the last synchronisation); the profilers themselves
  // are not torn down: at exit the CUDA runtime may already be unloading, and the process's end
  // frees them.
  for (auto& [ctx, c] : s.contexts) flush(s, ctx, c);
  s.done = true;
  double prepare_s = -1, prepare_wait_s = 0, enable_ahead_s = -1;  // -1: not done ahead (or not returned)
  std::string enable_state;
  {
    Prepared& pr = prepared();
    std::unique_lock<std::mutex> lk(pr.mu, std::defer_lock);
    if (pr.pid.load() == getpid() && lk.try_lock() && pr.end_ns) {
      prepare_s = (pr.end_ns - pr.start_ns) * 1e-9, prepare_wait_s = pr.wait_ns * 1e-9;
      if (pr.enabled) enable_ahead_s = pr.enable_ns * 1e-9;
      enable_state = pr.enable_state;
    }
  }
  std::map<std::string, Activity::Time> times;
  {
    std::lock_guard<std::mutex> a(activity().mu);
    times = activity().by_shape;
  }
  // Kernels seen only in the activity records: run by graphs (no launch call of their own).
  for (const auto& [key, t] : times)
    if (!s.shapes.count(key)) {
      State::Shape& sh = s.shapes[key];
      sh.name = tr::demangle(t.mangled.c_str()), sh.mangled = t.mangled, sh.grid = t.grid, sh.block = t.block;
      sh.launches = t.records;
    }
  for (const auto& [key, sh] : s.shapes) {
    tr::JsonLine line("shape");
    line.str("name", sh.name).str("mangled", sh.mangled).nums("grid", sh.grid).nums("block", sh.block)
        .unum("launches", sh.launches).unum("profiled", sh.profiled).unum("unreplayable", sh.unreplayable)
        .unum("over_budget", sh.over_budget);
    if (s.activity) {
      const Activity::Time t = times.count(key) ? times.at(key) : Activity::Time{};
      line.unum("unprofiled_records", t.records).raw("unprofiled_ns", number(t.ns));
    }
    line.write(s.out);
  }
  tr::JsonLine("end").unum("profiled", s.profiled).unum("unprofiled", s.skipped).unum("unreplayable", s.unreplayable)
      .unum("captured", s.captured).unum("passes", s.passes).unum("sample", s.sample).str("unprofiled_time", s.activity_detail)
      .raw("budget", number(s.budget)).unum("over_budget", s.over_budget).unum("sessions", s.sessions).raw("setup_s", number(s.setup_ns * 1e-9))
      .raw("replay_s", number(s.replay_ns * 1e-9)).raw("decode_s", number(s.decode_ns * 1e-9))
      .raw("prepare_s", number(prepare_s)).raw("prepare_wait_s", number(prepare_wait_s))
      .raw("enable_ahead_s", number(enable_ahead_s)).str("enable_ahead", enable_state)
      .unum("end_ns", tr::now_ns()).write(s.out);
  std::fflush(s.out);
  std::fprintf(stderr, "archbench-topdown: %llu launches profiled, %llu not (%zu passes: set-up %.2f s, "
               "replays %.2f s, decoding %.2f s); %s\n",
               static_cast<unsigned long long>(s.profiled), static_cast<unsigned long long>(s.skipped),
               s.passes, s.setup_ns * 1e-9, s.replay_ns * 1e-9, s.decode_ns * 1e-9,
               s.out_path.c_str());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.sub) return 1;
  const char* path = std::getenv("ARCHBENCH_TOPDOWN_OUT");
  s.out_path = path ? path : "topdown-" + std::to_string(getpid()) + ".jsonl";
  s.out = std::fopen(s.out_path.c_str(), "w");
  if (!s.out) {
    std::fprintf(stderr, "archbench-topdown: cannot write %s; the program runs unprofiled\n", s.out_path.c_str());
    return 0;
  }
  try {
    if (const char* f = std::getenv("ARCHBENCH_TOPDOWN_KERNEL"); f && *f) s.filter = std::make_unique<std::regex>(f);
  } catch (const std::regex_error& e) {
    std::fprintf(stderr, "archbench-topdown: bad kernel filter: %s; the program runs unprofiled\n", e.what());
    return 0;
  }
  if (const char* m = std::getenv("ARCHBENCH_TOPDOWN_MAX")) s.max_per_kernel = std::strtoull(m, nullptr, 10);
  if (const char* m = std::getenv("ARCHBENCH_TOPDOWN_SAMPLE"); m && *m) s.sample = std::strtoull(m, nullptr, 10);
  if (const char* m = std::getenv("ARCHBENCH_TOPDOWN_METRICS"); m && *m) {
    const std::string set(m);
    s.traffic = set == "traffic";
    s.warp = set == "warp" || set.rfind("raw:", 0) == 0;
    if (set.rfind("raw:", 0) == 0)
      for (std::size_t i = 4; i < set.size();) {
        const std::size_t j = std::min(set.find(',', i), set.size());
        if (j > i) s.raw_metrics.push_back(set.substr(i, j - i));
        i = j + 1;
      }
  }
  if (const char* m = std::getenv("ARCHBENCH_TOPDOWN_BUDGET"); m && *m) s.budget = std::atof(m);
  s.start_ns = tr::now_ns();
  if (const char* m = std::getenv("ARCHBENCH_TOPDOWN_FLUSH_MS"); m && *m) s.flush_period_ns = std::strtoull(m, nullptr, 10) * 1'000'000;
  double watchdog_s = 20;
  if (const char* m = std::getenv("ARCHBENCH_TOPDOWN_WATCHDOG_S"); m && *m) watchdog_s = std::atof(m);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  tr::JsonLine("process").num("pid", getpid()).str("command", tr::command_line()).unum("start_ns", tr::now_ns())
      .str("date", date).write(s.out);
  if (cuptiSubscribe(&s.sub, callback, nullptr) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "archbench-topdown: cuptiSubscribe failed (another CUPTI client?); unprofiled\n");
    return 0;
  }
  for (CUpti_CallbackId id : kLaunches) cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  for (CUpti_CallbackId id : kRuntimeLaunches) cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  // The GPU time of the launches not profiled: CUPTI's kernel records (no serialisation);
  // without them, each shape's unprofiled launches are counted at its profiled launches' mean.
  if (s.sample != 0 || s.max_per_kernel != 0 || s.filter) {
    CUptiResult r = cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed);
    if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    const char* e = nullptr;
    if (r != CUPTI_SUCCESS) cuptiGetResultString(r, &e);
    s.activity = r == CUPTI_SUCCESS;
    s.activity_detail = s.activity ? "CUPTI kernel activity records"
                                   : std::string("each shape's profiled mean (kernel activity: ") + (e ? e : "?") + ")";
  } else {
    s.activity_detail = "every launch profiled";
  }
  if (watchdog_s > 0) tr::spawn_quiet([watchdog_s] { watchdog(watchdog_s); });
  const char* prep = std::getenv("ARCHBENCH_TOPDOWN_PREPARE");
  if (!prep || std::strcmp(prep, "0") != 0) {
    Prepared& pr = prepared();
    std::lock_guard<std::mutex> lk(pr.mu);
    pr.pid = getpid(), pr.start_ns = tr::now_ns(), pr.running = true;
    if (!tr::spawn_quiet([&s] { prepare(s); })) pr.running = false;
  }
  for (CUpti_CallbackId id : kSyncs) cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  tr::exit_first(finish);  // before CUPTI's own objects go (see there)
  {
    Prepared& pr = prepared();
    std::lock_guard<std::mutex> lk(pr.mu);
    pr.injection_done = true;
    pr.cv.notify_all();
  }
  return 1;
}
