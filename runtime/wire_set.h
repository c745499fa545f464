// One node's network transports to the other nodes, built the same way by the daemon and by
// LocalCluster: tcp (always there, the fallback), verbs where both ends have a device, and,
// when verbs is used on a device whose atomics are not coherent with the CPU's, the device
// atomics transport for the node's own PEs (transport/verbs/device_atomics.h).
#pragma once

#include <memory>
#include <vector>

#include "runtime/node.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/verbs/device_atomics.h"
#include "transport/verbs/verbs_transport.h"

namespace symmesh {

struct WireSet {
  std::unique_ptr<TcpTransport> tcp;
  std::unique_ptr<VerbsTransport> verbs;
  std::unique_ptr<DeviceAtomicsTransport> device_atomics;

  // Points `node` at verbs for every peer n with over_verbs[n] (their queue pairs connected
  // already), at tcp for the others, and sets the wait policy verbs needs.
  void attach(Node& node, const std::vector<bool>& over_verbs);
  // Ensures everything sent on every transport has landed.
  void flush_all(Deadline deadline);
  // Closes every transport (peers closing from now on are expected) and detaches `node`.
  void shutdown(Node& node);
};

}  // namespace symmesh
