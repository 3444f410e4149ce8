// The tracers' shared code (tools/analysis/trace/common): what the records depend on.
#include "tools/analysis/common/common.hpp"

#include <gtest/gtest.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <atomic>
#include <functional>

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ipc.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tr = archbench::trace;

// Exported (the test is linked with -rdynamic) and not inlined, so that a path can name it.
extern "C" __attribute__((noinline)) tr::Frames trace_test_marker() {
  tr::Frames f = tr::capture(0, {});
  asm volatile("");  // keeps the call from becoming a tail call
  return f;
}

TEST(TraceCommon, Fnv1aKnownValues) {
  // The published FNV-1a 64 test vectors.
  EXPECT_EQ(tr::fnv1a("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(tr::fnv1a("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(tr::fnv1a("foobar", 6), 0x85944171f73967e8ull);
  EXPECT_EQ(tr::hex64(0xaf63dc4c8601ec8cull), "af63dc4c8601ec8c");
  EXPECT_EQ(tr::hex64(1), "0000000000000001");
}

TEST(TraceCommon, JsonEscapes) {
  EXPECT_EQ(tr::JsonLine::quote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
  char* buf = nullptr;
  size_t n = 0;
  FILE* f = open_memstream(&buf, &n);
  tr::JsonLine("kernel").unum("id", 7).str("name", "k<int>").nums("global", {4, 1, 1}).null("local").boolean("b", true).write(f);
  fclose(f);
  EXPECT_EQ(std::string(buf, n), "{\"type\":\"kernel\",\"id\":7,\"name\":\"k<int>\",\"global\":[4,1,1],\"local\":null,\"b\":true}\n");
  free(buf);
}

TEST(TraceCommon, PathNamesTheCallerInnermostFirst) {
  tr::Frames f = trace_test_marker();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(tr::symbolize(f[0]), "trace_test_marker");
  tr::PathTable t;
  uint32_t a = t.intern(f), b = t.intern(f), c = t.intern(tr::Frames(f.begin() + 1, f.end()));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(t.at(a), f);
}

// A raw file written as it goes: each call path once, as a `path` record named by its id; a
// write error (a full disk) stops the trace, says so and crashes nothing.
TEST(TraceCommon, TraceFileWritesEachPathOnceAndStopsOnAFullDisk) {
  char* buf = nullptr;
  size_t n = 0;
  tr::TraceFile t;
  t.adopt(open_memstream(&buf, &n), "memory");
  tr::Frames f = trace_test_marker();
  uint64_t a = t.path_id(f);
  EXPECT_EQ(t.path_id(f), a);
  for (int i = 0; i < 300; ++i) {  // past the 256 records that flush
    tr::JsonLine j("kernel");
    t.put(j.num("id", i).unum("path_id", a));
  }
  EXPECT_EQ(t.written(), 300u);
  t.flush();
  ASSERT_TRUE(t.close());
  std::string text(buf, n);
  free(buf);
  size_t paths = 0;
  for (size_t at = 0; (at = text.find("\"type\":\"path\",\"id\":" + std::to_string(a) + ",", at)) != std::string::npos; ++at) ++paths;
  EXPECT_EQ(paths, 1u);
  EXPECT_NE(text.find("trace_test_marker"), std::string::npos);
  EXPECT_NE(text.find("{\"type\":\"kernel\",\"id\":299,\"path_id\":" + std::to_string(a) + "}\n"), std::string::npos);

  FILE* full = fopen("/dev/full", "w");
  ASSERT_NE(full, nullptr);
  tr::TraceFile d;
  d.adopt(full, "/dev/full");
  tr::JsonLine j("kernel");
  d.put(j.num("id", 1));
  d.flush();
  EXPECT_FALSE(d.is_open());
  d.put(j);  // after the error: nothing, no crash
}

// The sampler takes wall-clock samples of a thread that sleeps (a CPU-time timer alone would
// not): waiting samples, naming the call it sleeps in.
TEST(TraceCommon, SamplerSamplesASleepingThread) {
  tr::Sampler& s = tr::sampler();
  std::string why;
  ASSERT_TRUE(s.start(2000000, &why)) << why;  // every 2 ms
  uint64_t t0 = tr::now_ns();
  timespec d{0, 200000000};
  while (nanosleep(&d, &d) == -1 && errno == EINTR) {
  }
  uint64_t t1 = tr::now_ns();
  s.stop();
  size_t in = 0;
  for (size_t i = 0; i < s.count(); ++i)
    if (s.at(i).tid == tr::this_tid() && s.at(i).t_ns >= t0 && s.at(i).t_ns <= t1 && s.at(i).wait >= 0) {
      ++in;
      EXPECT_NE(tr::syscall_name(s.at(i).wait).find("nanosleep"), std::string::npos);  // glibc: clock_nanosleep
    }
  // One sample per 2 ms of the time slept (at least 200 ms); a loaded 2-core CI machine delays
  // the sampler thread at times.
  size_t expected = size_t((t1 - t0) / 2000000);
  EXPECT_GE(in, expected / 4);
  EXPECT_LE(in, expected + 1);
  EXPECT_EQ(s.dropped(), 0u);
}

// Exported and not inlined, so that a path can name it: sleeps `ms` whatever interrupts it.
extern "C" __attribute__((noinline)) void trace_test_sleeper(int ms) {
  timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  long long ns = until.tv_nsec + ms * 1000000ll;
  until.tv_sec += ns / 1000000000;
  until.tv_nsec = ns % 1000000000;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
  }
  asm volatile("");  // not a tail call
}

extern "C" __attribute__((noinline)) void trace_test_sleeper_caller(int ms) {
  trace_test_sleeper(ms);
  asm volatile("");
}

// A thread that sleeps gets waiting samples with the stack it sleeps on (walked by the sampler
// thread, no signal), not the path of where it last ran: GPU_IDLE_CAUSE charges the wait to the
// function that waits. x86-64 only (elsewhere the samples have no stack: the writer gives them
// the last running path).
TEST(TraceCommon, WaitingSamplesHaveTheStackTheThreadSleepsOn) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "sleeping threads' stacks are walked on x86-64 only";
#endif
  tr::Sampler& s = tr::sampler();
  std::string why;
  ASSERT_TRUE(s.start(1000000, &why)) << why;
  std::atomic<int> tid{0};
  uint64_t t0 = tr::now_ns();
  std::thread sleeper([&] {
    tid = tr::this_tid();
    s.add_this_thread();
    trace_test_sleeper_caller(150);
  });
  sleeper.join();
  uint64_t t1 = tr::now_ns();
  s.stop();
  EXPECT_EQ(s.method().find("without their stacks"), std::string::npos) << s.method();
  size_t waiting = 0, named = 0;
  std::string example;
  for (size_t i = 0; i < s.count(); ++i) {
    const tr::Sampler::Sample& x = s.at(i);
    if (x.tid != tid || x.wait < 0 || x.t_ns < t0 || x.t_ns > t1) continue;
    ++waiting;
    bool sleeper_frame = false, caller_after = false;
    std::string path;
    for (int k = 0; k < x.n; ++k) {
      const std::string& f = tr::symbolize(x.pcs[k]);
      path += (k ? " < " : "") + f;
      if (f == "trace_test_sleeper") sleeper_frame = true;
      if (sleeper_frame && f == "trace_test_sleeper_caller") caller_after = true;
    }
    if (caller_after) ++named;
    if (example.empty()) example = path;
  }
  printf("%zu waiting samples, %zu through trace_test_sleeper < trace_test_sleeper_caller; e.g. %s\n", waiting, named,
         example.c_str());
  ASSERT_GT(waiting, 20u);
  EXPECT_GE(named, waiting * 9 / 10) << example;
  EXPECT_EQ(s.dropped(), 0u);
}

// The writer: a waiting sample with its own stack names it (path_from own); one without takes
// its thread's last running path (path_from last_run).
TEST(TraceCommon, TraceFileWritesAWaitingSamplesOwnStack) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "sleeping threads' stacks are walked on x86-64 only";
#endif
  tr::Sampler& s = tr::sampler();
  std::string why;
  ASSERT_TRUE(s.start(1000000, &why)) << why;
  std::thread sleeper([&] {
    s.add_this_thread();
    trace_test_sleeper_caller(50);
  });
  sleeper.join();
  s.stop();
  char* buf = nullptr;
  size_t n = 0;
  tr::TraceFile t;
  t.adopt(open_memstream(&buf, &n), "memory");
  t.samples(true);
  ASSERT_TRUE(t.close());
  std::string text(buf, n);
  free(buf);
  EXPECT_NE(text.find("\"path_from\":\"own\""), std::string::npos);
  EXPECT_NE(text.find("trace_test_sleeper_caller"), std::string::npos);
}

