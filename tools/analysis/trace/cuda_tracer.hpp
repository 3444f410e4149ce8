// What the parts of the CUDA tracer share: cuda_injection.cpp (start, the writer thread, exit,
// fatal signals, fork), cuda_calls.cpp (the Callback API side: calls, their paths, allocations,
// kernel arguments, module loads) and cuda_records.cpp (the Activity API side: device records,
// joined to their calls and written). Records: tools/analysis/FORMAT.md.
#pragma once
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
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

#include "tools/analysis/common/common.hpp"
#include "tools/analysis/common/cupti.hpp"

namespace archbench::trace_cuda {

namespace tr = archbench::trace;

// Frames of the tracer and of NVIDIA's libraries between the program and our callback.
inline const std::vector<std::string> kHidden = {"libarchbench_trace_cuda", "libcupti", "libcuda.so"};

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
inline State& st() {
  static State* s = new State;  // never destroyed: CUPTI threads may call in during exit
  return *s;
}

// Per-cbid: does this call get a path (launches, copies, memsets, syncs, module loads)?
inline std::vector<bool> g_traced_runtime, g_traced_driver;
inline bool g_read_args = true;  // ARCHBENCH_TRACE_NO_ARGS turns it off

// The writer thread and what wakes it.
inline sem_t g_wake;                            // posted: write now (a synchronisation, a fatal signal, the exit)
inline std::atomic<int> g_crash{0};             // a fatal signal the writer is asked to record
inline std::atomic<bool> g_crash_done{false};   // ... and it has
inline std::atomic<bool> g_stop{false};         // the exit: the writer ends
inline std::atomic<uint64_t> g_last_nudge{0};   // when a synchronisation last woke the writer
inline std::atomic<int> g_writer_tid{0};        // 0: no writer thread (none started, or a forked child)
inline pthread_t g_writer;
inline pid_t g_pid = 0;                         // the traced process (a forked child writes nothing)

inline thread_local int t_depth = 0;           // traced calls open on this thread
inline thread_local uint32_t t_call = 0;       // the outermost one
inline thread_local bool t_inside = false;     // the tracer itself is calling CUDA
inline thread_local bool t_sampled = false;    // this thread has its sampling timer
inline thread_local std::vector<std::pair<uint64_t, uint64_t>> t_build;  // open module loads: start, image hash

inline void warn(const char* what, CUptiResult r) {
  fprintf(stderr, "archbench trace (cuda): %s\n", tr::cupti_failure(std::string(what) + " failed", r).c_str());
}

inline std::string hexptr(uint64_t p) {
  char b[24];
  snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(p));
  return b;
}

// ---- The Callback API side (cuda_calls.cpp) ---------------------------------------------------

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);

// ---- The Activity API side (cuda_records.cpp) -------------------------------------------------

// CUPTI's activity buffers: 8 MiB each (tools/analysis/common/cupti.hpp).
inline constexpr auto on_buffer_requested = tr::buffer_requested<8 << 20>;
void CUPTIAPI on_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid);
// CUPTI's timestamps: the host's CLOCK_MONOTONIC.
uint64_t CUPTIAPI monotonic_timestamp();
// Every device the program could use, read once the driver is up (at the first context), as
// device records. Called without the lock: it calls the driver.
void list_devices();
// A device ran something, or has a context: its record again, now used. Caller holds the lock.
void note_device(uint32_t dev);
// Writes every record that is ready (FORMAT.md). Caller holds the lock.
void write_ready(bool final);
// The rest of the records, the samples and the end record (naming `sig`, a fatal signal, if
// any); closes the file. Caller holds the lock.
void finish(int sig);

}  // namespace archbench::trace_cuda
