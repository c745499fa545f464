// The shapes a MoE dispatch and a fused op take, which the process's library checks before it
// asks and the daemon's options check again.
#pragma once

#include <cstdint>

namespace symmesh {

inline constexpr int64_t kMaxMoeTokens = int64_t{1} << 20;  // per PE
// Per PE with the low-latency algorithm (its signals count records in 24 bits).
inline constexpr int64_t kMaxLowLatencyTokens = 8192;
inline constexpr int64_t kMaxMoeHidden = int64_t{1} << 16;
inline constexpr int64_t kMoeHiddenMultiple = 8;  // rows of whole 16-byte blocks
inline constexpr int kMaxMoeTopk = 32;
inline constexpr int kMaxMoeExperts = 1 << 16;
inline constexpr int64_t kMaxFusedDim = int64_t{1} << 20;  // m, n and k

}  // namespace symmesh
