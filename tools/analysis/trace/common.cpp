// Shared by both tracers: see common.hpp.
#include "tools/analysis/trace/common.hpp"

#include <cxxabi.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <algorithm>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

namespace archbench::trace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

int this_tid() { return int(syscall(SYS_gettid)); }

size_t readable_bytes(const void* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  FILE* f = fopen("/proc/self/maps", "re");
  if (!f) return 0;
  uintptr_t end = 0;  // end of the readable run of mappings holding a, as far as it goes
  char line[512];
  while (fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    char perms[5] = "";
    if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3) continue;
    const bool readable = perms[0] == 'r';
    if (end == 0 && readable && a >= lo && a < hi) end = hi;  // the mapping holding a
    else if (end != 0 && readable && lo == end) end = hi;    // the next one, adjacent
    else if (end != 0 && lo >= end) break;                   // a gap or an unreadable one
  }
  fclose(f);
  return end == 0 ? 0 : std::min<size_t>(n, end - a);
}

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex64(uint64_t v) {
  char b[17];
  snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

namespace {

// Module file name of `pc` (empty if none).
const char* module_of(void* pc) {
  Dl_info di;
  if (dladdr(pc, &di) && di.dli_fname) return di.dli_fname;
  return "";
}

bool hidden(void* pc, const std::vector<std::string>& hide) {
  const char* m = module_of(pc);
  for (const auto& h : hide)
    if (strstr(m, h.c_str())) return true;
  return false;
}

}  // namespace

Frames capture(int skip, const std::vector<std::string>& hide) {
  void* pcs[64];
  int n = backtrace(pcs, 64);
  int i = skip + 1;  // this function's own frame too
  while (i < n && hidden(pcs[i], hide)) ++i;
  return Frames(pcs + (i < n ? i : n), pcs + n);
}

const std::string& symbolize(void* pc) {
  // Never destroyed: writers symbolise from atexit handlers, which may run after static destructors.
  static std::mutex& mu = *new std::mutex;
  static std::map<void*, std::string>& cache = *new std::map<void*, std::string>;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(pc);
  if (it != cache.end()) return it->second;
  std::string name;
  Dl_info di;
  // pc is a return address: look up the call instruction before it, which can lie in
  // another function when the call was the last instruction of a noreturn path.
  void* at = static_cast<char*>(pc) - 1;
  if (dladdr(at, &di)) {
    if (di.dli_sname) {
      int st = 0;
      char* d = abi::__cxa_demangle(di.dli_sname, nullptr, nullptr, &st);
      name = (st == 0 && d) ? d : di.dli_sname;
      free(d);
    } else {
      const char* base = di.dli_fname ? strrchr(di.dli_fname, '/') : nullptr;
      char off[32];
      snprintf(off, sizeof off, "+0x%llx",
               static_cast<unsigned long long>(static_cast<char*>(pc) - static_cast<char*>(di.dli_fbase)));
      name = std::string(base ? base + 1 : (di.dli_fname ? di.dli_fname : "?")) + off;
    }
  } else {
    char b[32];
    snprintf(b, sizeof b, "?+0x%llx", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(pc)));
    name = b;
  }
  return cache.emplace(pc, std::move(name)).first->second;
}

uint32_t PathTable::intern(const Frames& f) {
  uint64_t h = fnv1a(f.data(), f.size() * sizeof(void*));
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = index_.emplace(h, uint32_t(paths_.size()));
  if (added) paths_.push_back(f);
  return it->second;
}

Frames PathTable::at(uint32_t i) const {
  std::lock_guard<std::mutex> lock(mu_);
  return paths_[i];
}

JsonLine::JsonLine(std::string_view type) {
  s_ = "{\"type\":";
  s_ += quote(type);
}

void JsonLine::key(std::string_view k) {
  s_ += ',';
  s_ += quote(k);
  s_ += ':';
}

JsonLine& JsonLine::num(std::string_view k, int64_t v) {
  key(k);
  s_ += std::to_string(v);
  return *this;
}

JsonLine& JsonLine::unum(std::string_view k, uint64_t v) {
  key(k);
  s_ += std::to_string(v);
  return *this;
}

JsonLine& JsonLine::str(std::string_view k, std::string_view v) {
  key(k);
  s_ += quote(v);
  return *this;
}

JsonLine& JsonLine::boolean(std::string_view k, bool v) {
  key(k);
  s_ += v ? "true" : "false";
  return *this;
}

