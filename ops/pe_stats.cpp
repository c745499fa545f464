#include "ops/pe_stats.h"

#include <algorithm>
#include <bit>

namespace symmesh {

double max_over_pes(Pe& pe, double value) {
  double result = value;
  for (uint64_t bits : pe.exchange(pe.team_world(), std::bit_cast<uint64_t>(value))) {
    result = std::max(result, std::bit_cast<double>(bits));
  }
  return result;
}

uint64_t max_over_pes(Pe& pe, uint64_t value) {
  return max_over(pe, pe.team_world(), value);
}

uint64_t max_over(Pe& pe, Team& team, uint64_t value) {
  uint64_t result = value;
  for (uint64_t v : pe.exchange(team, value)) result = std::max(result, v);
  return result;
}

int64_t sum_over_pes(Pe& pe, int64_t value) {
  int64_t sum = 0;
  for (uint64_t v : pe.exchange(pe.team_world(), uint64_t(value))) sum += int64_t(v);
  return sum;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace symmesh
