// runtime: kernels the CUDA backend itself launches (not benchmarks).
#include "archbench.cuh"

// Holds the stream until the host has submitted a whole batch, so that submission stays
// outside the timed window: spins until *release is set, or gives up after `timeout_ns`
// (the host may be unable to submit more while the queue is full) and says so in *timed_out.
extern "C" __global__ void archbench_hold(volatile int* release, int* timed_out, ulong timeout_ns) {
  ulong start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*release == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > timeout_ns) {
      *timed_out = 1;
      return;
    }
  }
}

// The SM copy (CopyMethod::sm, and zero copy): the SMs copy between device memory, a peer's, and
// page-locked host memory mapped into the device's address space, 16 bytes a thread per step
// (the tail byte by byte).
extern "C" __global__ void archbench_copy(const uchar* __restrict__ src, uchar* __restrict__ dst, ulong bytes) {
  const size_t i = global_id(), n = global_size();
  const size_t words = bytes / 16;
  const uint4* s = reinterpret_cast<const uint4*>(src);
  uint4* d = reinterpret_cast<uint4*>(dst);
  for (size_t k = i; k < words; k += n) d[k] = s[k];
  for (size_t k = words * 16 + i; k < bytes; k += n) dst[k] = src[k];
}
