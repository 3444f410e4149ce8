// archbench_trace_behave: small OpenCL programs that do what real programs do around the API,
// for the tracer's "unobtrusive" checks (tests/analysis/trace/corpus.py): each prints only deterministic
// lines, so that its stdout and stderr traced must equal them untraced, byte for byte.
//
//   archbench_trace_behave sleep        six blocking calls of 300 ms each, made once (no retry on
//                                       EINTR): nanosleep, poll, select, epoll_wait, sigtimedwait,
//                                       semtimedop; exit 3 if one returned early or was interrupted
//   archbench_trace_behave fork         a child that never calls OpenCL, then the parent's copies
//   archbench_trace_behave exec         a child that execs /bin/echo
//   archbench_trace_behave threads      three threads enqueue copies on one queue
//   archbench_trace_behave signals      the program's own SIGUSR1, SIGALRM and SIGPROF handlers
//                                       (setitimer), and the dispositions it reads back
//   archbench_trace_behave thread-exit  a second thread calls exit(5)
//   archbench_trace_behave _exit        _exit(7) after OpenCL work
//   archbench_trace_behave segv         copies, then a null-pointer write (dies of SIGSEGV)
//   archbench_trace_behave exec-self    copies, then execs itself (same pid, same name) into
//                                       exec-into: more copies, exit 5
//   archbench_trace_behave exec-other   the same, exec'd under another name (argv[0] behave-image2):
//                                       the new image's raw file has another name
//   archbench_trace_behave sigpipe      copies, then a write to a pipe with no reader (dies of SIGPIPE)
//   archbench_trace_behave die N        copies, then signal N sent to itself (dies of it)
//   archbench_trace_behave wait         copies, then sleeps up to 60 s (until a signal kills it)
//   archbench_trace_behave daemon       forks: the parent copies and exits 0; the child leaves the
//                                       terminal's streams (/dev/null), waits 1 s, then copies
//
// Every mode first makes a context, a queue and a blocking copy (so a tracer records something).
// Exit 77 without an OpenCL device.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ipc.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

cl_context g_ctx;
cl_command_queue g_q;
cl_mem g_buf;

void setup() {
  cl_platform_id p;
  cl_device_id d;
  cl_uint n = 0;
  if (clGetPlatformIDs(1, &p, &n) != CL_SUCCESS || n == 0 || clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, nullptr) != CL_SUCCESS) {
    printf("no OpenCL device\n");
    exit(77);
  }
  cl_int err;
  g_ctx = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err);
  g_q = clCreateCommandQueue(g_ctx, d, 0, &err);
  g_buf = clCreateBuffer(g_ctx, CL_MEM_READ_WRITE, 1 << 16, nullptr, &err);
  if (!g_buf) {
    printf("OpenCL setup failed: %d\n", err);
    exit(1);
  }
}

void copies(int n) {
  std::vector<char> host(1 << 16, 1);
  for (int i = 0; i < n; ++i) {
    clEnqueueWriteBuffer(g_q, g_buf, CL_TRUE, 0, host.size(), host.data(), 0, nullptr, nullptr);
    clEnqueueReadBuffer(g_q, g_buf, CL_TRUE, 0, host.size(), host.data(), 0, nullptr, nullptr);
  }
  clFinish(g_q);
}

double ms_since(const timespec& t0) {
  timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return double(t1.tv_sec - t0.tv_sec) * 1e3 + double(t1.tv_nsec - t0.tv_nsec) / 1e6;
}

// A busy thread beside the sleeps: the sampler is at work while they wait.
std::atomic<bool> g_stop{false};
void spin() {
  volatile double x = 1;
  while (!g_stop) x = x * 1.0000001 + 1e-9;
}

int sleeps() {
  std::thread busy(spin);
  int semid = semget(IPC_PRIVATE, 1, 0600);
  int ep = epoll_create1(0);
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  struct Call { const char* name; std::function<int()> f; };
  Call calls[] = {
      {"nanosleep", [] { timespec d{0, 300000000}; return nanosleep(&d, nullptr); }},
      {"poll", [] { return poll(nullptr, 0, 300); }},
      {"select", [] { timeval tv{0, 300000}; return select(0, nullptr, nullptr, nullptr, &tv); }},
      {"epoll_wait", [&] { epoll_event e; return epoll_wait(ep, &e, 1, 300); }},
      {"sigtimedwait", [&] { timespec d{0, 300000000}; return sigtimedwait(&usr1, nullptr, &d); }},
      {"semtimedop", [&] { sembuf op{0, -1, 0}; timespec d{0, 300000000}; return semtimedop(semid, &op, 1, &d); }},
  };
  int bad = 0;
  for (auto& c : calls) {
    timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    errno = 0;
    c.f();
    int e = errno;
    double took = ms_since(t0);
    if (e == EINTR || took < 0.95 * 300) {
      fprintf(stderr, "%s returned after %.1f ms of 300 (%s)\n", c.name, took, strerror(e));
      ++bad;
    }
    printf("%s: %s\n", c.name, e == EINTR ? "interrupted" : took < 0.95 * 300 ? "short" : "full time");
  }
  g_stop = true;
  busy.join();
  semctl(semid, 0, IPC_RMID);
  close(ep);
  return bad ? 3 : 0;
}

