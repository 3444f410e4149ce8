// local: local-memory bandwidth against the stride between work-items (seed 002 section
// 2.3.2, Figs. 20-21): bank conflicts.
// Each work-group owns a __local float array of WORDS words (a power of two). Access k
// (0-based over the whole loop) of the work-item with local id l is at
//   word(l, k) = (l*stride + k*STEP) & (WORDS - 1)
// which is formula 1 with the local id for gid and the local array for the size. STEP is a
// multiple of 32 words, so every access of a work-item falls in the same bank of a 32-bank
// (or 16-bank) memory of 4-byte words: the work-items of one warp hit banks l*stride mod 32,
// i.e. stride 2 gives 2-way conflicts, stride 32 32-way, odd strides none.
// 16 accesses per trip, LOOPS trips; stride is a runtime argument, so nothing folds.
// Specialised with WORDS, LOOPS.
#define STEP 32u
#define MASK ((uint)(WORDS) - 1u)

// Fills the local array from `in` (coalesced), then reads it with the stride; the sum of the
// values read, in order, is stored per work-item, so no read is dead and the host can tell
// which words were read (the input is WORDS distinct random floats).
__kernel void local_read(__global const float* restrict in, __global float* restrict out, const uint stride) {
  __local float lds[WORDS];
  const uint l = (uint)get_local_id(0), wg = (uint)get_local_size(0);
  for (uint i = l; i < WORDS; i += wg) lds[i] = in[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint s = l * stride;
  uint n = 0;
  float sum = 0.0f;
  for (int t = 0; t < LOOPS; ++t) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      sum += lds[(s + n) & MASK];
      n += STEP;
    }
  }
  out[get_global_id(0)] = sum;
}

// Fills the local array with a sentinel (-1), writes the value k*wg + l (as a float, exact)
// at word(l, k), and copies the array out to this group's slice of `out`, so the host can
// check that every word holds the value of a work-item that writes there (or the sentinel
// where none does).
__kernel void local_write(__global float* restrict out, const uint stride) {
  __local float lds[WORDS];
  const uint l = (uint)get_local_id(0), wg = (uint)get_local_size(0);
  for (uint i = l; i < WORDS; i += wg) lds[i] = -1.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint s = l * stride;
  uint n = 0, v = l;
  for (int t = 0; t < LOOPS; ++t) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      lds[(s + n) & MASK] = (float)v;
      n += STEP;
      v += wg;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  __global float* slice = out + (size_t)get_group_id(0) * WORDS;
  for (uint i = l; i < WORDS; i += wg) slice[i] = lds[i];
}
