// Where a CUDA program's kernels stall, instruction by instruction (seed 003 section V on NVIDIA):
// a CUPTI injection library (CUDA_INJECTION64_PATH, set up by tools/archbench_pcsample.py) for any
// unmodified program. Two modes, one run each:
//   pc    CUPTI's PC Sampling API in continuous mode (kernels are not serialised; start/stop
//         control off, so sampling runs from enable to disable): each sample is one warp's PC and
//         stall reason. Drained (cuptiPCSamplingGetData, which never synchronises the device)
//         by the library's own thread every ARCHBENCH_PCSAMPLE_DRAIN_MS (drain mode `thread`),
//         or at the program's synchronisations (`sync`), or only at the end (`exit`: CUPTI
//         flushes into the configuration buffer at disable); records from module unloads, and
//         the rest at context end and exit.
//   sass  CUPTI's SASS metrics API: per instruction the warp-instructions and thread-instructions
//         executed, for instruction counts and warp efficiency. Instrumentation: slower, and
//         therefore its own run. On the H100 (driver 580, CUPTI 13) CUPTI counted only the first
//         kernel function launched in a process, whatever the strategy below: one range (lazy
//         patching) gave the first function launched; a range per function (flush, disable,
//         enable at each new function's first launch, lazy or eager) gave that same one and
//         nothing after; eager patching patched all 7 functions of the planted program (they ran
//         3-30 times slower) yet cuptiSassMetricsGetDataProperties reported 472 records, exactly
//         the first function's 236 instructions x 2 metrics, one instance: the records are
//         CUPTI's, not lost or merged here. The CG solver (a cudaMemset and a device-to-device
//         copy, driver kernels, between the configuration at context creation and its first
//         kernel) got nothing; hence the target strategy, configured at the launch it counts. A
//         third-party injection saw the
//         same on CUDA 13.0 ("only the first function launched after enable, nothing after the
//         first flush"). NVIDIA's sass_metrics sample never shows a second function's counts (it
//         flushes once, then only prints dropped records). So the library has strategies
//         (ARCHBENCH_PCSAMPLE_SASS_STRATEGY), each logging what it did (sass_enable, sass_disable,
//         sass_flush records: at each flush the functions with records and how many; at the end
//         a sass_summary record and a stderr line: functions counted of those launched):
//           deferred (default)  no enable at context creation; at the first kernel launch of the
//                               context every function of the launched function's module is
//                               loaded (cuModuleEnumerateFunctions, cuFuncLoad: lazy loading)
//                               and SASS metrics enabled once with eager patching (every loaded
//                               function patched in one step, at a time the program's modules
//                               are loaded: CUDA_MODULE_LOADING=EAGER, as the command sets);
//                               flushed only at module unload, context end and exit. Functions
//                               of modules loaded later are counted only if CUPTI patches them
//                               itself (sass_late records name the functions first launched
//                               after a module was loaded since the enable).
//           deferred-module     as deferred, and a new range (flush, disable, load, enable) at
//                               the first launch of a function of a module loaded since the
//                               last enable (NVRTC programs: a module a kernel).
//           once                one enable at context creation (lazy), flushed at the end.
//           function            a range per kernel function from its first launch (flush,
//                               disable, enable), the launch's stream idle first.
//           reconfig            as function, plus the device's SASS configuration unset and set
//                               again between ranges (CUPTI's per-device state renewed; on the
//                               H100 the second set failed: CUPTI_ERROR_OUT_OF_MEMORY).
//           target              one function a run (ARCHBENCH_PCSAMPLE_SASS_TARGET: N for the Nth
//                               function launched, default 1, or its name): the device configured
//                               and the one range opened (eager) at that function's first launch,
//                               after its stream has finished; flushed at the end. A run per
//                               kernel, where the one-function limit holds.
// Survival rules (the first H100 run hung in every program with this library and 0 samples):
//   - no lock of the library is held while it calls into CUPTI's PC sampling or SASS metrics
//     functions (CUPTI's worker threads may call back into the library), and a callback that
//     arrives on a thread already inside the library (re-entry) or on its own threads returns;
//   - a program thread never waits for the library: draining from a synchronisation callback
//     only happens when nobody else is inside CUPTI (try-lock), and at exit the library waits
//     for its CUPTI lock at most ARCHBENCH_PCSAMPLE_WATCHDOG_S;
//   - a watchdog thread: a CUPTI call of the library or a program call (synchronisation,
//     launch) that lasts more than ARCHBENCH_PCSAMPLE_WATCHDOG_S is written down (a `watchdog`
//     record, flushed, and stderr); a program stuck that long in a synchronisation or launch gets
//     PC sampling disabled (then it can finish; the report says so); a library stuck that long at
//     exit writes its end record and ends the process (exit status 0, `forced_exit`).
//   - every record except the PC records is flushed as it is written, so a killed run leaves
//     what it did; ARCHBENCH_PCSAMPLING_DEBUG=1 logs every step to stderr.
// Every module's cubin comes from the module-loaded callback (also when the driver loads a module
// lazily inside a call of the library: kept then and taken later); it is kept (for
// cuptiGetSassToSourceCorrelation: file and line of each PC, -lineinfo) and written beside the
// output for the disassembly. Records, one JSON object a line (tools/archbench/pcsample.py reads
// them): process, config, module, pc (pc mode), sass (sass mode), drain, launch, watchdog, error,
// end.
// Environment (set by the command):
//   ARCHBENCH_PCSAMPLE_OUT         output file (default ./pcsample-<pid>.jsonl); cubins in OUT.cubins/
//   ARCHBENCH_PCSAMPLE_MODE        pc (default) or sass
//   ARCHBENCH_PCSAMPLE_PERIOD      pc mode: sampling period, log2 of cycles (5..31); auto (default): the
//                                  smallest at which the GPU asks for at most 4 M samples/s (2^16 on the
//                                  H100); 0: CUPTI's default (2^11 on the H100: overflowed a 512 MB buffer)
//   ARCHBENCH_PCSAMPLE_HW_BUFFER_MB pc mode: CUPTI's hardware buffer (default 32; 0: CUPTI's 512)
//   ARCHBENCH_PCSAMPLE_WORKER_SLEEP_MS pc mode: CUPTI's decoding thread's sleep (default 20; 0: CUPTI's 100)
//   ARCHBENCH_PCSAMPLE_DRAIN       pc mode: thread (default), sync or exit (see above)
//   ARCHBENCH_PCSAMPLE_DRAIN_MS    least time between two drains (default 50)
//   ARCHBENCH_PCSAMPLE_SASS_STRATEGY sass mode: deferred (default), deferred-module, once, function or
//                                  reconfig (see above); ARCHBENCH_PCSAMPLE_SASS_RANGE=one|function (the
//                                  older name) means once|function where no strategy is given
//   ARCHBENCH_PCSAMPLE_SASS_TARGET sass mode, strategy target: N (the Nth distinct function launched) or a
//                                  name (mangled, or demangled with or without parameters: hot_chase)
//   ARCHBENCH_PCSAMPLE_SASS_LAZY   sass mode: 1 lazy patching, 0 every loaded function at enable (default:
//                                  0 for the deferred strategies and target, 1 for the others)
//   ARCHBENCH_PCSAMPLE_PC_ENABLE   pc mode: async (default) enables PC sampling on a thread of the library
//                                  while the program goes on (its host work before the first kernel hides
//                                  CUPTI's ~0.08 s enable; on the H100 CG ran 18-56 ms faster, the same
//                                  samples), and the context's first kernel or graph launch waits for it
//                                  (at most the watchdog's time) so no kernel goes unsampled (a pc_enable
//                                  record says how long the enable took, pc_enable_wait how long the launch
//                                  waited; a context destroyed meanwhile waits for the enable too); sync
//                                  enables it inside the context-created callback. The end record has the
//                                  fixed costs: enable_s, first_launch_s, exit_drain_s, disable_s
//   ARCHBENCH_PCSAMPLE_WATCHDOG_S  seconds before the watchdog acts (default 10; 0: no watchdog)
//   ARCHBENCH_PCSAMPLING_DEBUG     1: every step on stderr (archbench-pcsample[t s tid]: ...)
#include "tools/analysis/pcsampling/pcsampling.hpp"

