#include "daemon/formation_transports.h"

#include <spdlog/spdlog.h>

#include "common/errors.h"
#include "transport/rdma.h"
#include "wire/enum_text.h"

namespace symmesh {
namespace {

// The kind --transport forces ("" for auto).
std::string forced_kind(const DaemonConfig& config) {
  return config.transport == wire::TRANSPORT_CHOICE_AUTO ? "" : wire::enum_text(config.transport);
}

}  // namespace

FormationTransports::FormationTransports(const DaemonConfig& config, Node& node,
                                         const std::string& secret, uint64_t incarnation)
    : config_(config), node_(node), reasons_(config.nodes), chosen_(config.nodes, -1) {
  const std::string forced = forced_kind(config);
  const NetworkSetup setup{config, node, secret, incarnation};
  const std::vector<const NetworkKind*>& kinds = network_kinds();
  ends_.resize(kinds.size());
  wire_index_.assign(kinds.size(), -1);
  // Opened from the fallback up (a bad --listen fails before a device is opened), then held in
  // the order of preference.
  std::vector<std::unique_ptr<NetworkTransport>> opened(kinds.size());
  for (size_t k = kinds.size(); k-- > 0;) {
    LocalEnd& end = ends_[k];
    end.kind = kinds[k];
    const std::string name(end.kind->name());
    if (config.nodes == 1) {
      end.absent = "a single node has no peers";
      continue;
    }
    if (!forced.empty() && forced != name && !end.kind->fallback()) {
      end.absent = "--transport " + forced;
      continue;
    }
    try {
      opened[k] = end.kind->open(setup);
      end.open = true;
      end.described = end.kind->describe(*opened[k]);
      if (!end.described.empty()) {
        spdlog::info("node {}: {} on {}", config.node_rank, name, end.described);
      }
    } catch (const InvalidArgument&) {
      throw;  // a wrong --rdma-device or --rdma-gid-index is the user's to fix
    } catch (const std::exception& e) {
      if (end.kind->fallback()) throw;  // every node needs it
      std::string why = e.what();
      if (why.rfind(name + ": ", 0) == 0) why = why.substr(name.size() + 2);
      if (forced == name) {
        const std::string what = "--transport " + name + ": " + why + " (use --transport auto or " +
                                 std::string(kinds.back()->name()) + " here)";
        // A port without a link may come back: the daemon forms again later, as after any loss.
        if (dynamic_cast<const PortNotActive*>(&e)) throw PortNotActive(what);
        throw InvalidArgument(what);
      }
      spdlog::info("node {}: no {} ({})", config.node_rank, name, why);
      end.absent = why;
    }
  }
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (!opened[k]) continue;
    wire_index_[k] = int(wires_.networks.size());
    wires_.networks.push_back(std::move(opened[k]));
  }
}

FormationTransports::~FormationTransports() {
  shutdown();
}

void FormationTransports::fill_hello(wire::NodeHello& hello) const {
  hello.clear_transport();
  for (size_t k = 0; k < ends_.size(); ++k) {
    wire::TransportAddress& offer = *hello.add_transport();
    offer.set_kind(std::string(ends_[k].kind->name()));
    if (ends_[k].open) {
      offer.set_address(ends_[k].kind->address(*wires_.networks[wire_index_[k]]));
    } else {
      offer.set_absent(ends_[k].absent);
    }
  }
}

void FormationTransports::connect(const wire::ClusterView& view, Deadline deadline) {
  if (wires_.networks.empty()) return;  // a single node
  const std::string forced = forced_kind(config_);
  std::vector<std::string> reasons(config_.nodes);
  std::vector<int> chosen(config_.nodes, -1);
  // Per kind: every node's address, and the peers that chose it.
  std::vector<std::vector<std::string>> addresses(ends_.size(),
                                                  std::vector<std::string>(config_.nodes));
  std::vector<std::vector<bool>> choosers(ends_.size(), std::vector<bool>(config_.nodes, false));
  for (const auto& info : view.node()) {
    const int n = static_cast<int>(info.node_rank());
    for (size_t k = 0; k < ends_.size(); ++k) {
      if (const wire::TransportAddress* offer = offered(info, ends_[k].kind->name())) {
        addresses[k][n] = offer->address();
      }
    }
    if (n == config_.node_rank) continue;
    const PeerChoice choice = choose_transport(ends_, info, forced);
    reasons[n] = choice.reason;
    chosen[n] = wire_index_[choice.kind];
    choosers[choice.kind][n] = true;
  }
  // The fallback first (it connects every pair, and the others may need it up), then the rest.
  for (size_t k = ends_.size(); k-- > 0;) {
    if (!ends_[k].open) continue;
    ends_[k].kind->connect(*wires_.networks[wire_index_[k]], addresses[k], choosers[k], deadline);
  }
  {
    // Published at once: the status endpoint reads them from its own threads.
    std::lock_guard lock(reasons_mutex_);
    reasons_ = std::move(reasons);
    chosen_ = chosen;
  }
  wires_.attach(node_, chosen);
}

void FormationTransports::on_peer_down(std::function<void(int, const std::string&)> callback) {
  for (size_t k = 0; k < ends_.size(); ++k) {
    if (!ends_[k].open) continue;
    const std::string name(ends_[k].kind->name());
    wires_.networks[wire_index_[k]]->on_peer_down(
        [callback, name](int peer, const std::string& why) { callback(peer, name + ": " + why); });
  }
}

void FormationTransports::on_refused(std::function<void(const std::string&)> callback) {
  for (auto& network : wires_.networks) network->on_refused(callback);
}

bool FormationTransports::peer_up(int node) const {
  std::lock_guard lock(reasons_mutex_);
  const int index = chosen_.at(node);
  return index >= 0 && wires_.networks[index]->peer_up(node);
}

std::string FormationTransports::reason(int node) const {
  std::lock_guard lock(reasons_mutex_);
  return reasons_.at(node);
}

std::string FormationTransports::transport_name(int node) const {
  std::lock_guard lock(reasons_mutex_);
  const int index = chosen_.at(node);
  return index < 0 ? "" : std::string(wires_.networks[index]->name());
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
