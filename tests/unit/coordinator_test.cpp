// The root's coordinator over a fake cluster: its commands go to scripted nodes that answer
// (or stay silent) on their own thread, as links would. Jobs run in the phases QUIESCE, RESET,
// RUN on every node; the slowest node per iteration makes the figures; a failed or down node
// fails the job naming it and the next job runs; a queued job can be cancelled.
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <future>
#include <thread>

#include "daemon/coordinator.h"

namespace symmesh {
namespace {

using Script = std::function<std::optional<wire::NodeJobReport>(int node, const wire::JobCommand&)>;

// Answers every command as a node that ran it: ok, with `times` as its RUN's iterations.
std::optional<wire::NodeJobReport> ok_report(int node, const wire::JobCommand& command,
                                             std::vector<double> times = {}) {
  wire::NodeJobReport report;
  report.set_job_id(command.job_id());
  report.set_phase(command.phase());
  report.set_node_rank(node);
  report.set_ok(true);
  report.set_verified(true);
  if (command.phase() == wire::RUN) {
    for (double t : times) report.add_iteration_s(t);
  }
  return report;
}

class FakeCluster {
 public:
  FakeCluster(int nodes, Script script)
      : script_(std::move(script)),
        coordinator_(nodes, 1, std::chrono::milliseconds(2000),
                     [this](int node, const wire::ControlMessage& message) {
                       std::lock_guard lock(mutex_);
                       // Seen when sent, so a test reads every command the job ever sent.
                       seen_[node].push_back(message.command().phase());
                       inbox_.emplace_back(node, message.command());
                       changed_.notify_all();
                     }),
        responder_([this] { respond(); }) {}
  ~FakeCluster() {
    coordinator_.stop("the test ends");
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      changed_.notify_all();
    }
    responder_.join();
  }
  Coordinator& coordinator() { return coordinator_; }
  std::vector<wire::JobPhase> phases_seen(int node) {
    std::lock_guard lock(mutex_);
    return seen_[node];
  }

  // Submits and waits (bounded) for the job's result.
  wire::JobResult run(const wire::JobSpec& spec) {
    auto result = std::make_shared<std::promise<wire::JobResult>>();
    auto done = result->get_future();
    coordinator_.submit(spec, [result](const wire::ClientResponse& response) {
      if (response.has_result()) result->set_value(response.result());
    });
    EXPECT_EQ(done.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    return done.get();
  }

 private:
  void respond() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stopping_ || !inbox_.empty(); });
      if (stopping_) return;
      auto [node, command] = inbox_.front();
      inbox_.pop_front();
      lock.unlock();
      if (command.phase() != wire::ABORT) {
        if (auto report = script_(node, command)) coordinator_.on_report(*report);
      }
      lock.lock();
    }
  }

  Script script_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<int, wire::JobCommand>> inbox_;
  std::map<int, std::vector<wire::JobPhase>> seen_;
  bool stopping_ = false;
  Coordinator coordinator_;
  std::thread responder_;
};

wire::JobSpec barrier_job(uint32_t iters = 2) {
  wire::JobSpec spec;
  spec.mutable_barrier()->set_iters(iters);
  return spec;
}

TEST(Coordinator, AJobRunsItsPhasesOnEveryNodeAndTheSlowestNodeMakesEachIteration) {
  FakeCluster cluster(2, [](int node, const wire::JobCommand& command) {
    return ok_report(node, command, node == 0 ? std::vector{1.0, 3.0} : std::vector{2.0, 1.0});
  });
  const wire::JobResult result = cluster.run(barrier_job());
  ASSERT_TRUE(result.ok()) << result.error();
  EXPECT_EQ(wire::enum_text(result.kind()), "barrier");
  EXPECT_EQ(result.iters(), 2u);
  EXPECT_DOUBLE_EQ(result.median_s(), 2.0);  // iterations: max(1, 2), max(3, 1)
  EXPECT_DOUBLE_EQ(result.p99_us(), 3e6);
  for (int node : {0, 1}) {
    EXPECT_EQ(cluster.phases_seen(node),
              (std::vector<wire::JobPhase>{wire::QUIESCE, wire::RESET, wire::RUN}));
  }
  EXPECT_EQ(cluster.coordinator().jobs_run(), 1u);
}

