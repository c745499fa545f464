#include "daemon/daemon.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

#include "common/chrome_trace.h"
#include "common/units.h"
#include "common/wire_json.h"
#include "daemon/bootstrap.h"
#include "daemon/jobs/data_paths.h"
#include "daemon/jobs/job.h"
#include "runtime/barrier.h"
#include "transport/auth.h"
#include "transport/secret_file.h"

namespace symmesh {
namespace {

std::string hostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

wire::Endpoint endpoint(const HostPort& at) {
  wire::Endpoint out;
  out.set_host(at.host);
  out.set_port(at.port);
  return out;
}

std::string text(const wire::Endpoint& at) {
  return at.host() + ":" + std::to_string(at.port());
}

}  // namespace

Daemon::Daemon(DaemonConfig config)
    : config_(std::move(config)),
      started_(Clock::now()),
      started_unix_s_(
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count()),
      incarnation_(uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count())) {}

Daemon::~Daemon() {
  shutdown();
}

void Daemon::request_stop(const std::string& why) {
  std::lock_guard lock(mutex_);
  if (stop_reason_.empty()) stop_reason_ = why;
  changed_.notify_all();
}

int Daemon::run() {
  secret_ = read_secret_file(config_.secret_file);
  data_dir_ = prepare_data_dir(config_.data_dir.empty() ? default_data_dir() : config_.data_dir);
  NodeConfig node_config;
  node_config.node_rank = config_.node_rank;
  node_config.nodes = config_.nodes;
  node_config.ranks_per_node = config_.ranks_per_node;
  node_config.heap_size = config_.heap_size;
  node_config.wait_timeout = config_.wait_timeout;
  node_config.barrier = BarrierOptions{parse_barrier_algo(config_.barrier_algo), config_.barrier_k};
  node_ = std::make_unique<Node>(node_config);

  // Bind everything first, so a port in use fails now with its address.
  control_ =
      std::make_unique<ControlServer>(HostPort{config_.listen, config_.control_port}, secret_);
  std::unique_ptr<Listener> bootstrap_listener;
  if (is_root()) bootstrap_listener = std::make_unique<Listener>(config_.bootstrap);
  HostPort data_at{config_.listen, 0};
  if (config_.nodes > 1) {
    TcpOptions tcp;
    tcp.connections_per_peer = config_.tcp_connections;
    tcp.op_timeout = config_.wait_timeout;
    tcp.incarnation = incarnation_;
    tcp_ = std::make_unique<TcpTransport>(config_.node_rank, config_.nodes, config_.ranks_per_node,
                                          node_->segment(), node_->doorbell(), secret_, tcp);
    tcp_->on_refused([this](const std::string& kind) { metrics_.error(kind); });
    data_at = tcp_->listen(HostPort{config_.listen, 0});
  }

  verbs_absent_ = open_verbs();
  if (config_.status_addr) {
    status_server_ = std::make_unique<StatusServer>(
        *config_.status_addr,
        StatusServer::Handlers{
            [this] { return health(); }, [this] { return status_json(status()).dump(); },
            [this] { return metrics_text(); },
            [this](uint64_t job_id) { return chrome_trace_json(job(job_id, true)).dump(); }});
  }

  wire::NodeHello hello;
  hello.set_protocol_version(kProtocolVersion);
  hello.set_node_rank(config_.node_rank);
  hello.set_incarnation(incarnation_);
  hello.set_nodes(config_.nodes);
  hello.set_ranks_per_node(config_.ranks_per_node);
  hello.set_heap_size(config_.heap_size);
  hello.add_transports("tcp");
  if (verbs_) {
    hello.add_transports("verbs");
    *hello.mutable_verbs() = verbs_->local_info();
  } else {
    hello.set_verbs_absent(verbs_absent_);
  }
  *hello.mutable_data_endpoint() = endpoint(data_at);
  *hello.mutable_control_endpoint() = endpoint(control_->local_endpoint());
  hello.set_hostname(hostname());
  hello.set_tcp_connections(config_.tcp_connections);
  hello.set_transport_request(config_.transport);
  hello.set_barrier_algo(config_.barrier_algo);
  hello.set_barrier_k(config_.barrier_k);
  if (status_server_) hello.set_status_url(status_server_->url());
  spdlog::info("node {} of {}: {} ranks, heap {}, control {}, data {}, status {}",
               config_.node_rank, config_.nodes, config_.ranks_per_node,
               format_bytes(config_.heap_size), control_->local_endpoint().str(), data_at.str(),
               status_server_ ? status_server_->url() : "off");

  // Status and the control port serve during bootstrap too (state: bootstrapping).
  control_->start(ControlServer::Handlers{
      [this] { return status(); },
      [this](const wire::JobSpec& spec, ControlServer::Sink sink) {
        return submit(spec, std::move(sink));
      },
      [this](uint64_t job_id) { return cancel(job_id); },
      [this](uint64_t job_id, bool trace) { return job(job_id, trace); },
      [this](uint64_t job_id, ControlServer::Sink sink) { wait(job_id, std::move(sink)); },
      [this](const std::string& kind) { metrics_.error(kind); }});

  const Deadline deadline = deadline_after(config_.bootstrap_timeout);
  if (is_root()) {
    std::vector<std::unique_ptr<BlockingChannel>> channels;
    auto view = bootstrap_root(*bootstrap_listener, hello, secret_, deadline, channels);
    bootstrap_listener.reset();
    std::lock_guard lock(mutex_);  // status() reads the view from the control threads
    view_ = std::move(view);
    links_.resize(config_.nodes);
    for (int n = 1; n < config_.nodes; ++n)
      links_[n] = std::make_unique<Link>(std::move(channels[n]), n);
  } else {
    std::unique_ptr<BlockingChannel> channel;
    auto view = bootstrap_join(config_.bootstrap, hello, secret_, deadline, channel);
    std::lock_guard lock(mutex_);
    view_ = std::move(view);
    links_.push_back(std::make_unique<Link>(std::move(channel), 0));
  }

  if (tcp_) {
    std::vector<HostPort> endpoints;
    for (const auto& info : view_.node()) {
      endpoints.push_back(HostPort{info.data_endpoint().host(),
                                   static_cast<uint16_t>(info.data_endpoint().port())});
    }
    tcp_->connect(endpoints, deadline_after(config_.bootstrap_timeout));
    choose_transports();
    for (NetworkTransport* network : {static_cast<NetworkTransport*>(tcp_.get()),
                                      static_cast<NetworkTransport*>(verbs_.get())}) {
      if (!network) continue;
      const std::string lost = network == tcp_.get() ? "data connection lost" : "verbs failed";
      network->on_peer_down([this, lost](int peer, const std::string& why) {
        node_->doorbell().abort(lost + " to node " + std::to_string(peer) + ": " + why);
        if (coordinator_) coordinator_->on_node_down(peer, lost + ": " + why);
      });
    }
  }

  if (is_root()) {
    coordinator_ = std::make_unique<Coordinator>(
        config_.nodes, config_.ranks_per_node, config_.wait_timeout,
        [this](int n, const wire::ControlMessage& message) {
          if (n == 0) return agent_->handle(message.command());
          links_.at(n)->send(message);
        },
        [this] {  // PE 0 runs here, on node 0
          const progress::JobProgress& now = agent_->progress();
          return std::pair{now.done.load(), now.total.load()};
        });
    agent_ = std::make_unique<NodeAgent>(
        *node_, metrics_, data_dir_, [this](Deadline deadline) { flush_all(deadline); },
        [this](const wire::NodeJobReport& report) { coordinator_->on_report(report); });
    for (int n = 1; n < config_.nodes; ++n) {
      link_threads_.emplace_back([this, n] { read_from_node(*links_[n]); });
    }
    std::unique_lock lock(mutex_);
    ready_nodes_ += 1;  // the root itself
    const bool all = changed_.wait_until(lock, deadline_after(config_.bootstrap_timeout), [&] {
      return ready_nodes_ == config_.nodes || !stop_reason_.empty();
    });
    if (!all) throw PeerError("bootstrap: not every node connected its data transport in time");
  } else {
    agent_ = std::make_unique<NodeAgent>(
        *node_, metrics_, data_dir_, [this](Deadline deadline) { flush_all(deadline); },
        [this](const wire::NodeJobReport& report) {
          wire::ControlMessage message;
          *message.mutable_report() = report;
          try {
            links_[0]->send(message);
          } catch (const std::exception& e) {
            mark_root_down(e.what());
          }
        });
    link_threads_.emplace_back([this] { read_from_root(*links_[0]); });
    wire::ControlMessage ready;
    ready.mutable_ready()->set_node_rank(config_.node_rank);
    links_[0]->send(ready);
  }

  if (is_root()) {
    wire::ControlMessage start;
    start.mutable_start();
    for (int n = 1; n < config_.nodes; ++n) links_[n]->send(start);
    // The world barrier that ends bootstrap runs as the cluster's first job.
    wire::JobSpec barrier;
    barrier.mutable_barrier()->set_iters(1);  // the configured algorithm
    std::mutex mutex;
    std::condition_variable done_cv;
    std::optional<wire::JobResult> outcome;
    coordinator_->submit(with_defaults(barrier), [&](const wire::ClientResponse& response) {
      if (!response.has_result()) return;
      std::lock_guard lock(mutex);
      outcome = response.result();
      done_cv.notify_all();
    });
    std::unique_lock lock(mutex);
    done_cv.wait(lock, [&] { return outcome.has_value(); });
    if (!outcome->ok()) throw PeerError("bootstrap: the world barrier failed: " + outcome->error());
    std::lock_guard state_lock(mutex_);
    state_ = "ready";
    cluster_started_ = true;
  } else {
    std::unique_lock lock(mutex_);
    changed_.wait(lock,
                  [&] { return cluster_started_ || !stop_reason_.empty() || !root_down_.empty(); });
    if (!root_down_.empty()) throw PeerError("bootstrap: lost the root: " + root_down_);
  }
  spdlog::info("node {}: cluster ready ({} nodes x {} ranks)", config_.node_rank, config_.nodes,
               config_.ranks_per_node);
  wait_for_stop();
  shutdown();
  return 0;
}

