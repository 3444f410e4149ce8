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
#include <ctime>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tools/analysis/trace/common.hpp"
#include "tools/analysis/trace/cupti_calls.hpp"

namespace tr = archbench::trace;

namespace {

constexpr std::size_t kPcsPerGet = 8192;       // PC records a drain takes per cuptiPCSamplingGetData
constexpr std::size_t kConfigPcs = 65536;      // the buffer CUPTI fills on module unload and disable
constexpr uint32_t kAutoPeriod = ~0u;
// The samples a second CUPTI's decoding thread keeps up with: on the H100 at 2^13 cycles (about
// 32 M samples/s asked for) the hardware buffer overflowed once the GPU was full (archbench's
// local and divergence kernels), having taken about 12 M/s at best; at 4 M/s it never fills.
constexpr double kMaxSampleRate = 4e6;
const char* const kSassMetrics[] = {"smsp__sass_inst_executed", "smsp__sass_thread_inst_executed"};

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
  FILE* out = nullptr;
  std::string out_path, cubin_dir, mode = "pc";
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

bool g_debug = false;
uint64_t g_t0 = 0;
thread_local bool t_inside = false;  // this thread is inside the library (or is one of its threads)

void dbg(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void dbg(const char* fmt, ...) {
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
std::atomic<uint64_t> g_op_since{0}, g_op_seq{0};
std::atomic<const char*> g_op_what{""};

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
std::mutex g_wait_mu;
std::map<long, Wait> g_waits;

// Modules loaded while this thread was inside the library (CUDA's lazy loading: the driver loads
// the executable's fatbin module inside a call the library makes, e.g. an occupancy query from a
// launch callback): their cubin is copied here under its own lock (never held across a call) and
// taken into the state at the next callback or drain.
struct PendingCubin {
  std::vector<char> bytes;
  uint64_t module_id = 0;
};
std::mutex g_pending_mu;
std::vector<PendingCubin> g_pending;

State& state() {
  static State* s = new State;  // never destroyed: callbacks may come during exit
  return *s;
}

// A CUPTI parameter struct, zeroed, its size set.
template <class T>
T params(std::size_t size) {
  T p{};
  p.structSize = size;
  return p;
}

std::string getenv_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string cupti_error(CUptiResult r) {
  const char* e = nullptr;
  cuptiGetResultString(r, &e);
  return e ? e : "CUPTI error " + std::to_string(int(r));
}

// Writes a record now (s.mu held), flushed: a run killed later keeps it.
void emit(State& s, tr::JsonLine line) {
  line.write(s.out);
  std::fflush(s.out);
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

// File, folder and line of a function's PC, from its cubin's line table (-lineinfo); cached.
const Source& source_of(State& s, uint64_t crc, const char* function, uint64_t pc) {
  auto key = std::make_tuple(crc, std::string(function ? function : ""), pc);
  auto it = s.sources.find(key);
  if (it != s.sources.end()) return it->second;
  Source src;
  auto c = s.cubins.find(crc);
  // A function whose first 4 PCs have no line is not asked again for its others (a program built
  // without -lineinfo: 4 calls per function, not one per PC).
  int& misses = s.lineless[std::make_pair(crc, std::get<1>(key))];
  if (c != s.cubins.end() && function && misses < 4) {
    CUpti_GetSassToSourceCorrelationParams p{};
    p.size = CUpti_GetSassToSourceCorrelationParamsSize;
    p.cubin = c->second.bytes.data();
    p.cubinSize = c->second.bytes.size();
    p.functionName = function;
    p.pcOffset = pc;
    if (cuptiGetSassToSourceCorrelation(&p) == CUPTI_SUCCESS) {
      src.line = p.lineNumber;
      if (p.fileName) src.file = p.fileName, std::free(p.fileName);
      if (p.dirName) src.dir = p.dirName, std::free(p.dirName);
    }
    if (src.file.empty() && !src.line) misses += misses >= 0;
    else misses = -1;
  }
  return s.sources.emplace(key, src).first->second;
}

// The CRC CUPTI gives a PC of this cubin (the SASS metrics API carries its lower 32 bits).
uint64_t crc_of(State& s, uint32_t low) {
  for (const auto& [crc, c] : s.cubins)
    if (uint32_t(crc) == low) return crc;
  return low;
}

// Writes the PC records of one filled buffer and empties it.
void consume(State& s, CUcontext ctx, Context& c, CUpti_PCSamplingData& d) {
  for (std::size_t i = 0; i < d.totalNumPcs; ++i) {
    const CUpti_PCSamplingPCData& p = d.pPcData[i];
    const char* fn = p.functionName ? p.functionName : "";
    const Source& src = source_of(s, p.cubinCrc, fn, p.pcOffset);
    std::string stalls = "{";
    for (std::size_t k = 0; k < p.stallReasonCount; ++k) {
      auto n = c.reason_names.find(p.stallReason[k].pcSamplingStallReasonIndex);
      const std::string name = n != c.reason_names.end() ? n->second : "reason_" + std::to_string(p.stallReason[k].pcSamplingStallReasonIndex);
      if (p.stallReason[k].samples == 0) continue;
      if (stalls.size() > 1) stalls += ',';
      stalls.append(tr::JsonLine::quote(name)).append(1, ':').append(std::to_string(p.stallReason[k].samples));
    }
    tr::JsonLine("pc").unum("context", reinterpret_cast<std::uintptr_t>(ctx)).str("crc", tr::hex64(p.cubinCrc))
        .str("function", fn).str("name", tr::demangle(fn)).unum("pc", p.pcOffset).str("file", src.file)
        .str("dir", src.dir).unum("line", src.line).raw("stalls", stalls + "}").write(s.out);
    ++s.pc_records;
  }
  s.samples += d.totalSamples, s.dropped += d.droppedSamples, s.non_user += d.nonUsrKernelsTotalSamples;
  if (d.hardwareBufferFull) s.hw_full = true;
  if (d.totalNumPcs || d.totalSamples)
    tr::JsonLine("drain").unum("context", reinterpret_cast<std::uintptr_t>(ctx)).unum("pcs", d.totalNumPcs)
        .unum("total_samples", d.totalSamples).unum("dropped_samples", d.droppedSamples)
        .unum("non_user_samples", d.nonUsrKernelsTotalSamples).boolean("hardware_buffer_full", d.hardwareBufferFull)
        .unum("ns", tr::now_ns()).write(s.out);
  d.totalNumPcs = 0, d.remainingNumPcs = 0, d.totalSamples = 0, d.droppedSamples = 0, d.nonUsrKernelsTotalSamples = 0;
}

// SASS mode: the per-instruction counts CUPTI holds for the context, written and reset (s.cupti
// held). Every call leaves a sass_flush record: where, the records, and per function its records
// and warp-instructions executed, or CUPTI's error; so a run shows which functions got counts.
void flush_sass(State& s, CUcontext ctx, const char* where) {
  auto dp = params<CUpti_SassMetricsGetDataProperties_Params>(CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE);
  dp.ctx = ctx;
  CUptiResult r;
  {
    Busy b("cuptiSassMetricsGetDataProperties");
    r = cuptiSassMetricsGetDataProperties(&dp);
  }
  std::vector<CUpti_SassMetrics_Data> data;
  std::vector<CUpti_SassMetrics_InstanceValue> values;
  std::size_t per = 0;
  if (r == CUPTI_SUCCESS && dp.numOfPatchedInstructionRecords && dp.numOfInstances) {
    const std::size_t n = dp.numOfPatchedInstructionRecords;
    per = dp.numOfInstances * std::max<std::size_t>(s.sass_ids.size(), 1);
    data.resize(n);
    values.assign(n * per, CUpti_SassMetrics_InstanceValue{~0ull, 0});
    for (std::size_t i = 0; i < n; ++i) data[i].structSize = sizeof(CUpti_SassMetrics_Data), data[i].pInstanceValues = &values[i * per];
    auto fp = params<CUpti_SassMetricsFlushData_Params>(CUpti_SassMetricsFlushData_Params_STRUCT_SIZE);
    fp.ctx = ctx, fp.numOfPatchedInstructionRecords = n, fp.numOfInstances = dp.numOfInstances, fp.pMetricsData = data.data();
    Busy b("cuptiSassMetricsFlushData");
    r = cuptiSassMetricsFlushData(&fp);
    if (r != CUPTI_SUCCESS) data.clear();
  }
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.sass_flushes;
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_function;  // records, warp-instructions
  for (const auto& d : data) {
    std::map<std::string, uint64_t> sum;
    for (std::size_t k = 0; k < per; ++k)
      if (s.sass_names.count(d.pInstanceValues[k].metricId)) sum[s.sass_names[d.pInstanceValues[k].metricId]] += d.pInstanceValues[k].value;
    const char* fn = d.functionName ? d.functionName : "";
    const uint64_t crc = crc_of(s, d.cubinCrc);
    const Source& src = source_of(s, crc, fn, d.pcOffset);
    tr::JsonLine line("sass");
    line.str("crc", tr::hex64(crc)).str("function", fn).str("name", tr::demangle(fn)).unum("pc", d.pcOffset)
        .str("file", src.file).str("dir", src.dir).unum("line", src.line);
    for (const auto& [k, v] : sum) line.unum(k, v);
    line.write(s.out);
    ++s.sass_records;
    auto& f = by_function[fn];
    ++f.first, f.second += sum.count(kSassMetrics[0]) ? sum[kSassMetrics[0]] : 0;
    s.sass_counted.insert(fn);
  }
  // (CUPTI's sample frees each record's functionName; not here: a leak of a few names a flush is
  // harmless, a wrong free would end the program.)
  std::string functions = "{";
  for (const auto& [fn, v] : by_function) {
    if (functions.size() > 1) functions += ',';
    functions += tr::JsonLine::quote(fn) + ":{\"records\":" + std::to_string(v.first) + ",\"inst_executed\":" + std::to_string(v.second) + "}";
  }
  emit(s, std::move(tr::JsonLine("sass_flush").str("where", where).str("strategy", s.sass_strategy)
                        .unum("context", reinterpret_cast<std::uintptr_t>(ctx)).unum("records", data.size())
                        .unum("instances", r == CUPTI_SUCCESS ? dp.numOfInstances : 0).raw("functions", functions + "}")
                        .str("error", r == CUPTI_SUCCESS ? "" : cupti_error(r)).unum("ns", tr::now_ns())));
  dbg("SASS flush (%s): %zu records, %zu functions%s%s", where, data.size(), by_function.size(),
      r == CUPTI_SUCCESS ? "" : ", ", r == CUPTI_SUCCESS ? "" : cupti_error(r).c_str());
  ++s.drains;
}

// SASS metrics: the device's configuration (the two metrics, per GPU); s.cupti held, s.mu not.
bool sass_config(State& s, int device) {
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.sass_configured[device]) return true;
  }
  Busy busy("SASS metrics configuration");
  auto ip = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  cuptiProfilerInitialize(&ip);
  auto cn = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  cn.deviceIndex = device;
  if (CUptiResult r = cuptiDeviceGetChipName(&cn); r != CUPTI_SUCCESS) return note_error_locked(s, "chip name: " + cupti_error(r)), false;
  std::vector<CUpti_SassMetrics_Config> cfg;
  std::vector<std::pair<uint64_t, std::string>> ids;
  for (const char* m : kSassMetrics) {
    auto pp = params<CUpti_SassMetrics_GetProperties_Params>(CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE);
    pp.pChipName = cn.pChipName, pp.pMetricName = m;
    if (CUptiResult r = cuptiSassMetricsGetProperties(&pp); r != CUPTI_SUCCESS)
      return note_error_locked(s, std::string("SASS metric ") + m + ": " + cupti_error(r)), false;
    ids.emplace_back(pp.metric.metricId, m);
    cfg.push_back({pp.metric.metricId, uint8_t(CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU)});
  }
  auto sp = params<CUpti_SassMetricsSetConfig_Params>(CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE);
  sp.numOfMetricConfig = cfg.size(), sp.pConfigs = cfg.data(), sp.deviceIndex = uint32_t(device);
  if (CUptiResult r = cuptiSassMetricsSetConfig(&sp); r != CUPTI_SUCCESS) return note_error_locked(s, "SASS metrics config: " + cupti_error(r)), false;
  std::lock_guard<std::mutex> lock(s.mu);
  for (const auto& [id, m] : ids)
    if (!s.sass_names.count(id)) s.sass_ids.push_back(id), s.sass_names[id] = m;
  s.sass_configured[device] = true;
  return true;
}

// Strategy reconfig: the device's configuration unset (CUPTI frees its SASS state for the device)
// and set again; s.cupti held, s.mu not.
bool sass_reconfig(State& s, int device) {
  auto up = params<CUpti_SassMetricsUnsetConfig_Params>(CUpti_SassMetricsUnsetConfig_Params_STRUCT_SIZE);
  up.deviceIndex = uint32_t(device);
  CUptiResult r;
  {
    Busy b("cuptiSassMetricsUnsetConfig");
    r = cuptiSassMetricsUnsetConfig(&up);
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (r != CUPTI_SUCCESS) note_error(s, "cuptiSassMetricsUnsetConfig: " + cupti_error(r));
    else s.sass_configured[device] = false;
  }
  return r == CUPTI_SUCCESS && sass_config(s, device);
}

// Opens a SASS metrics range on the context (s.cupti held, s.mu not); `trigger` names the
// function (or event) it was opened for. A sass_enable record either way.
bool sass_enable(State& s, CUcontext ctx, Context& c, const std::string& trigger, const std::string& loaded = "") {
  auto ep = params<CUpti_SassMetricsEnable_Params>(CUpti_SassMetricsEnable_Params_STRUCT_SIZE);
  ep.ctx = ctx, ep.enableLazyPatching = s.sass_lazy ? 1 : 0;
  CUptiResult r;
  const uint64_t t0 = tr::now_ns();
  {
    Busy b("cuptiSassMetricsEnable");
    r = cuptiSassMetricsEnable(&ep);
  }
  std::lock_guard<std::mutex> lock(s.mu);
  if (r == CUPTI_SUCCESS) c.enabled = true, c.modules_at_enable = s.modules_loaded, ++s.sass_enables;
  emit(s, std::move(tr::JsonLine("sass_enable").str("strategy", s.sass_strategy).str("trigger", trigger)
                        .boolean("lazy_patching", s.sass_lazy).unum("context", reinterpret_cast<std::uintptr_t>(ctx))
                        .unum("modules_loaded", s.modules_loaded).raw("module_functions", loaded.empty() ? "null" : loaded)
                        .raw("seconds", std::to_string(double(tr::now_ns() - t0) * 1e-9))
                        .str("error", r == CUPTI_SUCCESS ? "" : cupti_error(r)).unum("ns", tr::now_ns())));
  if (r != CUPTI_SUCCESS) note_error(s, "cuptiSassMetricsEnable (" + trigger + "): " + cupti_error(r) + "; SASS metrics end here");
  return r == CUPTI_SUCCESS;
}

// Closes the context's SASS metrics range (s.cupti held, s.mu not): CUPTI unpatches and drops what
// was not flushed (counted). A sass_disable record.
bool sass_disable(State& s, CUcontext ctx, Context& c, const char* why) {
  auto p = params<CUpti_SassMetricsDisable_Params>(CUpti_SassMetricsDisable_Params_STRUCT_SIZE);
  p.ctx = ctx;
  CUptiResult r;
  {
    Busy b("cuptiSassMetricsDisable");
    r = cuptiSassMetricsDisable(&p);
  }
  std::lock_guard<std::mutex> lock(s.mu);
  s.sass_dropped += p.numOfDroppedRecords;
  c.enabled = false;
  emit(s, std::move(tr::JsonLine("sass_disable").str("why", why).unum("dropped_records", p.numOfDroppedRecords)
                        .str("error", r == CUPTI_SUCCESS ? "" : cupti_error(r)).unum("ns", tr::now_ns())));
  return r == CUPTI_SUCCESS;
}

// The contexts sampled now (a copy: the caller holds s.cupti, not s.mu).
std::vector<std::pair<CUcontext, Context*>> enabled_contexts(State& s) {
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<std::pair<CUcontext, Context*>> v;
  for (auto& [ctx, c] : s.contexts)
    if (c.enabled) v.emplace_back(ctx, &c);
  return v;
}

void adopt_pending(State& s);

// PC mode: everything CUPTI has for the context now (GetData never synchronises the device);
// s.cupti held, s.mu not. `where` names the caller for the log.
void drain(State& s, CUcontext ctx, Context& c, const char* where) {
  if (!c.enabled) return;
  if (s.mode == "sass") return flush_sass(s, ctx, where);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (c.config->data.totalNumPcs) consume(s, ctx, c, c.config->data);  // flushed there by a module unload
  }
  uint64_t pcs = 0, samples = 0;
  for (int guard = 0; guard < 1000; ++guard) {
    CUpti_PCSamplingGetDataParams p{};
    p.size = CUpti_PCSamplingGetDataParamsSize, p.ctx = ctx, p.pcSamplingData = &c.drain->data;
    CUptiResult r;
    {
      Busy b("cuptiPCSamplingGetData");
      r = cuptiPCSamplingGetData(&p);
    }
    const bool more = c.drain->data.remainingNumPcs > 0;
    std::lock_guard<std::mutex> lock(s.mu);
    if (r != CUPTI_SUCCESS && !c.drain->data.totalNumPcs) {
      if (r == CUPTI_ERROR_OUT_OF_MEMORY) {
        // The hardware buffer overflowed (CUPTI decodes it too slowly for the sampling rate):
        // samples are lost until it recovers. Counted; one error record a streak.
        s.hw_full = true;
        const uint64_t t = tr::now_ns();
        if (!s.oom_first_ns) s.oom_first_ns = t;
        const bool streak = s.oom_last_ns && t - s.oom_last_ns < 4 * s.drain_ns;
        s.oom_last_ns = t, ++s.oom_drains;
        if (!streak) note_error(s, std::string("cuptiPCSamplingGetData (") + where + "): " + cupti_error(r) +
                                   (c.drain->data.hardwareBufferFull ? " (hardware buffer full)" : ""));
      } else if (r != CUPTI_ERROR_INVALID_OPERATION || g_debug) {
        note_error(s, std::string("cuptiPCSamplingGetData (") + where + "): " + cupti_error(r));
      }
      break;
    }
    pcs += c.drain->data.totalNumPcs, samples += c.drain->data.totalSamples;
    consume(s, ctx, c, c.drain->data);
    if (!more) break;
  }
  std::lock_guard<std::mutex> lock(s.mu);
  adopt_pending(s);
  ++s.drains;
  s.last_drain = tr::now_ns();
  std::fflush(s.out);
  if (pcs || samples || s.drains <= 3) dbg("drain %llu (%s): %llu PCs, %llu samples", static_cast<unsigned long long>(s.drains), where,
                                           static_cast<unsigned long long>(pcs), static_cast<unsigned long long>(samples));
}

// Drains, then stops sampling on the context (CUPTI flushes what is left into the config buffer);
// s.cupti held.
void finish_context(State& s, CUcontext ctx, Context& c, const char* where) {
  if (!c.enabled) return;
  const uint64_t t0 = tr::now_ns();
  if (s.drain_mode != "exit" || s.mode == "sass") drain(s, ctx, c, where);
  if (s.mode == "sass") {
    sass_disable(s, ctx, c, where);
  } else {
    CUpti_PCSamplingDisableParams p{};
    p.size = CUpti_PCSamplingDisableParamsSize, p.ctx = ctx;
    CUptiResult r;
    const uint64_t t1 = tr::now_ns();
    {
      Busy b("cuptiPCSamplingDisable");
      r = cuptiPCSamplingDisable(&p);
    }
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.disable_s < 0) s.exit_drain_s = double(t1 - t0) * 1e-9, s.disable_s = double(tr::now_ns() - t1) * 1e-9;
    if (r != CUPTI_SUCCESS) note_error(s, std::string("cuptiPCSamplingDisable (") + where + "): " + cupti_error(r));
    dbg("disabled (%s): %zu PCs in the configuration buffer", where, c.config->data.totalNumPcs);
    if (c.config->data.totalNumPcs) consume(s, ctx, c, c.config->data);
  }
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.enabled_ns) s.sampling_ns += tr::now_ns() - s.enabled_ns, s.enabled_ns = 0;
  c.enabled = false;
  std::fflush(s.out);
}

