// The device's asynchronous events, as the verbs transport acts on them. Nothing else tells a
// process that its port lost its link: requests already posted may sit unanswered until the
// operation's deadline. A port that went down, or a device or completion queue that failed,
// takes every peer down at once, naming it; a queue pair the device failed takes its own peer
// down; anything else (a port that came back, a changed GID) is only logged.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <string>

namespace symmesh {

class VerbsDevice;

struct AsyncEvent {
  enum class Reach {
    kEveryPeer,  // the port or the device: nothing reaches any peer
    kQueuePair,  // one queue pair, `qpn`
    kNone,       // news only
  };
  Reach reach = Reach::kNone;
  uint32_t qpn = 0;
  // "port 1 of rxe0 went down: its network link is down (device event: port error)"
  std::string what;
};

// Makes the device context's async_fd non-blocking, so the notifier thread that polls it never
// stalls on a read. Throws Error when fcntl fails.
void make_async_events_nonblocking(const VerbsDevice& device);
// Reads and acknowledges the next pending event; nullopt when none is pending.
std::optional<AsyncEvent> next_async_event(const VerbsDevice& device);

}  // namespace symmesh