void Daemon::wait_for_stop() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !stop_reason_.empty(); });
  spdlog::info("node {}: stopping: {}", config_.node_rank, stop_reason_);
}

void Daemon::shutdown() {
  std::string why;
  {
    std::lock_guard lock(mutex_);
    if (state_ == "stopped") return;
    state_ = "stopped";
    why = stop_reason_.empty() ? "the daemon stopped" : stop_reason_;
  }
  status_server_.reset();  // its handlers read what is torn down below
  if (tcp_) tcp_->expect_shutdown();
  if (coordinator_) coordinator_->stop("node 0 (the root) is shutting down: " + why);
  // Tell the peers: the root tells every node, a node tells the root.
  wire::ControlMessage bye;
  bye.mutable_shutdown()->set_node_rank(config_.node_rank);
  bye.mutable_shutdown()->set_reason(why);
  for (auto& link : links_) {
    if (!link) continue;
    try {
      link->send(bye);
    } catch (const std::exception&) {
      // Already gone.
    }
  }
  if (agent_) agent_->stop();
  {
    std::lock_guard lock(mutex_);
    for (auto& [request, sink] : forwarded_) {
      wire::ClientResponse response;
      response.set_error("node " + std::to_string(config_.node_rank) + " is shutting down");
      sink(response);
    }
    forwarded_.clear();
  }
  if (control_) control_->stop();
  for (auto& link : links_) {
    if (link) link->stop();
  }
  for (auto& thread : link_threads_) thread.join();
  link_threads_.clear();
  if (tcp_) tcp_->shutdown();
  if (verbs_) verbs_->shutdown();
}

