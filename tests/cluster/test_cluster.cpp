#include "tests/cluster/test_cluster.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "common/errors.h"

extern char** environ;

namespace symmesh::testing {

// A port for a daemon to bind later. Not one the kernel hands out by itself: every outgoing
// connection (of any test running alongside) takes its source port from the ephemeral range,
// so a port found free there may be taken before the daemon binds it. Below that range, at
// random, probed free.
uint16_t free_port() {
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  thread_local std::mt19937 random(std::random_device{}());
  if (ephemeral_low > 10001) {
    std::uniform_int_distribution<int> pick(10000, ephemeral_low - 1);
    for (int attempt = 0; attempt < 100; ++attempt) {
      const auto port = static_cast<uint16_t>(pick(random));
      try {
        Listener probe(HostPort{"127.0.0.1", port});
        return port;
      } catch (const std::exception&) {
        // In use: another.
      }
    }
  }
  Listener probe(HostPort{"127.0.0.1", 0});
  return probe.local_endpoint().port;
}

std::string bin_dir() {
  return SYMMESH_BIN_DIR;
}

CliRun cli(const std::string& args) {
  return shell(bin_dir() + "/symmesh " + args);
}

CliRun shell(const std::string& line) {
  const std::string command = line + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  const int status = pclose(pipe);
  return {WEXITSTATUS(status), out};
}

void write_secret_file(const std::string& path, const std::string& secret) {
  std::ofstream(path) << secret << "\n";
  chmod(path.c_str(), 0600);
}

std::string target(TestCluster& cluster, int node) {
  return "--daemon " + cluster.control(node).str() + " --secret-file " + cluster.secret_file();
}

std::vector<CliRun> launch_on_every_node(TestCluster& cluster, const std::string& command,
                                         int nodes, const std::string& options) {
  std::vector<std::future<CliRun>> runs;
  for (int node = 0; node < nodes; ++node) {
    runs.push_back(std::async(std::launch::async, [&cluster, node, command, options] {
      return cli(target(cluster, node) + " --timeout 300s launch " + options + " -- " + command);
    }));
  }
  std::vector<CliRun> out;
  for (auto& run : runs) out.push_back(run.get());
  return out;
}

uint64_t submit_job(TestCluster& cluster, const std::string& submit_args) {
  const CliRun run = cli(target(cluster) + " submit " + submit_args + " --json");
  const auto json = nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  if (run.exit_code != 0 || !json.contains("job_id")) {
    ADD_FAILURE() << "submit " << submit_args << ": " << run.out;
    return 0;
  }
  return json["job_id"].get<uint64_t>();
}

uint64_t find_job(TestCluster& cluster, const std::string& kind, const std::string& state,
                  int node) {
  CliRun run = cli(target(cluster, node) + " jobs --json");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  const auto listed = nlohmann::json::parse(run.out);  // alive for the loop, unlike a temporary
  for (const auto& job : listed["jobs"]) {
    if (job["kind"] == kind && job["state"] == state) return job["job_id"];
  }
  return 0;
}

uint64_t wait_for_job(TestCluster& cluster, const std::string& kind, const std::string& state) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < 6000 && std::chrono::steady_clock::now() < deadline; ++i) {
    if (const uint64_t id = find_job(cluster, kind, state)) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

DaemonProcess::DaemonProcess(const std::vector<std::string>& args, const std::string& log_path)
    : log_path_(log_path) {
  std::vector<char*> argv;
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  const int error = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) throw Error("cannot start " + args[0] + ": " + std::strerror(error));
}

DaemonProcess::~DaemonProcess() {
  if (running()) stop(SIGKILL);
}

bool DaemonProcess::running() {
  if (exited_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    exited_ = true;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    how_ = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                             : "signal " + std::to_string(WTERMSIG(status));
    return false;
  }
  return true;
}

int DaemonProcess::stop(int signal, std::chrono::seconds timeout) {
  if (!running()) return status_;
  kill(pid_, signal);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling an exit, bounded
  }
  if (running()) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    exited_ = true;
    status_ = -1;
  }
  return status_;
}

std::string DaemonProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TestCluster::TestCluster(ClusterOptions options) : options_(std::move(options)) {
  char pattern[] = "/tmp/symmesh-test.XXXXXX";
  dir_ = mkdtemp(pattern);
  std::random_device random;
  secret_ = "secret-" + std::to_string(random()) + std::to_string(random());
  secret_file_ = dir_ + "/secret";
  write_secret_file(secret_file_, secret_);
  // A port probed free may be bound by a test running alongside before this cluster's daemon
  // binds it: such a start is retried on fresh ports, at most kStartAttempts times in all.
  constexpr int kStartAttempts = 3;
  for (int attempt = 1;; ++attempt) {
    start_daemons();
    if (!options_.wait_ready) return;
    const std::string why = until_ready(deadline_after(std::chrono::seconds(60)));
    if (why.empty()) return;
    if (attempt == kStartAttempts || why.find("Address already in use") == std::string::npos) {
      ADD_FAILURE() << why;
      return;
    }
    for (auto& daemon : daemons_) daemon->stop(SIGTERM);
  }
}

