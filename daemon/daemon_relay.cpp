// Requests relayed between a member and the root: a client may submit at any node, and a
// member hands what only the root can serve to it over its link. The client's own request
// and answers travel inside RelayRequest and RelayResponse, so every kind of request takes
// this one path and the root serves it with the handlers of its own control port.
#include <spdlog/spdlog.h>

#include "daemon/client_requests.h"
#include "daemon/daemon.h"

namespace symmesh {

ControlServer::Abandon Daemon::relay_to_root(const wire::ClientRequest& request,
                                             ControlServer::Sink sink) {
  uint64_t id = 0;
  {
    std::lock_guard lock(relay_mutex_);
    id = next_request_++;
    relaying_[id] = std::move(sink);
  }
  wire::ControlMessage message;
  message.mutable_relay()->set_request_id(id);
  *message.mutable_relay()->mutable_request() = request;
  try {
    send_to(0, message);
  } catch (const std::exception&) {
    std::lock_guard lock(relay_mutex_);
    relaying_.erase(id);
    throw;
  }
  return [this, id] {
    {
      std::lock_guard lock(relay_mutex_);
      if (!relaying_.erase(id)) return;  // it ended meanwhile
    }
    wire::ControlMessage abandon;
    abandon.mutable_abandon()->set_request_id(id);
    send_to(0, abandon);
  };
}

void Daemon::answer_relayed(const wire::RelayResponse& relayed) {
  ControlServer::Sink sink;
  {
    std::lock_guard lock(relay_mutex_);
    auto it = relaying_.find(relayed.request_id());
    if (it == relaying_.end()) return;  // its client left
    sink = it->second;
    if (relayed.last()) relaying_.erase(it);
  }
  sink(relayed.response());
}

void Daemon::fail_relayed(const std::string& why) {
  std::map<uint64_t, ControlServer::Sink> orphans;
  {
    std::lock_guard lock(relay_mutex_);
    orphans.swap(relaying_);
  }
  for (auto& [id, sink] : orphans) sink(refusal(PeerError(why)));
}

void Daemon::serve_relayed(int node, const wire::RelayRequest& relay) {
  const auto key = std::make_pair(node, relay.request_id());
  {
    std::lock_guard lock(relay_mutex_);
    relayed_[key] = Relayed{};
  }
  // Runs on the coordinator's thread for a job's answers: send_to only queues.
  auto answer = [this, key](const wire::ClientResponse& response) {
    const bool last = !response.has_event();
    if (last) {
      std::lock_guard lock(relay_mutex_);
      relayed_.erase(key);
    }
    wire::ControlMessage message;
    message.mutable_relayed()->set_request_id(key.second);
    *message.mutable_relayed()->mutable_response() = response;
    message.mutable_relayed()->set_last(last);
    send_to(key.first, message);
  };
  try {
    auto abandon = serve_client_request(client_handlers(), relay.request(), answer);
    {
      std::lock_guard lock(relay_mutex_);
      auto it = relayed_.find(key);
      if (it == relayed_.end() || !abandon) return;  // answered already, or nothing to give up
      if (!it->second.client_left) {
        it->second.abandon = std::move(abandon);
        return;
      }
      relayed_.erase(it);
    }
    give_up_relayed(key, abandon);
  } catch (const std::exception& e) {
    try {
      answer(refusal(e));
    } catch (const std::exception&) {
      // The node is gone: it fails its client itself.
    }
  }
}

void Daemon::abandon_relayed(int node, uint64_t request_id) {
  ControlServer::Abandon abandon;
  {
    std::lock_guard lock(relay_mutex_);
    auto it = relayed_.find({node, request_id});
    if (it == relayed_.end()) return;  // it ended meanwhile
    if (!it->second.abandon) {
      it->second.client_left = true;  // still being served: given up once it is
      return;
    }
    abandon = std::move(it->second.abandon);
    relayed_.erase(it);
  }
  give_up_relayed({node, request_id}, abandon);
}

void Daemon::give_up_relayed(const std::pair<int, uint64_t>& key,
                             const ControlServer::Abandon& abandon) {
  spdlog::info("node 0: the client of request {} (at node {}) left: giving it up", key.second,
               key.first);
  abandon();
}

}  // namespace symmesh
