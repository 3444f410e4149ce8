// Linked into every executable and shared library of a portable build (cmake/portable.cmake): the
// jumps to the old versions of glibc's functions (generated), and the glibc symbols newer than 2.28
// that have no older version, defined here in terms of ones that do. Each definition is hidden:
// it serves the object it is linked into and interposes on nothing else.
#include <pthread.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "glibc_jumps.h"

#define HIDDEN __attribute__((visibility("hidden")))

extern "C" {

// stat and its family became functions of their own in glibc 2.33; before, <sys/stat.h> turned
// them into calls of __xstat and friends, which every glibc still exports. 1 is _STAT_VER on x86-64.
int __xstat(int, const char*, struct stat*);
int __fxstat(int, int, struct stat*);
int __lxstat(int, const char*, struct stat*);
int __fxstatat(int, int, const char*, struct stat*, int);
int __xstat64(int, const char*, struct stat64*);
int __fxstat64(int, int, struct stat64*);
int __lxstat64(int, const char*, struct stat64*);
int __fxstatat64(int, int, const char*, struct stat64*, int);
__asm__(".symver __xstat,__xstat@GLIBC_2.2.5");
__asm__(".symver __fxstat,__fxstat@GLIBC_2.2.5");
__asm__(".symver __lxstat,__lxstat@GLIBC_2.2.5");
__asm__(".symver __fxstatat,__fxstatat@GLIBC_2.4");
__asm__(".symver __xstat64,__xstat64@GLIBC_2.2.5");
__asm__(".symver __fxstat64,__fxstat64@GLIBC_2.2.5");
__asm__(".symver __lxstat64,__lxstat64@GLIBC_2.2.5");
__asm__(".symver __fxstatat64,__fxstatat64@GLIBC_2.4");
HIDDEN int stat(const char* path, struct stat* buf) noexcept { return __xstat(1, path, buf); }
HIDDEN int fstat(int fd, struct stat* buf) noexcept { return __fxstat(1, fd, buf); }
HIDDEN int lstat(const char* path, struct stat* buf) noexcept { return __lxstat(1, path, buf); }
HIDDEN int fstatat(int dirfd, const char* path, struct stat* buf, int flags) noexcept {
  return __fxstatat(1, dirfd, path, buf, flags);
}
HIDDEN int stat64(const char* path, struct stat64* buf) noexcept { return __xstat64(1, path, buf); }
HIDDEN int fstat64(int fd, struct stat64* buf) noexcept { return __fxstat64(1, fd, buf); }
HIDDEN int lstat64(const char* path, struct stat64* buf) noexcept { return __lxstat64(1, path, buf); }
HIDDEN int fstatat64(int dirfd, const char* path, struct stat64* buf, int flags) noexcept {
  return __fxstatat64(1, dirfd, path, buf, flags);
}

// gettid: glibc 2.30.
HIDDEN pid_t gettid(void) noexcept { return pid_t(syscall(SYS_gettid)); }

// The waits on a chosen clock (glibc 2.30), which libstdc++ uses for steady_clock timeouts: the
// same deadline on CLOCK_REALTIME, what is left of it on `clock` added to the time now.
static timespec realtime_deadline(clockid_t clock, const timespec* abstime) {
  timespec now, real;
  clock_gettime(clock, &now);
  clock_gettime(CLOCK_REALTIME, &real);
  long long left = (abstime->tv_sec - now.tv_sec) * 1000000000LL + (abstime->tv_nsec - now.tv_nsec);
  const long long t = real.tv_sec * 1000000000LL + real.tv_nsec + (left > 0 ? left : 0);
  return timespec{time_t(t / 1000000000LL), long(t % 1000000000LL)};
}
HIDDEN int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock,
                                  const timespec* abstime) {
  const timespec deadline = realtime_deadline(clock, abstime);
  return pthread_cond_timedwait(cond, mutex, &deadline);
}
HIDDEN int pthread_mutex_clocklock(pthread_mutex_t* mutex, clockid_t clock, const timespec* abstime) noexcept {
  const timespec deadline = realtime_deadline(clock, abstime);
  return pthread_mutex_timedlock(mutex, &deadline);
}
// std::shared_timed_mutex's timed locks (its try_lock_for: TopDown's launch gate), GLIBC_2.34.
HIDDEN int pthread_rwlock_clockwrlock(pthread_rwlock_t* lock, clockid_t clock, const timespec* abstime) noexcept {
  const timespec deadline = realtime_deadline(clock, abstime);
  return pthread_rwlock_timedwrlock(lock, &deadline);
}
HIDDEN int pthread_rwlock_clockrdlock(pthread_rwlock_t* lock, clockid_t clock, const timespec* abstime) noexcept {
  const timespec deadline = realtime_deadline(clock, abstime);
  return pthread_rwlock_timedrdlock(lock, &deadline);
}

// arc4random (glibc 2.36), std::random_device's source: the kernel's, through getrandom (2.25).
HIDDEN void arc4random_buf(void* buf, std::size_t n) noexcept {
  for (std::size_t done = 0; done < n;) {
    const ssize_t r = getrandom(static_cast<char*>(buf) + done, n - done, 0);
    if (r > 0) done += std::size_t(r);
  }
}
HIDDEN std::uint32_t arc4random(void) noexcept {
  std::uint32_t v;
  arc4random_buf(&v, sizeof v);
  return v;
}
HIDDEN std::uint32_t arc4random_uniform(std::uint32_t bound) noexcept {
  if (bound < 2) return 0;
  const std::uint32_t floor = -bound % bound;  // rejects the values that would bias the result
  for (;;)
    if (const std::uint32_t v = arc4random(); v >= floor) return v % bound;
}

// __libc_single_threaded (glibc 2.32): libstdc++ skips atomic reference counts while it is true.
// Always false here: always atomic, correct whatever the number of threads.
HIDDEN char __libc_single_threaded = 0;

// The start-up contract. Since glibc 2.34 the start file (Scrt1.o) passes no initialiser to
// __libc_start_main@GLIBC_2.34, which runs the executable's constructors itself; the version of
// 2.2.5 that every glibc keeps runs only the initialiser it is given, which the start files of
// glibc <= 2.33 provided. So: call the old version, with an initialiser that runs the
// executable's _init and .init_array, as those start files' __libc_csu_init did. (In a shared
// library this is never called; its constructors are the loader's business.)
typedef int (*main_fn)(int, char**, char**);
typedef void (*init_fn)(int, char**, char**);
int archbench_libc_start_main_2_2_5(main_fn, int, char**, init_fn, void (*)(void), void (*)(void), void*);
__asm__(".symver archbench_libc_start_main_2_2_5,__libc_start_main@GLIBC_2.2.5");
void _init(void);
// Weak: a shared library's link defines neither (and never calls this).
extern init_fn __init_array_start[] HIDDEN __attribute__((weak));
extern init_fn __init_array_end[] HIDDEN __attribute__((weak));

static void archbench_csu_init(int argc, char** argv, char** envp) {
  _init();
  const std::size_t n = std::size_t(__init_array_end - __init_array_start);
  for (std::size_t i = 0; i < n; ++i) __init_array_start[i](argc, argv, envp);
}

HIDDEN int __libc_start_main(main_fn main, int argc, char** argv, init_fn, void (*)(void), void (*rtld_fini)(void),
                             void* stack_end) {
  return archbench_libc_start_main_2_2_5(main, argc, argv, archbench_csu_init, nullptr, rtld_fini, stack_end);
}

}  // extern "C"
