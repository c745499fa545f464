// The RDMA transport of a build with verbs (-DSYMMESH_VERBS=ON, the default).
#include "transport/rdma.h"
#include "transport/verbs/verbs_transport.h"

namespace symmesh {

bool verbs_built() {
  return true;
}

std::unique_ptr<RdmaTransport> open_verbs_transport(int node, int nodes, int ranks_per_node,
                                                    SegmentView segment, Doorbell& doorbell,
                                                    const VerbsOptions& options) {
  return std::make_unique<VerbsTransport>(node, nodes, ranks_per_node, segment, doorbell, options);
}

}  // namespace symmesh
