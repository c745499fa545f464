// tcp as a network kind: a listening socket on --listen, an Endpoint in the hello, and
// connections to every peer (the fallback).
#include "common/errors.h"
#include "daemon/network_kinds/network_kind.h"
#include "transport/tcp/address.h"
#include "transport/tcp/tcp_transport.h"

namespace symmesh {
namespace {

class TcpKind final : public NetworkKind {
 public:
  std::string_view name() const override { return "tcp"; }
  bool fallback() const override { return true; }

  std::unique_ptr<NetworkTransport> open(const NetworkSetup& setup) const override {
    const DaemonConfig& config = setup.config;
    TcpOptions options;
    options.connections_per_peer = config.tcp_connections;
    options.op_timeout = config.wait_timeout;
    options.incarnation = setup.incarnation;
    auto tcp = std::make_unique<TcpTransport>(config.node_rank, config.nodes, config.ranks_per_node,
                                              setup.node.segment(), setup.node.doorbell(),
                                              setup.secret, options);
    tcp->listen(HostPort{config.listen, 0});
    return tcp;
  }

  std::string address(const NetworkTransport& mine) const override {
    return endpoint_message(dynamic_cast<const TcpTransport&>(mine).listening_on())
        .SerializeAsString();
  }

  std::string address_text(const std::string& address) const override {
    wire::Endpoint endpoint;
    if (!endpoint.ParseFromString(address)) return "(does not parse)";
    return host_port(endpoint).str();
  }

  void connect(NetworkTransport& mine, const std::vector<std::string>& addresses,
               const std::vector<bool>& chosen, Deadline deadline) const override {
    (void)chosen;  // the fallback connects to every peer
    std::vector<HostPort> endpoints;
    for (size_t node = 0; node < addresses.size(); ++node) {
      wire::Endpoint endpoint;
      if (!endpoint.ParseFromString(addresses[node]) || endpoint.host().empty()) {
        throw PeerError("node " + std::to_string(node) + " offers no tcp address that parses");
      }
      endpoints.push_back(host_port(endpoint));
    }
    dynamic_cast<TcpTransport&>(mine).connect(endpoints, deadline);
  }
};

}  // namespace

const NetworkKind& tcp_kind() {
  static const TcpKind kind;
  return kind;
}

}  // namespace symmesh
