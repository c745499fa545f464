// Forming the cluster and keeping it formed: the root's and a member's loops, the links,
// and what a lost link or transport does.
#include "daemon/formation_loop.h"

#include <spdlog/spdlog.h>

#include "common/errors.h"
#include "common/thread_name.h"
#include "daemon/bootstrap.h"
#include "transport/auth.h"
#include "transport/rdma.h"
#include "wire/enum_text.h"

namespace symmesh {
namespace {

constexpr auto kFirstBackoff = std::chrono::milliseconds(100);
constexpr auto kMaxBackoff = std::chrono::milliseconds(2000);

// A member's joining attempts reached the deadline with no time left for another: not retried.
class JoinGaveUp : public TimeoutError {
 public:
  using TimeoutError::TimeoutError;
};

wire::ControlMessage reform_message(uint64_t epoch, const std::string& why) {
  wire::ControlMessage message;
  message.mutable_reform()->set_epoch(epoch);
  message.mutable_reform()->set_why(why);
  return message;
}

}  // namespace

FormationLoop::FormationLoop(Parts parts) : parts_(std::move(parts)) {}

FormationLoop::~FormationLoop() {
  enter_stopped();
  teardown("the daemon stopped");
}

void FormationLoop::run() {
  monitor_ = std::thread([this] {
    set_thread_name("monitor");
    monitor_loop();
  });
  if (is_root()) {
    run_root();
  } else {
    run_member();
  }
}

void FormationLoop::request_stop(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (stop_reason_.empty()) stop_reason_ = why;
    if (joining_) joining_->stop();
  }
  changed_.notify_all();
  if (parts_.join) parts_.join->notify();
}

std::string FormationLoop::stop_reason() {
  std::lock_guard lock(mutex_);
  return stop_reason_;
}

bool FormationLoop::stopping() {
  std::lock_guard lock(mutex_);
  return !stop_reason_.empty();
}

wire::DaemonState FormationLoop::state() {
  std::lock_guard lock(mutex_);
  return state_;
}

void FormationLoop::set_state(wire::DaemonState state) {
  std::lock_guard lock(mutex_);
  if (state_ != wire::DAEMON_STATE_STOPPED) state_ = state;
  changed_.notify_all();
}

FormationLoop::Snapshot FormationLoop::snapshot() {
  std::lock_guard lock(mutex_);
  Snapshot now;
  now.state = state_;
  now.epoch = epoch_;
  now.view = view_;
  now.transports.resize(parts_.config.nodes);
  now.reasons.resize(parts_.config.nodes);
  now.peers_up.resize(parts_.config.nodes);
  for (int node = 0; node < parts_.config.nodes && formation_; ++node) {
    if (node == parts_.config.node_rank) continue;
    now.transports[node] = formation_->transport_name(node);
    now.reasons[node] = formation_->reason(node);
    now.peers_up[node] = !now.reasons[node].empty() && formation_->peer_up(node);
  }
  return now;
}

std::vector<FormationLoop::TransportTraffic> FormationLoop::traffic() {
  std::lock_guard lock(mutex_);  // the formation's transports stay while they are read
  std::vector<TransportTraffic> all;
  if (!formation_) return all;
  for (const NetworkTransport* transport : formation_->networks()) {
    TransportTraffic& one = all.emplace_back();
    one.name = transport->name();
    for (int node = 0; node < parts_.config.nodes; ++node) {
      one.per_node.push_back(transport->traffic().totals(node));
    }
  }
  return all;
}

std::optional<std::pair<uint64_t, uint64_t>> FormationLoop::agent_jobs() {
  std::lock_guard lock(links_mutex_);
  if (!agent_) return std::nullopt;
  return std::pair{agent_->jobs_run(), agent_->jobs_failed()};
}

std::optional<std::string> FormationLoop::enter_stopped() {
  std::string why;
  {
    std::lock_guard lock(mutex_);
    if (state_ == wire::DAEMON_STATE_STOPPED) return std::nullopt;
    state_ = wire::DAEMON_STATE_STOPPED;
    if (stop_reason_.empty()) stop_reason_ = "the daemon stopped";
    why = stop_reason_;
  }
  changed_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  return why;
}