JsonLine& JsonLine::null(std::string_view k) {
  key(k);
  s_ += "null";
  return *this;
}

JsonLine& JsonLine::nums(std::string_view k, const std::vector<int64_t>& v) {
  key(k);
  s_ += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s_ += ',';
    s_ += std::to_string(v[i]);
  }
  s_ += ']';
  return *this;
}

JsonLine& JsonLine::path(std::string_view k, const Frames& f) {
  key(k);
  s_ += '[';
  for (size_t i = 0; i < f.size(); ++i) {
    if (i) s_ += ',';
    s_ += quote(symbolize(f[i]));
  }
  s_ += ']';
  return *this;
}

JsonLine& JsonLine::raw(std::string_view k, std::string_view json) {
  key(k);
  s_ += json;
  return *this;
}

const std::string& JsonLine::text() {
  if (s_.empty() || s_.back() != '\n') s_ += "}\n";
  return s_;
}

void JsonLine::write(FILE* out) {
  text();
  fwrite(s_.data(), 1, s_.size(), out);
}

std::string JsonLine::quote(std::string_view s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += char(c);  // UTF-8 passes through; names are not validated
        }
    }
  }
  return o + '"';
}

std::string command_line() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  while (!all.empty() && all.back() == '\0') all.pop_back();
  for (char& c : all)
    if (c == '\0') c = ' ';
  return all;
}

FILE* open_trace_file(std::string* path_out) {
  const char* dir = getenv("ARCHBENCH_TRACE_DIR");
  std::string exe = program_invocation_short_name;
  std::string path = std::string(dir && *dir ? dir : ".") + "/" + exe + "-" + std::to_string(getpid()) + ".jsonl";
  FILE* f = fopen(path.c_str(), "w");
  if (!f) fprintf(stderr, "archbench trace: cannot write %s: %s\n", path.c_str(), strerror(errno));
  if (path_out) *path_out = path;
  return f;
}

void TraceFile::adopt(FILE* out, std::string name, bool (*inner)(void*)) {
  out_ = out;
  name_ = std::move(name);
  inner_ = inner;
  last_flush_ = now_ns();
}

uint64_t TraceFile::path_id(const Frames& f) {
  auto [it, added] = path_ids_.emplace(fnv1a(f.data(), f.size() * sizeof(void*)), path_ids_.size());
  if (added && out_) JsonLine("path").unum("id", it->second).path("frames", f).write(out_);
  return it->second;
}

void TraceFile::put(std::string_view line) {
  if (!out_) return;
  fwrite(line.data(), 1, line.size(), out_);
  ++written_;
  if (++unflushed_ >= 256 || now_ns() - last_flush_ >= 1000000000ull) flush();
}

void TraceFile::put(JsonLine& j) { put(j.text()); }

void TraceFile::samples(bool final) {
  const Sampler& sm = sampler();
  for (size_t n = sm.count(); out_ && samples_done_ < n; ++samples_done_) {
    const Sampler::Sample& x = sm.at(samples_done_);
    if (__atomic_load_n(&x.t_ns, __ATOMIC_ACQUIRE) == 0) {
      if (final) continue;
      break;
    }
    JsonLine j("sample");
    j.num("tid", x.tid).unum("t_ns", x.t_ns).unum("ns", x.ns);
    if (x.wait == -1) {
      Frames path;
      for (int k = 0; k < x.n; ++k)
        if (!inner_ || !inner_(x.pcs[k]) || k + 1 == x.n || !inner_(x.pcs[k + 1])) path.push_back(x.pcs[k]);
      uint64_t id = path_id(path);
      last_run_[x.tid] = id;
      j.unum("path_id", id);
    } else {
      j.str("wait", syscall_name(x.wait));
      auto it = last_run_.find(x.tid);
      if (it != last_run_.end()) j.unum("path_id", it->second);
    }
    j.write(out_);
  }
}

void TraceFile::flush() {
  if (!out_) return;
  samples(false);
  unflushed_ = 0;
  last_flush_ = now_ns();
  if (fflush(out_) != 0 || ferror(out_)) {
    fprintf(stderr, "archbench trace: writing %s failed (%s); the trace stops here, the program runs on\n",
            name_.c_str(), strerror(errno));
    fclose(out_);
    out_ = nullptr;
  }
}

