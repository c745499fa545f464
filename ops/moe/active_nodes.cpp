#include "ops/moe/active_nodes.h"

#include <bit>

#include "common/errors.h"

namespace symmesh {

ActiveNodes::ActiveNodes(Pe& pe, uint64_t nodes) : team_(&pe.team_world()) {
  const int count = pe.node().nodes();
  every_ = nodes == 0 || (count <= 64 && nodes == every_node(count));
  bits_ = nodes;
  if (every_) {
    nodes_ = count;
    pes_ = pe.n_pes();
    return;
  }
  if (count <= 64 && !has(pe.my_node())) {
    throw InvalidArgument("PE " + std::to_string(pe.my_pe()) + " is on node " +
                          std::to_string(pe.my_node()) +
                          ", which the active nodes leave out: the PEs of a node left out do "
                          "not take part in the call");
  }
  own_ = pe.team_of_nodes(bits_);  // refuses a mask past the cluster, or over 64 nodes
  team_ = own_.get();
  nodes_ = std::popcount(bits_);
  pes_ = nodes_ * pe.node().ranks_per_node();
}

}  // namespace symmesh