namespace archbench::pcsampling {
State& state() {
  static State* s = new State;  // never destroyed: callbacks may come during exit
  return *s;
}

// Writes a record now (s.mu held), flushed: a run killed later keeps it.
void emit(State& s, tr::JsonLine line) {
  s.out.put(line);
  s.out.flush();
}

void note_error(State& s, const std::string& what) {  // s.mu held
  std::fprintf(stderr, "archbench-pcsample: %s\n", what.c_str());
  emit(s, std::move(tr::JsonLine("error").str("reason", what).unum("ns", tr::now_ns())));
  if (s.error.empty()) s.error = what;
}

void note_error_locked(State& s, const std::string& what) {
  std::lock_guard<std::mutex> lock(s.mu);
  note_error(s, what);
}

using tr::kGraphLaunches, tr::kLaunches, tr::kSyncs, tr::one_of;

// Graph launches (pc mode): with the async enable they wait for it as kernel launches do.
thread_local uint64_t t_launch_enter = 0;  // pc mode: when this thread's launch call entered (the first launch's cost)

// The program's call `what` on this thread waits (enter) or no longer does (exit), for the watchdog.
void wait_mark(bool enter, const char* what) {
  const long tid = long(syscall(SYS_gettid));
  std::lock_guard<std::mutex> lock(g_wait_mu);
  if (enter) {
    g_waits[tid] = Wait{tr::now_ns(), what ? what : "?", false};
  } else {
    auto it = g_waits.find(tid);
    if (it == g_waits.end()) return;
    if (it->second.reported)
      dbg("%s returned after %.1f s", it->second.what.c_str(), double(tr::now_ns() - it->second.since) * 1e-9);
    g_waits.erase(it);
  }
}

std::atomic<uint64_t> g_callbacks{0};

void CUPTIAPI callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (t_inside) {  // caused by the library itself (CUPTI or the driver calling back): never wait on it
    if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
      // A module the driver loaded inside the library's own call: keep its cubin (no lock of the
      // state: this thread may hold it), for the next callback or drain to take.
      const auto* m = static_cast<const CUpti_ModuleResourceData*>(static_cast<const CUpti_ResourceData*>(data)->resourceDescriptor);
      if (m && m->pCubin && m->cubinSize) {
        std::lock_guard<std::mutex> lock(g_pending_mu);
        g_pending.push_back(PendingCubin{std::vector<char>(m->pCubin, m->pCubin + m->cubinSize), m->moduleId});
      }
      ++state().modules_loaded;
      dbg("module loaded on a thread inside the library: cubin of %zu B kept for later", m ? size_t(m->cubinSize) : size_t(0));
      return;
    }
    dbg("callback %d/%u on a thread inside the library: ignored", int(domain), unsigned(id));
    return;
  }
  Inside inside;
  State& s = state();
  const uint64_t nth = ++g_callbacks;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    const bool enter = cb->callbackSite == CUPTI_API_ENTER;
    if (nth <= 40 || nth % 10000 == 0)
      dbg("callback #%llu: %s %s%s%s", static_cast<unsigned long long>(nth), cb->functionName ? cb->functionName : "?",
          enter ? "enter" : "exit", cb->symbolName ? " " : "", cb->symbolName ? cb->symbolName : "");
    wait_mark(enter, cb->functionName);
    const bool graph = one_of(id, kGraphLaunches);
    if (graph || one_of(id, kLaunches)) {
      if (enter && s.mode == "sass" && cb->symbolName && !s.finishing && !graph) sass_on_launch(s, cb, id);
      if (enter && s.mode == "pc" && s.pc_enable == "async") wait_for_enable(s, cb->context);
      std::lock_guard<std::mutex> lock(s.mu);
      auto it = s.contexts.find(cb->context);
      if (enter) {
        if (s.first_launch_s < 0) t_launch_enter = tr::now_ns();  // after any wait for the enable
        int none = 0;
        if (it != s.contexts.end()) it->second.first_launch.compare_exchange_strong(none, 1);
      } else {
        if (s.first_launch_s < 0 && t_launch_enter) s.first_launch_s = double(tr::now_ns() - t_launch_enter) * 1e-9;
        if (it != s.contexts.end()) it->second.first_launch = 2;
      }
      if (!s.done && !graph) on_launch(s, cb, id), adopt_pending(s);
      return;
    }
    // A synchronisation's exit: drain here only in pc mode's `sync` drain, only if nobody else is
    // inside CUPTI; never wait. SASS metrics are flushed only where the strategy switches ranges,
    // at module unload, context end and exit: on the H100 a flush in the middle of the run ended
    // the collection (every kernel first launched after the first cuptiSassMetricsGetDataProperties
    // had no records).
    if (enter || s.finishing || s.mode == "sass" || s.drain_mode != "sync") return;
    if (tr::now_ns() - s.last_drain < s.drain_ns) return;
    std::unique_lock<std::timed_mutex> cupti(s.cupti, std::try_to_lock);
    if (!cupti.owns_lock()) {
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.skipped_drains;
      return;
    }
    Context* c = nullptr;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      auto it = s.contexts.find(cb->context);
      if (it != s.contexts.end() && !s.done) c = &it->second;
    }
    if (c) drain(s, cb->context, *c, cb->functionName ? cb->functionName : "synchronisation");
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
  const auto* r = static_cast<const CUpti_ResourceData*>(data);
  dbg("resource callback %u, context %p", unsigned(id), static_cast<void*>(r->context));
  const auto limit = std::chrono::milliseconds(int64_t(std::max(s.watchdog_s, 1.0) * 1000));
  if (id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    Context* c = nullptr;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.done) return;
      c = &s.contexts[r->context];
      CUdevice dev = 0;
      if (cuCtxGetDevice(&dev) == CUDA_SUCCESS) c->device = int(dev);
    }
    if (s.mode == "pc" && s.pc_enable == "async") return enable_pc_async(s, r->context, *c);
    std::unique_lock<std::timed_mutex> cupti(s.cupti, std::defer_lock);
    if (!cupti.try_lock_for(limit)) return note_error_locked(s, "context created while the library's CUPTI call is stuck: not sampled");
    s.mode == "sass" ? sass_on_context(s, r->context, *c) : enable_pc(s, r->context, *c);
  } else if (id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    Context* c = nullptr;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      auto it = s.contexts.find(r->context);
      if (it == s.contexts.end() || s.done) return;
      c = &it->second;
    }
    // An async enable still running on the library's thread (a context destroyed right after its
    // creation): let it finish on the live context before it is disabled and forgotten (at most
    // the watchdog's time; the thread holds a reference to *c).
    const uint64_t t0 = tr::now_ns();
    while (c->enabling && tr::now_ns() - t0 < uint64_t(std::max(s.watchdog_s, 1.0) * 1e9))
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (c->enabling) return note_error_locked(s, "context destroyed while its async PC sampling enable is stuck: not disabled");
    std::unique_lock<std::timed_mutex> cupti(s.cupti, std::defer_lock);
    if (!cupti.try_lock_for(limit)) return note_error_locked(s, "context destroyed while the library's CUPTI call is stuck: its samples are lost");
    finish_context(s, r->context, *c, "context destroy");
    std::lock_guard<std::mutex> lock(s.mu);
    s.contexts.erase(r->context);
  } else if (id == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING && s.mode == "sass") {
    // SASS metrics: the module's counts before it goes.
    std::unique_lock<std::timed_mutex> cupti(s.cupti, std::defer_lock);
    if (!cupti.try_lock_for(limit)) return;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      auto it = s.contexts.find(r->context);
      if (it == s.contexts.end() || s.done || !it->second.enabled) return;
    }
    flush_sass(s, r->context, "module unload");
  } else if (id == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.modules_loaded;
    if (s.done) return;
    adopt_pending(s);
    on_module(s, r);
    // Records CUPTI flushed into the configuration buffer at an earlier unload (CUPTI writes
    // that buffer only inside the program's own unload and disable calls, never concurrently).
    auto it = s.contexts.find(r->context);
    if (it != s.contexts.end() && it->second.enabled && it->second.config && it->second.config->data.totalNumPcs)
      consume(s, r->context, it->second, it->second.config->data), s.out.flush();
  }
  // Module unload: CUPTI flushes the module's records into the configuration buffer itself
  // (cuptiPCSamplingGetData's documentation); they are taken at the next module load or the end.
}

