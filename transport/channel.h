// A blocking, deadline-bounded message channel over one TCP connection: the bootstrap,
// control and client conversations, and the handshake of data connections, use it.
// Each channel runs its own io_context in the calling thread, so every read and write
// can be bounded by a deadline and interrupted by stop().
#pragma once

#include <google/protobuf/message_lite.h>
#include <asio.hpp>
#include <atomic>
#include <memory>
#include <string>

#include "transport/frame.h"
#include "transport/wait.h"

namespace symmesh {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string str() const { return host + ":" + std::to_string(port); }
};

// An IP address as it is, or the first address `host` resolves to; throws InvalidArgument.
asio::ip::address resolve_address(const std::string& host);

// Parses "HOST:PORT" (IPv6 as "[::1]:PORT"); throws InvalidArgument naming `what`.
HostPort parse_host_port(const std::string& text, std::string_view what);

class BlockingChannel {
 public:
  // Connects to `to`, retrying refused connections until `deadline` (the peer may still be
  // starting). Throws PeerError naming the address when it never answers.
  static std::unique_ptr<BlockingChannel> connect(const HostPort& to, Deadline deadline);
  // Adopts an accepted socket (native handle).
  static std::unique_ptr<BlockingChannel> adopt(int native_fd, std::string peer_name);

  ~BlockingChannel();
  BlockingChannel(const BlockingChannel&) = delete;
  BlockingChannel& operator=(const BlockingChannel&) = delete;

  void write(const google::protobuf::MessageLite& message, Deadline deadline);
  // Writes bytes as they are (tests send malformed frames with it).
  void write_raw(std::string_view bytes, Deadline deadline);
  // Reads one frame of at most `cap` bytes into `message`. Throws PeerError on close,
  // oversize or malformed frames, TimeoutError at the deadline.
  void read(google::protobuf::MessageLite& message, Deadline deadline,
            uint32_t cap = kMaxMessageFrame);

  // Makes a blocked read/write fail soon (from any thread).
  void stop() { stopped_.store(true); }
  void close();
  // Hands the connected socket over (for data connections after the handshake).
  int release_native();
  // A second channel on the same connection (a dup of the socket), so one thread can block
  // reading this one while others write on the duplicate.
  std::unique_ptr<BlockingChannel> duplicate();

  const std::string& peer_name() const { return peer_name_; }
  void set_peer_name(std::string name) { peer_name_ = std::move(name); }
  HostPort local_endpoint() const;

 private:
  BlockingChannel();
  void run_until_done(bool& done, Deadline deadline, std::string_view what);

  asio::io_context io_;
  asio::ip::tcp::socket socket_;
  std::string peer_name_;
  std::atomic<bool> stopped_{false};
};

// Accepts connections on one address, each bounded by a deadline and interruptible by stop().
class Listener {
 public:
  explicit Listener(const HostPort& at);  // port 0 picks a free port
  HostPort local_endpoint() const;
  // Returns the next connection, or nullptr when the deadline passes or stop() was called.
  std::unique_ptr<BlockingChannel> accept(Deadline deadline);
  void stop() { stopped_.store(true); }

 private:
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stopped_{false};
};

// A deadline for waits that only stop() or a peer ends (an idle control connection).
Deadline no_deadline();

}  // namespace symmesh
