#include "daemon/coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "common/errors.h"
#include "common/thread_name.h"
#include "daemon/jobs/job.h"
#include "transport/wait.h"

namespace symmesh {
namespace {

// A client's sink may fail (its node's link broke, say): that is the client's loss, never
// the coordinator's, so every sink it keeps is called through this.
Coordinator::Sink guarded(Coordinator::Sink sink) {
  return [sink = std::move(sink)](const wire::ClientResponse& response) {
    try {
      sink(response);
    } catch (const std::exception& e) {
      spdlog::info("a job's answer could not be delivered: {}", e.what());
    }
  };
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Coordinator::Coordinator(int nodes, int ranks_per_node, std::chrono::milliseconds wait_timeout,
                         Sender sender, ProgressReader progress)
    : nodes_(nodes),
      ranks_per_node_(ranks_per_node),
      wait_timeout_(wait_timeout),
      sender_(std::move(sender)),
      progress_(std::move(progress)) {
  thread_ = std::thread([this] {
    set_thread_name("coordinator");
    loop();
  });
}

Coordinator::~Coordinator() {
  stop("the root is shutting down");
}

void Coordinator::stop(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_.empty()) stopping_ = why;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Whatever is still queued fails with the reason, and so does every wait.
  std::deque<Pending> left;
  std::multimap<uint64_t, Sink> watchers;
  {
    std::lock_guard lock(mutex_);
    left.swap(queue_);
    watchers.swap(watchers_);
  }
  wire::ClientResponse response;
  response.mutable_result()->set_ok(false);
  response.mutable_result()->set_error(why);
  for (auto& pending : left) pending.sink(response);
  for (auto& [job_id, watcher] : watchers) watcher(response);
}

uint64_t Coordinator::submit(const wire::JobSpec& spec, Sink client) {
  Sink sink = guarded(std::move(client));
  wire::ClientResponse queued;
  {
    std::lock_guard lock(mutex_);
    if (!stopping_.empty()) throw PeerError(stopping_);
    if (queue_.size() >= kMaxQueued) {
      throw PeerError("the root has " + std::to_string(kMaxQueued) +
                      " jobs queued already: wait for some to run, or cancel some");
    }
    wire::JobRecord record;
    record.set_job_id(next_job_id_++);
    record.set_kind(job_kind_of(spec).wire_kind(spec));
    record.set_state(wire::JOB_STATE_QUEUED);
    record.set_submitted_unix_s(unix_seconds());
    record.set_traced(spec.trace());
    queued.mutable_event()->set_job_id(record.job_id());
    queued.mutable_event()->set_state(wire::JOB_STATE_QUEUED);
    // Under the lock, so "queued" comes before anything the job's run sends (sinks never
    // block and never call back in here).
    sink(queued);
    queue_.push_back(Pending{spec, std::move(sink), std::move(record)});
    changed_.notify_all();
  }
  return queued.event().job_id();
}

void Coordinator::watch(uint64_t job_id, Sink client) {
  Sink sink = guarded(std::move(client));
  std::unique_lock lock(mutex_);
  if (!stopping_.empty()) throw PeerError(stopping_);
  for (const auto& done : finished_) {
    if (done.job_id() != job_id) continue;
    wire::ClientResponse response;
    *response.mutable_result() = done.result();
    lock.unlock();
    return sink(response);
  }
  const bool queued = std::any_of(queue_.begin(), queue_.end(),
                                  [&](const Pending& p) { return p.record.job_id() == job_id; });
  if (!queued && !(running_ && running_->job_id() == job_id)) {
    throw InvalidArgument("no job " + std::to_string(job_id) +
                          " among the root's queued, running and last " + std::to_string(kHistory) +
                          " jobs (symmesh jobs lists them)");
  }
  if (watchers_.count(job_id) >= kMaxWatchers) {
    throw PeerError("job " + std::to_string(job_id) + " has " + std::to_string(kMaxWatchers) +
                    " clients waiting for it already");
  }
  watchers_.emplace(job_id, std::move(sink));
}

wire::JobRecord Coordinator::cancel(uint64_t job_id, const std::string& why) {
  const std::string reason = "job " + std::to_string(job_id) + " cancelled (" + why + ")";
  Pending cancelled;
  {
    std::lock_guard lock(mutex_);
    if (running_ && running_->job_id() == job_id) {
      cancel_reason_ = reason;
      running_->set_state(wire::JOB_STATE_CANCELLING);
      changed_.notify_all();  // the phase in flight aborts on every node
      return *running_;
    }
    auto it = std::find_if(queue_.begin(), queue_.end(),
                           [&](const Pending& p) { return p.record.job_id() == job_id; });
    if (it == queue_.end()) {
      for (const auto& done : finished_) {
        if (done.job_id() == job_id) {
          throw InvalidArgument("job " + std::to_string(job_id) + " already finished (" +
                                wire::enum_text(done.state()) + ")");
        }
      }
      throw InvalidArgument("no job " + std::to_string(job_id) +
                            " is queued or running (see symmesh jobs)");
    }
    cancelled = std::move(*it);
    queue_.erase(it);
    cancelled.record.set_state(wire::JOB_STATE_CANCELLED);
    cancelled.record.set_finished_unix_s(unix_seconds());
    cancelled.record.mutable_result()->set_job_id(job_id);
    cancelled.record.mutable_result()->set_ok(false);
    cancelled.record.mutable_result()->set_error(reason);
    finished_.push_front(cancelled.record);
    if (finished_.size() > kHistory) finished_.pop_back();
  }
  wire::ClientResponse response;
  *response.mutable_result() = cancelled.record.result();
  cancelled.sink(response);
  for (auto& watcher : take_watchers(job_id)) watcher(response);
  return cancelled.record;
}

std::vector<Coordinator::Sink> Coordinator::take_watchers(uint64_t job_id) {
  std::lock_guard lock(mutex_);
  std::vector<Sink> out;
  auto [first, last] = watchers_.equal_range(job_id);
  for (auto it = first; it != last; ++it) out.push_back(std::move(it->second));
  watchers_.erase(first, last);
  return out;
}

std::vector<wire::JobRecord> Coordinator::jobs() const {
  std::lock_guard lock(mutex_);
  std::vector<wire::JobRecord> out;
  for (const Pending& pending : queue_) out.push_back(pending.record);
  if (running_) out.push_back(*running_);
  out.insert(out.end(), finished_.begin(), finished_.end());
  return out;
}

wire::JobRecord Coordinator::job(uint64_t job_id, bool with_trace) const {
  const std::string name = "job " + std::to_string(job_id);
  std::lock_guard lock(mutex_);
  std::optional<wire::JobRecord> found;
  for (const Pending& pending : queue_) {
    if (pending.record.job_id() == job_id) found = pending.record;
  }
  if (running_ && running_->job_id() == job_id) found = *running_;
  for (const auto& done : finished_) {
    if (done.job_id() == job_id) found = done;
  }
  if (!found) {
    throw InvalidArgument("no " + name + " among the root's queued, running and last " +
                          std::to_string(kHistory) + " jobs (symmesh jobs lists them)");
  }
  if (!with_trace) return *found;
  if (!found->traced()) {
    throw InvalidArgument(name + " was not traced: submit it with --trace to record its timeline");
  }
  if (found->finished_unix_s() == 0) {
    throw InvalidArgument(name + " is " + wire::enum_text(found->state()) +
                          ": its trace exists once it finished");
  }
  for (const auto& [id, trace] : traces_) {
    if (id != job_id) continue;
    *found->mutable_trace() = trace;
    return *found;
  }
  throw InvalidArgument(name + "'s trace is gone: the root keeps the traces of the last " +
                        std::to_string(kTracesKept) + " traced jobs");
}

void Coordinator::on_report(const wire::NodeJobReport& report) {
  std::lock_guard lock(mutex_);
  if (report.job_id() != current_job_ || report.phase() != current_phase_) return;
  reports_[static_cast<int>(report.node_rank())] = report;
  changed_.notify_all();
}

void Coordinator::on_node_down(int node, const std::string& why) {
  std::lock_guard lock(mutex_);
  if (!down_.count(node)) down_[node] = why;
  changed_.notify_all();
}

void Coordinator::on_node_up(int node) {
  std::lock_guard lock(mutex_);
  down_.erase(node);
  changed_.notify_all();
}

uint64_t Coordinator::jobs_run() const {
  std::lock_guard lock(mutex_);
  return jobs_run_;
}

uint64_t Coordinator::jobs_failed() const {
  std::lock_guard lock(mutex_);
  return jobs_failed_;
}

uint32_t Coordinator::jobs_queued() const {
  std::lock_guard lock(mutex_);
  return static_cast<uint32_t>(queue_.size());
}

std::string Coordinator::down_nodes_locked() const {
  std::string text;
  for (const auto& [node, why] : down_) {
    text += (text.empty() ? "" : "; ") + std::string("node ") + std::to_string(node) +
            " is down: " + why;
  }
  return text;
}

void Coordinator::loop() {
  for (;;) {
    Pending pending;
    uint64_t job_id = 0;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return !stopping_.empty() || !queue_.empty(); });
      if (!stopping_.empty()) return;
      pending = std::move(queue_.front());
      queue_.pop_front();
      job_id = pending.record.job_id();
      pending.record.set_state(wire::JOB_STATE_RUNNING);
      pending.record.set_started_unix_s(unix_seconds());
      running_ = pending.record;
      running_sink_ = pending.sink;
    }
    wire::ClientResponse event;
    event.mutable_event()->set_job_id(job_id);
    event.mutable_event()->set_state(wire::JOB_STATE_RUNNING);
    pending.sink(event);
    wire::JobTrace trace;
    wire::JobResult result = run(job_id, pending.spec, trace);
    result.set_job_id(job_id);
    {
      std::lock_guard lock(mutex_);
      running_sink_ = nullptr;
      if (pending.spec.trace()) {
        traces_.emplace_front(job_id, std::move(trace));
        if (traces_.size() > kTracesKept) traces_.pop_back();
      }
      ++jobs_run_;
      if (!result.ok()) ++jobs_failed_;
      pending.record.set_state(result.ok()               ? wire::JOB_STATE_OK
                               : !cancel_reason_.empty() ? wire::JOB_STATE_CANCELLED
                                                         : wire::JOB_STATE_ERROR);
      cancel_reason_.clear();
      pending.record.set_finished_unix_s(unix_seconds());
      *pending.record.mutable_result() = result;
      finished_.push_front(pending.record);
      if (finished_.size() > kHistory) finished_.pop_back();
      running_.reset();
    }
    if (!result.ok()) spdlog::warn("job {} failed: {}", job_id, result.error());
    wire::ClientResponse response;
    *response.mutable_result() = result;
    pending.sink(response);
    for (auto& watcher : take_watchers(job_id)) watcher(response);
  }
}