void TestCluster::start_daemons() {
  daemons_.clear();
  args_.clear();
  control_ports_.clear();
  bootstrap_port_ = free_port();
  const uint16_t bootstrap = bootstrap_port_;
  for (int n = 0; n < options_.nodes; ++n) control_ports_.push_back(free_port());
  for (int n = 0; n < options_.nodes; ++n) {
    std::vector<std::string> args = {bin_dir() + "/symmeshd",
                                     "--node-rank",
                                     std::to_string(n),
                                     "--nodes",
                                     std::to_string(options_.nodes),
                                     "--ranks-per-node",
                                     std::to_string(options_.ranks),
                                     "--bootstrap",
                                     "127.0.0.1:" + std::to_string(bootstrap),
                                     "--listen",
                                     "127.0.0.1",
                                     "--control-port",
                                     std::to_string(control_ports_[n]),
                                     "--heap-size",
                                     options_.heap_size,
                                     "--secret-file",
                                     secret_file_,
                                     "--data-dir",
                                     dir_,
                                     "--wait-timeout",
                                     "20s",
                                     "--bootstrap-timeout",
                                     "30s"};
    // Extra "--flag value" pairs replace the default value of that flag, or are appended.
    std::vector<std::string> extra = options_.extra_args;
    const auto& own = options_.node_args[n];
    extra.insert(extra.end(), own.begin(), own.end());
    for (size_t i = 0; i + 1 < extra.size(); i += 2) {
      auto it = std::find(args.begin(), args.end(), extra[i]);
      if (it != args.end()) {
        *(it + 1) = extra[i + 1];
      } else {
        args.push_back(extra[i]);
        args.push_back(extra[i + 1]);
      }
    }
    daemons_.push_back(
        std::make_unique<DaemonProcess>(args, dir_ + "/node-" + std::to_string(n) + ".log"));
    args_.push_back(args);
  }
}

TestCluster::~TestCluster() {
  for (auto& daemon : daemons_) daemon->stop(SIGTERM);
  std::filesystem::remove_all(dir_);
}

void TestCluster::wait_ready(std::chrono::seconds timeout) {
  const std::string why = until_ready(deadline_after(timeout));
  ASSERT_TRUE(why.empty()) << why;
}

std::string TestCluster::until_ready(Deadline deadline) {
  for (int n = 0; n < options_.nodes; ++n) {
    std::string last;
    for (;;) {
      if (!daemons_[n]->running()) {
        return "node " + std::to_string(n) + " exited (" + daemons_[n]->how_it_ended() + "):\n" +
               daemons_[n]->log();
      }
      try {
        // Short attempts, so a daemon that exited is noticed at once.
        const Deadline attempt = std::min(deadline, deadline_after(std::chrono::seconds(1)));
        auto connection = Client::connect(control(n), secret_, secret_file_, attempt);
        last = wire::enum_text(connection->status(attempt).state());
        if (last == "ready") break;
      } catch (const std::exception& e) {
        last = e.what();
      }
      if (Clock::now() >= deadline) {
        return "node " + std::to_string(n) + " not ready: " + last + "\n" + daemons_[n]->log();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // poll interval, bounded
    }
  }
  return "";
}

void TestCluster::restart(int node) {
  daemons_.at(node) =
      std::make_unique<DaemonProcess>(args_.at(node), dir_ + "/node-" + std::to_string(node) +
                                                          ".log." + std::to_string(++restarts_));
}

std::unique_ptr<Client> TestCluster::client(int node) {
  return Client::connect(control(node), secret_, secret_file_,
                         deadline_after(std::chrono::seconds(30)));
}

wire::JobResult TestCluster::run(const wire::JobSpec& spec, int via_node) {
  return client(via_node)->submit(spec, nullptr, deadline_after(std::chrono::seconds(300)));
}

wire::JobSpec barrier_job(const std::string& algo, uint32_t iters) {
  wire::JobSpec spec;
  if (!algo.empty())
    spec.mutable_barrier()->set_algo(wire::parse_enum<wire::BarrierAlgo>(algo, "algo"));
  spec.mutable_barrier()->set_k(2);
  spec.mutable_barrier()->set_iters(iters);
  return spec;
}

wire::JobSpec collective_job(const std::string& op, uint64_t bytes, const std::string& dtype,
                             const std::string& algo, uint32_t iters, bool verify) {
  wire::JobSpec spec;
  auto* job = spec.mutable_collective();
  job->set_op(wire::parse_enum<wire::CollectiveOp>(op, "op"));
  job->set_bytes(bytes);
  job->set_dtype(wire::parse_enum<wire::DataType>(dtype, "dtype"));
  job->set_algo(wire::parse_enum<wire::CollectiveAlgo>(algo, "algo"));
  job->set_iters(iters);
  job->set_verify(verify);
  return spec;
}

}  // namespace symmesh::testing