// The library's thread that drains PC sampling (drain mode `thread`): never a program thread.
void drain_thread() {
  t_inside = true;
  State& s = state();
  dbg("drain thread started, every %.0f ms", double(s.drain_ns) * 1e-6);
  while (!s.stop_threads) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(s.drain_ns));
    if (s.stop_threads || s.finishing) break;
    std::unique_lock<std::timed_mutex> cupti(s.cupti, std::defer_lock);
    if (!cupti.try_lock_for(std::chrono::milliseconds(100))) continue;
    for (auto& [ctx, c] : enabled_contexts(s)) {
      // Not while the context's first launch call runs: CUPTI sets the sampling up inside it
      // (0.08-0.3 s on the H100), no kernel has run yet, and a GetData would only wait on it,
      // holding the library's CUPTI lock.
      if (c->first_launch == 1) continue;
      // CUPTI's calls expect the context current on the calling thread.
      if (cuCtxPushCurrent(ctx) != CUDA_SUCCESS) continue;
      drain(s, ctx, *c, "drain thread");
      CUcontext popped = nullptr;
      cuCtxPopCurrent(&popped);
    }
  }
  dbg("drain thread ends");
}

// Disables PC sampling on every context (the watchdog's remedy for a program stuck under it).
void disable_all(State& s, const char* why) {
  std::unique_lock<std::timed_mutex> cupti(s.cupti, std::defer_lock);
  if (!cupti.try_lock_for(std::chrono::seconds(2))) {
    dbg("watchdog: cannot disable sampling: the library's CUPTI call (%s) holds the lock", g_op_what.load());
    return;
  }
  for (auto& [ctx, c] : enabled_contexts(s)) {
    if (cuCtxPushCurrent(ctx) != CUDA_SUCCESS) continue;
    finish_context(s, ctx, *c, why);
    CUcontext popped = nullptr;
    cuCtxPopCurrent(&popped);
  }
  std::lock_guard<std::mutex> lock(s.mu);
  s.disabled_by_watchdog = true;
}

