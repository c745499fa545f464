#include "transport/tcp/pair.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>

#include "transport/frame.h"
#include "transport/tcp/polling_mode.h"
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

OutFrame make_request(wire::DataHeader header) {
  static_assert(PollingMode::kRaisedLowWater < kMaxDataHeader, "a padded header must be allowed");
  const size_t wanted = PollingMode::kRaisedLowWater;
  const auto frame_bytes = [&] { return kLengthPrefixBytes + header.ByteSizeLong(); };
  const size_t field_overhead = 3;  // the padding field's tag and a length of up to two bytes
  if (frame_bytes() + field_overhead < wanted) {
    header.set_wake_padding(std::string(wanted - frame_bytes() - field_overhead, '\0'));
  }
  // A one-byte length leaves the frame a byte short: at most two more bytes reach the mark.
  for (int i = 0; i < 2 && frame_bytes() < wanted; ++i)
    header.mutable_wake_padding()->push_back('\0');
  return make_frame(header);
}

TcpPair::TcpPair(asio::io_context& io, int native_fd, int local_node, int peer_node, uint32_t index,
                 std::string peer_name, FrameHandler& handler)
    : strand_(asio::make_strand(io)),
      socket_(strand_, protocol_of(native_fd), native_fd),
      fd_(native_fd),
      local_node_(local_node),
      peer_node_(peer_node),
      index_(index),
      peer_name_(std::move(peer_name)),
      handler_(handler) {
  socket_.set_option(asio::ip::tcp::no_delay(true));
}

void TcpPair::start() {
  // Arms the watch and reads once: bytes that came before the watch raise no edge of their own.
  asio::post(strand_, [self = shared_from_this()] { self->read_readable(); });
}

void TcpPair::watch_readable() {
  socket_.async_wait(asio::ip::tcp::socket::wait_read,
                     [self = shared_from_this()](const asio::error_code& ec) {
                       if (ec == asio::error::operation_aborted) return;  // fail() closed it
                       if (ec) return self->fail(ec.message());
                       self->read_readable();
                     });
}

void TcpPair::read_readable() {
  if (!open_.load()) return;
  // Armed before reading: epoll reports a readable socket once (edge-triggered), and asio
  // queues a wait without looking at the socket, so an edge between the last read and the
  // arming would be lost. A wait that completes early only reads once more.
  watch_readable();
  readable_.store(true);  // before trying the reader: a holder that lets go then reads again
  read_turn(kIoBudget, true);
}

int TcpPair::poll() {
  // Not while this node writes the socket (a sendmsg holds the socket's lock): the recv would
  // sleep on that lock and cost the writer a wake-up when it lets go. The next poll reads, or
  // the io thread does.
  if (write_busy_.load(std::memory_order_relaxed) || !open_.load()) return 0;
  return read_turn(kPollBudget, false);
}

int TcpPair::read_turn(size_t budget, bool on_io) {
  int frames = 0;
  for (;;) {
    if (reading_.exchange(true)) return frames;  // its holder reads what came (readable_)
    readable_.store(false);
    if (reader_.failed()) {  // its first reader has asked fail() to close the connection
      reading_.store(false);
      return frames;
    }
    const FrameReader::Result result = reader_.read(fd_, budget, *this, !on_io);
    reading_.store(false);
    frames += result.frames;
    if (result.stopped == FrameReader::Stopped::kFailed) {
      close(result.failure);
      return frames;
    }
    if (result.stopped == FrameReader::Stopped::kBudgetSpent) {
      resume_on_io();
      return frames;
    }
    if (!readable_.load()) return frames;
    if (!on_io) {  // a PE leaves a stream that goes on to the io thread, back to its own work
      resume_on_io();
      return frames;
    }
  }
}

void TcpPair::resume_on_io() {
  if (resume_posted_.exchange(true)) return;
  asio::post(strand_, [self = shared_from_this()] {
    self->resume_posted_.store(false);
    if (self->open_.load()) self->read_turn(kIoBudget, true);
  });
}

std::byte* TcpPair::payload_target(const wire::DataHeader& header, std::string& error) {
  wire_received(peer_node_, local_node_, index_);
  return handler_.payload_target(*this, header, error, payload_owner_);
}

void TcpPair::frame_complete(const wire::DataHeader& header) {
  wire_received(peer_node_, local_node_, index_);
  handler_.frame_complete(*this, header);
  payload_owner_.reset();
}

