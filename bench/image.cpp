// image: read_imagef and write_imagef bandwidth of 2-D RGBA float images (seed 002 section
// 2.3.4, Figs. 23 and 24), over
//  - shape:WxH   one fixed size (4 MiB, 262144 pixels) from wide-and-flat to tall-and-thin;
//  - square:B    square images of B bytes, 16 KiB to 4 MiB (the full sweep goes on to 64 MiB).
// One work-item per pixel over a 2-D range; each work-item reads (or writes) REPS pixels at
// REPS different coordinates, one per pass over the whole image (kernels/opencl/image.cl says
// how they are chosen). A read launch stores a 4-byte checksum per work-item; a write launch
// writes pixel values that depend only on the coordinates, checked pixel by pixel.
// byte_per_s: 16 bytes per pixel read or written, plus the read kernel's 4-byte checksum
// store per work-item (memory traffic it really does: 1/(4*REPS) of the image bytes).
// flop_per_s: the read kernel's 4 adds a pixel read (its four channels into the sum) and the
// checksum's 3 multiplies and 3 adds; the write kernel's 1 add a pixel written (the w channel's
// + 0.5). The CUDA read also adds 0.5 to each integer coordinate (the texel centre of a
// point-filtered texture, kernels/cuda/image.cu): 2 adds a pixel read that are addressing, not
// the benchmark's work; archbench/traffic.py's EXTRA counts them exactly (issue 17).
#include <algorithm>
#include <cstdint>
#include <string>

#include "fixtures/core/data.hpp"
#include "fixtures/core/workload.hpp"

