#include "daemon/node_agent.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "daemon/jobs/data_paths.h"
#include "daemon/jobs/host_memory.h"
#include "daemon/jobs/job.h"
#include "runtime/pe.h"
#include "wire/job_trace.h"

namespace symmesh {

NodeAgent::NodeAgent(Node& node, Metrics& metrics, JobLimits limits,
                     progress::JobProgress& progress, Flush flush, Reporter reporter)
    : node_(node),
      metrics_(metrics),
      limits_(std::move(limits)),
      flush_(std::move(flush)),
      reporter_(std::move(reporter)),
      progress_(progress),
      thread_([this] { loop(); }) {}

NodeAgent::~NodeAgent() {
  stop();
}

void NodeAgent::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  node_.doorbell().abort("the daemon is shutting down");
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NodeAgent::handle(const wire::JobCommand& command) {
  std::lock_guard lock(mutex_);
  if (command.phase() == wire::ABORT) {
    // Remembered too: an ABORT may overtake the RUN it ends (still queued here).
    aborted_job_ = command.job_id();
    aborted_reason_ = command.reason();
    if (running_job_.load() == command.job_id()) node_.doorbell().abort(command.reason());
    return;
  }
  queue_.push_back(command);
  wake_.notify_all();
}

void NodeAgent::loop() {
  for (;;) {
    wire::JobCommand command;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      command = std::move(queue_.front());
      queue_.pop_front();
    }
    reporter_(execute(command));
  }
}

wire::NodeJobReport NodeAgent::execute(const wire::JobCommand& command) {
  wire::NodeJobReport report;
  report.set_job_id(command.job_id());
  report.set_phase(command.phase());
  report.set_node_rank(node_.rank());
  report.set_ok(true);
  try {
    switch (command.phase()) {
      case wire::QUIESCE:
        // No PE runs between jobs: the previous job's abort must not cut this flush short.
        node_.doorbell().clear_abort();
        flush_(deadline_after(node_.wait_timeout()));
        break;
      case wire::RESET:
        node_.reset_between_jobs();
        progress_.done.store(0);  // before RUN, so nobody reads the last job's count
        progress_.total.store(0);
        break;
      case wire::RUN:
        run_job(command.spec(), report);
        break;
      default:
        break;
    }
  } catch (const std::exception& e) {
    report.set_ok(false);
    report.set_error(e.what());
  }
  return report;
}

void NodeAgent::run_job(const wire::JobSpec& requested, wire::NodeJobReport& report) {
  wire::JobSpec spec;
  try {
    spec = confine_job_paths(requested, limits_.data_dir);
    check_job_spec(spec, ClusterShape{node_.nodes(), node_.ranks_per_node()});
    check_job_memory(spec, node_.nodes(), node_.ranks_per_node(), limits_.job_memory);
    if (spec.has_session()) {  // a session's calls are sized by its processes, as they come
      spec.mutable_session()->set_call_memory_bytes(limits_.job_memory /
                                                    uint64_t(node_.ranks_per_node()));
    }
  } catch (const std::exception&) {
    metrics_.error("bad_request");
    throw;
  }
  const JobKind& kind = job_kind_of(spec);
  const auto started = Clock::now();
  {
    std::lock_guard lock(mutex_);
    if (aborted_job_ == report.job_id()) throw AbortedError(aborted_reason_);
    running_job_.store(report.job_id());
  }
  const int ranks = node_.ranks_per_node();
  std::vector<PeJobOutcome> outcomes(ranks);
  std::mutex error_mutex;
  std::string first_error;
  bool first_was_abort = true;
  std::optional<trace::Recorder> recorder;
  if (spec.trace()) recorder.emplace();
  std::vector<std::thread> threads;
  for (int local = 0; local < ranks; ++local) {
    threads.emplace_back([&, local] {
      const int global = node_.rank() * ranks + local;
      const trace::ThreadBinding traced({recorder ? &*recorder : nullptr, global}, "main");
      const progress::Binding counted(global == 0 ? &progress_ : nullptr);
      const std::vector<int> cpus = limits_.cpus.cpus_of(local);
      const ScopedCpuBinding bound(cpus);
      if (!cpus.empty() && !bound.bound()) {
        spdlog::warn("node {}: PE {} runs unbound: CPUs {} are no longer the daemon's to use",
                     node_.rank(), global, cpu_list_text(cpus));
      }
      try {
        Pe pe(node_, local);
        outcomes[local] = kind.run_on_pe(pe, spec);
        pe.quiet();
        outcomes[local].wait_by_peer_s = pe.peer_waits().seconds();
        outcomes[local].blocked_s = pe.peer_waits().blocked_seconds();
        outcomes[local].calls = pe.peer_waits().calls();
        if (global == 0) {
          std::lock_guard lock(error_mutex);
          const wire::KindFigures& figures = outcomes[local].figures;
          if (figures.kind_case() != wire::KindFigures::KIND_NOT_SET) {
            *report.mutable_figures() = figures;
          }
        }
      } catch (const std::exception& e) {
        const bool aborted = dynamic_cast<const AbortedError*>(&e) != nullptr;
        std::lock_guard lock(error_mutex);
        // Keep the cause rather than the aborts it triggered.
        if (first_error.empty() || (first_was_abort && !aborted)) {
          first_error = dynamic_cast<const std::bad_alloc*>(&e)
                            ? pe_error(global,
                                       "out of host memory (the estimate let it in: "
                                       "lower --job-memory, or shrink the job)")
                            : pe_error(global, e.what());
          first_was_abort = aborted;
        }
        if (!aborted) node_.doorbell().abort("PE " + std::to_string(global) + " failed");
      }
    });
  }
  for (auto& thread : threads) thread.join();
  running_job_.store(0);
  if (recorder) {
    *report.mutable_trace() =
        job_trace_to_wire(*recorder, node_.rank(), kTraceSpansPerJob / size_t(node_.nodes()));
  }
  ++jobs_run_;
  metrics_.job_ran(wire::enum_text(kind.wire_kind(spec)), first_error.empty(),
                   std::chrono::duration<double>(Clock::now() - started).count());
  if (!first_error.empty()) metrics_.error("job");
  if (!first_error.empty()) {
    ++jobs_failed_;
    report.set_ok(false);
    report.set_error(first_error);
    report.set_verified(false);
    spdlog::warn("node {}: job {} failed: {}", node_.rank(), report.job_id(), first_error);
    return;
  }
  JobTally tally;
  for (int local = 0; local < ranks; ++local) {
    const PeJobOutcome& outcome = outcomes[local];
    tally.add(outcome.iteration_s, outcome.verified, outcome.max_abs_err);
    tally.add_waits(outcome.wait_by_peer_s);
    report.add_blocked_s(outcome.blocked_s);
    metrics_.peer_waits(node_.rank() * ranks + local, outcome.wait_by_peer_s);
    metrics_.call_waits(node_.rank() * ranks + local, outcome.calls);
  }
  *report.mutable_iteration_s() = {tally.iteration_s.begin(), tally.iteration_s.end()};
  *report.mutable_wait_by_peer_s() = {tally.wait_by_peer_s.begin(), tally.wait_by_peer_s.end()};
  kind.record_metrics(metrics_, tally.iteration_s);
  report.set_verified(tally.verified);
  report.set_max_abs_err(tally.max_abs_err);
}

}  // namespace symmesh
