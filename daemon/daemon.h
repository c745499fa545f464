// symmeshd: one per node. Starts its control and status ports, then forms the cluster with
// the others and serves jobs until it stops. Forming is the bootstrap exchange (every node's
// hello to the root, the root's view back, data transports connected, a world barrier); the
// cluster forms again whenever a node or the root restarts, so a daemon's life is a loop of
// formations (daemon/formation_transports.h) watched by the membership (daemon/membership.h).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "common/cpu_binding.h"
#include "common/cpu_budget.h"
#include "common/progress.h"
#include "daemon/attach/attach_server.h"
#include "daemon/config.h"
#include "daemon/control_server.h"
#include "daemon/coordinator.h"
#include "daemon/formation_transports.h"
#include "daemon/join_listener.h"
#include "daemon/link.h"
#include "daemon/membership.h"
#include "daemon/node_agent.h"
#include "daemon/relay.h"
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

  // Forming and serving (daemon_formation.cpp).
  void run_root();
  void run_member();
  void pause_if_port_down(const Error& e);
  // Root: gathers every node's hello (the first time within --bootstrap-timeout, then for
  // as long as it takes), answers them with the view, connects, runs the world barrier.
  // Returns false when the daemon is stopping.
  bool form_as_root(bool first);
  // Root: serves until the daemon stops (false) or the cluster must re-form (true).
  bool serve_as_root();
  // Member: joins the root (retrying until `deadline`), connects, waits for the start.
  // Returns false when the daemon is stopping.
  bool form_as_member(Deadline deadline);
  // Member: serves until the daemon stops (false) or it must join again (true); `lost`
  // tells whether the root went away (then it may take --rejoin-timeout to come back).
  bool serve_as_member(bool& lost);
  // Builds this formation's transports; returns this node's hello.
  wire::NodeHello open_formation();
  // Adopts the view: links, transports connected, the agent.
  void adopt(const wire::ClusterView& view, std::vector<std::unique_ptr<BlockingChannel>> channels);
  // Ends the current formation: links, the agent, the transports.
  void teardown(const std::string& why);
  void read_from_node(Link& link, uint64_t epoch);
  void read_from_root(Link& link, uint64_t epoch);
  // Sends to node n's link (the root) or the root's (a member); throws PeerError when there
  // is none.
  void send_to(int node, const wire::ControlMessage& message);
  // A link or transport to `node` failed during formation `epoch`.
  void lost(int node, uint64_t epoch, const std::string& why);
  void monitor_loop();
  // Why a joiner's hello may not wait at the bootstrap port (empty: it may).
  std::string fenced(const wire::NodeHello& hello) const;
  void apply(const std::vector<MembershipChange>& changes);
  void set_state(wire::DaemonState state);
  bool stopping();

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

  // Status (daemon_status.cpp).
  wire::StatusReply status();
  StatusServer::Health health();
  std::string metrics_text();

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
  std::thread monitor_;

  // The current formation: swapped by the main thread, read by status under mutex_.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string stop_reason_;
  wire::DaemonState state_ = wire::DAEMON_STATE_BOOTSTRAPPING;
  std::unique_ptr<FormationTransports> formation_;
  wire::ClusterView view_;
  uint64_t epoch_ = 0;
  bool tearing_down_ = false;
  BlockingChannel* joining_ = nullptr;  // a member: the connection it joins the root on
  // A member: the root asked it to join again. The root: a data connection broke (at
  // reform_at_), so the cluster re-forms to connect it again.
  bool reform_ = false;
  Clock::time_point reform_at_;
  bool root_lost_ = false;  // a member: the link to the root ended
  std::string root_lost_why_;
  std::set<int> ready_nodes_;  // the members whose data transport is connected
  bool cluster_started_ = false;

  // The links and the agent of the current formation. Its own lock, taken for a send and
  // never held while calling anything that could lock another (sinks run under the
  // coordinator's lock and send through here).
  std::mutex links_mutex_;
  std::vector<std::unique_ptr<Link>> links_;  // root: one per node; a member: [0], the root
  std::unique_ptr<NodeAgent> agent_;
  std::vector<std::thread> link_threads_;

  // Requests relayed between a member and the root (daemon/relay.h).
  Relay relay_;
};

}  // namespace symmesh
