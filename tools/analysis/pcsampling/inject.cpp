// Where a CUDA program's kernels stall, instruction by instruction (seed 003 section V on NVIDIA):
// a CUPTI injection library (CUDA_INJECTION64_PATH, set up by tools/archbench_pcsample.py) for any
// unmodified program. Two modes, one run each:
//   pc    CUPTI's PC Sampling API in continuous mode (kernels are not serialised): each sample is
//         one warp's PC and stall reason; the buffer is drained at the program's synchronisations
//         (at most every ARCHBENCH_PCSAMPLE_DRAIN_MS), before a module unloads or a context goes,
//         and at exit.
//   sass  CUPTI's SASS metrics API (the kernels patched, lazily, at their first launch): per
//         instruction the warp-instructions and thread-instructions executed, for instruction
//         counts and warp efficiency. Instrumentation: slower, and therefore its own run.
// Every module's cubin comes from the module-loaded callback; it is kept (for
// cuptiGetSassToSourceCorrelation: file and line of each PC, -lineinfo) and written beside the
// output for the disassembly. Records, one JSON object a line (tools/archbench/pcsample.py reads
// them): process, config, module, pc (pc mode), sass (sass mode), drain, launch, end.
// Environment (set by the command):
//   ARCHBENCH_PCSAMPLE_OUT       output file (default ./pcsample-<pid>.jsonl); cubins in OUT.cubins/
//   ARCHBENCH_PCSAMPLE_MODE      pc (default) or sass
//   ARCHBENCH_PCSAMPLE_PERIOD    pc mode: sampling period, log2 of cycles (5..31); 0: CUPTI's default
//   ARCHBENCH_PCSAMPLE_DRAIN_MS  least time between two drains at synchronisations (default 50)
#include <cuda.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cupti_profiler_target.h>
#include <cupti_sass_metrics.h>
#include <cupti_target.h>
#include <cxxabi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "tools/analysis/trace/common.hpp"

namespace tr = archbench::trace;

