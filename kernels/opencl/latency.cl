// latency: one work-item chases pointers (seed 000 Fig. 6 and Fig. 10). The chain is a random
// single cycle over the cache lines of the working set, so every hop depends on the last and
// lands on a line the hardware could not predict; the last index is stored so nothing is dead.
__kernel void chase(__global const uint* restrict chain, __global uint* restrict out, const uint start,
                    const uint hops) {
  uint p = start;
  for (uint i = 0; i < hops; ++i) p = chain[p];
  out[0] = p;
}

// Many work-items chase the same chain at once (seed 000 Fig. 6's load bandwidth): work-item g
// starts at line g mod lines and stores where it ends.
__kernel void chase_many(__global const uint* restrict chain, __global uint* restrict out, const uint stride,
                         const uint lines, const uint hops) {
  const uint g = (uint)get_global_id(0);
  uint p = (g % lines) * stride;
  for (uint i = 0; i < hops; ++i) p = chain[p];
  out[g] = p;
}
