// The tcp device: connection setup for the tcp transport. It owns the io threads that drive
// every pair, accepts data connections on the node's data address and dials its peers'.
// Each io thread runs its own io_context and each pair is bound to one of them, so a frame is
// read and applied by the thread that epoll woke: with one io_context shared by several
// threads, asio hands completions to another, idle, thread, one more wake-up (a futex and a
// context switch) on every small frame's path.
// Either way a connection carries no data until the handshake (transport/auth.h) has proved
// both ends know the cluster's secret and named the peer's node rank and connection index;
// a refused connection is counted by kind ("auth", "bad_request", "timeout") and dropped.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/channel.h"

namespace symmesh {

class TcpDevice {
 public:
  // A handshake that succeeded: the connection, the peer's node rank and connection index.
  using Accepted =
      std::function<void(std::unique_ptr<BlockingChannel> channel, int peer, uint32_t index)>;

  TcpDevice(int node, int nodes, std::string secret, uint64_t incarnation, int io_threads);
  ~TcpDevice();
  TcpDevice(const TcpDevice&) = delete;
  TcpDevice& operator=(const TcpDevice&) = delete;

  // The io_context for the next pair: round-robin over the io threads.
  asio::io_context& next_io();
  // Starts accepting on `at` (port 0 picks one), handing each proved connection to
  // `accepted` on the accept thread; returns the address.
  HostPort listen(const HostPort& at, Accepted accepted);
  HostPort listening_on() const { return listener_->local_endpoint(); }
  // Dials `peer` at `to` as connection `index`; throws PeerError when another node answers.
  std::unique_ptr<BlockingChannel> dial(const HostPort& to, int peer, uint32_t index,
                                        Deadline deadline);
  // Called on the accept thread with the kind of each refused connection.
  void on_refused(std::function<void(const std::string& kind)> callback);

  // Accepts no more connections (the pairs go on until stop_io).
  void stop_accepting();
  // Ends the io threads once the pairs are closed.
  void stop_io();

 private:
  void accept_loop(const Accepted& accepted);

  const int node_;
  const int nodes_;
  const std::string secret_;
  const uint64_t incarnation_;
  // One io_context (with its work guard, so it runs until stop_io) per io thread.
  struct IoThread {
    asio::io_context io{1};
    asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
    std::thread thread;
  };
  std::vector<std::unique_ptr<IoThread>> io_threads_;
  std::atomic<size_t> next_io_{0};
  std::unique_ptr<Listener> listener_;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;  // refused_callback_
  std::function<void(const std::string&)> refused_callback_;
};

}  // namespace symmesh
