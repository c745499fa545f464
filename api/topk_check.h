// The check every routing passes before a dispatch (DeepEP's topk_idx): per token `topk` expert
// ids, each in [-1, experts) where -1 leaves the slot unused, none twice in a token. Both the
// process's library (before it asks) and the daemon (before it acts) run it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/errors.h"

namespace symmesh {

// Throws InvalidArgument naming `what`, the token and the id.
template <class Id>
void check_topk_ids(const Id* ids, int64_t tokens, int topk, int experts, const std::string& what) {
  for (int64_t token = 0; token < tokens; ++token) {
    const Id* first = ids + token * topk;
    for (int k = 0; k < topk; ++k) {
      const Id id = first[k];
      if (id < -1 || id >= Id(experts)) {
        throw InvalidArgument(what + ": token " + std::to_string(token) + " names expert " +
                              std::to_string(id) + ": allowed -1 (none) or 0 to " +
                              std::to_string(experts - 1));
      }
      if (id >= 0 && std::find(first, first + k, id) != first + k) {
        throw InvalidArgument(what + ": token " + std::to_string(token) + " names expert " +
                              std::to_string(id) + " twice");
      }
    }
  }
}

}  // namespace symmesh
