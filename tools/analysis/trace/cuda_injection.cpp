// CUDA tracer: a CUPTI injection library for unmodified programs.
//   CUDA_INJECTION64_PATH=/path/libarchbench_trace_cuda.so ./program
// The driver loads it at cuInit and calls InitializeInjection. It records kernels, copies,
// memsets, synchronisations and module loads (CUDA's "builds") with the host call path that
// issued each, the device allocations (cudaMalloc, managed, stream-ordered and from pools), samples
// the program's threads, and writes tools/analysis/FORMAT.md records to
// $ARCHBENCH_TRACE_DIR/<prog>-<pid>.jsonl as it goes, so that a program that crashes or is killed
// keeps what was recorded:
// - a writer thread asks CUPTI for its completed records (cuptiActivityFlushAll, no device
//   synchronisation) every second, and after a synchronisation returns (at most every 100 ms),
//   writes what it got and flushes the file;
// - a fatal signal whose disposition is the default (SIGSEGV, SIGABRT, SIGTERM, ...) hands the
//   writer a forced flush and waits for it (3 s at most: CUPTI may be what crashed), then the
//   program dies of the signal as it would have; the file ends with an end record naming it;
// - at exit, a forced flush and the rest.
// A record waits until the call behind it has returned (a synchronous copy's hash is taken then).
//
// Two CUPTI APIs, joined by correlation id:
// - the Callback API, at the entry and exit of runtime and driver calls, on the calling thread:
//   call path, thread, host times, host-byte hashes of synchronous copies, the device buffers a
//   kernel is given, allocations, module loads;
// - the Activity API, in buffers CUPTI fills: what ran on the device and when.
// A runtime call (cudaMemcpy) runs driver calls inside it; both correlation ids name one call,
// so the path is taken once, at the outermost call.
//
// Clock: CUPTI is given CLOCK_MONOTONIC as its timestamp source
// (cuptiActivityRegisterTimestampCallback; by default it uses CLOCK_REALTIME on Linux), so
// device times arrive on the host's clock already, interpolated by CUPTI. Where that cannot be
// registered, the offset between cuptiGetTimestamp and CLOCK_MONOTONIC is measured once at start
// and added to every device time; the process record says which.
//
// Environment: ARCHBENCH_TRACE_DIR (where the file goes), ARCHBENCH_TRACE_SAMPLE_US (sampling
// interval, default 1000; 0: no sampling), ARCHBENCH_TRACE_NO_ARGS=1 (do not read kernel
// arguments: the one driver query made inside a launch's callback, should a driver object to it).
#include "tools/analysis/trace/cuda_tracer.hpp"

namespace archbench::trace_cuda {

// The writer thread: every second, or when woken, takes what CUPTI has completed and writes it.
void* writer(void*) {
  g_writer_tid = tr::this_tid();
  State& s = st();
  for (;;) {
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);  // sem_timedwait's clock
    t.tv_sec += 1;
    while (sem_timedwait(&g_wake, &t) != 0 && errno == EINTR) {
    }
    if (g_stop) return nullptr;
    int sig = g_crash.load();
    // A fatal signal: CUPTI's buffers as they are (the device may still be running).
    cuptiActivityFlushAll(sig ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (sig) {
        finish(sig);
      } else if (!s.done) {
        write_ready(false);
        s.out.flush();
      }
    }
    if (sig) {
      g_crash_done = true;
      return nullptr;
    }
  }
}

// At exit: the writer stops, CUPTI delivers everything (records of contexts destroyed before
// were delivered then), the rest is written.
void at_exit() {
  if (getpid() != g_pid) return;
  if (g_writer_tid && !g_stop.exchange(true)) {
    sem_post(&g_wake);
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += 5;
    pthread_timedjoin_np(g_writer, nullptr, &t);
  }
  CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS) warn("cuptiActivityFlushAll at exit (records delivered before are kept)", r);
  tr::sampler().stop();
  std::lock_guard<std::mutex> lock(st().mu);
  finish(0);
}

// A fatal signal whose disposition was the default, on the thread that got it: the writer
// writes what CUPTI has and the end record, while this thread waits (async-signal-safe: a
// semaphore post, atomics and nanosleep), at most 3 s: the crash may be inside CUPTI or hold a
// lock the writer needs. Without the writer, only the end record, if no thread is writing.
// The program then dies of the signal (install_crash_hook).
void on_fatal(int sig) {
  if (g_writer_tid && g_writer_tid != tr::this_tid() && !g_stop) {
    int none = 0;
    if (g_crash.compare_exchange_strong(none, sig)) sem_post(&g_wake);
    for (int i = 0; i < 300 && !g_crash_done; ++i) {
      timespec ten_ms{0, 10000000};
      nanosleep(&ten_ms, nullptr);
    }
    if (g_crash_done) return;
  }
  State& s = st();
  if (!s.mu.try_lock()) return;
  if (!s.done) s.out.end_at_signal(sig, s.dropped);
  s.done = true;
  s.mu.unlock();
}

// A forked child has no writer thread and no CUDA of its own: it writes nothing (guard_fork).
void after_fork_child() {
  st().done = true;
  g_writer_tid = 0;
}

