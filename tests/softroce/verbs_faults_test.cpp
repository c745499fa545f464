// The fault drills over verbs: a member killed mid-job fails it naming the node; started again
// it joins with a new incarnation, the cluster re-forms with fresh queue pairs and memory
// registrations, and the next job verifies over verbs. A link that drops under the device fails
// the job too, and the cluster re-forms over tcp. Bounds are wide: soft-RoCE runs in an
// emulated guest here.
#include <gtest/gtest.h>
#include <signal.h>

#include "common/errors.h"
#include "tests/cluster/test_cluster.h"
#include "tests/faults/drills.h"
#include "tests/softroce/drill_link.h"

namespace symmesh::testing {
namespace {

TEST(VerbsFaults, AKilledMemberFailsTheJobRejoinsAndTheNextJobVerifiesOverVerbs) {
  ClusterOptions options = drill_shape(2, 1);
  options.extra_args.insert(options.extra_args.end(), {"--transport", "verbs"});
  TestCluster cluster(options);
  const auto deadline = deadline_after(std::chrono::seconds(30));
  const uint64_t old_incarnation = incarnation_of(cluster.client(0)->status(deadline), 1);
  auto job = endless_job(cluster, 64 << 10);
  ASSERT_TRUE(wait_for_status(cluster, 0, running_job, std::chrono::seconds(60)));
  cluster.daemon(1).stop(SIGKILL);
  ASSERT_EQ(job.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  const std::string error = job.get();
  EXPECT_NE(error.find("node 1"), std::string::npos) << error;

  cluster.restart(1);
  ASSERT_TRUE(wait_for_status(cluster, 0, serving, std::chrono::seconds(120)))
      << cluster.daemon(0).log();
  next_job_verifies(cluster, 1, 64 << 10);
  const auto status = cluster.client(0)->status(deadline_after(std::chrono::seconds(30)));
  EXPECT_GT(incarnation_of(status, 1), old_incarnation);
  ASSERT_EQ(status.peer_size(), 1);
  EXPECT_EQ(status.peer(0).transport(), "verbs");
  EXPECT_TRUE(status.peer(0).up());
}

bool serving_over_tcp(const wire::StatusReply& status) {
  return serving(status) && status.peer_size() == 1 && status.peer(0).transport() == "tcp";
}

// The link under the verbs device drops mid-job: the device's port event fails the job at once
// (or a queue pair's failed request does, whichever comes first), and the cluster re-forms over
// what is left (tcp, as --transport auto allows), saying why verbs is not used; the next job
// verifies.
TEST(VerbsFaults, ALinkThatDropsMidJobFailsItAndTheClusterReformsOverTcp) {
  DrillLink link;
  if (!link.skip_reason().empty()) GTEST_SKIP() << link.skip_reason();
  ASSERT_EQ(link.failed(), "");
  ClusterOptions options = drill_shape(2, 1);
  options.extra_args.insert(options.extra_args.end(),
                            {"--transport", "auto", "--rdma-device", DrillLink::kDevice});
  TestCluster cluster(options);
  auto status = cluster.client(0)->status(deadline_after(std::chrono::seconds(30)));
  ASSERT_EQ(status.peer_size(), 1);
  ASSERT_EQ(status.peer(0).transport(), "verbs") << status.peer(0).reason();

  auto job = endless_job(cluster, 64 << 10);
  ASSERT_TRUE(wait_for_status(cluster, 0, running_job, std::chrono::seconds(60)));
  ASSERT_EQ(link.set_down(), "");
  const auto dropped = Clock::now();
  ASSERT_EQ(job.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  const std::string error = job.get();
  EXPECT_NE(error.find("verbs"), std::string::npos) << error;
  // For the reliability report: how soon the job failed, and what it said.
  RecordProperty(
      "failed_after_ms",
      std::to_string(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - dropped).count()));
  RecordProperty("error", error);

  ASSERT_TRUE(wait_for_status(cluster, 0, serving_over_tcp, std::chrono::seconds(120)))
      << cluster.daemon(0).log();
  // The device's event named the port on both nodes, whichever failure reached the job first.
  for (int node = 0; node < 2; ++node) {
    EXPECT_NE(cluster.daemon(node).log().find(std::string("port 1 of ") + DrillLink::kDevice +
                                              " went down: its network link is down"),
              std::string::npos)
        << cluster.daemon(node).log();
  }
  status = cluster.client(0)->status(deadline_after(std::chrono::seconds(30)));
  EXPECT_NE(
      status.peer(0).reason().find(std::string(DrillLink::kDevice) + ": port 1 is not active"),
      std::string::npos)
      << status.peer(0).reason();
  next_job_verifies(cluster, 1, 64 << 10);
}

}  // namespace
}  // namespace symmesh::testing