void FormationLoop::say_goodbye(const std::string& why) {
  // The root tells every node, a node tells the root.
  wire::ControlMessage bye;
  bye.mutable_shutdown()->set_node_rank(parts_.config.node_rank);
  bye.mutable_shutdown()->set_reason(why);
  std::lock_guard lock(links_mutex_);
  for (auto& link : links_) {
    if (!link) continue;
    try {
      link->send(bye);
    } catch (const std::exception&) {
      // Already gone.
    }
  }
}

void FormationLoop::monitor_loop() {
  const auto every = std::max(parts_.config.heartbeat / 4, std::chrono::milliseconds(10));
  std::unique_lock lock(mutex_);
  while (stop_reason_.empty()) {
    changed_.wait_for(lock, every);
    lock.unlock();
    apply(parts_.membership.tick(Clock::now()));
    lock.lock();
  }
}

void FormationLoop::apply(const std::vector<MembershipChange>& changes) {
  for (const auto& change : changes) {
    if (change.node == parts_.config.node_rank) continue;
    const std::string what = "node " + std::to_string(change.node);
    if (change.to == wire::NODE_STATE_DOWN || change.to == wire::NODE_STATE_SUSPECT) {
      spdlog::warn("{} is {}: {}", what, wire::enum_text(change.to), change.reason);
    } else {
      spdlog::info("{} is {} (was {})", what, wire::enum_text(change.to),
                   wire::enum_text(change.from));
    }
    if (change.to == wire::NODE_STATE_DOWN) parts_.metrics.error("peer_down");
    Coordinator* coordinator = parts_.coordinator;
    if (coordinator && change.to == wire::NODE_STATE_DOWN) {
      coordinator->on_node_down(change.node, change.reason);
    }
    if (coordinator && change.to == wire::NODE_STATE_UP) coordinator->on_node_up(change.node);
    // A member that stops hearing the root acts as if the link broke: a dead host or a cut
    // network sends no reset, and the kernel would hold the connection for many minutes.
    if (!is_root() && change.node == 0 && change.to == wire::NODE_STATE_DOWN) {
      uint64_t epoch = 0;
      {
        std::lock_guard lock(mutex_);
        epoch = epoch_;
      }
      lost(0, epoch, "no heartbeat from the root: " + change.reason);
    }
  }
  if (changes.empty()) return;
  std::lock_guard lock(mutex_);
  if (state_ == wire::DAEMON_STATE_READY || state_ == wire::DAEMON_STATE_DEGRADED) {
    state_ = parts_.membership.all_up() ? wire::DAEMON_STATE_READY : wire::DAEMON_STATE_DEGRADED;
  }
}

void FormationLoop::run_root() {
  bool first = true;
  for (;;) {
    try {
      if (!form_as_root(first) || !serve_as_root()) return;
    } catch (const Error& e) {
      // The first formation fails the start, naming who never came; later ones are retried
      // (a peer that froze mid-handshake, a joiner that left, a view that could not be sent).
      if (first) throw;
      spdlog::warn("node 0: forming the cluster failed: {}; forming it again", e.what());
      pause_if_port_down(e);
      if (stopping()) return;
    }
    first = false;
    teardown("the cluster re-forms");
  }
}

// Forced verbs on a port without a link fails each formation at once: the next waits a while.
void FormationLoop::pause_if_port_down(const Error& e) {
  if (!dynamic_cast<const PortNotActive*>(&e)) return;
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, kMaxBackoff, [&] { return !stop_reason_.empty(); });
}