namespace {

constexpr std::size_t kPcsPerGet = 8192;       // PC records a drain takes per cuptiPCSamplingGetData
constexpr std::size_t kConfigPcs = 65536;      // the buffer CUPTI fills on module unload and disable
const char* const kSassMetrics[] = {"smsp__sass_inst_executed", "smsp__sass_thread_inst_executed"};

// A PC sampling data buffer with room for `pcs` records of `reasons` stall reasons each.
struct PcBuffer {
  CUpti_PCSamplingData data{};
  std::vector<CUpti_PCSamplingPCData> pcs;
  std::vector<CUpti_PCSamplingStallReason> reasons;
  PcBuffer(std::size_t n, std::size_t r) : pcs(n), reasons(n * r) {
    data.size = sizeof(CUpti_PCSamplingData);
    data.collectNumPcs = n;
    data.pPcData = pcs.data();
    for (std::size_t i = 0; i < n; ++i) pcs[i].size = sizeof(CUpti_PCSamplingPCData), pcs[i].stallReason = &reasons[i * r];
  }
};

struct Context {
  int device = 0;
  bool enabled = false;
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

struct State {
  std::mutex mu;
  CUpti_SubscriberHandle sub = nullptr;
  FILE* out = nullptr;
  std::string out_path, cubin_dir, mode = "pc";
  uint32_t period = 0;
  uint64_t drain_ns = 50'000'000, last_drain = 0;
  std::map<CUcontext, Context> contexts;
  std::map<uint64_t, Cubin> cubins;                                       // by CUPTI's 64-bit CRC
  std::map<std::tuple<uint64_t, std::string, uint64_t>, Source> sources;  // (crc, function, pc)
  // Launch shapes: launches and the warps each scheduler can hold (occupancy, grid-limited).
  struct Shape {
    std::string name;
    std::vector<int64_t> grid, block;
    uint64_t launches = 0;
    double warps_per_scheduler = 0;  // -1: unknown (no occupancy query for the function)
  };
  std::map<std::string, Shape> shapes;
  std::map<int, bool> sass_configured;  // device -> configured
  std::vector<uint64_t> sass_ids;
  std::map<uint64_t, std::string> sass_names;  // metric id -> name
  uint64_t samples = 0, dropped = 0, non_user = 0, pc_records = 0, drains = 0, sass_records = 0;
  bool hw_full = false, done = false;
  std::string error;
};

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

std::string demangle(const char* m) {
  int status = 0;
  char* d = abi::__cxa_demangle(m, nullptr, nullptr, &status);
  std::string r = status == 0 && d ? d : m;
  std::free(d);
  return r;
}

std::string cupti_error(CUptiResult r) {
  const char* e = nullptr;
  cuptiGetResultString(r, &e);
  return e ? e : "CUPTI error " + std::to_string(int(r));
}

void note_error(State& s, const std::string& what) {
  std::fprintf(stderr, "archbench-pcsample: %s\n", what.c_str());
  tr::JsonLine("error").str("reason", what).write(s.out);
  if (s.error.empty()) s.error = what;
}

// File, folder and line of a function's PC, from its cubin's line table (-lineinfo); cached.
const Source& source_of(State& s, uint64_t crc, const char* function, uint64_t pc) {
  auto key = std::make_tuple(crc, std::string(function ? function : ""), pc);
  auto it = s.sources.find(key);
  if (it != s.sources.end()) return it->second;
  Source src;
  auto c = s.cubins.find(crc);
  if (c != s.cubins.end() && function) {
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
        .str("function", fn).str("name", demangle(fn)).unum("pc", p.pcOffset).str("file", src.file)
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

// SASS mode: the per-instruction counts CUPTI holds for the context, written and reset.
void flush_sass(State& s, CUcontext ctx) {
  auto dp = params<CUpti_SassMetricsGetDataProperties_Params>(CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE);
  dp.ctx = ctx;
  if (cuptiSassMetricsGetDataProperties(&dp) != CUPTI_SUCCESS || !dp.numOfPatchedInstructionRecords) return;
  const std::size_t n = dp.numOfPatchedInstructionRecords, per = dp.numOfInstances * s.sass_ids.size();
  std::vector<CUpti_SassMetrics_Data> data(n);
  std::vector<CUpti_SassMetrics_InstanceValue> values(n * per, CUpti_SassMetrics_InstanceValue{~0ull, 0});
  for (std::size_t i = 0; i < n; ++i) data[i].structSize = sizeof(CUpti_SassMetrics_Data), data[i].pInstanceValues = &values[i * per];
  auto fp = params<CUpti_SassMetricsFlushData_Params>(CUpti_SassMetricsFlushData_Params_STRUCT_SIZE);
  fp.ctx = ctx, fp.numOfPatchedInstructionRecords = n, fp.numOfInstances = dp.numOfInstances, fp.pMetricsData = data.data();
  if (CUptiResult r = cuptiSassMetricsFlushData(&fp); r != CUPTI_SUCCESS) return note_error(s, "SASS metrics flush: " + cupti_error(r));
  for (const auto& d : data) {
    std::map<std::string, uint64_t> sum;
    for (std::size_t k = 0; k < per; ++k)
      if (s.sass_names.count(d.pInstanceValues[k].metricId)) sum[s.sass_names[d.pInstanceValues[k].metricId]] += d.pInstanceValues[k].value;
    const char* fn = d.functionName ? d.functionName : "";
    const uint64_t crc = crc_of(s, d.cubinCrc);
    const Source& src = source_of(s, crc, fn, d.pcOffset);
    tr::JsonLine line("sass");
    line.str("crc", tr::hex64(crc)).str("function", fn).str("name", demangle(fn)).unum("pc", d.pcOffset)
        .str("file", src.file).str("dir", src.dir).unum("line", src.line);
    for (const auto& [k, v] : sum) line.unum(k, v);
    line.write(s.out);
    ++s.sass_records;
  }
}

// PC mode: everything CUPTI has for the context now (GetData never synchronises the device).
void drain(State& s, CUcontext ctx, Context& c) {
  if (!c.enabled) return;
  if (s.mode == "sass") return flush_sass(s, ctx);
  if (c.config->data.totalNumPcs) consume(s, ctx, c, c.config->data);  // flushed there by a module unload
  for (int guard = 0; guard < 1000; ++guard) {
    CUpti_PCSamplingGetDataParams p{};
    p.size = CUpti_PCSamplingGetDataParamsSize, p.ctx = ctx, p.pcSamplingData = &c.drain->data;
    const CUptiResult r = cuptiPCSamplingGetData(&p);
    const bool more = c.drain->data.remainingNumPcs > 0;
    if (r != CUPTI_SUCCESS && !c.drain->data.totalNumPcs) {
      if (r == CUPTI_ERROR_OUT_OF_MEMORY) s.hw_full = true;
      if (r != CUPTI_ERROR_INVALID_OPERATION) note_error(s, "cuptiPCSamplingGetData: " + cupti_error(r));
      break;
    }
    consume(s, ctx, c, c.drain->data);
    if (!more) break;
  }
  ++s.drains;
  s.last_drain = tr::now_ns();
  std::fflush(s.out);
}

// Drains, then stops sampling on the context (CUPTI flushes what is left into the config buffer).
void finish_context(State& s, CUcontext ctx, Context& c) {
  if (!c.enabled) return;
  drain(s, ctx, c);
  if (s.mode == "sass") {
    auto p = params<CUpti_SassMetricsDisable_Params>(CUpti_SassMetricsDisable_Params_STRUCT_SIZE);
    p.ctx = ctx;
    cuptiSassMetricsDisable(&p);
  } else {
    CUpti_PCSamplingDisableParams p{};
    p.size = CUpti_PCSamplingDisableParamsSize, p.ctx = ctx;
    cuptiPCSamplingDisable(&p);
    if (c.config->data.totalNumPcs) consume(s, ctx, c, c.config->data);
  }
  c.enabled = false;
  std::fflush(s.out);
}

CUpti_PCSamplingConfigurationInfo attr(CUpti_PCSamplingConfigurationAttributeType t) {
  CUpti_PCSamplingConfigurationInfo a{};
  a.attributeType = t;
  return a;
}

void enable_pc(State& s, CUcontext ctx, Context& c) {
  CUpti_PCSamplingEnableParams e{};
  e.size = CUpti_PCSamplingEnableParamsSize, e.ctx = ctx;
  if (CUptiResult r = cuptiPCSamplingEnable(&e); r != CUPTI_SUCCESS) return note_error(s, "cuptiPCSamplingEnable: " + cupti_error(r));
  size_t n = 0;
  CUpti_PCSamplingGetNumStallReasonsParams np{};
  np.size = CUpti_PCSamplingGetNumStallReasonsParamsSize, np.ctx = ctx, np.numStallReasons = &n;
  if (CUptiResult r = cuptiPCSamplingGetNumStallReasons(&np); r != CUPTI_SUCCESS) return note_error(s, "stall reasons: " + cupti_error(r));
  std::vector<uint32_t> idx(n);
  std::vector<std::vector<char>> text(n, std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE));
  std::vector<char*> names(n);
  for (size_t i = 0; i < n; ++i) names[i] = text[i].data();
  CUpti_PCSamplingGetStallReasonsParams rp{};
  rp.size = CUpti_PCSamplingGetStallReasonsParamsSize, rp.ctx = ctx, rp.numStallReasons = n;
  rp.stallReasonIndex = idx.data(), rp.stallReasons = names.data();
  if (CUptiResult r = cuptiPCSamplingGetStallReasons(&rp); r != CUPTI_SUCCESS) return note_error(s, "stall reason names: " + cupti_error(r));
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
  a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON));
  a.back().attributeData.stallReasonData.stallReasonCount = n;
  a.back().attributeData.stallReasonData.pStallReasonIndex = idx.data();
  a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER));
  a.back().attributeData.samplingDataBufferData.samplingDataBuffer = &c.config->data;
  a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE));
  a.back().attributeData.scratchBufferSizeData.scratchBufferSize = size_t(32) << 20;  // ~180k PCs between drains
  if (s.period) {
    a.push_back(attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD));
    a.back().attributeData.samplingPeriodData.samplingPeriod = s.period;
  }
  CUpti_PCSamplingConfigurationInfoParams cp{};
  cp.size = CUpti_PCSamplingConfigurationInfoParamsSize, cp.ctx = ctx;
  cp.numAttributes = a.size(), cp.pPCSamplingConfigurationInfo = a.data();
  if (CUptiResult r = cuptiPCSamplingSetConfigurationAttribute(&cp); r != CUPTI_SUCCESS)
    return note_error(s, "PC sampling configuration: " + cupti_error(r));
  // The period in force (CUPTI's default when none was asked for).
  CUpti_PCSamplingConfigurationInfo got = attr(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD);
  cp.numAttributes = 1, cp.pPCSamplingConfigurationInfo = &got;
  const uint32_t period = cuptiPCSamplingGetConfigurationAttribute(&cp) == CUPTI_SUCCESS ? got.attributeData.samplingPeriodData.samplingPeriod : s.period;
  c.enabled = true;
  char name[256] = "";
  cuDeviceGetName(name, sizeof name, c.device);
  int sms = 0, threads = 0;
  cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c.device);
  cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, c.device);
  tr::JsonLine("config").str("mode", "pc").unum("context", reinterpret_cast<std::uintptr_t>(ctx)).num("device", c.device)
      .str("device_name", name).num("sms", sms).num("max_warps_per_scheduler", threads / 32 / 4)
      .unum("period_log2", period).str("collection", "continuous").raw("stall_reasons", list + "]").write(s.out);
}