void write_end(State& s);

void watchdog_thread() {
  t_inside = true;
  State& s = state();
  const uint64_t limit = uint64_t(s.watchdog_s * 1e9);
  uint64_t reported_op = 0;
  dbg("watchdog started: %.0f s", s.watchdog_s);
  while (!s.stop_threads) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const uint64_t now = tr::now_ns();
    // The library stuck in a CUPTI call of its own.
    const uint64_t since = g_op_since, seq = g_op_seq;
    if (since && now - since > limit && seq != reported_op) {
      reported_op = seq;
      const std::string what = g_op_what.load();
      std::fprintf(stderr, "archbench-pcsample: watchdog: the library has been in %s for %.0f s%s\n", what.c_str(),
                   double(now - since) * 1e-9, s.finishing ? " at exit" : "");
      {
        std::unique_lock<std::mutex> lock(s.mu, std::defer_lock);
        if (lock.try_lock()) {
          ++s.watchdog_events;
          emit(s, std::move(tr::JsonLine("watchdog").str("stuck", "library").str("call", what)
                                .raw("seconds", std::to_string(double(now - since) * 1e-9)).boolean("at_exit", s.finishing)
                                .unum("ns", now)));
          if (s.error.empty()) s.error = "stuck in " + what;
        }
      }
      if (s.finishing) {  // the program is done; the library must not keep it from ending
        std::lock_guard<std::mutex> lock(s.mu);
        s.forced_exit = true;
        write_end(s);
        std::fprintf(stderr, "archbench-pcsample: watchdog: ending the process (exit status 0) after the program finished\n");
        _exit(0);
      }
    }
    // The program stuck in a synchronisation or launch under sampling.
    std::string stuck;
    double stuck_s = 0;
    {
      std::lock_guard<std::mutex> lock(g_wait_mu);
      for (auto& [tid, w] : g_waits)
        if (!w.reported && now - w.since > limit) {
          w.reported = true, stuck = w.what, stuck_s = double(now - w.since) * 1e-9;
          break;
        }
    }
    if (stuck.empty()) continue;
    std::fprintf(stderr, "archbench-pcsample: watchdog: the program has waited in %s for %.0f s under sampling%s\n",
                 stuck.c_str(), stuck_s, s.mode == "pc" && !s.disabled_by_watchdog ? "; disabling PC sampling" : "");
    {
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.watchdog_events;
      emit(s, std::move(tr::JsonLine("watchdog").str("stuck", "program").str("call", stuck).raw("seconds", std::to_string(stuck_s))
                            .str("library_call", since ? g_op_what.load() : "").unum("ns", now)));
      if (s.error.empty()) s.error = "the program waited in " + stuck + " for " + std::to_string(int(stuck_s)) + " s under sampling";
    }
    if (s.mode == "pc" && !s.disabled_by_watchdog && !s.finishing) disable_all(s, "watchdog");
  }
}