bool FormationLoop::form_as_root(bool first) {
  set_state(first ? wire::DAEMON_STATE_BOOTSTRAPPING : wire::DAEMON_STATE_FORMING);
  const wire::NodeHello mine = open_formation();
  const Deadline deadline =
      first ? deadline_after(parts_.config.bootstrap_timeout) : Deadline::max();
  const auto missing = parts_.join->wait_for_all(deadline, [this] { return stopping(); });
  if (stopping()) return false;
  auto joiners = parts_.join->take();
  if (!missing.empty()) {
    std::string names;
    for (int node : missing) names += (names.empty() ? "" : ", ") + std::to_string(node);
    const std::string why = "bootstrap: node(s) " + names + " never joined before the deadline";
    for (auto& joiner : joiners) {
      if (!joiner) continue;
      wire::BootstrapReply refusal;
      refusal.set_error(why);
      try {
        joiner->channel->write(refusal, deadline_after(kHandshakeTimeout));
      } catch (const std::exception&) {
      }
    }
    throw PeerError(why);
  }
  std::vector<wire::NodeHello> hellos(parts_.config.nodes);
  hellos[0] = mine;
  std::vector<std::unique_ptr<BlockingChannel>> channels(parts_.config.nodes);
  const auto now = Clock::now();
  for (int node = 1; node < parts_.config.nodes; ++node) {
    hellos[node] = joiners[node]->hello;
    channels[node] = std::move(joiners[node]->channel);
    if (!parts_.membership.joining(node, hellos[node].incarnation(), now)) {
      throw PeerError("node " + std::to_string(node) + " joined with incarnation " +
                      std::to_string(hellos[node].incarnation()) +
                      ", older than the daemon it replaced: fenced");
    }
  }
  parts_.membership.joining(0, parts_.incarnation, now);
  uint64_t epoch = 0;
  {
    std::lock_guard lock(mutex_);
    epoch = epoch_ + 1;
  }
  const wire::ClusterView view = build_view(hellos, epoch);
  wire::BootstrapReply reply;
  *reply.mutable_view() = view;
  for (int node = 1; node < parts_.config.nodes; ++node) {
    channels[node]->write(reply, deadline_after(kHandshakeTimeout));
  }
  adopt(view, std::move(channels));
  {
    std::unique_lock lock(mutex_);
    const bool all =
        changed_.wait_until(lock, deadline_after(parts_.config.bootstrap_timeout), [&] {
          return int(ready_nodes_.size()) == parts_.config.nodes - 1 || !stop_reason_.empty() ||
                 reform_;
        });
    if (!stop_reason_.empty()) return false;
    if (!all || reform_) {
      throw PeerError("not every node connected its data transport in time (epoch " +
                      std::to_string(epoch) + ")");
    }
  }
  apply(parts_.membership.formed(Clock::now()));
  // This node's own agent is new: whatever the torn-down formation's jobs recorded of it
  // (a command that could not reach the old agent) is past.
  parts_.coordinator->on_node_up(0);

  if (!prove_data_plane()) return false;
  {
    std::lock_guard lock(mutex_);
    cluster_started_ = true;
  }
  set_state(parts_.membership.all_up() ? wire::DAEMON_STATE_READY : wire::DAEMON_STATE_DEGRADED);
  // Only now, with the root serving, may the members say they are: a job submitted through a
  // member that reports ready must not find the root still proving the data plane.
  wire::ControlMessage start;
  start.mutable_start();
  for (int node = 1; node < parts_.config.nodes; ++node) send_to(node, start);
  spdlog::info("node 0: cluster formed (epoch {}, {} nodes x {} ranks)", epoch, parts_.config.nodes,
               parts_.config.ranks_per_node);
  return true;
}

