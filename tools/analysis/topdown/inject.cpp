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
#include <cuda.h>
#include <cupti.h>
#include <cxxabi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "fixtures/meters/cupti/cupti.hpp"
#include "fixtures/meters/topdown.hpp"
#include "tools/analysis/trace/common.hpp"

namespace ab = archbench;
namespace tr = archbench::trace;

namespace {

constexpr std::size_t kRangesPerFlush = 64;  // launches decoded together

struct Launch {
  std::string name, mangled;
  std::vector<int64_t> grid, block;
  std::uint64_t seq = 0, invocation = 0, host_ns = 0;
};

// One CUDA context's profiler and the launches it is counting now.
struct Context {
  std::unique_ptr<ab::RangeProfiler> profiler;
  std::string broken;             // why this context cannot be profiled ("" when it can)
  std::vector<Launch> pending;    // profiled since the last flush, in launch order
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
  std::uint64_t seq = 0, profiled = 0, skipped = 0;
  std::size_t passes = 0;
  bool done = false;
};

State& state() {
  static State* s = new State;  // never destroyed: callbacks may come during exit
  return *s;
}

std::string demangle(const char* m) {
  int status = 0;
  char* d = abi::__cxa_demangle(m, nullptr, nullptr, &status);
  std::string r = status == 0 && d ? d : m;
  std::free(d);
  return r;
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Decodes what the context's profiler counted since its start and writes one line a launch.
void flush(State& s, CUcontext ctx, Context& c) {
  if (!c.profiler || !c.profiler->started()) return;
  std::vector<ab::Metrics> ranges;
  try {
    ranges = c.profiler->collect();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "archbench-topdown: decoding %zu launches failed: %s\n", c.pending.size(), e.what());
  }
  if (ranges.size() != c.pending.size() && !ranges.empty())
    std::fprintf(stderr, "archbench-topdown: %zu ranges for %zu launches; pairing them in order\n", ranges.size(),
                 c.pending.size());
  for (std::size_t i = 0; i < c.pending.size() && i < ranges.size(); ++i) {
    const Launch& l = c.pending[i];
    std::string metrics = "{", td = "{", err;
    for (const auto& [k, v] : ranges[i]) metrics += (metrics.size() > 1 ? "," : "") + tr::JsonLine::quote(k) + ":" + number(v);
    try {
      for (const auto& [k, v] : ab::topdown_counters(ab::topdown(ranges[i]), 3))
        td += (td.size() > 1 ? "," : "") + tr::JsonLine::quote(k) + ":" + number(v);
    } catch (const std::exception& e) {
      err = e.what();
    }
    tr::JsonLine line("kernel");
    line.str("name", l.name).str("mangled", l.mangled).unum("seq", l.seq).unum("invocation", l.invocation)
        .nums("grid", l.grid).nums("block", l.block).unum("host_ns", l.host_ns)
        .unum("context", reinterpret_cast<std::uintptr_t>(ctx))
        .raw("duration_ns", number(ranges[i].count("gpu__time_duration.sum") ? ranges[i].at("gpu__time_duration.sum") : 0))
        .raw("metrics", metrics + "}").raw("topdown", td + "}");
    if (!err.empty()) line.str("error", err);
    line.write(s.out);
    ++s.profiled;
  }
  c.pending.clear();
  std::fflush(s.out);  // what was measured survives a crash later in the program
}

// The context's profiler, made on its first profiled launch; null (said once) where it cannot be.
ab::RangeProfiler* profiler_for(State& s, CUcontext ctx, Context& c) {
  if (c.profiler) return c.profiler.get();
  if (!c.broken.empty()) return nullptr;
  try {
    CUdevice dev = 0;
    if (cuCtxGetDevice(&dev) != CUDA_SUCCESS) throw std::runtime_error("cuCtxGetDevice failed");
    auto p = std::make_unique<ab::RangeProfiler>(ctx, static_cast<int>(dev));
    p->set_metrics(ab::topdown_metrics(p->base_metrics()));
    s.passes = p->passes();
    char name[256] = "", bus[32] = "";
    cuDeviceGetName(name, sizeof name, dev);
    cuDeviceGetPCIBusId(bus, sizeof bus, dev);
    tr::JsonLine("profiler").str("chip", p->chip()).unum("passes", p->passes()).unum("metrics", p->metrics().size())
        .unum("device", static_cast<std::uint64_t>(dev)).str("device_name", name).str("pci_bus_id", bus)
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
  return s.max_per_kernel == 0 || s.launched[name] < s.max_per_kernel;
}

void on_launch(State& s, const CUpti_CallbackData* cb, CUpti_CallbackId id) {
  if (s.done || !cb->symbolName) return;
  const std::string mangled = cb->symbolName, name = demangle(cb->symbolName);
  Context& c = s.contexts[cb->context];
  const bool take = wanted(s, name, mangled);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (!take) {
      flush(s, cb->context, c);  // so that this kernel runs unobserved
      ++s.skipped;
      return;
    }
    ab::RangeProfiler* p = profiler_for(s, cb->context, c);
    if (!p) return;
    try {
      if (!p->started()) p->start(kRangesPerFlush);
    } catch (const std::exception& e) {
      c.broken = e.what();
      std::fprintf(stderr, "archbench-topdown: cannot start profiling: %s\n", e.what());
      return;
    }
    Launch l{name, mangled, {}, {}, s.seq++, s.launched[name]++, tr::now_ns()};
    if (id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel || id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz) {
      const auto* a = static_cast<const cuLaunchKernel_params*>(cb->functionParams);
      l.grid = {a->gridDimX, a->gridDimY, a->gridDimZ};
      l.block = {a->blockDimX, a->blockDimY, a->blockDimZ};
    }
    c.pending.push_back(std::move(l));
  } else if (take && c.profiler && c.pending.size() >= kRangesPerFlush) {
    flush(s, cb->context, c);
  }
}

// Calls after which the program has waited for its kernels: the pending ranges are decoded
// there, so that little is left for the exit, when the CUDA runtime may be tearing down.
constexpr CUpti_CallbackId kSyncs[] = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,       CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,     CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpy_v2,            CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH,           CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,   CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer};
constexpr CUpti_CallbackId kLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,           CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,         CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz};