namespace {

size_t frame_size(const OutFrame& frame) {
  return frame.head.size() +
         (frame.owned_payload.empty() ? total_length(frame.payload) : frame.owned_payload.size());
}

// Calls part(data, length) on each non-empty part of `frame` past its first `skip` bytes, in
// order (the head, then the owned payload or each borrowed piece), until part returns false.
template <class Part>
void for_each_unsent(const OutFrame& frame, size_t skip, Part part) {
  const auto visit = [&](const void* data, size_t length) {
    if (skip >= length) {
      skip -= length;
      return true;
    }
    const size_t from = std::exchange(skip, 0);
    return part(static_cast<const char*>(data) + from, length - from);
  };
  if (!visit(frame.head.data(), frame.head.size())) return;
  if (!frame.owned_payload.empty()) {
    visit(frame.owned_payload.data(), frame.owned_payload.size());
    return;
  }
  for (const PutPiece& piece : frame.payload) {
    if (!visit(piece.data, piece.length)) return;
  }
}

// Writes what the kernel takes now, from frame.sent on, at most kMaxParts parts per sendmsg;
// returns the bytes written, or -1 (errno set) when the first sendmsg fails.
ssize_t send_now(int fd, const OutFrame& frame) {
  constexpr size_t kMaxParts = 64;
  const size_t size = frame_size(frame);
  size_t written = 0;
  while (frame.sent + written < size) {
    std::array<iovec, kMaxParts> vectors;
    size_t count = 0, offered = 0;
    for_each_unsent(frame, frame.sent + written, [&](const char* data, size_t length) {
      vectors[count++] = iovec{const_cast<char*>(data), length};
      offered += length;
      return count < kMaxParts;
    });
    msghdr message{};
    message.msg_iov = vectors.data();
    message.msg_iovlen = count;
    const ssize_t n = ::sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) return written > 0 ? ssize_t(written) : -1;
    written += size_t(n);
    if (size_t(n) < offered) break;  // the socket is full: the rest waits for the io thread
  }
  return ssize_t(written);
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
      write_busy_.store(true, std::memory_order_relaxed);
      const ssize_t written = send_now(fd_, frame);
      const int error = errno;
      wire_sent(local_node_, peer_node_, index_);  // after the bytes (and their reads) left
      if (written < 0 && error != EAGAIN && error != EWOULDBLOCK) {
        write_busy_.store(false, std::memory_order_relaxed);
        failure = std::string("write failed: ") + std::strerror(error);
        fail_completion(frame.written, named(failure));
      } else {
        frame.sent = written > 0 ? size_t(written) : 0;
        if (frame.sent == frame_size(frame)) {
          write_busy_.store(false, std::memory_order_relaxed);
          if (frame.written) frame.written->state.store(1, std::memory_order_release);
          return;
        }
      }
    }
    if (failure.empty()) {
      queue_.push_back(std::move(frame));
      if (writing_) return;
      writing_ = true;
      write_busy_.store(true, std::memory_order_relaxed);
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
      write_busy_.store(false, std::memory_order_relaxed);
      return;
    }
    frame = &queue_.front();  // stays put: only this writer pops, deque keeps references
  }
  std::vector<asio::const_buffer> buffers;
  for_each_unsent(*frame, frame->sent, [&](const char* data, size_t length) {
    buffers.push_back(asio::buffer(data, length));
    return true;
  });
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

void TcpPair::set_receive_low_water(int bytes) {
  std::lock_guard lock(write_mutex_);  // fail() closes the fd under it
  if (!open_.load()) return;
  if (::setsockopt(fd_, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof(bytes)) != 0) {
    spdlog::warn("{}", named(std::string("setting the receive low-water mark failed: ") +
                             std::strerror(errno)));
  }
}

void TcpPair::close(const std::string& why) {
  // Posted, never run inline: the caller may be the reader (a frame it applied failed to send).
  asio::post(strand_, [self = shared_from_this(), why] { self->fail(why); });
}

std::string TcpPair::named(const std::string& what) const {
  return "connection " + std::to_string(index_) + " to node " + std::to_string(peer_node_) + " (" +
         peer_name_ + "): " + what;
}

void TcpPair::fail(const std::string& why) {
  if (!open_.exchange(false)) return;
  asio::error_code ignored;
  // A reader's recv then returns what is queued, then nothing: the reader lets go soon.
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  // The reader is taken for good and the fd closed under the write lock: no thread reads or
  // writes an fd number that may already name another socket.
  while (reading_.exchange(true)) std::this_thread::yield();
  const std::string reason = named(why);
  {
    std::lock_guard lock(write_mutex_);
    socket_.close(ignored);
    for (auto& frame : queue_) fail_completion(frame.written, reason);
    queue_.clear();
    writing_ = false;
    write_busy_.store(false, std::memory_order_relaxed);
  }
  handler_.connection_lost(*this, reason);
}

}  // namespace symmesh