std::string Daemon::open_verbs() {
  if (config_.transport == "tcp") return "--transport tcp";
  if (config_.nodes == 1) return "a single node has no peers";
  VerbsOptions options;
  options.device = VerbsDeviceOptions{config_.rdma_device, config_.rdma_gid_index};
  options.op_timeout = config_.wait_timeout;
  options.progress_thread = config_.verbs_progress == "thread";
  try {
    verbs_ =
        std::make_unique<VerbsTransport>(config_.node_rank, config_.nodes, config_.ranks_per_node,
                                         node_->segment(), node_->doorbell(), options);
    spdlog::info("node {}: verbs on {}", config_.node_rank, verbs_->device().describe());
    return {};
  } catch (const InvalidArgument&) {
    throw;  // a wrong --rdma-device or --rdma-gid-index is the user's to fix
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (why.rfind("verbs: ", 0) == 0) why = why.substr(7);
    if (config_.transport == "verbs") {
      throw InvalidArgument("--transport verbs: " + why + " (use --transport auto or tcp here)");
    }
    spdlog::info("node {}: no verbs ({}); peers use tcp", config_.node_rank, why);
    return why;
  }
}

void Daemon::choose_transports() {
  std::vector<std::string> reasons(config_.nodes);
  for (const auto& info : view_.node()) {
    const int n = static_cast<int>(info.node_rank());
    if (n == config_.node_rank) continue;
    const std::string peer = "node " + std::to_string(n);
    if (verbs_ && info.has_verbs()) {
      verbs_->connect(n, info.verbs());
      node_->set_transport(n, verbs_.get());
      node_->set_wait_policy(verbs_wait_policy());
      reasons[n] =
          "verbs: " + verbs_->device().describe() +
          (config_.transport == "verbs" ? ", forced by --transport" : ", both ends have a device");
      continue;
    }
    if (config_.transport == "verbs") {
      throw PeerError("--transport verbs: " + peer + " cannot use verbs (" + info.verbs_absent() +
                      "); give every node a device, or use auto");
    }
    std::string why = "forced by --transport";
    if (config_.transport != "tcp") {
      why = verbs_ ? "verbs: " + peer + " has none (" + info.verbs_absent() + ")"
                   : "verbs: " + std::string(verbs_absent_);
    }
    node_->set_transport(n, tcp_.get());
    reasons[n] = "tcp: " + why;
  }
  const bool any_verbs = std::any_of(reasons.begin(), reasons.end(),
                                     [](const std::string& r) { return r.rfind("verbs", 0) == 0; });
  if (any_verbs && needs_device_atomics(*verbs_)) {
    device_atomics_ = std::make_unique<DeviceAtomicsTransport>(
        node_->transport_to(config_.node_rank), *verbs_, node_->segment(), node_->doorbell());
    node_->set_transport(config_.node_rank, device_atomics_.get());
  }
  std::lock_guard lock(mutex_);  // status() reads them
  peer_reason_ = std::move(reasons);
}

