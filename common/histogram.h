// A Prometheus-style histogram: counts of observations at or below each upper bound (and one
// more for above them all), their sum and their count. Not thread-safe: its owner locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace symmesh {

struct Histogram {
  std::vector<double> bounds;    // upper bounds, ascending; +Inf is implicit
  std::vector<uint64_t> counts;  // bounds.size() + 1 once anything was observed
  double sum = 0;
  uint64_t count = 0;

  void observe(double value);
  // Adds `other`'s observations; both have the same bounds (or this one none yet).
  void merge(const Histogram& other);
};

}  // namespace symmesh
