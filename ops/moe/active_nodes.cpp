#include "ops/moe/active_nodes.h"

#include <bit>

#include "common/errors.h"

namespace symmesh {

ActiveNodes::ActiveNodes(Pe& pe, uint64_t nodes) : team_(&pe.team_world()) {
  const int count = pe.node().nodes();
  const uint64_t every = count >= 64 ? ~uint64_t{0} : (uint64_t{1} << count) - 1;
  bits_ = nodes == 0 ? every : nodes;
  if (!has(pe.my_node())) {
    throw InvalidArgument("PE " + std::to_string(pe.my_pe()) + " is on node " +
                          std::to_string(pe.my_node()) +
                          ", which the active nodes leave out: the PEs of a node left out do "
                          "not take part in the call");
  }
  if (bits_ != every) {
    own_ = pe.team_of_nodes(bits_);
    team_ = own_.get();
  }
  nodes_ = std::popcount(bits_ & every);
  pes_ = nodes_ * pe.node().ranks_per_node();
}

}  // namespace symmesh