// The GPU's clock in Hz (its typical clock; 2 GHz where the driver does not say).
double clock_hz(int device) {
  int khz = 0;
  if (cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device) != CUDA_SUCCESS || khz <= 0) khz = 2'000'000;
  return double(khz) * 1e3;
}

// The smallest sampling period (log2 cycles, at least 2^13) at which the whole GPU asks for no more
// than kMaxSampleRate samples a second: one sample a period per SM (the H100's rates: 132 SMs at
// 1.98 GHz give 2^16, about 4 M/s).
uint32_t auto_period(int device) {
  int sms = 0;
  if (cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device) != CUDA_SUCCESS || sms <= 0) sms = 132;
  uint32_t p = 13;
  while (p < 31 && double(sms) * clock_hz(device) / std::ldexp(1.0, int(p)) > kMaxSampleRate) ++p;
  return p;
}

CUpti_PCSamplingConfigurationInfo attr(CUpti_PCSamplingConfigurationAttributeType t) {
  CUpti_PCSamplingConfigurationInfo a{};
  a.attributeType = t;
  return a;
}

void finish();

// PC sampling on a new context (s.cupti held, s.mu not): enable, stall reasons, configuration,
// the configuration in force written as the config record.
void enable_pc(State& s, CUcontext ctx, Context& c) {
  const uint64_t t0 = tr::now_ns();
  CUpti_PCSamplingEnableParams e{};
  e.size = CUpti_PCSamplingEnableParamsSize, e.ctx = ctx;
  CUptiResult r;
  {
    Busy b("cuptiPCSamplingEnable");
    r = cuptiPCSamplingEnable(&e);
  }
  if (r != CUPTI_SUCCESS) return note_error_locked(s, "cuptiPCSamplingEnable: " + cupti_error(r));
  tr::exit_first(finish);  // again: CUPTI's sampling objects exist now
  size_t n = 0;
  CUpti_PCSamplingGetNumStallReasonsParams np{};
  np.size = CUpti_PCSamplingGetNumStallReasonsParamsSize, np.ctx = ctx, np.numStallReasons = &n;
  {
    Busy b("cuptiPCSamplingGetNumStallReasons");
    r = cuptiPCSamplingGetNumStallReasons(&np);
  }
  if (r != CUPTI_SUCCESS) return note_error_locked(s, "stall reasons: " + cupti_error(r));
  if (n == 0) return note_error_locked(s, "CUPTI names no stall reasons for this context: no samples can be taken");
  std::vector<uint32_t> idx(n);
  std::vector<std::vector<char>> text(n, std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE));
  std::vector<char*> names(n);
  for (size_t i = 0; i < n; ++i) names[i] = text[i].data();
  CUpti_PCSamplingGetStallReasonsParams rp{};
  rp.size = CUpti_PCSamplingGetStallReasonsParamsSize, rp.ctx = ctx, rp.numStallReasons = n;
  rp.stallReasonIndex = idx.data(), rp.stallReasons = names.data();
  {
    Busy b("cuptiPCSamplingGetStallReasons");
    r = cuptiPCSamplingGetStallReasons(&rp);
  }
  if (r != CUPTI_SUCCESS) return note_error_locked(s, "stall reason names: " + cupti_error(r));
  std::string list = "[";
  for (size_t i = 0; i < n; ++i) {
    c.reason_names[idx[i]] = names[i];
    if (i) list += ',';
    list += tr::JsonLine::quote(names[i]);
  }
  c.config = std::make_unique<PcBuffer>(kConfigPcs, n);
  c.drain = std::make_unique<PcBuffer>(kPcsPerGet, n);
  std::vector<CUpti_PCSamplingConfigurationInfo> a;
  a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE));
  a.back().attributeData.collectionModeData.collectionMode = CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
  // No start/stop control: sampling runs from enable to disable without cuptiPCSamplingStart
  // (with it, nothing would be sampled until a start).
  a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL));
  a.back().attributeData.enableStartStopControlData.enableStartStopControl = 0;
  a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT));
  a.back().attributeData.outputDataFormatData.outputDataFormat = CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
  a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON));
  a.back().attributeData.stallReasonData.stallReasonCount = n;
  a.back().attributeData.stallReasonData.pStallReasonIndex = idx.data();
  a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER));
  a.back().attributeData.samplingDataBufferData.samplingDataBuffer = &c.config->data;
  // The scratch buffer holds the PCs decoded between two drains, aggregated by PC (a few thousand
  // even for archbench's families): 4 MB, about 22k PCs, is plenty; bigger only costs set-up time.
  a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE));
  a.back().attributeData.scratchBufferSizeData.scratchBufferSize = size_t(4) << 20;
  const uint32_t want_period = s.period == kAutoPeriod ? auto_period(c.device) : s.period;
  if (want_period) {
    a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD));
    a.back().attributeData.samplingPeriodData.samplingPeriod = want_period;
  }
  if (s.hw_buffer_bytes) {
    a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE));
    a.back().attributeData.hardwareBufferSizeData.hardwareBufferSize = s.hw_buffer_bytes;
  }
  if (s.worker_sleep_ms) {
    a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN));
    a.back().attributeData.workerThreadPeriodicSleepSpanData.workerThreadPeriodicSleepSpan = uint32_t(s.worker_sleep_ms);
  }
  CUpti_PCSamplingConfigurationInfoParams cp{};
  cp.size = CUpti_PCSamplingConfigurationInfoParamsSize, cp.ctx = ctx;
  cp.numAttributes = a.size(), cp.pPCSamplingConfigurationInfo = a.data();
  {
    Busy b("cuptiPCSamplingSetConfigurationAttribute");
    r = cuptiPCSamplingSetConfigurationAttribute(&cp);
  }
  if (r != CUPTI_SUCCESS) {
    // Which attribute: CUPTI sets attributeStatus of each.
    std::string bad;
    for (const auto& x : a)
      if (x.attributeStatus != CUPTI_SUCCESS) bad += " attribute " + std::to_string(int(x.attributeType)) + ": " + cupti_error(x.attributeStatus) + ";";
    return note_error_locked(s, "PC sampling configuration: " + cupti_error(r) + bad);
  }
  // The configuration in force (CUPTI's defaults where none was asked for), one attribute a query.
  auto get = [&](CUpti_PCSamplingConfigurationAttributeType t, CUpti_PCSamplingConfigurationInfo* out) {
    *out = attr(t);
    CUpti_PCSamplingConfigurationInfoParams q{};
    q.size = CUpti_PCSamplingConfigurationInfoParamsSize, q.ctx = ctx, q.numAttributes = 1, q.pPCSamplingConfigurationInfo = out;
    return cuptiPCSamplingGetConfigurationAttribute(&q) == CUPTI_SUCCESS;
  };
  CUpti_PCSamplingConfigurationInfo got{};
  Busy b("cuptiPCSamplingGetConfigurationAttribute");
  const uint32_t period = get(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD, &got) ? got.attributeData.samplingPeriodData.samplingPeriod : want_period;
  const int64_t mode = get(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE, &got) ? int64_t(got.attributeData.collectionModeData.collectionMode) : -1;
  const int64_t start_stop = get(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL, &got) ? int64_t(got.attributeData.enableStartStopControlData.enableStartStopControl) : -1;
  const int64_t scratch = get(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE, &got) ? int64_t(got.attributeData.scratchBufferSizeData.scratchBufferSize) : -1;
  const int64_t hw = get(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE, &got) ? int64_t(got.attributeData.hardwareBufferSizeData.hardwareBufferSize) : -1;
  const int64_t sleep = get(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN, &got) ? int64_t(got.attributeData.workerThreadPeriodicSleepSpanData.workerThreadPeriodicSleepSpan) : -1;
  dbg("configured: period 2^%u, collection mode %lld, start/stop control %lld, scratch %lld B, hardware buffer %lld B, "
      "CUPTI worker sleep %lld ms, %zu stall reasons, drain %s", period, (long long)mode, (long long)start_stop,
      (long long)scratch, (long long)hw, (long long)sleep, n, s.drain_mode.c_str());
  char name[256] = "";
  cuDeviceGetName(name, sizeof name, c.device);
  int sms = 0, threads = 0;
  cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c.device);
  cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, c.device);
  std::lock_guard<std::mutex> lock(s.mu);
  c.enabled = true;
  s.enabled_ns = tr::now_ns();
  if (s.enable_s < 0) s.enable_s = double(s.enabled_ns - t0) * 1e-9;
  emit(s, std::move(tr::JsonLine("config").str("mode", "pc").unum("context", reinterpret_cast<std::uintptr_t>(ctx)).num("device", c.device)
      .str("device_name", name).num("sms", sms).num("max_warps_per_scheduler", threads / 32 / 4)
      .unum("period_log2", period).boolean("period_auto", s.period == kAutoPeriod)
      .raw("sample_rate_bound", std::to_string(double(sms) * clock_hz(c.device) / std::ldexp(1.0, int(period)))).str("collection", mode == CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED ? "serialized" : "continuous")
      .num("start_stop_control", start_stop).num("scratch_buffer_bytes", scratch).num("hardware_buffer_bytes", hw)
      .num("worker_sleep_ms", sleep).str("drain", s.drain_mode).num("watchdog_s", int64_t(s.watchdog_s))
      .raw("stall_reasons", list + "]")));
}