bool FormationLoop::prove_data_plane() {
  // The world barrier that ends a formation runs as a job: it proves the data plane. Its
  // outcome is shared with the coordinator's sink, which may answer after a stop returned.
  struct Outcome {
    std::mutex mutex;
    std::condition_variable done;
    std::optional<wire::JobResult> result;
  };
  auto outcome = std::make_shared<Outcome>();
  wire::JobSpec barrier;
  barrier.mutable_barrier()->set_iters(1);  // the configured algorithm
  parts_.coordinator->submit(parts_.with_defaults(barrier),
                             [outcome](const wire::ClientResponse& response) {
                               if (!response.has_result()) return;
                               std::lock_guard lock(outcome->mutex);
                               outcome->result = response.result();
                               outcome->done.notify_all();
                             });
  {
    // In slices, so a stop (which cancels the barrier through the coordinator) ends the wait.
    std::unique_lock lock(outcome->mutex);
    while (!outcome->done.wait_for(lock, std::chrono::milliseconds(200),
                                   [&] { return outcome->result.has_value(); })) {
      lock.unlock();
      const bool stop = stopping();
      lock.lock();
      if (stop) return false;
    }
  }
  const std::optional<wire::JobResult>& result = outcome->result;
  if (!result->ok()) throw PeerError("the world barrier failed: " + result->error());
  return true;
}

bool FormationLoop::serve_as_root() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (!stop_reason_.empty()) return false;
    // The cluster re-forms when a node waits to join, or a data connection broke (after a
    // heartbeat interval: a node that died takes its control link down too, and is then
    // waited for), but only once every node that is not serving has a joiner waiting:
    // re-forming earlier would only wait for the missing one.
    const auto waiting = parts_.join->waiting();
    bool all_back = true;
    for (int node = 1; node < parts_.config.nodes && all_back; ++node) {
      const bool serving = parts_.membership.state(node) == wire::NODE_STATE_UP ||
                           parts_.membership.state(node) == wire::NODE_STATE_SUSPECT;
      if (!serving && std::find(waiting.begin(), waiting.end(), node) == waiting.end()) {
        all_back = false;
      }
    }
    const bool broken = reform_ && Clock::now() >= reform_at_ + parts_.config.heartbeat;
    if (all_back && (!waiting.empty() || broken)) {
      spdlog::info("node 0: the cluster re-forms ({})",
                   waiting.empty() ? "a data connection broke" : "node(s) waiting to join");
      return true;
    }
    changed_.wait_for(lock,
                      std::min<Clock::duration>(parts_.config.heartbeat, std::chrono::seconds(1)));
  }
}

void FormationLoop::run_member() {
  Deadline deadline = deadline_after(parts_.config.bootstrap_timeout);
  for (;;) {
    bool lost = false;
    bool formed = false;
    try {
      formed = form_as_member(deadline);
      if (!formed) return;
      if (!serve_as_member(lost)) return;
    } catch (const InvalidArgument&) {
      throw;  // refused by the root: a configuration to fix
    } catch (const JoinGaveUp&) {
      throw;  // retrying would give up at once, again and again until the deadline
    } catch (const Error& e) {
      // The root went away or stalled while this node was joining: it retries until the
      // deadline.
      if (Clock::now() >= deadline) throw;
      spdlog::warn("node {}: joining failed: {}; trying again", parts_.config.node_rank, e.what());
      pause_if_port_down(e);
      if (stopping()) return;
      lost = true;
    }
    teardown(lost ? "lost the root" : "the root re-forms the cluster");
    // A formed cluster that ends gives the root --rejoin-timeout to come back; a join that
    // failed keeps the deadline it had.
    if (formed) deadline = deadline_after(parts_.config.rejoin_timeout);
  }
}

