#include "runtime/wire_set.h"

#include <algorithm>

namespace symmesh {

void WireSet::attach(Node& node, const std::vector<bool>& over_verbs) {
  bool any_tcp = false;
  bool any_verbs = false;
  for (int peer = 0; peer < node.nodes(); ++peer) {
    if (peer == node.rank()) continue;
    if (over_verbs.at(peer)) {
      node.set_transport(peer, verbs.get());
      any_verbs = true;
    } else {
      node.set_transport(peer, tcp.get());
      any_tcp = true;
    }
  }
  WaitPolicy policy = any_verbs ? verbs->wait_policy() : WaitPolicy{};
  if (any_tcp) policy.progress = tcp.get();
  node.set_wait_policy(policy);
  if (!any_verbs) return;
  own_node =
      verbs->own_node_transport(node.transport_to(node.rank()), node.segment(), node.doorbell());
  if (own_node) node.set_transport(node.rank(), own_node.get());
}

void WireSet::flush_all(Deadline deadline) {
  if (tcp) tcp->flush_all(deadline);
  if (verbs) verbs->flush_all(deadline);
}

void WireSet::shutdown(Node& node) {
  node.detach_transports();
  if (tcp) tcp->expect_shutdown();
  if (tcp) tcp->shutdown();
  if (verbs) verbs->shutdown();
  own_node.reset();
}

}  // namespace symmesh
