// The control-plane connection a node keeps to the root after bootstrap. One thread reads
// (blocking until a message, stop() or the peer closes); any thread may send, and a send
// never blocks: messages wait in a bounded queue that the link's writer thread drains with a
// deadline per message. A peer that stops reading (its queue full, or a write past the
// deadline) is cut off: the reader then fails, and the link counts as down. A link that has
// sent nothing for a heartbeat interval sends a heartbeat, so the peer can tell a quiet link
// from a dead or frozen daemon (daemon/membership.h).
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "transport/channel.h"
#include "wire/control.pb.h"

namespace symmesh {

class Link {
 public:
  static constexpr size_t kMaxQueued = 1024;
  static constexpr auto kSendTimeout = std::chrono::seconds(10);
  static constexpr auto kDrainOnStop = std::chrono::seconds(1);

  Link(std::unique_ptr<BlockingChannel> channel, int peer_node,
       std::chrono::milliseconds heartbeat_every, const wire::ControlMessage& heartbeat);
  ~Link();

  // Thread-safe, never blocks. Throws PeerError once the link is broken.
  void send(const wire::ControlMessage& message);
  // Blocks for the next message. Throws PeerError when the connection ends or stop() was called.
  void receive(wire::ControlMessage& message);
  void stop();

  int peer_node() const { return peer_node_; }
  const std::string& peer_name() const { return reader_->peer_name(); }

 private:
  void write_loop();
  void break_link(const std::string& why);

  std::unique_ptr<BlockingChannel> reader_;
  std::unique_ptr<BlockingChannel> writer_;
  int peer_node_;
  const std::chrono::milliseconds heartbeat_every_;
  const std::string heartbeat_;  // encoded
  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::string> queue_;  // encoded frames
  std::string broken_;             // why the link is broken, once it is
  bool stopping_ = false;
  bool writing_ = false;
  std::thread writer_thread_;
};

}  // namespace symmesh
