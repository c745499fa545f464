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
// and a request's headers must arrive within kHeaderLimit (RequestDeadlines). So /health
// answers at once while a thousand idle or trickling connections are open.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "daemon/status/request_deadlines.h"
#include "transport/channel.h"

struct MHD_Daemon;

namespace symmesh {

inline constexpr unsigned kMaxStatusConnections = 2048;
inline constexpr unsigned kMaxStatusConnectionsPerSource = 256;
inline constexpr size_t kConnectionMemory = 16 * 1024;  // a GET's headers, and their parsing
inline constexpr auto kIdleLimit = std::chrono::seconds(10);
inline constexpr auto kHeaderLimit = std::chrono::seconds(10);

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

  Reply route(const std::string& method, const std::string& path) const;
  void run();

  Handlers handlers_;
  HostPort bound_;
  MHD_Daemon* server_ = nullptr;
  int stop_fd_ = -1;  // an eventfd: written to end the loop
  RequestDeadlines deadlines_{kHeaderLimit};
  std::thread thread_;
};

}  // namespace symmesh
