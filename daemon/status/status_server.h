// The daemon's HTTP status endpoint (libmicrohttpd), read-only, on one event-loop thread:
//   GET /         the dashboard (dashboard.html, compiled in), which polls the two below
//   GET /health   200 "ok" when the daemon is in the cluster and serving, else 503 and why
//   GET /status   the daemon's status as JSON (wire/json: what `symmesh status --json`
//                 prints), with its jobs
//   GET /metrics  Prometheus text format 0.0.4
//   GET /jobs/ID/trace  a traced job's timeline as Chrome trace-event JSON (the root only;
//                 404 and why for any other job)
// Anything else is 404 with the paths that exist; a method other than GET or HEAD is 405.
// Nothing secret is ever in a response: the handlers only see the status and the metrics.
//
// Idle and slow clients cost a socket, never a thread: connections are capped in all and per
// source address, each holds at most kConnectionMemory, an idle one is closed after kIdleLimit,
// and a request's headers must arrive within kHeaderLimit (RequestDeadlines). The pages that
// read the daemon's state under its locks (/status, /metrics, traces) are made on a worker
// thread, their connections suspended meanwhile (kMaxQueuedPages at most, then 503). So
// /health answers at once while a thousand idle or trickling connections are open, and while
// a /status waits for a lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "daemon/status/request_deadlines.h"
#include "transport/channel.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace symmesh {

inline constexpr unsigned kMaxStatusConnections = 2048;
inline constexpr unsigned kMaxStatusConnectionsPerSource = 256;
inline constexpr size_t kConnectionMemory = 16 * 1024;  // a GET's headers, and their parsing
inline constexpr auto kIdleLimit = std::chrono::seconds(10);
inline constexpr auto kHeaderLimit = std::chrono::seconds(10);
inline constexpr size_t kMaxQueuedPages = 64;

class StatusServer {
 public:
  struct Health {
    bool ok = false;
    std::string reason;  // why not
  };
  struct Handlers {
    std::function<Health()> health;
    std::function<std::string()> status_json;
    std::function<std::string()> metrics_text;
    // Throws InvalidArgument saying why there is no trace (no such job, not traced, ...).
    std::function<std::string(uint64_t job_id)> job_trace_json;
  };

  // Binds `address` (port 0: a free port) and serves until destroyed. Throws InvalidArgument
  // naming the address when it cannot be bound.
  StatusServer(const HostPort& address, Handlers handlers);
  ~StatusServer();

  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  HostPort bound() const { return bound_; }
  std::string url() const;

 private:
  struct Reply;
  struct Callbacks;  // libmicrohttpd's, with its exact signatures
  struct Page;       // one request's page, made on the worker

  Reply route(const std::string& method, const std::string& path) const;
  void run();
  // Suspends the connection and queues its page for the worker; false when the queue is full
  // or the server is stopping (then the caller answers at once).
  bool defer(MHD_Connection* connection, Page* page);
  void make_pages();
  void stop_making_pages();

  Handlers handlers_;
  HostPort bound_;
  MHD_Daemon* server_ = nullptr;
  int stop_fd_ = -1;  // an eventfd: written to end the loop
  RequestDeadlines deadlines_{kHeaderLimit};
  std::mutex pages_mutex_;
  std::condition_variable pages_changed_;
  std::deque<std::pair<MHD_Connection*, Page*>> pages_;  // suspended, waiting for the worker
  bool pages_stopping_ = false;
  std::thread worker_;
  std::thread thread_;
};

}  // namespace symmesh
