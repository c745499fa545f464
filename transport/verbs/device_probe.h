// What RDMA devices this host has (libibverbs). The verbs transport itself comes with
// issue 3; until then the probe tells `status` why a peer is reached over tcp.
#pragma once

#include <string>
#include <vector>

namespace symmesh {

std::vector<std::string> verbs_devices();

}  // namespace symmesh
