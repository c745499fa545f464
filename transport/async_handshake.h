// A server's side of a connection's opening conversation (authentication, a hello, an attach
// request), run on an asio thread without blocking it: each frame read or written as its
// bytes come, all within one deadline. A connection that stalls costs a socket and a timer,
// never a thread, so a flood of idle connections cannot hold up the real ones. When the
// conversation is done, release() hands the connection over as a BlockingChannel.
#pragma once

#include <array>
#include <asio.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "transport/channel.h"
#include "transport/frame.h"

namespace symmesh {

// A failed accept (out of descriptors, say) is retried after this, not in a spin.
inline constexpr auto kAcceptPause = std::chrono::milliseconds(100);

// An accepted socket's descriptor as a generic stream socket of `family`; the descriptor is
// closed if that fails.
asio::generic::stream_protocol::socket as_generic(asio::io_context& io, int family, int fd);

// Runs `io` until it is stopped; what a handler throws is logged (naming `what`) and the loop
// goes on, so one connection's failure never ends a server's thread.
void run_io(asio::io_context& io, const std::string& what);

class AsyncHandshake : public std::enable_shared_from_this<AsyncHandshake> {
 public:
  AsyncHandshake(asio::generic::stream_protocol::socket socket, std::string peer);
  virtual ~AsyncHandshake() = default;
  AsyncHandshake(const AsyncHandshake&) = delete;
  AsyncHandshake& operator=(const AsyncHandshake&) = delete;

  // Arms the deadline, then begins the conversation.
  void start(std::chrono::milliseconds limit);

 protected:
  virtual void begin() = 0;
  // The conversation ended before it was done: "timeout" (the deadline passed), "closed" (the
  // peer left, or the connection failed) or "bad_request" (a frame past its cap, or one
  // that does not parse), with why. The connection is closed after.
  virtual void ended(const std::string& kind, const std::string& why) = 0;

  // Reads one frame of at most `cap` bytes into `message`, then calls `next`.
  void read(google::protobuf::MessageLite& message, uint32_t cap, std::function<void()> next);
  // Writes `message`, then calls `next`.
  void write(const google::protobuf::MessageLite& message, std::function<void()> next);
  // The conversation is done: the deadline no longer applies, the connection is the caller's.
  std::unique_ptr<BlockingChannel> release();
  // The conversation is done, and the connection closed (after a refusal was written).
  void close();
  const std::string& peer() const { return peer_; }

 private:
  // Whether the conversation is over (an error, the deadline, or done): then ended once.
  bool over(const asio::error_code& ec);
  // Calls `next`; what it throws ends the conversation, counted.
  void go_on(const std::function<void()>& next);
  void fail(const std::string& kind, const std::string& why);

  asio::generic::stream_protocol::socket socket_;
  asio::steady_timer timer_;
  std::string peer_;
  std::array<char, kLengthPrefixBytes> prefix_{};
  std::string body_;
  std::string out_;
  bool timed_out_ = false;
  bool finished_ = false;
};

}  // namespace symmesh
