// symmeshd: one per node. Starts its control and status ports, then forms the cluster with
// the others and serves jobs until it stops. Its parts: the formation loop that forms the
// cluster again and again (daemon/formation_loop.h), the membership that watches the nodes
// (daemon/membership.h), the relay between a member and the root (daemon/relay.h), the job
// handlers (daemon_jobs.cpp) and what it says of itself (daemon/status/daemon_status.h).
#pragma once

#include <memory>
#include <mutex>

#include "common/cpu_binding.h"
#include "common/cpu_budget.h"
#include "common/progress.h"
#include "daemon/attach/attach_server.h"
#include "daemon/config.h"
#include "daemon/control_server.h"
#include "daemon/coordinator.h"
#include "daemon/formation_loop.h"
#include "daemon/join_listener.h"
#include "daemon/membership.h"
#include "daemon/node_agent.h"
#include "daemon/relay.h"
#include "daemon/status/daemon_status.h"
#include "daemon/status/metrics.h"
#include "daemon/status/status_server.h"
#include "runtime/node.h"
#include "wire/bootstrap.pb.h"
#include "wire/enum_text.h"

namespace symmesh {

class Daemon {
 public:
  explicit Daemon(DaemonConfig config);
  ~Daemon();

  // Runs until request_stop(); returns the process exit code.
  int run();
  // Any thread (the signal thread): begins a graceful shutdown.
  void request_stop(const std::string& why);

 private:
  bool is_root() const { return config_.node_rank == 0; }

  // Startup (daemon.cpp): the secret, the data directory, the heap, the ports.
  void start();
  // The configuration part of this daemon's hello (the formation adds its transports).
  wire::NodeHello base_hello() const;

  // Why a joiner's hello may not wait at the bootstrap port (empty: it may).
  std::string fenced(const wire::NodeHello& hello) const;
  // Sends to node n through the formation loop; throws PeerError between formations.
  void send_to(int node, const wire::ControlMessage& message);

  // Jobs (daemon_jobs.cpp).
  // Returns what cancels the job should its client leave before the result.
  ControlServer::Abandon submit(const wire::JobSpec& spec, ControlServer::Sink sink);
  void wait(uint64_t job_id, ControlServer::Sink sink);
  // The root fills what a job left to the cluster's configuration (the barrier algorithm).
  wire::JobSpec with_defaults(wire::JobSpec spec) const;
  wire::JobRecord cancel(uint64_t job_id);
  wire::JobRecord job(uint64_t job_id, bool trace);
  // What the control port and relayed requests are served by.
  ControlServer::Handlers client_handlers();

  void shutdown();

  DaemonConfig config_;
  std::string secret_;
  std::string data_dir_;  // canonical
  uint64_t job_memory_ = 0;
  CpuBudget cpu_budget_;        // the CPUs jobs are sized for (--cpus, or the machine's)
  FusedThreads fused_threads_;  // their split over the PEs: what a fused job runs unasked
  CpuPlacement cpus_;           // where the job's PE threads run (--cpu-bind, NUMA nodes)
  Clock::time_point started_;
  double started_unix_s_;
  // Grows with every start (the start time in microseconds): peers fence an old one by it.
  const uint64_t incarnation_;
  Metrics metrics_;
  Membership membership_;
  progress::JobProgress progress_;  // PE 0's count of the running job (node 0)
  std::unique_ptr<Node> node_;
  std::unique_ptr<ControlServer> control_;
  std::unique_ptr<StatusServer> status_server_;  // absent with --status-addr off
  std::unique_ptr<AttachServer> attach_;
  std::unique_ptr<JoinListener> join_;        // root only
  std::unique_ptr<Coordinator> coordinator_;  // root only
  // Requests relayed between a member and the root (daemon/relay.h).
  Relay relay_;

  // The formation loop (daemon/formation_loop.h), made in start() before the servers that ask
  // it. A stop asked for before it exists waits in early_stop_.
  std::mutex stop_mutex_;
  std::string early_stop_;
  bool shut_down_ = false;
  std::unique_ptr<FormationLoop> loop_;

  // What it says of itself (daemon/status/daemon_status.h), made after the loop.
  std::unique_ptr<DaemonStatus> status_;
};

}  // namespace symmesh
