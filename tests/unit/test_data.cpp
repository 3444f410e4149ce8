// Host data helpers: half-precision rounding (the fp16 references depend on it) and fills.
#include <gtest/gtest.h>

#include <cmath>

#include "fixtures/core/data.hpp"

using namespace archbench;

TEST(Half, KnownEncodings) {
  EXPECT_EQ(double_to_half(1.0), 0x3c00);
  EXPECT_EQ(double_to_half(-2.0), 0xc000);
  EXPECT_EQ(double_to_half(65504.0), 0x7bff);
  EXPECT_EQ(double_to_half(65520.0), 0x7c00);                   // rounds to infinity
  EXPECT_EQ(double_to_half(std::ldexp(1.0, -24)), 0x0001);      // smallest subnormal
  EXPECT_EQ(double_to_half(std::ldexp(1.0, -14)), 0x0400);      // smallest normal
  EXPECT_EQ(double_to_half(0.0), 0x0000);
  EXPECT_EQ(double_to_half(1.0 + std::ldexp(1.0, -11)), 0x3c00);  // tie to even: down
  EXPECT_EQ(double_to_half(1.0 + 3 * std::ldexp(1.0, -11)), 0x3c02);  // tie to even: up
}

TEST(Half, RoundTripsEveryFiniteValue) {
  for (unsigned h = 0; h < 0x10000; ++h) {
    if (((h >> 10) & 0x1f) == 0x1f) continue;  // inf / nan
    const float f = half_to_float(static_cast<std::uint16_t>(h));
    const std::uint16_t back = double_to_half(f);
    if (f == 0) EXPECT_EQ(back & 0x7fff, 0) << h;
    else EXPECT_EQ(back, h) << h;
  }
}

TEST(Fill, UniformIsDeterministicInRangeAndNotZero) {
  std::vector<unsigned char> a(4096), b(4096);
  fill_uniform<float>(a, 7, 1.0, 2.0);
  fill_uniform<float>(b, 7, 1.0, 2.0);
  EXPECT_EQ(a, b);
  for (std::size_t i = 0; i < a.size() / 4; ++i) {
    const float v = get<float>(a, i);
    EXPECT_GE(v, 1.0f);
    EXPECT_LT(v, 2.0f);
  }
}
