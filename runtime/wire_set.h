// One node's network transports to the other nodes, built the same way by the daemon and by
// LocalCluster: tcp (always there, the fallback), verbs where both ends have a device, and,
// when verbs is used on a device whose atomics are not coherent with the CPU's, the
// transport verbs gives the node's own PEs instead of shm (RdmaTransport::own_node_transport).
#pragma once

#include <memory>
#include <vector>

#include "runtime/node.h"
#include "transport/rdma.h"
#include "transport/tcp/tcp_transport.h"

namespace symmesh {

struct WireSet {
  std::unique_ptr<TcpTransport> tcp;
  std::unique_ptr<RdmaTransport> verbs;
  std::unique_ptr<Transport> own_node;

  // Points `node` at verbs for every peer n with over_verbs[n] (their queue pairs connected
  // already), at tcp for the others, and sets the wait policy: the one verbs needs, and PEs
  // that wait poll the tcp connections when some peer is reached over tcp.
  void attach(Node& node, const std::vector<bool>& over_verbs);
  // Ensures everything sent on every transport has landed.
  void flush_all(Deadline deadline);
  // Closes every transport (peers closing from now on are expected) and detaches `node`.
  void shutdown(Node& node);
};

}  // namespace symmesh
