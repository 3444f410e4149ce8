// What the parts of the TopDown library share: inject.cpp (the injection library: launches,
// sampling and budget, activity records, the exit) and profilers.cpp (each context's range
// profiler, and the one made ahead, ARCHBENCH_TOPDOWN_PREPARE).
#pragma once
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
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "fixtures/meters/cupti/cupti.hpp"
#include "fixtures/meters/topdown.hpp"
#include "fixtures/meters/traffic.hpp"
#include "tools/analysis/common/common.hpp"
#include "tools/analysis/common/cupti.hpp"

namespace archbench::topdown_lib {

namespace ab = archbench;
namespace tr = archbench::trace;

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
  tr::TraceFile out;  // ARCHBENCH_TOPDOWN_OUT (tools/analysis/FORMAT.md)
  std::unique_ptr<std::regex> filter;
  std::uint64_t max_per_kernel = 0;
  std::map<CUcontext, Context> contexts;
  std::map<std::string, std::uint64_t> launched;  // kernel -> launches seen
  // Per kernel and launch shape: launches, those profiled, those that could not be.
  struct Shape {
    std::string name, mangled;
    std::vector<int64_t> grid, block;
    std::uint64_t launches = 0, profiled = 0, unreplayable = 0, over_budget = 0;
    std::uint64_t varied = 0;  // launches profiled beyond the sample: the shape's GPU times differ
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
  std::uint64_t start_ns = 0, over_budget = 0, varied = 0;
  std::uint64_t memory_refused = 0;  // launches left native: the replays' memory save would break the budget
  std::vector<std::string> raw_metrics;  // ARCHBENCH_TOPDOWN_METRICS=raw:...
  // Where profiling's time goes (ns of the program's thread): making profilers and starting their
  // sessions, the profiled launch calls (CUPTI's replays), decoding; and the sessions started.
  std::uint64_t setup_ns = 0, replay_ns = 0, decode_ns = 0, sessions = 0;
  bool done = false;
};

State& state();
// "a; b; c".
std::string join(const std::vector<std::string>& v);
// Decodes what the context's profiler counted since its start and writes one line a launch.
void flush(State& s, CUcontext ctx, Context& c);
void finish();

// ---- Profilers (profilers.cpp) ----------------------------------------------------------------

// The host side made ahead (ARCHBENCH_TOPDOWN_PREPARE): a profiler without a context for device
// 0, its counter set chosen, made on a thread of the library from the library's load on; and, as
// soon as the program's first context exists, enabled on it by another such thread (when that
// context is of device 0). That context's first profiled launch takes it; any other context
// makes its own.
// Launches hold it shared from their call's entry to its exit; the first context's priming holds
// it alone (see enable_ahead).
inline std::shared_timed_mutex g_gate;
inline thread_local bool t_gated = false;

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
Prepared& prepared();

// Waits (at most `limit`; none in a forked child) for the preparation and the enable: true where
// both have returned.
bool prepared_wait(std::chrono::milliseconds limit);
// The profiler made ahead, on a thread of the library from the library's load on.
void prepare(State& s);
// A new context: the first one gets the prepared profiler enabled on it, by a thread of the library.
void on_context_created(CUcontext ctx);
// Context `ctx` is being destroyed: a prepared profiler enabled on it and never taken is left.
void forget_prepared(CUcontext ctx);
// The context's profiler, made on its first profiled launch (or taken from the preparation); null
// (said once) where it cannot be.
ab::RangeProfiler* profiler_for(State& s, CUcontext ctx, Context& c);

}  // namespace archbench::topdown_lib
