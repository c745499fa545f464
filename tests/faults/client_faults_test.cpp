// Fault drills on the client's side: the real CLI killed mid-job, a client that walks away
// from a job it submitted through a node that forwards to the root, and a detached job that
// outlives its client. Each ends with the job cancelled (or finished) within its deadline and
// a next job that verifies.
#include <gtest/gtest.h>
#include <signal.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/errors.h"
#include "tests/cluster/test_cluster.h"
#include "tests/faults/drills.h"
#include "transport/auth.h"

namespace symmesh::testing {
namespace {

// Polls the root's jobs until one matches `wanted` or `within` passes; returns it (job_id 0
// when none did).
wire::JobRecord wait_for_job(TestCluster& cluster,
                             const std::function<bool(const wire::JobRecord&)>& wanted,
                             std::chrono::seconds within) {
  const Deadline deadline = deadline_after(within);
  while (Clock::now() < deadline) {
    const auto status = cluster.client(0)->status(deadline_after(std::chrono::seconds(10)));
    for (const auto& job : status.jobs()) {
      if (wanted(job)) return job;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // poll interval, bounded
  }
  return {};
}

bool running(const wire::JobRecord& job) {
  return wire::enum_text(job.state()) == "running";
}

TEST(ClientFaults, AKilledCliCancelsItsJobAndTheNextJobVerifiesWithin15Seconds) {
  TestCluster cluster(shape(2, 1));
  DaemonProcess client({bin_dir() + "/symmesh", "--daemon", cluster.control(0).str(),
                        "--secret-file", cluster.secret_file(), "submit", "collective", "--op",
                        "allreduce", "--bytes", "16MiB", "--iters", "100000"},
                       cluster.dir() + "/cli.log");
  const auto job = wait_for_job(cluster, running, std::chrono::seconds(30));
  ASSERT_NE(job.job_id(), 0u) << "the CLI's job never ran: " << client.log();
  const auto killed = Clock::now();
  client.stop(SIGKILL);
  const auto cancelled = wait_for_job(
      cluster,
      [&](const wire::JobRecord& j) {
        return j.job_id() == job.job_id() && wire::enum_text(j.state()) == "cancelled";
      },
      std::chrono::seconds(15));
  ASSERT_EQ(cancelled.job_id(), job.job_id()) << "the job of a killed client ran on";
  EXPECT_NE(cancelled.result().error().find("its client left"), std::string::npos)
      << cancelled.result().error();
  next_job_verifies(cluster);
  EXPECT_LT(Clock::now() - killed, std::chrono::seconds(15));
}

// The client is at node 1, which forwards the job to the root: its leaving travels there too.
TEST(ClientFaults, AClientLeavingThroughAForwardingNodeCancelsItsJob) {
  TestCluster cluster(shape(2, 2));
  const auto deadline = deadline_after(std::chrono::seconds(30));
  {
    auto channel = BlockingChannel::connect(cluster.control(1), deadline);
    authenticate_client(*channel, cluster.secret(), AuthIdentity{wire::ROLE_CONTROL, 0, 0, 0},
                        deadline);
    wire::ClientRequest request;
    *request.mutable_submit() = collective_job("allreduce", 4 << 20, "f32", "ring", 100000, false);
    channel->write(request, deadline);
    wire::ClientResponse queued;
    channel->read(queued, deadline);
    ASSERT_TRUE(queued.has_event()) << queued.DebugString();
    ASSERT_NE(wait_for_job(cluster, running, std::chrono::seconds(30)).job_id(), 0u);
  }  // the connection closes here, mid-job
  const auto cancelled = wait_for_job(
      cluster, [](const wire::JobRecord& j) { return wire::enum_text(j.state()) == "cancelled"; },
      std::chrono::seconds(15));
  EXPECT_NE(cancelled.result().error().find("its client left"), std::string::npos)
      << cancelled.DebugString() << "\nstatus:\n"
      << cluster.client(0)->status(deadline_after(std::chrono::seconds(10))).DebugString()
      << "\nnode 1:\n"
      << cluster.daemon(1).log() << "\nnode 0:\n"
      << cluster.daemon(0).log();
  next_job_verifies(cluster);
}

TEST(ClientFaults, ADetachedJobOutlivesItsClientAndWaitFollowsItToItsResult) {
  TestCluster cluster(shape(2, 1));
  const CliRun detached =
      cli(target(cluster) +
          " submit collective --op allreduce --bytes 4MiB --iters 200 --verify --detach --json");
  ASSERT_EQ(detached.exit_code, 0) << detached.out;
  const auto queued = nlohmann::json::parse(detached.out);
  EXPECT_EQ(queued["state"], "queued");
  const uint64_t id = queued["job_id"].get<uint64_t>();

  // Another client follows it (and may leave: waiting never owns the job).
  const CliRun waited = cli(target(cluster, 1) + " wait " + std::to_string(id) + " --json");
  ASSERT_EQ(waited.exit_code, 0) << waited.out;
  const auto result = nlohmann::json::parse(waited.out);
  EXPECT_EQ(result["job_id"], id);
  EXPECT_EQ(result["status"], "ok");
  EXPECT_EQ(result["verified"], true) << waited.out;
  // Once finished, wait answers at once with the same result.
  EXPECT_EQ(cli(target(cluster) + " wait " + std::to_string(id)).exit_code, 0);

  const CliRun unknown = cli(target(cluster) + " wait 999999");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("no job 999999"), std::string::npos) << unknown.out;
}

}  // namespace
}  // namespace symmesh::testing
