// The root's bootstrap port, open for the cluster's life: every node joins here at its start,
// after a restart, and whenever the cluster re-forms. Each connection is authenticated
// (role bootstrap) and its hello checked against the cluster's configuration on one asio
// thread, each handshake within kHandshakeTimeout: a silent or slow connection costs a socket,
// never a thread, so idle connections cannot keep real joins out. At most kMaxHandshaking
// handshakes run at once (more are closed at accept, counted as overload). A valid hello waits
// here, with its connection, until the root forms the cluster: one per node rank, the newest
// incarnation winning (an older one is refused as fenced).
#pragma once

#include <asio.hpp>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "transport/channel.h"
#include "wire/bootstrap.pb.h"

namespace symmesh {

struct Joiner {
  wire::NodeHello hello;
  std::unique_ptr<BlockingChannel> channel;
};

class JoinListener {
 public:
  static constexpr size_t kMaxHandshaking = 256;

  // Binds `at` now (throws InvalidArgument naming it); `cluster` is the hello every joiner's
  // configuration must match (check_hello); `refused` counts what is turned away.
  JoinListener(const HostPort& at, std::string secret, wire::NodeHello cluster,
               std::function<void(const std::string& kind)> refused);
  ~JoinListener();
  void start();
  void stop();

  // Waits until every node in 1..nodes-1 has a joiner here, or `deadline`, or `give_up()`
  // (checked whenever a joiner arrives, and by notify()). Returns the ranks still missing.
  std::vector<int> wait_for_all(Deadline deadline, const std::function<bool()>& give_up);
  // The node ranks with a joiner waiting.
  std::vector<int> waiting() const;
  // Takes every waiting joiner (index = node rank; null where none).
  std::vector<std::unique_ptr<Joiner>> take();
  // Wakes wait_for_all (its give_up may have turned true).
  void notify();
  // Called whenever a joiner arrives (on the listener's thread).
  void on_joined(std::function<void()> callback);
  // Checked for every authenticated hello before it may wait: a non-empty answer refuses it
  // (counted as "fenced"), e.g. an incarnation older than the one the cluster knows.
  void fence_with(std::function<std::string(const wire::NodeHello&)> fence);

 private:
  class Handshake;  // one connection's authentication and hello

  void accept_next();
  // An authenticated, checked hello: it waits for the formation (or is fenced).
  void admit(wire::NodeHello hello, std::unique_ptr<BlockingChannel> channel);
  void refuse(BlockingChannel& channel, const std::string& kind, const std::string& why);

  const std::string secret_;
  const wire::NodeHello cluster_;
  std::function<void(const std::string&)> refused_;
  std::function<void()> joined_;
  std::function<std::string(const wire::NodeHello&)> fence_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, std::unique_ptr<Joiner>> waiting_;
  bool stopping_ = false;
  // Touched only on thread_, and declared before io_: a handshake the io_context drops when
  // destroyed gives its place back.
  size_t handshaking_ = 0;
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer accept_pause_;  // after a failed accept
  std::thread thread_;
};

}  // namespace symmesh