void on_cubin(State& s, const char* cubin, std::size_t size, uint64_t module_id) {  // s.mu held
  if (!cubin || !size) return;
  CUpti_GetCubinCrcParams p{};
  p.size = CUpti_GetCubinCrcParamsSize, p.cubin = cubin, p.cubinSize = size;
  if (CUptiResult r = cuptiGetCubinCrc(&p); r != CUPTI_SUCCESS) {
    dbg("module %llu: cuptiGetCubinCrc: %s", static_cast<unsigned long long>(module_id), cupti_error(r).c_str());
    return;
  }
  if (s.cubins.count(p.cubinCrc)) return;
  dbg("module %llu: cubin %zu B, CRC %s", static_cast<unsigned long long>(module_id), size, tr::hex64(p.cubinCrc).c_str());
  Cubin& c = s.cubins[p.cubinCrc];
  c.bytes.assign(cubin, cubin + size);
  c.path = s.cubin_dir + "/" + tr::hex64(p.cubinCrc) + ".cubin";
  if (FILE* f = std::fopen(c.path.c_str(), "wb")) {
    std::fwrite(c.bytes.data(), 1, c.bytes.size(), f);
    std::fclose(f);
  } else {
    c.path.clear();
  }
  emit(s, std::move(tr::JsonLine("module").str("crc", tr::hex64(p.cubinCrc)).unum("module_id", module_id).unum("bytes", size)
      .str("cubin", c.path).unum("ns", tr::now_ns())));
}