namespace {

double ms_since(uint64_t t0) { return double(tr::now_ns() - t0) / 1e6; }

__attribute__((noinline)) void busy_until(const std::atomic<bool>& stop) {
  volatile double x = 1;
  while (!stop.load(std::memory_order_relaxed))
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
}

}  // namespace

// Issue 16: a sampler must not shorten the program's blocking calls. Each call below is made
// once, as much real code makes it (no retry on EINTR), with the sampler at 100 us and a busy
// thread beside it; each must last its full 300 ms (at least 95%: load only makes it longer) and
// end by its timeout, and the busy thread must still be sampled.
TEST(TraceCommon, SamplerNeverInterruptsBlockingCalls) {
  std::atomic<bool> stop{false};
  std::atomic<int> busy_tid{0};
  std::thread busy([&] { busy_tid = tr::this_tid(); busy_until(stop); });
  while (!busy_tid) std::this_thread::yield();
  tr::Sampler& s = tr::sampler();
  std::string why;
  ASSERT_TRUE(s.start(100000, &why)) << why;
  s.add_this_thread();
  int semid = semget(IPC_PRIVATE, 1, 0600);
  ASSERT_GE(semid, 0);
  int ep = epoll_create1(0);
  ASSERT_GE(ep, 0);
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  struct Call { const char* name; std::function<int()> f; int want; };  // want: result at timeout
  Call calls[] = {
      {"nanosleep", [] { timespec d{0, 300000000}; return nanosleep(&d, nullptr); }, 0},
      {"poll", [] { return poll(nullptr, 0, 300); }, 0},
      {"select", [] { timeval tv{0, 300000}; return select(0, nullptr, nullptr, nullptr, &tv); }, 0},
      {"epoll_wait", [&] { epoll_event e; return epoll_wait(ep, &e, 1, 300); }, 0},
      {"sigtimedwait", [&] { timespec d{0, 300000000}; return sigtimedwait(&usr1, nullptr, &d); }, -1},
      {"semtimedop", [&] { sembuf op{0, -1, 0}; timespec d{0, 300000000}; return semtimedop(semid, &op, 1, &d); }, -1},
  };
  for (auto& c : calls) {
    uint64_t t0 = tr::now_ns();
    errno = 0;
    int r = c.f();
    int e = errno;
    double took = ms_since(t0);
    EXPECT_EQ(r, c.want) << c.name << ": " << strerror(e);
    EXPECT_NE(e, EINTR) << c.name << " was interrupted";
    EXPECT_GE(took, 0.95 * 300) << c.name << " returned early";
  }
  stop = true;
  busy.join();
  s.stop();
  semctl(semid, 0, IPC_RMID);
  close(ep);
  size_t running = 0, waiting = 0;
  for (size_t i = 0; i < s.count(); ++i) {
    if (s.at(i).tid == busy_tid && s.at(i).wait == -1 && s.at(i).n > 0) ++running;
    if (s.at(i).tid == tr::this_tid() && s.at(i).wait >= 0) ++waiting;
  }
  printf("%zu running samples of the busy thread, %zu waiting ones of this one (%s)\n", running, waiting,
         s.method().c_str());
  EXPECT_GT(running, 10u) << "the busy thread was not sampled: " << s.method();
  EXPECT_GT(waiting, 10u) << "the sleeping thread was not sampled";
}

