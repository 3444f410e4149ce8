// The SASS metrics stage: per-instruction execution counts with CUPTI's SASS metrics API, enabled
// per strategy around the launches (tools/analysis/pcsampling/inject.cpp says which and why).
#include "tools/analysis/pcsampling/pcsampling.hpp"

namespace archbench::pcsampling {

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
                        .str("error", r == CUPTI_SUCCESS ? "" : tr::cupti_words(r)).unum("ns", tr::now_ns())));
  dbg("SASS flush (%s): %zu records, %zu functions%s%s", where, data.size(), by_function.size(),
      r == CUPTI_SUCCESS ? "" : ", ", r == CUPTI_SUCCESS ? "" : tr::cupti_words(r).c_str());
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
  if (CUptiResult r = cuptiDeviceGetChipName(&cn); r != CUPTI_SUCCESS) return note_error_locked(s, "chip name: " + tr::cupti_words(r)), false;
  std::vector<CUpti_SassMetrics_Config> cfg;
  std::vector<std::pair<uint64_t, std::string>> ids;
  for (const char* m : kSassMetrics) {
    auto pp = params<CUpti_SassMetrics_GetProperties_Params>(CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE);
    pp.pChipName = cn.pChipName, pp.pMetricName = m;
    if (CUptiResult r = cuptiSassMetricsGetProperties(&pp); r != CUPTI_SUCCESS)
      return note_error_locked(s, std::string("SASS metric ") + m + ": " + tr::cupti_words(r)), false;
    ids.emplace_back(pp.metric.metricId, m);
    cfg.push_back({pp.metric.metricId, uint8_t(CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU)});
  }
  auto sp = params<CUpti_SassMetricsSetConfig_Params>(CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE);
  sp.numOfMetricConfig = cfg.size(), sp.pConfigs = cfg.data(), sp.deviceIndex = uint32_t(device);
  if (CUptiResult r = cuptiSassMetricsSetConfig(&sp); r != CUPTI_SUCCESS) return note_error_locked(s, "SASS metrics config: " + tr::cupti_words(r)), false;
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
    if (r != CUPTI_SUCCESS) note_error(s, "cuptiSassMetricsUnsetConfig: " + tr::cupti_words(r));
    else s.sass_configured[device] = false;
  }
  return r == CUPTI_SUCCESS && sass_config(s, device);
}

// Opens a SASS metrics range on the context (s.cupti held, s.mu not); `trigger` names the
// function (or event) it was opened for. A sass_enable record either way.
bool sass_enable(State& s, CUcontext ctx, Context& c, const std::string& trigger, const std::string& loaded) {
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
                        .str("error", r == CUPTI_SUCCESS ? "" : tr::cupti_words(r)).unum("ns", tr::now_ns())));
  if (r != CUPTI_SUCCESS) note_error(s, "cuptiSassMetricsEnable (" + trigger + "): " + tr::cupti_words(r) + "; SASS metrics end here");
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
                        .str("error", r == CUPTI_SUCCESS ? "" : tr::cupti_words(r)).unum("ns", tr::now_ns())));
  return r == CUPTI_SUCCESS;
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
  const tr::LaunchArgs launch = tr::launch_args(cb, id);
  const CUfunction f = launch.f;  // a CUfunction, or a CUkernel as the runtime may pass
  const CUstream stream = tr::launch_stream(launch, id);
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

}  // namespace archbench::pcsampling
