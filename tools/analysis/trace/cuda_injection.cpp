// CUDA tracer: a CUPTI injection library for unmodified programs.
//   CUDA_INJECTION64_PATH=/path/libarchbench_trace_cuda.so ./program
// The driver loads it at cuInit and calls InitializeInjection. It records kernels, copies,
// memsets, synchronisations and module loads (CUDA's "builds") with the host call path that
// issued each, the device allocations (cudaMalloc, managed, stream-ordered and from pools), samples
// the program's threads, and writes tools/analysis/trace/FORMAT.md records to
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
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "tools/analysis/trace/common.hpp"
#include "tools/analysis/trace/cupti_calls.hpp"

namespace {

namespace tr = archbench::trace;

// Frames of the tracer and of NVIDIA's libraries between the program and our callback.
const std::vector<std::string> kHidden = {"libarchbench_trace_cuda", "libcupti", "libcuda.so"};

// One traced API call (the outermost one of its thread), named by every correlation id inside.
struct Call {
  bool open = true;  // not returned yet: its records wait (a copy's hash is taken at its return)
  int tid = 0;
  uint32_t path = 0;
  uint64_t entry_ns = 0;
  bool has_hash = false;
  uint64_t hash = 0;
  uint64_t buffer = 0;                // device allocation a copy reads or writes (0: unknown)
  bool buffers_known = false;         // kernel arguments were read
  std::vector<uint64_t> buffers;      // device allocations among a kernel's arguments
};

struct Kernel {
  std::string name;
  uint32_t device, context, stream, corr;
  int64_t grid[3], block[3];
  uint64_t queued, submitted, start, end;
};
struct Copy {
  const char* kind;
  const char* host_memory;
  bool blocking, peer;
  uint32_t device, context, stream, corr, runtime_corr;
  uint64_t bytes, start, end;
};
struct Memset {
  uint32_t device, context, stream, corr;
  uint64_t bytes, start, end;
};
struct Sync {
  const char* kind;
  uint32_t context, stream, corr;
  uint64_t start, end;
  bool has_stream;
};
struct HostSync {  // host time blocked in a synchronous copy (from the callbacks)
  const char* kind;
  int tid;
  uint32_t path;
  uint64_t start, end;
};
struct Build {
  std::string program, context;
  uint64_t hash, start, end;
  int tid;
  uint32_t path;
  int status;  // the call's CUresult (0: loaded)
};
struct Alloc {  // a device allocation made
  uint64_t base, bytes;
  const char* memory;  // "device", "managed" or "stream-ordered"
  uint64_t pool;       // the memory pool it came from, where the program named one
  int tid;
  uint32_t path;
  bool has_path;
};

struct State {
  std::mutex mu;  // guards everything below
  std::vector<Call> calls;
  std::unordered_map<uint32_t, uint32_t> by_corr;  // correlation id -> index in calls
  std::map<uint64_t, uint64_t> allocs;             // device allocation base -> bytes
  // Records not written yet (the writer thread writes each once the call behind it returned).
  std::vector<Kernel> kernels;
  std::vector<Copy> copies;
  std::vector<Memset> memsets;
  std::vector<Sync> syncs;
  std::vector<HostSync> host_syncs;
  std::vector<Build> builds;
  std::vector<Alloc> new_allocs;
  uint64_t next_id = 0;          // of the records written
  size_t counts[3] = {0, 0, 0};  // kernels, copies, syncs written (the message at the end)
  std::map<uint32_t, uint32_t> null_stream;  // context -> its NULL (legacy default) stream id
  std::map<uint32_t, uint32_t> ctx_device;   // context -> device
  std::map<std::pair<uint32_t, uint32_t>, std::string> queues;  // (context, stream) -> its queue record as written
  std::set<uint32_t> used_devices;
  std::vector<std::string> device_names;  // by ordinal, read at the first context
  uint64_t dropped = 0;
  tr::PathTable paths;
  tr::TraceFile out;
  uint64_t start_ns = 0;
  int64_t clock_offset = 0;  // added to CUPTI times (0 when CUPTI uses our clock)
  std::string clock_detail;
  bool done = false;  // the end record is written (or this is a forked child): nothing more
};
State& st() {
  static State* s = new State;  // never destroyed: CUPTI threads may call in during exit
  return *s;
}

// Per-cbid: does this call get a path (launches, copies, memsets, syncs, module loads)?
std::vector<bool> g_traced_runtime, g_traced_driver;
bool g_read_args = true;  // ARCHBENCH_TRACE_NO_ARGS turns it off

// The writer thread and what wakes it.
sem_t g_wake;                            // posted: write now (a synchronisation, a fatal signal, the exit)
std::atomic<int> g_crash{0};             // a fatal signal the writer is asked to record
std::atomic<bool> g_crash_done{false};   // ... and it has
std::atomic<bool> g_stop{false};         // the exit: the writer ends
std::atomic<uint64_t> g_last_nudge{0};   // when a synchronisation last woke the writer
std::atomic<int> g_writer_tid{0};        // 0: no writer thread (none started, or a forked child)
pthread_t g_writer;
pid_t g_pid = 0;                         // the traced process (a forked child writes nothing)

thread_local int t_depth = 0;           // traced calls open on this thread
thread_local uint32_t t_call = 0;       // the outermost one
thread_local bool t_inside = false;     // the tracer itself is calling CUDA
thread_local bool t_sampled = false;    // this thread has its sampling timer
thread_local std::vector<std::pair<uint64_t, uint64_t>> t_build;  // open module loads: start, image hash

void warn(const char* what, CUptiResult r) {
  const char* s = "?";
  cuptiGetResultString(r, &s);
  const char* why = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                        ? " (another tool holds CUPTI: Nsight Systems, Nsight Compute or another profiler)"
                    : r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES || r == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES
                        ? " (profiling is restricted to administrators: NVreg_RestrictProfilingToAdminUsers)"
                        : "";
  fprintf(stderr, "archbench trace (cuda): %s failed: %s%s\n", what, s, why);
}

std::string hexptr(uint64_t p) {
  char b[24];
  snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(p));
  return b;
}

