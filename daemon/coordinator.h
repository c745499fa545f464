// The root's job coordinator: jobs run one at a time in submission order, each on all nodes
// in the phases QUIESCE, RESET, RUN. A failed node fails the job and aborts it everywhere; a
// node that is down fails every job until it rejoins (the cluster re-forms). While a job runs its
// client gets a progress event (PE 0's iterations done) every kProgressEvery.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "wire/control.pb.h"
#include "wire/enum_text.h"

namespace symmesh {

class Coordinator {
 public:
  // Receives the job's events (JobEvent) and, last, its JobResult.
  using Sink = std::function<void(const wire::ClientResponse&)>;
  using Sender = std::function<void(int node, const wire::ControlMessage&)>;
  // The running job's iterations done and their total (0: not known), as PE 0 counts them.
  using ProgressReader = std::function<std::pair<uint32_t, uint32_t>()>;

  // `wait_timeout` is the nodes' own: a node that has not reported QUIESCE or RESET within
  // it (plus kReportGrace), or a RUN within it after the ABORT, fails the job, named.
  Coordinator(int nodes, int ranks_per_node, std::chrono::milliseconds wait_timeout, Sender sender,
              ProgressReader progress = {});
  ~Coordinator();

  // Queues the job and tells its sink ("queued", with the job's id); returns the id. Throws
  // PeerError when the queue is full or the coordinator stopped. A sink that throws loses
  // its answer; the job goes on.
  uint64_t submit(const wire::JobSpec& spec, Sink sink);
  // Sends a queued or running job's result to `sink` when it ends (at once for a finished
  // one); throws InvalidArgument for a job the root does not know.
  void watch(uint64_t job_id, Sink sink);
  void on_report(const wire::NodeJobReport& report);
  void on_node_down(int node, const std::string& why);
  // A node that was down serves again: jobs may run once no node is down.
  void on_node_up(int node);
  // A queued job leaves the queue (its client gets the error); a running one is aborted on
  // every node. Returns the job's record; throws InvalidArgument for a job that is neither.
  wire::JobRecord cancel(uint64_t job_id, const std::string& why = "symmesh cancel");
  void stop(const std::string& why);

  uint64_t jobs_run() const;
  uint64_t jobs_failed() const;
  uint32_t jobs_queued() const;
  // Queued jobs, the running one, then the last kHistory finished, newest first.
  std::vector<wire::JobRecord> jobs() const;
  // One of those jobs, with its trace when `with_trace` (throws InvalidArgument, saying why,
  // for an unknown job or a trace that is not there).
  wire::JobRecord job(uint64_t job_id, bool with_trace) const;
  static constexpr size_t kHistory = 50;
  static constexpr size_t kTracesKept = 8;  // the traces of the last 8 traced jobs
  static constexpr std::chrono::milliseconds kProgressEvery{250};
  static constexpr std::chrono::milliseconds kReportGrace{5000};
  static constexpr size_t kMaxQueued = 256;   // more submissions are refused
  static constexpr size_t kMaxWatchers = 64;  // symmesh wait clients per job

 private:
  struct Pending {
    wire::JobSpec spec;
    Sink sink;
    wire::JobRecord record;
  };
  void loop();
  wire::JobResult run(uint64_t job_id, const wire::JobSpec& spec, wire::JobTrace& trace);
  // Sends the phase to every node and waits for every report of it; returns them.
  std::vector<wire::NodeJobReport> phase(uint64_t job_id, wire::JobPhase phase,
                                         const wire::JobSpec& spec, std::string& error);
  void broadcast(const wire::JobCommand& command);
  // Tells the running job's client how far it is; called with the lock held, drops it.
  void send_progress(std::unique_lock<std::mutex>& lock, uint64_t job_id);
  std::string down_nodes_locked() const;
  std::vector<Sink> take_watchers(uint64_t job_id);

  const int nodes_;
  const int ranks_per_node_;
  const std::chrono::milliseconds wait_timeout_;
  Sender sender_;
  ProgressReader progress_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Pending> queue_;
  std::map<int, wire::NodeJobReport> reports_;  // for the phase in flight
  uint64_t current_job_ = 0;
  wire::JobPhase current_phase_ = wire::QUIESCE;
  std::map<int, std::string> down_;
  std::string stopping_;
  uint64_t next_job_id_ = 1;
  uint64_t jobs_run_ = 0;
  uint64_t jobs_failed_ = 0;
  std::optional<wire::JobRecord> running_;
  Sink running_sink_;
  std::string cancel_reason_;             // set while the running job is being cancelled
  std::deque<wire::JobRecord> finished_;  // newest first, at most kHistory
  std::deque<std::pair<uint64_t, wire::JobTrace>> traces_;  // newest first, at most kTracesKept
  std::multimap<uint64_t, Sink> watchers_;  // symmesh wait: by job id, until it ends
  std::thread thread_;
};

}  // namespace symmesh
