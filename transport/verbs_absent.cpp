// The RDMA transport of a build configured with -DSYMMESH_VERBS=OFF: there is none.
#include "common/errors.h"
#include "transport/rdma.h"

namespace symmesh {

bool verbs_built() {
  return false;
}

std::vector<std::string> verbs_devices() {
  return {};
}

std::unique_ptr<RdmaTransport> open_verbs_transport(int, int, int, SegmentView, Doorbell&,
                                                    const VerbsOptions&) {
  throw Error("verbs: this build has none (configured with -DSYMMESH_VERBS=OFF)");
}

}  // namespace symmesh
