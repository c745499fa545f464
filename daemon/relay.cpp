#include "daemon/relay.h"

#include <spdlog/spdlog.h>

#include "daemon/client_requests.h"

namespace symmesh {

Relay::Relay(uint64_t first_request_id, Send send, Handlers handlers)
    : send_(std::move(send)), handlers_(std::move(handlers)), next_request_(first_request_id) {}

ControlServer::Abandon Relay::to_root(const wire::ClientRequest& request,
                                      ControlServer::Sink sink) {
  uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    id = next_request_++;
    relaying_[id] = std::move(sink);
  }
  wire::ControlMessage message;
  message.mutable_relay()->set_request_id(id);
  *message.mutable_relay()->mutable_request() = request;
  try {
    send_(0, message);
  } catch (const std::exception&) {
    std::lock_guard lock(mutex_);
    relaying_.erase(id);
    throw;
  }
  return [this, id] {
    {
      std::lock_guard lock(mutex_);
      if (!relaying_.erase(id)) return;  // it ended meanwhile
    }
    wire::ControlMessage abandon;
    abandon.mutable_abandon()->set_request_id(id);
    send_(0, abandon);
  };
}

void Relay::answer(const wire::RelayResponse& relayed) {
  ControlServer::Sink sink;
  {
    std::lock_guard lock(mutex_);
    auto it = relaying_.find(relayed.request_id());
    if (it == relaying_.end()) return;  // its client left
    sink = it->second;
    if (relayed.last()) relaying_.erase(it);
  }
  sink(relayed.response());
}

void Relay::fail_all(const std::string& why) {
  std::map<uint64_t, ControlServer::Sink> orphans;
  {
    std::lock_guard lock(mutex_);
    orphans.swap(relaying_);
  }
  for (auto& [id, sink] : orphans) sink(refusal(PeerError(why)));
}

void Relay::serve(int node, const wire::RelayRequest& relay) {
  const auto key = std::make_pair(node, relay.request_id());
  {
    std::lock_guard lock(mutex_);
    relayed_[key] = Relayed{};
  }
  // Runs on the coordinator's thread for a job's answers: send_to only queues.
  auto answer = [this, key](const wire::ClientResponse& response) {
    const bool last = !response.has_event();
    if (last) {
      std::lock_guard lock(mutex_);
      relayed_.erase(key);
    }
    wire::ControlMessage message;
    message.mutable_relayed()->set_request_id(key.second);
    *message.mutable_relayed()->mutable_response() = response;
    message.mutable_relayed()->set_last(last);
    send_(key.first, message);
  };
  try {
    auto abandon = serve_client_request(handlers_(), relay.request(), answer);
    {
      std::lock_guard lock(mutex_);
      auto it = relayed_.find(key);
      if (it == relayed_.end() || !abandon) return;  // answered already, or nothing to give up
      if (!it->second.client_left) {
        it->second.abandon = std::move(abandon);
        return;
      }
      relayed_.erase(it);
    }
    give_up(key, abandon);
  } catch (const std::exception& e) {
    try {
      answer(refusal(e));
    } catch (const std::exception&) {
      // The node is gone: it fails its client itself.
    }
  }
}

void Relay::abandon(int node, uint64_t request_id) {
  ControlServer::Abandon abandon;
  {
    std::lock_guard lock(mutex_);
    auto it = relayed_.find({node, request_id});
    if (it == relayed_.end()) return;  // it ended meanwhile
    if (!it->second.abandon) {
      it->second.client_left = true;  // still being served: given up once it is
      return;
    }
    abandon = std::move(it->second.abandon);
    relayed_.erase(it);
  }
  give_up({node, request_id}, abandon);
}

void Relay::give_up(const Key& key, const ControlServer::Abandon& abandon) {
  spdlog::info("node 0: the client of request {} (at node {}) left: giving it up", key.second,
               key.first);
  abandon();
}

}  // namespace symmesh
