#include "transport/tcp/address.h"

namespace symmesh {

wire::Endpoint endpoint_message(const HostPort& at) {
  wire::Endpoint out;
  out.set_host(at.host);
  out.set_port(at.port);
  return out;
}

HostPort host_port(const wire::Endpoint& at) {
  return HostPort{at.host(), static_cast<uint16_t>(at.port())};
}

}  // namespace symmesh
