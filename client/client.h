// The client library: what the symmesh CLI (and the multi-daemon tests) use to talk to a
// daemon's control port. Only the protobuf API crosses this line.
#pragma once

#include <functional>
#include <memory>

#include "jobs.pb.h"
#include "transport/channel.h"

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
  // Submits a job and waits for its result; `on_event` sees its events (running, ...).
  // A refused job comes back as a result with ok=false.
  wire::JobResult submit(const wire::JobSpec& spec,
                         const std::function<void(const wire::JobEvent&)>& on_event,
                         Deadline deadline);

 private:
  explicit Client(std::unique_ptr<BlockingChannel> channel) : channel_(std::move(channel)) {}
  // One request and its answer, which must be `expected`; the daemon's error is thrown as
  // InvalidArgument (it names what was wrong with the request).
  wire::ClientResponse ask(const wire::ClientRequest& request,
                           wire::ClientResponse::BodyCase expected, Deadline deadline);
  std::unique_ptr<BlockingChannel> channel_;
};

}  // namespace symmesh
