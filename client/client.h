// The client library: what the symmesh CLI (and the multi-daemon tests) use to talk to a
// daemon's control port. Only the protobuf API crosses this line.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "common/errors.h"
#include "transport/channel.h"
#include "wire/jobs.pb.h"

namespace symmesh {

class Client {
 public:
  // Connects and authenticates. Throws PeerError (unreachable) or AuthError, each naming the
  // address tried and what to set.
  static std::unique_ptr<Client> connect(const HostPort& daemon, const std::string& secret,
                                         const std::string& secret_source, Deadline deadline);

  wire::StatusReply status(Deadline deadline);
  // Cancels a queued or running job at the root; throws Error with the root's reason.
  wire::JobRecord cancel(uint64_t job_id, Deadline deadline);
  // One job's record at the root, with its trace when `with_trace`; throws InvalidArgument
  // with the root's reason (an unknown job, a job not traced).
  wire::JobRecord job(uint64_t job_id, bool with_trace, Deadline deadline);
  // Submits a job and waits for its result; `on_event` sees its events (queued, running,
  // ...). Leaving before the result (closing the client) cancels the job. A job refused
  // before it ran throws: InvalidArgument (the request's fault) or PeerError (the cluster
  // cannot take it now, e.g. a node is down).
  wire::JobResult submit(const wire::JobSpec& spec,
                         const std::function<void(const wire::JobEvent&)>& on_event,
                         Deadline deadline);
  // Submits a job that outlives this client; returns its id once it is queued.
  uint64_t submit_detached(const wire::JobSpec& spec, Deadline deadline);
  // Follows a queued, running or finished job (at the root) to its result, without owning
  // it: leaving does not cancel it.
  wire::JobResult wait(uint64_t job_id, const std::function<void(const wire::JobEvent&)>& on_event,
                       Deadline deadline);

 private:
  // Sends a submit or wait and reads the job's events until its result; stops early (no
  // result) when `on_event` returns false.
  std::optional<wire::JobResult> follow(const wire::ClientRequest& request,
                                        const std::function<bool(const wire::JobEvent&)>& on_event,
                                        Deadline deadline);
  explicit Client(std::unique_ptr<BlockingChannel> channel) : channel_(std::move(channel)) {}
  // One request and its answer, which must be `expected`; the daemon's error is thrown as
  // InvalidArgument (it names what was wrong with the request) or PeerError (the cluster
  // cannot answer it now).
  wire::ClientResponse ask(const wire::ClientRequest& request,
                           wire::ClientResponse::BodyCase expected, Deadline deadline);
  // The daemon went away (stopped, killed, its connection cut) before `before`.
  PeerError lost_daemon(const std::string& before, const PeerError& cause) const;
  std::unique_ptr<BlockingChannel> channel_;
};

}  // namespace symmesh
