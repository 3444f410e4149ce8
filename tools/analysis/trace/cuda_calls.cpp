// The CUDA tracer's Callback API side: each traced call's thread, path and host times, the
// host bytes of synchronous copies, the device buffers a kernel is given, allocations and module
// loads (tools/analysis/trace/cuda_injection.cpp says how the tracer works).
#include "tools/analysis/trace/cuda_tracer.hpp"

namespace archbench::trace_cuda {

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
  if (cbid != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel && cbid != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz &&
      !tr::is_launch_ex(cbid))
    return false;
  const tr::LaunchArgs a = tr::launch_args(d, cbid);
  const CUfunction f = a.f;
  void** const params = a.params;
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

}  // namespace archbench::trace_cuda
