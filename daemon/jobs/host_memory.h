// Admission by host memory: what a job will allocate outside the symmetric heap on each node
// (its inputs, their f32 copies, outputs, the reference it verifies against), estimated from
// its shape before it runs, so a job too large for the machine is refused with the figure
// instead of ending in std::bad_alloc or the kernel's OOM killer.
#pragma once

#include <cstdint>

#include "wire/jobs.pb.h"

namespace symmesh {

// Half of this machine's physical memory: the default of symmeshd --job-memory.
uint64_t default_job_memory();

// The estimate, for one node of `nodes` x `ranks_per_node` (an upper bound for the dense
// operators; for MoE it assumes the routing spreads tokens evenly).
uint64_t job_host_bytes(const wire::JobSpec& spec, int nodes, int ranks_per_node);

// Throws InvalidArgument naming the estimate and the limit when the job needs more.
void check_job_memory(const wire::JobSpec& spec, int nodes, int ranks_per_node, uint64_t limit);

}  // namespace symmesh
