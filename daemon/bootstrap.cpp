#include "daemon/bootstrap.h"

#include <spdlog/spdlog.h>

#include "common/errors.h"
#include "transport/auth.h"
#include "wire/enum_text.h"

namespace symmesh {
namespace {

wire::NodeInfo info_of(const wire::NodeHello& hello) {
  wire::NodeInfo info;
  info.set_node_rank(hello.node_rank());
  info.set_hostname(hello.hostname());
  info.set_status_url(hello.status_url());
  info.set_incarnation(hello.incarnation());
  *info.mutable_control_endpoint() = hello.control_endpoint();
  info.set_transport_request(hello.transport_request());
  *info.mutable_transport() = hello.transport();
  return info;
}

}  // namespace

std::string check_hello(const wire::NodeHello& root, const wire::NodeHello& theirs) {
  auto mismatch = [&](const char* field, uint64_t ours, uint64_t their) {
    return std::string(field) + " mismatch: the joining node has " + std::to_string(their) +
           ", the root has " + std::to_string(ours);
  };
  if (theirs.protocol_version() != root.protocol_version()) {
    return mismatch("protocol_version", root.protocol_version(), theirs.protocol_version());
  }
  if (theirs.nodes() != root.nodes()) return mismatch("nodes", root.nodes(), theirs.nodes());
  if (theirs.ranks_per_node() != root.ranks_per_node()) {
    return mismatch("ranks_per_node", root.ranks_per_node(), theirs.ranks_per_node());
  }
  if (theirs.heap_size() != root.heap_size()) {
    return mismatch("heap_size", root.heap_size(), theirs.heap_size());
  }
  if (theirs.tcp_connections() != root.tcp_connections()) {
    return mismatch("tcp_connections", root.tcp_connections(), theirs.tcp_connections());
  }
  if (theirs.barrier_algo() != root.barrier_algo() || theirs.barrier_k() != root.barrier_k()) {
    return "barrier_algo mismatch: the joining node has " + wire::enum_text(theirs.barrier_algo()) +
           " (k " + std::to_string(theirs.barrier_k()) + "), the root has " +
           wire::enum_text(root.barrier_algo()) + " (k " + std::to_string(root.barrier_k()) + ")";
  }
  if (theirs.node_rank() == 0 || theirs.node_rank() >= root.nodes()) {
    return "node_rank " + std::to_string(theirs.node_rank()) + " is outside 1.." +
           std::to_string(root.nodes() - 1) + " (0 is the root)";
  }
  return {};
}

wire::ClusterView build_view(const std::vector<wire::NodeHello>& hellos, uint64_t epoch) {
  const wire::NodeHello& root = hellos.at(0);
  wire::ClusterView view;
  view.set_nodes(root.nodes());
  view.set_ranks_per_node(root.ranks_per_node());
  view.set_heap_size(root.heap_size());
  view.set_tcp_connections(root.tcp_connections());
  view.set_epoch(epoch);
  for (const auto& hello : hellos) *view.add_node() = info_of(hello);
  return view;
}

wire::ClusterView bootstrap_join(BlockingChannel& link, const wire::NodeHello& mine,
                                 const std::string& secret, Deadline deadline) {
  const auto root_identity = authenticate_client(
      link, secret, AuthIdentity{wire::ROLE_BOOTSTRAP, mine.node_rank(), mine.incarnation(), 0},
      deadline);
  if (root_identity.node_rank() != 0) {
    throw PeerError("the bootstrap address " + link.peer_name() + " answered as node " +
                    std::to_string(root_identity.node_rank()) + ", not the root (node 0)");
  }
  link.write(mine, deadline);
  wire::BootstrapReply reply;
  // The root answers once every node has come: wait as long as it waits.
  link.read(reply, deadline + std::chrono::seconds(10));
  if (reply.has_error()) throw InvalidArgument("the root refused this node: " + reply.error());
  const wire::ClusterView& view = reply.view();
  // The view indexes this node's tables: every entry in its place, this daemon among them.
  if (view.nodes() != mine.nodes() || view.node_size() != int(mine.nodes()) ||
      view.ranks_per_node() != mine.ranks_per_node()) {
    throw PeerError("the root's cluster view has " + std::to_string(view.node_size()) +
                    " entries for " + std::to_string(view.nodes()) + " nodes x " +
                    std::to_string(view.ranks_per_node()) + " ranks; this node runs " +
                    std::to_string(mine.nodes()) + " nodes x " +
                    std::to_string(mine.ranks_per_node()) + " ranks");
  }
  for (int node = 0; node < view.node_size(); ++node) {
    if (view.node(node).node_rank() != uint32_t(node) ||
        (node == int(mine.node_rank()) && view.node(node).incarnation() != mine.incarnation())) {
      throw PeerError("the root's cluster view lists node " +
                      std::to_string(view.node(node).node_rank()) + " in place " +
                      std::to_string(node) + " (incarnation " +
                      std::to_string(view.node(node).incarnation()) + "); expected node " +
                      std::to_string(node) + " in place, this daemon with incarnation " +
                      std::to_string(mine.incarnation()));
    }
  }
  return view;
}

}  // namespace symmesh
