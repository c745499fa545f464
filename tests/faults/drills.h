// What the fault drills share: a cluster shape with short heartbeats, a job that runs until
// a fault ends it, polling a node's status for a condition, and the verified job that shows
// the cluster serves again.
#pragma once

#include <functional>
#include <future>
#include <string>

#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {

// `nodes` x `ranks`, a 20 s wait timeout, heartbeats every 500 ms, 60 s to rejoin.
ClusterOptions drill_shape(int nodes, int ranks);
// An allreduce of `bytes` with 100000 iterations; the future holds its error ("" if it
// succeeded), the text of a failed result or of the exception the client saw.
std::future<std::string> endless_job(TestCluster& cluster, uint64_t bytes = 1 << 20);
// Polls `node`'s status every 50 ms until `wanted` holds (true) or `within` passes (false).
bool wait_for_status(TestCluster& cluster, int node,
                     const std::function<bool(const wire::StatusReply&)>& wanted,
                     std::chrono::seconds within);
bool running_job(const wire::StatusReply& status);
// Ready, and every node up.
bool serving(const wire::StatusReply& status);
// A verified allreduce of `bytes` through `via_node`.
void next_job_verifies(TestCluster& cluster, int via_node = 0, uint64_t bytes = 1 << 20);
uint64_t incarnation_of(const wire::StatusReply& status, int node);

}  // namespace symmesh::testing
