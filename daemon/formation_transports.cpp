#include "daemon/formation_transports.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/errors.h"

namespace symmesh {

FormationTransports::FormationTransports(const DaemonConfig& config, Node& node,
                                         const std::string& secret, uint64_t incarnation)
    : config_(config), node_(node), reasons_(config.nodes) {
  if (config.nodes == 1) {
    verbs_absent_ = "a single node has no peers";
    return;
  }
  TcpOptions tcp;
  tcp.connections_per_peer = config.tcp_connections;
  tcp.op_timeout = config.wait_timeout;
  tcp.incarnation = incarnation;
  auto tcp_transport =
      std::make_unique<TcpTransport>(config.node_rank, config.nodes, config.ranks_per_node,
                                     node.segment(), node.doorbell(), secret, tcp);
  tcp_transport->listen(HostPort{config.listen, 0});
  tcp_ = tcp_transport.get();
  if (config.transport == wire::TRANSPORT_CHOICE_TCP) {
    verbs_absent_ = "--transport tcp";
    wires_.networks.push_back(std::move(tcp_transport));
    return;
  }
  VerbsOptions options;
  options.device = VerbsDeviceOptions{config.rdma_device, config.rdma_gid_index};
  options.op_timeout = config.wait_timeout;
  options.progress_thread = config.verbs_progress == wire::VERBS_PROGRESS_THREAD;
  try {
    auto verbs = open_verbs_transport(config.node_rank, config.nodes, config.ranks_per_node,
                                      node.segment(), node.doorbell(), options);
    spdlog::info("node {}: verbs on {}", config.node_rank, verbs->describe());
    verbs_ = verbs.get();
    wires_.networks.push_back(std::move(verbs));
  } catch (const InvalidArgument&) {
    throw;  // a wrong --rdma-device or --rdma-gid-index is the user's to fix
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (why.rfind("verbs: ", 0) == 0) why = why.substr(7);
    if (config.transport == wire::TRANSPORT_CHOICE_VERBS) {
      const std::string what = "--transport verbs: " + why + " (use --transport auto or tcp here)";
      // A port without a link may come back: the daemon forms again later, as after any loss.
      if (dynamic_cast<const PortNotActive*>(&e)) throw PortNotActive(what);
      throw InvalidArgument(what);
    }
    spdlog::info("node {}: no verbs ({}); peers use tcp", config.node_rank, why);
    verbs_absent_ = why;
  }
  wires_.networks.push_back(std::move(tcp_transport));
}

FormationTransports::~FormationTransports() {
  shutdown();
}

void FormationTransports::fill_hello(wire::NodeHello& hello) const {
  hello.clear_transports();
  hello.add_transports("tcp");
  if (verbs_) {
    hello.add_transports("verbs");
    *hello.mutable_verbs() = verbs_->local_info();
  } else {
    hello.set_verbs_absent(verbs_absent_);
  }
  const HostPort data = tcp_ ? tcp_->listening_on() : HostPort{config_.listen, 0};
  *hello.mutable_data_endpoint() = endpoint_message(data);
}

void FormationTransports::connect(const wire::ClusterView& view, Deadline deadline) {
  if (!tcp_) return;
  tcp_->connect(data_addresses(view), deadline);
  // Index into wires_.networks per peer: verbs is first where this node has it, tcp is last.
  const int over_tcp = int(wires_.networks.size()) - 1;
  std::vector<int> choice(config_.nodes, over_tcp);
  std::vector<std::string> reasons(config_.nodes);
  for (const auto& info : view.node()) {
    const int n = static_cast<int>(info.node_rank());
    if (n == config_.node_rank) continue;
    const std::string peer = "node " + std::to_string(n);
    if (verbs_ && info.has_verbs()) {
      verbs_->connect(n, info.verbs());
      choice[n] = 0;
      reasons[n] =
          "verbs: " + verbs_->describe() +
          (config_.transport == wire::TRANSPORT_CHOICE_VERBS ? ", forced by --transport"
                                                             : ", both ends have a device");
      continue;
    }
    if (config_.transport == wire::TRANSPORT_CHOICE_VERBS) {
      throw PeerError("--transport verbs: " + peer + " cannot use verbs (" + info.verbs_absent() +
                      "); give every node a device, or use auto");
    }
    std::string why = "forced by --transport";
    if (config_.transport != wire::TRANSPORT_CHOICE_TCP) {
      why = verbs_ ? "verbs: " + peer + " has none (" + info.verbs_absent() + ")"
                   : "verbs: " + verbs_absent_;
    }
    reasons[n] = "tcp: " + why;
  }
  {
    // Published at once: the status endpoint reads them from its own threads.
    std::lock_guard lock(reasons_mutex_);
    reasons_ = std::move(reasons);
  }
  wires_.attach(node_, choice);
}

void FormationTransports::on_peer_down(std::function<void(int, const std::string&)> callback) {
  if (tcp_) {
    tcp_->on_peer_down([callback](int peer, const std::string& why) {
      callback(peer, "data connection lost: " + why);
    });
  }
  if (verbs_) {
    verbs_->on_peer_down(
        [callback](int peer, const std::string& why) { callback(peer, "verbs failed: " + why); });
  }
}

void FormationTransports::on_refused(std::function<void(const std::string&)> callback) {
  if (tcp_) tcp_->on_refused(std::move(callback));
}

bool FormationTransports::peer_up(int node) const {
  if (reason(node).rfind("verbs", 0) == 0) return verbs_->peer_up(node);
  return tcp_ && tcp_->peer_up(node);
}

std::string FormationTransports::reason(int node) const {
  std::lock_guard lock(reasons_mutex_);
  return reasons_.at(node);
}

const std::vector<const NetworkTransport*> FormationTransports::networks() const {
  std::vector<const NetworkTransport*> out;
  for (const auto& network : wires_.networks) out.push_back(network.get());
  return out;
}

void FormationTransports::shutdown() {
  wires_.shutdown(node_);
}

}  // namespace symmesh
