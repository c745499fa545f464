// The inter-node barrier algorithms, run by one leader PE per node. `leaders` are global PE
// ids in team order; `me` is this PE's place among them; `epoch` is the barrier's number on
// this team (every signal is a monotonic epoch, never a flag that must be reset).
#pragma once

#include <vector>

#include "runtime/pe.h"

namespace symmesh {

void dissemination_barrier(Pe& pe, const Team& team, const std::vector<int>& leaders, int me,
                           uint64_t epoch, Deadline deadline);
void kary_barrier(Pe& pe, const Team& team, const std::vector<int>& leaders, int me, uint64_t epoch,
                  int k, Deadline deadline);
void pull_barrier(Pe& pe, const Team& team, const std::vector<int>& leaders, int me, uint64_t epoch,
                  Deadline deadline);

// The intra-node halves: members publish their arrival, the leader waits for all of them
// (reading their slots directly), later the leader publishes the release.
void intra_node_arrive(Pe& pe, const Team& team, uint64_t epoch, Deadline deadline);
void intra_node_release(Pe& pe, const Team& team, uint64_t epoch, Deadline deadline);

}  // namespace symmesh
