// symmesh launch -- CMD ARGS...: one process per PE of this node, each attached to its PE
// (as torchrun starts one per GPU). Run it on every node; on node 0 it also submits the session
// job the PEs serve the processes in.
//
// Each process gets SYMMESH_RANK, SYMMESH_WORLD_SIZE, SYMMESH_LOCAL_RANK, SYMMESH_LOCAL_SIZE,
// SYMMESH_NODE_RANK and SYMMESH_ATTACH_SOCKET. Every line it writes is prefixed with its rank
// ("[rank 3] "). SIGINT, SIGTERM and SIGHUP are passed on to every process. When one exits
// non-zero, or exits at all before its PE's session took it up, the others get SIGTERM
// (SIGKILL after kStopGrace) and the session is cancelled; launch exits with the first non-zero
// exit code (128 + N for a signal; 1 for an early exit 0), else 0.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "client/commands.h"

namespace symmesh {

inline constexpr auto kStopGrace = std::chrono::seconds(10);
// How often launch asks the root whether the session ended under its processes.
inline constexpr auto kSessionCheck = std::chrono::seconds(1);

int launch(const CliContext& context, const std::vector<std::string>& command,
           uint32_t attach_timeout_s);

}  // namespace symmesh