void TraceFile::end_at_signal(int sig, uint64_t records_dropped) {
  if (!out_) return;
  char b[160];
  snprintf(b, sizeof b, "{\"type\":\"end\",\"end_ns\":%llu,\"signal\":%d,\"records_dropped\":%llu}\n",
           static_cast<unsigned long long>(now_ns()), sig, static_cast<unsigned long long>(records_dropped));
  fputs(b, out_);
  fflush(out_);
}

bool TraceFile::close() {
  if (!out_) return false;
  bool ok = fclose(out_) == 0;
  if (!ok) fprintf(stderr, "archbench trace: writing %s failed (%s): the trace is incomplete\n", name_.c_str(), strerror(errno));
  out_ = nullptr;
  return ok;
}

void TraceFile::forget() {
  if (out_) fclose(out_);
  out_ = nullptr;
  written_ = unflushed_ = samples_done_ = 0;
  path_ids_.clear();
  last_run_.clear();
}

Sampler& sampler() {
  static Sampler* s = new Sampler;  // never destroyed: the handler and the sampler thread use it
  return *s;
}

namespace {

// Per-thread CPU-time clock of thread `tid` of this process (glibc's MAKE_THREAD_CPUCLOCK).
clockid_t thread_cpu_clock(int tid) { return clockid_t((~unsigned(tid)) << 3) | 4 | 2; }

// One small /proc file read again from its start; the bytes read (0 on failure).
ssize_t reread(int fd, char* buf, size_t n) {
  ssize_t r = pread(fd, buf, n - 1, 0);
  buf[r > 0 ? r : 0] = 0;
  return r > 0 ? r : 0;
}

}  // namespace

void Sampler::take(int tid, int wait, uint64_t ns, void* const* pcs, int n, uint64_t t) {
  size_t i = next_.fetch_add(1, std::memory_order_relaxed);
  if (i >= capacity_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Sample& x = ring_[i];
  x.tid = tid;
  x.wait = wait;
  x.ns = ns;
  x.n = n;
  if (n) memcpy(x.pcs, pcs, sizeof(void*) * size_t(n));
  __atomic_store_n(&x.t_ns, t, __ATOMIC_RELEASE);  // last: a slot with t_ns set is complete
}

void Sampler::on_signal(int, siginfo_t* si, void*) {
  int saved = errno;
  Sampler& s = sampler();
  if (s.signals_.load(std::memory_order_relaxed)) {
    // The two innermost frames are this handler and the kernel's signal trampoline.
    void* pcs[32];
    int n = backtrace(pcs, 32);
    uint64_t runs = 1 + uint64_t(si && si->si_code == SI_TIMER && si->si_overrun > 0 ? si->si_overrun : 0);
    s.take(this_tid(), -1, runs * s.interval_ns_, pcs + 2, n > 2 ? std::min(n - 2, 30) : 0, now_ns());
  }
  errno = saved;
}

// The sampler thread: every interval of wall time, a waiting sample of each thread that sleeps.
void* Sampler::loop(void*) {
  Sampler& s = sampler();
  timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  uint64_t last_tick = now_ns();
  char buf[512];
  while (s.running_.load()) {
    uint64_t t = uint64_t(next.tv_sec) * 1000000000ull + uint64_t(next.tv_nsec) + s.interval_ns_;
    uint64_t now = now_ns();
    if (t < now) t = now;  // fell behind (a loaded machine): the weights below count the delay
    next.tv_sec = time_t(t / 1000000000ull);
    next.tv_nsec = long(t % 1000000000ull);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr) == EINTR) {
    }
    if (!s.running_.load()) break;
    {
      std::lock_guard<std::mutex> lock(s.mu_);
      for (Thread& th : s.threads_) {
        now = now_ns();
        uint64_t since = th.last_look ? now - th.last_look : s.interval_ns_;
        th.last_look = now;
        if (th.stat_fd < 0 || !reread(th.stat_fd, buf, sizeof buf)) continue;  // the thread has ended
        const char* close = strrchr(buf, ')');
        char state = close && close[1] ? close[2] : '?';
        if (state != 'S' && state != 'D') continue;  // running or runnable: the CPU timer's
        int nr = -2;
        if (th.syscall_fd >= 0 && reread(th.syscall_fd, buf, sizeof buf) && buf[0] >= '0' && buf[0] <= '9')
          nr = atoi(buf);
        s.take(th.tid, nr, std::min<uint64_t>(since, 100 * s.interval_ns_), nullptr, 0, now);
      }
    }
    if (s.tick_ && now_ns() - last_tick >= 1000000000ull) {
      last_tick = now_ns();
      s.tick_();
    }
  }
  return nullptr;
}

