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
  wires_.tcp = std::make_unique<TcpTransport>(config.node_rank, config.nodes, config.ranks_per_node,
                                              node.segment(), node.doorbell(), secret, tcp);
  wires_.tcp->listen(HostPort{config.listen, 0});
  if (config.transport == wire::TRANSPORT_CHOICE_TCP) {
    verbs_absent_ = "--transport tcp";
    return;
  }
  VerbsOptions options;
  options.device = VerbsDeviceOptions{config.rdma_device, config.rdma_gid_index};
  options.op_timeout = config.wait_timeout;
  options.progress_thread = config.verbs_progress == wire::VERBS_PROGRESS_THREAD;
  try {
    wires_.verbs = open_verbs_transport(config.node_rank, config.nodes, config.ranks_per_node,
                                        node.segment(), node.doorbell(), options);
    spdlog::info("node {}: verbs on {}", config.node_rank, wires_.verbs->describe());
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
}

FormationTransports::~FormationTransports() {
  shutdown();
}

void FormationTransports::fill_hello(wire::NodeHello& hello) const {
  hello.clear_transports();
  hello.add_transports("tcp");
  if (wires_.verbs) {
    hello.add_transports("verbs");
    *hello.mutable_verbs() = wires_.verbs->local_info();
  } else {
    hello.set_verbs_absent(verbs_absent_);
  }
  const HostPort data = wires_.tcp ? wires_.tcp->listening_on() : HostPort{config_.listen, 0};
  *hello.mutable_data_endpoint() = endpoint_message(data);
}

void FormationTransports::connect(const wire::ClusterView& view, Deadline deadline) {
  if (!wires_.tcp) return;
  wires_.tcp->connect(data_addresses(view), deadline);
  std::vector<bool> over_verbs(config_.nodes, false);
  std::vector<std::string> reasons(config_.nodes);
  for (const auto& info : view.node()) {
    const int n = static_cast<int>(info.node_rank());
    if (n == config_.node_rank) continue;
    const std::string peer = "node " + std::to_string(n);
    if (wires_.verbs && info.has_verbs()) {
      wires_.verbs->connect(n, info.verbs());
      over_verbs[n] = true;
      reasons[n] =
          "verbs: " + wires_.verbs->describe() +
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
      why = wires_.verbs ? "verbs: " + peer + " has none (" + info.verbs_absent() + ")"
                         : "verbs: " + verbs_absent_;
    }
    reasons[n] = "tcp: " + why;
  }
  {
    // Published at once: the status endpoint reads them from its own threads.
    std::lock_guard lock(reasons_mutex_);
    reasons_ = std::move(reasons);
  }
  wires_.attach(node_, over_verbs);
}

void FormationTransports::on_peer_down(std::function<void(int, const std::string&)> callback) {
  if (wires_.tcp) {
    wires_.tcp->on_peer_down([callback](int peer, const std::string& why) {
      callback(peer, "data connection lost: " + why);
    });
  }
  if (wires_.verbs) {
    wires_.verbs->on_peer_down(
        [callback](int peer, const std::string& why) { callback(peer, "verbs failed: " + why); });
  }
}

void FormationTransports::on_refused(std::function<void(const std::string&)> callback) {
  if (wires_.tcp) wires_.tcp->on_refused(std::move(callback));
}

bool FormationTransports::peer_up(int node) const {
  if (reason(node).rfind("verbs", 0) == 0) return wires_.verbs->peer_up(node);
  return wires_.tcp && wires_.tcp->peer_up(node);
}

std::string FormationTransports::reason(int node) const {
  std::lock_guard lock(reasons_mutex_);
  return reasons_.at(node);
}

const std::vector<const NetworkTransport*> FormationTransports::networks() const {
  std::vector<const NetworkTransport*> out;
  if (wires_.tcp) out.push_back(wires_.tcp.get());
  if (wires_.verbs) out.push_back(wires_.verbs.get());
  return out;
}

void FormationTransports::shutdown() {
  wires_.shutdown(node_);
}

}  // namespace symmesh
