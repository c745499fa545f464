// A strict reader of the Prometheus text exposition format (0.0.4) for the tests: what it
// rejects is what a Prometheus server rejects when it scrapes (bad names, bad label syntax or
// escapes, values that are not numbers, a TYPE after its samples, a family's samples split,
// a series twice), plus the conventions our metrics promise (every family has HELP and TYPE,
// counters end in _total, histograms have cumulative buckets ending at +Inf equal to _count).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace symmesh::testing {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromFamily {
  std::string type;  // counter, gauge, histogram, summary, untyped
  std::string help;
  std::vector<PromSample> samples;
};

// Throws std::runtime_error naming the line and what is wrong.
std::map<std::string, PromFamily> parse_prometheus_text(const std::string& text);

}  // namespace symmesh::testing
