#include "daemon/daemon.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/units.h"
#include "daemon/jobs/data_paths.h"
#include "daemon/jobs/host_memory.h"
#include "runtime/barrier.h"
#include "runtime/enum_words.h"
#include "transport/auth.h"
#include "transport/secret_file.h"
#include "transport/tcp/address.h"
#include "wire/chrome_trace.h"
#include "wire/enum_text.h"
#include "wire/json.h"

namespace symmesh {
namespace {

std::string hostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

uint64_t start_time_us() {
  return uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count());
}

// The root hears every node's heartbeats; a member hears the root's.
std::vector<bool> watched_by(const DaemonConfig& config) {
  std::vector<bool> watched(config.nodes, config.node_rank == 0);
  watched[0] = true;
  watched[config.node_rank] = false;
  return watched;
}

}  // namespace

Daemon::Daemon(DaemonConfig config)
    : config_(std::move(config)),
      started_(Clock::now()),
      started_unix_s_(
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count()),
      incarnation_(start_time_us()),
      membership_(config_.nodes, config_.node_rank, config_.heartbeat, watched_by(config_)),
      relay_(
          incarnation_,
          [this](int node, const wire::ControlMessage& message) { send_to(node, message); },
          [this] { return client_handlers(); }) {}

Daemon::~Daemon() {
  shutdown();
}

void Daemon::request_stop(const std::string& why) {
  std::lock_guard lock(stop_mutex_);
  if (!loop_) {
    if (early_stop_.empty()) early_stop_ = why;
    return;
  }
  loop_->request_stop(why);
}

int Daemon::run() {
  start();
  loop_->run();
  spdlog::info("node {}: stopping: {}", config_.node_rank, loop_->stop_reason());
  shutdown();
  return 0;
}

void Daemon::start() {
  secret_ = read_secret_file(config_.secret_file);
  data_dir_ = prepare_data_dir(config_.data_dir.empty() ? default_data_dir() : config_.data_dir);
  job_memory_ = config_.job_memory ? config_.job_memory : default_job_memory();
  cpu_budget_ = read_cpu_budget(allowed_cpus(), config_.cpus);
  fused_threads_ = default_fused_threads(cpu_budget_.usable, config_.ranks_per_node);
  spdlog::log(cpu_budget_.oversubscribed() ? spdlog::level::warn : spdlog::level::info,
              "node {}: {}; fused operators default to {} compute + {} comm threads per PE",
              config_.node_rank, cpu_budget_.describe(), fused_threads_.compute,
              fused_threads_.comm);
  if (config_.cpu_bind == wire::CPU_BIND_CORE) {
    cpus_ = CpuPlacement(cpu_budget_.allowed, config_.node_rank, config_.ranks_per_node);
  } else {
    cpus_ = CpuPlacement::by_numa_node(cpu_budget_.numa, config_.node_rank, config_.ranks_per_node);
  }
  spdlog::info("node {}: {}", config_.node_rank, cpus_.describe());
  NodeConfig node_config;
  node_config.node_rank = config_.node_rank;
  node_config.nodes = config_.nodes;
  node_config.ranks_per_node = config_.ranks_per_node;
  node_config.heap_size = config_.heap_size;
  node_config.wait_timeout = config_.wait_timeout;
  node_config.barrier =
      BarrierOptions{wire::from_wire(config_.barrier_algo, BarrierAlgo::kAuto, "--barrier-algo"),
                     config_.barrier_k};
  node_ = std::make_unique<Node>(node_config);

  if (is_root()) {
    coordinator_ = std::make_unique<Coordinator>(
        config_.nodes, config_.ranks_per_node, config_.wait_timeout,
        [this](int n, const wire::ControlMessage& message) { send_to(n, message); },
        [this] {
          return std::pair{progress_.done.load(), progress_.total.load()};
        });
  }
  // Bind everything first, so a port in use fails now with its address.
  control_ =
      std::make_unique<ControlServer>(HostPort{config_.listen, config_.control_port}, secret_);
  if (is_root()) {
    join_ =
        std::make_unique<JoinListener>(config_.bootstrap, secret_, base_hello(),
                                       [this](const std::string& kind) { metrics_.error(kind); });
  }
  attach_ = std::make_unique<AttachServer>(
      *node_,
      config_.attach_dir.empty() ? data_dir_ + "/attach-node" + std::to_string(config_.node_rank)
                                 : config_.attach_dir,
      config_.attach_uids, [this](const std::string& kind) { metrics_.error(kind); });
  {
    std::lock_guard lock(stop_mutex_);
    loop_ = std::make_unique<FormationLoop>(FormationLoop::Parts{
        config_, secret_, incarnation_, *node_, membership_, metrics_, relay_, coordinator_.get(),
        join_.get(), JobLimits{data_dir_, job_memory_, cpus_}, progress_,
        [this] { return base_hello(); },
        [this](wire::JobSpec spec) { return with_defaults(std::move(spec)); }});
    if (!early_stop_.empty()) loop_->request_stop(early_stop_);
  }
  status_ = std::make_unique<DaemonStatus>(DaemonStatus::Sources{
      config_, incarnation_, started_, started_unix_s_, cpu_budget_, fused_threads_, cpus_, *node_,
      membership_, *loop_, metrics_, coordinator_.get(), *control_, *attach_});
  if (config_.status_addr) {
    status_server_ = std::make_unique<StatusServer>(
        *config_.status_addr,
        StatusServer::Handlers{
            [this] { return status_->health(); },
            [this] { return status_json(status_->status()).dump(); },
            [this] { return status_->metrics_text(); },
            [this](uint64_t job_id) { return chrome_trace_json(job(job_id, true)).dump(); }});
    status_->served_at(status_server_->url());
  }
  spdlog::info(
      "node {} of {} (incarnation {}): {} ranks, heap {}, control {}, status {}, data {}, attach "
      "{}",
      config_.node_rank, config_.nodes, incarnation_, config_.ranks_per_node,
      format_bytes(config_.heap_size), control_->local_endpoint().str(),
      status_server_ ? status_server_->url() : "off", data_dir_, attach_->path());

  if (is_root()) {
    join_->on_joined([this] { loop_->notify(); });
    join_->fence_with([this](const wire::NodeHello& hello) { return fenced(hello); });
    join_->start();
  }
  // Status and the control port serve during bootstrap too (state: bootstrapping).
  control_->start(client_handlers());
}

