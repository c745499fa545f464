// The RDMA transport as the rest of the system sees it, whether or not this build has one:
// the CMake option SYMMESH_VERBS (on by default) builds the verbs transport
// (transport/verbs/, libibverbs); off, the build needs no rdma-core and opening verbs fails
// with a reason, so nodes use tcp. Peers connect through the address each node sends in its
// bootstrap hello (wire::VerbsInfo).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/errors.h"
#include "transport/transport.h"
#include "transport/wait.h"
#include "wire/bootstrap.pb.h"

namespace symmesh {

// The device is there but its port has no link (a cable pulled, a netdev set down): a state
// that may pass, where a wrong device name or GID index is an InvalidArgument.
class PortNotActive : public Error {
 public:
  using Error::Error;
};

struct VerbsDeviceOptions {
  std::string device;  // empty: the first device with an active port
  int gid_index = -1;  // -1: a RoCE v2 IPv4-mapped GID first, then any routable RoCE v2 one
};

struct VerbsOptions {
  VerbsDeviceOptions device;
  size_t max_message = 0;  // 0: the device's max_msg_sz; smaller only splits writes more
  size_t bounce_bytes = size_t{4} << 20;  // per PE
  uint32_t send_depth = 256;
  uint32_t recv_depth = 128;
  uint32_t signal_interval = 32;
  // Who drains the send completions: the PE that posted them, when it next waits for space
  // or completion (false), or also the node's progress thread, whenever the PE is not inside
  // an operation (true). bench/transport.sh measures both.
  bool progress_thread = false;
  // A signal or atomic carries a wake-up (the immediate) only when the last one on its QP is
  // at least this old. A waiter yields this long before it parks (the transport's
  // shape_wait_policy), so a wake-up sent sooner finds it still yielding: skipping it spares the
  // target a thread switch per signal; a parked waiter is woken by the next wake-up or its
  // own re-check.
  std::chrono::microseconds notify_interval{1000};
  // Bounds one whole operation (a put cut into many writes, a quiet), not each of its waits:
  // counted from the operation's first wait that lasts, or its second wait. flush_all takes
  // its caller's deadline instead.
  std::chrono::milliseconds op_timeout{60000};
};

class RdmaTransport : public NetworkTransport {
 public:
  using NetworkTransport::NetworkTransport;

  // What the peers need to connect to this node (sent in the bootstrap hello).
  virtual wire::VerbsInfo local_info() const = 0;
  // Connects to `peer` through the address it sent. Throws naming the field that does not
  // fit (protocol version, missing queue pairs, GID size).
  virtual void connect(int peer, const wire::VerbsInfo& remote) = 0;
  virtual bool connected(int peer) const = 0;
  // The device as logs and status name it: "rxe0 port 1, GID index 1 (::ffff:127.0.0.1), MTU 1024".
  virtual std::string describe() const = 0;
};

// Whether this build has the verbs transport.
bool verbs_built();
// The names of this host's RDMA devices (none when the build has no verbs).
std::vector<std::string> verbs_devices();
// Opens the verbs transport for `node`. Throws InvalidArgument for a wrong device or GID
// index (naming what exists), Error when the host has no usable device or the build has no
// verbs.
std::unique_ptr<RdmaTransport> open_verbs_transport(int node, int nodes, int ranks_per_node,
                                                    SegmentView segment, Doorbell& doorbell,
                                                    const VerbsOptions& options);

}  // namespace symmesh