// exit_first: what a CUPTI injection needs at exit. Each case runs in a child process and writes
// "A" for the library's exit function and "B" for an atexit handler registered after it (the
// static objects CUPTI builds lazily); the parent reads what the child wrote.
namespace {
int g_exit_fd = -1;
void exit_a() { (void)!write(g_exit_fd, "A", 1); }
void exit_b() { (void)!write(g_exit_fd, "B", 1); }

std::string run_child(void (*body)()) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    g_exit_fd = fds[1];
    body();
    _exit(3);  // body must exit
  }
  close(fds[1]);
  std::string out;
  char buf[16];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out + (WIFEXITED(status) ? " exit " + std::to_string(WEXITSTATUS(status)) : " signal");
}
}  // namespace

TEST(TraceCommon, ExitFirstRunsOnceBeforeHandlersRegisteredAfterIt) {
  // Main thread: the thread_local guard runs it before every atexit handler.
  EXPECT_EQ(run_child([] {
              tr::exit_first(exit_a);
              std::atexit(exit_b);
              std::exit(0);
            }),
            "AB exit 0");
  // Another thread calls exit: the main thread's guard does not run; registered again after the
  // late handler, it still runs first, and once.
  EXPECT_EQ(run_child([] {
              tr::exit_first(exit_a);
              std::atexit(exit_b);
              std::thread([] {
                tr::exit_first(exit_a);
                std::exit(5);
              }).join();
              _exit(4);
            }),
            "AB exit 5");
  // A forked child of a process that registered it does not run it; the parent does.
  EXPECT_EQ(run_child([] {
              tr::exit_first(exit_a);
              const pid_t pid = fork();
              if (pid == 0) std::exit(0);
              int status = 0;
              waitpid(pid, &status, 0);
              std::exit(WIFEXITED(status) ? 0 : 6);
            }),
            "A exit 0");
}

