// What the parts of the PC sampling library share: inject.cpp (the injection library: callbacks,
// the drain and watchdog threads, the end), pc.cpp (PC sampling: enabling it on a context, draining
// its records, the cubins and their line tables) and sass.cpp (the SASS metrics stage).
#pragma once
#include <cuda.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cupti_profiler_target.h>
#include <cupti_sass_metrics.h>
#include <cupti_target.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/syscall.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tools/analysis/common/common.hpp"
#include "tools/analysis/common/cupti.hpp"

namespace archbench::pcsampling {

namespace tr = archbench::trace;
using tr::params;

constexpr std::size_t kPcsPerGet = 8192;       // PC records a drain takes per cuptiPCSamplingGetData
constexpr std::size_t kConfigPcs = 65536;      // the buffer CUPTI fills on module unload and disable
constexpr uint32_t kAutoPeriod = ~0u;
// The samples a second CUPTI's decoding thread keeps up with: on the H100 at 2^13 cycles (about
// 32 M samples/s asked for) the hardware buffer overflowed once the GPU was full (archbench's
// local and divergence kernels), having taken about 12 M/s at best; at 4 M/s it never fills.
constexpr double kMaxSampleRate = 4e6;
inline const char* const kSassMetrics[] = {"smsp__sass_inst_executed", "smsp__sass_thread_inst_executed"};

// A PC sampling data buffer with room for `pcs` records of `reasons` stall reasons each. calloc,
// not std::vector: the stall-reason arrays (65536 PCs x 40 reasons x 8 B = 21 MB for the
// configuration buffer) stay untouched zero pages until CUPTI writes a PC's reasons; a vector
// zero-fills every page at the enable (about 20 ms on the H100's host, 130 ms on a slow VM).
struct PcBuffer {
  CUpti_PCSamplingData data{};
  std::unique_ptr<CUpti_PCSamplingPCData[], void (*)(void*)> pcs{nullptr, std::free};
  std::unique_ptr<CUpti_PCSamplingStallReason[], void (*)(void*)> reasons{nullptr, std::free};
  PcBuffer(std::size_t n, std::size_t r) {
    pcs.reset(static_cast<CUpti_PCSamplingPCData*>(std::calloc(std::max<std::size_t>(n, 1), sizeof(CUpti_PCSamplingPCData))));
    reasons.reset(static_cast<CUpti_PCSamplingStallReason*>(std::calloc(std::max<std::size_t>(n * r, 1), sizeof(CUpti_PCSamplingStallReason))));
    if (!pcs || !reasons) n = 0;  // no memory: a buffer of no PCs (CUPTI reports what it could not deliver)
    data.size = sizeof(CUpti_PCSamplingData);
    data.collectNumPcs = n;
    data.pPcData = pcs.get();
    for (std::size_t i = 0; i < n; ++i) pcs[i].size = sizeof(CUpti_PCSamplingPCData), pcs[i].stallReason = &reasons[i * r];
  }
};

struct Context {
  int device = 0;
  bool enabled = false;
  std::atomic<int> enabling{0};       // pc mode, async enable: 1 while the library's thread enables
  uint64_t enable_started_ns = 0;     // pc mode, async enable: when that thread was started
  bool launched = false;              // a kernel has been launched in the context
  // 0: no launch seen, 1: the context's first launch call is running (CUPTI sets PC sampling up
  // inside it: the drain thread leaves the context alone), 2: it has returned.
  std::atomic<int> first_launch{0};
  uint64_t sass_functions_seen = 0;   // sass mode, strategy target: distinct functions launched
  uint64_t modules_at_enable = 0;     // sass mode: State::modules_loaded at the last enable
  std::map<uint32_t, std::string> reason_names;  // stall reason index -> CUPTI's name
  std::unique_ptr<PcBuffer> config, drain;
};

struct Cubin {
  std::vector<char> bytes;
  std::string path;
};

struct Source {
  std::string file, dir;
  uint32_t line = 0;
};

// Locks: `mu` guards the state and the output file and is never held across a CUPTI PC sampling
// or SASS metrics call; `cupti` serialises the library's own calls of those (and the drain
// buffers) and is only ever taken with a time limit or a try.
struct State {
  std::mutex mu;
  std::timed_mutex cupti;
  CUpti_SubscriberHandle sub = nullptr;
  tr::TraceFile out;  // ARCHBENCH_PCSAMPLE_OUT (tools/analysis/FORMAT.md)
  std::string cubin_dir, mode = "pc";
  std::string drain_mode = "thread";
  // log2 cycles; 0: CUPTI's own (2^11 on the H100: its hardware buffer overflowed); kAutoPeriod:
  // the smallest period that keeps the GPU's sample rate within kMaxSampleRate (auto_period).
  uint32_t period = kAutoPeriod;
  uint64_t hw_buffer_bytes = uint64_t(32) << 20;   // 0: CUPTI's own (512 MB: slow to set up and free)
  uint64_t worker_sleep_ms = 20;                   // 0: CUPTI's own (100 ms)
  uint64_t oom_drains = 0, oom_first_ns = 0, oom_last_ns = 0, sampling_ns = 0, enabled_ns = 0;
  uint64_t deferred_modules = 0;
  double watchdog_s = 10;
  std::atomic<uint64_t> last_drain{0};
  uint64_t drain_ns = 50'000'000;
  std::map<CUcontext, Context> contexts;
  std::map<uint64_t, Cubin> cubins;                                       // by CUPTI's 64-bit CRC
  std::map<std::tuple<uint64_t, std::string, uint64_t>, Source> sources;  // (crc, function, pc)
  // per function, PCs looked up without a line before any had one (-1: one had); 4 = no line table
  std::map<std::pair<uint64_t, std::string>, int> lineless;
  // Launch shapes: launches and the warps each scheduler can hold (occupancy, grid-limited).
  struct Shape {
    std::string name;
    std::vector<int64_t> grid, block;
    uint64_t launches = 0;
    double warps_per_scheduler = 0;  // -1: unknown (no occupancy query for the function)
  };
  std::map<std::string, Shape> shapes;
  std::map<int, bool> sass_configured;  // device -> configured
  // SASS metrics strategy (see the top of the file): deferred (default), deferred-module, once,
  // function, reconfig.
  std::string sass_strategy = "deferred";
  bool sass_lazy = false;                // cuptiSassMetricsEnable's enableLazyPatching
  std::string pc_enable = "async";       // pc mode: async (default) or sync (see the top of the file)
  std::string sass_target;               // sass mode, strategy target: a mangled name, or N: the Nth function launched
  std::set<std::string> sass_ranged;     // functions that have had a range of their own
  std::set<std::string> sass_seen;       // functions launched (sass mode)
  std::set<std::string> sass_counted;    // functions with records in some flush
  std::set<std::string> sass_late;       // functions first launched after a module loaded since the enable
  std::string sass_current;              // the function whose range is open
  uint64_t sass_ranges = 0, sass_deferred = 0, sass_dropped = 0, sass_enables = 0, sass_flushes = 0;
  std::atomic<uint64_t> modules_loaded{0};  // module-loaded callbacks (also those inside the library)
  std::vector<uint64_t> sass_ids;
  std::map<uint64_t, std::string> sass_names;  // metric id -> name
  uint64_t samples = 0, dropped = 0, non_user = 0, pc_records = 0, drains = 0, sass_records = 0;
  bool hw_full = false, done = false;
  std::atomic<bool> finishing{false}, stop_threads{false};
  bool disabled_by_watchdog = false, forced_exit = false;
  uint64_t skipped_drains = 0, watchdog_events = 0;
  // pc mode, the fixed costs of the first context (seconds; -1: not measured): CUPTI's enable and
  // configuration, the first launch call (CUPTI's set-up of the sampling), the drain and the
  // disable at exit. In the end record.
  double enable_s = -1, first_launch_s = -1, exit_drain_s = -1, disable_s = -1;
  std::string error;
};

// ------------------------------------------------------------------ debug log and watchdog state

inline bool g_debug = false;
inline uint64_t g_t0 = 0;
inline thread_local bool t_inside = false;  // this thread is inside the library (or is one of its threads)

inline void dbg(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void dbg(const char* fmt, ...) {
  if (!g_debug) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "archbench-pcsample[%.3f s tid %ld]: %s\n", double(tr::now_ns() - g_t0) * 1e-9,
               long(syscall(SYS_gettid)), buf);
  std::fflush(stderr);
}

struct Inside {  // marks this thread as inside the library: callbacks it causes return at once
  bool was;
  Inside() : was(t_inside) { t_inside = true; }
  ~Inside() { t_inside = was; }
};

// The library's CUPTI call in progress (one at a time: State::cupti), for the watchdog.
inline std::atomic<uint64_t> g_op_since{0}, g_op_seq{0};
inline std::atomic<const char*> g_op_what{""};

struct Busy {  // marks a CUPTI call of the library for the watchdog and the debug log
  const char* what;
  uint64_t t;
  explicit Busy(const char* w) : what(w), t(tr::now_ns()) {
    dbg("%s ...", what);
    g_op_what = what, g_op_seq++, g_op_since = t;
  }
  ~Busy() {
    g_op_since = 0;
    dbg("%s done after %.3f s", what, double(tr::now_ns() - t) * 1e-9);
  }
};

// The program's calls in progress that may wait for the GPU (synchronisations, launches), by
// thread, for the watchdog.
struct Wait {
  uint64_t since = 0;
  std::string what;
  bool reported = false;
};
inline std::mutex g_wait_mu;
inline std::map<long, Wait> g_waits;

// Modules loaded while this thread was inside the library (CUDA's lazy loading: the driver loads
// the executable's fatbin module inside a call the library makes, e.g. an occupancy query from a
// launch callback): their cubin is copied here under its own lock (never held across a call) and
// taken into the state at the next callback or drain.
struct PendingCubin {
  std::vector<char> bytes;
  uint64_t module_id = 0;
};
inline std::mutex g_pending_mu;
inline std::vector<PendingCubin> g_pending;

State& state();
// `$name` where it is set and not empty, else `fallback`.
inline std::string getenv_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
// Writes a record now (s.mu held), flushed: a run killed later keeps it.
void emit(State& s, tr::JsonLine line);
// Says on stderr and in an error record what failed (s.mu held); the first is the end's `error`.
void note_error(State& s, const std::string& what);
void note_error_locked(State& s, const std::string& what);
void finish();

// ---- PC sampling (pc.cpp) ---------------------------------------------------------------------

// PC sampling on a new context (s.cupti held, s.mu not): enabled and configured; a config record.
void enable_pc(State& s, CUcontext ctx, Context& c);
// ... on a thread of the library while the program goes on (async enable); its launches wait.
void enable_pc_async(State& s, CUcontext ctx, Context& c);
void wait_for_enable(State& s, CUcontext ctx);
// The contexts sampled now (a copy: the caller holds s.cupti, not s.mu).
std::vector<std::pair<CUcontext, Context*>> enabled_contexts(State& s);
// File, folder and line of a function's PC, from its cubin's line table (-lineinfo); cached.
const Source& source_of(State& s, uint64_t crc, const char* function, uint64_t pc);
// The CRC CUPTI gives a PC of this cubin (the SASS metrics API carries its lower 32 bits).
uint64_t crc_of(State& s, uint32_t low);
// Writes the PC records of one filled buffer and empties it.
void consume(State& s, CUcontext ctx, Context& c, CUpti_PCSamplingData& d);
// Everything CUPTI has for the context now (s.cupti held, s.mu not); `where` names the caller.
void drain(State& s, CUcontext ctx, Context& c, const char* where);
// Drains, then stops sampling on the context (s.cupti held).
void finish_context(State& s, CUcontext ctx, Context& c, const char* where);
// A module loaded (s.mu held): its cubin saved; the modules loaded inside the library's own calls.
void on_module(State& s, const CUpti_ResourceData* r);
void adopt_pending(State& s);
// A launch's shape and the warps per scheduler its blocks can keep resident (s.mu held).
void on_launch(State& s, const CUpti_CallbackData* cb, CUpti_CallbackId id);

// ---- SASS metrics (sass.cpp; s.cupti held, s.mu not) ------------------------------------------

// The per-instruction counts CUPTI holds for the context, written and reset.
void flush_sass(State& s, CUcontext ctx, const char* where);
// Opens a SASS metrics range on the context; `trigger` names what it was opened for.
bool sass_enable(State& s, CUcontext ctx, Context& c, const std::string& trigger, const std::string& loaded = "");
// Closes the context's range (CUPTI drops what was not flushed, counted).
bool sass_disable(State& s, CUcontext ctx, Context& c, const char* why);
// A new context: the device configured, a range opened for the strategies that begin there.
void sass_on_context(State& s, CUcontext ctx, Context& c);
// A launch: the range switched per strategy once the launch's stream has finished its work.
void sass_on_launch(State& s, const CUpti_CallbackData* cb, CUpti_CallbackId id);

}  // namespace archbench::pcsampling
