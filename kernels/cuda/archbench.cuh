// archbench.cuh: the prelude every CUDA kernel file includes (NVRTC gets it as a named header).
// It gives CUDA kernels the vocabulary the OpenCL kernels and the families' -D values use:
// OpenCL's scalar names (uint, uchar, ulong, half), work-item indices, and vec<T, W>, one
// template for every vector type (float4, double8, uint16, half2, ...) so that kernels are
// written once over T and W instead of once per variant.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long long ulong;
typedef __nv_bfloat16 bfloat;

// Work-item indices of a 1-D or 2-D grid, as OpenCL names them.
__device__ __forceinline__ size_t global_id(int d = 0) {
  return d == 0 ? size_t(blockIdx.x) * blockDim.x + threadIdx.x : size_t(blockIdx.y) * blockDim.y + threadIdx.y;
}
__device__ __forceinline__ size_t global_size(int d = 0) {
  return d == 0 ? size_t(gridDim.x) * blockDim.x : size_t(gridDim.y) * blockDim.y;
}
__device__ __forceinline__ uint local_id() { return threadIdx.x; }
__device__ __forceinline__ uint local_size() { return blockDim.x; }
__device__ __forceinline__ uint group_id() { return blockIdx.x; }
__device__ __forceinline__ uint num_groups() { return gridDim.x; }

// Fused multiply-add of one element, one rounding, for every element type.
__device__ __forceinline__ float fma_(float x, float p, float q) { return fmaf(x, p, q); }
__device__ __forceinline__ double fma_(double x, double p, double q) { return fma(x, p, q); }
__device__ __forceinline__ uint fma_(uint x, uint p, uint q) { return x * p + q; }
__device__ __forceinline__ half fma_(half x, half p, half q) { return __hfma(x, p, q); }
__device__ __forceinline__ bfloat fma_(bfloat x, bfloat p, bfloat q) { return __hfma(x, p, q); }

// Two lanes of 16-bit floats in one register: the packed instructions (HFMA2, HADD2, HMUL2)
// that double the rate of half and bfloat16 arithmetic.
template <class T> struct pair_of;
template <> struct pair_of<half> { typedef half2 type; };
template <> struct pair_of<bfloat> { typedef __nv_bfloat162 type; };
template <class T> struct is_16bit { static constexpr bool value = false; };
template <> struct is_16bit<half> { static constexpr bool value = true; };
template <> struct is_16bit<bfloat> { static constexpr bool value = true; };

// W elements of T, aligned as OpenCL aligns its vector types (up to the 16 bytes a single
// load can move), with element-wise arithmetic. 16-bit floats of even width go in pairs.
template <class T, int W>
struct alignas(sizeof(T) * W > 16 ? 16 : sizeof(T) * W) vec {
  T v[W];
  __device__ __forceinline__ vec() {}
  __device__ __forceinline__ explicit vec(T s) {
#pragma unroll
    for (int i = 0; i < W; ++i) v[i] = s;
  }
  __device__ __forceinline__ T& operator[](int i) { return v[i]; }
  __device__ __forceinline__ const T& operator[](int i) const { return v[i]; }
};

#define ARCHBENCH_VEC_OP(op, pair_fn)                                                        \
  template <class T, int W>                                                                  \
  __device__ __forceinline__ vec<T, W> operator op(const vec<T, W>& a, const vec<T, W>& b) { \
    vec<T, W> r;                                                                             \
    if constexpr (is_16bit<T>::value && W % 2 == 0) {                                        \
      typedef typename pair_of<T>::type P;                                                   \
      _Pragma("unroll") for (int i = 0; i < W; i += 2) {                                     \
        const P x = pair_fn(*reinterpret_cast<const P*>(&a.v[i]), *reinterpret_cast<const P*>(&b.v[i])); \
        *reinterpret_cast<P*>(&r.v[i]) = x;                                                  \
      }                                                                                      \
    } else {                                                                                 \
      _Pragma("unroll") for (int i = 0; i < W; ++i) r.v[i] = a.v[i] op b.v[i];               \
    }                                                                                        \
    return r;                                                                                \
  }                                                                                          \
  template <class T, int W>                                                                  \
  __device__ __forceinline__ vec<T, W> operator op(const vec<T, W>& a, T s) {                \
    return a op vec<T, W>(s);                                                                \
  }
ARCHBENCH_VEC_OP(+, __hadd2)
ARCHBENCH_VEC_OP(-, __hsub2)
ARCHBENCH_VEC_OP(*, __hmul2)
ARCHBENCH_VEC_OP(/, __h2div)
#undef ARCHBENCH_VEC_OP

template <class T, int W>
__device__ __forceinline__ vec<T, W> fma_(const vec<T, W>& x, const vec<T, W>& p, const vec<T, W>& q) {
  vec<T, W> r;
  if constexpr (is_16bit<T>::value && W % 2 == 0) {
    typedef typename pair_of<T>::type P;
#pragma unroll
    for (int i = 0; i < W; i += 2)
      *reinterpret_cast<P*>(&r.v[i]) = __hfma2(*reinterpret_cast<const P*>(&x.v[i]), *reinterpret_cast<const P*>(&p.v[i]),
                                               *reinterpret_cast<const P*>(&q.v[i]));
  } else {
#pragma unroll
    for (int i = 0; i < W; ++i) r.v[i] = fma_(x.v[i], p.v[i], q.v[i]);
  }
  return r;
}

// vec<T, 1> is T itself for scalar code: element(x, 0) reads either.
template <class T> __device__ __forceinline__ T& element(T& x, int) { return x; }
template <class T, int W> __device__ __forceinline__ T& element(vec<T, W>& x, int i) { return x.v[i]; }

// An image as the CUDA backend passes it: a texture object to read it (point sampling,
// unnormalized integer coordinates) and a surface object to write it (x in bytes).
struct Image {
  cudaTextureObject_t tex;
  cudaSurfaceObject_t surf;
};
