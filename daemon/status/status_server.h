// The daemon's HTTP status endpoint (cpp-httplib), read-only, on its own threads:
//   GET /         the dashboard (dashboard.html, compiled in), which polls the two below
//   GET /health   200 "ok" when the daemon is in the cluster and serving, else 503 and why
//   GET /status   the daemon's status as JSON (wire/json: what `symmesh status --json`
//                 prints), with its jobs
//   GET /metrics  Prometheus text format 0.0.4
//   GET /jobs/ID/trace  a traced job's timeline as Chrome trace-event JSON (the root only;
//                 404 and why for any other job)
// Anything else is 404 with the paths that exist. Nothing secret is ever in a response: the
// handlers only see the status and the metrics.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "transport/channel.h"

namespace httplib {
class Server;
}

namespace symmesh {

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

  HostPort bound() const { return bound_; }
  std::string url() const;

 private:
  Handlers handlers_;
  std::unique_ptr<httplib::Server> server_;
  HostPort bound_;
  std::thread thread_;
  std::atomic<bool> ended_{false};  // the accept loop has returned
};

}  // namespace symmesh