std::string demangle(const char* n) {
  if (!n) return "?";
  int s = 0;
  char* d = abi::__cxa_demangle(n, nullptr, nullptr, &s);
  std::string out = (s == 0 && d) ? d : n;
  free(d);
  return out;
}

// Base of the device allocation holding `p`, 0 if none recorded. Caller holds the lock.
uint64_t alloc_of(uint64_t p) {
  auto& a = st().allocs;
  auto it = a.upper_bound(p);
  if (it == a.begin()) return 0;
  --it;
  return p < it->first + it->second ? it->first : 0;
}

// The bytes of a module image: PTX text, an ELF cubin, a fatbin, or what the runtime's fatbin
// wrapper ({magic, version, data, filename}: what nvcc's programs register and load) points at.
// Lengths come from the image's own headers; none is read past what is mapped, so a header this
// code misreads cannot crash the program (hashing the wrapper itself for its fatbin's length once
// read past the end of every nvcc-built program's data).
std::pair<const void*, size_t> image_bytes(const void* image) {
  const unsigned char* p = static_cast<const unsigned char*>(image);
  if (!p || tr::readable_bytes(p, 64) < 64) return {p, 0};
  uint32_t magic;
  memcpy(&magic, p, 4);
  size_t n;
  if (magic == 0x464c457f) {  // ELF: section headers come last in a cubin
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&shentsize, p + 0x3a, 2);
    memcpy(&shnum, p + 0x3c, 2);
    n = size_t(shoff + uint64_t(shentsize) * shnum);
  } else if (magic == 0xba55ed50) {  // fatbin: 16-byte header whose last field is the payload size
    uint16_t header;
    uint64_t fat;
    memcpy(&header, p + 6, 2);
    memcpy(&fat, p + 8, 8);
    n = size_t(header + fat);
  } else if (magic == 0x466243b1) {  // the runtime's wrapper: the bytes are its data's
    const void* data;
    memcpy(&data, p + 8, sizeof data);
    return data == image ? std::make_pair(image, size_t(0)) : image_bytes(data);
  } else {
    n = strnlen(reinterpret_cast<const char*>(p), tr::readable_bytes(p, size_t(1) << 30));  // PTX
  }
  return {p, tr::readable_bytes(p, n)};
}

