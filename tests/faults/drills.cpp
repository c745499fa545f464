#include "tests/faults/drills.h"

#include <gtest/gtest.h>

#include <thread>

namespace symmesh::testing {

ClusterOptions drill_shape(int nodes, int ranks) {
  ClusterOptions options = shape(nodes, ranks);
  options.extra_args = {"--wait-timeout", "20s", "--heartbeat", "500ms", "--rejoin-timeout", "60s"};
  return options;
}

std::future<std::string> endless_job(TestCluster& cluster, uint64_t bytes) {
  return std::async(std::launch::async, [&cluster, bytes] {
    try {
      const auto result =
          cluster.run(collective_job("allreduce", bytes, "f32", "ring", 100000, false));
      return result.ok() ? std::string() : result.error();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  });
}

bool wait_for_status(TestCluster& cluster, int node,
                     const std::function<bool(const wire::StatusReply&)>& wanted,
                     std::chrono::seconds within) {
  const Deadline deadline = deadline_after(within);
  while (Clock::now() < deadline) {
    try {
      if (wanted(cluster.client(node)->status(deadline_after(std::chrono::seconds(10))))) {
        return true;
      }
    } catch (const std::exception&) {
      // Not reachable yet (a restarting daemon).
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // poll interval, bounded
  }
  return false;
}

bool running_job(const wire::StatusReply& status) {
  for (const auto& job : status.jobs()) {
    if (wire::enum_text(job.state()) == "running" && wire::enum_text(job.kind()) == "collective")
      return true;
  }
  return false;
}

bool serving(const wire::StatusReply& status) {
  if (wire::enum_text(status.state()) != "ready") return false;
  for (const auto& node : status.node()) {
    if (wire::enum_text(node.state()) != "up") return false;
  }
  return true;
}

void next_job_verifies(TestCluster& cluster, int via_node, uint64_t bytes) {
  // The root serving does not mean `via_node` already is: it takes the root's start after.
  EXPECT_TRUE(wait_for_status(
      cluster, via_node,
      [](const wire::StatusReply& s) { return wire::enum_text(s.state()) == "ready"; },
      std::chrono::seconds(15)))
      << cluster.daemon(via_node).log();
  const auto result =
      cluster.run(collective_job("allreduce", bytes, "f32", "ring", 2, true), via_node);
  EXPECT_TRUE(result.ok()) << result.error();
  EXPECT_TRUE(result.verified());
}

uint64_t incarnation_of(const wire::StatusReply& status, int node) {
  for (const auto& slot : status.node()) {
    if (static_cast<int>(slot.node_rank()) == node) return slot.incarnation();
  }
  return 0;
}

}  // namespace symmesh::testing
