// The host side of the layer under every analysis library (the OpenCL tracer, and with cupti.hpp the
// CUDA tracer, TopDown, PC sampling and PM sampling): one place for the host clock, the host call
// path, the FNV-1a hash, the JSON Lines record writer (TraceFile: every library's), the thread
// sampler, and exit, fork and fatal-signal handling. Records follow tools/analysis/FORMAT.md.
#pragma once

#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
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

/// Runs `fn` once when this process exits, before the static objects of the libraries the vendor
/// loads lazily (CUPTI builds libnvperf_host's after the first profiler call; at exit their
/// destructors ran first while the library's threads were still inside CUPTI: SIGSEGV). Each call
/// registers it again with atexit, so that it runs before everything loaded until then: call it at
/// start and again once such objects exist. On the main thread a thread_local guard runs it before
/// any atexit handler (glibc runs the exiting thread's thread_local destructors first). One `fn` a
/// library (the last given); a forked child runs it only if it called exit_first itself.
void exit_first(void (*fn)());

/// Starts `body` on a detached thread of the tool with every signal blocked, so that the
/// program's signals only ever reach its own threads; false (nothing started) where no thread
/// can be made.
bool spawn_quiet(std::function<void()> body);

/// 64-bit FNV-1a of `n` bytes (fast enough for copies; not cryptographic).
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 14695981039346656037ull);

/// How many of the `n` bytes from `p` can be read: `n`, or fewer where the readable mappings
/// (/proc/self/maps) end sooner (0 when `p` is in none). For memory whose length the tracer works
/// out from a header it does not own (a module image), so that a wrong length cannot crash the
/// program.
size_t readable_bytes(const void* p, size_t n);

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
  /// Frames of index `i` (a copy: other threads may be interning). Thread-safe.
  Frames at(uint32_t i) const;

 private:
  mutable std::mutex mu_;
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
  void write(class TraceFile& out);
  /// Closes the object and returns it, with its newline (nothing can be added after).
  const std::string& text();

  /// `s` as a JSON string literal, quotes included.
  static std::string quote(std::string_view s);

 private:
  void key(std::string_view k);
  std::string s_;
};

/// `$ARCHBENCH_TRACE_DIR/<prog>-<pid>.jsonl` (default: the current directory), made by
/// create_trace_file; null with the reason on stderr if it cannot be.
FILE* open_trace_file(std::string* path_out);

/// Makes `*path` (a name ending in .jsonl) for writing, closed on exec; where it exists (the image
/// before an exec of this pid, or an earlier run's), `<stem>.2.jsonl`, `.3`, ... instead, so that no
/// trace is overwritten; `*path` becomes the name made. Null with the reason on stderr.
FILE* create_trace_file(std::string* path);

/// The `process` record that starts an analysis library's file: pid, command, `start_ns` and the
/// UTC date (ISO 8601); the library adds its own fields.
JsonLine process_record(uint64_t start_ns);

/// A raw trace file written as records complete (FORMAT.md), so that a program that crashes, is
/// killed or execs another keeps what was recorded: each distinct call path is written once, as a
/// `path` record, and then named by its id (full paths in every record were most of a tracer's
/// cost); the sampler's samples follow as they are taken; the file is flushed every 256 records
/// and every second. Not thread-safe: the tracer's lock serialises every call.
class TraceFile {
 public:
  /// Takes `out` (from open_trace_file or fopen; null: nothing is written), named `name` in
  /// messages. A running sample's path keeps, of the frames for which `inner(pc)` is true (the
  /// tracer's own), only the outermost of each run: the API entry point, not its helpers.
  void adopt(FILE* out, std::string name, bool (*inner)(void*) = nullptr);
  bool is_open() const { return out_ != nullptr; }
  const std::string& name() const { return name_; }
  /// Records written so far.
  size_t written() const { return written_; }
  /// The id of `f` in the file's path table (its `path` record is written the first time).
  uint64_t path_id(const Frames& f);
  /// Writes one record: `line` is a whole JSON object and its newline. Flushes when due.
  void put(std::string_view line);
  void put(JsonLine& j);
  /// The sampler's samples taken since the last call, as `sample` records: all of them when
  /// `final`, else up to the first slot whose signal is still being handled. A waiting sample
  /// without a stack of its own takes the path of its thread's latest running sample.
  void samples(bool final);
  /// Writes the samples so far and flushes. A write error (a full disk) is said on stderr and
  /// closes the file: the trace stops there, the program runs on.
  void flush();
  /// From a fatal signal's handler: an `end` record naming `sig`, and what is buffered, to the file
  /// (no allocation; the caller makes sure no other thread is writing).
  void end_at_signal(int sig, uint64_t records_dropped);
  /// What is buffered, to the file (before a fork, so that the child does not write it again).
  void push() {
    if (out_) fflush(out_);
  }
  /// Closes (write the last samples and the `end` record first); false on a write error (said on stderr).
  bool close();
  /// In a forked child: forgets the file (the child's copy of its descriptor is closed; flush
  /// before the fork, or what was buffered is written twice) and everything written.
  void forget();