bool FormationLoop::form_as_member(Deadline deadline) {
  {
    std::lock_guard lock(mutex_);
    state_ =
        cluster_started_ || epoch_ ? wire::DAEMON_STATE_FORMING : wire::DAEMON_STATE_BOOTSTRAPPING;
  }
  const wire::NodeHello mine = open_formation();
  std::unique_ptr<BlockingChannel> channel;
  wire::ClusterView view;
  auto backoff = kFirstBackoff;
  for (int attempt = 1;; ++attempt) {
    try {
      // Short connection attempts, and the channel where request_stop() can cut a wait short.
      channel = BlockingChannel::connect(
          parts_.config.bootstrap, std::min(deadline, deadline_after(std::chrono::seconds(1))));
      {
        std::lock_guard lock(mutex_);
        if (!stop_reason_.empty()) return false;
        joining_ = channel.get();
      }
      view = bootstrap_join(*channel, mine, parts_.secret, deadline);
      std::lock_guard lock(mutex_);
      joining_ = nullptr;
      break;
    } catch (const InvalidArgument&) {
      std::lock_guard lock(mutex_);
      joining_ = nullptr;
      throw;  // refused by the root: a configuration to fix
    } catch (const std::exception& e) {
      {
        std::lock_guard lock(mutex_);
        joining_ = nullptr;
      }
      if (stopping()) return false;
      if (Clock::now() + backoff >= deadline) {
        throw JoinGaveUp(
            "could not join the root at " + parts_.config.bootstrap.str() + " after " +
            std::to_string(attempt) + " attempts (" + e.what() +
            "); gave up at the deadline (--bootstrap-timeout at start, --rejoin-timeout "
            "after losing the root)");
      }
      spdlog::info("node {}: joining the root at {}: {}; again in {} ms", parts_.config.node_rank,
                   parts_.config.bootstrap.str(), e.what(), backoff.count());
      std::unique_lock lock(mutex_);
      changed_.wait_for(lock, backoff, [&] { return !stop_reason_.empty(); });
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }
  const auto now = Clock::now();
  for (const auto& info : view.node()) {
    parts_.membership.joining(static_cast<int>(info.node_rank()), info.incarnation(), now);
  }
  std::vector<std::unique_ptr<BlockingChannel>> channels(parts_.config.nodes);
  channels[0] = std::move(channel);
  adopt(view, std::move(channels));
  wire::ControlMessage ready;
  ready.mutable_ready()->set_node_rank(parts_.config.node_rank);
  send_to(0, ready);
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline_after(parts_.config.bootstrap_timeout), [&] {
    return cluster_started_ || !stop_reason_.empty() || root_lost_ || reform_;
  });
  if (!stop_reason_.empty()) return false;
  if (!cluster_started_) {
    throw PeerError(root_lost_ ? "lost the root while joining: " + root_lost_why_
                               : "the root did not start the cluster");
  }
  lock.unlock();
  apply(parts_.membership.formed(Clock::now()));
  set_state(parts_.membership.all_up() ? wire::DAEMON_STATE_READY : wire::DAEMON_STATE_DEGRADED);
  spdlog::info("node {}: cluster formed (epoch {}, {} nodes x {} ranks)", parts_.config.node_rank,
               view.epoch(), parts_.config.nodes, parts_.config.ranks_per_node);
  return true;
}

bool FormationLoop::serve_as_member(bool& lost) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !stop_reason_.empty() || root_lost_ || reform_; });
  lost = root_lost_;
  return stop_reason_.empty();
}

wire::NodeHello FormationLoop::open_formation() {
  auto formation = std::make_unique<FormationTransports>(parts_.config, parts_.node, parts_.secret,
                                                         parts_.incarnation);
  wire::NodeHello hello = parts_.base_hello();
  formation->fill_hello(hello);
  std::lock_guard lock(mutex_);
  formation_ = std::move(formation);
  return hello;
}

