// latency: one thread chases pointers (seed 000 Fig. 6 and Fig. 10), the CUDA twin of
// kernels/opencl/latency.cl. The chain is a random single cycle over the cache lines of the
// working set, so every hop waits for the last; the last index is stored so nothing is dead.
// The loads are plain global loads through L1 and L2, as in the OpenCL kernel.
#include "archbench.cuh"

extern "C" __global__ void chase(const uint* __restrict__ chain, uint* __restrict__ out, const uint start,
                                 const uint hops) {
  uint p = start;
  for (uint i = 0; i < hops; ++i) p = chain[p];
  out[0] = p;
}

// The same walk over a chain of addresses (BufferSpec::pointers): each load's value is the next
// load's address, so nothing but the load sits between two loads (LDG.E.64 R, [R.64] after R,
// hop after hop); the last offset from the chain's start is stored.
extern "C" __global__ void chase_ptr(const char* __restrict__ chain, unsigned long long* __restrict__ out,
                                     const uint start, const uint hops) {
  const char* p = chain + start;
  for (uint i = 0; i < hops; ++i) p = *reinterpret_cast<const char* const*>(p);
  out[0] = (unsigned long long)(p - chain);
}

// Many threads chase the same chain at once (seed 000 Fig. 6's load bandwidth): thread g starts
// at line g mod lines and stores where it ends.
extern "C" __global__ void chase_many(const uint* __restrict__ chain, uint* __restrict__ out, const uint stride,
                                      const uint lines, const uint hops) {
  const uint g = (uint)global_id();
  uint p = (g % lines) * stride;
  for (uint i = 0; i < hops; ++i) p = chain[p];
  out[g] = p;
}
