// image: read_imagef / write_imagef bandwidth of a 2-D CL_RGBA / CL_FLOAT image (seed 002
// section 2.3.4). The 2-D global range is the image itself (one work-item per pixel, both
// sides powers of two). Each work-item touches REPS pixels, one per pass: in pass k it takes
// the pixel at its own coordinates translated by (k*sx, k*sy), wrapped around the image. Every
// pass is therefore a bijection over the image (each pixel is touched exactly REPS times per
// launch), a work-item never touches the same pixel twice (so nothing can be merged), and
// neighbouring work-items touch neighbouring pixels in every pass (the locality a texture
// cache is built for). REPS makes a launch long enough on fast devices.
#ifndef REPS
#define REPS 1
#endif

// Integer coordinates, no filtering, no addressing mode: a plain element lookup.
__constant sampler_t kNearest = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;

// Reads REPS pixels and stores one float per work-item so that no read is dead:
// x + 2y + 4z + 8w of the summed pixels (the host fills the image with small multiples of
// 1/64, so every sum is exact in any order and a swapped channel changes the result).
__kernel void image_read(__read_only image2d_t img, __global float* restrict sums, const int sx, const int sy) {
  const int x = (int)get_global_id(0), y = (int)get_global_id(1);
  const int w = (int)get_global_size(0), h = (int)get_global_size(1);
  float4 acc = (float4)(0.0f);
#pragma unroll
  for (int k = 0; k < REPS; ++k) acc += read_imagef(img, kNearest, (int2)((x + k * sx) & (w - 1), (y + k * sy) & (h - 1)));
  sums[(size_t)y * w + x] = acc.x + 2.0f * acc.y + 4.0f * acc.z + 8.0f * acc.w;
}

// The value of pixel (px, py): it depends only on the pixel, so the REPS writers of a pixel
// agree. Every component is an exact small float, none is zero.
float4 pixel_value(int px, int py) {
  return (float4)((float)(px + 1), (float)(py + 1), (float)(((px * 7 + py * 3) & 1023) + 1), (float)((px ^ py) & 255) + 0.5f);
}

__kernel void image_write(__write_only image2d_t img, const int sx, const int sy) {
  const int x = (int)get_global_id(0), y = (int)get_global_id(1);
  const int w = (int)get_global_size(0), h = (int)get_global_size(1);
#pragma unroll
  for (int k = 0; k < REPS; ++k) {
    const int px = (x + k * sx) & (w - 1), py = (y + k * sy) & (h - 1);
    write_imagef(img, (int2)(px, py), pixel_value(px, py));
  }
}