 private:
  FILE* out_ = nullptr;
  std::string name_;
  bool (*inner_)(void*) = nullptr;
  size_t written_ = 0, unflushed_ = 0, samples_done_ = 0;
  uint64_t last_flush_ = 0;
  std::unordered_map<uint64_t, uint64_t> path_ids_;  // hash of frames -> id in the path table
  std::unordered_map<int, uint64_t> last_run_;       // tid -> path id of its latest running sample
};

/// Opens an analysis library's record file into `out`: `$<env>` where it is set and not empty,
/// else `<fallback>-<pid>.jsonl` in the current directory. False, with "<tag>: cannot write PATH
/// (reason); the program runs <unobserved>" on stderr, where it cannot be.
bool open_records(TraceFile& out, const char* env, const char* fallback, const char* tag, const char* unobserved);

/// The files of every copy of a library whose file name contains `name` ("libcupti") mapped in
/// this process, in the order /proc/self/maps lists them. Two copies of libcupti are two CUPTI
/// clients of the one driver: the second is refused (tools/analysis/FORMAT.md, coexistence).
std::vector<std::string> mapped_libraries(const char* name);

/// This process's command line, arguments joined by spaces.
std::string command_line();

/// `mangled` demangled (C++ ABI), or as it is where it is not a mangled name ("?" for null).
std::string demangle(const char* mangled);

/// Sampler of the program's threads (GPU_IDLE_CAUSE) that never interrupts their system calls.
///
/// Running threads: a per-thread POSIX timer on the thread's CPU-time clock signals (SIGPROF)
/// its thread every `interval` of CPU time it uses; the handler stores the stack in a
/// preallocated ring (no allocation, no lock). Linux sends CPU-timer signals on the thread's way
/// back to user mode (POSIX_CPU_TIMERS_TASK_WORK, x86 since 5.11): a thread blocked in
/// nanosleep, poll, select, epoll_wait, sigtimedwait or semtimedop uses no CPU and gets no
/// signal, so no call returns early with EINTR. On a kernel without it the timer signals at the
/// scheduler tick, which can land during a system call's own CPU time (a few microseconds before
/// it blocks): the residual, stated as the method in the process record.
/// Waiting threads: a sampler thread (all signals blocked, so it never takes one of the
/// program's) wakes every interval of wall time and reads each thread's state from
/// /proc/self/task/<tid>/stat; a thread asleep or in uninterruptible wait gets a sample naming
/// the system call it waits in and the stack it sleeps on, walked from the stack pointer and
/// program counter that /proc/self/task/<tid>/syscall gives by the modules' unwind tables, its
/// stack read through /proc/self/mem (x86-64; the walk is reused while the thread sleeps where it
/// did on the same stack words). Where it cannot be walked the sample has no stack (n == 0) and
/// the writer gives it the path of the thread's last running sample. Each sample carries the time it
/// stands for (`ns`): CPU time for a running one (the timer's overruns counted: the kernel checks
/// CPU timers once per scheduler tick), wall time since the last look for a waiting one.
/// If the program handles SIGPROF itself, the running samples stop (step_aside) and the waiting
/// ones go on.
class Sampler {
 public:
  struct Sample {
    int tid;
    int n;          // frames in pcs
    int wait;       // -1: a running sample (stack in pcs); else the system call number waited in
    uint64_t t_ns;
    uint64_t ns;    // time this sample stands for
    void* pcs[30];
  };
  /// Installs the handler, starts the sampler thread and samples every existing thread every
  /// `interval_ns`. False, with the reason in `why`, when nothing can be sampled. `tick`, when
  /// given, is called about once a second from the sampler thread (the writers flush there).
  bool start(uint64_t interval_ns, std::string* why, void (*tick)() = nullptr);
  /// Adds the calling thread (threads created after start call this on their first API call).
  void add_this_thread();
  /// Stops every timer and the sampler thread; samples taken stay readable.
  void stop();
  /// Stops the running (signal) samples for good, with the reason (the program handles SIGPROF).
  void step_aside(const char* why);
  /// Samples recorded (at most the ring's capacity) and how many did not fit.
  size_t count() const;
  uint64_t dropped() const { return dropped_.load(); }
  const Sample& at(size_t i) const { return ring_[i]; }
  uint64_t interval_ns() const { return interval_ns_; }
  /// How threads are sampled, for the process record ("cpu-timer signals + wait states", or what
  /// fell back and why).
  std::string method() const;
  /// True for this sampler's signal handler (the OpenCL tracer's sigaction() tells it apart).
  static bool is_own_handler(void (*h)(int, siginfo_t*, void*)) { return h == &on_signal; }
  /// Forgets every thread and sample (a forked child: its timers and sampler thread are gone).
  void reset_after_fork();