void FormationLoop::adopt(const wire::ClusterView& view,
                          std::vector<std::unique_ptr<BlockingChannel>> channels) {
  const uint64_t epoch = view.epoch();
  {
    std::lock_guard lock(mutex_);
    view_ = view;
    epoch_ = epoch;
    ready_nodes_.clear();
    cluster_started_ = false;
    reform_ = false;
    root_lost_ = false;
  }
  wire::ControlMessage heartbeat;
  heartbeat.mutable_heartbeat()->set_node_rank(parts_.config.node_rank);
  heartbeat.mutable_heartbeat()->set_incarnation(parts_.incarnation);
  std::vector<std::unique_ptr<Link>> links(parts_.config.nodes);
  for (int node = 0; node < parts_.config.nodes; ++node) {
    if (channels[node]) {
      links[node] = std::make_unique<Link>(std::move(channels[node]), node, parts_.config.heartbeat,
                                           heartbeat);
    }
  }
  NodeAgent::Reporter reporter;
  if (is_root()) {
    reporter = [this](const wire::NodeJobReport& report) { parts_.coordinator->on_report(report); };
  } else {
    reporter = [this](const wire::NodeJobReport& report) {
      wire::ControlMessage message;
      *message.mutable_report() = report;
      try {
        send_to(0, message);
      } catch (const std::exception& e) {
        spdlog::warn("node {}: a job report could not reach the root: {}", parts_.config.node_rank,
                     e.what());
      }
    };
  }
  {
    std::lock_guard lock(links_mutex_);
    links_ = std::move(links);
    agent_ = std::make_unique<NodeAgent>(
        parts_.node, parts_.metrics, parts_.limits, parts_.progress,
        [this](Deadline deadline) { formation_->flush_all(deadline); }, std::move(reporter));
  }
  formation_->on_refused([this](const std::string& kind) { parts_.metrics.error(kind); });
  formation_->on_peer_down(
      [this, epoch](int peer, const std::string& why) { on_peer_down(epoch, peer, why); });
  formation_->connect(view, deadline_after(parts_.config.bootstrap_timeout));
  std::lock_guard lock(links_mutex_);
  for (int node = 0; node < parts_.config.nodes; ++node) {
    if (!links_[node]) continue;
    Link* link = links_[node].get();
    link_threads_.emplace_back([this, link, epoch] {
      if (is_root()) {
        read_from_node(*link, epoch);
      } else {
        read_from_root(*link, epoch);
      }
    });
  }
}

void FormationLoop::on_peer_down(uint64_t epoch, int peer, const std::string& why) {
  // A broken data connection: the job in flight fails naming it, and the cluster re-forms
  // to connect it again (a member asks the root to).
  parts_.node.doorbell().abort("node " + std::to_string(peer) + ": " + why);
  {
    std::lock_guard lock(mutex_);
    if (epoch != epoch_ || tearing_down_) return;
  }
  spdlog::warn("node {}: to node {}: {}: the cluster re-forms", parts_.config.node_rank, peer, why);
  if (is_root()) {
    std::lock_guard lock(mutex_);
    if (!reform_) reform_at_ = Clock::now();
    reform_ = true;
    changed_.notify_all();
  } else {
    try {
      send_to(0, reform_message(epoch, "node " + std::to_string(parts_.config.node_rank) +
                                           " lost its data connection to node " +
                                           std::to_string(peer) + ": " + why));
    } catch (const std::exception&) {
      // The root is gone too: losing it re-forms anyway.
    }
  }
}

void FormationLoop::teardown(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    tearing_down_ = true;
    if (state_ != wire::DAEMON_STATE_STOPPED) state_ = wire::DAEMON_STATE_FORMING;
  }
  const bool stopping_now = stopping();
  if (parts_.coordinator && !stopping_now) {
    for (int node = 1; node < parts_.config.nodes; ++node) {
      parts_.coordinator->on_node_down(node, "the cluster is re-forming (" + why + ")");
    }
  }
  parts_.node.doorbell().abort("the cluster is re-forming: " + why);
  std::vector<std::unique_ptr<Link>> links;
  std::unique_ptr<NodeAgent> agent;
  {
    std::lock_guard lock(links_mutex_);
    links.swap(links_);
    agent.swap(agent_);
  }
  uint64_t epoch = 0;
  {
    std::lock_guard lock(mutex_);
    epoch = epoch_;
  }
  for (auto& link : links) {
    if (!link) continue;
    if (is_root() && !stopping_now) {
      try {
        link->send(reform_message(epoch, why));
      } catch (const std::exception&) {
        // That node is gone: it joins again when it comes back.
      }
    }
    link->stop();
  }
  for (auto& thread : link_threads_) thread.join();
  link_threads_.clear();
  links.clear();
  agent.reset();  // stops its thread, after the PEs it runs were aborted
  std::unique_ptr<FormationTransports> formation;
  {
    std::lock_guard lock(mutex_);
    formation.swap(formation_);
  }
  if (formation) formation->shutdown();
  std::lock_guard lock(mutex_);
  tearing_down_ = false;
}

