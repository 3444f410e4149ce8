// Each CUDA context's range profiler for TopDown (fixtures/meters/cupti), made at its first
// profiled launch, or made ahead on threads of the library (tools/analysis/topdown/inject.cpp says
// how and why).
#include "tools/analysis/topdown/topdown.hpp"

namespace archbench::topdown_lib {

Prepared& prepared() {
  static Prepared* p = new Prepared;  // never destroyed: its threads may outlive exit's start
  return *p;
}

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
    // The range profiler opens CUPTI itself (fixtures/meters/cupti): a second copy of libcupti in
    // the process is refused as a second client; the copies loaded are named.
    if (c.broken.find("MULTIPLE_SUBSCRIBERS") != std::string::npos) c.broken += tr::cupti_copies();
    std::fprintf(stderr, "archbench-topdown: cannot profile this context: %s\n", c.broken.c_str());
    tr::JsonLine("error").str("reason", c.broken).write(s.out);
    return nullptr;
  }
  return c.profiler.get();
}

}  // namespace archbench::topdown_lib
