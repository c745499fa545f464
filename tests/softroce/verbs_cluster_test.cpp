// Two real symmeshd daemons with --transport verbs on the soft-RoCE device: the status shows
// verbs for the peer, and a barrier of each algorithm and every collective run through the
// CLI with --verify. Sizes are small: soft-RoCE under emulation moves tens of MB/s.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {
namespace {

ClusterOptions verbs_daemons() {
  ClusterOptions options = shape(2, 2);
  options.extra_args = {"--transport", "verbs"};
  return options;
}

TEST(VerbsDaemons, StatusShowsVerbsAndEveryJobVerifies) {
  TestCluster cluster(verbs_daemons());
  CliRun status = cli(target(cluster) + " status --json");
  ASSERT_EQ(status.exit_code, 0) << status.out;
  auto json = nlohmann::json::parse(status.out);
  ASSERT_EQ(json["peers"].size(), 1u) << status.out;
  EXPECT_EQ(json["peers"][0]["transport"], "verbs") << status.out;
  EXPECT_EQ(json["peers"][0]["up"], true) << status.out;
  EXPECT_NE(json["peers"][0]["reason"].get<std::string>().find("forced by --transport"),
            std::string::npos)
      << status.out;

  for (const char* algo : {"dissemination", "kary", "pull"}) {
    CliRun barrier =
        cli(target(cluster, 1) + " submit barrier --algo " + algo + " --iters 20 --json");
    ASSERT_EQ(barrier.exit_code, 0) << algo << ": " << barrier.out;
    EXPECT_EQ(nlohmann::json::parse(barrier.out)["status"], "ok") << barrier.out;
  }
  struct Case {
    const char* op;
    const char* algo;
    const char* bytes;
    const char* dtype;
  };
  for (const Case& c :
       {Case{"allreduce", "ring", "256KiB", "f32"}, Case{"allreduce", "hier", "1MiB", "bf16"},
        Case{"reduce-scatter", "ring", "256KiB", "f16"},
        Case{"reduce-scatter", "hier", "256KiB", "f32"}, Case{"allgather", "ring", "256KiB", "f32"},
        Case{"allgather", "hier", "64KiB", "bf16"}, Case{"alltoall", "direct", "256KiB", "f32"}}) {
    CliRun run = cli(target(cluster) + " submit collective --op " + c.op + " --algo " + c.algo +
                     " --bytes " + c.bytes + " --dtype " + c.dtype + " --iters 2 --verify --json");
    ASSERT_EQ(run.exit_code, 0) << c.op << " " << c.algo << ": " << run.out;
    json = nlohmann::json::parse(run.out);
    EXPECT_EQ(json["status"], "ok") << run.out;
    EXPECT_EQ(json["verified"], true) << c.op << " " << c.algo << ": " << run.out;
  }
  CliRun combine = cli(target(cluster) +
                       " submit combine --tokens 24 --hidden 32 --topk 3 --experts 8 --iters 2 "
                       "--chunk-tokens 2 --rdma-ring-tokens 4 --verify --json");
  ASSERT_EQ(combine.exit_code, 0) << combine.out;
  EXPECT_EQ(nlohmann::json::parse(combine.out)["verified"], true) << combine.out;
}

TEST(VerbsDaemons, AutoPicksVerbsWhenBothEndsHaveADevice) {
  TestCluster cluster(shape(2, 1));  // --transport auto is the default
  CliRun status = cli(target(cluster, 1) + " status --json");
  ASSERT_EQ(status.exit_code, 0) << status.out;
  auto json = nlohmann::json::parse(status.out);
  EXPECT_EQ(json["peers"][0]["transport"], "verbs") << status.out;
  EXPECT_NE(json["peers"][0]["reason"].get<std::string>().find("both ends"), std::string::npos)
      << status.out;
}

TEST(VerbsDaemons, AutoFallsBackToTcpForAPeerThatForcesTcp) {
  ClusterOptions options = shape(2, 1);
  options.node_args[1] = {"--transport", "tcp"};
  TestCluster cluster(options);
  CliRun status = cli(target(cluster) + " status --json");
  ASSERT_EQ(status.exit_code, 0) << status.out;
  auto json = nlohmann::json::parse(status.out);
  EXPECT_EQ(json["peers"][0]["transport"], "tcp") << status.out;
  EXPECT_NE(json["peers"][0]["reason"].get<std::string>().find("node 1 has none"),
            std::string::npos)
      << status.out;
  CliRun run = cli(target(cluster) +
                   " submit collective --op allreduce --bytes 64KiB --iters 1 --verify --json");
  EXPECT_EQ(run.exit_code, 0) << run.out;
}

TEST(VerbsDaemons, AWrongDeviceOrGidIndexIsRefusedNamingWhatExists) {
  for (const auto& flags : {std::vector<std::string>{"--rdma-device", "no_such_rdma0"},
                            std::vector<std::string>{"--rdma-gid-index", "200"}}) {
    ClusterOptions options = shape(2, 1);
    options.wait_ready = false;
    options.extra_args = {"--bootstrap-timeout", "3s"};
    options.node_args[1] = flags;
    TestCluster cluster(options);
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (cluster.daemon(1).running() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling an exit, bounded
    }
    ASSERT_FALSE(cluster.daemon(1).running()) << flags[0];
    const std::string log = cluster.daemon(1).log();
    if (flags[0] == "--rdma-device") {
      EXPECT_NE(log.find("--rdma-device no_such_rdma0: no such device (devices: "),
                std::string::npos)
          << log;
    } else {
      EXPECT_NE(log.find("--rdma-gid-index 200: no GID there"), std::string::npos) << log;
    }
  }
}

}  // namespace
}  // namespace symmesh::testing