void write_end(State& s) {  // s.mu held
  if (s.done) return;
  adopt_pending(s);
  s.done = true;
  // Samples lost to hardware buffer overflows: CUPTI does not count them; estimated from the time
  // the drains failed (first to last failure, plus one drain interval) at the rate of the rest.
  const uint64_t sampled_ns = s.sampling_ns + (s.enabled_ns ? tr::now_ns() - s.enabled_ns : 0);
  const uint64_t overflow_ns = s.oom_drains ? std::min(sampled_ns, s.oom_last_ns - s.oom_first_ns + s.drain_ns) : 0;
  const double rate = sampled_ns > overflow_ns ? double(s.samples) / (double(sampled_ns - overflow_ns) * 1e-9) : 0;
  const uint64_t lost = uint64_t(rate * double(overflow_ns) * 1e-9);
  for (const auto& [key, sh] : s.shapes)
    tr::JsonLine("launch").str("function", sh.name).str("name", tr::demangle(sh.name.c_str())).nums("grid", sh.grid)
        .nums("block", sh.block).unum("launches", sh.launches).raw("warps_per_scheduler", std::to_string(sh.warps_per_scheduler))
        .write(s.out);
  std::string sass_line;
  if (s.mode == "sass") {  // which launched functions got counts, at a glance
    std::set<std::string> launched;
    for (const auto& [key, sh] : s.shapes) launched.insert(sh.name);
    std::string counted = "[", missing = "[", names;
    size_t n_missing = 0;
    for (const auto& f : launched) {
      std::string& to = s.sass_counted.count(f) ? counted : missing;
      if (to.size() > 1) to += ',';
      to += tr::JsonLine::quote(f);
      if (!s.sass_counted.count(f) && n_missing++ < 6) names += (names.empty() ? "" : ", ") + tr::demangle(f.c_str());
    }
    tr::JsonLine("sass_summary").str("strategy", s.sass_strategy).str("target", s.sass_target).boolean("lazy_patching", s.sass_lazy)
        .unum("launched", launched.size()).unum("counted", launched.size() - n_missing).raw("counted_functions", counted + "]")
        .raw("missing_functions", missing + "]").unum("enables", s.sass_enables).unum("flushes", s.sass_flushes)
        .unum("late_functions", s.sass_late.size()).write(s.out);
    if (s.sass_strategy == "target")  // one function a run, by design: say whether it was counted
      sass_line = "SASS metrics (target " + (s.sass_target.empty() ? std::string("1") : tr::demangle(s.sass_target.c_str())) +
                  "): " + (launched.size() > n_missing ? "counted" : "no counts") + " (" +
                  std::to_string(launched.size()) + " functions launched)";
    else
      sass_line = "SASS metrics (" + s.sass_strategy + (s.sass_lazy ? ", lazy" : ", eager") + " patching): counts for " +
                  std::to_string(launched.size() - n_missing) + " of " + std::to_string(launched.size()) +
                  " launched functions" + (n_missing ? "; none for " + names + (n_missing > 6 ? ", ..." : "") : "");
  }
  emit(s, std::move(tr::JsonLine("end").str("mode", s.mode).unum("pc_records", s.pc_records).unum("sass_records", s.sass_records)
      .unum("total_samples", s.samples).unum("dropped_samples", s.dropped).unum("non_user_samples", s.non_user)
      .boolean("hardware_buffer_full", s.hw_full).unum("overflow_drains", s.oom_drains)
      .raw("overflow_s", std::to_string(double(overflow_ns) * 1e-9)).unum("lost_samples_estimate", lost)
      .raw("sampled_s", std::to_string(double(sampled_ns) * 1e-9)).unum("drains", s.drains).unum("skipped_drains", s.skipped_drains)
      .unum("modules", s.cubins.size()).str("drain", s.drain_mode).unum("watchdog_events", s.watchdog_events)
      .boolean("disabled_by_watchdog", s.disabled_by_watchdog).boolean("forced_exit", s.forced_exit)
      .unum("sass_ranges", s.sass_ranges).unum("sass_deferred_ranges", s.sass_deferred).unum("sass_dropped_records", s.sass_dropped)
      .str("sass_strategy", s.sass_strategy).unum("sass_enables", s.sass_enables).unum("sass_flushes", s.sass_flushes)
      .str("pc_enable", s.pc_enable).str("sass_target", s.sass_target)
      .raw("enable_s", std::to_string(s.enable_s)).raw("first_launch_s", std::to_string(s.first_launch_s))
      .raw("exit_drain_s", std::to_string(s.exit_drain_s)).raw("disable_s", std::to_string(s.disable_s))
      .str("error", s.error).unum("end_ns", tr::now_ns())));
  std::fprintf(stderr, "archbench-pcsample: %s mode, %llu samples (%llu dropped, ~%llu lost to %llu overflowed drains), %zu modules%s%s; %s\n", s.mode.c_str(),
               static_cast<unsigned long long>(s.samples), static_cast<unsigned long long>(s.dropped),
               static_cast<unsigned long long>(lost), static_cast<unsigned long long>(s.oom_drains), s.cubins.size(),
               s.error.empty() ? "" : "; ", s.error.c_str(), s.out.name().c_str());
  if (!sass_line.empty()) std::fprintf(stderr, "archbench-pcsample: %s\n", sass_line.c_str());
}