void on_module(State& s, const CUpti_ResourceData* r) {  // s.mu held
  const auto* m = static_cast<const CUpti_ModuleResourceData*>(r->resourceDescriptor);
  if (m) on_cubin(s, m->pCubin, m->cubinSize, m->moduleId);
}

// The modules loaded while the library was inside a call of its own (s.mu held).
void adopt_pending(State& s) {
  std::vector<PendingCubin> v;
  {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    v.swap(g_pending);
  }
  for (const auto& p : v) on_cubin(s, p.bytes.data(), p.bytes.size(), p.module_id);
}

// A launch's shape and the warps per scheduler its blocks can keep resident (occupancy, at most
// what the grid provides).
void on_launch(State& s, const CUpti_CallbackData* cb, CUpti_CallbackId id) {  // s.mu held
  // At the launch's exit: the driver has loaded the function's module by then (lazy loading), so
  // the occupancy query below loads nothing inside the library (a module loaded there would come
  // back as a callback on a thread inside the library).
  if (cb->callbackSite != CUPTI_API_EXIT || !cb->symbolName) return;
  CUfunction f = nullptr;
  std::vector<int64_t> grid, block;
  size_t smem = 0;
  if (id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx || id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) {
    const auto* p = static_cast<const cuLaunchKernelEx_params*>(cb->functionParams);
    f = p->f;
    if (!p->config) return;
    grid = {p->config->gridDimX, p->config->gridDimY, p->config->gridDimZ};
    block = {p->config->blockDimX, p->config->blockDimY, p->config->blockDimZ};
    smem = p->config->sharedMemBytes;
  } else {
    const auto* p = static_cast<const cuLaunchKernel_params*>(cb->functionParams);
    f = p->f;
    grid = {p->gridDimX, p->gridDimY, p->gridDimZ};
    block = {p->blockDimX, p->blockDimY, p->blockDimZ};
    smem = p->sharedMemBytes;
  }
  std::string key = cb->symbolName;
  for (const auto* v : {&grid, &block})
    for (int64_t x : *v) key.append(1, '|').append(std::to_string(x));
  State::Shape& sh = s.shapes[key];
  if (sh.launches++ == 0) {
    sh.name = cb->symbolName, sh.grid = grid, sh.block = block;
    const int threads = int(block[0] * block[1] * block[2]), warps = (threads + 31) / 32;
    int blocks = 0, sms = 1;
    CUdevice dev = 0;
    cuCtxGetDevice(&dev);
    cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    // A context-independent kernel handle (CUkernel, as the runtime may pass) has no occupancy
    // query of its own: its function in this context has.
    CUfunction in_ctx = nullptr;
    if (cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, threads, smem) != CUDA_SUCCESS &&
        (cuKernelGetFunction(&in_ctx, reinterpret_cast<CUkernel>(f)) != CUDA_SUCCESS ||
         cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, in_ctx, threads, smem) != CUDA_SUCCESS))
      blocks = 0;
    const double grid_blocks = double(grid[0] * grid[1] * grid[2]);
    sh.warps_per_scheduler = blocks ? std::min(double(blocks), grid_blocks / std::max(sms, 1)) * warps / 4.0 : -1;
  }
}

