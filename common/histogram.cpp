#include "common/histogram.h"

namespace symmesh {

void Histogram::observe(double value) {
  if (counts.empty()) counts.assign(bounds.size() + 1, 0);
  size_t i = 0;
  while (i < bounds.size() && value > bounds[i]) ++i;
  ++counts[i];
  sum += value;
  ++count;
}

void Histogram::merge(const Histogram& other) {
  if (bounds.empty()) bounds = other.bounds;
  if (counts.empty()) counts.assign(bounds.size() + 1, 0);
  for (size_t i = 0; i < other.counts.size() && i < counts.size(); ++i)
    counts[i] += other.counts[i];
  sum += other.sum;
  count += other.count;
}

}  // namespace symmesh
