// memory: device-memory bandwidth.
//  - stream kernels copy, mul (BabelStream's "scale"), add, triad, dot over T (double by default);
//  - load_store: out = in with vector type VT, one vector per work-item (seed 000 Fig. 5);
//  - load_store_reuse: TRIPS copies per work-item over a cache-resident pair of buffers
//    (seed 000 Fig. 9: its ITERATIONS loop, each trip on its own element);
//  - stride_read / stride_write: seed 002 formula 1, address = (gid*stride + n) & (size-1),
//    n stepping by 32768 words, 16 accesses per loop trip, LOOPS trips;
//  - row_read / col_read / row_write / col_write: seed 002 section 2.3.1, each work-item
//    owns BPW bytes of a byte array, laid out per work-item (row) or interleaved (column).
// Specialised with T (stream element), DOT_WG, VT, TRIPS, LOOPS, BPW: a kernel is compiled only
// when its parameters are defined, so each program holds the kernels of one workload.
#if IS_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#ifdef T
// PER_ITEM elements a work-item, a global size apart.
#ifndef PER_ITEM
#define PER_ITEM 1
#endif
#define EACH(i) for (size_t i = get_global_id(0), k_ = 0; k_ < PER_ITEM; ++k_, i += get_global_size(0))

__kernel void stream_copy(__global const T* restrict a, __global T* restrict c) {
  EACH(i) c[i] = a[i];
}

__kernel void stream_mul(__global T* restrict b, __global const T* restrict c, const T scalar) {
  EACH(i) b[i] = scalar * c[i];
}

__kernel void stream_add(__global const T* restrict a, __global const T* restrict b, __global T* restrict c) {
  EACH(i) c[i] = a[i] + b[i];
}

__kernel void stream_triad(__global T* restrict a, __global const T* restrict b, __global const T* restrict c,
                           const T scalar) {
  EACH(i) a[i] = b[i] + scalar * c[i];
}

#ifdef DOT_WG
// Work-group g sums a*b over its own contiguous chunk and writes one partial sum; the host
// adds the partials (as BabelStream does). Inside the chunk, work-items stride by the group
// size (coalesced on a GPU) or, with DOT_CONTIGUOUS (CPUs, which run a work-item's loop
// serially), each takes its own contiguous run.
__kernel void stream_dot(__global const T* restrict a, __global const T* restrict b, __global T* restrict sums,
                         const ulong n) {
  __local T scratch[DOT_WG];
  const size_t lid = get_local_id(0);
  // Whole DOT_WG elements a chunk: every group starts aligned (memory.cu says why).
  const size_t chunk = ((n + get_num_groups(0) - 1) / get_num_groups(0) + DOT_WG - 1) / DOT_WG * DOT_WG;
  const size_t begin = get_group_id(0) * chunk;
  const size_t end = min(begin + chunk, (size_t)n);
  T s = 0;
#if DOT_CONTIGUOUS
  const size_t run = (chunk + DOT_WG - 1) / DOT_WG;
  const size_t first = begin + lid * run, last = min(first + run, end);
  for (size_t i = first; i < last; ++i) s += a[i] * b[i];
#else
  for (size_t i = begin + lid; i < end; i += DOT_WG) s += a[i] * b[i];
#endif
  scratch[lid] = s;
  for (size_t w = DOT_WG / 2; w > 0; w /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < w) scratch[lid] += scratch[lid + w];
  }
  if (lid == 0) sums[get_group_id(0)] = scratch[0];
}
#endif  // DOT_WG
#endif  // T

#ifdef VT
__kernel void load_store(__global const VT* restrict in, __global VT* restrict out) {
  const size_t i = get_global_id(0);
  out[i] = in[i];
}
#ifdef TRIPS
// Trip j of work-item g copies element (g + j*items) & mask: a load and a store every trip
// (the seed's a[i] = b[i] repeated would be one copy after compilation), neighbouring
// work-items on neighbouring elements, the buffers reused from cache.
__kernel void load_store_reuse(__global const VT* restrict in, __global VT* restrict out, const uint mask) {
  const uint g = (uint)get_global_id(0), items = (uint)get_global_size(0);
  for (int j = 0; j < TRIPS; ++j) {
    const uint k = (g + (uint)j * items) & mask;
    out[k] = in[k];
  }
}
#endif  // TRIPS
#endif  // VT

#ifdef LOOPS
// Formula 1: 16 reads per trip; the sum is stored so that no read is dead.
__kernel void stride_read(__global const float* restrict data, __global float* restrict out, const uint stride,
                          const uint mask) {
  const uint s = (uint)get_global_id(0) * stride;
  uint n = 0;
  float sum = 0.0f;
  for (int t = 0; t < LOOPS; ++t) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      sum += data[(s + n) & mask];
      n += 32768u;
    }
  }
  out[get_global_id(0)] = sum;
}

// Formula 1 for writes: the value written depends on the work-item and the access.
__kernel void stride_write(__global float* restrict data, const uint stride, const uint mask) {
  const uint gid = (uint)get_global_id(0);
  const uint s = gid * stride;
  uint n = 0;
  for (int t = 0; t < LOOPS; ++t) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      data[(s + n) & mask] = (float)(gid + n);
      n += 32768u;
    }
  }
}

#endif  // LOOPS

#ifdef BPW
// Row major: work-item g owns bytes [g*BPW, (g+1)*BPW). Column major: byte k of work-item
// g is at k*items + g, so neighbouring work-items touch neighbouring bytes.
#define ROW(g, k, items) ((size_t)(g) * BPW + (k))
#define COL(g, k, items) ((size_t)(k) * (items) + (g))

#define READER(name, AT)                                                              \
  __kernel void name(__global const uchar* restrict data, __global uint* restrict out) { \
    const size_t g = get_global_id(0), items = get_global_size(0);                 \
    uint sum = 0;                                                                  \
    for (int k = 0; k < BPW; ++k) sum += data[AT(g, k, items)];                    \
    out[g] = sum;                                                                  \
  }
#define WRITER(name, AT)                                                               \
  __kernel void name(__global uchar* restrict data) {                               \
    const size_t g = get_global_id(0), items = get_global_size(0);                  \
    for (int k = 0; k < BPW; ++k) data[AT(g, k, items)] = (uchar)(g * 7 + k);       \
  }
READER(row_read, ROW)
READER(col_read, COL)
WRITER(row_write, ROW)
WRITER(col_write, COL)
#endif  // BPW