// The 8-byte arguments of a driver launch (candidate device pointers), read at its entry with
// the parameter sizes from cuFuncGetParamInfo (CUDA 12.4+). False when they cannot be read: the
// launch passed `extra` instead of kernelParams, or the function has no parameter the driver
// describes. Called without the state lock: it calls the driver.
bool launch_args(CUpti_CallbackId cbid, const CUpti_CallbackData* d, std::vector<uint64_t>* out) {
  CUfunction f = nullptr;
  void** params = nullptr;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel || cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz) {
    auto* p = static_cast<const cuLaunchKernel_params*>(d->functionParams);
    f = p->f;
    params = p->kernelParams;
  } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx || cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) {
    auto* p = static_cast<const cuLaunchKernelEx_params*>(d->functionParams);
    f = p->f;
    params = p->kernelParams;
  }
  if (!f || !params || !g_read_args) return false;
  t_inside = true;
  size_t off, size, i = 0;
  for (; cuFuncGetParamInfo(f, i, &off, &size) == CUDA_SUCCESS; ++i)
    if (size == sizeof(uint64_t)) {
      uint64_t v;
      memcpy(&v, params[i], sizeof v);
      out->push_back(v);
    }
  t_inside = false;
  return i > 0;
}

// The allocation calls, runtime and driver: the first two parameters of each are where the
// pointer goes and its size; the third of an allocation from a pool is the pool. memory null: a free.
struct AllocCall {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  const char* memory;
  bool pool;
};
constexpr CUpti_CallbackDomain kRt = CUPTI_CB_DOMAIN_RUNTIME_API, kDrv = CUPTI_CB_DOMAIN_DRIVER_API;
const AllocCall kAllocCalls[] = {
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, "device", false},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000, "managed", false},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, "stream-ordered", false},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020, "stream-ordered", false},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020, "stream-ordered", true},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020, "stream-ordered", true},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, nullptr, false},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, nullptr, false},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020, nullptr, false},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "device", false},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, "managed", false},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, "stream-ordered", false},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, "stream-ordered", false},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, "stream-ordered", true},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, "stream-ordered", true},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, nullptr, false},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, nullptr, false},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, nullptr, false},
};

// At the return of an allocation call: the allocation made (a `buffer` record, once: a runtime
// call's driver call inside made it already) or freed. `c` null: a call seen only at its return.
void on_alloc(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* d, const Call* c) {
  for (const AllocCall& a : kAllocCalls) {
    if (a.domain != domain || a.cbid != cbid) continue;
    if (*static_cast<const int*>(d->functionReturnValue) != 0) return;  // cudaSuccess, CUDA_SUCCESS
    struct Params {
      void** ptr;  // a free's first parameter is the pointer itself
      size_t bytes;
      void* pool;
    };
    auto* p = static_cast<const Params*>(d->functionParams);
    auto& allocs = st().allocs;
    if (!a.memory) {
      allocs.erase(reinterpret_cast<uint64_t>(p->ptr));
      return;
    }
    uint64_t base = reinterpret_cast<uint64_t>(*p->ptr);
    if (!base || !p->bytes || allocs[base] == p->bytes) return;
    allocs[base] = p->bytes;
    st().new_allocs.push_back({base, p->bytes, a.memory, a.pool ? reinterpret_cast<uint64_t>(p->pool) : 0,
                               c ? c->tid : tr::this_tid(), c ? c->path : 0, c != nullptr});
    return;
  }
}

