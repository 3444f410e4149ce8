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
//                             had, the shape's measured mean) weights the profiled ones. A shape
//                             whose launches' GPU times differ (beyond 10% and 2 us) among the
//                             profiled ones or from them (activity records) has its later launches
//                             profiled too, within the budget ("varied"): its work depends on its
//                             arguments, not on its shape.
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
#include "tools/analysis/topdown/topdown.hpp"

namespace archbench::topdown_lib {

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
  // shape -> the profiled launches' shortest and longest GPU time (ns), and the shapes whose
  // launches differ from them (Activity::differs).
  std::map<std::string, std::pair<double, double>> profiled_ns;
  std::set<std::string> varies;
  // Whether `ns` is outside the shape's profiled times by more than 10% and 2 us (a launch's own
  // jitter: a few percent, or a microsecond on a short kernel). Call with mu held.
  bool differs(const std::string& shape, double ns) const {
    const auto it = profiled_ns.find(shape);
    if (it == profiled_ns.end()) return false;
    const auto [lo, hi] = it->second;
    return ns < lo - std::max(0.1 * lo, 2000.0) || ns > hi + std::max(0.1 * hi, 2000.0);
  }
  // A profiled launch's time: it widens the shape's range, and marks the shape where it differs.
  void profiled_time(const std::string& shape, double ns) {
    std::lock_guard<std::mutex> lock(mu);
    if (differs(shape, ns)) varies.insert(shape);
    auto [it, first] = profiled_ns.try_emplace(shape, ns, ns);
    if (!first) it->second = {std::min(it->second.first, ns), std::max(it->second.second, ns)};
  }
  bool varied(const std::string& shape) {
    std::lock_guard<std::mutex> lock(mu);
    return varies.count(shape) > 0;
  }
};
Activity& activity() {
  static Activity* a = new Activity;
  return *a;
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
  const double duration = m.count("gpu__time_duration.sum") ? m.at("gpu__time_duration.sum") : 0;
  if (duration > 0) activity().profiled_time(l.shape, duration);
  tr::JsonLine line("kernel");
  line.str("name", l.name).str("mangled", l.mangled).unum("seq", l.seq).unum("invocation", l.invocation)
      .nums("grid", l.grid).nums("block", l.block).unum("host_ns", l.host_ns)
      .unum("context", reinterpret_cast<std::uintptr_t>(ctx))
      .raw("duration_ns", number(duration))
      .raw("metrics", metrics + "}").raw("topdown", td + "}");
  if (s.traffic) line.raw("traffic", traffic + "}");
  if (s.warp) line.raw("warp", warp + "}");
  if (!err.empty()) line.str("error", err);
  s.out.put(line);
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
  s.out.flush();  // what was measured survives a crash later in the program
  c.flushed_ns = tr::now_ns();
  s.decode_ns += c.flushed_ns - t0;
}

void finish();

bool wanted(State& s, const std::string& name, const std::string& mangled) {
  if (s.filter && !std::regex_search(name, *s.filter) && !std::regex_search(mangled, *s.filter)) return false;
  return s.max_per_kernel == 0 || s.profiled_of[name] < s.max_per_kernel;
}


// CUPTI's activity buffers: 1 MiB each (tools/analysis/common/cupti.hpp).
constexpr auto on_buffer_requested = tr::buffer_requested<1 << 20>;

void CUPTIAPI on_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Activity& a = activity();
  {
    std::lock_guard<std::mutex> lock(a.mu);
    tr::for_each_record(buffer, valid, [&](const CUpti_Activity* r) {
      const CUpti_ActivityKernel10* k = tr::kernel_record(r);
      if (!k || a.profiled.count(k->correlationId) || !k->name) return true;  // replays: timed by the profiler
      const std::vector<int64_t> grid = tr::grid_of(*k), block = tr::block_of(*k);
      const std::string shape = tr::shape_key(k->name, grid, block);
      auto& t = a.by_shape[shape];
      if (t.records++ == 0) t.mangled = k->name, t.grid = grid, t.block = block;
      t.ns += double(k->end - k->start);
      if (a.differs(shape, double(k->end - k->start))) a.varies.insert(shape);
      return true;
    });
  }
  std::free(buffer);
}

