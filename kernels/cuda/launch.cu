// launch: a kernel that does next to nothing, so that its time is the cost of a launch; the
// CUDA twin of kernels/opencl/launch.cl. Thread 0 stores a runtime argument, so the host can
// tell that the launch ran.
#include "archbench.cuh"

extern "C" __global__ void empty(uint* __restrict__ out, const uint value) {
  if (global_id() == 0) out[0] = value;
}