// A launch's function (a CUfunction, or a CUkernel as the runtime may pass) and stream.
void launch_target(const CUpti_CallbackData* cb, CUpti_CallbackId id, CUfunction* f, CUstream* stream) {
  *f = nullptr, *stream = nullptr;
  if (id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx || id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) {
    const auto* p = static_cast<const cuLaunchKernelEx_params*>(cb->functionParams);
    *f = p->f;
    if (p->config) *stream = p->config->hStream;
  } else {
    const auto* p = static_cast<const cuLaunchKernel_params*>(cb->functionParams);
    *f = p->f, *stream = p->hStream;
  }
  if (!*stream && (id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz || id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz ||
                   id == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz))
    *stream = CU_STREAM_PER_THREAD;
}

// The driver's module-enumeration and function-loading calls (CUDA 12.4), looked up at run time
// so that the library still loads on an older driver (then nothing is loaded, and said so).
struct ModuleCalls {
  CUresult (*get_module)(CUmodule*, CUfunction) = nullptr;
  CUresult (*count)(unsigned*, CUmodule) = nullptr;
  CUresult (*enumerate)(CUfunction*, unsigned, CUmodule) = nullptr;
  CUresult (*is_loaded)(CUfunctionLoadingState*, CUfunction) = nullptr;
  CUresult (*load)(CUfunction) = nullptr;
  ModuleCalls() {
    auto get = [](const char* name, auto& fn) {
      void* p = nullptr;
      if (cuGetProcAddress(name, &p, 12040, CU_GET_PROC_ADDRESS_DEFAULT, nullptr) == CUDA_SUCCESS && p)
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    get("cuFuncGetModule", get_module), get("cuModuleGetFunctionCount", count);
    get("cuModuleEnumerateFunctions", enumerate), get("cuFuncIsLoaded", is_loaded), get("cuFuncLoad", load);
  }
};

// Loads every function of the module `f` belongs to (CUDA's lazy loading loads a function at its
// first launch; eager patching patches only functions loaded at the enable). On the program's
// thread, inside its launch callback (the context is current). Returns a JSON object for the
// sass_enable record: the module's functions, those loaded before, loaded now, failed.
std::string load_module_functions(CUfunction f) {
  static const ModuleCalls calls;
  if (!calls.get_module || !calls.count || !calls.enumerate || !calls.load)
    return "{\"error\":\"the driver has no cuModuleEnumerateFunctions/cuFuncLoad (CUDA 12.4)\"}";
  CUmodule mod = nullptr;
  if (calls.get_module(&mod, f) != CUDA_SUCCESS || !mod) {
    CUfunction in_ctx = nullptr;  // a context-independent CUkernel: its function in this context
    mod = nullptr;
    if (cuKernelGetFunction(&in_ctx, reinterpret_cast<CUkernel>(f)) != CUDA_SUCCESS || !in_ctx ||
        calls.get_module(&mod, in_ctx) != CUDA_SUCCESS || !mod)
      return "{\"error\":\"no module for the launched function\"}";
  }
  unsigned n = 0;
  if (calls.count(&n, mod) != CUDA_SUCCESS) return "{\"error\":\"cuModuleGetFunctionCount failed\"}";
  std::vector<CUfunction> fs(n);
  if (n && calls.enumerate(fs.data(), n, mod) != CUDA_SUCCESS) return "{\"error\":\"cuModuleEnumerateFunctions failed\"}";
  unsigned before = 0, now = 0, failed = 0;
  for (CUfunction g : fs) {
    CUfunctionLoadingState st = CU_FUNCTION_LOADING_STATE_UNLOADED;
    if (calls.is_loaded && calls.is_loaded(&st, g) == CUDA_SUCCESS && st == CU_FUNCTION_LOADING_STATE_LOADED) ++before;
    else if (calls.load(g) == CUDA_SUCCESS) ++now;
    else ++failed;
  }
  dbg("module of the launched function: %u functions, %u loaded before, %u loaded now, %u failed", n, before, now, failed);
  return "{\"functions\":" + std::to_string(n) + ",\"loaded_before\":" + std::to_string(before) +
         ",\"loaded_now\":" + std::to_string(now) + ",\"failed\":" + std::to_string(failed) + "}";
}

// Strategy target: whether `fn`, the context's `nth` distinct function launched, is the one asked
// for: N (a number: the Nth), the mangled name, or the demangled name with or without its
// parameters and return type ("lanes<8>", "hot_chase").
bool sass_target_is(const std::string& target, const std::string& fn, uint64_t nth) {
  if (target.empty()) return nth == 1;
  if (target.find_first_not_of("0123456789") == std::string::npos) return nth == std::strtoull(target.c_str(), nullptr, 10);
  if (target == fn) return true;
  const std::string d = tr::demangle(fn.c_str());
  if (target == d) return true;
  std::string bare = d.substr(0, d.find('('));
  if (target == bare) return true;
  const std::size_t sp = bare.rfind(' ', bare.find('<'));  // the return type ("void lanes<8>")
  return sp != std::string::npos && target == bare.substr(sp + 1);
}

// SASS metrics at the entry of a kernel launch (s.mu not held), by strategy (see the top of the
// file):
//   deferred, deferred-module: the context's first launch opens its one range (the module of the
//     launched function loaded whole, eager patching); deferred-module also opens a new range at
//     the first launch of a function when a module was loaded since the last enable; deferred
//     only names such functions (a sass_late record).
//   function, reconfig: a function's first launch ends the range open (flushed first) and opens
//     one for it (reconfig: the device's configuration unset and set between).
//   target: the first launch of the function asked for configures the device and opens the one
//     range (its module loaded whole, eager patching); nothing before or after it.
// A range is switched only once the launch's stream has finished its work (at most 200 ms; else
// at a later launch): disabling under a running patched kernel is not safe, and a kernel held by
// the program (archbench_hold) must not wait for the library.
void sass_on_launch(State& s, const CUpti_CallbackData* cb, CUpti_CallbackId id) {
  const std::string fn = cb->symbolName;
  const bool deferred = s.sass_strategy == "deferred" || s.sass_strategy == "deferred-module";
  bool first_enable = false;
  Context* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.done) return;
    auto it = s.contexts.find(cb->context);
    if (it == s.contexts.end()) return;
    c = &it->second;
    const bool new_function = s.sass_seen.insert(fn).second;
    if (deferred) {
      if (!c->launched) {
        c->launched = first_enable = true;
      } else if (!c->enabled || s.sass_ranged.count(fn) || s.modules_loaded <= c->modules_at_enable) {
        return;
      } else if (s.sass_strategy == "deferred") {
        if (new_function && s.sass_late.insert(fn).second)
          emit(s, std::move(tr::JsonLine("sass_late").str("function", fn).str("name", tr::demangle(fn.c_str()))
                                .unum("modules_loaded", s.modules_loaded).unum("modules_at_enable", c->modules_at_enable)
                                .unum("ns", tr::now_ns())));
        return;
      }
    } else if (s.sass_strategy == "function" || s.sass_strategy == "reconfig") {
      if (s.sass_ranged.count(fn) || !c->enabled) return;
    } else if (s.sass_strategy == "target") {
      if (c->launched || !new_function) return;  // one range, for one function
      const uint64_t nth = ++c->sass_functions_seen;
      if (!sass_target_is(s.sass_target, fn, nth)) return;
      c->launched = first_enable = true;
    } else {
      return;  // once
    }
  }
  CUfunction f = nullptr;
  CUstream stream = nullptr;
  launch_target(cb, id, &f, &stream);
  const uint64_t t0 = tr::now_ns();
  CUresult q;
  while ((q = cuStreamQuery(stream)) == CUDA_ERROR_NOT_READY && tr::now_ns() - t0 < 200'000'000)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  if (q == CUDA_ERROR_NOT_READY && !first_enable) {  // (the first enable has no range to end: it goes on)
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.sass_deferred;
    dbg("SASS range for %s deferred: its stream is busy", fn.c_str());
    return;
  }
  std::unique_lock<std::timed_mutex> cupti(s.cupti, std::defer_lock);
  if (!cupti.try_lock_for(std::chrono::seconds(1))) {
    note_error_locked(s, "SASS metrics: no range for " + fn + ": the library's CUPTI call is stuck");
    return;
  }
  uint64_t dropped_before = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    dropped_before = s.sass_dropped;
  }
  if (c->enabled) {
    flush_sass(s, cb->context, "range switch");
    if (!sass_disable(s, cb->context, *c, "range switch")) return note_error_locked(s, "cuptiSassMetricsDisable (range): failed; SASS metrics end here");
  }
  if (s.sass_strategy == "reconfig" && !sass_reconfig(s, c->device)) return;
  if (s.sass_strategy == "target" && !sass_config(s, c->device)) return;  // configured only now
  const std::string loaded = (deferred || s.sass_strategy == "target") && f ? load_module_functions(f) : "";
  if (!sass_enable(s, cb->context, *c, fn, loaded)) return;
  std::lock_guard<std::mutex> lock(s.mu);
  s.sass_ranged.insert(fn), s.sass_current = fn, ++s.sass_ranges;
  emit(s, std::move(tr::JsonLine("sass_range").str("function", fn).str("strategy", s.sass_strategy)
                        .unum("dropped_records", s.sass_dropped - dropped_before)
                        .raw("waited_s", std::to_string(double(tr::now_ns() - t0) * 1e-9)).unum("ns", tr::now_ns())));
}