// A synchronous copy's host bytes, hashed at the call's exit (the data are in place then).
void hash_copy(Call& c, const void* host, size_t n) {
  c.has_hash = true;
  c.hash = tr::fnv1a(host, n);
}

// The call's device buffer and, at exit, host hash and blocked time, for a synchronous copy.
void sync_copy(Call& c, bool exit, bool to_device, const void* host, uint64_t device, size_t n) {
  c.buffer = alloc_of(device);
  if (!exit || !c.entry_ns) return;
  hash_copy(c, host, n);
  st().host_syncs.push_back({to_device ? "blocking_write" : "blocking_read", c.tid, c.path, c.entry_ns, tr::now_ns()});
}

void on_runtime(CUpti_CallbackId cbid, const CUpti_CallbackData* d, Call& c, bool exit) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000: {
      auto* p = static_cast<const cudaMemcpy_v3020_params*>(d->functionParams);
      cudaMemcpyKind k = p->kind;
      if (k == cudaMemcpyDefault)  // direction from which side is a recorded allocation
        k = alloc_of(reinterpret_cast<uint64_t>(p->dst)) ? (alloc_of(reinterpret_cast<uint64_t>(p->src)) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                                          : (alloc_of(reinterpret_cast<uint64_t>(p->src)) ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
      if (c.has_hash) break;  // done by the driver copy inside
      if (k == cudaMemcpyHostToDevice) sync_copy(c, exit, true, p->src, reinterpret_cast<uint64_t>(p->dst), p->count);
      if (k == cudaMemcpyDeviceToHost) sync_copy(c, exit, false, p->dst, reinterpret_cast<uint64_t>(p->src), p->count);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000: {
      // Not hashed: the host bytes of an asynchronous copy are only final at a later sync.
      auto* p = static_cast<const cudaMemcpyAsync_v3020_params*>(d->functionParams);
      uint64_t dev = p->kind == cudaMemcpyDeviceToHost ? reinterpret_cast<uint64_t>(p->src) : reinterpret_cast<uint64_t>(p->dst);
      c.buffer = alloc_of(dev);
      break;
    }
    default:
      break;
  }
}

// `args`: the launch's 8-byte arguments when launch_args could read them, else null.
void on_driver(CUpti_CallbackId cbid, const CUpti_CallbackData* d, Call& c, bool exit, const std::vector<uint64_t>* args) {
  bool ok = exit && *static_cast<CUresult*>(d->functionReturnValue) == CUDA_SUCCESS;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      if (args && !c.buffers_known) {
        c.buffers_known = true;
        for (uint64_t v : *args)
          if (uint64_t b = alloc_of(v)) c.buffers.push_back(b);
      }
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds: {
      auto* p = static_cast<const cuMemcpyHtoD_v2_params*>(d->functionParams);
      if (!c.has_hash) sync_copy(c, exit, true, p->srcHost, p->dstDevice, p->ByteCount);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds: {
      auto* p = static_cast<const cuMemcpyDtoH_v2_params*>(d->functionParams);
      if (!c.has_hash) sync_copy(c, exit, false, p->dstHost, p->srcDevice, p->ByteCount);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoad:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary:
    case CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData:
    case CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile: {
      // The first parameter of each is the handle made; the second the image or file name.
      struct Params {
        void** handle;
        const void* image;
      };
      auto* p = static_cast<const Params*>(d->functionParams);
      bool file = cbid == CUPTI_DRIVER_TRACE_CBID_cuModuleLoad || cbid == CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile;
      if (!exit) {
        // A file is named by its path: the bytes are the driver's to read.
        auto [bytes, n] = file ? std::make_pair(p->image, strlen(static_cast<const char*>(p->image))) : image_bytes(p->image);
        t_build.emplace_back(tr::now_ns(), tr::fnv1a(bytes, n));
        break;
      }
      if (t_build.empty()) break;
      auto [start, hash] = t_build.back();
      t_build.pop_back();
      // Named by the file, else by the handle made (unique per load, like an OpenCL program).
      bool library = cbid == CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData;
      std::string prog = file ? static_cast<const char*>(p->image)
                              : (library ? "library:" : "module:") + (ok ? hexptr(reinterpret_cast<uint64_t>(*p->handle)) : std::string("failed"));
      st().builds.push_back({prog, hexptr(reinterpret_cast<uint64_t>(d->context)), hash, start, tr::now_ns(), c.tid, c.path,
                             int(*static_cast<CUresult*>(d->functionReturnValue))});
      break;
    }
    default:
      break;
  }
}

// Every device the program could use, read once the driver is up (at the first context), as
// device records. Called without the lock: it calls the driver.
void list_devices() {
  State& s = st();
  t_inside = true;
  int n = 0;
  std::vector<std::string> names;
  if (cuDeviceGetCount(&n) == CUDA_SUCCESS)
    for (int i = 0; i < n; ++i) {
      CUdevice dev;
      char name[256] = "?";
      if (cuDeviceGet(&dev, i) == CUDA_SUCCESS) cuDeviceGetName(name, sizeof name, dev);
      names.emplace_back(name);
    }
  t_inside = false;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.device_names.empty() || s.done) return;
  s.device_names = names;
  for (size_t i = 0; i < names.size(); ++i) {
    tr::JsonLine j("device");
    s.out.put(j.str("id", "cuda:" + std::to_string(i)).str("name", names[i]).boolean("used", s.used_devices.count(uint32_t(i)) > 0));
  }
}

// A device ran something, or has a context: its record again, now used (the reader keeps the
// last). Caller holds the lock.
void note_device(uint32_t dev) {
  State& s = st();
  if (!s.used_devices.insert(dev).second || s.done) return;
  tr::JsonLine j("device");
  s.out.put(j.str("id", "cuda:" + std::to_string(dev))
                .str("name", dev < s.device_names.size() ? s.device_names[dev] : std::string("?")).boolean("used", true));
}

std::string queue_id(uint32_t context, uint32_t stream) {
  return "ctx" + std::to_string(context) + "/stream" + std::to_string(stream);
}

// A stream that ran something: its queue record, written again when what is known of it changes
// (its device, whether it is its context's legacy default stream). Caller holds the lock.
void note_queue(uint32_t ctx, uint32_t stream) {
  State& s = st();
  auto dev = s.ctx_device.find(ctx);
  auto ns = s.null_stream.find(ctx);
  // Every CUDA stream runs its work in order; the legacy default stream also waits for, and
  // holds, every other blocking stream of its context.
  tr::JsonLine j("queue");
  j.str("id", queue_id(ctx, stream))
      .str("device", dev == s.ctx_device.end() ? std::string("?") : "cuda:" + std::to_string(dev->second))
      .boolean("in_order", true).boolean("profiling_added", false)
      .boolean("default_stream", ns != s.null_stream.end() && ns->second == stream);
  std::string& written = s.queues[{ctx, stream}];
  if (s.done) return;
  std::string line = j.text();
  if (line == written) return;
  written = line;
  s.out.put(line);
}

// Wakes the writer after a synchronisation (the program has waited for its work: records are
// ready), at most every 100 ms.
void nudge() {
  uint64_t now = tr::now_ns(), last = g_last_nudge.load(std::memory_order_relaxed);
  if (now - last >= 100000000ull && g_last_nudge.compare_exchange_strong(last, now)) sem_post(&g_wake);
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (t_inside) return;
  State& s = st();
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    if (cbid != CUPTI_CBID_RESOURCE_CONTEXT_CREATED) return;
    if (s.device_names.empty()) list_devices();
    uint32_t id = 0, dev = 0;
    CUcontext ctx = static_cast<const CUpti_ResourceData*>(data)->context;
    if (cuptiGetContextId(ctx, &id) == CUPTI_SUCCESS && cuptiGetDeviceId(ctx, &dev) == CUPTI_SUCCESS) {
      std::lock_guard<std::mutex> lock(s.mu);
      s.ctx_device[id] = dev;
      note_device(dev);
    }
    return;
  }
  const auto& traced = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? g_traced_runtime : g_traced_driver;
  if (cbid >= traced.size() || !traced[cbid]) return;
  auto* d = static_cast<const CUpti_CallbackData*>(data);
  bool exit = d->callbackSite == CUPTI_API_EXIT;
  if (!t_sampled) {
    t_sampled = true;
    tr::sampler().add_this_thread();
  }
  uint32_t idx = 0;
  bool unpaired = false;  // an exit whose entry came before tracing began (the call that ran cuInit)
  if (!exit) {
    if (t_depth++ == 0) {
      Call c;
      c.tid = tr::this_tid();
      c.path = s.paths.intern(tr::capture(0, kHidden));
      c.entry_ns = tr::now_ns();  // after the backtrace: the tracer's own time is not the call's
      std::lock_guard<std::mutex> lock(s.mu);
      t_call = uint32_t(s.calls.size());
      s.calls.push_back(std::move(c));
    }
    idx = t_call;
  } else if (t_depth == 0) {
    unpaired = true;
  } else {
    idx = t_call;
    --t_depth;
  }
  std::vector<uint64_t> args;
  bool have_args = !exit && domain == CUPTI_CB_DOMAIN_DRIVER_API && launch_args(cbid, d, &args);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.done) return;
    Call orphan;  // still seen at exit: an allocation made by the call that started CUDA
    Call& c = unpaired ? orphan : s.calls[idx];
    if (!exit) s.by_corr[d->correlationId] = idx;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
      on_runtime(cbid, d, c, exit);
    else
      on_driver(cbid, d, c, exit, have_args ? &args : nullptr);
    if (exit) on_alloc(domain, cbid, d, unpaired ? nullptr : &c);
    if (exit && !unpaired && t_depth == 0) c.open = false;
  }
  if (exit && domain == CUPTI_CB_DOMAIN_DRIVER_API && tr::one_of(cbid, tr::kSyncs)) nudge();
}

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8 << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

