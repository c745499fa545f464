// The formation loop: a daemon's life after its start. It forms the cluster (the root gathers
// every node's hello and answers with the view; a member joins the root), connects the data
// transports, serves until the cluster must form again (a node restarted, a link or a data
// connection broke), tears the formation down and forms again, until the daemon stops. It owns
// the daemon's state, the current formation (its transports, links and agent) and the monitor
// that turns missed heartbeats into membership changes.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/progress.h"
#include "daemon/config.h"
#include "daemon/coordinator.h"
#include "daemon/formation_transports.h"
#include "daemon/join_listener.h"
#include "daemon/link.h"
#include "daemon/membership.h"
#include "daemon/node_agent.h"
#include "daemon/relay.h"
#include "daemon/status/metrics.h"
#include "runtime/node.h"
#include "transport/peer_traffic.h"
#include "wire/bootstrap.pb.h"

namespace symmesh {

class FormationLoop {
 public:
  // What the loop works with; all outlive it (the Daemon declares them before the loop).
  struct Parts {
    const DaemonConfig& config;
    const std::string& secret;
    uint64_t incarnation;
    Node& node;
    Membership& membership;
    Metrics& metrics;
    Relay& relay;
    Coordinator* coordinator;  // the root's; null on a member
    JoinListener* join;        // the root's; null on a member
    JobLimits limits;
    progress::JobProgress& progress;
    // This daemon's hello, less the formation's transports.
    std::function<wire::NodeHello()> base_hello;
    // The root fills what a job left to the cluster's configuration.
    std::function<wire::JobSpec(wire::JobSpec)> with_defaults;
  };

  // The current formation as status shows it.
  struct Snapshot {
    wire::DaemonState state = wire::DAEMON_STATE_BOOTSTRAPPING;
    uint64_t epoch = 0;
    wire::ClusterView view;
    // Per node: its data transport and how it was chosen (empty: not yet), and whether it
    // is up.
    std::vector<std::string> transports;
    std::vector<std::string> reasons;
    std::vector<bool> peers_up;
  };

  explicit FormationLoop(Parts parts);
  ~FormationLoop();
  FormationLoop(const FormationLoop&) = delete;
  FormationLoop& operator=(const FormationLoop&) = delete;

  // Forms and serves until request_stop(); throws when the first formation fails (the root),
  // or joining is refused or gives up (a member).
  void run();
  // Any thread: ends run() (and any wait in it) soon.
  void request_stop(const std::string& why);
  std::string stop_reason();
  // Wakes the loop: a joiner is waiting at the bootstrap port.
  void notify() { changed_.notify_all(); }

  wire::DaemonState state();
  Snapshot snapshot();
  // Per network transport of the current formation: its name, and its traffic with each node.
  struct TransportTraffic {
    std::string name;
    std::vector<PeerTraffic::Totals> per_node;
  };
  std::vector<TransportTraffic> traffic();
  // The agent's job counts (a member's status), none between formations.
  std::optional<std::pair<uint64_t, uint64_t>> agent_jobs();

  // Sends to node n's link (the root) or the root's (a member); throws PeerError when there
  // is none.
  void send_to(int node, const wire::ControlMessage& message);

  // Shutting down, in the daemon's order: enter the stopped state (returns the stop reason;
  // none when already stopped), tell the peers, then tear the formation down.
  std::optional<std::string> enter_stopped();
  void say_goodbye(const std::string& why);
  void teardown(const std::string& why);

 private:
  bool is_root() const { return parts_.config.node_rank == 0; }
  void run_root();
  void run_member();
  void pause_if_port_down(const Error& e);
  // Root: gathers every node's hello (the first time within --bootstrap-timeout, then for
  // as long as it takes), answers them with the view, connects, runs the world barrier.
  // Returns false when the daemon is stopping.
  bool form_as_root(bool first);
  // Runs the world barrier that ends a root's formation; false when the daemon is stopping.
  bool prove_data_plane();
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
  void on_peer_down(uint64_t epoch, int peer, const std::string& why);
  void read_from_node(Link& link, uint64_t epoch);
  void read_from_root(Link& link, uint64_t epoch);
  // A link or transport to `node` failed during formation `epoch`.
  void lost(int node, uint64_t epoch, const std::string& why);
  void monitor_loop();
  void apply(const std::vector<MembershipChange>& changes);
  void set_state(wire::DaemonState state);
  bool stopping();

  const Parts parts_;
  std::thread monitor_;

  // The current formation: swapped by the loop's thread, read by status under mutex_.
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
};

}  // namespace symmesh