bool Sampler::start(uint64_t interval_ns, std::string* why, void (*tick)()) {
  interval_ns_ = interval_ns;
  tick_ = tick;
  // Enough for 3 minutes of one thread at 1 kHz; the pages are only touched when used.
  capacity_ = size_t(1) << 18;
  if (ring_) memset(static_cast<void*>(ring_), 0, sizeof(Sample) * count());  // a second start: forget the first
  else ring_ = static_cast<Sample*>(calloc(capacity_, sizeof(Sample)));
  next_ = 0;
  dropped_ = 0;
  if (!ring_) {
    *why = "no memory for the sample ring";
    return false;
  }
  // backtrace() loads libgcc on its first call, which is not safe inside a signal handler.
  void* warm[2];
  backtrace(warm, 2);
  struct sigaction old {};
  sigaction(SIGPROF, nullptr, &old);
  bool theirs = (old.sa_flags & SA_SIGINFO) ? !is_own_handler(old.sa_sigaction)
                                            : old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN;
  if (theirs) {
    aside_ = "the program handles SIGPROF";
  } else if (aside_.empty()) {
    struct sigaction sa {};
    sa.sa_sigaction = &Sampler::on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);  // nothing of the program's runs inside it
    if (sigaction(SIGPROF, &sa, nullptr) != 0)
      aside_ = std::string("sigaction(SIGPROF): ") + strerror(errno);
    else
      signals_ = true;
  }
  running_ = true;
  // Every thread that exists now (the program's own, before the API started its helpers).
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') add_thread(atoi(e->d_name));
    closedir(d);
  }
  // The sampler thread starts with every signal blocked: the program's signals go to its own threads.
  sigset_t all, prev;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &prev);
  pthread_t th;
  int err = pthread_create(&th, nullptr, &Sampler::loop, nullptr);
  pthread_sigmask(SIG_SETMASK, &prev, nullptr);
  if (err == 0) {
    thread_ = static_cast<unsigned long>(th);
    thread_started_ = true;
  }
  if (!thread_started_ && !signals_) {
    *why = std::string("pthread_create: ") + strerror(err) + (aside_.empty() ? "" : "; " + aside_);
    running_ = false;
    return false;
  }
  return true;
}

void Sampler::add_this_thread() {
  if (running_) add_thread(this_tid());
}

void Sampler::add_thread(int tid) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& t : threads_)
    if (t.tid == tid) return;
  Thread th{tid, nullptr, -1, -1, 0, 0};
  std::string dir = "/proc/self/task/" + std::to_string(tid);
  th.stat_fd = open((dir + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  th.syscall_fd = open((dir + "/syscall").c_str(), O_RDONLY | O_CLOEXEC);
  if (signals_) {
    sigevent sev {};
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev.sigev_notify_thread_id = tid;
    timer_t id;
    if (timer_create(thread_cpu_clock(tid), &sev, &id) == 0) {
      itimerspec its {};
      its.it_interval.tv_sec = time_t(interval_ns_ / 1000000000ull);
      its.it_interval.tv_nsec = long(interval_ns_ % 1000000000ull);
      its.it_value = its.it_interval;
      timer_settime(id, 0, &its, nullptr);
      th.timer = id;
    }
  }
  threads_.push_back(th);
}

void Sampler::step_aside(const char* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aside_.empty()) aside_ = why;
  signals_ = false;
  for (auto& t : threads_)
    if (t.timer) timer_delete(static_cast<timer_t>(t.timer)), t.timer = nullptr;
}

void Sampler::stop() {
  bool joined = false;
  if (running_.exchange(false) && thread_started_ && pthread_self() != pthread_t(thread_)) {
    pthread_join(pthread_t(thread_), nullptr);
    joined = true;
  }
  thread_started_ = thread_started_ && !joined;
  std::lock_guard<std::mutex> lock(mu_);
  // The handler stays installed: a signal already pending must not meet SIGPROF's default
  // action (terminate).
  signals_ = false;
  for (auto& t : threads_) {
    if (t.timer) timer_delete(static_cast<timer_t>(t.timer));
    if (t.stat_fd >= 0) close(t.stat_fd);
    if (t.syscall_fd >= 0) close(t.syscall_fd);
  }
  threads_.clear();
}

