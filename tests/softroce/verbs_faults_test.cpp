// The fault drills over verbs: a member killed mid-job fails it naming the node; started again
// it joins with a new incarnation, the cluster re-forms with fresh queue pairs and memory
// registrations, and the next job verifies over verbs. Bounds are wide: soft-RoCE runs in an
// emulated guest here.
#include <gtest/gtest.h>
#include <signal.h>

#include "common/errors.h"
#include "tests/cluster/test_cluster.h"
#include "tests/faults/drills.h"

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

}  // namespace
}  // namespace symmesh::testing