 private:
  struct Thread { int tid; void* timer; int stat_fd; int syscall_fd; uint64_t last_look; size_t last_run; };
  void add_thread(int tid);
  void take(int tid, int wait, uint64_t ns, void* const* pcs, int n, uint64_t t);
  static void on_signal(int, siginfo_t*, void*);
  static void* loop(void*);
  Sample* ring_ = nullptr;
  size_t capacity_ = 0;
  std::atomic<size_t> next_{0};
  std::atomic<uint64_t> dropped_{0};
  uint64_t interval_ns_ = 0;
  std::mutex mu_;
  std::vector<Thread> threads_;
  std::atomic<bool> running_{false};   // waiting samples (the sampler thread)
  std::atomic<bool> signals_{false};   // running samples (CPU-timer signals)
  bool thread_started_ = false;
  unsigned long thread_ = 0;           // pthread_t of the sampler thread
  void (*tick_)() = nullptr;
  std::string aside_;                  // why the running samples stopped, if they did
  int mem_fd_ = -1;                    // /proc/self/mem: the sleeping threads' stacks, read without faulting
  void* find_fde_ = nullptr;           // libgcc's _Unwind_Find_FDE: the modules' unwind tables
  std::string no_stacks_;              // why waiting samples have no stacks of their own, if they do not
};

/// Around fork (pthread_atfork), for a tracer's lock and file: the lock is held across the fork,
/// so that no record is half written, and the buffered records are pushed to the file first, so
/// that the child does not write them again. The child gets a new lock, no file (forget), no
/// samples (Sampler::reset_after_fork), then `child` resets the tracer's own state.
void guard_fork(std::mutex& mu, TraceFile& out, void (*child)());

/// The name of system call `nr` on this architecture ("syscall 12" for one not in the table).
std::string syscall_name(int nr);

/// Signals whose default action ends the process (crashes, SIGTERM, SIGINT, SIGHUP, SIGQUIT,
/// SIGPIPE, SIGALRM, SIGUSR1/2, SIGXCPU, SIGXFSZ, SIGVTALRM, ...; SIGPROF is the sampler's):
/// where the disposition is the default, calls `flush(sig)` when one arrives, then restores the
/// default and raises it again, so the program dies of it as it would have. Signals the program
/// ignores are left alone, and so are those it handles, unless `push` is given (a tracer that
/// interposes sigaction(), so that the program still reads back its own handler: crash_previous):
/// then the handler is chained, `push()` before it and `flush(sig)` after it where it left the
/// signal to kill the process. `hooked(sig)` says whether a signal is ours now; `unhook(sig)`
/// forgets one (the program installs its own handler).
void install_crash_hook(void (*flush)(int sig), void (*push)() = nullptr);
bool crash_hooked(int sig);
bool is_crash_hook(const struct sigaction& a);
/// The disposition a hooked signal had (the program's handler where it is chained, else the default).
struct sigaction crash_previous(int sig);
void crash_unhook(int sig);

/// The process's one sampler (the signal handler needs a global).
Sampler& sampler();

}  // namespace archbench::trace