void Coordinator::broadcast(const wire::JobCommand& command) {
  wire::ControlMessage message;
  *message.mutable_command() = command;
  for (int node = 0; node < nodes_; ++node) {
    {
      std::lock_guard lock(mutex_);
      if (down_.count(node)) continue;
    }
    try {
      sender_(node, message);
    } catch (const std::exception& e) {
      on_node_down(node, e.what());
    }
  }
}

std::vector<wire::NodeJobReport> Coordinator::phase(uint64_t job_id, wire::JobPhase phase,
                                                    const wire::JobSpec& spec, std::string& error) {
  {
    std::lock_guard lock(mutex_);
    current_job_ = job_id;
    current_phase_ = phase;
    reports_.clear();
  }
  wire::JobCommand command;
  command.set_job_id(job_id);
  command.set_phase(phase);
  if (phase == wire::RUN) *command.mutable_spec() = spec;
  broadcast(command);

  std::unique_lock lock(mutex_);
  bool aborted = false;
  // QUIESCE and RESET are bounded by the nodes' wait deadline; RUN by the PEs' own waits
  // and, once aborted, by the same deadline again.
  const auto bound = wait_timeout_ + kReportGrace;
  auto deadline = phase == wire::RUN ? Clock::time_point::max() : Clock::now() + bound;
  std::string late;
  for (;;) {
    // A failure (or a node going down) aborts the job on every node at once.
    std::string failure;
    for (const auto& [node, report] : reports_) {
      if (!report.ok() && failure.empty()) failure = report.error();
    }
    if (failure.empty() && !down_.empty()) failure = down_nodes_locked();
    if (failure.empty()) failure = cancel_reason_;
    if (failure.empty() && !stopping_.empty()) failure = stopping_;
    if (!failure.empty() && phase != wire::RUN) break;  // the job ends before it ran
    if (!failure.empty() && !aborted) {
      aborted = true;
      deadline = Clock::now() + bound;
      wire::JobCommand abort;
      abort.set_job_id(job_id);
      abort.set_phase(wire::ABORT);
      abort.set_reason(failure);
      lock.unlock();
      broadcast(abort);
      lock.lock();
    }
    std::string missing;
    for (int node = 0; node < nodes_; ++node) {
      if (!down_.count(node) && !reports_.count(node)) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(node);
      }
    }
    if (missing.empty()) break;
    const auto now = Clock::now();
    if (now >= deadline) {
      late =
          "node(s) " + missing + " did not report " + wire::JobPhase_Name(phase) + " within " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(bound).count()) +
          " s (the wait timeout and " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kReportGrace).count()) +
          " s of grace)";
      break;
    }
    if (changed_.wait_until(lock, std::min(deadline, now + kProgressEvery)) ==
            std::cv_status::timeout &&
        phase == wire::RUN) {
      send_progress(lock, job_id);
    }
  }
  // The cause, not the aborts it triggered elsewhere.
  for (const auto& [node, report] : reports_) {
    if (!report.ok() && report.error().find("aborted") == std::string::npos) {
      error = "node " + std::to_string(node) + ": " + report.error();
      break;
    }
  }
  if (error.empty() && !down_.empty()) error = down_nodes_locked();
  if (error.empty()) error = cancel_reason_;  // also ends a job between its phases
  if (error.empty()) {
    for (const auto& [node, report] : reports_) {
      if (!report.ok()) {
        error = "node " + std::to_string(node) + ": " + report.error();
        break;
      }
    }
  }
  if (error.empty() && !stopping_.empty()) error = stopping_;
  if (error.empty()) error = late;
  std::vector<wire::NodeJobReport> reports;
  for (const auto& [node, report] : reports_) reports.push_back(report);
  current_job_ = 0;
  return reports;
}

