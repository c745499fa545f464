// A session's fused calls: one run of a fused operator (gemm_all_reduce, matmul_reduce_scatter,
// all_gather_matmul) on the attached process's A and B, which pass through the PE's staging
// area (api/staging_layout.h), the result written back there in the inputs' type.
#pragma once

#include <cstdint>

#include "api/request_ring.h"
#include "api/staging_area.h"
#include "common/cpu_budget.h"
#include "runtime/pe.h"

namespace symmesh {

// The most work one call may ask for (about a minute of one core's GEMM).
inline constexpr double kMaxSessionFusedFlops = 1e13;

// Collective. Returns the rows of the result this PE holds. What the daemon holds for the
// call (its copies of the operands and the result) may be at most `memory_bytes` (0: only
// the staging area's cap), the node's --job-memory over its PEs; it runs on `threads`.
uint64_t run_session_fused(Pe& pe, const attach::Request& request, attach::StagingArea& staging,
                           uint64_t memory_bytes, const FusedThreads& threads);

}  // namespace symmesh
