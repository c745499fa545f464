// The MoE options of a test's shape, the other fields at their defaults.
#pragma once

#include <cstdint>

#include "ops/moe/options.h"

namespace symmesh {

inline MoeOptions moe_shape(int64_t tokens, int64_t hidden, int topk, int experts) {
  MoeOptions o;
  o.tokens = tokens;
  o.hidden = hidden;
  o.topk = topk;
  o.experts = experts;
  return o;
}

}  // namespace symmesh