ControlServer::Handlers Daemon::client_handlers() {
  return ControlServer::Handlers{
      [this] { return status_->status(); },
      [this](const wire::JobSpec& spec, ControlServer::Sink sink) {
        return submit(spec, std::move(sink));
      },
      [this](uint64_t job_id) { return cancel(job_id); },
      [this](uint64_t job_id, bool trace) { return job(job_id, trace); },
      [this](uint64_t job_id, ControlServer::Sink sink) { wait(job_id, std::move(sink)); },
      [this](const std::string& kind) { metrics_.error(kind); }};
}

wire::NodeHello Daemon::base_hello() const {
  wire::NodeHello hello;
  hello.set_protocol_version(kProtocolVersion);
  hello.set_node_rank(config_.node_rank);
  hello.set_incarnation(incarnation_);
  hello.set_nodes(config_.nodes);
  hello.set_ranks_per_node(config_.ranks_per_node);
  hello.set_heap_size(config_.heap_size);
  hello.set_hostname(hostname());
  hello.set_tcp_connections(config_.tcp_connections);
  hello.set_transport_request(wire::enum_text(config_.transport));
  hello.set_barrier_algo(config_.barrier_algo);
  hello.set_barrier_k(config_.barrier_k);
  if (control_) *hello.mutable_control_endpoint() = endpoint_message(control_->local_endpoint());
  if (status_server_) hello.set_status_url(status_server_->url());
  return hello;
}

std::string Daemon::fenced(const wire::NodeHello& hello) const {
  // An incarnation is its daemon's start time (microseconds since the epoch): one from further
  // ahead than any clock skew would fence its slot against every real restart.
  constexpr uint64_t kMaxAheadUs = uint64_t{24} * 3600 * 1000000;
  const int node = static_cast<int>(hello.node_rank());
  const uint64_t known = membership_.incarnation(node);
  if (hello.incarnation() < known) {
    return "node " + std::to_string(node) + " said hello with incarnation " +
           std::to_string(hello.incarnation()) + ", older than the daemon that replaced it (" +
           std::to_string(known) + "): fenced";
  }
  if (hello.incarnation() > start_time_us() + kMaxAheadUs) {
    return "node " + std::to_string(node) + " said hello with incarnation " +
           std::to_string(hello.incarnation()) +
           ", a start time more than a day ahead of node 0's clock: check the clocks";
  }
  return "";
}

void Daemon::send_to(int node, const wire::ControlMessage& message) {
  if (!loop_) throw PeerError("no link to node " + std::to_string(node) + " (not formed yet)");
  loop_->send_to(node, message);
}

void Daemon::shutdown() {
  std::string why = "the daemon stopped";
  {
    std::lock_guard lock(stop_mutex_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  if (loop_) why = loop_->enter_stopped().value_or(why);
  status_server_.reset();  // its handlers read what is torn down below
  if (join_) join_->stop();
  if (coordinator_) coordinator_->stop("node 0 (the root) is shutting down: " + why);
  if (loop_) loop_->say_goodbye(why);
  relay_.fail_all("node " + std::to_string(config_.node_rank) + " is shutting down");
  if (control_) control_->stop();
  if (attach_) attach_->stop();
  if (loop_) loop_->teardown(why);
  if (attach_) attached_pes().close_all("node " + std::to_string(config_.node_rank) + ": " + why);
}

}  // namespace symmesh
