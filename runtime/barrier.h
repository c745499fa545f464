// Barriers (the SHMEM barrier design). The PE barrier of a team is hierarchical: the team's members
// on each node meet in an intra-node barrier, the first member of each node (its leader) runs the
// inter-node algorithm with the other leaders, and the leader then releases its node.
#pragma once

#include "runtime/barrier_options.h"
#include "runtime/pe.h"

namespace symmesh {

void barrier(Pe& pe, Team& team, const BarrierOptions& options);
// With the node's configured algorithm (NodeConfig::barrier, symmeshd --barrier-algo).
void barrier(Pe& pe, Team& team);
inline void barrier_all(Pe& pe, const BarrierOptions& options) {
  barrier(pe, pe.team_world(), options);
}
inline void barrier_all(Pe& pe) {
  barrier(pe, pe.team_world());
}

}  // namespace symmesh
