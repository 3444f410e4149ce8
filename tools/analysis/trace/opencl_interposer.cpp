// libarchbench_trace_opencl.so: traces an unmodified OpenCL program when LD_PRELOADed.
//
// It defines the OpenCL entry points it needs, records what each call did (kernels, copies,
// maps, builds, synchronisations, with the host call path that issued them), forwards to the
// ICD loader's own symbol (dlsym RTLD_NEXT), and samples the program's threads without
// interrupting their system calls (Sampler in common.hpp). Raw records
// (tools/analysis/FORMAT.md) go to $ARCHBENCH_TRACE_DIR/<prog>-<pid>.jsonl as they complete,
// from the process's first OpenCL call; nothing is written for a process that never calls
// OpenCL (a forked child starts empty). The program's signal handlers, exit and _exit are kept
// as they are (see sigaction() below); a signal that kills flushes the records first (chained to
// the program's handler where it has one); an exec ends the file's part before it (ExecGuard) and
// the new image, the tracer preloaded again, writes its own for the same pid. Environment: ARCHBENCH_TRACE_DIR, ARCHBENCH_TRACE_SAMPLE_US
// (sampling interval per thread, default 1000; 0: none), ARCHBENCH_TRACE_MAX_RECORDS
// (default 1000000; the rest are counted as dropped). When the CUDA tracer is injected into the
// same process (CUDA_INJECTION64_PATH set), this one writes <prog>-<pid>-opencl.jsonl instead, so
// that neither file overwrites the other.
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include "tools/analysis/common/common.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using namespace archbench::trace;

std::string quote(std::string_view v) { return JsonLine::quote(v); }

// This library's loaded segments, so that its own frames can be dropped without a dladdr per
// frame (dladdr walks every loaded object: with PoCL's LLVM loaded it was a tenth of the cost).
std::vector<std::pair<uintptr_t, uintptr_t>> self_ranges() {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  Dl_info self{};
  if (!dladdr(reinterpret_cast<void*>(&self_ranges), &self)) return out;
  out.emplace_back(reinterpret_cast<uintptr_t>(self.dli_fbase), 0);  // the base the callback looks for
  dl_iterate_phdr([](dl_phdr_info* info, size_t, void* data) {
    auto* o = static_cast<std::vector<std::pair<uintptr_t, uintptr_t>>*>(data);
    if (o->empty() || info->dlpi_addr != o->front().first) return 0;
    o->clear();
    for (int i = 0; i < info->dlpi_phnum; ++i)
      if (info->dlpi_phdr[i].p_type == PT_LOAD) {
        uintptr_t lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
        o->emplace_back(lo, lo + info->dlpi_phdr[i].p_memsz);
      }
    return 1;
  }, &out);
  return out;
}

// True for an address inside this library.
bool in_self(void* pc) {
  // Never destroyed: write_output runs from atexit, after the destructors of statics made later.
  static const auto& self = *new std::vector<std::pair<uintptr_t, uintptr_t>>(self_ranges());
  for (auto& [lo, hi] : self)
    if (reinterpret_cast<uintptr_t>(pc) >= lo && reinterpret_cast<uintptr_t>(pc) < hi) return true;
  return false;
}

// The host call path of an API call, starting at the program's own frame.
Frames capture_here() {
  void* pcs[64];
  int n = backtrace(pcs, 64), i = 0;
  while (i < n && in_self(pcs[i])) ++i;
  return Frames(pcs + i, pcs + n);
}

// 64-bit hash of copied bytes for the round-trip detector: four independent multiply-xor lanes
// over 8-byte words (about 10x faster than byte-wise FNV-1a, which cost more than the copies
// themselves on PoCL), every byte counted; the tail and the lanes are folded with FNV-1a.
uint64_t bytes_hash(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  uint64_t lane[4] = {1, 2, 3, 4};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      memcpy(&w, p + i + 8 * k, 8);
      lane[k] = (lane[k] ^ w) * kMul;
      lane[k] ^= lane[k] >> 29;
    }
  uint64_t h = fnv1a(lane, sizeof lane, fnv1a(&n, sizeof n));
  return fnv1a(p + i, n - i, h);
}

