#include "runtime/wire_set.h"

namespace symmesh {

void WireSet::attach(Node& node, const std::vector<int>& choice) {
  std::vector<bool> used(networks.size(), false);
  for (int peer = 0; peer < node.nodes(); ++peer) {
    if (peer == node.rank()) continue;
    used.at(choice.at(peer)) = true;
    node.set_transport(peer, networks[choice[peer]].get());
  }
  WaitPolicy policy;
  for (size_t i = 0; i < networks.size(); ++i) {
    if (!used[i]) continue;
    networks[i]->shape_wait_policy(policy);
    if (!own_node) {
      own_node = networks[i]->own_node_transport(node.transport_to(node.rank()), node.segment(),
                                                 node.doorbell());
    }
  }
  node.set_wait_policy(policy);
  if (own_node) node.set_transport(node.rank(), own_node.get());
}

void WireSet::flush_all(Deadline deadline) {
  // The fallback (tcp) first, as the daemon always has.
  for (auto it = networks.rbegin(); it != networks.rend(); ++it) (*it)->flush_all(deadline);
}

void WireSet::shutdown(Node& node) {
  node.detach_transports();
  for (auto& network : networks) network->expect_shutdown();
  // The fallback (tcp) first, as the daemon has always closed them.
  for (auto it = networks.rbegin(); it != networks.rend(); ++it) (*it)->shutdown();
  own_node.reset();
}

}  // namespace symmesh
