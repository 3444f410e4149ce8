// constant: read bandwidth of a small table every thread chases through (seed 002 section
// 2.3.3, Fig. 22), the CUDA twin of kernels/opencl/constant.cl: the same chain
// chain[i] = (i + stride) % size, the same start (global id & mask), the same `hops` dependent
// reads and the same stored index.
// Which path it measures differs, on purpose: OpenCL passes the table as a __constant buffer
// argument, which NVIDIA's OpenCL compiler reads from a constant bank. CUDA constant memory
// (__constant__) is a symbol that must be filled with cudaMemcpyToSymbol, and the backend's
// buffer model (every buffer a device allocation passed by pointer) has no such thing; a
// pointer argument cannot address a constant bank. So here the hops read the table through
// __ldg, the read-only (non-coherent) data cache path, the closest CUDA has for a buffer that
// no thread writes. The name stays constant/cuda/chase; the results are the same.
#include "archbench.cuh"

extern "C" __global__ void chase(const uint* __restrict__ chain, uint* __restrict__ out, const uint hops,
                                 const uint mask) {
  const size_t gid = global_id();
  uint p = (uint)gid & mask;
  for (uint i = 0; i < hops; ++i) p = __ldg(chain + p);
  out[gid] = p;
}
