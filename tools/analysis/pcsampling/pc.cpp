// PC sampling on a context: enabling it (the period, the buffers, the stall reasons), draining
// its records into `pc` records with their source lines, the cubins of the modules loaded, and the
// launches (tools/analysis/pcsampling/inject.cpp says how the library works).
#include "tools/analysis/pcsampling/pcsampling.hpp"

namespace archbench::pcsampling {

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
        if (!streak) note_error(s, std::string("cuptiPCSamplingGetData (") + where + "): " + tr::cupti_words(r) +
                                   (c.drain->data.hardwareBufferFull ? " (hardware buffer full)" : ""));
      } else if (r != CUPTI_ERROR_INVALID_OPERATION || g_debug) {
        note_error(s, std::string("cuptiPCSamplingGetData (") + where + "): " + tr::cupti_words(r));
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
  s.out.flush();
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
    if (r != CUPTI_SUCCESS) note_error(s, std::string("cuptiPCSamplingDisable (") + where + "): " + tr::cupti_words(r));
    dbg("disabled (%s): %zu PCs in the configuration buffer", where, c.config->data.totalNumPcs);
    if (c.config->data.totalNumPcs) consume(s, ctx, c, c.config->data);
  }
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.enabled_ns) s.sampling_ns += tr::now_ns() - s.enabled_ns, s.enabled_ns = 0;
  c.enabled = false;
  s.out.flush();
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
  if (r != CUPTI_SUCCESS) return note_error_locked(s, "cuptiPCSamplingEnable: " + tr::cupti_words(r));
  tr::exit_first(finish);  // again: CUPTI's sampling objects exist now
  size_t n = 0;
  CUpti_PCSamplingGetNumStallReasonsParams np{};
  np.size = CUpti_PCSamplingGetNumStallReasonsParamsSize, np.ctx = ctx, np.numStallReasons = &n;
  {
    Busy b("cuptiPCSamplingGetNumStallReasons");
    r = cuptiPCSamplingGetNumStallReasons(&np);
  }
  if (r != CUPTI_SUCCESS) return note_error_locked(s, "stall reasons: " + tr::cupti_words(r));
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
  if (r != CUPTI_SUCCESS) return note_error_locked(s, "stall reason names: " + tr::cupti_words(r));
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
      if (x.attributeStatus != CUPTI_SUCCESS) bad += " attribute " + std::to_string(int(x.attributeType)) + ": " + tr::cupti_words(x.attributeStatus) + ";";
    return note_error_locked(s, "PC sampling configuration: " + tr::cupti_words(r) + bad);
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
    dbg("module %llu: cuptiGetCubinCrc: %s", static_cast<unsigned long long>(module_id), tr::cupti_words(r).c_str());
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
  const tr::LaunchArgs launch = tr::launch_args(cb, id);
  if (launch.grid.empty()) return;  // a cuLaunchKernelEx without a config
  const CUfunction f = launch.f;
  const std::vector<int64_t>& grid = launch.grid, &block = launch.block;
  const size_t smem = launch.smem;
  const std::string key = tr::shape_key(cb->symbolName, grid, block);
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

// PC mode, async enable: CUPTI's enable (about 0.1 s on the H100) on a thread of the library, the
// context pushed there, while the program goes on with its host work; the context's launches
// wait for it (wait_for_enable). A pc_enable record says when it was done.
void enable_pc_async(State& s, CUcontext ctx, Context& c) {
  c.enable_started_ns = tr::now_ns();
  c.enabling = 1;
  const bool started = tr::spawn_quiet([&s, ctx, &c] {
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
  });
  if (!started) {
    c.enabling = 0;
    note_error_locked(s, "async enable: no thread of the library: not sampled");
  }
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

}  // namespace archbench::pcsampling
