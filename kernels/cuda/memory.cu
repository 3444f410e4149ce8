// memory: device-memory bandwidth, the CUDA twin of kernels/opencl/memory.cl: the same stream
// kernels (BabelStream's copy, mul, add, triad, dot), load_store per vector width (streaming,
// and with reuse: load_store_reuse, TRIPS copies over a cache-resident pair of buffers), the
// formula-1 stride sweep and row- against column-major bytes, with the same addresses, the
// same arithmetic order and the same stores, so both backends move the same bytes and the
// host references check both. A kernel is compiled only when its parameters are defined:
// T (and DOT_WG) for the stream kernels, W for load_store (VT, the OpenCL vector type name
// such as float8, has no CUDA type: vec<float, W> stands for it), LOOPS, BPW.
// NVRTC runs with --fmad=false: triad's b + scalar*c stays two roundings, as in OpenCL.
#include "archbench.cuh"

#ifdef T
// PER_ITEM elements a work-item, a global size apart (memory.cl). LD and ST: plain, or with
// STREAM_CS the evict-first (.cs) loads and stores.
#ifndef PER_ITEM
#define PER_ITEM 1
#endif
#if STREAM_CS
#define LD(p) __ldcs(&(p))
#define ST(p, v) __stcs(&(p), (v))
#else
#define LD(p) (p)
#define ST(p, v) ((p) = (v))
#endif
#define EACH(i) _Pragma("unroll") for (size_t i = global_id(), k_ = 0; k_ < PER_ITEM; ++k_, i += global_size())

extern "C" __global__ void stream_copy(const T* __restrict__ a, T* __restrict__ c) {
  EACH(i) ST(c[i], LD(a[i]));
}

extern "C" __global__ void stream_mul(T* __restrict__ b, const T* __restrict__ c, const T scalar) {
  EACH(i) ST(b[i], scalar * LD(c[i]));
}

extern "C" __global__ void stream_add(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c) {
  EACH(i) ST(c[i], LD(a[i]) + LD(b[i]));
}

extern "C" __global__ void stream_triad(T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ c,
                                        const T scalar) {
  EACH(i) ST(a[i], LD(b[i]) + scalar * LD(c[i]));
}

#ifdef DOT_WG
// Block g sums a*b over its own contiguous chunk and writes one partial sum; the host adds the
// partials. The tree reduction in shared memory is the OpenCL kernel's, barrier for barrier.
extern "C" __global__ void stream_dot(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ sums,
                                      const ulong n) {
  __shared__ T scratch[DOT_WG];
  const size_t lid = local_id();
  // The chunk rounded up to whole DOT_WG elements, so that every group starts aligned and a
  // warp's loads cover whole 32-byte sectors (an unaligned start made 3 groups in 4 read a
  // sector more per warp load: 9.4% more L1 and 5.5% more DRAM bytes on the H100).
  const size_t chunk = ((n + num_groups() - 1) / num_groups() + DOT_WG - 1) / DOT_WG * DOT_WG;
  const size_t begin = size_t(group_id()) * chunk;
  const size_t end = begin + chunk < size_t(n) ? begin + chunk : size_t(n);
  T s = 0;
#if DOT_CONTIGUOUS
  const size_t run = (chunk + DOT_WG - 1) / DOT_WG;
  const size_t first = begin + lid * run, last = first + run < end ? first + run : end;
  for (size_t i = first; i < last; ++i) s += a[i] * b[i];
#else
  for (size_t i = begin + lid; i < end; i += DOT_WG) s += a[i] * b[i];
#endif
  scratch[lid] = s;
  for (size_t w = DOT_WG / 2; w > 0; w /= 2) {
    __syncthreads();
    if (lid < w) scratch[lid] += scratch[lid + w];
  }
  if (lid == 0) sums[group_id()] = scratch[0];
}
#endif  // DOT_WG
#endif  // T

#ifdef W
// One vector of W floats per thread; vec<float, W> is aligned as OpenCL's floatW (up to 16
// bytes), so widths 4 and above move 16 bytes per load and store instruction.
extern "C" __global__ void load_store(const vec<float, W>* __restrict__ in, vec<float, W>* __restrict__ out) {
  const size_t i = global_id();
  out[i] = in[i];
}
#ifdef TRIPS
// Trip j of thread g copies element (g + j*items) & mask (memory.cl says why).
extern "C" __global__ void load_store_reuse(const vec<float, W>* __restrict__ in, vec<float, W>* __restrict__ out,
                                            const uint mask) {
  const uint g = (uint)global_id(), items = (uint)global_size();
  for (int j = 0; j < TRIPS; ++j) {
    const uint k = (g + (uint)j * items) & mask;
    out[k] = in[k];
  }
}
#endif  // TRIPS
#endif  // W

#ifdef LOOPS
// Formula 1: 16 reads per trip; the sum (in access order) is stored so that no read is dead.
extern "C" __global__ void stride_read(const float* __restrict__ data, float* __restrict__ out, const uint stride,
                                       const uint mask) {
  const uint s = (uint)global_id() * stride;
  uint n = 0;
  float sum = 0.0f;
  for (int t = 0; t < LOOPS; ++t) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      sum += data[(s + n) & mask];
      n += 32768u;
    }
  }
  out[global_id()] = sum;
}

// Formula 1 for writes: the value written depends on the thread and the access.
extern "C" __global__ void stride_write(float* __restrict__ data, const uint stride, const uint mask) {
  const uint gid = (uint)global_id();
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
// Row major: thread g owns bytes [g*BPW, (g+1)*BPW). Column major: byte k of thread g is at
// k*items + g, so neighbouring threads touch neighbouring bytes.
#define ROW(g, k, items) ((size_t)(g) * BPW + (k))
#define COL(g, k, items) ((size_t)(k) * (items) + (g))

#define READER(name, AT)                                                                        \
  extern "C" __global__ void name(const uchar* __restrict__ data, uint* __restrict__ out) {      \
    const size_t g = global_id(), items = global_size();                                       \
    uint sum = 0;                                                                              \
    for (int k = 0; k < BPW; ++k) sum += data[AT(g, k, items)];                                \
    out[g] = sum;                                                                              \
  }
#define WRITER(name, AT)                                                                        \
  extern "C" __global__ void name(uchar* __restrict__ data) {                                   \
    const size_t g = global_id(), items = global_size();                                       \
    for (int k = 0; k < BPW; ++k) data[AT(g, k, items)] = (uchar)(g * 7 + k);                  \
  }
READER(row_read, ROW)
READER(col_read, COL)
WRITER(row_write, ROW)
WRITER(col_write, COL)
#endif  // BPW
