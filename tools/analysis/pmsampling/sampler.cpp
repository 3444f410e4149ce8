// archbench_pmsampler: the process that samples the GPU for tools/archbench_topdown.py --timeline
// (--start before, the default). PM sampling counts the whole device, whichever process runs on it,
// so the enable, configuration and decoding of libarchbench_pmsampling (loaded here by cuInit, through
// CUDA_INJECTION64_PATH, with ARCHBENCH_PM_ROLE=sampler and ARCHBENCH_PM_START=early) are done in this
// process, started and ready before the program is; the program's own process carries only the
// library's kernel records (ARCHBENCH_PM_START=outside).
//
// It runs nothing on the GPU and makes no context. It samples until its standard input ends: the
// command closes it once the program has exited, and a command that dies closes it too. Then it
// returns from main, and the library stops the sampling, decodes the rest and writes its end record.
// Exit status: 0; 2 where the driver or the device asked for (ARCHBENCH_PM_DEVICE) is not there; 3
// where it sees several devices and none was asked for (the command then samples inside the program,
// on the device of its first context).
#include <cuda.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

int sampler_main() {
  // Ended by its standard input only (Ctrl-C reaches the program and the command, not this).
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGQUIT, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN);
  const CUresult r = cuInit(0);
  int count = 0;
  if (r != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1) {
    const char* name = "?";
    cuGetErrorName(r, &name);
    std::fprintf(stderr, "archbench_pmsampler: no CUDA device (cuInit: %s)\n", r != CUDA_SUCCESS ? name : "no device");
    return 2;
  }
  const char* asked = std::getenv("ARCHBENCH_PM_DEVICE");
  if (asked && *asked) {
    char* end = nullptr;
    const long d = std::strtol(asked, &end, 10);
    if (*end || d < 0 || d >= count) {
      std::fprintf(stderr, "archbench_pmsampler: ARCHBENCH_PM_DEVICE=%s is not a device of this process (it sees %d)\n",
                   asked, count);
      return 2;
    }
  } else if (count != 1) {
    std::fprintf(stderr, "archbench_pmsampler: %d devices and none asked for (ARCHBENCH_PM_DEVICE)\n", count);
    return 3;
  }
  char buf[256];
  for (;;) {
    const ssize_t n = read(0, buf, sizeof buf);
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    break;
  }
  return 0;
}

#ifndef ARCHBENCH_PMSAMPLER_NO_MAIN  // tests/analysis/pmsampling/mock_device.cpp has its own
int main() { return sampler_main(); }
#endif
