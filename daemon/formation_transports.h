// This node's part in one formation of the cluster: its data transports, one per network kind
// it can have (daemon/network_kinds/network_kind.h), opened before it says hello (so the hello
// carries their addresses) and connected once the root's view names every node's; the kind
// chosen for each peer and why. A daemon makes a new formation whenever membership changes (a
// node restarted, the root came back) and shuts the old one down first, so nothing of a fenced
// daemon's connections survives.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/config.h"
#include "daemon/network_kinds/network_kind.h"
#include "runtime/node.h"
#include "runtime/wire_set.h"
#include "wire/bootstrap.pb.h"

namespace symmesh {

class FormationTransports {
 public:
  // Opens every kind this node can have (only the fallback and the one --transport forces,
  // if any). Throws InvalidArgument for a device the configuration names but cannot have, and
  // PortNotActive when the kind --transport forces is on a port without a link.
  FormationTransports(const DaemonConfig& config, Node& node, const std::string& secret,
                      uint64_t incarnation);
  ~FormationTransports();

  // The transports of this node's hello: every kind, its address or why it has none.
  void fill_hello(wire::NodeHello& hello) const;
  // Connects to every peer of `view` over the kind chosen for it (choose_transport), then
  // routes the node's operations through them.
  void connect(const wire::ClusterView& view, Deadline deadline);
  // Called (on a transport's thread) when a peer's transport fails.
  void on_peer_down(std::function<void(int node, const std::string& why)> callback);
  // Counts data connections refused in their handshake (auth, bad_request, timeout).
  void on_refused(std::function<void(const std::string& kind)> callback);

  void flush_all(Deadline deadline) { wires_.flush_all(deadline); }
  bool peer_up(int node) const;
  // "verbs: ..." or "tcp: ..." (empty before connect).
  std::string reason(int node) const;
  // The name of the transport chosen for `node` (empty before connect).
  std::string transport_name(int node) const;
  const std::vector<const NetworkTransport*> networks() const;
  // Closes every transport and detaches the node from them.
  void shutdown();

 private:
  const DaemonConfig& config_;
  Node& node_;
  WireSet wires_;                // the open kinds' transports, in the order of preference
  std::vector<LocalEnd> ends_;   // every kind, in network_kinds() order
  std::vector<int> wire_index_;  // per kind: its place in wires_.networks (-1: not open)
  mutable std::mutex reasons_mutex_;
  std::vector<std::string> reasons_;  // per node: which transport and why
  std::vector<int> chosen_;           // per node: its place in wires_.networks (-1: none yet)
};

}  // namespace symmesh
