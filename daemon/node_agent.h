// Runs the root's job commands on this node. QUIESCE flushes every data connection, RESET
// clears the sync pools and frees the heap, RUN starts one thread per local rank running the
// job (SPMD) and reports the slowest PE per iteration (and, for a traced job, every thread's
// spans); ABORT wakes every waiting PE at once.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "common/cpu_binding.h"
#include "common/cpu_budget.h"
#include "common/progress.h"
#include "daemon/status/metrics.h"
#include "runtime/node.h"
#include "wire/control.pb.h"

namespace symmesh {

// What this daemon lets a job use: files only under its data directory, host memory up to
// --job-memory (daemon/jobs/data_paths.h, daemon/jobs/host_memory.h), and the CPUs each PE's
// threads run on (--cpu-bind, NUMA nodes).
struct JobLimits {
  std::string data_dir;
  uint64_t job_memory = 0;
  CpuPlacement cpus;
};

class NodeAgent {
 public:
  using Reporter = std::function<void(const wire::NodeJobReport&)>;
  // Ensures everything this node sent, on every transport, has landed.
  using Flush = std::function<void(Deadline)>;
  // `progress`: where PE 0 counts a job's iterations (it outlives the agent).
  NodeAgent(Node& node, Metrics& metrics, JobLimits limits, progress::JobProgress& progress,
            Flush flush, Reporter reporter);
  ~NodeAgent();

  // Any thread. ABORT acts at once; other phases run in order on the agent's thread.
  void handle(const wire::JobCommand& command);
  void stop();

  uint64_t jobs_run() const { return jobs_run_.load(); }
  uint64_t jobs_failed() const { return jobs_failed_.load(); }

 private:
  void loop();
  wire::NodeJobReport execute(const wire::JobCommand& command);
  void run_job(const wire::JobSpec& requested, wire::NodeJobReport& report);

  Node& node_;
  Metrics& metrics_;
  const JobLimits limits_;
  Flush flush_;
  Reporter reporter_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<wire::JobCommand> queue_;
  bool stopping_ = false;
  std::atomic<uint64_t> running_job_{0};  // set under mutex_, with the ABORT check
  uint64_t aborted_job_ = 0;              // the last job an ABORT named (under mutex_)
  std::string aborted_reason_;
  std::atomic<uint64_t> jobs_run_{0};
  std::atomic<uint64_t> jobs_failed_{0};
  progress::JobProgress& progress_;
  std::thread thread_;
};

}  // namespace symmesh