// SASS metrics on a new context (s.cupti held, s.mu not): the device configured; a range opened
// now only for the strategies that begin at the context (once, function, reconfig); the config
// record either way.
void sass_on_context(State& s, CUcontext ctx, Context& c) {
  // (strategy target: configured at the target's first launch, so that no kernel, the driver's
  // own memset and copy kernels included, runs between the configuration and that launch)
  if (s.sass_strategy != "target" && !sass_config(s, c.device)) return;
  const bool at_context = s.sass_strategy == "once" || s.sass_strategy == "function" || s.sass_strategy == "reconfig";
  if (at_context && !sass_enable(s, ctx, c, "context created")) return;
  char name[256] = "";
  cuDeviceGetName(name, sizeof name, c.device);
  std::lock_guard<std::mutex> lock(s.mu);
  emit(s, std::move(tr::JsonLine("config").str("mode", "sass").unum("context", reinterpret_cast<std::uintptr_t>(ctx)).num("device", c.device)
      .str("device_name", name).num("watchdog_s", int64_t(s.watchdog_s)).str("sass_strategy", s.sass_strategy)
      .boolean("lazy_patching", s.sass_lazy).str("module_loading", getenv_or("CUDA_MODULE_LOADING", ""))));
}

// PC mode, async enable: CUPTI's enable (about 0.1 s on the H100) on a thread of the library, the
// context pushed there, while the program goes on with its host work; the context's launches
// wait for it (wait_for_enable). A pc_enable record says when it was done.
void enable_pc_async(State& s, CUcontext ctx, Context& c) {
  c.enable_started_ns = tr::now_ns();
  c.enabling = 1;
  std::thread([&s, ctx, &c] {
    Inside inside;
    const auto limit = std::chrono::milliseconds(int64_t(std::max(s.watchdog_s, 1.0) * 1000));
    std::unique_lock<std::timed_mutex> cupti(s.cupti, std::defer_lock);
    if (!cupti.try_lock_for(limit)) {
      note_error_locked(s, "context created while the library's CUPTI call is stuck: not sampled");
    } else if (cuCtxPushCurrent(ctx) != CUDA_SUCCESS) {
      note_error_locked(s, "async enable: cannot make the new context current on the library's thread: not sampled");
    } else {
      enable_pc(s, ctx, c);
      CUcontext popped = nullptr;
      cuCtxPopCurrent(&popped);
    }
    const uint64_t t = tr::now_ns();
    {
      std::lock_guard<std::mutex> lock(s.mu);
      emit(s, std::move(tr::JsonLine("pc_enable").str("how", "async").unum("context", reinterpret_cast<std::uintptr_t>(ctx))
                            .boolean("enabled", c.enabled).raw("enable_s", std::to_string(double(t - c.enable_started_ns) * 1e-9))
                            .unum("ns", t)));
    }
    c.enabling = 0;
  }).detach();
}