TEST(Coordinator, ANodeThatFailsFailsTheJobNamingItAndTheNextJobRuns) {
  std::atomic<int> runs{0};
  FakeCluster cluster(3, [&](int node, const wire::JobCommand& command) {
    auto report = ok_report(node, command, {1.0});
    if (node == 2 && command.phase() == wire::RUN && runs.fetch_add(1) == 0) {
      report->set_ok(false);
      report->set_error("PE 2: the disk is on fire");
    }
    return report;
  });
  const wire::JobResult failed = cluster.run(barrier_job(1));
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.error().find("the disk is on fire"), std::string::npos) << failed.error();
  EXPECT_NE(failed.error().find("node 2"), std::string::npos) << failed.error();
  EXPECT_EQ(cluster.phases_seen(0).back(), wire::ABORT) << "the others are told to stop";
  const wire::JobResult next = cluster.run(barrier_job(1));
  EXPECT_TRUE(next.ok()) << next.error();
}

TEST(Coordinator, ADownNodeFailsJobsAtOnceNamingItUntilItIsUp) {
  FakeCluster cluster(
      2, [](int node, const wire::JobCommand& command) { return ok_report(node, command, {1.0}); });
  cluster.coordinator().on_node_down(1, "no heartbeat for 3s");
  const wire::JobResult refused = cluster.run(barrier_job());
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("node 1"), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find("no heartbeat"), std::string::npos) << refused.error();
  EXPECT_TRUE(cluster.phases_seen(1).empty()) << "nothing is sent for a job that cannot run";
  cluster.coordinator().on_node_up(1);
  EXPECT_TRUE(cluster.run(barrier_job()).ok());
}

TEST(Coordinator, ASilentNodeFailsThePhaseAtItsDeadlineNamingIt) {
  FakeCluster cluster(
      2, [](int node, const wire::JobCommand& command) -> std::optional<wire::NodeJobReport> {
        if (node == 1 && command.phase() == wire::QUIESCE) return std::nullopt;  // frozen
        return ok_report(node, command, {1.0});
      });
  const auto started = std::chrono::steady_clock::now();
  const wire::JobResult result = cluster.run(barrier_job());
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.error().find("node(s) 1 did not report QUIESCE"), std::string::npos)
      << result.error();
  // The wait timeout (2 s) plus the report grace (5 s), not forever.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
}

TEST(Coordinator, AQueuedJobCanBeCancelledAndItsClientIsTold) {
  std::promise<void> running, release;
  std::shared_future<void> released = release.get_future().share();
  FakeCluster cluster(1, [&](int node, const wire::JobCommand& command) {
    if (command.phase() == wire::RUN && command.job_id() == 1) {
      running.set_value();
      released.wait();  // the first job holds the cluster while the second waits in the queue
    }
    return ok_report(node, command, {1.0});
  });
  auto first = std::async(std::launch::async, [&] { return cluster.run(barrier_job()); });
  ASSERT_EQ(running.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  std::promise<wire::JobResult> second_result;
  const uint64_t second =
      cluster.coordinator().submit(barrier_job(), [&](const wire::ClientResponse& response) {
        if (response.has_result()) second_result.set_value(response.result());
      });
  EXPECT_EQ(second, 2u);
  const wire::JobRecord cancelled = cluster.coordinator().cancel(second, "the test said so");
  EXPECT_EQ(wire::enum_text(cancelled.state()), "cancelled");
  auto told = second_result.get_future();
  ASSERT_EQ(told.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const wire::JobResult second_outcome = told.get();
  EXPECT_FALSE(second_outcome.ok());
  EXPECT_NE(second_outcome.error().find("the test said so"), std::string::npos)
      << second_outcome.error();
  release.set_value();
  EXPECT_TRUE(first.get().ok());
}

}  // namespace
}  // namespace symmesh
