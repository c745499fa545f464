// Barriers (seed 004). The PE barrier of a team is hierarchical: the team's members on each
// node meet in an intra-node barrier, the first member of each node (its leader) runs the
// inter-node algorithm with the other leaders, and the leader then releases its node.
#pragma once

#include <string>

#include "runtime/pe.h"

namespace symmesh {

enum class BarrierAlgo {
  kDissemination,  // V1: ceil(log2 n) rounds, one signal each
  kKary,           // V2: ceil(log_k n) rounds, up to k-1 signals each
  kPull,           // V3: each leader publishes its own counter and reads the others'
};

struct BarrierOptions {
  BarrierAlgo algo = BarrierAlgo::kPull;
  int k = 8;  // radix of kKary, 2..16
};

// Parses "dissemination", "kary" or "pull"; throws InvalidArgument listing them.
BarrierAlgo parse_barrier_algo(const std::string& name);
const char* barrier_algo_name(BarrierAlgo algo);

void barrier(Pe& pe, Team& team, const BarrierOptions& options = {});
inline void barrier_all(Pe& pe, const BarrierOptions& options = {}) {
  barrier(pe, pe.team_world(), options);
}

}  // namespace symmesh
