// The tracers' shared code (tools/analysis/trace/common): what the records depend on.
#include "tools/analysis/trace/common.hpp"

#include <gtest/gtest.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

namespace tr = archbench::trace;

// Exported (the test is linked with -rdynamic) and not inlined, so that a path can name it.
extern "C" __attribute__((noinline)) tr::Frames trace_test_marker() {
  tr::Frames f = tr::capture(0, {});
  asm volatile("");  // keeps the call from becoming a tail call
  return f;
}

TEST(TraceCommon, Fnv1aKnownValues) {
  // The published FNV-1a 64 test vectors.
  EXPECT_EQ(tr::fnv1a("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(tr::fnv1a("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(tr::fnv1a("foobar", 6), 0x85944171f73967e8ull);
  EXPECT_EQ(tr::hex64(0xaf63dc4c8601ec8cull), "af63dc4c8601ec8c");
  EXPECT_EQ(tr::hex64(1), "0000000000000001");
}

TEST(TraceCommon, JsonEscapes) {
  EXPECT_EQ(tr::JsonLine::quote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
  char* buf = nullptr;
  size_t n = 0;
  FILE* f = open_memstream(&buf, &n);
  tr::JsonLine("kernel").unum("id", 7).str("name", "k<int>").nums("global", {4, 1, 1}).null("local").boolean("b", true).write(f);
  fclose(f);
  EXPECT_EQ(std::string(buf, n), "{\"type\":\"kernel\",\"id\":7,\"name\":\"k<int>\",\"global\":[4,1,1],\"local\":null,\"b\":true}\n");
  free(buf);
}

TEST(TraceCommon, PathNamesTheCallerInnermostFirst) {
  tr::Frames f = trace_test_marker();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(tr::symbolize(f[0]), "trace_test_marker");
  tr::PathTable t;
  uint32_t a = t.intern(f), b = t.intern(f), c = t.intern(tr::Frames(f.begin() + 1, f.end()));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(t.at(a), f);
}

// The sampler takes wall-clock samples of a thread that sleeps (a CPU-time timer would not).
TEST(TraceCommon, SamplerSamplesASleepingThread) {
  tr::Sampler& s = tr::sampler();
  std::string why;
  ASSERT_TRUE(s.start(2000000, &why)) << why;  // every 2 ms
  uint64_t t0 = tr::now_ns();
  timespec d{0, 200000000};
  while (nanosleep(&d, &d) == -1 && errno == EINTR) {
  }
  uint64_t t1 = tr::now_ns();
  s.stop();
  size_t in = 0;
  for (size_t i = 0; i < s.count(); ++i)
    if (s.at(i).tid == tr::this_tid() && s.at(i).t_ns >= t0 && s.at(i).t_ns <= t1) ++in;
  // One sample per 2 ms of the time slept (at least 200 ms); a loaded 2-core CI machine delays
  // some signals, and a late one can land just after t1.
  size_t expected = size_t((t1 - t0) / 2000000);
  EXPECT_GE(in, expected / 2);
  EXPECT_LE(in, expected + 1);
  EXPECT_EQ(s.dropped(), 0u);
}
