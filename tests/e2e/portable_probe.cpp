// The portable build's probe (tests/e2e/needed.py): a program built with cmake/portable.cmake's flags
// that makes the glibc calls a portable build pins or defines (threads, timed waits and locks, stat,
// dlopen, the math of libm, exceptions) and checks that its static constructors ran.
#include <dlfcn.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <thread>

static int constructed = 0;
static struct Constructor {
  Constructor() { constructed = 42; }
} constructor;

int main(int argc, char** argv) {
  if (constructed != 42) {
    std::fprintf(stderr, "portable probe: static constructors did not run\n");
    return 3;
  }
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread t([&] {
    std::lock_guard<std::mutex> lock(m);
    done = true;
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return done; });
  }
  t.join();
  std::shared_timed_mutex rw;  // its timed locks are pthread_rwlock_clock*lock (glibc 2.34)
  if (!rw.try_lock_for(std::chrono::milliseconds(10))) return 6;
  rw.unlock();
  if (!rw.try_lock_shared_for(std::chrono::milliseconds(10))) return 6;
  rw.unlock_shared();
  auto shared = std::make_shared<int>(argc);
  struct stat st;
  if (stat(argv[0], &st) != 0 || !std::filesystem::is_regular_file(argv[0])) {
    std::fprintf(stderr, "portable probe: stat of %s failed\n", argv[0]);
    return 4;
  }
  void* libm = dlopen("libm.so.6", RTLD_NOW);
  if (!libm || !dlsym(libm, "cos")) {
    std::fprintf(stderr, "portable probe: dlopen: %s\n", dlerror());
    return 5;
  }
  const double x = std::exp(0.5 * *shared) + std::log(1.0 + argc) + std::pow(2.0, argc) + std::hypot(3.0, 4.0);
  try {
    throw std::runtime_error("caught");
  } catch (const std::exception& e) {
    std::printf("portable probe: %s, %.4f, constructors ran, done=%d\n", e.what(), x, int(done));
  }
  return 0;
}
