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

#include "tools/analysis/pmsampling/pmsampling.hpp"

namespace archbench::pmsampling {
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

State& state() {
  static State* s = new State;  // never destroyed: callbacks and the threads may outlive exit
  return *s;
}

void emit(State& s, tr::JsonLine&& line, bool flush) {
  std::lock_guard<std::mutex> lock(s.out_mu);
  if (!s.out.is_open() || getpid() != s.pid) return;
  if (s.cfg.sampler) line.str("role", "sampler");  // told apart from the program's once the files are merged
  s.out.put(line);
  if (flush) s.out.flush();
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

// Waits (at most `limit`) for the host object: true where it is there.
bool wait_for_host(State& s, std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lk(s.host_mu);
  s.host_cv.wait_for(lk, limit, [&] { return s.host_ready || s.host_failed; });
  return s.host_ready;
}

// ---- Kernels: activity records (GPU time) and launches (host time) --------------------------

// CUPTI's activity buffers: 4 MiB each (tools/analysis/common/cupti.hpp).
constexpr auto on_buffer_requested = tr::buffer_requested<std::size_t(4) << 20>;

void CUPTIAPI on_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) try {
  State& s = state();
  std::vector<tr::JsonLine> lines;
  tr::for_each_record(buffer, valid, [&](const CUpti_Activity* r) {
    if (const CUpti_ActivityKernel10* k = tr::kernel_record(r)) {
      tr::JsonLine line("kernel");
      line.str("name", k->name ? tr::demangle(k->name) : "?").unum("start", k->start).unum("end", k->end)
          .unum("correlation", k->correlationId).unum("stream", k->streamId).unum("device", k->deviceId)
          .nums("grid", tr::grid_of(*k)).nums("block", tr::block_of(*k));
      lines.push_back(std::move(line));
    }
    return true;
  });
  s.kernel_records += lines.size();
  if (!lines.empty()) {
    std::lock_guard<std::mutex> lock(s.out_mu);
    if (getpid() == s.pid) {
      for (tr::JsonLine& l : lines) s.out.put(l);
      s.out.flush();
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
                 static_cast<unsigned long long>(s.launches.load()), s.out.name().c_str());
  else if (s.sampling)
    std::fprintf(stderr, "%s: %llu samples%s, %llu kernel records, %llu launches; %s\n", kTag,
                 static_cast<unsigned long long>(st.samples), st.lost ? " (some lost)" : "",
                 static_cast<unsigned long long>(s.kernel_records.load()),
                 static_cast<unsigned long long>(s.launches.load()), s.out.name().c_str());
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
  const bool graph = tr::one_of(id, tr::kGraphLaunches);
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

}  // namespace archbench::pmsampling

using namespace archbench::pmsampling;

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
  if (!tr::open_records(s.out, "ARCHBENCH_PM_OUT", "pmsampling", kTag, "unprofiled")) return 0;
  emit(s, tr::process_record(t0), true);
  std::string holder;
  if (const CUptiResult r = tr::subscribe(&s.sub, callback, "archbench timeline", &holder); r != CUPTI_SUCCESS) {
    fail(s, tr::subscribe_failure(r, holder));
    return 0;
  }
  tr::enable_callbacks(s.sub, CUPTI_CB_DOMAIN_DRIVER_API, tr::kLaunches);
  tr::enable_callbacks(s.sub, CUPTI_CB_DOMAIN_DRIVER_API, tr::kGraphLaunches);
  tr::enable_callbacks(s.sub, CUPTI_CB_DOMAIN_RESOURCE, {CUPTI_CBID_RESOURCE_CONTEXT_CREATED,
                                                          CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING});
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
