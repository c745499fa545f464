// The low-latency algorithm as a MoE job runs it (jobs/moe/runner): one LowLatencyBuffer for the
// job's shape, allocated before the first call and reused by every call, as a decoding model
// keeps its buffer. Each timed call starts after an untimed barrier, so every PE starts together
// (as the MPI baseline's calls start after MPI_Barrier) and the time is the call's alone. A
// timed combine's dispatch and its stand-in experts run before that barrier, untimed, as the
// normal mode's combine computes its expert outputs before its timed part.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/moe/low_latency.h"

namespace symmesh {

class LowLatencyCalls {
 public:
  // Collective: allocates the buffer for `options` (its tokens are the buffer's max tokens).
  LowLatencyCalls(Pe& pe, const MoeOptions& options, const Routing& routing,
                  const std::vector<uint16_t>& x);

  // Collective: one timed dispatch, then its untimed combine, which frees its half; `output` gets
  // the received tokens, packed per local expert. Returns this PE's seconds.
  double dispatch(std::vector<std::byte>& output);
  // Collective: one combine of a fresh dispatch; `output` gets [tokens][hidden] bf16.
  double combine(std::vector<std::byte>& output);

  // The last dispatch's handle, combined (its x is the output the dispatch call returned).
  const LowLatencyDispatch& last_dispatch() const { return dispatched_; }

 private:
  Pe& pe_;
  const MoeOptions& options_;
  const Routing& routing_;
  const std::vector<uint16_t>& x_;
  LowLatencyBuffer buffer_;
  LowLatencyDispatch dispatched_;
  std::vector<uint16_t> expert_rows_;  // the stand-in experts' output for dispatched_
  std::vector<std::byte> combined_;    // an untimed combine's output
};

// 0 when PE `pe`'s dispatch (its handle and the x it returned) delivered exactly the reference's
// tokens to each local expert (their count, order, sources and bits); infinity otherwise.
// all_x: every PE's tokens.
double low_latency_dispatch_error(const MoeOptions& options, const LowLatencyDispatch& got,
                                  const std::vector<std::byte>& got_x, int pe,
                                  const std::vector<Routing>& routings,
                                  const std::vector<std::vector<uint16_t>>& all_x);

}  // namespace symmesh
