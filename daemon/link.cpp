#include "daemon/link.h"

namespace symmesh {

namespace {
constexpr auto kSendTimeout = std::chrono::seconds(30);
}

Link::Link(std::unique_ptr<BlockingChannel> channel, int peer_node)
    : reader_(std::move(channel)), peer_node_(peer_node) {
  writer_ = reader_->duplicate();
}

void Link::send(const wire::ControlMessage& message) {
  std::lock_guard lock(write_mutex_);
  writer_->write(message, deadline_after(kSendTimeout));
}

void Link::receive(wire::ControlMessage& message) {
  reader_->read(message, no_deadline());
}

void Link::stop() {
  reader_->stop();
  writer_->stop();
}

}  // namespace symmesh
