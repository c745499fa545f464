#include "daemon/status/daemon_status.h"

#include "daemon/attach/attached_pes.h"
#include "daemon/network_kinds/network_kind.h"
#include "transport/tcp/address.h"
#include "wire/json.h"

namespace symmesh {

void DaemonStatus::served_at(std::string url) {
  std::lock_guard lock(mutex_);
  url_ = std::move(url);
}

std::string DaemonStatus::url() {
  std::lock_guard lock(mutex_);
  return url_;
}

wire::StatusReply DaemonStatus::status() {
  wire::StatusReply reply;
  reply.set_node_rank(sources_.config.node_rank);
  reply.set_nodes(sources_.config.nodes);
  reply.set_ranks_per_node(sources_.config.ranks_per_node);
  reply.set_version(PROJECT_VERSION);
  reply.set_incarnation(sources_.incarnation);
  if (std::string at = url(); !at.empty()) reply.set_status_url(std::move(at));
  reply.set_attach_socket(sources_.attach.path());
  for (const int pid : attached_pes().holders()) reply.add_attached_pids(uint32_t(pid));
  for (const uint64_t count : attached_pes().taken()) reply.add_processes_taken(count);
  reply.set_uptime_s(std::chrono::duration<double>(Clock::now() - sources_.started).count());
  wire::CpuStatus& cpus = *reply.mutable_cpus();
  cpus.set_usable(uint32_t(sources_.cpu_budget.usable));
  cpus.set_allowed(cpu_list_text(sources_.cpu_budget.allowed));
  cpus.set_cgroup_quota(sources_.cpu_budget.quota);
  cpus.set_numa_nodes(uint32_t(sources_.cpu_budget.numa.size()));
  cpus.set_from_flag(sources_.cpu_budget.from_flag);
  cpus.set_fused_compute_threads(uint32_t(sources_.fused_threads.compute));
  cpus.set_fused_comm_threads(uint32_t(sources_.fused_threads.comm));
  cpus.set_placement(sources_.cpus.describe());
  reply.set_heap_size(sources_.node.heap_capacity());
  reply.set_heap_used(sources_.node.heap_used());
  reply.set_heap_job_peak(sources_.node.heap_job_peak());
  const std::vector<NodeSlot> slots = sources_.membership.slots();
  const FormationLoop::Snapshot formation = sources_.loop.snapshot();
  reply.set_state(formation.state);
  reply.set_epoch(formation.epoch);
  for (const auto& info : formation.view.node()) {
    const int n = static_cast<int>(info.node_rank());
    auto* node = reply.add_node();
    node->set_node_rank(info.node_rank());
    node->set_hostname(info.hostname());
    node->set_control_endpoint(host_port(info.control_endpoint()).str());
    node->set_ranks(formation.view.ranks_per_node());
    node->set_status_url(info.status_url());
    const NodeSlot& slot = slots.at(n);
    node->set_state(slot.state);
    node->set_incarnation(slot.incarnation);
    node->set_state_since_unix_s(slot.since_unix_s);
    node->set_last_heard_unix_s(slot.last_heard_unix_s);
    node->set_state_reason(slot.reason);
    if (n == sources_.config.node_rank) continue;
    auto* peer = reply.add_peer();
    peer->set_node_rank(info.node_rank());
    const std::string& reason = formation.reasons.at(n);
    peer->set_transport(reason.empty() ? "pending" : formation.transports.at(n));
    peer->set_reason(reason.empty() ? "forming" : reason);
    const NetworkKind& fallback = *network_kinds().back();
    if (const wire::TransportAddress* data = offered(info, fallback.name())) {
      peer->set_data_endpoint(fallback.address_text(data->address()));
    }
    peer->set_up(formation.peers_up.at(n) && slot.state == wire::NODE_STATE_UP);
  }
  const bool serving =
      formation.state == wire::DAEMON_STATE_READY || formation.state == wire::DAEMON_STATE_DEGRADED;
  // Jobs are counted once the cluster serves.
  if (!serving) return reply;
  if (Coordinator* coordinator = sources_.coordinator) {
    reply.set_jobs_run(coordinator->jobs_run());
    reply.set_jobs_failed(coordinator->jobs_failed());
    reply.set_jobs_queued(coordinator->jobs_queued());
    for (auto& job : coordinator->jobs()) *reply.add_jobs() = std::move(job);
  } else if (const auto counts = sources_.loop.agent_jobs()) {
    reply.set_jobs_run(counts->first);
    reply.set_jobs_failed(counts->second);
  }
  return reply;
}

StatusServer::Health DaemonStatus::health() {
  const std::string problems = sources_.membership.problems();
  const wire::DaemonState state = sources_.loop.state();
  if (state == wire::DAEMON_STATE_BOOTSTRAPPING || state == wire::DAEMON_STATE_STOPPED) {
    return {false, std::string("state ") + wire::enum_text(state)};
  }
  if (!problems.empty()) return {false, problems};
  if (state != wire::DAEMON_STATE_READY)
    return {false, std::string("state ") + wire::enum_text(state)};
  return {true, ""};
}

std::string DaemonStatus::metrics_text() {
  const wire::StatusReply now = status();
  using Sample = Metrics::Sample;
  std::vector<Sample> gauges;
  const std::string node = std::to_string(sources_.config.node_rank);
  gauges.push_back({"symmesh_info",
                    "This daemon: its node rank and version (value 1).",
                    {{"node", node}, {"version", now.version()}},
                    1});
  gauges.push_back({"symmesh_up",
                    "1 when the daemon is in the cluster and every node is up.",
                    {},
                    health().ok ? 1.0 : 0.0});
  gauges.push_back({"symmesh_incarnation",
                    "This daemon's incarnation (its start time in microseconds).",
                    {},
                    double(sources_.incarnation)});
  for (const auto& slot : now.node()) {
    for (const wire::NodeState state : {wire::NODE_STATE_JOINING, wire::NODE_STATE_UP,
                                        wire::NODE_STATE_SUSPECT, wire::NODE_STATE_DOWN}) {
      gauges.push_back(
          {"symmesh_node_state",
           "1 for each node's membership state as this daemon sees it.",
           {{"node", std::to_string(slot.node_rank())}, {"state", wire::enum_text(state)}},
           slot.state() == state ? 1.0 : 0.0});
    }
  }
  for (const auto& slot : now.node()) {
    gauges.push_back({"symmesh_node_incarnation",
                      "The incarnation of the daemon holding each node's slot.",
                      {{"node", std::to_string(slot.node_rank())}},
                      double(slot.incarnation())});
  }
  gauges.push_back(
      {"symmesh_heap_bytes", "Symmetric heap of this node.", {}, double(now.heap_size())});
  gauges.push_back({"symmesh_heap_used_bytes",
                    "Symmetric heap in use on this node.",
                    {},
                    double(now.heap_used())});
  gauges.push_back({"symmesh_heap_job_peak_bytes",
                    "Highest symmetric heap use of the running job, or of the last one "
                    "(its rings, workspaces and buffers).",
                    {},
                    double(now.heap_job_peak())});
  for (const auto& peer : now.peer()) {
    gauges.push_back({"symmesh_peer_up",
                      "1 when the link to the peer node is up, by transport.",
                      {{"peer", std::to_string(peer.node_rank())}, {"transport", peer.transport()}},
                      peer.up() ? 1.0 : 0.0});
  }
  // Per peer and transport: what this node sent and received (transport/peer_traffic.h).
  struct Counter {
    const char* family;
    const char* help;
    uint64_t PeerTraffic::Totals::*field;
  };
  const std::vector<FormationLoop::TransportTraffic> traffic = sources_.loop.traffic();
  for (const Counter& c :
       {Counter{"symmesh_peer_sent_bytes_total",
                "Bytes this node's operations carried to the peer.",
                &PeerTraffic::Totals::sent_bytes},
        Counter{"symmesh_peer_sent_operations_total",
                "Puts, gets and atomics this node started towards the peer.",
                &PeerTraffic::Totals::sent_ops},
        Counter{"symmesh_peer_received_bytes_total",
                "Bytes that came from the peer (its puts here over tcp, this node's gets).",
                &PeerTraffic::Totals::received_bytes},
        Counter{"symmesh_peer_received_operations_total",
                "Messages with data that came from the peer.",
                &PeerTraffic::Totals::received_ops}}) {
    for (const auto& transport : traffic) {
      for (int n = 0; n < sources_.config.nodes; ++n) {
        if (n == sources_.config.node_rank) continue;
        gauges.push_back({c.family,
                          c.help,
                          {{"peer", std::to_string(n)}, {"transport", transport.name}},
                          double(transport.per_node.at(n).*c.field)});
      }
    }
  }
  {
    const char* help = "Connections to the control port: waiting to authenticate, or served.";
    gauges.push_back({"symmesh_control_connections",
                      help,
                      {{"state", "handshaking"}},
                      double(sources_.control.handshaking())});
    gauges.push_back({"symmesh_control_connections",
                      help,
                      {{"state", "served"}},
                      double(sources_.control.sessions())});
  }
  gauges.push_back({"symmesh_jobs_queued",
                    "Jobs waiting to run (the root only).",
                    {},
                    double(now.jobs_queued())});
  for (auto& sample : process_samples()) gauges.push_back(std::move(sample));
  gauges.push_back({"process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    {},
                    sources_.started_unix_s});
  return sources_.metrics.render(gauges);
}

}  // namespace symmesh
