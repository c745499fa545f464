// The check every option shares: a value outside its range is refused naming the field, the
// value and what is allowed.
#pragma once

#include <cstdint>
#include <string>

#include "common/errors.h"

namespace symmesh {

// Throws InvalidArgument "field = value is out of range: allowed low to high (why)".
inline void check_range(const std::string& field, int64_t value, int64_t low, int64_t high,
                        const std::string& why = "") {
  if (value >= low && value <= high) return;
  throw InvalidArgument(field + " = " + std::to_string(value) + " is out of range: allowed " +
                        std::to_string(low) + " to " + std::to_string(high) +
                        (why.empty() ? "" : " (" + why + ")"));
}

}  // namespace symmesh
