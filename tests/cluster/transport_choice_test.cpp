// Which transport each peer uses, and why, as `status` shows it; and --transport verbs on a
// host without an RDMA device refused at startup with what to do. (With a device, the
// soft-RoCE suite checks the verbs side: tests/softroce/verbs_cluster_test.cpp.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cluster/test_cluster.h"
#include "transport/rdma.h"

namespace symmesh::testing {
namespace {

nlohmann::json status_json(TestCluster& cluster, int node) {
  CliRun status = cli(target(cluster, node) + " status --json");
  EXPECT_EQ(status.exit_code, 0) << status.out;
  return nlohmann::json::parse(status.out);
}

// Why a node has no verbs on this host, which has no RDMA device (or a build without verbs).
const char* why_no_verbs() {
  return verbs_built() ? "no RDMA device" : "this build has none";
}

TEST(TransportChoice, ForcedTcpSaysSo) {
  ClusterOptions options = shape(2, 1);
  options.extra_args = {"--transport", "tcp"};
  TestCluster cluster(options);
  auto json = status_json(cluster, 1);
  EXPECT_EQ(json["peers"][0]["transport"], "tcp");
  EXPECT_EQ(json["peers"][0]["reason"], "tcp: forced by --transport");
}

TEST(TransportChoice, AutoWithoutADeviceFallsBackToTcpAndSaysWhy) {
  if (!verbs_devices().empty()) GTEST_SKIP() << "this host has an RDMA device";
  TestCluster cluster(shape(2, 1));
  auto json = status_json(cluster, 0);
  EXPECT_EQ(json["peers"][0]["transport"], "tcp");
  const std::string reason = json["peers"][0]["reason"];
  EXPECT_EQ(reason.rfind(std::string("tcp: verbs: ") + why_no_verbs(), 0), 0u) << reason;
}

TEST(TransportChoice, VerbsWithoutADeviceIsRefusedAtStartup) {
  if (!verbs_devices().empty()) GTEST_SKIP() << "this host has an RDMA device";
  ClusterOptions options = shape(2, 1);
  options.wait_ready = false;
  options.extra_args = {"--transport", "verbs", "--bootstrap-timeout", "3s"};
  TestCluster cluster(options);
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (cluster.daemon(0).running() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling an exit, bounded
  }
  const std::string log = cluster.daemon(0).log();
  ASSERT_FALSE(cluster.daemon(0).running()) << "still running after 30 s; its log:\n" << log;
  EXPECT_NE(log.find(std::string("--transport verbs: ") + why_no_verbs()), std::string::npos)
      << log;
  EXPECT_NE(log.find("use --transport auto or tcp"), std::string::npos) << log;
}

}  // namespace
}  // namespace symmesh::testing