void Daemon::flush_all(Deadline deadline) {
  if (tcp_) tcp_->flush_all(deadline);
  if (verbs_) verbs_->flush_all(deadline);
}

bool Daemon::peer_transport_up(int node) const {
  if (node_->transport_name(node) == "verbs") return verbs_->peer_up(node);
  return tcp_ && tcp_->peer_up(node);
}

void Daemon::read_from_node(Link& link) {
  const int n = link.peer_node();
  try {
    for (;;) {
      wire::ControlMessage message;
      link.receive(message);
      if (message.has_report()) {
        coordinator_->on_report(message.report());
      } else if (message.has_ready()) {
        std::lock_guard lock(mutex_);
        ++ready_nodes_;
        changed_.notify_all();
      } else if (message.has_abandon()) {
        abandon_forwarded(n, message.abandon().request_id());
      } else if (message.has_forward()) {
        const uint64_t request = message.forward().request_id();
        coordinator_->submit(with_defaults(message.forward().spec()),
                             [this, &link, n, request](const wire::ClientResponse& response) {
                               wire::ControlMessage reply;
                               {
                                 std::lock_guard lock(forward_mutex_);
                                 if (response.has_event() && response.event().state() == "queued") {
                                   forwarded_jobs_[{n, request}] = response.event().job_id();
                                 } else if (!response.has_event()) {
                                   forwarded_jobs_.erase({n, request});
                                 }
                               }
                               if (response.has_event()) {
                                 reply.mutable_started()->set_request_id(request);
                                 reply.mutable_started()->set_job_id(response.event().job_id());
                                 *reply.mutable_started()->mutable_event() = response.event();
                               } else {
                                 reply.mutable_finished()->set_request_id(request);
                                 *reply.mutable_finished()->mutable_result() = response.result();
                               }
                               link.send(reply);  // queued: never blocks the coordinator
                             });
      } else if (message.has_shutdown()) {
        spdlog::info("node {} is leaving: {}", n, message.shutdown().reason());
        throw PeerError("node " + std::to_string(n) + " shut down: " + message.shutdown().reason());
      }
    }
  } catch (const std::exception& e) {
    std::string why = e.what();
    {
      std::lock_guard lock(mutex_);
      if (state_ == "stopped") return;
      nodes_down_[n] = why;
      state_ = "degraded";
    }
    metrics_.error("peer_down");
    spdlog::error("node {} ({}) is down: {}", n, link.peer_name(), why);
    coordinator_->on_node_down(n, why);
  }
}