// The device memory the current context's device has in use (bytes; 0 where it cannot be read).
double device_memory_in_use() {
  std::size_t free = 0, total = 0;
  return cuMemGetInfo(&free, &total) == CUDA_SUCCESS && total > free ? double(total - free) : 0;
}

// What a replay's memory save and restore may cost (ns) for `passes` passes: kernel replay keeps
// the device memory in use between passes, on the device where it fits twice, else in host memory.
// On the H200 under JAX (XLA takes 75% of the GPU at start: 106 GB, more than the free memory) one
// launch's 7 passes took 57 s; a C program's few GB cost milliseconds.
double replay_memory_ns(std::size_t passes) {
  std::size_t free = 0, total = 0;
  if (cuMemGetInfo(&free, &total) != CUDA_SUCCESS || total <= free) return 0;
  const double used = double(total - free), rate = used <= double(free) ? 1.0e12 : 1.2e10;  // B/s: d2d, or host
  return double(passes ? passes : 7) * used / rate * 1e9;
}

// Why a launch cannot be replayed ("" when it can): an argument that points into host memory.
std::string unreplayable(const tr::LaunchArgs& a) {
  if (!a.f || !a.params) return "";
  std::size_t size = 0;
  for (std::size_t i = 0; tr::param_size(a.f, i, &size); ++i) {
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
  const tr::LaunchArgs args = tr::launch_args(cb, id);
  // A launch into a stream being captured (a CUDA graph being built) does not run now: it is
  // neither profiled nor a reason to stop the profiler (which would break the capture). Its
  // runs, as graph launches, count by their GPU time (activity records).
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  if (cuStreamIsCapturing(args.stream, &capturing) == CUDA_SUCCESS && capturing != CU_STREAM_CAPTURE_STATUS_NONE) {
    ++s.captured;
    return;
  }
  const std::string mangled = cb->symbolName, name = tr::demangle(cb->symbolName);
  Launch l{name, mangled, tr::shape_key(mangled, args.grid, args.block), args.grid, args.block, s.seq++,
           s.launched[name]++, tr::now_ns()};
  State::Shape& sh = s.shapes[l.shape];
  if (sh.launches++ == 0) sh.name = name, sh.mangled = mangled, sh.grid = args.grid, sh.block = args.block;
  Context& c = s.contexts[cb->context];
  const bool want = wanted(s, name, mangled);
  bool take = want && (s.sample == 0 || sh.profiled < s.sample), varied = false;
  if (want && !take && s.activity) {
    // Past the sample: the shape's profiled launches decoded now (a launch left native flushes
    // them anyway), so that their GPU times say whether this shape's work varies.
    flush(s, cb->context, c);
    take = varied = activity().varied(l.shape);
  }
  if (take && s.budget > 0) {  // the replays so far, and this one's memory, against the program's own time so far
    const std::uint64_t spent = s.setup_ns + s.replay_ns + s.decode_ns, elapsed = tr::now_ns() - s.start_ns;
    const double allowed = s.budget * double(elapsed > spent ? elapsed - spent : 0);
    const double memory_ns = replay_memory_ns(c.profiler ? c.profiler->passes() : s.passes);
    if (double(s.replay_ns) > allowed || (memory_ns > 1e9 && double(s.replay_ns) + memory_ns > allowed)) {
      take = false;
      ++sh.over_budget, ++s.over_budget;
      if (memory_ns > 1e9 && s.memory_refused++ == 0)
        std::fprintf(stderr, "archbench-topdown: each replay would save and restore the %.0f GB of device memory in "
                     "use (about %.0f s a launch; a framework that takes most of the GPU at start, as JAX does): launches run "
                     "natively while that breaks the budget; --timeline gives retire, divergence and stall without "
                     "replay, --budget 0 replays all the same\n", device_memory_in_use() / 1e9, memory_ns * 1e-9);
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
  if (varied) ++sh.varied, ++s.varied;
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
// down): tools/analysis/common/cupti.hpp.
using tr::kSyncs, tr::one_of;

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
        .unum("over_budget", sh.over_budget).unum("varied", sh.varied);
    if (s.activity) {
      const Activity::Time t = times.count(key) ? times.at(key) : Activity::Time{};
      line.unum("unprofiled_records", t.records).raw("unprofiled_ns", number(t.ns));
    }
    line.write(s.out);
  }
  tr::JsonLine("end").unum("profiled", s.profiled).unum("unprofiled", s.skipped).unum("unreplayable", s.unreplayable)
      .unum("captured", s.captured).unum("passes", s.passes).unum("sample", s.sample).str("unprofiled_time", s.activity_detail)
      .raw("budget", number(s.budget)).unum("over_budget", s.over_budget).unum("varied", s.varied)
      .unum("memory_refused", s.memory_refused).unum("sessions", s.sessions).raw("setup_s", number(s.setup_ns * 1e-9))
      .raw("replay_s", number(s.replay_ns * 1e-9)).raw("decode_s", number(s.decode_ns * 1e-9))
      .raw("prepare_s", number(prepare_s)).raw("prepare_wait_s", number(prepare_wait_s))
      .raw("enable_ahead_s", number(enable_ahead_s)).str("enable_ahead", enable_state)
      .unum("end_ns", tr::now_ns()).write(s.out);
  s.out.flush();
  std::fprintf(stderr, "archbench-topdown: %llu launches profiled, %llu not (%zu passes: set-up %.2f s, "
               "replays %.2f s, decoding %.2f s); %s\n",
               static_cast<unsigned long long>(s.profiled), static_cast<unsigned long long>(s.skipped),
               s.passes, s.setup_ns * 1e-9, s.replay_ns * 1e-9, s.decode_ns * 1e-9,
               s.out.name().c_str());
}

}  // namespace archbench::topdown_lib

using namespace archbench::topdown_lib;

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.sub) return 1;
  if (!tr::open_records(s.out, "ARCHBENCH_TOPDOWN_OUT", "topdown", "archbench-topdown", "unprofiled")) return 0;
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
  tr::process_record(tr::now_ns()).write(s.out);
  std::string holder;
  if (const CUptiResult r = tr::subscribe(&s.sub, callback, "archbench topdown", &holder); r != CUPTI_SUCCESS) {
    std::fprintf(stderr, "archbench-topdown: %s; unprofiled\n", tr::subscribe_failure(r, holder).c_str());
    return 0;
  }
  tr::enable_callbacks(s.sub, CUPTI_CB_DOMAIN_DRIVER_API, tr::kLaunches);
  tr::enable_callbacks(s.sub, CUPTI_CB_DOMAIN_RUNTIME_API, tr::kRuntimeLaunches);
  // The GPU time of the launches not profiled: CUPTI's kernel records (no serialisation);
  // without them, each shape's unprofiled launches are counted at its profiled launches' mean.
  if (s.sample != 0 || s.max_per_kernel != 0 || s.filter) {
    CUptiResult r = cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed);
    if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    s.activity = r == CUPTI_SUCCESS;
    s.activity_detail = s.activity ? "CUPTI kernel activity records"
                                   : "each shape's profiled mean (kernel activity: " + tr::cupti_words(r) + ")";
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
  tr::enable_callbacks(s.sub, CUPTI_CB_DOMAIN_DRIVER_API, tr::kSyncs);
  tr::enable_callbacks(s.sub, CUPTI_CB_DOMAIN_RESOURCE, {CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
                                                          CUPTI_CBID_RESOURCE_CONTEXT_CREATED});
  tr::exit_first(finish);  // before CUPTI's own objects go (see there)
  {
    Prepared& pr = prepared();
    std::lock_guard<std::mutex> lk(pr.mu);
    pr.injection_done = true;
    pr.cv.notify_all();
  }
  return 1;
}
