// The tcp transport's address: the host and port a node accepts data connections on. Each
// node puts its own into its bootstrap hello; the root's cluster view carries every node's,
// and each node dials the addresses of the nodes ranked above it.
#pragma once

#include <vector>

#include "transport/channel.h"
#include "wire/bootstrap.pb.h"

namespace symmesh {

wire::Endpoint endpoint_message(const HostPort& at);
HostPort host_port(const wire::Endpoint& at);

}  // namespace symmesh
