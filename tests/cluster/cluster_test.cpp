// Real daemons on loopback (2 and 3 nodes, 1 to 3 ranks each): every barrier algorithm and
// every collective with every algorithm, verified, submitted through the client library to
// the root and to another node.
#include <gtest/gtest.h>

#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {
namespace {

struct Size {
  int nodes;
  int ranks;
};

class Daemons : public ::testing::TestWithParam<Size> {};

TEST_P(Daemons, EveryBarrierAndEveryCollectiveVerified) {
  const Size size = GetParam();
  TestCluster cluster(shape(size.nodes, size.ranks));
  for (const char* algo : {"dissemination", "kary", "pull"}) {
    const auto result = cluster.run(barrier_job(algo, 50));
    ASSERT_TRUE(result.ok()) << result.error();
    EXPECT_EQ(result.iters(), 50u);
    EXPECT_GT(result.p50_us(), 0);
    EXPECT_GE(result.p99_us(), result.p50_us());
  }
  const int pes = size.nodes * size.ranks;
  for (const char* op : {"allreduce", "reduce-scatter", "allgather"}) {
    for (const char* algo : {"ring", "hier"}) {
      for (const char* dtype : {"f32", "bf16"}) {
        // An odd size (not a multiple of the PE count), submitted via the last node.
        const uint64_t bytes = (dtype[0] == 'f' ? 4 : 2) * uint64_t(40'009);
        const auto result = cluster.run(collective_job(op, bytes, dtype, algo), size.nodes - 1);
        ASSERT_TRUE(result.ok()) << op << " " << algo << " " << dtype << ": " << result.error();
        EXPECT_TRUE(result.verified());
        EXPECT_EQ(result.max_abs_err(), 0.0);
        EXPECT_EQ(result.algo(), algo);
        EXPECT_GT(result.figures().collective().algbw_gbps(), 0);
        EXPECT_EQ(result.pes(), uint32_t(pes));
      }
    }
  }
  const auto alltoall = cluster.run(collective_job("alltoall", 4 * 1000 * pes, "f16", "auto"));
  ASSERT_TRUE(alltoall.ok()) << alltoall.error();
  EXPECT_TRUE(alltoall.verified());
  EXPECT_EQ(alltoall.algo(), "direct");
  const auto status = cluster.client(0)->status(deadline_after(std::chrono::seconds(10)));
  EXPECT_EQ(wire::enum_text(status.state()), "ready");
  EXPECT_EQ(status.peer_size(), size.nodes - 1);
  for (const auto& peer : status.peer()) {
    EXPECT_EQ(peer.transport(), "tcp");
    EXPECT_TRUE(peer.up());
  }
  EXPECT_GE(status.jobs_run(), 17u);
  EXPECT_EQ(status.jobs_failed(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Daemons,
                         ::testing::Values(Size{2, 1}, Size{2, 3}, Size{3, 1}, Size{3, 2}),
                         [](const auto& info) {
                           return std::to_string(info.param.nodes) + "x" +
                                  std::to_string(info.param.ranks);
                         });

TEST(Daemons, ABarrierJobWithoutAnAlgorithmRunsTheConfiguredOne) {
  ClusterOptions options = shape(2, 1);
  options.extra_args = {"--barrier-algo", "kary", "--barrier-k", "3"};
  TestCluster cluster(options);
  wire::JobSpec spec;
  spec.mutable_barrier()->set_iters(20);
  const auto result = cluster.run(spec, 1);
  ASSERT_TRUE(result.ok()) << result.error();
  EXPECT_EQ(result.algo(), "kary");
}

TEST(Daemons, SigtermStopsEveryDaemonCleanly) {
  TestCluster cluster(shape(2, 1));
  ASSERT_TRUE(cluster.run(barrier_job("pull", 10)).ok());
  EXPECT_EQ(cluster.daemon(1).stop(SIGTERM), 0) << cluster.daemon(1).log();
  EXPECT_EQ(cluster.daemon(0).stop(SIGTERM), 0) << cluster.daemon(0).log();
}

}  // namespace
}  // namespace symmesh::testing
