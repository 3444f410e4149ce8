// Shared by both tracers: see common.hpp.
#include "tools/analysis/common/common.hpp"

#include <cxxabi.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
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
#include <thread>

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

namespace {
std::atomic<void (*)()> g_exit_fn{nullptr};
std::atomic<int> g_exit_pid{0};
std::atomic<bool> g_exit_ran{false};
void run_exit_fn() {
  if (getpid() != g_exit_pid.load() || g_exit_ran.exchange(true)) return;
  if (void (*fn)() = g_exit_fn.load()) fn();
}
struct ExitGuard {
  ~ExitGuard() { run_exit_fn(); }
};
}  // namespace

void exit_first(void (*fn)()) {
  if (g_exit_pid.exchange(getpid()) != getpid()) g_exit_ran = false;  // a forked child starts afresh
  g_exit_fn = fn;
  std::atexit(run_exit_fn);
  if (this_tid() == getpid()) {
    static thread_local ExitGuard guard;
    (void)guard;
  }
}

bool spawn_quiet(std::function<void()> body) {
  sigset_t all, prev;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &prev);
  bool ok = true;
  try {
    std::thread(std::move(body)).detach();
  } catch (const std::exception&) {
    ok = false;
  }
  pthread_sigmask(SIG_SETMASK, &prev, nullptr);
  return ok;
}

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
      name = demangle(di.dli_sname);
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

std::string demangle(const char* mangled) {
  if (!mangled) return "?";
  int st = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &st);
  std::string r = st == 0 && d ? d : mangled;
  free(d);
  return r;
}

std::vector<std::string> mapped_libraries(const char* name) {
  std::vector<std::string> found;
  FILE* f = fopen("/proc/self/maps", "re");
  if (!f) return found;
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    const char* path = strchr(line, '/');
    if (!path) continue;
    std::string p(path);
    while (!p.empty() && (p.back() == '\n' || p.back() == ' ')) p.pop_back();
    const size_t slash = p.rfind('/');
    if (p.find(name, slash) != std::string::npos && std::find(found.begin(), found.end(), p) == found.end())
      found.push_back(p);
  }
  fclose(f);
  return found;
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
  FILE* f = create_trace_file(&path);
  if (path_out) *path_out = path;
  return f;
}

FILE* create_trace_file(std::string* path) {
  const std::string stem = path->substr(0, path->size() - strlen(".jsonl"));
  for (int k = 1; k < 100; ++k) {
    if (k > 1) *path = stem + "." + std::to_string(k) + ".jsonl";
    int fd = open(path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fdopen(fd, "w");
    if (errno != EEXIST) break;
  }
  fprintf(stderr, "archbench trace: cannot write %s: %s\n", path->c_str(), strerror(errno));
  return nullptr;
}

JsonLine process_record(uint64_t start_ns) {
  char date[32];
  const time_t now = time(nullptr);
  tm utc{};
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &utc));
  JsonLine j("process");
  j.num("pid", getpid()).str("command", command_line()).unum("start_ns", start_ns).str("date", date);
  return j;
}

