#include "ops/moe/record_counts.h"

#include <algorithm>

#include "api/op_limits.h"
#include "common/errors.h"

namespace symmesh {

std::vector<uint64_t> checked_counts(const uint64_t* counts, size_t size, int channels,
                                     const std::string& what) {
  std::vector<uint64_t> out(counts, counts + size);
  for (size_t first = 0; first < size; first += size_t(channels)) {
    uint64_t sum = 0;
    for (size_t i = first; i < std::min(size, first + size_t(channels)); ++i) {
      sum += std::min(out[i], uint64_t(kMaxMoeTokens) + 1);  // no count can wrap the sum
    }
    if (sum > uint64_t(kMaxMoeTokens)) {
      throw PeerError(what + ": counts " + std::to_string(first) + ".." +
                      std::to_string(first + size_t(channels) - 1) +
                      " add up to more than a PE sends (at most " + std::to_string(kMaxMoeTokens) +
                      " tokens): its shared heap was written by something other than a daemon");
    }
  }
  return out;
}

}  // namespace symmesh
