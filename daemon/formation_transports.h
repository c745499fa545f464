// This node's part in one formation of the cluster: its data transports, opened before it
// says hello (so the hello carries their addresses and queue pairs) and connected once the
// root's view names every node's; the transport chosen for each peer and why. A daemon makes
// a new formation whenever membership changes (a node restarted, the root came back) and
// shuts the old one down first, so nothing of a fenced daemon's connections survives.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/config.h"
#include "runtime/node.h"
#include "runtime/wire_set.h"
#include "transport/rdma.h"
#include "transport/tcp/address.h"
#include "transport/tcp/tcp_transport.h"
#include "wire/bootstrap.pb.h"

namespace symmesh {

class FormationTransports {
 public:
  // Listens for data connections and opens the verbs device (unless --transport tcp).
  // Throws InvalidArgument for a device the configuration names but cannot have, and
  // PortNotActive under --transport verbs when the device's port has no link.
  FormationTransports(const DaemonConfig& config, Node& node, const std::string& secret,
                      uint64_t incarnation);
  ~FormationTransports();

  // The transport fields of this node's hello: data endpoint, transports, verbs.
  void fill_hello(wire::NodeHello& hello) const;
  // Connects to every peer of `view`: verbs where both ends have a device (and the
  // configuration allows), tcp otherwise; then routes the node's operations through them.
  void connect(const wire::ClusterView& view, Deadline deadline);
  // Called (on a transport's thread) when a peer's transport fails.
  void on_peer_down(std::function<void(int node, const std::string& why)> callback);
  // Counts data connections refused in their handshake (auth, bad_request, timeout).
  void on_refused(std::function<void(const std::string& kind)> callback);

  void flush_all(Deadline deadline) { wires_.flush_all(deadline); }
  bool peer_up(int node) const;
  // "verbs: ..." or "tcp: ..." (empty before connect).
  std::string reason(int node) const;
  const std::vector<const NetworkTransport*> networks() const;
  // Closes every transport and detaches the node from them.
  void shutdown();

 private:
  const DaemonConfig& config_;
  Node& node_;
  WireSet wires_;
  // Where wires_ holds them: verbs first when this node has it, tcp last.
  RdmaTransport* verbs_ = nullptr;
  TcpTransport* tcp_ = nullptr;
  std::string verbs_absent_;  // why this node has no verbs transport
  mutable std::mutex reasons_mutex_;
  std::vector<std::string> reasons_;  // per node: which transport and why
};

}  // namespace symmesh
