// The real symmesh CLI against real daemons: --json output, human output, exit codes, the
// errors that tell the user what to do, and the job list, one job, and cancelling.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

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

// Like git's and kubectl's, the global options may come before or after the command.
TEST(Cli, GlobalOptionsMayComeBeforeOrAfterTheCommand) {
  TestCluster cluster(shape(2, 1));
  const CliRun before = cli(target(cluster) + " --timeout 60s status --json");
  ASSERT_EQ(before.exit_code, 0) << before.out;
  EXPECT_EQ(nlohmann::json::parse(before.out)["state"], "ready") << before.out;

  const CliRun after = cli("status " + target(cluster, 1) + " --connect-timeout 5s --json");
  ASSERT_EQ(after.exit_code, 0) << after.out;
  EXPECT_EQ(nlohmann::json::parse(after.out)["node_rank"], 1) << after.out;

  const CliRun after_kind =
      cli("submit barrier --iters 10 " + target(cluster) + " --timeout 60s --json");
  ASSERT_EQ(after_kind.exit_code, 0) << after_kind.out;
  EXPECT_EQ(nlohmann::json::parse(after_kind.out)["status"], "ok") << after_kind.out;
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
  write_secret_file(wrong_secret, "not-the-secret-but-long-enough");
  CliRun auth =
      cli("--daemon " + cluster.control(0).str() + " --secret-file " + wrong_secret + " status");
  EXPECT_NE(auth.exit_code, 0);
  EXPECT_NE(auth.out.find("secret mismatch"), std::string::npos) << auth.out;
  EXPECT_NE(auth.out.find(wrong_secret), std::string::npos) << auth.out;
  chmod(wrong_secret.c_str(), 0644);  // readable by others: refused before any connection
  CliRun exposed =
      cli("--daemon " + cluster.control(0).str() + " --secret-file " + wrong_secret + " status");
  EXPECT_NE(exposed.exit_code, 0);
  EXPECT_NE(exposed.out.find("chmod 600"), std::string::npos) << exposed.out;

  // And the daemon still serves.
  EXPECT_EQ(cli(target(cluster) + " submit barrier --iters 5").exit_code, 0);
}

TEST(Cli, JobsJobAndCancelAQueuedAndARunningJob) {
  TestCluster cluster(shape(2, 1));
  CliRun long_run, queued_run;
  std::jthread long_job([&] {
    long_run = cli(target(cluster) +
                   " --timeout 300s submit matmul --op gemm-allreduce --m 1024 --n 1024 --k 1024 "
                   "--iters 1000 --json");
  });
  const uint64_t first = wait_for_job(cluster, "matmul", "running");
  ASSERT_NE(first, 0u) << cli(target(cluster) + " jobs").out;
  std::jthread queued_job(
      [&] { queued_run = cli(target(cluster, 1) + " submit barrier --iters 5 --json"); });
  ASSERT_EQ(wait_for_job(cluster, "barrier", "queued"), first + 1)
      << cli(target(cluster) + " jobs").out;
  EXPECT_EQ(find_job(cluster, "barrier", "queued", /*node=*/1), first + 1);  // via any daemon

  CliRun cancel_queued = cli(target(cluster) + " cancel " + std::to_string(first + 1) + " --json");
  EXPECT_EQ(cancel_queued.exit_code, 0) << cancel_queued.out;
  EXPECT_EQ(nlohmann::json::parse(cancel_queued.out)["state"], "cancelled");
  queued_job.join();
  EXPECT_EQ(queued_run.exit_code, 1) << queued_run.out;
  EXPECT_NE(queued_run.out.find("cancelled"), std::string::npos) << queued_run.out;

  CliRun cancel_running = cli(target(cluster) + " cancel " + std::to_string(first));
  EXPECT_EQ(cancel_running.exit_code, 0) << cancel_running.out;
  EXPECT_NE(cancel_running.out.find("cancelling"), std::string::npos) << cancel_running.out;
  long_job.join();
  EXPECT_EQ(long_run.exit_code, 1) << long_run.out;
  EXPECT_NE(long_run.out.find("cancelled"), std::string::npos) << long_run.out;

  CliRun job = cli(target(cluster) + " job " + std::to_string(first) + " --json");
  EXPECT_EQ(job.exit_code, 1) << job.out;  // the job did not end well
  const auto record = nlohmann::json::parse(job.out);
  EXPECT_EQ(record["state"], "cancelled");
  EXPECT_EQ(record["kind"], "matmul");
  EXPECT_EQ(record["result"]["status"], "error");

  CliRun unknown = cli(target(cluster) + " cancel 999");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("no job 999"), std::string::npos) << unknown.out;
  CliRun finished = cli(target(cluster) + " cancel " + std::to_string(first));
  EXPECT_EQ(finished.exit_code, 2) << finished.out;
  EXPECT_NE(finished.out.find("already finished"), std::string::npos) << finished.out;
  EXPECT_EQ(cli(target(cluster) + " job 999").exit_code, 2);

  // The cluster goes on, and the human list shows the states.
  EXPECT_EQ(cli(target(cluster) + " submit barrier --iters 5").exit_code, 0);
  CliRun jobs = cli(target(cluster) + " jobs");
  EXPECT_NE(jobs.out.find("cancelled"), std::string::npos) << jobs.out;
  EXPECT_NE(jobs.out.find("ok"), std::string::npos) << jobs.out;
}

}  // namespace
}  // namespace symmesh::testing
