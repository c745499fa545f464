#include "transport/tcp/pair.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "transport/frame.h"
#include "transport/tcp/wire_causality.h"

namespace symmesh {
namespace {

void fail_completion(const std::shared_ptr<Completion>& completion, const std::string& why) {
  if (!completion || completion->finished()) return;
  completion->error = why;
  completion->state.store(2, std::memory_order_release);
}

asio::ip::tcp protocol_of(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return address.ss_family == AF_INET6 ? asio::ip::tcp::v6() : asio::ip::tcp::v4();
}

}  // namespace

OutFrame make_frame(const wire::DataHeader& header) {
  OutFrame frame;
  const size_t size = header.ByteSizeLong();
  frame.head.resize(kLengthPrefixBytes + size);
  write_length_prefix(static_cast<uint32_t>(size), frame.head.data());
  header.SerializeToArray(frame.head.data() + kLengthPrefixBytes, static_cast<int>(size));
  return frame;
}

TcpPair::TcpPair(asio::io_context& io, int native_fd, int local_node, int peer_node, uint32_t index,
                 std::string peer_name, FrameHandler& handler)
    : strand_(asio::make_strand(io)),
      socket_(strand_, protocol_of(native_fd), native_fd),
      local_node_(local_node),
      peer_node_(peer_node),
      index_(index),
      peer_name_(std::move(peer_name)),
      handler_(handler) {
  socket_.set_option(asio::ip::tcp::no_delay(true));
}

void TcpPair::start() {
  asio::dispatch(strand_, [self = shared_from_this()] { self->read_prefix(); });
}

void TcpPair::read_prefix() {
  asio::async_read(
      socket_, asio::buffer(prefix_),
      [self = shared_from_this()](const asio::error_code& ec, size_t) {
        if (ec) return self->fail(ec == asio::error::eof ? "closed by the peer" : ec.message());
        self->read_header(read_length_prefix(self->prefix_));
      });
}

void TcpPair::read_header(uint32_t length) {
  if (length == 0 || length > kMaxDataHeader) {
    return fail("data header of " + std::to_string(length) + " bytes is outside the allowed 1.." +
                std::to_string(kMaxDataHeader));
  }
  header_bytes_.resize(length);
  asio::async_read(socket_, asio::buffer(header_bytes_),
                   [self = shared_from_this()](const asio::error_code& ec, size_t) {
                     if (ec) return self->fail(ec.message());
                     wire_received(self->peer_node_, self->local_node_, self->index_);
                     if (!self->header_.ParseFromString(self->header_bytes_)) {
                       return self->fail("malformed DataHeader (" +
                                         std::to_string(self->header_bytes_.size()) + " bytes)");
                     }
                     self->read_payload();
                   });
}

void TcpPair::read_payload() {
  std::string error;
  std::byte* target = handler_.payload_target(*this, header_, error, payload_owner_);
  if (!error.empty()) return fail(error);
  const bool has_payload = header_.kind() == wire::PUT || header_.kind() == wire::GET_REPLY;
  if (!has_payload || header_.length() == 0) return finish_frame();
  if (target == nullptr) {  // a reply nobody waits for any more: drop its bytes
    discard_.resize(header_.length());
    target = reinterpret_cast<std::byte*>(discard_.data());
  }
  asio::async_read(socket_, asio::buffer(target, header_.length()),
                   [self = shared_from_this()](const asio::error_code& ec, size_t) {
                     if (ec) return self->fail(ec.message());
                     wire_received(self->peer_node_, self->local_node_, self->index_);
                     self->finish_frame();
                   });
}

void TcpPair::finish_frame() {
  handler_.frame_complete(*this, header_);
  payload_owner_.reset();
  if (!discard_.empty()) std::string().swap(discard_);
  read_prefix();
}

namespace {

// The payload bytes of a frame, borrowed or owned.
std::string_view payload_of(const OutFrame& frame) {
  if (!frame.owned_payload.empty()) return frame.owned_payload;
  return {static_cast<const char*>(frame.payload), frame.payload_length};
}

size_t frame_size(const OutFrame& frame) {
  return frame.head.size() + payload_of(frame).size();
}

// The parts of `frame` not written yet (head, payload), as (pointer, length) pairs.
std::array<std::pair<const char*, size_t>, 2> unsent_parts(const OutFrame& frame) {
  const std::string_view payload = payload_of(frame);
  size_t skip = frame.sent;
  std::array<std::pair<const char*, size_t>, 2> parts{};
  if (skip < frame.head.size()) {
    parts[0] = {frame.head.data() + skip, frame.head.size() - skip};
    skip = 0;
  } else {
    skip -= frame.head.size();
  }
  skip = std::min(skip, payload.size());
  parts[1] = {payload.data() + skip, payload.size() - skip};
  return parts;
}

// Writes what the kernel takes now; returns the bytes written, or -1 (errno set).
ssize_t send_now(int fd, const OutFrame& frame) {
  iovec vectors[2];
  int count = 0;
  for (const auto& [data, length] : unsent_parts(frame)) {
    if (length > 0) vectors[count++] = iovec{const_cast<char*>(data), length};
  }
  if (count == 0) return 0;
  msghdr message{};
  message.msg_iov = vectors;
  message.msg_iovlen = count;
  return ::sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace

void TcpPair::send(OutFrame frame) {
  std::string failure;
  {
    std::lock_guard lock(write_mutex_);
    if (!open_.load()) {
      fail_completion(frame.written, named("closed"));
      return;
    }
    if (!writing_ && queue_.empty()) {
      const ssize_t written = send_now(socket_.native_handle(), frame);
      const int error = errno;
      wire_sent(local_node_, peer_node_, index_);  // after the bytes (and their reads) left
      if (written < 0 && error != EAGAIN && error != EWOULDBLOCK) {
        failure = std::string("write failed: ") + std::strerror(error);
        fail_completion(frame.written, named(failure));
      } else {
        frame.sent = written > 0 ? size_t(written) : 0;
        if (frame.sent == frame_size(frame)) {
          if (frame.written) frame.written->state.store(1, std::memory_order_release);
          return;
        }
      }
    }
    if (failure.empty()) {
      queue_.push_back(std::move(frame));
      if (writing_) return;
      writing_ = true;
    }
  }
  // Outside the lock: close() may run fail() inline on this strand, and fail() takes it.
  if (!failure.empty()) return close(failure);
  asio::post(strand_, [self = shared_from_this()] { self->write_next(); });
}

void TcpPair::write_next() {
  OutFrame* frame = nullptr;
  {
    std::lock_guard lock(write_mutex_);
    if (queue_.empty() || !open_.load()) {
      writing_ = false;
      return;
    }
    frame = &queue_.front();  // stays put: only this writer pops, deque keeps references
  }
  const auto parts = unsent_parts(*frame);
  const std::array<asio::const_buffer, 2> buffers{asio::buffer(parts[0].first, parts[0].second),
                                                  asio::buffer(parts[1].first, parts[1].second)};
  asio::async_write(socket_, buffers,
                    [self = shared_from_this()](const asio::error_code& ec, size_t) {
                      if (ec) return self->fail(ec.message());
                      wire_sent(self->local_node_, self->peer_node_, self->index_);
                      std::shared_ptr<Completion> written;
                      {
                        std::lock_guard lock(self->write_mutex_);
                        if (self->queue_.empty()) return;  // fail() got here first
                        written = std::move(self->queue_.front().written);
                        self->queue_.pop_front();
                      }
                      if (written) written->state.store(1, std::memory_order_release);
                      self->handler_.frame_written();
                      self->write_next();
                    });
}

void TcpPair::close(const std::string& why) {
  asio::dispatch(strand_, [self = shared_from_this(), why] { self->fail(why); });
}

std::string TcpPair::named(const std::string& what) const {
  return "connection " + std::to_string(index_) + " to node " + std::to_string(peer_node_) + " (" +
         peer_name_ + "): " + what;
}

void TcpPair::fail(const std::string& why) {
  if (!open_.exchange(false)) return;
  asio::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  const std::string reason = named(why);
  {
    std::lock_guard lock(write_mutex_);
    for (auto& frame : queue_) fail_completion(frame.written, reason);
    queue_.clear();
    writing_ = false;
  }
  handler_.connection_lost(*this, reason);
}

}  // namespace symmesh