void Daemon::read_from_root(Link& link) {
  try {
    for (;;) {
      wire::ControlMessage message;
      link.receive(message);
      if (message.has_command()) {
        agent_->handle(message.command());
      } else if (message.has_start()) {
        std::lock_guard lock(mutex_);
        cluster_started_ = true;
        state_ = "ready";
        changed_.notify_all();
      } else if (message.has_started() || message.has_finished()) {
        const uint64_t request = message.has_started() ? message.started().request_id()
                                                       : message.finished().request_id();
        ControlServer::Sink sink;
        {
          std::lock_guard lock(mutex_);
          auto it = forwarded_.find(request);
          if (it == forwarded_.end()) continue;
          sink = it->second;
          if (message.has_finished()) forwarded_.erase(it);
        }
        wire::ClientResponse response;
        if (message.has_started()) {
          *response.mutable_event() = message.started().event();
          response.mutable_event()->set_job_id(message.started().job_id());
        } else {
          *response.mutable_result() = message.finished().result();
        }
        sink(response);
      } else if (message.has_shutdown()) {
        throw PeerError("the root shut down: " + message.shutdown().reason());
      }
    }
  } catch (const std::exception& e) {
    mark_root_down(e.what());
  }
}

void Daemon::mark_root_down(const std::string& why) {
  std::map<uint64_t, ControlServer::Sink> orphans;
  {
    std::lock_guard lock(mutex_);
    if (state_ == "stopped" || !root_down_.empty()) return;
    root_down_ = why;
    state_ = "degraded";
    metrics_.error("peer_down");
    orphans.swap(forwarded_);
    changed_.notify_all();
  }
  spdlog::error("node {}: lost the root (node 0, {}): {}", config_.node_rank,
                config_.bootstrap.str(), why);
  node_->doorbell().abort("lost the root: " + why);
  for (auto& [request, sink] : orphans) {
    wire::ClientResponse response;
    response.set_error("lost the connection to the root (node 0 at " + config_.bootstrap.str() +
                       "): " + why);
    sink(response);
  }
}