// The next definition of an OpenCL symbol after this library: the ICD loader's.
// A program that loads libOpenCL privately (a Python extension module, dlopen RTLD_LOCAL) keeps
// it out of RTLD_NEXT's reach: then the loader's own copy, by name.
void* real_sym(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) {
    static void* icd = dlopen("libOpenCL.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (icd) p = dlsym(icd, name);
  }
  if (!p) {
    fprintf(stderr, "archbench-trace: %s not found after the interposer (is libOpenCL loaded?)\n", name);
    abort();
  }
  return p;
}
// The next definition of a libc function (exec, sigaction, _exit) after this library.
template <class Fn>
Fn next_fn(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// Looked up once per call site.
#define REAL(fn) ([] { static auto p = reinterpret_cast<decltype(&fn)>(real_sym(#fn)); return p; }())

// One finished record: JSON text without its closing brace, plus the device times still to be
// moved onto the host clock (dev != nullptr) and the path to symbolise.
struct Rec {
  std::string body;
  cl_device_id dev = nullptr;
  cl_ulong times[4] = {0, 0, 0, 0};  // queued, submit, start, end on the device clock
  uint64_t host_ns = 0;              // host clock just before the enqueue call
  int tid = 0;
  Frames path;
};

// A command enqueued whose event has not completed yet.
struct Pending {
  cl_event ev;
  cl_device_id dev;
  std::string body;
  uint64_t host_ns;          // host clock just before the enqueue call
  const void* read_ptr;      // non-blocking d2h: hash these bytes once the data has arrived
  size_t read_bytes;
  int tid;
  Frames path;
};

struct Device { std::string id, name; bool used = false; double offset = 0; bool timer = false; };
struct Queue { std::string id; cl_device_id dev; bool in_order; };
struct Buffer { std::string id; cl_mem_flags flags; };
struct Program { std::string id, hash, context; };
struct Mapping { const char* ptr; size_t bytes; cl_mem buf; };

// All state, under one mutex (the sampler's signal handler never touches it).
struct State {
  std::mutex mu;
  std::atomic<bool> active{false};  // some OpenCL call happened: the file is open
  bool exit_registered = false;
  uint64_t start_ns = now_ns();
  TraceFile out;            // the raw file, written as records complete
  std::vector<Pending> pending;
  size_t max_recs = 1000000;
  uint64_t dropped = 0;
  uint64_t next_id = 1;
  std::unordered_map<cl_device_id, Device> devices;
  std::vector<cl_device_id> device_order;
  std::unordered_map<cl_context, std::string> contexts;
  std::unordered_map<cl_command_queue, Queue> queues;
  std::unordered_map<cl_mem, Buffer> buffers;
  std::unordered_map<cl_program, Program> programs;
  std::unordered_map<cl_kernel, std::vector<std::pair<cl_mem, char>>> kernel_args;
  std::vector<Mapping> mappings;
  int counters[4] = {0, 0, 0, 0};  // ids for queues, buffers, programs, contexts
  uint64_t unfinished = 0;  // commands still not complete at exit (counted in records_dropped)
  int pid = getpid();       // the process whose file this is
};
State& st() { static State* s = new State; return *s; }  // never destroyed: used from atexit

std::string new_id(char prefix, int& counter) { return std::string(1, prefix) + std::to_string(++counter); }

void emit(Rec&& r);

void add_rec(Rec&& r) {
  State& s = st();
  if (!s.out.is_open() || s.out.written() >= s.max_recs) { ++s.dropped; return; }
  emit(std::move(r));
}

void add_plain(const std::string& body, const Frames* path) {
  Rec r;
  r.body = body;
  r.tid = this_tid();
  if (path) r.path = *path;
  add_rec(std::move(r));
}

// ---- device clock ----

// Measures the device clock's offset from CLOCK_MONOTONIC with clGetDeviceAndHostTimer where the
// runtime has it (a `clock` record); otherwise the reader aligns each command's QUEUED time with its enqueue.
void calibrate(cl_device_id dev, Device& d) {
  cl_ulong dt = 0, ht = 0;
  // Looked up softly: an ICD loader older than OpenCL 2.1 does not export it.
  static auto timer = reinterpret_cast<decltype(&clGetDeviceAndHostTimer)>(dlsym(RTLD_NEXT, "clGetDeviceAndHostTimer"));
  if (!timer) return;
  uint64_t t0 = now_ns();
  cl_int err = timer(dev, &dt, &ht);
  uint64_t t1 = now_ns();
  if (err == CL_SUCCESS && dt != 0) {
    d.timer = true;
    d.offset = (double(t0) + double(t1)) / 2 - double(dt);
  }
}

// The device's entry, numbered in the order devices are first seen. Caller holds the mutex.
Device& known_device(cl_device_id dev) {
  State& s = st();
  Device& d = s.devices[dev];
  if (d.id.empty()) {
    d.id = "d";
    d.id += std::to_string(s.device_order.size());
    s.device_order.push_back(dev);
  }
  return d;
}

// Every device of every platform, so that one never used can be named. Caller holds the mutex.
void enumerate_devices() {
  cl_uint np = 0;
  if (REAL(clGetPlatformIDs)(0, nullptr, &np) != CL_SUCCESS || np == 0) return;
  std::vector<cl_platform_id> plats(np);
  REAL(clGetPlatformIDs)(np, plats.data(), nullptr);
  for (cl_platform_id p : plats) {
    cl_uint nd = 0;
    if (REAL(clGetDeviceIDs)(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> devs(nd);
    REAL(clGetDeviceIDs)(p, CL_DEVICE_TYPE_ALL, nd, devs.data(), nullptr);
    for (cl_device_id d : devs) {
      char name[256] = {0};
      REAL(clGetDeviceInfo)(d, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
      known_device(d).name = name;
    }
  }
}

void write_output();
void start_sampling();
void open_output();
void crash_flush(int sig);
void crash_push();

// Called at the top of every interposed function: first-call setup and per-thread sampling.
void enter() {
  start_sampling();
  sampler().add_this_thread();
  State& s = st();
  if (s.active.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.active) return;
  s.active = true;  // start_ns stays the library's load (samples start there), or the fork
  enumerate_devices();
  open_output();
  if (!s.exit_registered) atexit(write_output);  // registered after the ICD's constructors: runs before their destructors
  s.exit_registered = true;
  install_crash_hook(crash_flush, crash_push);  // a program killed by a signal keeps what was recorded
}

void mark_used(cl_context ctx, const cl_device_id* devs, cl_uint n) {
  State& s = st();
  std::vector<cl_device_id> list(devs, devs + n);
  if (!devs) {
    size_t bytes = 0;
    REAL(clGetContextInfo)(ctx, CL_CONTEXT_DEVICES, 0, nullptr, &bytes);
    list.resize(bytes / sizeof(cl_device_id));
    REAL(clGetContextInfo)(ctx, CL_CONTEXT_DEVICES, bytes, list.data(), nullptr);
  }
  std::lock_guard<std::mutex> lock(s.mu);
  s.contexts[ctx] = new_id('c', s.counters[3]);
  for (cl_device_id d : list) {
    auto it = s.devices.find(d);
    if (it == s.devices.end() || it->second.used) continue;
    it->second.used = true;  // a device record again, now used (the reader keeps the last)
    JsonLine j("device");
    s.out.put(j.str("id", it->second.id).str("name", it->second.name).boolean("used", true));
  }
}

// Reads a completed command's profiling times into a record; releases our event reference.
void finish_pending(Pending& p) {
  Rec r;
  r.body = std::move(p.body);
  r.dev = p.dev;
  r.tid = p.tid;
  r.path = std::move(p.path);
  r.host_ns = p.host_ns;
  const cl_profiling_info which[4] = {CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
                                      CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END};
  for (int i = 0; i < 4; ++i)
    if (REAL(clGetEventProfilingInfo)(p.ev, which[i], sizeof(cl_ulong), &r.times[i], nullptr) != CL_SUCCESS)
      r.times[i] = 0;
  if (p.read_ptr) r.body += ",\"hash\":\"" + hex64(bytes_hash(p.read_ptr, p.read_bytes)) + "\"";
  REAL(clReleaseEvent)(p.ev);
  add_rec(std::move(r));
}

// Moves completed commands into records. Caller holds the mutex. Reads still to be hashed wait
// for a synchronisation (at_sync): only then is the host memory known to be the program's data
// (elsewhere the program may already have freed it).
void sweep(bool at_sync) {
  State& s = st();
  std::vector<Pending> keep;
  for (Pending& p : s.pending) {
    cl_int status = CL_QUEUED;
    if (p.read_ptr && !at_sync) { keep.push_back(std::move(p)); continue; }
    REAL(clGetEventInfo)(p.ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
    if (status == CL_COMPLETE) finish_pending(p);
    else if (status < 0) REAL(clReleaseEvent)(p.ev);  // the command failed: nothing to time
    else keep.push_back(std::move(p));
  }
  s.pending.swap(keep);
}

// At exit: flushes the queues still holding commands and gives them up to 5 s; a command that
// never completes (one behind a user event never set, say) is counted, not waited for forever.
// Reads never followed by a synchronisation get no hash: their memory may be gone by now.
void sweep_at_exit() {
  State& s = st();
  for (Pending& p : s.pending) {
    if (p.read_ptr) {
      p.read_ptr = nullptr;
      p.body += ",\"hash\":null";
    }
    cl_command_queue q = nullptr;
    if (REAL(clGetEventInfo)(p.ev, CL_EVENT_COMMAND_QUEUE, sizeof q, &q, nullptr) == CL_SUCCESS && q) REAL(clFlush)(q);
  }
  uint64_t deadline = now_ns() + 5000000000ull;
  while (sweep(false), !s.pending.empty() && now_ns() < deadline) usleep(1000);
  s.unfinished = s.pending.size();
  s.dropped += s.unfinished;
}

// Wraps an enqueue: supplies an event where the program asked for none (released after its
// times are read), or takes an extra reference on the program's own, so the program sees no change.
template <class Call>
cl_int tracked(cl_command_queue q, cl_event* user_ev, std::string body, const void* read_ptr, size_t read_bytes,
               Call call) {
  State& s = st();
  cl_event own = nullptr;
  cl_event* evp = user_ev ? user_ev : &own;
  Pending p{nullptr, nullptr, std::move(body), now_ns(), read_ptr, read_bytes, this_tid(), capture_here()};
  cl_int err = call(evp);
  if (err != CL_SUCCESS || !*evp) return err;
  if (user_ev) REAL(clRetainEvent)(*evp);
  p.ev = *evp;
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.queues.find(q);
  p.dev = it != s.queues.end() ? it->second.dev : nullptr;
  if (!p.dev) REAL(clGetCommandQueueInfo)(q, CL_QUEUE_DEVICE, sizeof p.dev, &p.dev, nullptr);
  s.pending.push_back(std::move(p));
  if (s.pending.size() > 4096) sweep(false);  // bounds the events held without blocking
  return err;
}

std::string queue_id(cl_command_queue q) {
  auto it = st().queues.find(q);
  return it != st().queues.end() ? it->second.id : "?";
}

std::string buffer_id(cl_mem m) {
  auto it = st().buffers.find(m);
  return it != st().buffers.end() ? it->second.id : "?";
}

// Pinned (mapped CL_MEM_ALLOC_HOST_PTR memory), mapped (another mapped buffer) or pageable.
const char* host_memory(const void* ptr) {
  State& s = st();
  auto* c = static_cast<const char*>(ptr);
  for (const Mapping& m : s.mappings)
    if (c >= m.ptr && c < m.ptr + m.bytes) {
      auto it = s.buffers.find(m.buf);
      bool pinned = it != s.buffers.end() && (it->second.flags & CL_MEM_ALLOC_HOST_PTR);
      return pinned ? "pinned" : "mapped";
    }
  return "pageable";
}

// A synchronisation record around a blocking call.
void add_sync(const char* kind, uint64_t t0, cl_command_queue q, const Frames& path) {
  uint64_t t1 = now_ns();
  std::lock_guard<std::mutex> lock(st().mu);
  add_plain(std::string("{\"type\":\"sync\",\"kind\":\"") + kind + "\",\"start_ns\":" + std::to_string(t0) +
                ",\"end_ns\":" + std::to_string(t1) + ",\"queue\":" + (q ? quote(queue_id(q)) : "null"),
            &path);
  sweep(true);  // what the program waited for is complete now: time it (and hash its reads) before it returns
}

std::string copy_head(const char* kind, size_t bytes, const void* host, cl_mem buf, cl_command_queue q, bool blocking) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  return std::string("{\"type\":\"copy\",\"id\":") + std::to_string(s.next_id++) + ",\"kind\":\"" + kind +
         "\",\"bytes\":" + std::to_string(bytes) + ",\"host_memory\":\"" + (host ? host_memory(host) : "pageable") +
         "\",\"buffer\":" + quote(buffer_id(buf)) + ",\"queue\":" + quote(queue_id(q)) +
         ",\"blocking\":" + (blocking ? "true" : "false");
}

// Read (d2h) or write (h2d) of contiguous bytes: hash the host data where it is known to be valid.
template <class Call>
cl_int transfer(bool read, cl_command_queue q, cl_mem buf, cl_bool blocking, size_t bytes, const void* host,
                cl_event* ev, Call call) {
  enter();
  Frames path = capture_here();
  std::string body = copy_head(read ? "d2h" : "h2d", bytes, host, buf, q, blocking);
  if (!read && host) body += ",\"hash\":\"" + hex64(bytes_hash(host, bytes)) + "\"";  // the bytes sent
  if (!host) body += ",\"hash\":null";
  uint64_t t0 = now_ns();
  // A non-blocking read is hashed when its event completes; a blocking one right after the call.
  cl_int err = tracked(q, ev, body, read && host ? host : nullptr, bytes, call);
  if (blocking) add_sync(read ? "blocking_read" : "blocking_write", t0, q, path);
  return err;
}

std::string json_sizes(cl_uint dim, const size_t* v) {
  if (!v) return "null";
  std::string o = "[";
  for (cl_uint i = 0; i < dim; ++i) {
    if (i) o += ',';
    o += std::to_string(v[i]);
  }
  return o + "]";
}

// Records one build-like call (build, compile, link) around `call`.
// `prog` is read after the call: clLinkProgram's program exists only then.
template <class Call>
cl_int build_call(const char* kind, const cl_program* prog, const char* options, Call call) {
  enter();
  Frames path = capture_here();
  uint64_t t0 = now_ns();
  cl_int err = call();
  uint64_t t1 = now_ns();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  Program& p = s.programs[*prog];
  add_plain(std::string("{\"type\":\"build\",\"kind\":\"") + kind + "\",\"program\":" + quote(p.id) +
                ",\"source_hash\":" + quote(p.hash) + ",\"options\":" + quote(options ? options : "") +
                ",\"context\":" + quote(p.context) + ",\"status\":" + std::to_string(err) +
                ",\"start_ns\":" + std::to_string(t0) + ",\"end_ns\":" + std::to_string(t1),
            &path);
  return err;
}

void new_program(cl_program prog, cl_context ctx, uint64_t hash) {
  if (!prog) return;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  s.programs[prog] = Program{new_id('p', s.counters[2]), hex64(hash), s.contexts.count(ctx) ? s.contexts[ctx] : "?"};
}

uint64_t g_interval_us = 1000;  // sampling interval per thread (ARCHBENCH_TRACE_SAMPLE_US); 0: none
std::atomic<bool> g_sampling{false};  // the sampler was started (or tried) in this process

// open_trace_file's name, or <prog>-<pid>-opencl.jsonl beside a CUDA tracer's file. Opened at
// the first OpenCL call, with the process and device records; the rest follows as it completes.
// Caller holds the mutex.
void open_output() {
  State& s = st();
  const char* cuda = getenv("CUDA_INJECTION64_PATH");
  std::string file;
  FILE* f = nullptr;
  if (!cuda || !*cuda) {
    f = open_trace_file(&file);
  } else {
    const char* dir = getenv("ARCHBENCH_TRACE_DIR");
    file = std::string(dir && *dir ? dir : ".") + "/" + program_invocation_short_name + "-" +
           std::to_string(getpid()) + "-opencl.jsonl";
    f = create_trace_file(&file);
  }
  // A sample taken inside a traced call keeps, of this library's frames, only the outermost one
  // of each run: the interposed entry point (clBuildProgram, say), not its helpers.
  s.out.adopt(f, file, in_self);
  if (!f) {
    fprintf(stderr, "archbench trace: the program runs on, untraced\n");
    return;
  }
  JsonLine p("process");
  s.out.put(p.str("api", "opencl").num("pid", getpid()).str("command", command_line())
      .unum("start_ns", s.start_ns).num("sample_rate_hz", g_interval_us ? int64_t(1000000 / g_interval_us) : 0)
      .str("sample_clock", "cpu+wall").str("sampler", g_interval_us ? sampler().method() : "off"));
  for (cl_device_id id : s.device_order) {
    Device& d = s.devices[id];
    JsonLine j("device");
    s.out.put(j.str("id", d.id).str("name", d.name).boolean("used", d.used));
  }
}

// One finished record, written now; the file is flushed every 256 records and every second.
// Device times stay on the device clock (device_ns) with the host time of the enqueue: the
// reader moves them onto the host clock (FORMAT.md). Caller holds the mutex.
void emit(Rec&& r) {
  State& s = st();
  std::string line = std::move(r.body);
  if (r.dev) {
    line += ",\"device\":" + quote(s.devices[r.dev].id) + ",\"enqueue_ns\":" + std::to_string(r.host_ns) +
            ",\"device_ns\":[";
    for (int i = 0; i < 4; ++i) {
      if (i) line += ',';
      line += std::to_string(r.times[i]);
    }
    line += "]";
  }
  line += ",\"tid\":" + std::to_string(r.tid);
  if (!r.path.empty()) line += ",\"path_id\":" + std::to_string(s.out.path_id(r.path));
  line += "}\n";
  s.out.put(line);
}

// From the sampler thread about once a second: a program busy elsewhere keeps its trace current.
void tick() {
  State& s = st();
  std::unique_lock<std::mutex> lock(s.mu, std::try_to_lock);  // never wait: write_output joins this thread
  if (lock.owns_lock() && s.active) s.out.flush();
}

// A fatal signal: what was written reaches the file, with an end record naming the signal.
// Only async-signal-safe work; nothing if the crashing thread was writing (the lock is held).
void crash_flush(int sig) {
  State& s = st();
  if (!s.mu.try_lock()) return;
  if (s.active) s.out.end_at_signal(sig, s.dropped + s.pending.size());  // commands not timed: dropped
  s.mu.unlock();
}

// A signal the program handles: what is written reaches the file before its handler runs (which
// may end the process). Async-signal-safe as crash_flush is.
void crash_push() {
  State& s = st();
  if (!s.mu.try_lock()) return;
  if (s.active) s.out.push();
  s.mu.unlock();
}

// Before an exec: the commands complete so far, the samples and an end record (naming the program
// exec'd) reach the file, which the exec closes (O_CLOEXEC); the new image, whose tracer loads
// again, writes its own file for the same pid. Held locked across the exec, so that no other
// thread writes what the exec would lose. Nothing in a vfork child (another pid, the parent's memory).
struct ExecGuard {
  std::unique_lock<std::mutex> lock;
  explicit ExecGuard(const char* file) {
    State& s = st();
    if (!s.active.load() || getpid() != s.pid) return;
    lock = std::unique_lock<std::mutex>(s.mu);
    if (!s.active || !s.out.is_open()) return;
    sweep(false);
    JsonLine end("end");
    s.out.put(end.unum("end_ns", now_ns()).str("exec", file ? file : "?").unum("samples_dropped", sampler().dropped())
        .unum("records_dropped", s.dropped + s.pending.size()).str("sampler", g_interval_us ? sampler().method() : "off"));
    s.out.flush();
  }
};

void write_output() {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.active) return;
  s.active = false;
  sampler().stop();
  sweep_at_exit();
  if (!s.out.is_open()) return;
  s.out.samples(true);
  JsonLine end("end");
  s.out.put(end.unum("end_ns", now_ns()).unum("samples_dropped", sampler().dropped())
      .unum("records_dropped", s.dropped).str("sampler", g_interval_us ? sampler().method() : "off"));
  s.out.close();
}

// Around fork: nothing buffered is copied into the child (it would be written twice), and the
// child starts with no records, no samples and no file: a child that never calls OpenCL writes
// nothing; one that does gets its own file (POSIX timers and the sampler thread are not inherited).
void after_fork_child() {
  State& s = st();
  s.active = false;
  s.pending.clear();
  s.dropped = 0;
  s.start_ns = now_ns();
  s.pid = getpid();
  g_sampling = false;
}

// Starts the sampler (once per process): every thread that exists now, then each thread at its first call.
void start_sampling() {
  if (g_sampling.exchange(true)) return;
  if (g_interval_us == 0) return;
  std::string why;
  if (!sampler().start(g_interval_us * 1000, &why, tick)) {
    fprintf(stderr, "archbench trace: no sampling (%s); GPU_IDLE_CAUSE will be empty\n", why.c_str());
    g_interval_us = 0;
  }
}

__attribute__((constructor)) void init() {
  st();
  if (const char* m = getenv("ARCHBENCH_TRACE_MAX_RECORDS")) st().max_recs = strtoull(m, nullptr, 10);
  if (const char* us = getenv("ARCHBENCH_TRACE_SAMPLE_US")) g_interval_us = strtoull(us, nullptr, 10);
  guard_fork(st().mu, st().out, after_fork_child);
  // Sample from the start only a program linked with OpenCL, before the runtime starts its own
  // threads: a preloaded shell or helper process that never calls OpenCL gets no timer signals.
  // A program that loads OpenCL later is sampled from its first call (enter()).
  if (dlsym(RTLD_DEFAULT, "clGetPlatformIDs")) start_sampling();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The interposed OpenCL entry points.
// ---------------------------------------------------------------------------------------------
extern "C" {

CL_API_ENTRY cl_context CL_API_CALL clCreateContext(const cl_context_properties* props, cl_uint n,
                                                    const cl_device_id* devs,
                                                    void(CL_CALLBACK* notify)(const char*, const void*, size_t, void*),
                                                    void* user, cl_int* err) {
  enter();
  cl_context c = REAL(clCreateContext)(props, n, devs, notify, user, err);
  if (c) mark_used(c, devs, n);
  return c;
}

CL_API_ENTRY cl_context CL_API_CALL clCreateContextFromType(const cl_context_properties* props, cl_device_type type,
                                                            void(CL_CALLBACK* notify)(const char*, const void*, size_t, void*),
                                                            void* user, cl_int* err) {
  enter();
  cl_context c = REAL(clCreateContextFromType)(props, type, notify, user, err);
  if (c) mark_used(c, nullptr, 0);
  return c;
}

// Adds CL_QUEUE_PROFILING_ENABLE (the only way to read command times) and notes the queue.
static cl_command_queue note_queue(cl_command_queue q, cl_device_id dev, cl_command_queue_properties props) {
  if (!q) return q;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  Queue& qu = s.queues[q];
  qu = Queue{new_id('q', s.counters[0]), dev, !(props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)};
  Device& d = known_device(dev);
  if (!d.timer) {
    calibrate(dev, d);
    if (d.timer) {  // the device clock's measured offset, before any record that needs it
      JsonLine j("clock");
      s.out.put(j.str("device", d.id).num("offset_ns", int64_t(d.offset)).str("method", "device+host timer"));
    }
  }
  add_plain("{\"type\":\"queue\",\"id\":" + quote(qu.id) + ",\"device\":" + quote(d.id) +
                ",\"in_order\":" + (qu.in_order ? "true" : "false") + ",\"profiling_added\":" +
                ((props & CL_QUEUE_PROFILING_ENABLE) ? "false" : "true") + ",\"clock\":\"" +
                (d.timer ? "device+host timer" : "aligned at enqueue") + "\"",
            nullptr);
  return q;
}

CL_API_ENTRY cl_command_queue CL_API_CALL clCreateCommandQueue(cl_context ctx, cl_device_id dev,
                                                               cl_command_queue_properties props, cl_int* err) {
  enter();
  return note_queue(REAL(clCreateCommandQueue)(ctx, dev, props | CL_QUEUE_PROFILING_ENABLE, err), dev, props);
}

CL_API_ENTRY cl_command_queue CL_API_CALL clCreateCommandQueueWithProperties(cl_context ctx, cl_device_id dev,
                                                                             const cl_queue_properties* props,
                                                                             cl_int* err) {
  enter();
  std::vector<cl_queue_properties> list;
  cl_command_queue_properties asked = 0;
  bool found = false;
  for (const cl_queue_properties* p = props; p && p[0]; p += 2) {
    list.push_back(p[0]);
    list.push_back(p[1]);
    if (p[0] == CL_QUEUE_PROPERTIES) { asked = p[1]; list.back() |= CL_QUEUE_PROFILING_ENABLE; found = true; }
  }
  if (!found) { list.push_back(CL_QUEUE_PROPERTIES); list.push_back(CL_QUEUE_PROFILING_ENABLE); }
  list.push_back(0);
  return note_queue(REAL(clCreateCommandQueueWithProperties)(ctx, dev, list.data(), err), dev, asked);
}

// Notes a buffer (its id, whether its host side is pinned) for kernel arguments and copies.
static void note_buffer(cl_mem m, cl_mem_flags flags, size_t bytes, cl_mem parent, size_t offset) {
  if (!m) return;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  Buffer& b = s.buffers[m];
  b = Buffer{new_id('b', s.counters[1]), flags};
  const char* mem = (flags & CL_MEM_ALLOC_HOST_PTR) ? "pinned" : (flags & CL_MEM_USE_HOST_PTR) ? "mapped" : "pageable";
  add_plain("{\"type\":\"buffer\",\"id\":" + quote(b.id) + ",\"bytes\":" + std::to_string(bytes) +
                ",\"host_memory\":\"" + mem + "\",\"parent\":" + (parent ? quote(buffer_id(parent)) : "null") +
                ",\"offset\":" + std::to_string(offset),
            nullptr);
}

CL_API_ENTRY cl_mem CL_API_CALL clCreateBuffer(cl_context ctx, cl_mem_flags flags, size_t size, void* host,
                                               cl_int* err) {
  enter();
  cl_mem m = REAL(clCreateBuffer)(ctx, flags, size, host, err);
  note_buffer(m, flags, size, nullptr, 0);
  return m;
}

CL_API_ENTRY cl_mem CL_API_CALL clCreateSubBuffer(cl_mem parent, cl_mem_flags flags, cl_buffer_create_type type,
                                                  const void* info, cl_int* err) {
  enter();
  cl_mem m = REAL(clCreateSubBuffer)(parent, flags, type, info, err);
  auto* region = static_cast<const cl_buffer_region*>(info);
  if (m && region) note_buffer(m, flags, region->size, parent, region->origin);
  return m;
}

CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithSource(cl_context ctx, cl_uint count, const char** strings,
                                                              const size_t* lengths, cl_int* err) {
  enter();
  cl_program p = REAL(clCreateProgramWithSource)(ctx, count, strings, lengths, err);
  uint64_t h = fnv1a(nullptr, 0);
  for (cl_uint i = 0; strings && i < count; ++i)
    h = fnv1a(strings[i], lengths && lengths[i] ? lengths[i] : strlen(strings[i]), h);
  new_program(p, ctx, h);
  return p;
}

CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithBinary(cl_context ctx, cl_uint n, const cl_device_id* devs,
                                                              const size_t* lengths, const unsigned char** bins,
                                                              cl_int* status, cl_int* err) {
  enter();
  cl_program p = REAL(clCreateProgramWithBinary)(ctx, n, devs, lengths, bins, status, err);
  uint64_t h = fnv1a(nullptr, 0);
  for (cl_uint i = 0; bins && lengths && i < n; ++i) h = fnv1a(bins[i], lengths[i], h);
  new_program(p, ctx, h);
  return p;
}

CL_API_ENTRY cl_int CL_API_CALL clBuildProgram(cl_program prog, cl_uint n, const cl_device_id* devs,
                                               const char* options,
                                               void(CL_CALLBACK* notify)(cl_program, void*), void* user) {
  return build_call("build", &prog, options, [&] { return REAL(clBuildProgram)(prog, n, devs, options, notify, user); });
}

CL_API_ENTRY cl_int CL_API_CALL clCompileProgram(cl_program prog, cl_uint n, const cl_device_id* devs,
                                                 const char* options, cl_uint nh, const cl_program* headers,
                                                 const char** names, void(CL_CALLBACK* notify)(cl_program, void*),
                                                 void* user) {
  return build_call("compile", &prog, options,
                    [&] { return REAL(clCompileProgram)(prog, n, devs, options, nh, headers, names, notify, user); });
}

CL_API_ENTRY cl_program CL_API_CALL clLinkProgram(cl_context ctx, cl_uint n, const cl_device_id* devs,
                                                  const char* options, cl_uint np, const cl_program* progs,
                                                  void(CL_CALLBACK* notify)(cl_program, void*), void* user,
                                                  cl_int* err) {
  enter();
  // The linked program's hash is that of its inputs, so linking the same objects twice shows.
  uint64_t h = fnv1a(nullptr, 0);
  {
    std::lock_guard<std::mutex> lock(st().mu);
    for (cl_uint i = 0; i < np; ++i) h = fnv1a(st().programs[progs[i]].hash.data(), 16, h);
  }
  cl_program out = nullptr;
  cl_int e = CL_SUCCESS;
  build_call("link", &out, options, [&] {
    out = REAL(clLinkProgram)(ctx, n, devs, options, np, progs, notify, user, &e);
    new_program(out, ctx, h);
    return e;
  });
  if (err) *err = e;
  return out;
}

// A new kernel object starts with no arguments (its address may be a released kernel's).
CL_API_ENTRY cl_kernel CL_API_CALL clCreateKernel(cl_program prog, const char* name, cl_int* err) {
  enter();
  cl_kernel k = REAL(clCreateKernel)(prog, name, err);
  std::lock_guard<std::mutex> lock(st().mu);
  st().kernel_args.erase(k);
  return k;
}

CL_API_ENTRY cl_int CL_API_CALL clSetKernelArg(cl_kernel k, cl_uint index, size_t size, const void* value) {
  enter();
  cl_int err = REAL(clSetKernelArg)(k, index, size, value);
  if (err != CL_SUCCESS) return err;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  auto& args = s.kernel_args[k];
  if (args.size() <= index) args.resize(index + 1, {nullptr, '?'});
  cl_mem m = value && size == sizeof(cl_mem) ? *static_cast<const cl_mem*>(value) : nullptr;
  auto it = m ? s.buffers.find(m) : s.buffers.end();
  if (it == s.buffers.end()) { args[index] = {nullptr, '?'}; return err; }
  // const-qualified argument: read only; else the buffer's flags say what the kernel may do.
  cl_kernel_arg_type_qualifier q = 0;
  char access = 'b';  // rw
  if (REAL(clGetKernelArgInfo)(k, index, CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof q, &q, nullptr) == CL_SUCCESS &&
      (q & CL_KERNEL_ARG_TYPE_CONST))
    access = 'r';
  else if (it->second.flags & CL_MEM_READ_ONLY) access = 'r';
  else if (it->second.flags & CL_MEM_WRITE_ONLY) access = 'w';
  args[index] = {m, access};
  return err;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dim,
                                                       const size_t* offset, const size_t* global,
                                                       const size_t* local, cl_uint nwait, const cl_event* wait,
                                                       cl_event* ev) {
  enter();
  char name[256] = {0};
  REAL(clGetKernelInfo)(k, CL_KERNEL_FUNCTION_NAME, sizeof name - 1, name, nullptr);
  std::string body;
  {
    State& s = st();
    std::lock_guard<std::mutex> lock(s.mu);
    body = "{\"type\":\"kernel\",\"id\":" + std::to_string(s.next_id++) + ",\"name\":" + quote(name) +
           ",\"queue\":" + quote(queue_id(q)) + ",\"global\":" + json_sizes(dim, global) +
           ",\"local\":" + json_sizes(dim, local) + ",\"buffers\":[";
    bool first = true;
    for (auto& [m, a] : s.kernel_args[k]) {
      if (!m) continue;
      body += std::string(first ? "" : ",") + "{\"id\":" + quote(buffer_id(m)) + ",\"access\":\"" +
              (a == 'r' ? "r" : a == 'w' ? "w" : "rw") + "\"}";
      first = false;
    }
    body += "]";
  }
  return tracked(q, ev, body, nullptr, 0,
                 [&](cl_event* e) { return REAL(clEnqueueNDRangeKernel)(q, k, dim, offset, global, local, nwait, wait, e); });
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueReadBuffer(cl_command_queue q, cl_mem buf, cl_bool blocking, size_t offset,
                                                    size_t size, void* ptr, cl_uint nwait, const cl_event* wait,
                                                    cl_event* ev) {
  return transfer(true, q, buf, blocking, size, ptr, ev, [&](cl_event* e) {
    return REAL(clEnqueueReadBuffer)(q, buf, blocking, offset, size, ptr, nwait, wait, e);
  });
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteBuffer(cl_command_queue q, cl_mem buf, cl_bool blocking, size_t offset,
                                                     size_t size, const void* ptr, cl_uint nwait,
                                                     const cl_event* wait, cl_event* ev) {
  return transfer(false, q, buf, blocking, size, ptr, ev, [&](cl_event* e) {
    return REAL(clEnqueueWriteBuffer)(q, buf, blocking, offset, size, ptr, nwait, wait, e);
  });
}

// Rect copies: bytes of the region; not hashed (the host side is not one contiguous range).
CL_API_ENTRY cl_int CL_API_CALL clEnqueueReadBufferRect(cl_command_queue q, cl_mem buf, cl_bool blocking,
                                                        const size_t* bo, const size_t* ho, const size_t* region,
                                                        size_t brp, size_t bsp, size_t hrp, size_t hsp, void* ptr,
                                                        cl_uint nwait, const cl_event* wait, cl_event* ev) {
  return transfer(true, q, buf, blocking, region[0] * region[1] * region[2], nullptr, ev, [&](cl_event* e) {
    return REAL(clEnqueueReadBufferRect)(q, buf, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, nwait, wait, e);
  });
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteBufferRect(cl_command_queue q, cl_mem buf, cl_bool blocking,
                                                         const size_t* bo, const size_t* ho, const size_t* region,
                                                         size_t brp, size_t bsp, size_t hrp, size_t hsp,
                                                         const void* ptr, cl_uint nwait, const cl_event* wait,
                                                         cl_event* ev) {
  return transfer(false, q, buf, blocking, region[0] * region[1] * region[2], nullptr, ev, [&](cl_event* e) {
    return REAL(clEnqueueWriteBufferRect)(q, buf, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, nwait, wait, e);
  });
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueCopyBuffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t so, size_t dso,
                                                    size_t size, cl_uint nwait, const cl_event* wait, cl_event* ev) {
  enter();
  std::string body = copy_head("d2d", size, nullptr, dst, q, false) + ",\"hash\":null";
  return tracked(q, ev, body, nullptr, 0,
                 [&](cl_event* e) { return REAL(clEnqueueCopyBuffer)(q, src, dst, so, dso, size, nwait, wait, e); });
}

// Map and unmap: timed like copies; a mapped range is remembered so copies from it count as pinned.
static std::string map_head(const char* kind, size_t bytes, cl_mem buf, cl_command_queue q) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  return std::string("{\"type\":\"map\",\"id\":") + std::to_string(s.next_id++) + ",\"kind\":\"" + kind +
         "\",\"bytes\":" + std::to_string(bytes) + ",\"buffer\":" + quote(buffer_id(buf)) + ",\"queue\":" +
         quote(queue_id(q));
}

CL_API_ENTRY void* CL_API_CALL clEnqueueMapBuffer(cl_command_queue q, cl_mem buf, cl_bool blocking, cl_map_flags flags,
                                                  size_t offset, size_t size, cl_uint nwait, const cl_event* wait,
                                                  cl_event* ev, cl_int* err) {
  enter();
  Frames path = capture_here();
  uint64_t t0 = now_ns();
  void* out = nullptr;
  cl_int e = tracked(q, ev, map_head("map", size, buf, q), nullptr, 0, [&](cl_event* evp) {
    cl_int r = CL_SUCCESS;
    out = REAL(clEnqueueMapBuffer)(q, buf, blocking, flags, offset, size, nwait, wait, evp, &r);
    return r;
  });
  if (err) *err = e;
  if (out) {
    std::lock_guard<std::mutex> lock(st().mu);
    st().mappings.push_back(Mapping{static_cast<const char*>(out), size, buf});
  }
  if (blocking) add_sync("blocking_map", t0, q, path);
  return out;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueUnmapMemObject(cl_command_queue q, cl_mem mem, void* ptr, cl_uint nwait,
                                                        const cl_event* wait, cl_event* ev) {
  enter();
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(st().mu);
    auto& maps = st().mappings;
    for (size_t i = 0; i < maps.size(); ++i)
      if (maps[i].ptr == ptr && maps[i].buf == mem) { bytes = maps[i].bytes; maps.erase(maps.begin() + long(i)); break; }
  }
  return tracked(q, ev, map_head("unmap", bytes, mem, q), nullptr, 0,
                 [&](cl_event* e) { return REAL(clEnqueueUnmapMemObject)(q, mem, ptr, nwait, wait, e); });
}

CL_API_ENTRY cl_int CL_API_CALL clFinish(cl_command_queue q) {
  enter();
  Frames path = capture_here();
  uint64_t t0 = now_ns();
  cl_int err = REAL(clFinish)(q);
  add_sync("finish", t0, q, path);
  return err;
}

CL_API_ENTRY cl_int CL_API_CALL clWaitForEvents(cl_uint n, const cl_event* events) {
  enter();
  Frames path = capture_here();
  uint64_t t0 = now_ns();
  cl_int err = REAL(clWaitForEvents)(n, events);
  add_sync("wait", t0, nullptr, path);
  return err;
}

// Releasing a queue or context: time what has completed so far, so fewer events are held.
CL_API_ENTRY cl_int CL_API_CALL clReleaseCommandQueue(cl_command_queue q) {
  enter();
  {
    std::lock_guard<std::mutex> lock(st().mu);
    sweep(false);
  }
  return REAL(clReleaseCommandQueue)(q);
}

// ---- the program's signal handling and exits, kept as they would be untraced ----

// The program sets a signal's disposition: a SIGPROF handler of its own makes the sampler step
// aside (its running samples stop; the program gets every SIGPROF); a handler for a signal the
// crash hook holds replaces the hook. A program asking for the disposition of a hooked signal
// sees what it would see untraced: the default, or the handler the hook chains to.
int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  static auto real = reinterpret_cast<int (*)(int, const struct sigaction*, struct sigaction*)>(dlsym(RTLD_NEXT, "sigaction"));
  bool hooked = crash_hooked(sig);
  if (act) {
    bool info = act->sa_flags & SA_SIGINFO;
    if (sig == SIGPROF && !(info && Sampler::is_own_handler(act->sa_sigaction)) && act->sa_handler != SIG_DFL &&
        act->sa_handler != SIG_IGN)
      sampler().step_aside("the program installs its own SIGPROF handler");
    if (hooked && !is_crash_hook(*act)) crash_unhook(sig);
  }
  int r = real(sig, act, old);
  if (r == 0 && old && hooked) *old = crash_previous(sig);
  return r;
}

sighandler_t signal(int sig, sighandler_t handler) {
  struct sigaction sa {}, old {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, sig);
  sa.sa_flags = SA_RESTART;  // glibc's signal(): BSD semantics
  if (sigaction(sig, &sa, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

// The exec family (glibc's execv, execvp and execl call its internal execve, past this library):
// each ends the trace's pre-exec part (ExecGuard), then does what it would have.
int execve(const char* file, char* const argv[], char* const envp[]) {
  static auto real = next_fn<int (*)(const char*, char* const[], char* const[])>("execve");
  ExecGuard g(file);
  return real(file, argv, envp);
}

int execv(const char* file, char* const argv[]) {
  static auto real = next_fn<int (*)(const char*, char* const[])>("execv");
  ExecGuard g(file);
  return real(file, argv);
}

int execvp(const char* file, char* const argv[]) {
  static auto real = next_fn<int (*)(const char*, char* const[])>("execvp");
  ExecGuard g(file);
  return real(file, argv);
}

int execvpe(const char* file, char* const argv[], char* const envp[]) {
  static auto real = next_fn<int (*)(const char*, char* const[], char* const[])>("execvpe");
  ExecGuard g(file);
  return real(file, argv, envp);
}

int fexecve(int fd, char* const argv[], char* const envp[]) {
  static auto real = next_fn<int (*)(int, char* const[], char* const[])>("fexecve");
  ExecGuard g("(fexecve)");
  return real(fd, argv, envp);
}

int execveat(int dirfd, const char* file, char* const argv[], char* const envp[], int flags) {
  static auto real = next_fn<int (*)(int, const char*, char* const[], char* const[], int)>("execveat");
  ExecGuard g(file);
  return real(dirfd, file, argv, envp, flags);
}

// execl, execlp, execle: their arguments as an array, then the array's call (as glibc does).
static std::vector<char*> arg_list(const char* arg0, va_list ap) {
  std::vector<char*> argv{const_cast<char*>(arg0)};
  while (argv.back()) argv.push_back(va_arg(ap, char*));
  return argv;
}

int execl(const char* file, const char* arg0, ...) {
  va_list ap;
  va_start(ap, arg0);
  std::vector<char*> argv = arg_list(arg0, ap);
  va_end(ap);
  return execv(file, argv.data());
}

int execlp(const char* file, const char* arg0, ...) {
  va_list ap;
  va_start(ap, arg0);
  std::vector<char*> argv = arg_list(arg0, ap);
  va_end(ap);
  return execvp(file, argv.data());
}

int execle(const char* file, const char* arg0, ...) {
  va_list ap;
  va_start(ap, arg0);
  std::vector<char*> argv = arg_list(arg0, ap);
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return execve(file, argv.data(), envp);
}

// _exit skips atexit: the trace is finished here instead (a forked child that never called
// OpenCL has nothing to finish).
void _exit(int status) {
  static auto real = reinterpret_cast<void (*)(int)>(dlsym(RTLD_NEXT, "_exit"));
  write_output();
  real(status);
  __builtin_unreachable();
}

void _Exit(int status) { _exit(status); }

}  // extern "C"