void FormationLoop::send_to(int node, const wire::ControlMessage& message) {
  std::lock_guard lock(links_mutex_);
  if (node == parts_.config.node_rank) {
    if (!agent_) throw PeerError("node " + std::to_string(node) + " is re-forming");
    return agent_->handle(message.command());
  }
  if (node < 0 || node >= static_cast<int>(links_.size()) || !links_[node]) {
    throw PeerError("no link to node " + std::to_string(node) + " (the cluster is re-forming)");
  }
  links_[node]->send(message);
}

void FormationLoop::lost(int node, uint64_t epoch, const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (epoch != epoch_ || tearing_down_ || state_ == wire::DAEMON_STATE_STOPPED) return;
    if (node == 0 && !is_root()) {
      root_lost_ = true;
      root_lost_why_ = why;
      changed_.notify_all();
    }
  }
  parts_.node.doorbell().abort("node " + std::to_string(node) + " is down: " + why);
  apply(parts_.membership.lost(node, why, Clock::now()));
  if (node == 0 && !is_root()) {
    parts_.relay.fail_all("lost the connection to the root (node 0 at " +
                          parts_.config.bootstrap.str() + "): " + why);
  }
}

void FormationLoop::read_from_node(Link& link, uint64_t epoch) {
  const int n = link.peer_node();
  try {
    for (;;) {
      wire::ControlMessage message;
      link.receive(message);
      apply(parts_.membership.heard(n, Clock::now()));
      if (message.has_report()) {
        // A node reports for itself only.
        if (message.report().node_rank() != uint32_t(n)) {
          throw PeerError("node " + std::to_string(n) + " sent a report for node " +
                          std::to_string(message.report().node_rank()));
        }
        parts_.coordinator->on_report(message.report());
      } else if (message.has_ready()) {
        std::lock_guard lock(mutex_);
        ready_nodes_.insert(n);
        changed_.notify_all();
      } else if (message.has_abandon()) {
        parts_.relay.abandon(n, message.abandon().request_id());
      } else if (message.has_relay()) {
        parts_.relay.serve(n, message.relay());
      } else if (message.has_reform()) {
        spdlog::warn("node 0: node {} asks to re-form: {}", n, message.reform().why());
        std::lock_guard lock(mutex_);
        if (message.reform().epoch() == epoch_ && !reform_) {
          reform_ = true;
          reform_at_ = Clock::now();
        }
        changed_.notify_all();
      } else if (message.has_shutdown()) {
        spdlog::info("node {} is leaving: {}", n, message.shutdown().reason());
        throw PeerError("node " + std::to_string(n) + " shut down: " + message.shutdown().reason());
      }
    }
  } catch (const std::exception& e) {
    lost(n, epoch, e.what());
  }
}

void FormationLoop::read_from_root(Link& link, uint64_t epoch) {
  try {
    for (;;) {
      wire::ControlMessage message;
      link.receive(message);
      apply(parts_.membership.heard(0, Clock::now()));
      if (message.has_command()) {
        std::lock_guard lock(links_mutex_);
        if (agent_) agent_->handle(message.command());
      } else if (message.has_start()) {
        std::lock_guard lock(mutex_);
        cluster_started_ = true;
        changed_.notify_all();
      } else if (message.has_relayed()) {
        parts_.relay.answer(message.relayed());
      } else if (message.has_reform()) {
        spdlog::info("node {}: the root re-forms the cluster: {}", parts_.config.node_rank,
                     message.reform().why());
        std::lock_guard lock(mutex_);
        reform_ = true;
        changed_.notify_all();
        return;
      } else if (message.has_shutdown()) {
        throw PeerError("the root shut down: " + message.shutdown().reason());
      }
    }
  } catch (const std::exception& e) {
    lost(0, epoch, e.what());
  }
}

}  // namespace symmesh