wire::JobSpec Daemon::with_defaults(wire::JobSpec spec) const {
  if (spec.has_barrier()) {
    auto* job = spec.mutable_barrier();
    if (job->algo().empty()) job->set_algo(config_.barrier_algo);
    if (job->k() == 0) job->set_k(config_.barrier_k);
  }
  return spec;
}

ControlServer::Abandon Daemon::submit(const wire::JobSpec& spec, ControlServer::Sink sink) {
  {
    std::lock_guard lock(mutex_);
    if (state_ != "ready" && state_ != "degraded") {
      throw PeerError("the cluster is not ready yet (state: " + state_ + ")");
    }
  }
  // Checked here for the client's sake; every node checks its own paths again before it runs.
  check_job_spec(confine_job_paths(spec, data_dir_), config_.nodes, config_.ranks_per_node);
  if (is_root()) {
    const uint64_t job_id = coordinator_->submit(with_defaults(spec), std::move(sink));
    return [this, job_id] {
      try {
        coordinator_->cancel(job_id, "its client left");
      } catch (const InvalidArgument&) {
        // It ended meanwhile.
      }
    };
  }
  uint64_t request = 0;
  {
    std::lock_guard lock(mutex_);
    if (!root_down_.empty()) {
      throw PeerError("lost the connection to the root (node 0 at " + config_.bootstrap.str() +
                      "): " + root_down_);
    }
    request = next_request_++;
    forwarded_[request] = std::move(sink);
  }
  wire::ControlMessage forward;
  forward.mutable_forward()->set_request_id(request);
  *forward.mutable_forward()->mutable_spec() = spec;
  links_[0]->send(forward);
  return [this, request] {
    {
      std::lock_guard lock(mutex_);
      if (!forwarded_.erase(request)) return;  // it ended meanwhile
    }
    wire::ControlMessage abandon;
    abandon.mutable_abandon()->set_request_id(request);
    links_[0]->send(abandon);
  };
}

void Daemon::abandon_forwarded(int node, uint64_t request) {
  uint64_t job_id = 0;
  {
    std::lock_guard lock(forward_mutex_);
    auto it = forwarded_jobs_.find({node, request});
    if (it == forwarded_jobs_.end()) return;  // it ended meanwhile
    job_id = it->second;
  }
  spdlog::info("job {}: its client (at node {}) left: cancelling it", job_id, node);
  try {
    coordinator_->cancel(job_id, "its client left");
  } catch (const InvalidArgument&) {
    // It ended meanwhile.
  }
}

void Daemon::wait(uint64_t job_id, ControlServer::Sink sink) {
  if (!is_root() || !coordinator_) {
    throw InvalidArgument("jobs live at the root, node 0 (its control port is in symmesh status)");
  }
  coordinator_->watch(job_id, std::move(sink));
}

wire::JobRecord Daemon::job(uint64_t job_id, bool trace) {
  if (!is_root() || !coordinator_) {
    throw InvalidArgument("jobs live at the root, node 0 (its control port is in symmesh status)");
  }
  return coordinator_->job(job_id, trace);
}

wire::JobRecord Daemon::cancel(uint64_t job_id) {
  if (!is_root() || !coordinator_) {
    throw InvalidArgument(
        "jobs are cancelled at the root, node 0 (its control port is in "
        "symmesh status)");
  }
  return coordinator_->cancel(job_id);
}

