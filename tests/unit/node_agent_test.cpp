// The node agent on its own: a one-node Node, a fake flush and a reporter that collects what
// the agent would send up its link to the root. Phases run in order (QUIESCE flushes, RESET
// clears, RUN runs every local PE); a bad spec, a failing flush, an ABORT that overtakes its
// RUN and one that lands mid-job each end in a failed report naming why, and the next job runs.
#include "daemon/node_agent.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/errors.h"

namespace symmesh {
namespace {

constexpr auto kReportDeadline = std::chrono::seconds(30);

wire::JobSpec barrier_spec(uint32_t iters) {
  wire::JobSpec spec;
  spec.mutable_barrier()->set_algo(wire::BARRIER_ALGO_DISSEMINATION);
  spec.mutable_barrier()->set_iters(iters);
  return spec;
}

// Long enough that only an ABORT ends it: 100000 all-reduces of 8 MiB (minutes here).
wire::JobSpec endless_spec() {
  wire::JobSpec spec;
  auto* job = spec.mutable_collective();
  job->set_op(wire::COLLECTIVE_OP_ALLREDUCE);
  job->set_bytes(8 << 20);
  job->set_dtype(wire::DATA_TYPE_F32);
  job->set_algo(wire::COLLECTIVE_ALGO_RING);
  job->set_iters(100000);
  return spec;
}

wire::JobCommand command(uint64_t job, wire::JobPhase phase, wire::JobSpec spec = {}) {
  wire::JobCommand out;
  out.set_job_id(job);
  out.set_phase(phase);
  *out.mutable_spec() = std::move(spec);
  return out;
}

class AgentHarness {
 public:
  explicit AgentHarness(int ranks)
      : node_(config(ranks)),
        agent_(
            node_, metrics_, JobLimits{"/nonexistent-data-dir", uint64_t{1} << 30, CpuPlacement{}},
            progress_,
            [this](Deadline) {
              std::lock_guard lock(mutex_);
              ++flushes_;
              if (!flush_error_.empty()) throw PeerError(flush_error_);
            },
            [this](const wire::NodeJobReport& report) {
              std::lock_guard lock(mutex_);
              reports_.push_back(report);
              changed_.notify_all();
            }) {}

  NodeAgent& agent() { return agent_; }
  Metrics& metrics() { return metrics_; }
  progress::JobProgress& progress() { return progress_; }
  int flushes() {
    std::lock_guard lock(mutex_);
    return flushes_;
  }
  void fail_flushes_with(std::string why) {
    std::lock_guard lock(mutex_);
    flush_error_ = std::move(why);
  }

  // The report for (job, phase), waited for with a deadline.
  wire::NodeJobReport report(uint64_t job, wire::JobPhase phase) {
    std::unique_lock lock(mutex_);
    const wire::NodeJobReport* found = nullptr;
    const bool arrived = changed_.wait_for(lock, kReportDeadline, [&] {
      for (const auto& r : reports_) {
        if (r.job_id() == job && r.phase() == phase) found = &r;
      }
      return found != nullptr;
    });
    if (!arrived) throw TimeoutError("no report for job " + std::to_string(job));
    return *found;
  }

  // A whole job: QUIESCE, RESET and RUN, and the RUN's report.
  wire::NodeJobReport run(uint64_t job, const wire::JobSpec& spec) {
    agent_.handle(command(job, wire::QUIESCE));
    agent_.handle(command(job, wire::RESET));
    agent_.handle(command(job, wire::RUN, spec));
    EXPECT_TRUE(report(job, wire::QUIESCE).ok());
    EXPECT_TRUE(report(job, wire::RESET).ok());
    return report(job, wire::RUN);
  }

 private:
  static NodeConfig config(int ranks) {
    NodeConfig c;
    c.ranks_per_node = ranks;
    c.heap_size = size_t(ranks) * (64 << 20);
    c.wait_timeout = std::chrono::seconds(30);
    return c;
  }

