// The tokens and routing the attached-process MoE tests dispatch: two PEs, two experts each,
// every token's value telling its PE and index, and some tokens choosing both experts of one PE.
#pragma once

#include <cstdint>

namespace symmesh::attached_moe {

inline constexpr int64_t kTokens = 6, kHidden = 8;
inline constexpr int kTopk = 2, kExperts = 4;  // two a PE

// PE p's token t: every element tells both.
inline float token_value(int pe, int64_t t, int64_t h) {
  return float(pe * 100 + t) + float(h) / 16;
}
// Token t of PE p goes to experts (t + p) % 4 and, unless t is a multiple of 3, (t + p + 1) % 4.
inline int64_t expert_of(int pe, int64_t t, int k) {
  if (k == 1 && t % 3 == 0) return -1;
  return (t + pe + k) % kExperts;
}

}  // namespace symmesh::attached_moe
