// The control-plane connection a node keeps to the root after bootstrap. One thread reads
// (blocking until a message, stop() or the peer closes); any thread may send.
#pragma once

#include <memory>
#include <mutex>

#include "control.pb.h"
#include "transport/channel.h"

namespace symmesh {

class Link {
 public:
  Link(std::unique_ptr<BlockingChannel> channel, int peer_node);

  // Thread-safe. Throws PeerError when the peer is gone.
  void send(const wire::ControlMessage& message);
  // Blocks for the next message. Throws PeerError when the connection ends or stop() was called.
  void receive(wire::ControlMessage& message);
  void stop();

  int peer_node() const { return peer_node_; }
  const std::string& peer_name() const { return reader_->peer_name(); }

 private:
  std::unique_ptr<BlockingChannel> reader_;
  std::unique_ptr<BlockingChannel> writer_;
  std::mutex write_mutex_;
  int peer_node_;
};

}  // namespace symmesh
