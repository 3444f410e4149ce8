// Shared by both tracers: see common.hpp.
#include "tools/analysis/trace/common.hpp"

#include <cxxabi.h>
#include <dirent.h>
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
  static std::mutex mu;
  static std::map<void*, std::string> cache;
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

void JsonLine::write(FILE* out) {
  s_ += "}\n";
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

Sampler& sampler() {
  static Sampler s;
  return s;
}

void Sampler::on_signal(int, siginfo_t*, void*) {
  int saved = errno;
  Sampler& s = sampler();
  if (s.running_.load(std::memory_order_relaxed)) {
    size_t i = s.next_.fetch_add(1, std::memory_order_relaxed);
    if (i < s.capacity_) {
      Sample& x = s.ring_[i];
      x.t_ns = now_ns();
      x.tid = this_tid();
      // The two innermost frames are this handler and the kernel's signal trampoline.
      void* pcs[32];
      int n = backtrace(pcs, 32);
      x.n = n > 2 ? n - 2 : 0;
      memcpy(x.pcs, pcs + 2, sizeof(void*) * size_t(x.n));
    } else {
      s.dropped_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  errno = saved;
}

bool Sampler::start(uint64_t interval_ns, std::string* why) {
  interval_ns_ = interval_ns;
  // Enough for 3 minutes of one thread at 1 kHz; the pages are only touched when used.
  capacity_ = size_t(1) << 18;
  ring_ = static_cast<Sample*>(calloc(capacity_, sizeof(Sample)));
  if (!ring_) {
    *why = "no memory for the sample ring";
    return false;
  }
  // backtrace() loads libgcc on its first call, which is not safe inside a signal handler.
  void* warm[2];
  backtrace(warm, 2);
  struct sigaction sa {};
  sa.sa_sigaction = &Sampler::on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, nullptr) != 0) {
    *why = std::string("sigaction(SIGPROF): ") + strerror(errno);
    return false;
  }
  running_ = true;
  // Every thread that exists now (the program's own, before the API started its helpers).
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') add_thread(atoi(e->d_name));
    closedir(d);
  }
  if (timers_.empty()) {
    *why = std::string("timer_create: ") + strerror(errno);
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
  for (auto& t : timers_)
    if (t.first == tid) return;
  sigevent sev {};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGPROF;
  sev.sigev_notify_thread_id = tid;
  timer_t id;
  if (timer_create(CLOCK_MONOTONIC, &sev, &id) != 0) return;
  itimerspec its {};
  its.it_interval.tv_sec = time_t(interval_ns_ / 1000000000ull);
  its.it_interval.tv_nsec = long(interval_ns_ % 1000000000ull);
  its.it_value = its.it_interval;
  timer_settime(id, 0, &its, nullptr);
  timers_.emplace_back(tid, id);
}

void Sampler::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  // The handler stays installed: a signal already pending must not meet SIGPROF's default
  // action (terminate).
  running_ = false;
  for (auto& t : timers_) timer_delete(static_cast<timer_t>(t.second));
  timers_.clear();
}

void Sampler::write(FILE* out) const {
  for (size_t i = 0, n = count(); i < n; ++i) {
    const Sample& x = ring_[i];
    if (x.t_ns == 0) continue;  // a slot taken by a signal that had not finished at stop
    JsonLine("sample").num("tid", x.tid).unum("t_ns", x.t_ns).path("path", Frames(x.pcs, x.pcs + x.n)).write(out);
  }
}

size_t Sampler::count() const {
  size_t n = next_.load();
  return n < capacity_ ? n : capacity_;
}

}  // namespace archbench::trace
