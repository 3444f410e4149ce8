// constant: constant-memory read bandwidth (seed 002 section 2.3.3, Fig. 22). The host fills
// a __constant array of mask+1 words with formula 2, chain[i] = (i + stride) % size; each
// work-item starts at its global id mod size and follows the chain p = chain[p] for `hops`
// dependent reads. The final index is stored, so no read is dead; the array's contents, the
// hop count and the mask are all runtime values, so nothing folds.
__kernel void chase(__constant uint* restrict chain, __global uint* restrict out, const uint hops, const uint mask) {
  const size_t gid = get_global_id(0);
  uint p = (uint)gid & mask;
  for (uint i = 0; i < hops; ++i) p = chain[p];
  out[gid] = p;
}
