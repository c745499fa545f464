// A network link of the test's own, for the link-drop drill: a veth pair, an address from
// TEST-NET-1 (192.0.2.0/24, never routed) on one end, and an rxe device on that end. Both
// daemons use the one device, so their traffic takes rxe's loopback path and never leaves the
// machine; setting the veth down is the link dropping (the port goes DOWN and the device
// reports IBV_EVENT_PORT_ERR). Deleting the rxe device instead is no drill: rxe cannot let go of
// a process's resources, so `rdma link delete` waits until every process closed the device.
//
// Made only where SYMMESH_LINK_DRILL=1 says the suite runs in its QEMU guest (as root): on a
// real host it would change the host's network.
#pragma once

#include <string>

namespace symmesh::testing {

class DrillLink {
 public:
  static constexpr const char* kDevice = "symmesh_drill";

  // Makes the link and waits (at most 20 s) for its port to be ACTIVE with the address's GID.
  // Leaves skip_reason() set when this is not the guest; failed() names a step that failed.
  DrillLink();
  // Deletes the veth pair, which takes the rxe device with it once no process holds it.
  ~DrillLink();
  DrillLink(const DrillLink&) = delete;
  DrillLink& operator=(const DrillLink&) = delete;

  const std::string& skip_reason() const { return skip_reason_; }
  const std::string& failed() const { return failed_; }
  // Sets the veth down; returns the step's error, empty when it worked.
  std::string set_down();

 private:
  std::string skip_reason_;
  std::string failed_;
  bool made_ = false;
};

}  // namespace symmesh::testing
