// The network transport kinds a daemon knows, in one table in the order of preference: how a
// node opens its end of each, what its hello offers for it, and how it connects to the peers
// that chose it; and the one function that chooses, per peer, which kind carries its data.
//
// Adding a kind: its transport in a folder of transport/ (a NetworkTransport), a NetworkKind
// for it in a file here, one line in network_kinds() (its place in the order of preference),
// and its word in TransportChoice (wire/bootstrap.proto) so --transport can force it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/config.h"
#include "runtime/node.h"
#include "transport/transport.h"
#include "wire/bootstrap.pb.h"

namespace symmesh {

// What a kind opens this node's end with.
struct NetworkSetup {
  const DaemonConfig& config;
  Node& node;
  const std::string& secret;
  uint64_t incarnation;
};

class NetworkKind {
 public:
  virtual ~NetworkKind() = default;
  // Its word: in hellos, --transport, status and metrics.
  virtual std::string_view name() const = 0;
  // Reaches every peer (tcp): always opened, connected to every peer, and chosen where no
  // other kind fits. The table ends with it.
  virtual bool fallback() const { return false; }
  // Opens this node's end (a listening socket, a device). Throws InvalidArgument for a
  // configuration it cannot have (a device that does not exist), PortNotActive for a port
  // without a link, and any other error when this node cannot have it ("<name>: why").
  virtual std::unique_ptr<NetworkTransport> open(const NetworkSetup& setup) const = 0;
  // The address its peers connect to, serialised (the kind's own message).
  virtual std::string address(const NetworkTransport& mine) const = 0;
  // The address as status shows it.
  virtual std::string address_text(const std::string& address) const = 0;
  // What this node's end is, for logs and the per-peer reason ("rxe0 port 1, ..."); empty
  // when there is nothing to say.
  virtual std::string describe(const NetworkTransport& mine) const {
    (void)mine;
    return "";
  }
  // Connects `mine` to every peer n with chosen[n], through the address node n offered
  // (addresses[n]; this node's own among them). Throws PeerError naming a peer it cannot
  // reach or whose address does not parse.
  virtual void connect(NetworkTransport& mine, const std::vector<std::string>& addresses,
                       const std::vector<bool>& chosen, Deadline deadline) const = 0;
};

// Every kind, in the order of preference; the fallback last.
const std::vector<const NetworkKind*>& network_kinds();
const NetworkKind& tcp_kind();
const NetworkKind& verbs_kind();

// One kind as this node has it (in network_kinds() order): opened, described, or why not.
struct LocalEnd {
  const NetworkKind* kind = nullptr;
  bool open = false;
  std::string described;  // NetworkKind::describe, when open
  std::string absent;     // why not, when not open
};

// The kind that carries a peer's data, and why.
struct PeerChoice {
  size_t kind = 0;  // index into network_kinds()
  std::string reason;
};

// The first kind in the order of preference that this node and the peer both have; under
// --transport NAME (forced: NAME, or empty for auto) only that kind, or the fallback when NAME
// is the fallback. Throws PeerError when a forced kind is one the peer does not have.
PeerChoice choose_transport(const std::vector<LocalEnd>& mine, const wire::NodeInfo& peer,
                            std::string_view forced);

// The address `info` offers for `kind`, or null when it offers none.
const wire::TransportAddress* offered(const wire::NodeInfo& info, std::string_view kind);

}  // namespace symmesh