bool is_sync(CUpti_CallbackId id) {
  for (CUpti_CallbackId s : kSyncs)
    if (s == id) return true;
  return false;
}

void CUPTIAPI callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API && is_sync(id)) {
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    auto it = s.contexts.find(cb->context);
    if (cb->callbackSite == CUPTI_API_EXIT && !s.done && it != s.contexts.end() && !it->second.pending.empty())
      flush(s, cb->context, it->second);
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    on_launch(s, static_cast<const CUpti_CallbackData*>(data), id);
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    const auto* r = static_cast<const CUpti_ResourceData*>(data);
    auto it = s.contexts.find(r->context);
    if (it != s.contexts.end()) {
      flush(s, r->context, it->second);
      (void)it->second.profiler.release();  // left, not torn down, as at exit (see finish)
      s.contexts.erase(it);  // a new context may come back with the same handle
    }
  }
}

// At exit: what is still pending, then the totals line.
void finish() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.done) return;
  // What is still pending (launches since the last synchronisation); the profilers themselves
  // are not torn down: at exit the CUDA runtime may already be unloading, and the process's end
  // frees them.
  for (auto& [ctx, c] : s.contexts) flush(s, ctx, c);
  s.done = true;
  tr::JsonLine("end").unum("profiled", s.profiled).unum("unprofiled", s.skipped).unum("passes", s.passes)
      .unum("end_ns", tr::now_ns()).write(s.out);
  std::fflush(s.out);
  std::fprintf(stderr, "archbench-topdown: %llu launches profiled, %llu not; %s\n",
               static_cast<unsigned long long>(s.profiled), static_cast<unsigned long long>(s.skipped),
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
  for (CUpti_CallbackId id : kSyncs) cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  std::atexit(finish);
  return 1;
}
