// symmesh launch on every node of a local cluster (2 nodes x 2 PEs, tcp between them): one
// process per PE, each attached to its daemon, all-reducing a tensor on the shared heap; the
// C++ MoE layer example trained through dispatch and combine against its one-process twin; and a
// process killed mid-session, which ends the session on both nodes with a named error within
// seconds, after which the cluster runs jobs and sessions again; processes that exit before
// attaching, which end the session at once; and the global options among launch's own.
#include <gtest/gtest.h>

#include <future>
#include <regex>

#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {
namespace {

std::string example() {
  return bin_dir() + "/symmesh_example_allreduce 65536";
}

TEST(Launch, EveryPeGetsAProcessThatReducesItsHeapTensorThroughTheDaemons) {
  TestCluster cluster(shape(2, 2));
  const std::vector<CliRun> runs = launch_on_every_node(cluster, example());
  for (int node = 0; node < 2; ++node) {
    EXPECT_EQ(runs[node].exit_code, 0) << runs[node].out;
    for (int local = 0; local < 2; ++local) {
      const int rank = node * 2 + local;
      const std::string line = "[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) +
                               " of 4: all_reduce of 65536 floats ok";
      EXPECT_NE(runs[node].out.find(line), std::string::npos) << runs[node].out;
    }
  }
  EXPECT_NE(runs[0].out.find("session job"), std::string::npos) << runs[0].out;
}

TEST(Launch, TheCppMoeLayerTrainsLikeTheSingleProcessLayerThroughDispatchAndCombine) {
  TestCluster cluster(shape(2, 2));
  const std::vector<CliRun> runs =
      launch_on_every_node(cluster, bin_dir() + "/symmesh_example_moe_layer 3");
  for (int node = 0; node < 2; ++node) {
    EXPECT_EQ(runs[node].exit_code, 0) << runs[node].out;
    for (int local = 0; local < 2; ++local) {
      const int rank = node * 2 + local;
      const std::string line = "[rank " + std::to_string(rank) + "] moe_layer (C++): rank " +
                               std::to_string(rank) +
                               " of 4: 3 steps forward and backward match the single-process "
                               "layer";
      EXPECT_NE(runs[node].out.find(line), std::string::npos) << runs[node].out;
    }
  }
}

TEST(Launch, AKilledProcessEndsTheSessionEverywhereNamingItAndTheClusterGoesOn) {
  TestCluster cluster(shape(2, 2));
  const std::string dies =
      "sh -c 'if [ \"$SYMMESH_RANK\" = 3 ]; then kill -9 $$; fi; exec " + example() + "'";
  const auto started = Clock::now();
  const std::vector<CliRun> runs = launch_on_every_node(cluster, dies);
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(60)) << "the session was not cut short";
  EXPECT_EQ(runs[1].exit_code, 128 + 9) << runs[1].out;
  EXPECT_NE(runs[1].out.find("rank 3 exited with status 137"), std::string::npos) << runs[1].out;
  EXPECT_NE(runs[0].exit_code, 0) << runs[0].out;
  // Node 0's processes hear it from their calls ("the session ended: ...") or from launch,
  // which sees the session cancelled ("session job N ended (cancelled: ...)").
  EXPECT_TRUE(runs[0].out.find("the session ended") != std::string::npos ||
              runs[0].out.find("ended (cancelled") != std::string::npos)
      << runs[0].out;
  // Jobs and sessions run again.
  const wire::JobResult next = cluster.run(collective_job("allreduce", 1 << 20, "f32", "hier"));
  EXPECT_TRUE(next.ok() && next.verified()) << next.error();
  const std::vector<CliRun> again = launch_on_every_node(cluster, example());
  EXPECT_EQ(again[0].exit_code, 0) << again[0].out;
  EXPECT_EQ(again[1].exit_code, 0) << again[1].out;
}

// A process that exits, with any status, before its PE's session took it up would leave that
// PE waiting out --attach-timeout: every node's launch ends the session at once, naming a rank.
TEST(Launch, ProcessesThatExitBeforeAttachingEndTheSessionAtOnceAndTheClusterGoesOn) {
  TestCluster cluster(shape(2, 2));
  const std::string attach_long = "--attach-timeout 60";  // far past the bound below
  for (const auto& [command, status] : {std::pair<std::string, int>{"/bin/true", 0},
                                        std::pair<std::string, int>{"sh -c 'exit 3'", 3}}) {
    const auto started = Clock::now();
    const std::vector<CliRun> runs = launch_on_every_node(cluster, command, 2, attach_long);
    EXPECT_LT(Clock::now() - started, std::chrono::seconds(20)) << command << " waited";
    for (int node = 0; node < 2; ++node) {
      const std::regex named("rank (" + std::to_string(2 * node) + "|" +
                             std::to_string(2 * node + 1) + ") exited with status " +
                             std::to_string(status) +
                             " before attaching to its PE: ending the session");
      EXPECT_EQ(runs[node].exit_code, status == 0 ? 1 : status) << command << runs[node].out;
      EXPECT_TRUE(std::regex_search(runs[node].out, named)) << command << runs[node].out;
    }
  }
  const std::vector<CliRun> again = launch_on_every_node(cluster, example());
  EXPECT_EQ(again[0].exit_code, 0) << again[0].out;
  EXPECT_EQ(again[1].exit_code, 0) << again[1].out;
}

// The global options may follow launch and its own options, up to `--`; what follows `--` is
// the program's, option-like words too.
TEST(Launch, GlobalOptionsMayFollowItAndWhatFollowsTheSeparatorReachesTheProgramVerbatim) {
  TestCluster cluster(shape(1, 2));
  const std::string echo_then_run =
      "sh -c 'echo \"args: $*\"; exec " + example() + "' sh --daemon foo --timeout 1s";
  const CliRun run =
      cli("launch --daemon " + cluster.control(0).str() + " --attach-timeout 60 --secret-file " +
          cluster.secret_file() + " --timeout 300s -- " + echo_then_run);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    EXPECT_NE(run.out.find(prefix + "args: --daemon foo --timeout 1s\n"), std::string::npos)
        << run.out;
    EXPECT_NE(run.out.find(prefix + "rank " + std::to_string(rank) +
                           " of 2: all_reduce of 65536 floats ok"),
              std::string::npos)
        << run.out;
  }
}

}  // namespace
}  // namespace symmesh::testing
