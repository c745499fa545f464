// The control port: the CLI connects, authenticates with the cluster secret, and sends
// ClientRequests; each gets its answer (status) or the job's events then its result.
#pragma once

#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include "jobs.pb.h"
#include "transport/channel.h"

namespace symmesh {

class ControlServer {
 public:
  using Sink = std::function<void(const wire::ClientResponse&)>;
  struct Handlers {
    std::function<wire::StatusReply()> status;
    // Validates and queues the job; calls `sink` with events and finally the result.
    std::function<void(const wire::JobSpec&, Sink)> submit;
    // Cancels a queued or running job (the root only); throws naming what was wrong.
    std::function<wire::JobRecord(uint64_t job_id)> cancel;
    // One job's record, with its trace if asked (the root only); throws saying why not.
    std::function<wire::JobRecord(uint64_t job_id, bool trace)> job;
    // Counts a refused client: "auth" (a wrong secret) or "bad_request".
    std::function<void(const std::string& kind)> refused;
  };

  ControlServer(std::unique_ptr<Listener> listener, std::string secret, Handlers handlers);
  ~ControlServer();
  void stop();

 private:
  void accept_loop();
  void serve(std::shared_ptr<BlockingChannel> channel);

  std::unique_ptr<Listener> listener_;
  std::string secret_;
  Handlers handlers_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::list<std::shared_ptr<BlockingChannel>> clients_;
  std::list<std::thread> threads_;
  std::thread accept_thread_;
};

}  // namespace symmesh
