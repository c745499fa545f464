// The shape of a cluster: nodes x ranks per node, PE p on node p / ranks_per_node.
#pragma once

namespace symmesh {

struct ClusterShape {
  int nodes = 1;
  int ranks_per_node = 1;
  int n_pes() const { return nodes * ranks_per_node; }
};

}  // namespace symmesh