// Marks which calls are traced, by name, so that every variant (_v2, _ptsz, _ptds) is included.
std::vector<bool> traced_calls(CUpti_CallbackDomain domain, uint32_t count) {
  static const char* const kWords[] = {"Launch", "Memcpy", "Memset", "Synchronize", "ModuleLoad", "LibraryLoad",
                                       "Malloc", "MemAlloc", "Free"};
  std::vector<bool> t(count, false);
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(domain, i, &name) != CUPTI_SUCCESS || !name) continue;
    for (const char* w : kWords)
      if (strstr(name, w)) t[i] = true;
  }
  return t;
}

// Sets CUPTI up. False (said on stderr) when it cannot be: the program runs untraced.
bool setup_cupti() {
  State& s = st();
  CUptiResult r = cuptiActivityRegisterTimestampCallback(&monotonic_timestamp);
  if (r == CUPTI_SUCCESS) {
    s.clock_detail = "CLOCK_MONOTONIC given to CUPTI (cuptiActivityRegisterTimestampCallback)";
  } else {
    uint64_t c = 0;
    cuptiGetTimestamp(&c);
    s.clock_offset = int64_t(tr::now_ns()) - int64_t(c);
    s.clock_detail = "CUPTI timestamp + " + std::to_string(s.clock_offset) + " ns (measured once at start)";
  }
#define CHECK(call)              \
  if ((r = (call)) != CUPTI_SUCCESS) { \
    warn(#call, r);              \
    return false;                \
  }
  CHECK(cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed));
  // Queued and submitted times of kernels (off by default; must precede CUDA's initialisation).
  if ((r = cuptiActivityEnableLatencyTimestamps(1)) != CUPTI_SUCCESS) warn("cuptiActivityEnableLatencyTimestamps", r);
  // The RUNTIME and DRIVER activity kinds are not enabled: the callbacks already time the calls
  // that matter, and a record per API call would only add volume no reader uses.
  for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONTEXT, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                               CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION})
    CHECK(cuptiActivityEnable(k));
  g_traced_runtime = traced_calls(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE);
  g_traced_driver = traced_calls(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE);
  CUpti_SubscriberHandle sub;
  std::string holder;
  if ((r = tr::subscribe(&sub, on_callback, "archbench trace", &holder)) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "archbench trace: %s; the program runs untraced\n", tr::subscribe_failure(r, holder).c_str());
    return false;
  }
  CHECK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API));
  CHECK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API));
  CHECK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
#undef CHECK
  return true;
}

bool init() {
  State& s = st();
  s.start_ns = tr::now_ns();
  g_pid = getpid();
  std::string file;
  FILE* f = tr::open_trace_file(&file);  // first: an unwritable folder costs the program nothing
  if (!f) return false;
  if (!setup_cupti()) {
    std::lock_guard<std::mutex> lock(s.mu);
    s.done = true;  // what CUPTI may still deliver is dropped
    fclose(f);
    unlink(file.c_str());
    return false;
  }
  const char* no_args = getenv("ARCHBENCH_TRACE_NO_ARGS");
  g_read_args = !(no_args && *no_args && strcmp(no_args, "0") != 0);
  const char* us = getenv("ARCHBENCH_TRACE_SAMPLE_US");
  uint64_t interval = (us ? strtoull(us, nullptr, 10) : 1000) * 1000;
  std::string why;
  if (interval && !tr::sampler().start(interval, &why)) {
    fprintf(stderr, "archbench trace (cuda): no sampling (%s); GPU_IDLE_CAUSE will be empty\n", why.c_str());
    interval = 0;
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.out.adopt(f, file);
    tr::Sampler& sm = tr::sampler();
    tr::JsonLine p("process");
    p.str("api", "cuda").num("pid", getpid()).str("command", tr::command_line()).unum("start_ns", s.start_ns)
        .str("clock", "cupti").str("clock_detail", s.clock_detail);
    if (interval) p.unum("sample_rate_hz", 1000000000ull / sm.interval_ns()).str("sample_clock", "cpu+wall").str("sampler", sm.method());
    s.out.put(p);
    s.out.flush();
  }
  // The writer thread, with every signal blocked: the program's signals go to its own threads.
  sem_init(&g_wake, 0, 0);
  sigset_t all, prev;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &prev);
  if (pthread_create(&g_writer, nullptr, writer, nullptr) == 0)
    while (!g_writer_tid) sched_yield();
  else
    fprintf(stderr, "archbench trace (cuda): no writer thread: records are written at exit only\n");
  pthread_sigmask(SIG_SETMASK, &prev, nullptr);
  tr::guard_fork(s.mu, s.out, after_fork_child);
  atexit(at_exit);
  tr::install_crash_hook(on_fatal);  // a program that crashes keeps what was recorded
  return true;
}

}  // namespace archbench::trace_cuda

using namespace archbench::trace_cuda;

/// Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names this library.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static bool once = false;
  if (once) return 1;
  once = true;
  if (!init()) fprintf(stderr, "archbench trace (cuda): the program runs untraced\n");
  return 1;
}
