// A process that `symmesh launch` did not start (torchrun's, torch.multiprocessing.spawn's, one
// started by hand) joins a session as global rank `rank` of `world_size`. Ranks are node-major,
// as torchrun numbers them: rank r is local rank r % R of node r / R, R the PEs per node.
// find_seat asks any daemon for the cluster and that node's daemon for its attach socket, which
// must be on this host; the process that has to start the session (rank 0) calls start_session.
#pragma once

#include <cstdint>
#include <string>

#include "transport/channel.h"
#include "transport/wait.h"

namespace symmesh {

struct SessionSeat {
  std::string attach_socket;  // where this rank attaches
  int local_rank = 0;
  int node_rank = 0;
  int nodes = 0;
  int ranks_per_node = 0;
};

// Throws InvalidArgument when world_size is not the cluster's nodes x PEs per node or rank is
// outside it, and PeerError when the rank's node is unreachable or its socket is on another host.
SessionSeat find_seat(const HostPort& daemon, const std::string& secret_file, int rank,
                      int world_size, Deadline deadline);

// Submits a session job at the root, to outlive this call; returns its id once queued. Its PEs
// wait up to `attach_timeout_s` for their processes.
uint64_t start_session(const HostPort& daemon, const std::string& secret_file,
                       uint32_t attach_timeout_s, Deadline deadline);

}  // namespace symmesh