// PC mode, async enable: a launch in a context whose enable is still running waits for it (at
// most the watchdog's time, 10 s without one), so that no kernel goes unsampled; the context's
// first launch is written down (pc_enable_wait: seconds it waited).
void wait_for_enable(State& s, CUcontext ctx) {
  Context* c = nullptr;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.contexts.find(ctx);
    if (it == s.contexts.end()) return;
    c = &it->second;
    if (c->launched && !c->enabling) return;
    first = !c->launched;
    c->launched = true;
  }
  const uint64_t t0 = tr::now_ns(), limit = uint64_t((s.watchdog_s > 0 ? s.watchdog_s : 10) * 1e9);
  while (c->enabling && tr::now_ns() - t0 < limit) std::this_thread::sleep_for(std::chrono::microseconds(200));
  const uint64_t t = tr::now_ns();
  if (!first) return;
  std::lock_guard<std::mutex> lock(s.mu);
  emit(s, std::move(tr::JsonLine("pc_enable_wait").unum("context", reinterpret_cast<std::uintptr_t>(ctx))
                        .raw("waited_s", std::to_string(double(t - t0) * 1e-9))
                        .raw("since_context_s", std::to_string(double(t - c->enable_started_ns) * 1e-9))
                        .boolean("enabled", c->enabled).boolean("timed_out", c->enabling != 0).unum("ns", t)));
  if (c->enabling) note_error(s, "async enable: the first launch waited " + std::to_string(int(s.watchdog_s)) +
                                     " s for CUPTI's enable and went on: its kernels may be unsampled");
}