void enable_sass(State& s, CUcontext ctx, Context& c) {
  if (!s.sass_configured[c.device]) {
    auto ip = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    cuptiProfilerInitialize(&ip);
    auto cn = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
    cn.deviceIndex = c.device;
    if (CUptiResult r = cuptiDeviceGetChipName(&cn); r != CUPTI_SUCCESS) return note_error(s, "chip name: " + cupti_error(r));
    std::vector<CUpti_SassMetrics_Config> cfg;
    for (const char* m : kSassMetrics) {
      auto pp = params<CUpti_SassMetrics_GetProperties_Params>(CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE);
      pp.pChipName = cn.pChipName, pp.pMetricName = m;
      if (CUptiResult r = cuptiSassMetricsGetProperties(&pp); r != CUPTI_SUCCESS)
        return note_error(s, std::string("SASS metric ") + m + ": " + cupti_error(r));
      s.sass_ids.push_back(pp.metric.metricId);
      s.sass_names[pp.metric.metricId] = m;
      cfg.push_back({pp.metric.metricId, uint8_t(CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU)});
    }
    auto sp = params<CUpti_SassMetricsSetConfig_Params>(CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE);
    sp.numOfMetricConfig = cfg.size(), sp.pConfigs = cfg.data(), sp.deviceIndex = uint32_t(c.device);
    if (CUptiResult r = cuptiSassMetricsSetConfig(&sp); r != CUPTI_SUCCESS) return note_error(s, "SASS metrics config: " + cupti_error(r));
    s.sass_configured[c.device] = true;
  }
  auto ep = params<CUpti_SassMetricsEnable_Params>(CUpti_SassMetricsEnable_Params_STRUCT_SIZE);
  ep.ctx = ctx, ep.enableLazyPatching = 1;
  if (CUptiResult r = cuptiSassMetricsEnable(&ep); r != CUPTI_SUCCESS) return note_error(s, "cuptiSassMetricsEnable: " + cupti_error(r));
  c.enabled = true;
  char name[256] = "";
  cuDeviceGetName(name, sizeof name, c.device);
  tr::JsonLine("config").str("mode", "sass").unum("context", reinterpret_cast<std::uintptr_t>(ctx)).num("device", c.device)
      .str("device_name", name).write(s.out);
}