wire::StatusReply Daemon::status() {
  wire::StatusReply reply;
  reply.set_node_rank(config_.node_rank);
  reply.set_nodes(config_.nodes);
  reply.set_ranks_per_node(config_.ranks_per_node);
  reply.set_version(PROJECT_VERSION);
  if (status_server_) reply.set_status_url(status_server_->url());
  reply.set_uptime_s(std::chrono::duration<double>(Clock::now() - started_).count());
  if (node_) {
    reply.set_heap_size(node_->heap_capacity());
    reply.set_heap_used(node_->heap_used());
    reply.set_heap_job_peak(node_->heap_job_peak());
  }
  std::lock_guard lock(mutex_);
  reply.set_state(state_);
  for (const auto& info : view_.node()) {
    auto* node = reply.add_node();
    node->set_node_rank(info.node_rank());
    node->set_hostname(info.hostname());
    node->set_control_endpoint(text(info.control_endpoint()));
    node->set_ranks(view_.ranks_per_node());
    node->set_status_url(info.status_url());
    if (static_cast<int>(info.node_rank()) == config_.node_rank) continue;
    auto* peer = reply.add_peer();
    peer->set_node_rank(info.node_rank());
    const int n = static_cast<int>(info.node_rank());
    const bool chosen = n < static_cast<int>(peer_reason_.size()) && !peer_reason_[n].empty();
    peer->set_transport(chosen ? node_->transport_name(n) : "pending");
    peer->set_reason(chosen ? peer_reason_[n] : "bootstrapping");
    peer->set_data_endpoint(text(info.data_endpoint()));
    bool up = chosen && peer_transport_up(n) && !nodes_down_.count(n);
    if (n == 0 && !root_down_.empty()) up = false;
    peer->set_up(up);
  }
  // The coordinator and the agent exist (and stay) once the cluster has started.
  const bool started = state_ == "ready" || state_ == "degraded" || state_ == "stopped";
  if (!started) return reply;
  if (coordinator_) {
    reply.set_jobs_run(coordinator_->jobs_run());
    reply.set_jobs_failed(coordinator_->jobs_failed());
    reply.set_jobs_queued(coordinator_->jobs_queued());
    for (auto& job : coordinator_->jobs()) *reply.add_jobs() = std::move(job);
  } else if (agent_) {
    reply.set_jobs_run(agent_->jobs_run());
    reply.set_jobs_failed(agent_->jobs_failed());
  }
  return reply;
}

StatusServer::Health Daemon::health() {
  const wire::StatusReply now = status();
  std::string down;
  for (const auto& peer : now.peer()) {
    if (!peer.up() && now.state() != "bootstrapping") {
      down += (down.empty() ? "" : "; ") + std::string("peer node ") +
              std::to_string(peer.node_rank()) + " is down (" + peer.transport() + ": " +
              peer.reason() + ")";
    }
  }
  if (!down.empty()) return {false, down};
  if (now.state() != "ready") return {false, "state " + now.state()};
  return {true, ""};
}

std::string Daemon::metrics_text() {
  const wire::StatusReply now = status();
  using Sample = Metrics::Sample;
  std::vector<Sample> gauges;
  const std::string node = std::to_string(config_.node_rank);
  gauges.push_back({"symmesh_info",
                    "This daemon: its node rank and version (value 1).",
                    {{"node", node}, {"version", now.version()}},
                    1});
  gauges.push_back({"symmesh_up",
                    "1 when the daemon is in the cluster and every peer is up.",
                    {},
                    health().ok ? 1.0 : 0.0});
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
    for (const NetworkTransport* transport : {static_cast<const NetworkTransport*>(tcp_.get()),
                                              static_cast<const NetworkTransport*>(verbs_.get())}) {
      if (!transport) continue;
      for (int n = 0; n < config_.nodes; ++n) {
        if (n == config_.node_rank) continue;
        gauges.push_back(
            {c.family,
             c.help,
             {{"peer", std::to_string(n)}, {"transport", std::string(transport->name())}},
             double(transport->traffic().totals(n).*c.field)});
      }
    }
  }
  gauges.push_back({"symmesh_jobs_queued",
                    "Jobs waiting to run (the root only).",
                    {},
                    double(now.jobs_queued())});
  for (auto& sample : process_samples()) gauges.push_back(std::move(sample));
  gauges.push_back({"process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    {},
                    started_unix_s_});
  return metrics_.render(gauges);
}

}  // namespace symmesh