void Coordinator::send_progress(std::unique_lock<std::mutex>& lock, uint64_t job_id) {
  if (!running_sink_ || !running_ || !progress_) return;
  wire::ClientResponse response;
  wire::JobEvent& event = *response.mutable_event();
  event.set_job_id(job_id);
  event.set_state(running_->state());
  const auto [done, total] = progress_();
  event.set_iteration(done);
  event.set_iterations(total);
  event.set_elapsed_s(unix_seconds() - running_->started_unix_s());
  Sink sink = running_sink_;
  lock.unlock();  // a slow client must not hold up reports and cancels
  sink(response);
  lock.lock();
}

wire::JobResult Coordinator::run(uint64_t job_id, const wire::JobSpec& spec,
                                 wire::JobTrace& trace) {
  wire::JobResult result;
  result.set_verify_requested(job_kind_of(spec).verify_requested(spec));
  {
    std::lock_guard lock(mutex_);
    if (!down_.empty()) {
      result.set_ok(false);
      result.set_error("the cluster cannot run jobs: " + down_nodes_locked());
      return result;
    }
  }
  std::string error;
  for (auto step : {wire::QUIESCE, wire::RESET}) {
    phase(job_id, step, spec, error);
    if (!error.empty()) {
      result.set_ok(false);
      result.set_error("preparing the job: " + error);
      return result;
    }
  }
  const auto reports = phase(job_id, wire::RUN, spec, error);
  for (const auto& report : reports) {  // a failed job's timeline shows where it stopped
    for (const auto& thread : report.trace().thread()) *trace.add_thread() = thread;
  }
  if (!error.empty()) {
    result.set_ok(false);
    result.set_error(error);
    return result;
  }
  // The slowest node in each iteration.
  JobTally tally;
  std::vector<double> blocked_s(size_t(nodes_) * ranks_per_node_, 0.0);
  for (const auto& report : reports) {
    tally.add(report.iteration_s(), report.verified(), report.max_abs_err());
    // A report's per-peer waits are as long as the cluster has PEs; a longer list is not used.
    if (report.wait_by_peer_s_size() <= int(blocked_s.size())) {
      tally.add_waits(report.wait_by_peer_s());
    }
    const int local_pes = std::min(report.blocked_s_size(), ranks_per_node_);
    for (int local = 0; local < local_pes && int(report.node_rank()) < nodes_; ++local) {
      blocked_s[size_t(report.node_rank()) * ranks_per_node_ + local] = report.blocked_s(local);
    }
  }
  result.set_ok(true);
  for (const auto& report : reports) {  // node 0's: PE 0's figures
    if (report.has_figures()) *result.mutable_figures() = report.figures();
  }
  summarize_job(spec, ClusterShape{nodes_, ranks_per_node_}, tally.iteration_s, result);
  summarize_waits(tally.wait_by_peer_s, blocked_s, result);
  if (result.verify_requested()) {
    result.set_verified(tally.verified);
    result.set_max_abs_err(tally.max_abs_err);
    if (!tally.verified) {
      result.set_ok(false);
      result.set_error("verification failed: max abs error " + std::to_string(tally.max_abs_err) +
                       " against the reference");
    }
  }
  return result;
}

}  // namespace symmesh
