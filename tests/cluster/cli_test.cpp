// The real symmesh CLI against real daemons: --json output, human output, exit codes, and
// the errors that tell the user what to do.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {
namespace {

TEST(Cli, JsonFiguresForBarrierAndCollective) {
  TestCluster cluster(shape(2, 2));
  CliRun barrier = cli(target(cluster) + " submit barrier --algo kary --k 3 --iters 100 --json");
  ASSERT_EQ(barrier.exit_code, 0) << barrier.out;
  auto json = nlohmann::json::parse(barrier.out);
  EXPECT_EQ(json["status"], "ok");
  EXPECT_GT(json["job_id"].get<int>(), 0);
  EXPECT_GT(json["p50_us"].get<double>(), 0);
  EXPECT_GE(json["p99_us"].get<double>(), json["p50_us"].get<double>());
  EXPECT_GT(json["median_s"].get<double>(), 0);

  CliRun collective = cli(target(cluster, 1) +
                          " submit collective --op allreduce --bytes 1MiB --dtype f16 --algo hier "
                          "--iters 3 --verify --json");
  ASSERT_EQ(collective.exit_code, 0) << collective.out;
  json = nlohmann::json::parse(collective.out);
  EXPECT_EQ(json["status"], "ok");
  EXPECT_EQ(json["verified"], true);
  EXPECT_GT(json["algbw_gbps"].get<double>(), 0);
  EXPECT_NEAR(json["busbw_gbps"].get<double>(), json["algbw_gbps"].get<double>() * 1.5, 1e-9);

  CliRun status = cli(target(cluster) + " status --json");
  ASSERT_EQ(status.exit_code, 0) << status.out;
  json = nlohmann::json::parse(status.out);
  EXPECT_EQ(json["state"], "ready");
  EXPECT_EQ(json["peers"][0]["transport"], "tcp");
}

TEST(Cli, HumanOutputIsACompactTable) {
  TestCluster cluster(shape(2, 1));
  CliRun status = cli(target(cluster) + " status");
  ASSERT_EQ(status.exit_code, 0) << status.out;
  EXPECT_NE(status.out.find("PEER"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("tcp"), std::string::npos) << status.out;
  CliRun job = cli(target(cluster) + " submit collective --op allgather --bytes 64KiB --verify");
  ASSERT_EQ(job.exit_code, 0) << job.out;
  EXPECT_NE(job.out.find("verified"), std::string::npos) << job.out;
}

TEST(Cli, ErrorsSayWhatWasWrongAndExitNonZero) {
  TestCluster cluster(shape(2, 1));
  CliRun bad_size = cli(target(cluster) + " submit collective --op alltoall --bytes 6 --json");
  EXPECT_NE(bad_size.exit_code, 0);
  auto json = nlohmann::json::parse(bad_size.out);
  EXPECT_EQ(json["status"], "error");
  EXPECT_NE(json["error"].get<std::string>().find("--bytes"), std::string::npos);

  CliRun unknown_flag = cli(target(cluster) + " submit barrier --bogus 1");
  EXPECT_NE(unknown_flag.exit_code, 0);
  EXPECT_NE(unknown_flag.out.find("bogus"), std::string::npos) << unknown_flag.out;

  CliRun bad_dtype =
      cli(target(cluster) + " submit collective --op allreduce --bytes 4 --dtype f64");
  EXPECT_NE(bad_dtype.exit_code, 0);
  EXPECT_NE(bad_dtype.out.find("f64"), std::string::npos) << bad_dtype.out;

  // Refused connections are retried for --connect-timeout, not for the hour of --timeout.
  CliRun unreachable = cli("--daemon 127.0.0.1:1 --secret-file " + cluster.secret_file() +
                           " --connect-timeout 1s status");
  EXPECT_NE(unreachable.exit_code, 0);
  EXPECT_NE(unreachable.out.find("127.0.0.1:1"), std::string::npos) << unreachable.out;
  EXPECT_NE(unreachable.out.find("SYMMESH_DAEMON"), std::string::npos) << unreachable.out;
  EXPECT_NE(unreachable.out.find("Connection refused"), std::string::npos) << unreachable.out;

  const std::string wrong_secret = cluster.dir() + "/wrong";
  FILE* file = fopen(wrong_secret.c_str(), "w");
  fputs("not-the-secret\n", file);
  fclose(file);
  CliRun auth =
      cli("--daemon " + cluster.control(0).str() + " --secret-file " + wrong_secret + " status");
  EXPECT_NE(auth.exit_code, 0);
  EXPECT_NE(auth.out.find("secret"), std::string::npos) << auth.out;
  EXPECT_NE(auth.out.find(wrong_secret), std::string::npos) << auth.out;

  // And the daemon still serves.
  EXPECT_EQ(cli(target(cluster) + " submit barrier --iters 5").exit_code, 0);
}

}  // namespace
}  // namespace symmesh::testing
