// bus: device to device by the SMs (nvbandwidth's "SM copy"), the twin of the copy-engine
// on_device transfer: the first `half` bytes of the buffer copied to the next `half`, 16 bytes
// a thread per step, grid-stride, so that every SM streams.
#include "archbench.cuh"

extern "C" __global__ void sm_copy(uchar* __restrict__ data, ulong half) {
  const uint4* src = reinterpret_cast<const uint4*>(data);
  uint4* dst = reinterpret_cast<uint4*>(data + half);
  const size_t words = half / 16;
  for (size_t k = global_id(); k < words; k += global_size()) dst[k] = src[k];
}

// The device's side of seed 001's unified-memory study (bus/<backend>/reuse_*): one pass adds 1
// to every double, wherever the data is (device memory, mapped or managed host memory).
extern "C" __global__ void reuse_pass(double* __restrict__ data, ulong n) {
  for (size_t k = global_id(); k < n; k += global_size()) data[k] += 1.0;
}
