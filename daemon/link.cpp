#include "daemon/link.h"

#include "common/errors.h"
#include "common/thread_name.h"
#include "transport/frame.h"

namespace symmesh {

Link::Link(std::unique_ptr<BlockingChannel> channel, int peer_node,
           std::chrono::milliseconds heartbeat_every, const wire::ControlMessage& heartbeat)
    : reader_(std::move(channel)),
      peer_node_(peer_node),
      heartbeat_every_(heartbeat_every),
      heartbeat_(encode_frame(heartbeat)) {
  writer_ = reader_->duplicate();
  writer_thread_ = std::thread([this] {
    set_thread_name("link to " + std::to_string(peer_node_));
    write_loop();
  });
}

Link::~Link() {
  stop();
}

void Link::send(const wire::ControlMessage& message) {
  std::string frame = encode_frame(message);
  std::lock_guard lock(mutex_);
  if (!broken_.empty())
    throw PeerError("link to node " + std::to_string(peer_node_) + ": " + broken_);
  if (queue_.size() >= kMaxQueued) {
    break_link(std::to_string(kMaxQueued) + " messages wait unsent: the peer stopped reading");
    throw PeerError("link to node " + std::to_string(peer_node_) + ": " + broken_);
  }
  queue_.push_back(std::move(frame));
  queued_.notify_one();
}

void Link::receive(wire::ControlMessage& message) {
  reader_->read(message, no_deadline());
}

void Link::break_link(const std::string& why) {
  if (broken_.empty()) broken_ = why;
  queue_.clear();
  reader_->stop();  // the reader fails, and whoever reads marks the peer down
  writer_->stop();
}

void Link::stop() {
  {
    std::unique_lock lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    queued_.notify_all();
    // What is queued (a shutdown notice) gets a moment to go out.
    queued_.wait_for(lock, kDrainOnStop, [&] { return queue_.empty() && !writing_; });
    if (broken_.empty()) broken_ = "the link was stopped";
    queue_.clear();
  }
  reader_->stop();
  writer_->stop();
  if (writer_thread_.joinable()) writer_thread_.join();
}

void Link::write_loop() {
  for (;;) {
    std::string frame;
    {
      std::unique_lock lock(mutex_);
      const bool woken =
          queued_.wait_for(lock, heartbeat_every_, [&] { return stopping_ || !queue_.empty(); });
      if (!woken) {
        frame = heartbeat_;  // idle for an interval
      } else if (queue_.empty()) {
        return;  // stopping, and everything went out
      } else {
        frame = std::move(queue_.front());
        queue_.pop_front();
      }
      writing_ = true;
    }
    try {
      writer_->write_raw(frame, deadline_after(kSendTimeout));
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex_);
      writing_ = false;
      break_link(std::string("writing failed: ") + e.what());
      queued_.notify_all();
      return;
    }
    std::lock_guard lock(mutex_);
    writing_ = false;
    queued_.notify_all();
  }
}

}  // namespace symmesh
