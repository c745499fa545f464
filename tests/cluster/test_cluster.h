// Real symmeshd processes on loopback for the multi-daemon tests: started with a fresh
// secret and free ports, waited for (status "ready", with a deadline), stopped at the end.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/client.h"
#include "wire/enum_text.h"

namespace symmesh::testing {

uint16_t free_port();
std::string bin_dir();

class DaemonProcess {
 public:
  DaemonProcess(const std::vector<std::string>& args, const std::string& log_path);
  ~DaemonProcess();
  pid_t pid() const { return pid_; }
  bool running();
  // Sends `signal` and waits (bounded) for the exit; returns the exit status (-1 if killed).
  int stop(int signal, std::chrono::seconds timeout = std::chrono::seconds(20));
  std::string log() const;
  const std::string& how_it_ended() const { return how_; }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  int status_ = -1;
  bool exited_ = false;
  std::string how_ = "running";
};

struct ClusterOptions {
  int nodes = 2;
  int ranks = 2;
  std::string heap_size = "64MiB";
  std::vector<std::string> extra_args;
  // Per-node extra args (bad-input tests give one node a different value).
  std::map<int, std::vector<std::string>> node_args;
  bool wait_ready = true;
};

inline ClusterOptions shape(int nodes, int ranks) {
  ClusterOptions options;
  options.nodes = nodes;
  options.ranks = ranks;
  return options;
}

class TestCluster {
 public:
  explicit TestCluster(ClusterOptions options);
  ~TestCluster();

  // Waits (bounded) until every node reports "ready"; fails the test otherwise.
  void wait_ready(std::chrono::seconds timeout = std::chrono::seconds(60));
  std::unique_ptr<Client> client(int node = 0);
  HostPort control(int node) const { return HostPort{"127.0.0.1", control_ports_.at(node)}; }
  HostPort bootstrap() const { return HostPort{"127.0.0.1", bootstrap_port_}; }
  const std::string& secret() const { return secret_; }
  const std::string& secret_file() const { return secret_file_; }
  const std::string& dir() const { return dir_; }
  DaemonProcess& daemon(int node) { return *daemons_.at(node); }
  // Starts node `node` again with the command line it had (after it was killed); its log
  // goes to node-N.log.K for the K-th restart.
  void restart(int node);
  wire::JobResult run(const wire::JobSpec& spec, int via_node = 0);

 private:
  // Picks fresh ports and starts every node's daemon.
  void start_daemons();
  // "" once every node reports "ready"; else what went wrong, with the node's log.
  std::string until_ready(Deadline deadline);

  ClusterOptions options_;
  std::string dir_;
  std::string secret_;
  std::string secret_file_;
  std::vector<uint16_t> control_ports_;
  uint16_t bootstrap_port_ = 0;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
  std::vector<std::vector<std::string>> args_;  // each node's command line
  int restarts_ = 0;
};

// The real symmesh CLI: its exit code and everything it printed (stdout and stderr).
struct CliRun {
  int exit_code;
  std::string out;
};
CliRun cli(const std::string& args);
// A shell command's exit code and everything it printed (stdout and stderr).
CliRun shell(const std::string& command);
// Writes `secret` (and a newline) to `path` with mode 0600, as symmeshd and the CLI demand.
void write_secret_file(const std::string& path, const std::string& secret);
// "--daemon HOST:PORT --secret-file F" for `node` of `cluster`.
std::string target(TestCluster& cluster, int node = 0);
// `symmesh launch OPTIONS -- COMMAND` against each of the first `nodes` nodes at once; each
// node's run.
std::vector<CliRun> launch_on_every_node(TestCluster& cluster, const std::string& command,
                                         int nodes = 2, const std::string& options = "");
// Submits `submit_args` (after "submit", with --json added) through the CLI and returns the
// job id; a failed submission fails the test and returns 0.
uint64_t submit_job(TestCluster& cluster, const std::string& submit_args);
// The id of the first job of `kind` in `state` in `symmesh jobs --json` asked of `node`, or 0.
uint64_t find_job(TestCluster& cluster, const std::string& kind, const std::string& state,
                  int node = 0);
// Polls (bounded in count and time) until such a job is listed; returns its id, or 0.
uint64_t wait_for_job(TestCluster& cluster, const std::string& kind, const std::string& state);

wire::JobSpec barrier_job(const std::string& algo, uint32_t iters);
wire::JobSpec collective_job(const std::string& op, uint64_t bytes, const std::string& dtype,
                             const std::string& algo, uint32_t iters = 2, bool verify = true);

}  // namespace symmesh::testing
