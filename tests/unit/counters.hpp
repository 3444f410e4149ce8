// What the unit tests of counters share: finding one by name, and the value Google Benchmark
// will show for it.
#pragma once
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "fixtures/core/cost.hpp"

namespace archbench_test {
using namespace archbench;

inline const CounterValue* find(const std::vector<CounterValue>& cs, const std::string& n) {
  for (const auto& c : cs)
    if (c.name == n) return &c;
  return nullptr;
}

// Google Benchmark 1.7's Finish() for a counter: what the JSON and console will show.
inline double shown(const CounterValue& c, double iterations, double seconds) {
  using benchmark::Counter;
  double v = c.value;
  if (c.flags & Counter::kIsRate) v /= seconds;
  if (c.flags & Counter::kIsIterationInvariant) v *= iterations;
  if (c.flags & Counter::kAvgIterations) v /= iterations;
  if (c.flags & Counter::kInvert) v = 1 / v;
  return v;
}

}  // namespace archbench_test
