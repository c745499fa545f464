// Figures over all PEs, for the job runners: every PE calls with its value (collective over the
// world team) and gets the same answer.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/pe.h"

namespace symmesh {

double max_over_pes(Pe& pe, double value);
uint64_t max_over_pes(Pe& pe, uint64_t value);
// The same over `team`'s members (collective over it).
uint64_t max_over(Pe& pe, Team& team, uint64_t value);
int64_t sum_over_pes(Pe& pe, int64_t value);
// The median of `values` (the mean of the middle two for an even count).
double median(std::vector<double> values);

}  // namespace symmesh
