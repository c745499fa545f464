// The PEs a MoE call runs over when it leaves nodes out (Mooncake EP's active-rank mask, by
// node): an elastic session that lost a node goes on serving on the others. A node is the unit
// because its PEs live and die with its daemon, and the hierarchical dispatch and combine pass
// every token through a PE of each node it goes to. The PEs of the nodes left out do not call;
// the call's barriers and exchanges run on the team of the others (Pe::team_of_nodes), its
// counts expect only theirs, and nothing is sent to them: a token routed to an expert there is
// refused (the caller masks its routing first, as symmesh.mask_routing does).
#pragma once

#include <cstdint>
#include <memory>

#include "ops/moe/options.h"
#include "runtime/pe.h"

namespace symmesh {

class ActiveNodes {
 public:
  // Every node when `nodes` (a bit per node) is 0 or names them all; throws InvalidArgument when
  // this PE's node is left out.
  ActiveNodes(Pe& pe, uint64_t nodes);
  ActiveNodes(Pe& pe, const MoeOptions& options) : ActiveNodes(pe, options.active_nodes) {}

  // The world team, or the active nodes' own for this call.
  Team& team() const { return *team_; }
  bool has(int node) const { return every_ || takes_part(bits_, node); }
  int nodes() const { return nodes_; }  // taking part
  int pes() const { return pes_; }

  // Whether mask `active_nodes` (0: all) has `node`.
  static bool takes_part(uint64_t active_nodes, int node) {
    return active_nodes == 0 || (node < 64 && (active_nodes >> node & 1));
  }

 private:
  bool every_;
  uint64_t bits_;
  int nodes_ = 0;
  int pes_ = 0;
  std::unique_ptr<Team> own_;
  Team* team_;
};

}  // namespace symmesh