const char* memory_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return "managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return "device";
    default: return "unknown";
  }
}

void take(const CUpti_Activity* r) {
  State& s = st();
  int64_t o = s.clock_offset;
  switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
      s.kernels.push_back({demangle(k->name), k->deviceId, k->contextId, k->streamId, k->correlationId,
                           {k->gridX, k->gridY, k->gridZ}, {k->blockX, k->blockY, k->blockZ},
                           k->queued ? k->queued + o : 0, k->submitted ? k->submitted + o : 0, k->start + o, k->end + o});
      note_queue(k->contextId, k->streamId);
      note_device(k->deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
      const char* kind = "d2d";
      uint8_t host = m->dstKind;
      switch (m->copyKind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: kind = "h2d"; host = m->srcKind; break;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: kind = "d2h"; break;
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: kind = "h2h"; break;
        default: break;
      }
      s.copies.push_back({kind, memory_kind(host), !(m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC),
                          m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, m->deviceId, m->contextId, m->streamId,
                          m->correlationId, m->runtimeCorrelationId, m->bytes, m->start + o, m->end + o});
      note_queue(m->contextId, m->streamId);
      note_device(m->deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer to peer
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(r);
      s.copies.push_back({"d2d", "device", !(m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC), true, m->deviceId,
                          m->contextId, m->streamId, m->correlationId, 0, m->bytes, m->start + o, m->end + o});
      note_queue(m->contextId, m->streamId);
      note_device(m->srcDeviceId);
      note_device(m->dstDeviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
      s.memsets.push_back({m->deviceId, m->contextId, m->streamId, m->correlationId, m->bytes, m->start + o, m->end + o});
      note_queue(m->contextId, m->streamId);
      note_device(m->deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      auto* y = reinterpret_cast<const CUpti_ActivitySynchronization2*>(r);
      const char* kind = nullptr;
      switch (y->type) {
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: kind = "event_sync"; break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: kind = "stream_sync"; break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: kind = "device_sync"; break;
        default: break;  // cudaStreamWaitEvent orders the device; the host does not wait
      }
      if (kind)
        s.syncs.push_back({kind, y->contextId, y->streamId, y->correlationId, y->start + o, y->end + o,
                           y->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE});
      break;
    }
    case CUPTI_ACTIVITY_KIND_CONTEXT: {
      auto* c = reinterpret_cast<const CUpti_ActivityContext3*>(r);
      s.null_stream[c->contextId] = c->nullStreamId;
      s.ctx_device[c->contextId] = c->deviceId;
      note_device(c->deviceId);
      for (const auto& q : std::map<std::pair<uint32_t, uint32_t>, std::string>(s.queues))
        if (q.first.first == c->contextId) note_queue(q.first.first, q.first.second);
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI on_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  State& s = st();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    CUpti_Activity* r = nullptr;
    while (!s.done && cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) take(r);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) s.dropped += dropped;
  }
  free(buffer);
}

uint64_t CUPTIAPI monotonic_timestamp() { return tr::now_ns(); }

// The call behind a record's correlation ids; null if the tracer saw no call.
const Call* call_of(uint32_t corr, uint32_t other = 0) {
  State& s = st();
  auto it = s.by_corr.find(corr);
  if (it == s.by_corr.end() && other) it = s.by_corr.find(other);
  return it == s.by_corr.end() ? nullptr : &s.calls[it->second];
}

// The thread and call path of a record (none when the tracer saw no call).
void who(tr::JsonLine& j, int tid, const uint32_t* path) {
  j.num("tid", tid);
  if (path) j.unum("path_id", st().out.path_id(st().paths.at(*path)));
}
void who(tr::JsonLine& j, const Call* c) { who(j, c ? c->tid : 0, c ? &c->path : nullptr); }

// Writes the records of `v` whose call has returned (all of them when `final`) with `write`, and
// keeps the others for the next time. Caller holds the lock.
template <class T, class Corr, class Write>
void drain(std::vector<T>& v, bool final, Corr corr, Write write) {
  size_t kept = 0;
  for (T& r : v) {
    const Call* c = corr(r);
    if (!final && c && c->open)
      v[kept++] = std::move(r);
    else
      write(r, c);
  }
  v.erase(v.begin() + kept, v.end());
}

// Writes every record that is ready (FORMAT.md). Caller holds the lock.
void write_ready(bool final) {
  State& s = st();
  tr::TraceFile& out = s.out;
  uint64_t& id = s.next_id;
  auto none = [](const auto&) -> const Call* { return nullptr; };
  drain(s.new_allocs, final, none, [&](const Alloc& a, const Call*) {
    tr::JsonLine j("buffer");
    j.str("id", hexptr(a.base)).unum("bytes", a.bytes).str("memory", a.memory);
    if (a.pool) j.str("pool", hexptr(a.pool));
    who(j, a.tid, a.has_path ? &a.path : nullptr);
    out.put(j);
  });
  drain(s.kernels, final, [](const Kernel& k) { return call_of(k.corr); }, [&](const Kernel& k, const Call* c) {
    tr::JsonLine j("kernel");
    j.unum("id", ++id).str("name", k.name).str("queue", queue_id(k.context, k.stream))
        .nums("global", {k.grid[0] * k.block[0], k.grid[1] * k.block[1], k.grid[2] * k.block[2]})
        .nums("local", {k.block[0], k.block[1], k.block[2]}).nums("grid", {k.grid[0], k.grid[1], k.grid[2]})
        .unum("queued_ns", k.queued ? k.queued : (c ? c->entry_ns : k.start))
        .unum("submit_ns", k.submitted ? k.submitted : (c ? c->entry_ns : k.start))
        .unum("start_ns", k.start).unum("end_ns", k.end);
    if (c && c->buffers_known) {
      std::string b = "[";
      for (uint64_t a : c->buffers) b += std::string(b.size() > 1 ? "," : "") + "{\"id\":\"" + hexptr(a) + "\",\"access\":\"?\"}";
      j.raw("buffers", b + "]");
    } else {
      j.null("buffers");  // arguments not seen (a runtime launch with no driver launch inside)
    }
    who(j, c);
    out.put(j);
    ++s.counts[0];
  });
  drain(s.copies, final, [](const Copy& m) { return call_of(m.corr, m.runtime_corr); }, [&](const Copy& m, const Call* c) {
    tr::JsonLine j("copy");
    j.unum("id", ++id).str("kind", m.kind).unum("bytes", m.bytes).str("host_memory", m.host_memory)
        .str("buffer", c && c->buffer ? hexptr(c->buffer) : std::string("?"));
    if (c && c->has_hash)
      j.str("hash", tr::hex64(c->hash));
    else
      j.null("hash");
    j.str("queue", queue_id(m.context, m.stream)).unum("queued_ns", c ? c->entry_ns : m.start)
        .unum("start_ns", m.start).unum("end_ns", m.end).boolean("blocking", m.blocking).boolean("peer", m.peer);
    who(j, c);
    out.put(j);
    ++s.counts[1];
  });
  drain(s.memsets, final, [](const Memset& m) { return call_of(m.corr); }, [&](const Memset& m, const Call* c) {
    tr::JsonLine j("memset");
    j.unum("id", ++id).unum("bytes", m.bytes).str("queue", queue_id(m.context, m.stream))
        .unum("start_ns", m.start).unum("end_ns", m.end);
    who(j, c);
    out.put(j);
  });
  drain(s.builds, final, none, [&](const Build& b, const Call*) {
    tr::JsonLine j("build");
    j.str("kind", "build").str("program", b.program).str("source_hash", tr::hex64(b.hash)).str("options", "")
        .str("context", b.context).num("status", b.status).unum("start_ns", b.start).unum("end_ns", b.end);
    who(j, b.tid, &b.path);
    out.put(j);
  });
  drain(s.syncs, final, [](const Sync& y) { return call_of(y.corr); }, [&](const Sync& y, const Call* c) {
    tr::JsonLine j("sync");
    j.str("kind", y.kind).unum("start_ns", y.start).unum("end_ns", y.end);
    if (y.has_stream)
      j.str("queue", queue_id(y.context, y.stream));
    else
      j.null("queue");
    who(j, c);
    out.put(j);
    ++s.counts[2];
  });
  drain(s.host_syncs, final, none, [&](const HostSync& y, const Call*) {
    tr::JsonLine j("sync");
    j.str("kind", y.kind).unum("start_ns", y.start).unum("end_ns", y.end).null("queue");
    who(j, y.tid, &y.path);
    out.put(j);
    ++s.counts[2];
  });
}

// The rest of the records, the samples and the end record (naming `sig`, a fatal signal, if
// any); closes the file. Caller holds the lock.
void finish(int sig) {
  State& s = st();
  if (s.done) return;
  write_ready(true);
  s.done = true;
  tr::Sampler& sm = tr::sampler();
  s.out.samples(true);
  tr::JsonLine end("end");
  end.unum("end_ns", tr::now_ns());
  if (sig) end.num("signal", sig);
  end.unum("samples_dropped", sm.dropped()).unum("records_dropped", s.dropped).str("sampler", sm.interval_ns() ? sm.method() : "off");
  s.out.put(end);
  std::string file = s.out.name();
  if (!s.out.close()) return;
  fprintf(stderr, "archbench trace (cuda): %s%zu kernels, %zu copies, %zu syncs, %zu samples -> %s\n",
          sig ? "the program dies of a signal; kept " : "", s.counts[0], s.counts[1], s.counts[2], sm.count(), file.c_str());
}

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
  CHECK(cuptiSubscribe(&sub, on_callback, nullptr));
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

}  // namespace

/// Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names this library.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static bool once = false;
  if (once) return 1;
  once = true;
  if (!init()) fprintf(stderr, "archbench trace (cuda): the program runs untraced\n");
  return 1;
}
