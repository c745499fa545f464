// The record counts a dispatch's PEs exchange, as a PE reads them: daemons write them into
// its shared heap, which attached processes map too, so no count sizes or indexes anything
// until it is one a PE can send.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace symmesh {

// Copies `size` counts out of the shared heap once and checks the copy: each run of `channels`
// counts is what one PE sends one PE or node over the channels, which together are at most
// its tokens (kMaxMoeTokens). Throws PeerError naming `what` and the run otherwise.
std::vector<uint64_t> checked_counts(const uint64_t* counts, size_t size, int channels,
                                     const std::string& what);

}  // namespace symmesh
