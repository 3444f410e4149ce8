// Shared by both tracers (tools/analysis/trace/opencl_interposer.cpp and tools/analysis/trace/cuda_injection.cpp):
// one place for the host clock, the host call path, the FNV-1a hash, the JSON Lines writer and
// the thread sampler. Records follow tools/analysis/trace/FORMAT.md.
#pragma once

#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace archbench::trace {

/// Host CLOCK_MONOTONIC in nanoseconds: the one clock of every record.
uint64_t now_ns();

/// Kernel thread id of the calling thread (what `tid` means in every record).
int this_tid();

/// 64-bit FNV-1a of `n` bytes (fast enough for copies; not cryptographic).
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 14695981039346656037ull);

/// 16 lower-case hex digits.
std::string hex64(uint64_t v);

/// Raw return addresses of a call stack, innermost first (cheap: symbolised only at exit).
using Frames = std::vector<void*>;

/// The calling thread's stack, innermost first, without its innermost `skip` frames and without
/// frames in modules whose file name contains one of `hide` (the tracer itself, the vendor's
/// runtime internals), so that the path starts at the program's own call.
Frames capture(int skip, const std::vector<std::string>& hide);

/// "function" demangled when the symbol is exported, else "module+0xOFFSET"; cached.
const std::string& symbolize(void* pc);

/// Interns call paths: the same stack is stored once and named by an index.
class PathTable {
 public:
  /// Index of `f` (added if new; two stacks are one when their 64-bit hashes are). Thread-safe.
  uint32_t intern(const Frames& f);
  /// Frames of index `i` (call once interning has stopped, at exit).
  const Frames& at(uint32_t i) const { return paths_[i]; }

 private:
  std::mutex mu_;
  std::vector<Frames> paths_;
  std::unordered_map<uint64_t, uint32_t> index_;  // hash of frames -> index
};

/// One JSON object on one line, built field by field; strings are escaped.
class JsonLine {
 public:
  /// Starts {"type":"<type>".
  explicit JsonLine(std::string_view type);
  JsonLine& num(std::string_view key, int64_t v);
  JsonLine& unum(std::string_view key, uint64_t v);
  JsonLine& str(std::string_view key, std::string_view v);
  JsonLine& boolean(std::string_view key, bool v);
  JsonLine& null(std::string_view key);
  JsonLine& nums(std::string_view key, const std::vector<int64_t>& v);
  /// `path` as an array of symbolised frames, innermost first.
  JsonLine& path(std::string_view key, const Frames& f);
  /// A field whose value is already JSON (an array of objects, say).
  JsonLine& raw(std::string_view key, std::string_view json);
  /// Closes the object and writes it, with its newline, to `out`.
  void write(FILE* out);

  /// `s` as a JSON string literal, quotes included.
  static std::string quote(std::string_view s);

 private:
  void key(std::string_view k);
  std::string s_;
};

/// `$ARCHBENCH_TRACE_DIR/<prog>-<pid>.jsonl` (default: the current directory), opened for
/// writing; null with the reason on stderr if it cannot be opened.
FILE* open_trace_file(std::string* path_out);

/// This process's command line, arguments joined by spaces.
std::string command_line();

/// Wall-clock sampler of the program's threads (GPU_IDLE_CAUSE): a per-thread POSIX timer on
/// CLOCK_MONOTONIC signals its thread every interval; the handler stores the thread's stack in a
/// preallocated ring (no allocation, no lock). Wall clock, not CPU time, so that a thread that
/// sleeps or blocks while the device idles is sampled too. Signals use SA_RESTART; a plain
/// nanosleep in the program can still return early with EINTR (as under any profiler's timer).
class Sampler {
 public:
  struct Sample {
    int tid;
    int n;
    uint64_t t_ns;
    void* pcs[30];
  };
  /// Installs the handler and samples every existing thread every `interval_ns`. False, with
  /// the reason in `why`, when the signal or a timer cannot be set up.
  bool start(uint64_t interval_ns, std::string* why);
  /// Adds the calling thread (threads created after start call this on their first API call).
  void add_this_thread();
  /// Stops every timer; samples taken stay readable.
  void stop();
  /// Writes every sample as a `sample` record.
  void write(FILE* out) const;
  /// Samples recorded (at most the ring's capacity) and how many did not fit.
  size_t count() const;
  uint64_t dropped() const { return dropped_.load(); }
  const Sample& at(size_t i) const { return ring_[i]; }
  uint64_t interval_ns() const { return interval_ns_; }

 private:
  void add_thread(int tid);
  static void on_signal(int, siginfo_t*, void*);
  Sample* ring_ = nullptr;
  size_t capacity_ = 0;
  std::atomic<size_t> next_{0};
  std::atomic<uint64_t> dropped_{0};
  uint64_t interval_ns_ = 0;
  std::mutex mu_;
  std::vector<std::pair<int, void*>> timers_;  // tid, timer_t
  std::atomic<bool> running_{false};
};

/// The process's one sampler (the signal handler needs a global).
Sampler& sampler();

}  // namespace archbench::trace
