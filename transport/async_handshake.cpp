#include "transport/async_handshake.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

namespace symmesh {

asio::generic::stream_protocol::socket as_generic(asio::io_context& io, int family, int fd) {
  try {
    return asio::generic::stream_protocol::socket(
        io, asio::generic::stream_protocol(family, SOCK_STREAM), fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
}

void run_io(asio::io_context& io, const std::string& what) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      spdlog::error("{}: {} (serving on)", what, e.what());
    }
  }
}

AsyncHandshake::AsyncHandshake(asio::generic::stream_protocol::socket socket, std::string peer)
    : socket_(std::move(socket)), timer_(socket_.get_executor()), peer_(std::move(peer)) {}

void AsyncHandshake::start(std::chrono::milliseconds limit) {
  timer_.expires_after(limit);
  timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (ec || self->finished_) return;  // cancelled: the conversation ended first
    self->timed_out_ = true;
    asio::error_code ignored;
    self->socket_.close(ignored);  // ends the read or write in progress
  });
  begin();
}

void AsyncHandshake::read(google::protobuf::MessageLite& message, uint32_t cap,
                          std::function<void()> next) {
  asio::async_read(socket_, asio::buffer(prefix_),
                   [self = shared_from_this(), &message, cap, next = std::move(next)](
                       const asio::error_code& ec, size_t) mutable {
                     if (self->over(ec)) return;
                     const uint32_t length = read_length_prefix(self->prefix_.data());
                     try {
                       check_frame_length(length, cap, message.GetTypeName(), self->peer_);
                     } catch (const std::exception& e) {
                       return self->fail("bad_request", e.what());
                     }
                     self->body_.resize(length);  // at most `cap`
                     asio::async_read(self->socket_, asio::buffer(self->body_),
                                      [self, &message, next = std::move(next)](
                                          const asio::error_code& ec, size_t) {
                                        if (self->over(ec)) return;
                                        try {
                                          parse_frame_body(message, self->body_, self->peer_);
                                        } catch (const std::exception& e) {
                                          return self->fail("bad_request", e.what());
                                        }
                                        self->go_on(next);
                                      });
                   });
}

void AsyncHandshake::write(const google::protobuf::MessageLite& message,
                           std::function<void()> next) {
  out_ = encode_frame(message);
  asio::async_write(
      socket_, asio::buffer(out_),
      [self = shared_from_this(), next = std::move(next)](const asio::error_code& ec, size_t) {
        if (self->over(ec)) return;
        self->go_on(next);
      });
}

bool AsyncHandshake::over(const asio::error_code& ec) {
  // A completion already queued when the deadline closed the socket still comes with no
  // error: the conversation is over all the same.
  if (!ec && !timed_out_ && !finished_) return false;
  fail("closed", "the connection ended: " + ec.message());
  return true;
}

void AsyncHandshake::go_on(const std::function<void()>& next) {
  try {
    next();
  } catch (const std::exception& e) {  // handing the connection over failed, say
    if (!finished_) return fail("bad_request", e.what());
    ended("bad_request", e.what());
  }
}

std::unique_ptr<BlockingChannel> AsyncHandshake::release() {
  finished_ = true;
  timer_.cancel();
  return BlockingChannel::adopt(socket_.release(), peer_);
}

void AsyncHandshake::close() {
  finished_ = true;
  timer_.cancel();
  asio::error_code ignored;
  socket_.close(ignored);
}

void AsyncHandshake::fail(const std::string& kind, const std::string& why) {
  if (finished_) return;
  finished_ = true;
  if (timed_out_) {
    ended("timeout", "no answer from " + peer_ + " within the deadline");
  } else {
    ended(kind, why);
  }
  close();
}

}  // namespace symmesh
