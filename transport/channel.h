// A blocking, deadline-bounded message channel over one stream connection, TCP or Unix-domain:
// the bootstrap, control and client conversations, the handshake of data connections, and a
// process attaching to its node's daemon (which also passes file descriptors) use it.
// Each channel runs its own io_context in the calling thread, so every read and write
// can be bounded by a deadline and interrupted by stop().
#pragma once

#include <google/protobuf/message_lite.h>
#include <asio.hpp>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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

// A Unix-domain socket's path.
struct LocalPath {
  std::string path;
};

// Who is at the other end of a Unix-domain connection, as the kernel says (SO_PEERCRED).
struct PeerCredentials {
  int pid = 0;
  unsigned uid = 0;
  unsigned gid = 0;
};

class BlockingChannel {
 public:
  // Connects to `to`, retrying refused connections until `deadline` (the peer may still be
  // starting). Throws PeerError naming the address when it never answers.
  static std::unique_ptr<BlockingChannel> connect(const HostPort& to, Deadline deadline);
  // Connects to a Unix-domain socket once; throws PeerError naming the path.
  static std::unique_ptr<BlockingChannel> connect(const LocalPath& to, Deadline deadline);
  // Adopts an accepted socket (native handle), TCP or Unix-domain.
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

  // Unix-domain only: file descriptors passed with SCM_RIGHTS (with one byte of data). The
  // receiver owns what it gets and takes at most `max`; more is closed and refused.
  void send_fds(const std::vector<int>& fds, Deadline deadline);
  std::vector<int> receive_fds(size_t max, Deadline deadline);
  PeerCredentials peer_credentials();

  // Makes a blocked read/write fail soon (from any thread).
  void stop() { stopped_.store(true); }
  void close();
  // For a connection that carries no more messages (an attached process's, after the
  // attach), asked without blocking: open, bytes arrived (which nothing reads: a protocol
  // error), or closed (the peer closed it, or it failed).
  enum class PeerState { kOpen, kSpoke, kClosed };
  PeerState peer_state();
  bool closed_by_peer() { return peer_state() != PeerState::kOpen; }
  // Hands the connected socket over (for data connections after the handshake).
  int release_native();
  // A second channel on the same connection (a dup of the socket), so one thread can block
  // reading this one while others write on the duplicate.
  std::unique_ptr<BlockingChannel> duplicate();

  const std::string& peer_name() const { return peer_name_; }
  void set_peer_name(std::string name) { peer_name_ = std::move(name); }
  HostPort local_endpoint() const;  // TCP only

 private:
  BlockingChannel();
  void run_until_done(bool& done, Deadline deadline, std::string_view what);
  // Waits until the socket is ready for `wait`, then calls `io` (which returns false to wait
  // again); bounded by the deadline like every other operation.
  void when_ready(asio::socket_base::wait_type wait, const std::function<bool()>& io,
                  Deadline deadline, std::string_view what);

  asio::io_context io_;
  asio::generic::stream_protocol::socket socket_;
  std::string peer_name_;
  std::atomic<bool> stopped_{false};
};

// Accepts connections on one address, each bounded by a deadline and interruptible by stop().
class Listener {
 public:
  explicit Listener(const HostPort& at);  // port 0 picks a free port
  // A Unix-domain socket at `at` (which must not exist), then given `mode`: put it in a
  // directory only its owner can enter, so nobody reaches it before the mode is set.
  Listener(const LocalPath& at, unsigned mode);
  HostPort local_endpoint() const;  // TCP only
  // Returns the next connection, or nullptr when the deadline passes or stop() was called.
  std::unique_ptr<BlockingChannel> accept(Deadline deadline);
  void stop() { stopped_.store(true); }

 private:
  void listen(const asio::generic::stream_protocol::endpoint& at, const std::string& name);

  asio::io_context io_;
  asio::basic_socket_acceptor<asio::generic::stream_protocol> acceptor_;
  std::atomic<bool> stopped_{false};
};

// A deadline for waits that only stop() or a peer ends (an idle control connection).
Deadline no_deadline();

}  // namespace symmesh
