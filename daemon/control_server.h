// The control port: clients (the CLI, and nodes' tests) connect, authenticate with the
// cluster secret, and send ClientRequests; each gets its answer, or a job's events then its
// result. It runs on asio: a fixed pool of threads serves every connection, so a connection
// costs a socket and a few kilobytes, never a thread.
//
// Bounds: at most `max_handshaking` connections may be unauthenticated at once (more are
// closed at accept) and each has kHandshakeTimeout to prove itself; at most `max_sessions`
// are authenticated. Nothing a client does can block a job: answers go through a bounded
// queue per connection, progress events are dropped when it is full, and a connection whose
// writes stall past `write_timeout` is closed. A client that leaves before its job's result
// cancels the job, unless it submitted with detach.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "transport/channel.h"
#include "wire/jobs.pb.h"

namespace symmesh {

class ControlSession;

struct ControlLimits {
  size_t max_handshaking = 64;
  size_t max_sessions = 256;
  size_t max_queued = 64;  // answers waiting for one slow client
  std::chrono::milliseconds write_timeout{10000};
  int threads = 2;
};

class ControlServer {
 public:
  // Takes a job's events and its result. Never blocks; callable from any thread, also after
  // the client left (then it does nothing).
  using Sink = std::function<void(const wire::ClientResponse&)>;
  // Gives up a job whose client left (cancels it); may do nothing if it already ended.
  using Abandon = std::function<void()>;
  struct Handlers {
    std::function<wire::StatusReply()> status;
    // Validates and queues the job; throws InvalidArgument (the request's fault) or PeerError
    // (the cluster cannot take it now).
    std::function<Abandon(const wire::JobSpec&, Sink)> submit;
    // Cancels a queued or running job (the root only); throws naming what was wrong.
    std::function<wire::JobRecord(uint64_t job_id)> cancel;
    // One job's record, with its trace if asked (the root only); throws saying why not.
    std::function<wire::JobRecord(uint64_t job_id, bool trace)> job;
    // Sends a job's events and result to the sink (the root only); throws for an unknown job.
    std::function<void(uint64_t job_id, Sink)> wait;
    // Counts a refused or dropped connection: auth, bad_request, timeout, overload,
    // slow_client, fd_exhausted.
    std::function<void(const std::string& kind)> refused;
  };
  using Limits = ControlLimits;

  // Binds now (throws InvalidArgument naming the address when it cannot); serves once
  // start() is called.
  ControlServer(const HostPort& at, std::string secret, Limits limits = {});
  ~ControlServer();
  HostPort local_endpoint() const { return bound_; }
  void start(Handlers handlers);
  void stop();

  size_t handshaking() const { return handshaking_.load(); }
  size_t sessions() const { return sessions_.load(); }

 private:
  friend class ControlSession;

  void accept_next();
  void on_accept_error(const asio::error_code& ec);

  asio::io_context io_;
  asio::strand<asio::io_context::executor_type> accept_strand_;  // accepts, backoff, close
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer backoff_;
  HostPort bound_;
  const std::string secret_;
  const Limits limits_;
  Handlers handlers_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> handshaking_{0};
  std::atomic<size_t> sessions_{0};
  std::atomic<bool> stopping_{false};
  bool fd_exhaustion_logged_ = false;  // accept handlers run one at a time
  std::mutex mutex_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::weak_ptr<ControlSession>> live_;
};

}  // namespace symmesh
