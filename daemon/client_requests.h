// A client's request served through a daemon's handlers, the same whether the client came to
// this daemon's control port or to a member that relayed the request to the root.
#pragma once

#include "daemon/control_server.h"
#include "wire/jobs.pb.h"

namespace symmesh {

// Whether the request's answers stream (submit, wait: events, then the result, the last).
bool answers_stream(const wire::ClientRequest& request);

// Serves `request`: status, cancel and job answer once through `sink`; submit and wait
// answer through it as the job goes. Returns what gives up a submitted job should its
// client leave (empty for the other kinds). Throws InvalidArgument for the request's fault
// (an unknown kind names the kinds there are), another error when the cluster cannot serve it.
ControlServer::Abandon serve_client_request(const ControlServer::Handlers& handlers,
                                            const wire::ClientRequest& request,
                                            const ControlServer::Sink& sink);

// The answer refusing a request for `error`: the client's to fix (InvalidArgument) or not now.
wire::ClientResponse refusal(const std::exception& error);

}  // namespace symmesh
