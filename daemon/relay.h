// Requests relayed between a member and the root: a client may submit at any node, and a
// member hands what only the root can serve to it over its link. The client's own request
// and answers travel inside RelayRequest and RelayResponse, so every kind of request takes
// this one path and the root serves it with the handlers of its own control port.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "daemon/control_server.h"
#include "wire/control.pb.h"

namespace symmesh {

class Relay {
 public:
  // Queues `message` on node `node`'s link (the root's, on a member); throws PeerError when
  // there is none. Never blocks on the peer.
  using Send = std::function<void(int node, const wire::ControlMessage& message)>;
  // The handlers of the root's control port, which serve what members relay.
  using Handlers = std::function<ControlServer::Handlers()>;

  // Request ids start at `first_request_id` (the daemon's incarnation), so a restarted
  // member's ids never meet its last life's at the root, which keys what it serves by node and
  // id.
  Relay(uint64_t first_request_id, Send send, Handlers handlers);

  // A member: sends `request` to the root; its answers go to `sink`. Returns what gives the
  // request up should its client leave first.
  ControlServer::Abandon to_root(const wire::ClientRequest& request, ControlServer::Sink sink);
  // A member: an answer from the root to a relayed request.
  void answer(const wire::RelayResponse& relayed);
  // A member: the root is gone; every relayed request still waiting fails with `why`.
  void fail_all(const std::string& why);

  // The root: serves a request `node` relayed, answering over its link.
  void serve(int node, const wire::RelayRequest& relay);
  // The root: the client of a request `node` relayed left.
  void abandon(int node, uint64_t request_id);

 private:
  using Key = std::pair<int, uint64_t>;  // (node, request id)
  void give_up(const Key& key, const ControlServer::Abandon& abandon);

  Send send_;
  Handlers handlers_;
  std::mutex mutex_;
  uint64_t next_request_;
  std::map<uint64_t, ControlServer::Sink> relaying_;  // a member: requests at the root
  // The root: a relayed request not answered last yet. Its abandon is empty while it is being
  // served (a client that leaves meanwhile marks it, and it is given up once served) or when
  // the request has nothing to give up.
  struct Relayed {
    ControlServer::Abandon abandon;
    bool client_left = false;
  };
  std::map<Key, Relayed> relayed_;
};

}  // namespace symmesh
