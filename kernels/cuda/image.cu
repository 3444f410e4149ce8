// image: texture read and surface write bandwidth of a 2-D RGBA float image (seed 002
// section 2.3.4), the CUDA twin of kernels/opencl/image.cl (read_imagef / write_imagef).
// The 2-D grid is the image, one thread per pixel; in pass k a thread touches the pixel at its
// own coordinates translated by (k*sx, k*sy), wrapped around the image, as in OpenCL.
// Coordinates: OpenCL's sampler reads integer coordinates unnormalized, without filtering; the
// backend's texture object is point-filtered with unnormalized coordinates, so pixel (x, y) is
// read at the texel centre (x + 0.5, y + 0.5), which selects exactly that texel. Surfaces are
// addressed in bytes along x: 16 bytes per float4 pixel.
#include "archbench.cuh"

#ifndef REPS
#define REPS 1
#endif

// Reads REPS pixels and stores one float per thread so that no read is dead:
// x + 2y + 4z + 8w of the summed pixels (the host's values make every sum exact).
extern "C" __global__ void image_read(Image img, float* __restrict__ sums, const int sx, const int sy) {
  const int x = (int)global_id(0), y = (int)global_id(1);
  const int w = (int)global_size(0), h = (int)global_size(1);
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int k = 0; k < REPS; ++k) {
    const int px = (x + k * sx) & (w - 1), py = (y + k * sy) & (h - 1);
    const float4 v = tex2D<float4>(img.tex, px + 0.5f, py + 0.5f);
    acc.x += v.x;
    acc.y += v.y;
    acc.z += v.z;
    acc.w += v.w;
  }
  sums[(size_t)y * w + x] = acc.x + 2.0f * acc.y + 4.0f * acc.z + 8.0f * acc.w;
}

// The value of pixel (px, py), as image.cl's pixel_value: it depends only on the pixel, so
// the REPS writers of a pixel agree.
__device__ __forceinline__ float4 pixel_value(int px, int py) {
  return make_float4((float)(px + 1), (float)(py + 1), (float)(((px * 7 + py * 3) & 1023) + 1),
                     (float)((px ^ py) & 255) + 0.5f);
}

extern "C" __global__ void image_write(Image img, const int sx, const int sy) {
  const int x = (int)global_id(0), y = (int)global_id(1);
  const int w = (int)global_size(0), h = (int)global_size(1);
#pragma unroll
  for (int k = 0; k < REPS; ++k) {
    const int px = (x + k * sx) & (w - 1), py = (y + k * sy) & (h - 1);
    surf2Dwrite(pixel_value(px, py), img.surf, px * 16, py);
  }
}