namespace archbench {
namespace {

constexpr std::size_t kPixelBytes = 16;  // CL_RGBA, CL_FLOAT

// Pixels each work-item touches per launch. A GPU moves a 4 MiB image in a few microseconds,
// less than the cost of a launch: 16 passes make a launch 64 MiB. The same on every device, so
// that every device runs the same kernel and its checksum costs the same share (1/64) of bytes.
int reps(const Plan& plan) { return plan.size == Size::test ? 4 : 16; }

std::size_t floor_pow2(std::size_t v) {
  std::size_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

bool power_of_two(std::size_t v) { return v && !(v & (v - 1)); }

// The host's fill: multiples of 1/64 in [1/64, 4), so that sums of a few hundred of them,
// weighted by powers of two, are exact in float whatever the order.
void fill_pixels(Bytes& b, std::uint64_t seed) {
  Rng r(seed);
  for (std::size_t i = 0; i < b.size() / 4; ++i) put<float>(b, i, static_cast<float>(1 + r.next() % 255) / 64.0f);
}

// What image_write stores at (px, py); the same expression as pixel_value in image.cl.
void pixel_value(int px, int py, float v[4]) {
  v[0] = static_cast<float>(px + 1);
  v[1] = static_cast<float>(py + 1);
  v[2] = static_cast<float>(((px * 7 + py * 3) & 1023) + 1);
  v[3] = static_cast<float>((px ^ py) & 255) + 0.5f;
}

std::string at(std::size_t x, std::size_t y) { return "pixel (" + std::to_string(x) + ", " + std::to_string(y) + ")"; }

Workload image(const Plan& plan, bool write, std::size_t width, std::size_t height, const Axis& axis) {
  const DeviceInfo& d = plan.device;
  const int k = reps(plan);
  const std::size_t pixels = width * height;
  // Pass p translates by (p*sx, p*sy): distinct pixels for every pass while width or height
  // is at least REPS (true of every shape here).
  const int sx = static_cast<int>(std::max<std::size_t>(1, width / k));
  const int sy = static_cast<int>(std::max<std::size_t>(1, height / k));
  Workload w;
  w.identify(identity({{"family", "image"}, {"backend", d.backend}, {"op", write ? "write" : "read"}}, {axis}));
  w.kernel = {"image", write ? "image_write" : "image_read", {{"REPS", std::to_string(k)}}};
  // 2-D work-groups of up to 16x16 pixels (square tiles: the locality textures are laid out for).
  w.range.dims = 2;
  w.range.global[0] = width;
  w.range.global[1] = height;
  w.range.local[0] = std::min<std::size_t>(width, 16);
  w.range.local[1] = std::min<std::size_t>(height, 16);
  while (w.range.local[0] * w.range.local[1] > std::max<std::size_t>(d.max_work_group, 1)) {
    if (w.range.local[1] > 1)
      w.range.local[1] /= 2;
    else
      w.range.local[0] /= 2;
  }
  const double pass_bytes = double(kPixelBytes) * k;  // per work-item
  if (!write) {
    w.buffers = {BufferSpec::image(width, height, [=](Bytes& b) { fill_pixels(b, 1000003 * width + height); }),
                 {pixels * 4, nullptr}};
    w.args = {Arg::buf(0), Arg::buf(1), Arg::scalar<std::int32_t>(sx), Arg::scalar<std::int32_t>(sy)};
    const double read_flops = 4.0 * k + 6;  // per work-item: the channel adds and the checksum
    w.cost.flops = pixels * read_flops;
    w.cost.bytes_read = pixels * pass_bytes;
    w.cost.bytes_written = pixels * 4.0;
    w.check = [=](const std::vector<Bytes>& in, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
      for (std::size_t i = 0; i < pixels; i += every) {
        const std::size_t x = i % width, y = i / width;
        float acc[4] = {0, 0, 0, 0};
        for (int p = 0; p < k; ++p) {
          const std::size_t px = (x + std::size_t(p) * sx) & (width - 1), py = (y + std::size_t(p) * sy) & (height - 1);
          for (int c = 0; c < 4; ++c) acc[c] += get<float>(in[0], (py * width + px) * 4 + c);
        }
        const float want = acc[0] + 2.0f * acc[1] + 4.0f * acc[2] + 8.0f * acc[3];
        const float got = get<float>(out[1], i);
        if (got != want) return "checksum of work-item (" + std::to_string(x) + ", " + std::to_string(y) + "): " + differs(i, want, got);
        t += Cost{read_flops, 0, pass_bytes, 4, 0};
      }
      return std::string();
    };
  } else {
    w.buffers = {BufferSpec::image(width, height)};  // poisoned: unwritten pixels show
    w.args = {Arg::buf(0), Arg::scalar<std::int32_t>(sx), Arg::scalar<std::int32_t>(sy)};
    w.cost.flops = pixels * double(k);  // the + 0.5 of each pixel's w channel
    w.cost.bytes_written = pixels * pass_bytes;
    w.check = [=](const std::vector<Bytes>&, const std::vector<Bytes>& out, std::size_t every, Cost& t) {
      for (std::size_t i = 0; i < pixels; i += every) {
        const std::size_t x = i % width, y = i / width;
        float want[4];
        pixel_value(static_cast<int>(x), static_cast<int>(y), want);
        for (int c = 0; c < 4; ++c) {
          const float got = get<float>(out[0], i * 4 + c);
          if (got != want[c])
            return at(x, y) + " channel " + std::to_string(c) + ": " + differs(i * 4 + c, want[c], got);
        }
        t += Cost{double(k), 0, 0, pass_bytes, 0};
      }
      return std::string();
    };
  }
  if (!d.images)
    w.skip = "the device has no image support";
  else if (width > d.image2d_max_width || height > d.image2d_max_height)
    w.skip = "image of " + std::to_string(width) + "x" + std::to_string(height) + " exceeds the device's largest 2-D image (" +
             std::to_string(d.image2d_max_width) + "x" + std::to_string(d.image2d_max_height) + ")";
  else if (!power_of_two(width) || !power_of_two(height))
    w.skip = "image sides must be powers of two (the kernels wrap coordinates with a mask)";
  return w;
}

std::vector<Workload> build(const Plan& plan) {
  std::vector<Workload> out;
  const bool test = plan.size == Size::test, full = plan.size == Size::full;
  // Fig. 23: a fixed number of pixels from wide-and-flat to tall-and-thin; quick every 4x in
  // width, full every 2x.
  const std::size_t pixels = test ? 1024 : std::size_t(1) << 18;  // 4 MiB of RGBA float
  const std::size_t min_side = test ? 8 : 16;
  const std::size_t step = full || test ? 2 : 4;
  std::vector<std::size_t> widths;
  for (std::size_t wd = pixels / min_side; wd >= min_side; wd /= step) widths.push_back(wd);
  // The square is in the quick sweep too (16384 and 512 are not a power of 4 apart).
  if (!test && !full) widths.insert(widths.begin() + 3, 512);
  // Within the device's largest 2-D image: the extremes become the flattest and thinnest shapes
  // it can hold (e.g. 8192x32 where 8192 is the limit) rather than skipped points.
  const DeviceInfo& d = plan.device;
  if (d.images && d.image2d_max_width && d.image2d_max_height) {
    const std::size_t hi = std::min(pixels / min_side, floor_pow2(d.image2d_max_width));
    const std::size_t lo = std::max(min_side, pixels / floor_pow2(d.image2d_max_height));
    if (lo <= hi) {
      for (std::size_t& wd : widths) wd = std::clamp(wd, lo, hi);
      widths.erase(std::unique(widths.begin(), widths.end()), widths.end());
    }
  }
  std::vector<std::pair<std::size_t, std::size_t>> shapes;
  for (std::size_t wd : widths) shapes.push_back({wd, pixels / wd});
  // Fig. 24: square images from 16 KiB to 4 MiB (full: on to 64 MiB, well past the 4 MiB of the seed).
  std::vector<std::size_t> sides;
  if (test)
    sides = {8, 16};
  else
    for (std::size_t s = 32; s <= (full ? 2048u : 512u); s *= 2) sides.push_back(s);
  for (bool write : {false, true}) {
    for (auto [wd, ht] : shapes)
      out.push_back(image(plan, write, wd, ht, Axis{"shape", std::to_string(wd) + "x" + std::to_string(ht)}));
    for (std::size_t s : sides) out.push_back(image(plan, write, s, s, Axis{"square", std::to_string(s * s * kPixelBytes)}));
  }
  return out;
}

}  // namespace

ARCHBENCH_FAMILY(image, build);

}  // namespace archbench
