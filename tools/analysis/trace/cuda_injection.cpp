// CUDA tracer: a CUPTI injection library for unmodified programs.
//   CUDA_INJECTION64_PATH=/path/libarchbench_trace_cuda.so ./program
// The driver loads it at cuInit and calls InitializeInjection. It records kernels, copies,
// memsets, synchronisations and module loads (CUDA's "builds") with the host call path that
// issued each, samples the program's threads, and writes tools/analysis/trace/FORMAT.md records to
// $ARCHBENCH_TRACE_DIR/<prog>-<pid>.jsonl at exit.
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
#include <unistd.h>

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

namespace {

namespace tr = archbench::trace;

// Frames of the tracer and of NVIDIA's libraries between the program and our callback.
const std::vector<std::string> kHidden = {"libarchbench_trace_cuda", "libcupti", "libcuda.so"};

// One traced API call (the outermost one of its thread), named by every correlation id inside.
struct Call {
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

struct State {
  std::mutex mu;  // guards everything below
  std::vector<Call> calls;
  std::unordered_map<uint32_t, uint32_t> by_corr;  // correlation id -> index in calls
  std::map<uint64_t, uint64_t> allocs;             // device allocation base -> bytes
  std::vector<Kernel> kernels;
  std::vector<Copy> copies;
  std::vector<Memset> memsets;
  std::vector<Sync> syncs;
  std::vector<HostSync> host_syncs;
  std::vector<Build> builds;
  std::map<uint32_t, uint32_t> null_stream;  // context -> its NULL (legacy default) stream id
  std::map<uint32_t, uint32_t> ctx_device;   // context -> device
  std::set<std::pair<uint32_t, uint32_t>> streams;  // (context, stream) that ran something
  std::set<uint32_t> used_devices;
  std::vector<std::string> device_names;  // by ordinal, read at the first context
  uint64_t dropped = 0;
  tr::PathTable paths;
  uint64_t start_ns = 0;
  int64_t clock_offset = 0;  // added to CUPTI times (0 when CUPTI uses our clock)
  std::string clock_detail;
  bool done = false;
};
State& st() {
  static State* s = new State;  // never destroyed: CUPTI threads may call in during exit
  return *s;
}

// Per-cbid: does this call get a path (launches, copies, memsets, syncs, module loads)?
std::vector<bool> g_traced_runtime, g_traced_driver;
bool g_read_args = true;  // ARCHBENCH_TRACE_NO_ARGS turns it off

thread_local int t_depth = 0;           // traced calls open on this thread
thread_local uint32_t t_call = 0;       // the outermost one
thread_local bool t_inside = false;     // the tracer itself is calling CUDA
thread_local bool t_sampled = false;    // this thread has its sampling timer
thread_local std::vector<std::pair<uint64_t, uint64_t>> t_build;  // open module loads: start, image hash

void warn(const char* what, CUptiResult r) {
  const char* s = "?";
  cuptiGetResultString(r, &s);
  fprintf(stderr, "archbench trace (cuda): %s failed: %s\n", what, s);
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

void record_alloc(uint64_t base, uint64_t bytes) {
  if (base && bytes) st().allocs[base] = bytes;
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
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020: {
      auto* p = static_cast<const cudaMalloc_v3020_params*>(d->functionParams);
      if (exit && *static_cast<cudaError_t*>(d->functionReturnValue) == cudaSuccess)
        record_alloc(reinterpret_cast<uint64_t>(*p->devPtr), p->size);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000: {
      auto* p = static_cast<const cudaMallocManaged_v6000_params*>(d->functionParams);
      if (exit && *static_cast<cudaError_t*>(d->functionReturnValue) == cudaSuccess)
        record_alloc(reinterpret_cast<uint64_t>(*p->devPtr), p->size);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
      if (exit) st().allocs.erase(reinterpret_cast<uint64_t>(static_cast<const cudaFree_v3020_params*>(d->functionParams)->devPtr));
      break;
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
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      auto* p = static_cast<const cuMemAlloc_v2_params*>(d->functionParams);
      if (ok) record_alloc(*p->dptr, p->bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      auto* p = static_cast<const cuMemAllocManaged_params*>(d->functionParams);
      if (ok) record_alloc(*p->dptr, p->bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      auto* p = static_cast<const cuMemAllocAsync_params*>(d->functionParams);
      if (ok) record_alloc(*p->dptr, p->bytesize);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      if (ok) st().allocs.erase(static_cast<const cuMemFree_v2_params*>(d->functionParams)->dptr);
      break;
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

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (t_inside) return;
  State& s = st();
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED && s.device_names.empty()) {
      // Every device the program could use, read once the driver is up.
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
      s.device_names = names;
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
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.done) return;
  Call orphan;  // still seen at exit: an allocation made by the call that started CUDA
  Call& c = unpaired ? orphan : s.calls[idx];
  if (!exit) s.by_corr[d->correlationId] = idx;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
    on_runtime(cbid, d, c, exit);
  else
    on_driver(cbid, d, c, exit, have_args ? &args : nullptr);
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
      s.streams.insert({k->contextId, k->streamId});
      s.used_devices.insert(k->deviceId);
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
      s.streams.insert({m->contextId, m->streamId});
      s.used_devices.insert(m->deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer to peer
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(r);
      s.copies.push_back({"d2d", "device", !(m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC), true, m->deviceId,
                          m->contextId, m->streamId, m->correlationId, 0, m->bytes, m->start + o, m->end + o});
      s.streams.insert({m->contextId, m->streamId});
      s.used_devices.insert(m->srcDeviceId);
      s.used_devices.insert(m->dstDeviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
      s.memsets.push_back({m->deviceId, m->contextId, m->streamId, m->correlationId, m->bytes, m->start + o, m->end + o});
      s.streams.insert({m->contextId, m->streamId});
      s.used_devices.insert(m->deviceId);
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
      s.used_devices.insert(c->deviceId);
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
    while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) take(r);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) s.dropped += dropped;
  }
  free(buffer);
}

uint64_t CUPTIAPI monotonic_timestamp() { return tr::now_ns(); }

std::string queue_id(uint32_t context, uint32_t stream) {
  return "ctx" + std::to_string(context) + "/stream" + std::to_string(stream);
}

// The call (tid, path) behind a record's correlation ids; null if the tracer saw no call.
const Call* call_of(uint32_t corr, uint32_t other = 0) {
  State& s = st();
  auto it = s.by_corr.find(corr);
  if (it == s.by_corr.end() && other) it = s.by_corr.find(other);
  return it == s.by_corr.end() ? nullptr : &s.calls[it->second];
}

void who(tr::JsonLine& j, const Call* c) {
  static const tr::Frames none;
  j.num("tid", c ? c->tid : 0).path("path", c ? st().paths.at(c->path) : none);
}

// Writes every record; runs once, at exit, or at a fatal signal (`sig`) whose disposition was
// the default: then without waiting for CUPTI (the crash may be inside it) and only if no thread
// holds the state's lock, with what CUPTI had delivered, and an end record naming the signal.
void write_trace(int sig) {
  State& s = st();
  if (!sig) {
    // Records of contexts already destroyed were delivered then; this flushes the rest.
    CUptiResult r = cuptiActivityFlushAll(1);
    if (r != CUPTI_SUCCESS) warn("cuptiActivityFlushAll at exit (records delivered before are kept)", r);
  }
  tr::sampler().stop();
  std::unique_lock<std::mutex> lock(s.mu, std::defer_lock);
  if (sig && !lock.try_lock()) return;
  if (!sig) lock.lock();
  if (s.done) return;
  s.done = true;
  std::string file;
  FILE* out = tr::open_trace_file(&file);
  if (!out) return;
  tr::Sampler& sm = tr::sampler();
  tr::JsonLine p("process");
  p.str("api", "cuda").num("pid", getpid()).str("command", tr::command_line()).unum("start_ns", s.start_ns)
      .unum("end_ns", tr::now_ns()).str("clock", "cupti").str("clock_detail", s.clock_detail)
      .unum("records_dropped", s.dropped);
  if (sm.interval_ns())
    p.unum("sample_rate_hz", 1000000000ull / sm.interval_ns()).str("sample_clock", "cpu+wall").str("sampler", sm.method()).unum("samples_dropped", sm.dropped());
  p.write(out);
  // Devices as the driver listed them at the first context; else those that ran something.
  if (s.device_names.empty())
    for (uint32_t d : s.used_devices) {
      if (s.device_names.size() <= d) s.device_names.resize(d + 1, "?");
    }
  for (size_t i = 0; i < s.device_names.size(); ++i)
    tr::JsonLine("device").str("id", "cuda:" + std::to_string(i)).str("name", s.device_names[i])
        .boolean("used", s.used_devices.count(uint32_t(i)) > 0).write(out);
  for (auto [ctx, stream] : s.streams) {
    auto dev = s.ctx_device.find(ctx);
    auto ns = s.null_stream.find(ctx);
    // Every CUDA stream runs its work in order; the legacy default stream also waits for, and
    // holds, every other blocking stream of its context.
    tr::JsonLine("queue").str("id", queue_id(ctx, stream))
        .str("device", dev == s.ctx_device.end() ? std::string("?") : "cuda:" + std::to_string(dev->second))
        .boolean("in_order", true).boolean("profiling_added", false)
        .boolean("default_stream", ns != s.null_stream.end() && ns->second == stream).write(out);
  }
  uint64_t id = 0;
  for (const Kernel& k : s.kernels) {
    const Call* c = call_of(k.corr);
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
    j.write(out);
  }
  for (const Copy& m : s.copies) {
    const Call* c = call_of(m.corr, m.runtime_corr);
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
    j.write(out);
  }
  for (const Memset& m : s.memsets) {
    tr::JsonLine j("memset");
    j.unum("id", ++id).unum("bytes", m.bytes).str("queue", queue_id(m.context, m.stream))
        .unum("start_ns", m.start).unum("end_ns", m.end);
    who(j, call_of(m.corr));
    j.write(out);
  }
  for (const Build& b : s.builds) {
    tr::JsonLine j("build");
    j.str("kind", "build").str("program", b.program).str("source_hash", tr::hex64(b.hash)).str("options", "")
        .str("context", b.context).num("status", b.status).unum("start_ns", b.start).unum("end_ns", b.end).num("tid", b.tid).path("path", s.paths.at(b.path));
    j.write(out);
  }
  for (const Sync& y : s.syncs) {
    tr::JsonLine j("sync");
    j.str("kind", y.kind).unum("start_ns", y.start).unum("end_ns", y.end);
    if (y.has_stream)
      j.str("queue", queue_id(y.context, y.stream));
    else
      j.null("queue");
    who(j, call_of(y.corr));
    j.write(out);
  }
  for (const HostSync& y : s.host_syncs) {
    tr::JsonLine j("sync");
    j.str("kind", y.kind).unum("start_ns", y.start).unum("end_ns", y.end).null("queue").num("tid", y.tid)
        .path("path", s.paths.at(y.path));
    j.write(out);
  }
  sm.write(out);
  if (sig) tr::JsonLine("end").unum("end_ns", tr::now_ns()).num("signal", sig).write(out);
  fclose(out);
  fprintf(stderr, "archbench trace (cuda): %zu kernels, %zu copies, %zu syncs, %zu samples -> %s\n", s.kernels.size(),
          s.copies.size(), s.syncs.size() + s.host_syncs.size(), sm.count(), file.c_str());
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

bool init() {
  State& s = st();
  s.start_ns = tr::now_ns();
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
  const char* no_args = getenv("ARCHBENCH_TRACE_NO_ARGS");
  g_read_args = !(no_args && *no_args && strcmp(no_args, "0") != 0);
  const char* us = getenv("ARCHBENCH_TRACE_SAMPLE_US");
  uint64_t interval = (us ? strtoull(us, nullptr, 10) : 1000) * 1000;
  std::string why;
  if (interval && !tr::sampler().start(interval, &why))
    fprintf(stderr, "archbench trace (cuda): no sampling (%s); GPU_IDLE_CAUSE will be empty\n", why.c_str());
  atexit([] { write_trace(0); });
  tr::install_crash_hook(write_trace);  // a program that crashes keeps what was recorded
  return true;
}

}  // namespace

/// Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names this library.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static bool once = false;
  if (once) return 1;
  once = true;
  if (!init()) fprintf(stderr, "archbench trace (cuda): CUPTI could not be set up; the program runs untraced\n");
  return 1;
}