void on_module(State& s, const CUpti_ResourceData* r) {
  const auto* m = static_cast<const CUpti_ModuleResourceData*>(r->resourceDescriptor);
  if (!m || !m->pCubin || !m->cubinSize) return;
  CUpti_GetCubinCrcParams p{};
  p.size = CUpti_GetCubinCrcParamsSize, p.cubin = m->pCubin, p.cubinSize = m->cubinSize;
  if (cuptiGetCubinCrc(&p) != CUPTI_SUCCESS) return;
  if (s.cubins.count(p.cubinCrc)) return;
  Cubin& c = s.cubins[p.cubinCrc];
  c.bytes.assign(m->pCubin, m->pCubin + m->cubinSize);
  c.path = s.cubin_dir + "/" + tr::hex64(p.cubinCrc) + ".cubin";
  if (FILE* f = std::fopen(c.path.c_str(), "wb")) {
    std::fwrite(c.bytes.data(), 1, c.bytes.size(), f);
    std::fclose(f);
  } else {
    c.path.clear();
  }
  tr::JsonLine("module").str("crc", tr::hex64(p.cubinCrc)).unum("module_id", m->moduleId).unum("bytes", m->cubinSize)
      .str("cubin", c.path).write(s.out);
}

// A launch's shape and the warps per scheduler its blocks can keep resident (occupancy, at most
// what the grid provides).
void on_launch(State& s, const CUpti_CallbackData* cb, CUpti_CallbackId id) {
  if (cb->callbackSite != CUPTI_API_ENTER || !cb->symbolName) return;
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

constexpr CUpti_CallbackId kSyncs[] = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,     CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,  CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,   CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpy_v2,          CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH,         CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer};
constexpr CUpti_CallbackId kLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,           CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,         CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz};

