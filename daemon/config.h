// symmeshd's configuration: command-line flags (CLI11) and the same keys in a TOML file
// (--config, toml++); a flag given on the command line wins over the file.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "transport/channel.h"
#include "wire/bootstrap.pb.h"
#include "wire/enum_text.h"
#include "wire/jobs.pb.h"

namespace symmesh {

struct DaemonConfig {
  int node_rank = 0;
  int nodes = 1;
  int ranks_per_node = 1;
  HostPort bootstrap{"127.0.0.1", 7399};
  std::string listen = "127.0.0.1";
  uint16_t control_port = 7400;
  // The HTTP status endpoint; nullopt: off. Port 0: a free port, logged and in `symmesh status`.
  std::optional<HostPort> status_addr = HostPort{"127.0.0.1", 0};
  wire::TransportChoice transport = wire::TRANSPORT_CHOICE_AUTO;
  uint64_t heap_size = uint64_t{256} << 20;
  std::string secret_file;
  std::string data_dir;               // empty: default_data_dir()
  uint64_t job_memory = 0;            // host memory a job may use per node; 0: default_job_memory()
  std::string attach_dir;             // empty: <data dir>/attach-node<rank>
  std::vector<unsigned> attach_uids;  // who may attach besides the daemon's own uid
  int tcp_connections = 2;
  std::chrono::milliseconds wait_timeout{60000};
  std::chrono::milliseconds bootstrap_timeout{60000};
  // Links send a heartbeat when idle this long; a node silent for 2 is suspect, for 3 down.
  std::chrono::milliseconds heartbeat{1000};
  // How long a node retries the root after losing it (the root restarting) before it exits.
  std::chrono::milliseconds rejoin_timeout{120000};
  std::string log_level = "info";
  wire::BarrierAlgo barrier_algo = wire::BARRIER_ALGO_AUTO;  // the default barrier
  int barrier_k = 8;
  std::string rdma_device;  // empty: the first device with an active port
  int rdma_gid_index = -1;  // -1: chosen automatically (a RoCE v2 IPv4-mapped GID)
  wire::VerbsProgress verbs_progress = wire::VERBS_PROGRESS_PE;  // who drains send completions
  wire::CpuBind cpu_bind = wire::CPU_BIND_NONE;
  int cpus = 0;  // CPUs jobs are sized for; 0: from the machine
};

// Parses argv. Returns nullopt after printing --help. Throws InvalidArgument naming the
// flag or key that was wrong and what is allowed.
std::optional<DaemonConfig> parse_daemon_config(int argc, char** argv);

}  // namespace symmesh
