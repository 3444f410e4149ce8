// latency: one thread chases pointers (seed 000 Fig. 6 and Fig. 10), the CUDA twin of
// kernels/opencl/latency.cl. The chain is a random single cycle over the cache lines of the
// working set, so every hop waits for the last; the last index is stored so nothing is dead.
// The loads are plain global loads through L1 and L2, as in the OpenCL kernel.
// chase_ptr_sm (CUDA only) runs the same walk on one chosen SM: the L2 is spread over the chip,
// so its load-to-use latency depends on the SM's distance to it (on the H100, 268.8 to 300.3
// cycles), and a walk on whatever SM the scheduler picks measures a different point each run.
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
__device__ __forceinline__ void walk_ptr(const char* __restrict__ chain, unsigned long long* __restrict__ out,
                                         const uint start, const uint hops) {
  const char* p = chain + start;
  for (uint i = 0; i < hops; ++i) p = *reinterpret_cast<const char* const*>(p);
  out[0] = (unsigned long long)(p - chain);
}

extern "C" __global__ void chase_ptr(const char* __restrict__ chain, unsigned long long* __restrict__ out,
                                     const uint start, const uint hops) {
  walk_ptr(chain, out, start, hops);
}

// chase_ptr on SM `sm` only: launched as several one-thread blocks per SM, so that the
// scheduler puts at least one on every SM; a block elsewhere returns at once. Blocks that land
// on SM `sm` together walk the identical chain and store the same offset; they go in step (a
// trailing one finds the leader's lines in L1), so the time is one chain's. Where none landed
// there, out[0] keeps its poison and the host's check says so.
extern "C" __global__ void chase_ptr_sm(const char* __restrict__ chain, unsigned long long* __restrict__ out,
                                        const uint start, const uint hops, const uint sm) {
  uint id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  if (id != sm) return;
  walk_ptr(chain, out, start, hops);
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
