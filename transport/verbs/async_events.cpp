#include "transport/verbs/async_events.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "common/errors.h"
#include "transport/verbs/device.h"

namespace symmesh {
namespace {

AsyncEvent describe(const VerbsDevice& device, const ibv_async_event& event) {
  AsyncEvent out;
  const std::string name = ibv_event_type_str(event.event_type);
  const std::string port = "port " + std::to_string(device.port()) + " of " + device.name();
  switch (event.event_type) {
    case IBV_EVENT_PORT_ERR:
      if (event.element.port_num != device.port()) break;
      out.reach = AsyncEvent::Reach::kEveryPeer;
      out.what = port + " went down: its network link is down (device event: " + name + ")";
      return out;
    case IBV_EVENT_DEVICE_FATAL:
      out.reach = AsyncEvent::Reach::kEveryPeer;
      out.what = "the device " + device.name() + " failed (device event: " + name + ")";
      return out;
    case IBV_EVENT_CQ_ERR:  // completions were lost: no request's fate can be known
      out.reach = AsyncEvent::Reach::kEveryPeer;
      out.what = "a completion queue on " + device.name() + " failed (device event: " + name + ")";
      return out;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
      out.reach = AsyncEvent::Reach::kQueuePair;
      out.qpn = event.element.qp->qp_num;
      out.what = "the device failed queue pair " + std::to_string(out.qpn) +
                 " (device event: " + name + ")";
      return out;
    default:
      break;
  }
  out.what = device.name() + ": device event: " + name;
  return out;
}

}  // namespace

void make_async_events_nonblocking(const VerbsDevice& device) {
  const int fd = device.context()->async_fd;
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw Error("verbs: making " + device.name() +
                "'s event descriptor non-blocking failed: " + std::strerror(errno));
  }
}

std::optional<AsyncEvent> next_async_event(const VerbsDevice& device) {
  ibv_async_event event{};
  if (ibv_get_async_event(device.context(), &event) != 0) return std::nullopt;
  AsyncEvent out = describe(device, event);
  ibv_ack_async_event(&event);
  return out;
}

}  // namespace symmesh