bool open_records(TraceFile& out, const char* env, const char* fallback, const char* tag, const char* unobserved) {
  const char* given = getenv(env);
  std::string path = given && *given ? given : std::string(fallback) + "-" + std::to_string(getpid()) + ".jsonl";
  // The file named by the tool is this process's only if it makes it: a process the program starts
  // (a spawned worker that uses the GPU: torch.multiprocessing, a launcher) inherits the variable and
  // writes its own file beside it, <name>-<pid>.jsonl, which the tool names.
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (given && *given ? O_EXCL : O_TRUNC), 0644);
  if (fd < 0 && errno == EEXIST) {
    const std::size_t dot = path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0 ? path.size() - 6
                                                                                                 : path.size();
    path = path.substr(0, dot) + "-" + std::to_string(getpid()) + ".jsonl";
    fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  FILE* f = fd >= 0 ? fdopen(fd, "w") : nullptr;
  if (!f) {
    fprintf(stderr, "%s: cannot write %s (%s); the program runs %s\n", tag, path.c_str(), strerror(errno), unobserved);
    return false;
  }
  out.adopt(f, path);
  return true;
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

void JsonLine::write(TraceFile& out) { out.put(*this); }

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
    if (x.wait != -1) j.str("wait", syscall_name(x.wait));
    if (x.wait == -1 || x.n > 0) {  // a running sample, or a waiting one with the stack it sleeps on
      Frames path;
      for (int k = 0; k < x.n; ++k)
        if (!inner_ || !inner_(x.pcs[k]) || k + 1 == x.n || !inner_(x.pcs[k + 1])) path.push_back(x.pcs[k]);
      uint64_t id = path_id(path);
      j.unum("path_id", id);
      if (x.wait == -1)
        last_run_[x.tid] = id;
      else
        j.str("path_from", "own");
    } else {  // a waiting sample whose stack could not be walked: where its thread last ran
      auto it = last_run_.find(x.tid);
      if (it != last_run_.end()) j.unum("path_id", it->second).str("path_from", "last_run");
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

// The stack of a thread asleep in a system call, walked from the sampler thread without a signal
// (a signal would end the call early with EINTR): /proc/self/task/<tid>/syscall gives the stack
// pointer and the program counter it sleeps at, and the stack is walked from there by the
// modules' unwind tables (.eh_frame, found by libgcc's _Unwind_Find_FDE), reading the sleeping
// thread's stack through /proc/self/mem (a word that cannot be read ends the walk: it never
// faults). Where a frame's rule needs a register the walk does not know (a frame pointer set
// before the call it sleeps in, as in code built with frame pointers), the stack is scanned
// for the return address of a call to that frame's function (scan). A walk is redone only when
// the thread sleeps elsewhere or its stack words changed. x86-64 only: elsewhere a waiting sample
// takes the path of its thread's latest running sample.
#if defined(__x86_64__)
struct EhBases {  // libgcc's struct dwarf_eh_bases
  void* tbase;
  void* dbase;
  void* func;
};
using FindFde = const void* (*)(void*, EhBases*);

constexpr int kRegs = 17;  // DWARF numbers of x86-64: 0-15 the general registers (6 rbp, 7 rsp), 16 the return address
constexpr int kSp = 7, kRa = 16;
enum How : uint8_t { kUnspec, kUndef, kSame, kOffset, kValOffset, kReg, kExpr };
struct Rule {
  How how = kUnspec;
  int64_t off = 0;  // kOffset, kValOffset: from the CFA; kReg: the register
};
struct Row {
  int cfa_reg = kSp;
  int64_t cfa_off = 8;
  bool cfa_expr = false;
  Rule r[kRegs];
};
struct Cie {
  uint64_t caf = 1;
  int64_t daf = -8;
  uint64_t ra = kRa;
  uint8_t fde_enc = 0;
  bool z = false;
  const uint8_t *ins = nullptr, *end = nullptr;
};

uint64_t uleb(const uint8_t*& p, const uint8_t* end) {
  uint64_t v = 0;
  for (int shift = 0; p < end; shift += 7) {
    uint8_t b = *p++;
    if (shift < 64) v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  return v;
}

int64_t sleb(const uint8_t*& p, const uint8_t* end) {
  uint64_t v = 0;
  int shift = 0;
  uint8_t b = 0;
  while (p < end) {
    b = *p++;
    if (shift < 64) v |= uint64_t(b & 0x7f) << shift;
    shift += 7;
    if (!(b & 0x80)) break;
  }
  if (shift < 64 && (b & 0x40)) v |= ~uint64_t(0) << shift;
  return int64_t(v);
}

// Skips a pointer encoded with `enc` (DW_EH_PE_*); false for an encoding it cannot size.
bool skip_encoded(const uint8_t*& p, const uint8_t* end, uint8_t enc) {
  if (enc == 0xff) return true;  // omitted
  switch (enc & 0x0f) {
    case 0x00: case 0x04: case 0x0c: p += 8; break;
    case 0x02: case 0x0a: p += 2; break;
    case 0x03: case 0x0b: p += 4; break;
    case 0x01: case 0x09: uleb(p, end); break;
    default: return false;
  }
  return p <= end;
}

bool parse_cie(const uint8_t* c, Cie* cie) {
  uint32_t len, id;
  memcpy(&len, c, 4);
  if (len == 0 || len == 0xffffffffu) return false;
  const uint8_t* p = c + 4;
  const uint8_t* end = p + len;
  memcpy(&id, p, 4);
  p += 4;
  if (id != 0) return false;
  uint8_t version = *p++;
  const char* aug = reinterpret_cast<const char*>(p);
  p += strnlen(aug, size_t(end - p)) + 1;
  if (strstr(aug, "eh")) p += 8;
  cie->caf = uleb(p, end);
  cie->daf = sleb(p, end);
  cie->ra = version == 1 ? *p++ : uleb(p, end);
  if (aug[0] == 'z') {
    cie->z = true;
    uint64_t n = uleb(p, end);
    const uint8_t* aug_end = p + n;
    for (const char* a = aug + 1; *a && p < aug_end; ++a) {
      if (*a == 'R') {
        cie->fde_enc = *p++;
      } else if (*a == 'L') {
        ++p;
      } else if (*a == 'P') {
        uint8_t e = *p++;
        if (!skip_encoded(p, aug_end, e)) break;
      } else if (*a != 'S' && *a != 'B' && *a != 'G') {
        break;  // unknown: its data is skipped by the length
      }
    }
    p = aug_end;
  } else if (aug[0] != 0) {
    return false;  // an augmentation without its length: cannot be skipped
  }
  cie->ins = p;
  cie->end = end;
  return p <= end;
}

void set_rule(Row& row, uint64_t reg, How how, int64_t off) {
  if (reg < kRegs) row.r[reg] = Rule{how, off};
}

// Runs call frame instructions [p, end) from `loc` until the row for `target` is complete.
// False on an instruction it does not know.
bool run_cfi(const uint8_t* p, const uint8_t* end, uint64_t& loc, uint64_t target, Row& row, const Row& init,
             const Cie& cie) {
  Row saved[8];
  int depth = 0;
  auto advance = [&](uint64_t delta) {
    loc += delta * cie.caf;
    return loc > target;
  };
  while (p < end) {
    uint8_t op = *p++, low = op & 0x3f;
    uint64_t reg, off;
    switch (op & 0xc0) {
      case 0x40:
        if (advance(low)) return true;
        continue;
      case 0x80:
        set_rule(row, low, kOffset, int64_t(uleb(p, end)) * cie.daf);
        continue;
      case 0xc0:
        if (low < kRegs) row.r[low] = init.r[low];
        continue;
    }
    switch (op) {
      case 0x00: break;  // nop
      case 0x02: if (advance(*p++)) return true; break;
      case 0x03: { uint16_t d; memcpy(&d, p, 2); p += 2; if (advance(d)) return true; break; }
      case 0x04: { uint32_t d; memcpy(&d, p, 4); p += 4; if (advance(d)) return true; break; }
      case 0x05: reg = uleb(p, end); off = uleb(p, end); set_rule(row, reg, kOffset, int64_t(off) * cie.daf); break;
      case 0x06: reg = uleb(p, end); if (reg < kRegs) row.r[reg] = init.r[reg]; break;
      case 0x07: set_rule(row, uleb(p, end), kUndef, 0); break;
      case 0x08: set_rule(row, uleb(p, end), kSame, 0); break;
      case 0x09: reg = uleb(p, end); off = uleb(p, end); set_rule(row, reg, kReg, int64_t(off)); break;
      case 0x0a: if (depth == 8) return false; saved[depth++] = row; break;
      case 0x0b: if (depth == 0) return false; row = saved[--depth]; break;
      case 0x0c: row.cfa_reg = int(uleb(p, end)); row.cfa_off = int64_t(uleb(p, end)); row.cfa_expr = false; break;
      case 0x0d: row.cfa_reg = int(uleb(p, end)); row.cfa_expr = false; break;
      case 0x0e: row.cfa_off = int64_t(uleb(p, end)); break;
      case 0x0f: off = uleb(p, end); p += off; row.cfa_expr = true; break;
      case 0x10: reg = uleb(p, end); off = uleb(p, end); p += off; set_rule(row, reg, kExpr, 0); break;
      case 0x11: reg = uleb(p, end); set_rule(row, reg, kOffset, sleb(p, end) * cie.daf); break;
      case 0x12: row.cfa_reg = int(uleb(p, end)); row.cfa_off = sleb(p, end) * cie.daf; row.cfa_expr = false; break;
      case 0x13: row.cfa_off = sleb(p, end) * cie.daf; break;
      case 0x14: reg = uleb(p, end); off = uleb(p, end); set_rule(row, reg, kValOffset, int64_t(off) * cie.daf); break;
      case 0x15: reg = uleb(p, end); set_rule(row, reg, kValOffset, sleb(p, end) * cie.daf); break;
      case 0x16: reg = uleb(p, end); off = uleb(p, end); p += off; set_rule(row, reg, kExpr, 0); break;
      case 0x2e: uleb(p, end); break;  // GNU_args_size
      case 0x2f: reg = uleb(p, end); off = uleb(p, end); set_rule(row, reg, kOffset, -int64_t(off) * cie.daf); break;
      default: return false;  // set_loc and the rest: not in the code compilers emit for x86-64
    }
  }
  return true;
}

// The unwind row at `target` of the function whose FDE is `fde` and which starts at `func`.
bool cfa_row(const uint8_t* fde, uint64_t func, uint64_t target, Row* row, uint64_t* ra_reg) {
  uint32_t len, cie_off;
  memcpy(&len, fde, 4);
  if (len == 0 || len == 0xffffffffu) return false;
  const uint8_t* p = fde + 4;
  const uint8_t* end = p + len;
  memcpy(&cie_off, p, 4);
  Cie cie;
  if (!parse_cie(p - cie_off, &cie)) return false;
  p += 4;
  if (!skip_encoded(p, end, cie.fde_enc) || !skip_encoded(p, end, cie.fde_enc & 0x0f)) return false;  // start, range
  if (cie.z) {
    uint64_t n = uleb(p, end);
    p += n;
  }
  if (p > end || cie.ra >= kRegs) return false;
  Row init;
  uint64_t loc = func;
  if (!run_cfi(cie.ins, cie.end, loc, ~uint64_t(0), init, init, cie)) return false;
  *row = init;
  if (!run_cfi(p, end, loc, target, *row, init, cie)) return false;
  *ra_reg = cie.ra;
  return true;
}

// Words of a sleeping thread's stack from its stack pointer up, read through /proc/self/mem as
// far as the walk needs them (a page at a time).
class StackWords {
 public:
  StackWords(int fd, uint64_t lo) : fd_(fd), lo_(lo) {}
  bool word(uint64_t a, uint64_t* v) {
    if (a < lo_ || (a - lo_) % 8) return false;  // below the stack pointer, or not a stack slot
    size_t i = size_t((a - lo_) / 8);
    while (i >= words_.size() && !ended_) grow();
    if (i >= words_.size()) return false;
    *v = words_[i];
    return true;
  }
  uint64_t lo() const { return lo_; }
  const std::vector<uint64_t>& words() const { return words_; }

 private:
  static constexpr size_t kPage = 512, kMax = 64 * kPage;  // 4 KB at a time, 256 KB at most
  void grow() {
    size_t have = words_.size();
    if (have >= kMax) {
      ended_ = true;
      return;
    }
    words_.resize(have + kPage);
    ssize_t r = pread(fd_, &words_[have], kPage * 8, off_t(lo_ + have * 8));
    size_t got = r > 0 ? size_t(r) / 8 : 0;
    words_.resize(have + got);
    if (got < kPage) ended_ = true;
  }
  int fd_;
  uint64_t lo_;
  std::vector<uint64_t> words_;
  bool ended_ = false;
};

class SleeperStacks {
 public:
  SleeperStacks(int mem_fd, FindFde find) : fd_(mem_fd), find_(find) {}

  // The frames of thread `tid`, asleep at `sp` and `pc` (`where`: its whole syscall line),
  // innermost first (pc, then return addresses), at most `max`; 0 when it cannot be walked. The
  // last walk of the thread is reused when it sleeps where it did on the same stack words.
  // `walked`: whether it was walked now (else reused).
  int frames(int tid, const char* where, uint64_t sp, uint64_t pc, void** out, int max, uint64_t round, bool* walked) {
    *walked = false;
    if (fd_ < 0 || !find_) return 0;
    Last& last = last_[tid];
    last.round = round;
    if (last.n && last.where == where && last.lo == sp && same_words(last)) {
      int n = std::min(last.n, max);
      std::copy(last.pcs, last.pcs + n, out);
      return n;
    }
    *walked = true;
    StackWords w(fd_, sp);
    int n = walk(w, sp, pc, out, std::min(max, kMaxFrames));
    last.where = where;
    last.lo = sp;
    last.words = w.words();
    last.n = n;
    std::copy(out, out + n, last.pcs);
    return n;
  }

  // Forgets the threads not looked at since `round` (ended, or running since).
  void forget_before(uint64_t round) {
    for (auto it = last_.begin(); it != last_.end();)
      it = it->second.round < round ? last_.erase(it) : std::next(it);
  }

 private:
  static constexpr int kMaxFrames = 64;
  struct Last {
    std::string where;
    uint64_t lo = 0, round = 0;
    std::vector<uint64_t> words;  // every stack word the walk read
    int n = 0;
    void* pcs[kMaxFrames];
  };

  bool same_words(const Last& last) {
    now_.resize(last.words.size());
    size_t bytes = now_.size() * 8;
    return pread(fd_, now_.data(), bytes, off_t(last.lo)) == ssize_t(bytes) &&
           memcmp(now_.data(), last.words.data(), bytes) == 0;
  }

  // The executable segments of the loaded modules (dl_iterate_phdr), read again when modules
  // were loaded or unloaded since.
  void code_ranges() {
    struct Ctx {
      SleeperStacks* self;
      unsigned long long adds, subs;
    } ctx{this, 0, 0};
    dl_iterate_phdr([](dl_phdr_info* info, size_t size, void* p) {
      Ctx& c = *static_cast<Ctx*>(p);
      if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        c.adds = info->dlpi_adds;
        c.subs = info->dlpi_subs;
      }
      return 1;  // the counts are the same in every entry
    }, &ctx);
    if (!code_.empty() && ctx.adds == adds_ && ctx.subs == subs_) return;
    adds_ = ctx.adds;
    subs_ = ctx.subs;
    code_.clear();
    dl_iterate_phdr([](dl_phdr_info* info, size_t, void* p) {
      auto& code = *static_cast<std::vector<std::pair<uint64_t, uint64_t>>*>(p);
      for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
          code.emplace_back(info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
      }
      return 0;
    }, &code_);
  }

  bool in_code(uint64_t v) const {
    for (const auto& [lo, hi] : code_)
      if (v >= lo && v < hi) return true;
    return false;
  }

  bool read(uint64_t a, void* out, size_t n) { return pread(fd_, out, n, off_t(a)) == ssize_t(n); }

  // Where a jump lands: through a PLT entry ([endbr64] [bnd] jmp *GOT(%rip)) to what its GOT slot holds.
  uint64_t through_plt(uint64_t t) {
    uint8_t c[11];
    if (!read(t, c, sizeof c)) return t;
    size_t i = 0;
    if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa) i = 4;
    if (c[i] == 0xf2) ++i;
    if (i + 6 > sizeof c || c[i] != 0xff || c[i + 1] != 0x25) return t;
    int32_t d;
    memcpy(&d, c + i + 2, 4);
    uint64_t slot = t + i + 6 + uint64_t(int64_t(d)), to = 0;
    return read(slot, &to, 8) ? to : t;
  }

  // When `v` is a return address (a call instruction ends just before it, in code that has unwind
  // tables): true, and in `target` the function that call enters where it can be told (a direct
  // call, through its PLT entry, or a call through a GOT slot), else 0.
  bool return_address(uint64_t v, uint64_t* target) {
    if (!in_code(v - 1)) return false;
    uint8_t c[7];  // c[k]: the byte at v - 7 + k; an instruction of L bytes starts at c[7 - L]
    if (!read(v - 7, c, 7)) return false;
    int32_t d;
    *target = 0;
    if (c[2] == 0xe8) {  // call rel32
      memcpy(&d, c + 3, 4);
      *target = through_plt(v + uint64_t(int64_t(d)));
    } else if (c[1] == 0xff && c[2] == 0x15) {  // call *GOT(%rip)
      memcpy(&d, c + 3, 4);
      if (!read(v + uint64_t(int64_t(d)), target, 8)) *target = 0;
    } else if (!((c[5] == 0xff && ((c[6] & 0xf8) == 0xd0 ||                                         // call *%reg
                                   ((c[6] & 0xf8) == 0x10 && (c[6] & 7) != 4 && (c[6] & 7) != 5)))  // call *(%reg)
                 || (c[4] == 0xff && (c[5] == 0x14 || ((c[5] & 0xf8) == 0x50 && (c[5] & 7) != 4)))   // (sib), disp8(%reg)
                 || (c[3] == 0xff && c[4] == 0x54)                                                   // disp8(sib)
                 || (c[1] == 0xff && ((c[2] & 0xf8) == 0x90 && (c[2] & 7) != 4))                     // disp32(%reg)
                 || (c[0] == 0xff && c[1] == 0x94))) {                                               // disp32(sib)
      return false;
    }
    EhBases b;
    return find_(reinterpret_cast<void*>(v - 1), &b) != nullptr;
  }

  // The return address of a frame whose CFA cannot be worked out (its rule needs a register the
  // walk does not know: a frame pointer set before the walk began): the stack is scanned from
  // `from` for the slot of a return address from a call to `func`, the frame's function; failing
  // that (it was entered by a tail call, or through a register), the first return address found.
  // Words below the return address are the frame's own, where earlier calls may have left theirs.
  bool scan(StackWords& w, uint64_t from, uint64_t func, uint64_t* cfa, uint64_t* ra) {
    code_ranges();
    uint64_t first = 0, first_slot = 0;
    for (uint64_t a = from; a < from + 16384; a += 8) {
      uint64_t v, target;
      if (!w.word(a, &v)) break;
      if (!return_address(v, &target)) continue;
      if (func && target == func) {
        *cfa = a + 8;
        *ra = v;
        return true;
      }
      if (!first) {
        first = v;
        first_slot = a;
      }
    }
    if (!first) return false;
    *cfa = first_slot + 8;
    *ra = first;
    return true;
  }

  int walk(StackWords& w, uint64_t sp, uint64_t pc, void** out, int max) {
    uint64_t reg[kRegs] = {};
    bool known[kRegs] = {};
    reg[kSp] = sp;
    known[kSp] = true;
    int n = 0;
    for (bool first = true; n < max; first = false) {
      out[n++] = reinterpret_cast<void*>(pc);
      // A return address's call is the instruction before it; the innermost pc is where the
      // thread resumes.
      uint64_t at = first ? pc : pc - 1;
      Row row;
      uint64_t ra_reg = kRa;
      EhBases b{};
      const void* fde = find_(reinterpret_cast<void*>(at), &b);
      bool have = fde && cfa_row(static_cast<const uint8_t*>(fde), reinterpret_cast<uint64_t>(b.func), at, &row, &ra_reg);
      uint64_t cfa = 0, ra = 0;
      bool found = false;
      if (have && !row.cfa_expr && row.cfa_reg >= 0 && row.cfa_reg < kRegs && known[row.cfa_reg]) {
        cfa = reg[row.cfa_reg] + uint64_t(row.cfa_off);
        const Rule& q = row.r[ra_reg];
        if (q.how == kUndef) break;  // the outermost frame (_start, a thread's start routine)
        found = q.how == kOffset && w.word(cfa + uint64_t(q.off), &ra);
      }
      if (!found) {
        if (!scan(w, reg[kSp], fde ? reinterpret_cast<uint64_t>(b.func) : 0, &cfa, &ra)) break;
        // The frame's own rules still say where it saved registers, if its return address is
        // where they expect it.
        have = have && row.r[ra_reg].how == kOffset && row.r[ra_reg].off == -8;
      }
      if (cfa <= reg[kSp] || ra == 0) break;  // the stack grows down: a frame is above the last
      uint64_t next[kRegs];
      bool next_known[kRegs] = {};
      for (int r = 0; r < kRegs; ++r) {
        const bool callee_saved = r == 3 || r == 6 || (r >= 12 && r <= 15);
        const Rule q = have ? row.r[r] : Rule{kUndef, 0};
        next[r] = 0;
        switch (q.how) {
          case kOffset: next_known[r] = w.word(cfa + uint64_t(q.off), &next[r]); break;
          case kValOffset: next[r] = cfa + uint64_t(q.off); next_known[r] = true; break;
          case kReg: if (q.off >= 0 && q.off < kRegs) { next[r] = reg[q.off]; next_known[r] = known[q.off]; } break;
          case kUnspec: case kSame: if (callee_saved) { next[r] = reg[r]; next_known[r] = known[r]; } break;
          default: break;
        }
      }
      next[kSp] = cfa;
      next_known[kSp] = true;
      std::copy(next, next + kRegs, reg);
      std::copy(next_known, next_known + kRegs, known);
      pc = ra;
    }
    return n;
  }

  int fd_;
  FindFde find_;
  std::unordered_map<int, Last> last_;
  std::vector<uint64_t> now_;
  std::vector<std::pair<uint64_t, uint64_t>> code_;  // executable segments
  unsigned long long adds_ = 0, subs_ = 0;          // dl_iterate_phdr's counts when code_ was read
};
#endif

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

// The sampler thread: every interval of wall time, a waiting sample of each thread that sleeps,
// with the stack it sleeps on where it can be walked.
void* Sampler::loop(void*) {
  Sampler& s = sampler();
  timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  uint64_t last_tick = now_ns();
  char buf[512];
  struct Asleep {  // a thread found asleep, walked once the sampler's lock is released
    int tid, nr, syscall_fd;
    uint64_t ns, t, sp, pc;
    bool regs;
    char where[256];  // its whole syscall line (9 numbers at most)
  };
  // The loop's buffers are kept from globals, not only from this thread's stack: a forked child
  // has no sampler thread, and LeakSanitizer counted them as leaked there (the child exited 86).
  // Constant-initialised, not guarded: a fork while the parent's sampler thread held the guard of a
  // dynamic one left it held in the child, whose own sampler thread then waited on it forever.
  static std::vector<Asleep>* asleep_kept = nullptr;
  if (!asleep_kept) asleep_kept = new std::vector<Asleep>;
  std::vector<Asleep>& asleep = *asleep_kept;
  asleep.reserve(64);
#if defined(__x86_64__)
  static SleeperStacks* kept = nullptr;
  delete kept;
  kept = new SleeperStacks(s.mem_fd_, reinterpret_cast<FindFde>(s.find_fde_));
  SleeperStacks& stacks = *kept;
#endif
  [[maybe_unused]] uint64_t round = 0;
  while (s.running_.load()) {
    ++round;
    asleep.clear();
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
        // "nr arg1 .. arg6 sp pc" in a system call, "-1 sp pc" blocked outside one.
        Asleep a{th.tid, -2, th.syscall_fd, std::min<uint64_t>(since, 100 * s.interval_ns_), now, 0, 0, false, {}};
        if (th.syscall_fd >= 0 && reread(th.syscall_fd, buf, sizeof buf) && (buf[0] == '-' || (buf[0] >= '0' && buf[0] <= '9'))) {
          if (buf[0] != '-') a.nr = atoi(buf);
          const char* tok[9];
          int k = 0;
          for (char* p = buf; *p && k < 9; ++p)
            if (*p != ' ' && *p != '\n' && (p == buf || p[-1] == ' ')) tok[k++] = p;
          if (k == 3 || k == 9) {
            a.sp = strtoull(tok[k - 2], nullptr, 16);
            a.pc = strtoull(tok[k - 1], nullptr, 16);
            a.regs = a.sp && a.pc && strlen(buf) < sizeof a.where;
            if (a.regs) strcpy(a.where, buf);
          }
        }
        asleep.push_back(a);
      }
    }
    // The walks outside the lock: they take the dynamic loader's (a thread that holds it may be
    // waiting for the sampler's, in add_this_thread).
    for (const Asleep& a : asleep) {
      void* pcs[30];
      int n = 0;
#if defined(__x86_64__)
      if (a.regs) {
        bool walked;
        n = stacks.frames(a.tid, a.where, a.sp, a.pc, pcs, 30, round, &walked);
        // Woken while it was walked: the words read may be of another stack.
        if (n && walked && (!reread(a.syscall_fd, buf, sizeof buf) || strcmp(buf, a.where) != 0)) n = 0;
      }
#endif
      s.take(a.tid, a.nr, a.ns, pcs, n, a.t);
    }
    if (now_ns() - last_tick >= 1000000000ull) {
      last_tick = now_ns();
#if defined(__x86_64__)
      stacks.forget_before(round > 1000 ? round - 1000 : 0);
#endif
      if (s.tick_) s.tick_();
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
#if defined(__x86_64__)
  // The sleeping threads' stacks (SleeperStacks): their memory, read without faulting, and the
  // modules' unwind tables.
  if (mem_fd_ < 0) mem_fd_ = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  if (!find_fde_) find_fde_ = dlsym(RTLD_DEFAULT, "_Unwind_Find_FDE");
  if (mem_fd_ < 0)
    no_stacks_ = std::string("/proc/self/mem: ") + strerror(errno);
  else if (!find_fde_)
    no_stacks_ = "no _Unwind_Find_FDE";
  else
    no_stacks_.clear();
#else
  no_stacks_ = "walked on x86-64 only";
#endif
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
  if (mem_fd_ >= 0) close(mem_fd_);  // the parent's memory, not the child's
  mem_fd_ = -1;
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
  else if (!no_stacks_.empty()) m += "; waiting samples without their stacks (" + no_stacks_ + "): where the thread last ran";
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

// Every signal whose default action ends the process and that can be caught, but SIGPROF (the
// sampler's): a crash, a kill, a pipe with no reader, a timer nobody handles.
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS, SIGTRAP, SIGTERM, SIGINT, SIGHUP,
                                 SIGQUIT, SIGPIPE, SIGALRM, SIGVTALRM, SIGUSR1, SIGUSR2, SIGXCPU, SIGXFSZ, SIGIO,
                                 SIGPWR, SIGSTKFLT};
std::atomic<uint32_t> g_hooked{0};  // bit per signal number
void (*g_flush)(int) = nullptr;
void (*g_push)() = nullptr;
struct sigaction g_prev[32];  // a chained signal's handler, as it was installed

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

// A signal the program (or its runtime) handled before the hook: what is buffered reaches the file,
// then its handler runs as it would have. Where that handler returns leaving the signal to kill the
// process (the default restored, and the signal pending or a fault that comes again), the end record
// names it; one that raises it again itself (LLVM's, SA_NODEFER) ends the trace at its last record.
void on_chained(int sig, siginfo_t* si, void* ctx) {
  int saved = errno;
  const struct sigaction prev = g_prev[sig];
  if (crash_hooked(sig) && g_push) g_push();
  if (prev.sa_flags & SA_RESETHAND) crash_unhook(sig);  // the kernel has restored the default, as untraced
  errno = saved;
  if (prev.sa_flags & SA_SIGINFO)
    prev.sa_sigaction(sig, si, ctx);
  else
    prev.sa_handler(sig);
  saved = errno;
  struct sigaction now {};
  sigset_t pending;
  sigpending(&pending);
  const bool fault = si && si->si_code > 0 && (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL);
  if (sigaction(sig, nullptr, &now) == 0 && !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL &&
      (fault || sigismember(&pending, sig) == 1) && g_flush)
    g_flush(sig);
  errno = saved;
}

}  // namespace

