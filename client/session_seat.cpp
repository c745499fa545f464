#include "client/session_seat.h"

#include <filesystem>

#include "client/client.h"
#include "common/errors.h"
#include "transport/secret_file.h"

namespace symmesh {
namespace {

std::unique_ptr<Client> connect(const HostPort& at, const std::string& secret_file,
                                Deadline deadline) {
  if (secret_file.empty()) {
    throw InvalidArgument(
        "no secret: set SYMMESH_SECRET_FILE (the file deploy/local-cluster.sh "
        "prints, or the cluster's --secret-file)");
  }
  return Client::connect(at, read_secret_file(secret_file), "'" + secret_file + "'", deadline);
}

}  // namespace

SessionSeat find_seat(const HostPort& daemon, const std::string& secret_file, int rank,
                      int world_size, Deadline deadline) {
  const wire::StatusReply any = connect(daemon, secret_file, deadline)->status(deadline);
  const int64_t nodes = any.nodes(), per_node = any.ranks_per_node();
  if (world_size != nodes * per_node) {
    throw InvalidArgument("world size " + std::to_string(world_size) + " is not the cluster's " +
                          std::to_string(nodes) + " nodes x " + std::to_string(per_node) +
                          " PEs = " + std::to_string(nodes * per_node) +
                          " (every PE of the cluster takes part in a session)");
  }
  if (rank < 0 || rank >= world_size) {
    throw InvalidArgument("rank " + std::to_string(rank) + " is outside 0.." +
                          std::to_string(world_size - 1));
  }
  SessionSeat seat{.attach_socket = "",
                   .local_rank = int(rank % per_node),
                   .node_rank = int(rank / per_node),
                   .nodes = int(nodes),
                   .ranks_per_node = int(per_node)};
  wire::StatusReply home = any;
  if (int(any.node_rank()) != seat.node_rank) {
    std::string endpoint;
    for (const auto& node : any.node()) {
      if (int(node.node_rank()) == seat.node_rank) endpoint = node.control_endpoint();
    }
    if (endpoint.empty()) {
      throw PeerError("the daemon at " + daemon.str() + " does not know node " +
                      std::to_string(seat.node_rank) + " (is it up? symmesh status)");
    }
    home = connect(parse_host_port(endpoint, "a node's control endpoint"), secret_file, deadline)
               ->status(deadline);
  }
  if (int(home.node_rank()) != seat.node_rank || home.nodes() != any.nodes() ||
      home.ranks_per_node() != any.ranks_per_node()) {
    throw PeerError("the daemon named as node " + std::to_string(seat.node_rank) +
                    " answers as node " + std::to_string(home.node_rank()) + " of " +
                    std::to_string(home.nodes()) + " x " + std::to_string(home.ranks_per_node()) +
                    ": the cluster is re-forming, or its daemons disagree");
  }
  seat.attach_socket = home.attach_socket();
  if (seat.attach_socket.empty()) {
    throw PeerError("node " + std::to_string(seat.node_rank) +
                    "'s daemon takes no attached "
                    "processes");
  }
  if (!std::filesystem::exists(seat.attach_socket)) {
    throw PeerError("rank " + std::to_string(rank) + " is local rank " +
                    std::to_string(seat.local_rank) + " of node " + std::to_string(seat.node_rank) +
                    " (ranks are node-major), whose attach "
                    "socket " +
                    seat.attach_socket + " is not on this host: start rank " +
                    std::to_string(rank) + " on that node, or set SYMMESH_DAEMON to its daemon");
  }
  return seat;
}

uint64_t start_session(const HostPort& daemon, const std::string& secret_file,
                       uint32_t attach_timeout_s, Deadline deadline) {
  auto client = connect(daemon, secret_file, deadline);
  wire::StatusReply status = client->status(deadline);
  if (status.node_rank() != 0) {
    std::string root;
    for (const auto& node : status.node()) {
      if (node.node_rank() == 0) root = node.control_endpoint();
    }
    if (root.empty()) throw PeerError("the daemon does not know the root yet");
    client = connect(parse_host_port(root, "the root's endpoint"), secret_file, deadline);
  }
  wire::JobSpec spec;
  spec.mutable_session()->set_attach_timeout_s(attach_timeout_s);
  return client->submit_detached(spec, deadline);
}

}  // namespace symmesh
