#include "client/client.h"

#include "transport/auth.h"
#include "transport/errors.h"

namespace symmesh {

std::unique_ptr<Client> Client::connect(const HostPort& daemon, const std::string& secret,
                                        const std::string& secret_source, Deadline deadline) {
  std::unique_ptr<BlockingChannel> channel;
  try {
    channel = BlockingChannel::connect(daemon, deadline);
  } catch (const Error& e) {
    throw PeerError("cannot reach the daemon at " + daemon.str() + " (" + e.what() +
                    "); set --daemon HOST:PORT or SYMMESH_DAEMON");
  }
  try {
    authenticate(*channel, secret, AuthIdentity{"control", 0, 0}, deadline);
  } catch (const AuthError& e) {
    throw AuthError(std::string(e.what()) + " (secret from " + secret_source + ")");
  }
  return std::unique_ptr<Client>(new Client(std::move(channel)));
}

wire::ClientResponse Client::ask(const wire::ClientRequest& request,
                                 wire::ClientResponse::BodyCase expected, Deadline deadline) {
  channel_->write(request, deadline);
  wire::ClientResponse response;
  channel_->read(response, deadline);
  if (response.has_error()) throw InvalidArgument(response.error());
  if (response.body_case() != expected) {
    throw PeerError("the daemon answered a request with something else (a version mismatch?)");
  }
  return response;
}

wire::StatusReply Client::status(Deadline deadline) {
  wire::ClientRequest request;
  request.mutable_status();
  return ask(request, wire::ClientResponse::kStatus, deadline).status();
}

wire::JobRecord Client::cancel(uint64_t job_id, Deadline deadline) {
  wire::ClientRequest request;
  request.mutable_cancel()->set_job_id(job_id);
  return ask(request, wire::ClientResponse::kCancelled, deadline).cancelled();
}

wire::JobRecord Client::job(uint64_t job_id, bool with_trace, Deadline deadline) {
  wire::ClientRequest request;
  request.mutable_job()->set_job_id(job_id);
  request.mutable_job()->set_trace(with_trace);
  return ask(request, wire::ClientResponse::kJob, deadline).job();
}

wire::JobResult Client::submit(const wire::JobSpec& spec,
                               const std::function<void(const wire::JobEvent&)>& on_event,
                               Deadline deadline) {
  wire::ClientRequest request;
  *request.mutable_submit() = spec;
  channel_->write(request, deadline);
  for (;;) {
    wire::ClientResponse response;
    channel_->read(response, deadline);
    if (response.has_event()) {
      if (on_event) on_event(response.event());
      continue;
    }
    if (response.has_result()) return response.result();
    wire::JobResult refused;
    refused.set_ok(false);
    refused.set_error(response.has_error() ? response.error() : "unexpected answer");
    return refused;
  }
}

}  // namespace symmesh
