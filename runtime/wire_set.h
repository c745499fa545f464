// One node's network transports to the other nodes, built the same way by the daemon and by
// LocalCluster, in the order of preference (verbs before tcp). Each peer is reached over the
// one chosen for it; a transport used for some peer may shape the node's waits and give the
// node's own PEs a transport instead of shm (verbs on a device whose atomics are not coherent
// with the CPU's: NetworkTransport::own_node_transport).
#pragma once

#include <memory>
#include <vector>

#include "runtime/node.h"
#include "transport/transport.h"

namespace symmesh {

struct WireSet {
  std::vector<std::unique_ptr<NetworkTransport>> networks;  // in the order of preference
  std::unique_ptr<Transport> own_node;

  // Points `node` at networks[choice[n]] for every peer n (connected already; choice[n] of
  // the node itself is not read), and sets the wait policy and the own node's transport that
  // the transports in use ask for.
  void attach(Node& node, const std::vector<int>& choice);
  // Ensures everything sent on every transport has landed.
  void flush_all(Deadline deadline);
  // Closes every transport (peers closing from now on are expected) and detaches `node`.
  void shutdown(Node& node);
};

}  // namespace symmesh
