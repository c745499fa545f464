#include "daemon/client_requests.h"

#include "common/errors.h"

namespace symmesh {

bool answers_stream(const wire::ClientRequest& request) {
  return request.has_submit() || request.has_wait();
}

ControlServer::Abandon serve_client_request(const ControlServer::Handlers& handlers,
                                            const wire::ClientRequest& request,
                                            const ControlServer::Sink& sink) {
  wire::ClientResponse response;
  switch (request.body_case()) {
    case wire::ClientRequest::kStatus:
      *response.mutable_status() = handlers.status();
      break;
    case wire::ClientRequest::kSubmit:
      return handlers.submit(request.submit(), sink);
    case wire::ClientRequest::kWait:
      handlers.wait(request.wait().job_id(), sink);
      return nullptr;
    case wire::ClientRequest::kCancel:
      *response.mutable_cancelled() = handlers.cancel(request.cancel().job_id());
      break;
    case wire::ClientRequest::kJob:
      *response.mutable_job() = handlers.job(request.job().job_id(), request.job().trace());
      break;
    default:
      throw InvalidArgument("unknown request: expected status, submit, wait, cancel or job");
  }
  sink(response);
  return nullptr;
}

wire::ClientResponse refusal(const std::exception& error) {
  wire::ClientResponse response;
  response.set_error(error.what());
  response.set_refusal(dynamic_cast<const InvalidArgument*>(&error) ? wire::REFUSAL_INVALID
                                                                    : wire::REFUSAL_UNAVAILABLE);
  return response;
}

}  // namespace symmesh