void finish() {
  Inside inside;
  State& s = state();
  dbg("exit: finishing");
  s.finishing = true;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.done) return;
  }
  std::unique_lock<std::timed_mutex> cupti(s.cupti, std::defer_lock);
  if (cupti.try_lock_for(std::chrono::milliseconds(int64_t(std::max(s.watchdog_s, 1.0) * 1000)))) {
    for (auto& [ctx, c] : enabled_contexts(s)) finish_context(s, ctx, *c, "exit");
  } else {
    note_error_locked(s, std::string("at exit the library's CUPTI call (") + g_op_what.load() + ") was still running: the rest of the samples are lost");
  }
  s.stop_threads = true;
  std::lock_guard<std::mutex> lock(s.mu);
  write_end(s);
  dbg("exit: done");
}

}  // namespace archbench::pcsampling

using namespace archbench::pcsampling;

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  Inside inside;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.sub) return 1;
  g_t0 = tr::now_ns();
  if (const char* d = std::getenv("ARCHBENCH_PCSAMPLING_DEBUG"); d && *d && std::strcmp(d, "0")) g_debug = true;
  if (!tr::open_records(s.out, "ARCHBENCH_PCSAMPLE_OUT", "pcsample", "archbench-pcsample", "unobserved")) return 0;
  s.cubin_dir = s.out.name() + ".cubins";
  mkdir(s.cubin_dir.c_str(), 0755);
  if (const char* m = std::getenv("ARCHBENCH_PCSAMPLE_MODE"); m && *m) s.mode = m;
  if (s.mode != "pc" && s.mode != "sass") {
    std::fprintf(stderr, "archbench-pcsample: unknown mode %s (pc or sass); unobserved\n", s.mode.c_str());
    return 0;
  }
  if (const char* p = std::getenv("ARCHBENCH_PCSAMPLE_PERIOD"); p && *p && std::strcmp(p, "auto")) s.period = uint32_t(std::strtoul(p, nullptr, 10));
  // The SASS strategy; the older ARCHBENCH_PCSAMPLE_SASS_RANGE (one, function) where none is given.
  const std::string range = getenv_or("ARCHBENCH_PCSAMPLE_SASS_RANGE", "");
  s.sass_strategy = getenv_or("ARCHBENCH_PCSAMPLE_SASS_STRATEGY", range == "one" ? "once" : range == "function" ? "function" : "deferred");
  if (s.sass_strategy != "deferred" && s.sass_strategy != "deferred-module" && s.sass_strategy != "once" &&
      s.sass_strategy != "function" && s.sass_strategy != "reconfig" && s.sass_strategy != "target") {
    std::fprintf(stderr, "archbench-pcsample: unknown SASS strategy %s (deferred, deferred-module, once, function, reconfig "
                 "or target); unobserved\n", s.sass_strategy.c_str());
    return 0;
  }
  s.sass_target = getenv_or("ARCHBENCH_PCSAMPLE_SASS_TARGET", "");
  // Eager patching for the deferred strategies (every function loaded by the first launch, patched
  // at once), lazy for the others, unless asked.
  s.sass_lazy = getenv_or("ARCHBENCH_PCSAMPLE_SASS_LAZY",
                          s.sass_strategy.rfind("deferred", 0) == 0 || s.sass_strategy == "target" ? "0" : "1") != "0";
  s.pc_enable = getenv_or("ARCHBENCH_PCSAMPLE_PC_ENABLE", "async");
  if (s.pc_enable != "sync" && s.pc_enable != "async") {
    std::fprintf(stderr, "archbench-pcsample: unknown PC sampling enable %s (sync or async); unobserved\n", s.pc_enable.c_str());
    return 0;
  }
  if (const char* p = std::getenv("ARCHBENCH_PCSAMPLE_HW_BUFFER_MB"); p && *p) s.hw_buffer_bytes = uint64_t(std::strtoull(p, nullptr, 10)) << 20;
  if (const char* p = std::getenv("ARCHBENCH_PCSAMPLE_WORKER_SLEEP_MS"); p && *p) s.worker_sleep_ms = std::strtoull(p, nullptr, 10);
  if (const char* d = std::getenv("ARCHBENCH_PCSAMPLE_DRAIN_MS"); d && *d) s.drain_ns = std::max<uint64_t>(uint64_t(std::atof(d) * 1e6), 1'000'000);
  if (const char* d = std::getenv("ARCHBENCH_PCSAMPLE_DRAIN"); d && *d) s.drain_mode = d;
  if (s.drain_mode != "thread" && s.drain_mode != "sync" && s.drain_mode != "exit") {
    std::fprintf(stderr, "archbench-pcsample: unknown drain mode %s (thread, sync or exit); unobserved\n", s.drain_mode.c_str());
    return 0;
  }
  if (const char* w = std::getenv("ARCHBENCH_PCSAMPLE_WATCHDOG_S"); w && *w) s.watchdog_s = std::atof(w);
  emit(s, std::move(tr::process_record(tr::now_ns())
      .str("mode", s.mode).str("drain", s.drain_mode).raw("watchdog_s", std::to_string(s.watchdog_s))
      .str("sass_strategy", s.sass_strategy).str("sass_target", s.sass_target).boolean("sass_lazy_patching", s.sass_lazy)
      .str("pc_enable", s.pc_enable)));
  dbg("injection: %s mode, drain %s every %.0f ms, watchdog %.0f s, out %s", s.mode.c_str(), s.drain_mode.c_str(),
      double(s.drain_ns) * 1e-6, s.watchdog_s, s.out.name().c_str());
  std::string holder;
  if (const CUptiResult r = tr::subscribe(&s.sub, callback, "archbench pcsample", &holder); r != CUPTI_SUCCESS) {
    std::fprintf(stderr, "archbench-pcsample: %s; unobserved\n", tr::subscribe_failure(r, holder).c_str());
    return 0;
  }
  tr::enable_callbacks(s.sub, CUPTI_CB_DOMAIN_DRIVER_API, kLaunches);
  if (s.mode == "pc")  // (async enable: a graph launch waits for it too)
    tr::enable_callbacks(s.sub, CUPTI_CB_DOMAIN_DRIVER_API, kGraphLaunches);
  tr::enable_callbacks(s.sub, CUPTI_CB_DOMAIN_DRIVER_API, kSyncs);
  tr::enable_callbacks(s.sub, CUPTI_CB_DOMAIN_RESOURCE, {CUPTI_CBID_RESOURCE_CONTEXT_CREATED, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
                                                          CUPTI_CBID_RESOURCE_MODULE_LOADED, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING});
  // Synchronisation and launch callbacks at both sites (enter: the watchdog's view of a wait).
  tr::exit_first(finish);  // before CUPTI's own objects go (see there)
  // The library's threads take none of the program's signals (tools/analysis/common: spawn_quiet).
  if (s.mode == "pc" && s.drain_mode == "thread" && !tr::spawn_quiet(drain_thread))
    std::fprintf(stderr, "archbench-pcsample: no drain thread\n");
  if (s.watchdog_s > 0 && !tr::spawn_quiet(watchdog_thread)) std::fprintf(stderr, "archbench-pcsample: no watchdog thread\n");
  dbg("injection ready");
  return 1;
}
