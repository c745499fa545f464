#include "client/client.h"

#include "common/errors.h"
#include "transport/auth.h"

namespace symmesh {
namespace {

// Passes every event on and never stops early.
std::function<bool(const wire::JobEvent&)> every_event(
    const std::function<void(const wire::JobEvent&)>& on_event) {
  return [&on_event](const wire::JobEvent& event) {
    if (on_event) on_event(event);
    return true;
  };
}

}  // namespace

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
    authenticate_client(*channel, secret, AuthIdentity{wire::ROLE_CONTROL, 0, 0, 0}, deadline);
  } catch (const AuthError& e) {
    throw AuthError(std::string(e.what()) + " (secret from " + secret_source + ")");
  } catch (const PeerError& e) {
    // The daemon closes a connection unread when too many wait unauthenticated; it may also
    // have stopped between accepting this one and answering it.
    throw PeerError("lost the daemon at " + daemon.str() +
                    " during the handshake (it stopped, was killed, or had too many connections "
                    "waiting to authenticate; try again): " +
                    e.what());
  }
  return std::unique_ptr<Client>(new Client(std::move(channel)));
}

wire::ClientResponse Client::ask(const wire::ClientRequest& request,
                                 wire::ClientResponse::BodyCase expected, Deadline deadline) {
  wire::ClientResponse response;
  try {
    channel_->write(request, deadline);
    channel_->read(response, deadline);
  } catch (const PeerError& e) {
    throw lost_daemon("its answer", e);
  }
  if (response.has_error()) {
    if (response.refusal() == wire::REFUSAL_UNAVAILABLE) throw PeerError(response.error());
    throw InvalidArgument(response.error());
  }
  if (response.body_case() != expected) {
    throw PeerError("the daemon answered a request with something else (a version mismatch?)");
  }
  return response;
}

PeerError Client::lost_daemon(const std::string& before, const PeerError& cause) const {
  return PeerError("lost the daemon at " + channel_->peer_name() + " before " + before +
                   " (the daemon stopped or was killed): " + cause.what());
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
  return *follow(request, every_event(on_event), deadline);
}

uint64_t Client::submit_detached(const wire::JobSpec& spec, Deadline deadline) {
  wire::ClientRequest request;
  *request.mutable_submit() = spec;
  request.set_detach(true);
  uint64_t job_id = 0;
  const auto queued = [&](const wire::JobEvent& event) {
    job_id = event.job_id();
    return false;  // the first event says it is queued: that is all a detached client waits for
  };
  const auto result = follow(request, queued, deadline);
  return result ? result->job_id() : job_id;
}

wire::JobResult Client::wait(uint64_t job_id,
                             const std::function<void(const wire::JobEvent&)>& on_event,
                             Deadline deadline) {
  wire::ClientRequest request;
  request.mutable_wait()->set_job_id(job_id);
  return *follow(request, every_event(on_event), deadline);
}

std::optional<wire::JobResult> Client::follow(
    const wire::ClientRequest& request, const std::function<bool(const wire::JobEvent&)>& on_event,
    Deadline deadline) {
  for (bool first = true;; first = false) {
    wire::ClientResponse response;
    try {
      if (first) channel_->write(request, deadline);
      channel_->read(response, deadline);
    } catch (const PeerError& e) {
      throw lost_daemon("the job's result (a job submitted without --detach is cancelled)", e);
    }
    if (response.has_event()) {
      if (on_event && !on_event(response.event())) return std::nullopt;
      continue;
    }
    if (response.has_result()) return response.result();
    if (!response.has_error()) {
      throw PeerError("the daemon answered a job with something else (a version mismatch?)");
    }
    // Refused before it ran: the request's fault, or the cluster cannot take it now.
    if (response.refusal() == wire::REFUSAL_UNAVAILABLE) throw PeerError(response.error());
    throw InvalidArgument(response.error());
  }
}

}  // namespace symmesh