using tr::kLaunches, tr::kSyncs, tr::one_of;

// Graph launches (pc mode): with the async enable they wait for it as kernel launches do.
constexpr CUpti_CallbackId kGraphLaunches[] = {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};
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
      consume(s, r->context, it->second, it->second.config->data), std::fflush(s.out);
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
               s.error.empty() ? "" : "; ", s.error.c_str(), s.out_path.c_str());
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

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  Inside inside;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.sub) return 1;
  g_t0 = tr::now_ns();
  if (const char* d = std::getenv("ARCHBENCH_PCSAMPLING_DEBUG"); d && *d && std::strcmp(d, "0")) g_debug = true;
  const char* path = std::getenv("ARCHBENCH_PCSAMPLE_OUT");
  s.out_path = path && *path ? path : "pcsample-" + std::to_string(getpid()) + ".jsonl";
  s.out = std::fopen(s.out_path.c_str(), "w");
  if (!s.out) {
    std::fprintf(stderr, "archbench-pcsample: cannot write %s; the program runs unobserved\n", s.out_path.c_str());
    return 0;
  }
  s.cubin_dir = s.out_path + ".cubins";
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
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  emit(s, std::move(tr::JsonLine("process").num("pid", getpid()).str("command", tr::command_line()).unum("start_ns", tr::now_ns())
      .str("date", date).str("mode", s.mode).str("drain", s.drain_mode).raw("watchdog_s", std::to_string(s.watchdog_s))
      .str("sass_strategy", s.sass_strategy).str("sass_target", s.sass_target).boolean("sass_lazy_patching", s.sass_lazy)
      .str("pc_enable", s.pc_enable)));
  dbg("injection: %s mode, drain %s every %.0f ms, watchdog %.0f s, out %s", s.mode.c_str(), s.drain_mode.c_str(),
      double(s.drain_ns) * 1e-6, s.watchdog_s, s.out_path.c_str());
  if (cuptiSubscribe(&s.sub, callback, nullptr) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "archbench-pcsample: cuptiSubscribe failed (another CUPTI client?); unobserved\n");
    return 0;
  }
  for (CUpti_CallbackId id : kLaunches) cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  if (s.mode == "pc")  // (async enable: a graph launch waits for it too)
    for (CUpti_CallbackId id : kGraphLaunches) cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  for (CUpti_CallbackId id : kSyncs) cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  for (CUpti_CallbackId id : {CUPTI_CBID_RESOURCE_CONTEXT_CREATED, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
                              CUPTI_CBID_RESOURCE_MODULE_LOADED, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING})
    cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_RESOURCE, id);
  // Synchronisation and launch callbacks at both sites (enter: the watchdog's view of a wait).
  tr::exit_first(finish);  // before CUPTI's own objects go (see there)
  if (s.mode == "pc" && s.drain_mode == "thread") std::thread(drain_thread).detach();
  if (s.watchdog_s > 0) std::thread(watchdog_thread).detach();
  dbg("injection ready");
  return 1;
}