// The crash hook with `push` (the OpenCL tracer's): a handler the program had is chained, not
// replaced. One that returns leaves the program running (push before it, no end); one that restores
// the default and raises the signal again gets the end (flush) before the death.
namespace chained {
int g_pipe = -1;
volatile sig_atomic_t g_handled = 0;
void note(char c) { (void)!write(g_pipe, &c, 1); }
void push() { note('p'); }
void flush(int) { note('f'); }
void returns(int) { g_handled = 1; }
void dies(int sig) {
  signal(sig, SIG_DFL);
  raise(sig);  // pending: this handler blocks it
}
}  // namespace chained

TEST(TraceCommon, CrashHookChainsToTheProgramsHandler) {
  int fd[2];
  ASSERT_EQ(pipe(fd), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fd[0]);
    chained::g_pipe = fd[1];
    sigset_t usr;  // an earlier test may have left them blocked on this thread
    sigemptyset(&usr);
    sigaddset(&usr, SIGUSR1);
    sigaddset(&usr, SIGUSR2);
    pthread_sigmask(SIG_UNBLOCK, &usr, nullptr);
    signal(SIGUSR1, chained::returns);
    signal(SIGUSR2, chained::dies);
    signal(SIGALRM, SIG_IGN);
    archbench::trace::install_crash_hook(chained::flush, chained::push);
    if (!archbench::trace::crash_hooked(SIGUSR1) || archbench::trace::crash_hooked(SIGALRM) ||
        archbench::trace::crash_previous(SIGUSR1).sa_handler != chained::returns)
      _exit(3);
    raise(SIGALRM);  // ignored, as it was
    raise(SIGUSR1);
    if (!chained::g_handled) _exit(4);
    chained::note('|');
    raise(SIGUSR2);
    _exit(5);
  }
  close(fd[1]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::string got;
  char c;
  while (read(fd[0], &c, 1) == 1) got += c;
  close(fd[0]);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGUSR2);
  EXPECT_EQ(got, "p|pf");
}
