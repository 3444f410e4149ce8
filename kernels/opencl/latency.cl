// latency: one work-item chases pointers (seed 000 Fig. 6 and Fig. 10). The chain is a random
// single cycle over the cache lines of the working set, so every hop depends on the last and
// lands on a line the hardware could not predict; the last index is stored so nothing is dead.
__kernel void chase(__global const uint* restrict chain, __global uint* restrict out, const uint start,
                    const uint hops) {
  uint p = start;
  for (uint i = 0; i < hops; ++i) p = chain[p];
  out[0] = p;
}