volatile sig_atomic_t g_usr1, g_alrm, g_prof;

int signals() {
  struct sigaction sa {};
  sa.sa_handler = [](int s) { (s == SIGUSR1 ? g_usr1 : s == SIGALRM ? g_alrm : g_prof) = 1; };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGALRM, &sa, nullptr);
  signal(SIGPROF, sa.sa_handler);
  raise(SIGUSR1);
  itimerval it{{0, 0}, {0, 50000}};
  setitimer(ITIMER_REAL, &it, nullptr);
  itimerval prof{{0, 1000}, {0, 1000}};
  setitimer(ITIMER_PROF, &prof, nullptr);
  volatile double x = 1;
  for (int i = 0; i < 2000 && !(g_alrm && g_prof); ++i) {  // up to 2 s: CPU time for ITIMER_PROF
    timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (ms_since(t0) < 1) x = x * 1.0000001;
  }
  itimerval off{};
  setitimer(ITIMER_PROF, &off, nullptr);
  copies(2);
  printf("SIGUSR1 handled: %s\nSIGALRM handled: %s\nSIGPROF handled by the program: %s\n", g_usr1 ? "yes" : "no",
         g_alrm ? "yes" : "no", g_prof ? "yes" : "no");
  struct sigaction old {};
  sigaction(SIGSEGV, nullptr, &old);
  // Untraced this is the runtime's (PoCL's LLVM installs one) or the default; traced, the same.
  printf("SIGSEGV disposition is the default: %s\n", old.sa_handler == SIG_DFL ? "yes" : "no");
  return g_usr1 && g_alrm && g_prof ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "daemon") {  // before any OpenCL call: OpenCL objects do not survive a fork
    if (fork() != 0) {
      setup();
      copies(1);
      printf("parent exits\n");
      return 0;
    }
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0), dup2(null, 1), dup2(null, 2);
    close(null);
    sleep(1);
    setup();
    copies(2);
    return 0;
  }
  setup();
  copies(1);
  if (mode == "sleep") return sleeps();
  if (mode == "fork" || mode == "exec") {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      if (mode == "exec") {
        execl("/bin/echo", "echo", "the exec'd child ran", static_cast<char*>(nullptr));
        _exit(127);
      }
      volatile double x = 1;
      for (int i = 0; i < 20000000; ++i) x = x * 1.0000001;  // work, no OpenCL
      printf("child done\n");
      exit(0);  // atexit handlers run here too: the tracer's must write nothing
    }
    int status = 0;
    waitpid(pid, &status, 0);
    copies(2);
    printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
  }
  if (mode == "threads") {
    std::vector<std::thread> ts;
    for (int i = 0; i < 3; ++i) ts.emplace_back([] { copies(3); });
    for (auto& t : ts) t.join();
    printf("threads done\n");
    return 0;
  }
  if (mode == "signals") return signals();
  if (mode == "thread-exit") {
    std::thread t([] { copies(2); printf("exiting from a thread\n"); fflush(stdout); exit(5); });
    t.join();
    return 1;  // never reached
  }
  if (mode == "_exit") {
    copies(2);
    printf("calling _exit\n");
    fflush(stdout);
    _exit(7);
  }
  if (mode == "segv") {
    copies(2);
    printf("about to crash\n");
    fflush(stdout);
    *static_cast<volatile int*>(nullptr) = 1;
    return 1;
  }
  if (mode == "exec-self" || mode == "exec-other") {
    printf("exec'ing itself\n");
    fflush(stdout);
    execl("/proc/self/exe", mode == "exec-self" ? argv[0] : "behave-image2", "exec-into", static_cast<char*>(nullptr));
    return 127;
  }
  if (mode == "exec-into") {
    copies(2);
    printf("the new image ran\n");
    return 5;
  }
  if (mode == "sigpipe") {
    copies(2);
    printf("writing to a pipe nobody reads\n");
    fflush(stdout);
    int fd[2];
    if (pipe(fd) != 0) return 1;
    close(fd[0]);
    ssize_t n = write(fd[1], "x", 1);
    return n < 0 ? 4 : 1;  // never reached: SIGPIPE kills it
  }
  if (mode == "die" && argc > 2) {
    copies(2);
    printf("sending myself signal %s\n", argv[2]);
    fflush(stdout);
    kill(getpid(), atoi(argv[2]));
    sleep(5);
    return 1;  // never reached
  }
  if (mode == "wait") {
    printf("waiting\n");
    fflush(stdout);
    sleep(60);
    return 0;
  }
  fprintf(stderr, "usage: archbench_trace_behave sleep|fork|exec|threads|signals|thread-exit|_exit|segv|exec-self|"
                  "exec-other|sigpipe|die N|wait|daemon\n");
  return 2;
}