  Node node_;
  Metrics metrics_;
  progress::JobProgress progress_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<wire::NodeJobReport> reports_;
  int flushes_ = 0;
  std::string flush_error_;
  NodeAgent agent_;  // last: its thread uses everything above
};

TEST(NodeAgent, RunsThePhasesInOrderAndReportsTheSlowestPePerIteration) {
  AgentHarness harness(2);
  const auto report = harness.run(1, barrier_spec(7));
  EXPECT_EQ(harness.flushes(), 1);
  EXPECT_TRUE(report.ok()) << report.error();
  EXPECT_TRUE(report.verified());
  EXPECT_EQ(report.node_rank(), 0u);
  ASSERT_EQ(report.iteration_s_size(), 7);
  for (double t : report.iteration_s()) EXPECT_GT(t, 0.0);
  EXPECT_EQ(harness.agent().jobs_run(), 1u);
  EXPECT_EQ(harness.agent().jobs_failed(), 0u);
  const std::string metrics = harness.metrics().render({});
  EXPECT_NE(metrics.find("symmesh_barrier_latency_seconds_count 7"), std::string::npos) << metrics;
}

TEST(NodeAgent, ABadSpecFailsItsRunNamingTheFieldAndTheNextJobRuns) {
  AgentHarness harness(2);
  const auto bad = harness.run(1, barrier_spec(0));
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("--iters"), std::string::npos) << bad.error();
  EXPECT_NE(harness.metrics().render({}).find("bad_request"), std::string::npos);
  const auto next = harness.run(2, barrier_spec(3));
  EXPECT_TRUE(next.ok()) << next.error();
}

TEST(NodeAgent, AFailingFlushFailsQuiesceWithItsReason) {
  AgentHarness harness(1);
  harness.fail_flushes_with("node 1 (127.0.0.1:9) is down: closed by the peer");
  harness.agent().handle(command(1, wire::QUIESCE));
  const auto report = harness.report(1, wire::QUIESCE);
  EXPECT_FALSE(report.ok());
  EXPECT_NE(report.error().find("node 1 (127.0.0.1:9) is down"), std::string::npos)
      << report.error();
}

TEST(NodeAgent, AnAbortThatOvertakesItsRunEndsItAtOnce) {
  AgentHarness harness(2);
  auto abort = command(5, wire::ABORT);
  abort.set_reason("cancelled by the client");
  harness.agent().handle(abort);
  harness.agent().handle(command(5, wire::RUN, endless_spec()));
  const auto report = harness.report(5, wire::RUN);
  EXPECT_FALSE(report.ok());
  EXPECT_NE(report.error().find("cancelled by the client"), std::string::npos) << report.error();
  EXPECT_TRUE(harness.run(6, barrier_spec(2)).ok());
}

TEST(NodeAgent, AnAbortMidJobWakesEveryPeAndTheNextJobRuns) {
  AgentHarness harness(2);
  harness.agent().handle(command(7, wire::RUN, endless_spec()));
  // Wait (bounded) until the job is under way: PE 0 counts its iterations.
  const auto started_by = Clock::now() + kReportDeadline;
  while (harness.progress().done.load() == 0 && Clock::now() < started_by) {
    std::this_thread::yield();
  }
  ASSERT_GT(harness.progress().done.load(), 0u) << "the job never started";
  auto abort = command(7, wire::ABORT);
  abort.set_reason("node 1 is down");
  harness.agent().handle(abort);
  const auto report = harness.report(7, wire::RUN);
  EXPECT_FALSE(report.ok());
  EXPECT_NE(report.error().find("node 1 is down"), std::string::npos) << report.error();
  EXPECT_EQ(harness.agent().jobs_failed(), 1u);
  EXPECT_TRUE(harness.run(8, barrier_spec(2)).ok());
}

}  // namespace
}  // namespace symmesh
