// symmeshd: one per node. Bootstraps into the cluster, connects the data transport to every
// peer, then serves the control port and runs the root's job commands on its ranks.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "bootstrap.pb.h"
#include "daemon/config.h"
#include "daemon/control_server.h"
#include "daemon/coordinator.h"
#include "daemon/link.h"
#include "daemon/node_agent.h"
#include "daemon/status/metrics.h"
#include "daemon/status/status_server.h"
#include "runtime/node.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/verbs/device_atomics.h"
#include "transport/verbs/verbs_transport.h"

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
  void read_from_node(Link& link);
  void read_from_root(Link& link);
  // Returns what cancels the job should its client leave before the result.
  ControlServer::Abandon submit(const wire::JobSpec& spec, ControlServer::Sink sink);
  void wait(uint64_t job_id, ControlServer::Sink sink);
  // The root: a job forwarded by `node` as `request` whose client left.
  void abandon_forwarded(int node, uint64_t request);
  // The root fills what a job left to the cluster's configuration (the barrier algorithm).
  wire::JobSpec with_defaults(wire::JobSpec spec) const;
  wire::StatusReply status();
  wire::JobRecord cancel(uint64_t job_id);
  wire::JobRecord job(uint64_t job_id, bool trace);
  StatusServer::Health health();
  std::string metrics_text();
  void mark_root_down(const std::string& why);
  void wait_for_stop();
  void shutdown();

  DaemonConfig config_;
  std::string secret_;
  std::string data_dir_;  // canonical
  // Opens the verbs transport unless --transport tcp; returns why it is absent otherwise.
  std::string open_verbs();
  // Picks, per peer, verbs (both ends have it) or tcp, and connects the verbs queue pairs.
  void choose_transports();
  void flush_all(Deadline deadline);
  bool peer_transport_up(int node) const;
  Clock::time_point started_;
  double started_unix_s_;
  // Grows with every start (the start time in microseconds): peers fence an old one by it.
  uint64_t incarnation_;
  Metrics metrics_;
  std::unique_ptr<StatusServer> status_server_;  // absent with --status-addr off
  std::unique_ptr<Node> node_;
  std::unique_ptr<TcpTransport> tcp_;
  std::unique_ptr<VerbsTransport> verbs_;
  std::unique_ptr<DeviceAtomicsTransport> device_atomics_;  // see transport/verbs/device_atomics.h
  std::string verbs_absent_;                                // why this node has no verbs transport
  std::vector<std::string> peer_reason_;  // per node: "verbs: ..." or "tcp: ..." (status)
  wire::ClusterView view_;
  std::unique_ptr<NodeAgent> agent_;
  std::unique_ptr<Coordinator> coordinator_;  // root only
  std::vector<std::unique_ptr<Link>> links_;  // root: one per node; others: [0] is the root
  std::vector<std::thread> link_threads_;
  std::unique_ptr<ControlServer> control_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::string stop_reason_;
  std::string state_ = "bootstrapping";
  int ready_nodes_ = 0;
  bool cluster_started_ = false;
  std::string root_down_;
  std::map<int, std::string> nodes_down_;
  uint64_t next_request_ = 1;
  std::map<uint64_t, ControlServer::Sink> forwarded_;  // non-root: submissions at the root
  // Root: (node, request) -> job id of forwarded jobs not finished. Its own lock: the
  // coordinator's sinks take it under the coordinator's lock.
  std::mutex forward_mutex_;
  std::map<std::pair<int, uint64_t>, uint64_t> forwarded_jobs_;
};

}  // namespace symmesh