bool one_of(CUpti_CallbackId id, const CUpti_CallbackId* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (b[i] == id) return true;
  return false;
}

void CUPTIAPI callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.done) return;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (one_of(id, kLaunches, std::size(kLaunches))) return on_launch(s, cb, id);
    if (cb->callbackSite != CUPTI_API_EXIT || tr::now_ns() - s.last_drain < s.drain_ns) return;
    auto it = s.contexts.find(cb->context);
    if (it != s.contexts.end()) drain(s, cb->context, it->second);
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
  const auto* r = static_cast<const CUpti_ResourceData*>(data);
  if (id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    Context& c = s.contexts[r->context];
    CUdevice dev = 0;
    if (cuCtxGetDevice(&dev) == CUDA_SUCCESS) c.device = int(dev);
    s.mode == "sass" ? enable_sass(s, r->context, c) : enable_pc(s, r->context, c);
  } else if (id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    auto it = s.contexts.find(r->context);
    if (it != s.contexts.end()) finish_context(s, r->context, it->second), s.contexts.erase(it);
  } else if (id == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
    on_module(s, r);
    auto it = s.contexts.find(r->context);  // records CUPTI flushed at an earlier unload
    if (it != s.contexts.end() && it->second.config && it->second.config->data.totalNumPcs)
      consume(s, r->context, it->second, it->second.config->data);
  } else if (id == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING) {
    auto it = s.contexts.find(r->context);
    if (it != s.contexts.end()) drain(s, r->context, it->second);
  }
}

void finish() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.done) return;
  for (auto& [ctx, c] : s.contexts) finish_context(s, ctx, c);
  s.done = true;
  for (const auto& [key, sh] : s.shapes)
    tr::JsonLine("launch").str("function", sh.name).str("name", demangle(sh.name.c_str())).nums("grid", sh.grid)
        .nums("block", sh.block).unum("launches", sh.launches).raw("warps_per_scheduler", std::to_string(sh.warps_per_scheduler))
        .write(s.out);
  tr::JsonLine("end").str("mode", s.mode).unum("pc_records", s.pc_records).unum("sass_records", s.sass_records)
      .unum("total_samples", s.samples).unum("dropped_samples", s.dropped).unum("non_user_samples", s.non_user)
      .boolean("hardware_buffer_full", s.hw_full).unum("drains", s.drains).unum("modules", s.cubins.size())
      .str("error", s.error).unum("end_ns", tr::now_ns()).write(s.out);
  std::fflush(s.out);
  std::fprintf(stderr, "archbench-pcsample: %s mode, %llu samples (%llu dropped), %zu modules; %s\n", s.mode.c_str(),
               static_cast<unsigned long long>(s.samples), static_cast<unsigned long long>(s.dropped), s.cubins.size(),
               s.out_path.c_str());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.sub) return 1;
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
  if (const char* p = std::getenv("ARCHBENCH_PCSAMPLE_PERIOD"); p && *p) s.period = uint32_t(std::strtoul(p, nullptr, 10));
  if (const char* d = std::getenv("ARCHBENCH_PCSAMPLE_DRAIN_MS"); d && *d) s.drain_ns = uint64_t(std::atof(d) * 1e6);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  tr::JsonLine("process").num("pid", getpid()).str("command", tr::command_line()).unum("start_ns", tr::now_ns())
      .str("date", date).str("mode", s.mode).write(s.out);
  if (cuptiSubscribe(&s.sub, callback, nullptr) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "archbench-pcsample: cuptiSubscribe failed (another CUPTI client?); unobserved\n");
    return 0;
  }
  for (CUpti_CallbackId id : kLaunches) cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  for (CUpti_CallbackId id : kSyncs) cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  for (CUpti_CallbackId id : {CUPTI_CBID_RESOURCE_CONTEXT_CREATED, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
                              CUPTI_CBID_RESOURCE_MODULE_LOADED, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING})
    cuptiEnableCallback(1, s.sub, CUPTI_CB_DOMAIN_RESOURCE, id);
  std::atexit(finish);
  return 1;
}