void Sampler::reset_after_fork() {
  // Only the forking thread exists here; the parent's timers and sampler thread do not.
  new (&mu_) std::mutex;
  for (auto& t : threads_) {
    if (t.stat_fd >= 0) close(t.stat_fd);
    if (t.syscall_fd >= 0) close(t.syscall_fd);
  }
  threads_.clear();
  running_ = false;
  signals_ = false;
  thread_started_ = false;
  next_ = 0;
  dropped_ = 0;
  if (ring_) memset(static_cast<void*>(ring_), 0, sizeof(Sample) * 64);  // the rest is overwritten before use
}

std::string Sampler::method() const {
  std::string m = signals_ || aside_.empty() ? "cpu-timer signals (running threads) + wait states (sleeping threads)"
                                             : "wait states only (sleeping threads): no running samples";
  if (!aside_.empty()) m += " (" + aside_ + ")";
  if (!thread_started_ && running_) m += "; no sampler thread: no waiting samples";
  return m;
}

size_t Sampler::count() const {
  size_t n = next_.load();
  return n < capacity_ ? n : capacity_;
}

namespace {
std::mutex* g_fork_mu = nullptr;
TraceFile* g_fork_out = nullptr;
void (*g_fork_child)() = nullptr;
}  // namespace

void guard_fork(std::mutex& mu, TraceFile& out, void (*child)()) {
  g_fork_mu = &mu;
  g_fork_out = &out;
  g_fork_child = child;
  pthread_atfork([] {
    g_fork_mu->lock();
    g_fork_out->push();
  }, [] { g_fork_mu->unlock(); }, [] {
    new (g_fork_mu) std::mutex;
    g_fork_out->forget();  // the child's copy of the descriptor; the parent's file stays open
    sampler().reset_after_fork();
    g_fork_child();
  });
}

std::string syscall_name(int nr) {
#if defined(__x86_64__)
  // Never destroyed: the tracers write their samples from exit handlers, which may run after
  // this function's statics would be (a use after free that ASan found).
  static const auto& names = *new std::map<int, const char*>{
      {0, "read"}, {1, "write"}, {2, "open"}, {3, "close"}, {7, "poll"}, {9, "mmap"}, {11, "munmap"},
      {17, "pread64"}, {19, "readv"}, {20, "writev"}, {24, "sched_yield"}, {42, "connect"}, {44, "sendto"},
      {46, "sendmsg"}, {56, "clone"}, {74, "fsync"}, {75, "fdatasync"}, {257, "openat"}, {23, "select"}, {34, "pause"}, {35, "nanosleep"}, {43, "accept"},
      {45, "recvfrom"}, {47, "recvmsg"}, {61, "wait4"}, {64, "semget"}, {65, "semop"}, {72, "fcntl"},
      {128, "rt_sigtimedwait"}, {130, "rt_sigsuspend"}, {202, "futex"}, {220, "semtimedop"}, {230, "clock_nanosleep"},
      {232, "epoll_wait"}, {247, "waitid"}, {270, "pselect6"}, {271, "ppoll"}, {281, "epoll_pwait"},
      {288, "accept4"}, {299, "recvmmsg"}, {441, "epoll_pwait2"}, {449, "futex_waitv"}};
  auto it = names.find(nr);
  if (it != names.end()) return it->second;
#endif
  if (nr == -2) return "?";
  return "syscall " + std::to_string(nr);
}

namespace {

constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGHUP, SIGQUIT};
std::atomic<uint32_t> g_hooked{0};  // bit per signal number
void (*g_flush)(int) = nullptr;

void on_crash(int sig) {
  int saved = errno;
  if (crash_hooked(sig) && g_flush) g_flush(sig);
  crash_unhook(sig);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
  // Pending while this handler runs (the signal is blocked here); delivered with the default
  // action as it returns. A fault returns to its instruction and faults again, by default.
  raise(sig);
  errno = saved;
}

}  // namespace

void install_crash_hook(void (*flush)(int)) {
  g_flush = flush;
  for (int sig : kCrashSignals) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = &on_crash;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    g_hooked |= 1u << sig;
    if (sigaction(sig, &sa, nullptr) != 0) g_hooked &= ~(1u << sig);
  }
}

bool is_crash_hook(void (*h)(int)) { return h == &on_crash; }

bool crash_hooked(int sig) { return sig > 0 && sig < 32 && (g_hooked.load() >> sig & 1u); }

void crash_unhook(int sig) {
  if (sig > 0 && sig < 32) g_hooked &= ~(1u << sig);
}

}  // namespace archbench::trace