void install_crash_hook(void (*flush)(int), void (*push)()) {
  g_flush = flush;
  g_push = push;
  for (int sig : kCrashSignals) {
    struct sigaction old {};
    if (crash_hooked(sig) || sigaction(sig, nullptr, &old) != 0) continue;
    const bool dfl = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;
    const bool ign = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN;
    if (ign || (!dfl && !push)) continue;
    struct sigaction sa {};
    g_prev[sig] = old;  // the default here; a forked child may hook again a signal its parent chained
    if (dfl) {
      sa.sa_handler = &on_crash;
      sa.sa_flags = SA_RESTART;
      sigemptyset(&sa.sa_mask);
    } else {  // chained: delivered as the program's handler would be (its mask, its flags)
      sa = old;
      sa.sa_sigaction = &on_chained;
      sa.sa_flags |= SA_SIGINFO;
    }
    g_hooked |= 1u << sig;
    if (sigaction(sig, &sa, nullptr) != 0) g_hooked &= ~(1u << sig);
  }
}

bool is_crash_hook(const struct sigaction& a) {
  return (a.sa_flags & SA_SIGINFO) ? a.sa_sigaction == &on_chained : a.sa_handler == &on_crash;
}

struct sigaction crash_previous(int sig) {
  struct sigaction a {};
  if (sig > 0 && sig < 32 && (g_prev[sig].sa_flags & SA_SIGINFO ? g_prev[sig].sa_sigaction != nullptr
                                                                  : g_prev[sig].sa_handler != SIG_DFL))
    return g_prev[sig];
  a.sa_handler = SIG_DFL;
  return a;
}

bool crash_hooked(int sig) { return sig > 0 && sig < 32 && (g_hooked.load() >> sig & 1u); }

void crash_unhook(int sig) {
  if (sig > 0 && sig < 32) g_hooked &= ~(1u << sig);
}

}  // namespace archbench::trace
