#include "daemon/config.h"

#include <toml++/toml.h>
#include <CLI/CLI.hpp>

#include <functional>
#include <map>

#include "common/errors.h"
#include "common/units.h"

namespace symmesh {
namespace {

// The daemon's keys, as flags (--KEY) and as TOML keys (KEY = value), with how to apply one.
struct Key {
  std::string help;
  std::function<void(DaemonConfig&, const std::string&)> apply;
};

int parse_int(const std::string& text, const std::string& what, int low, int high) {
  return static_cast<int>(parse_count(text, what, uint64_t(low), uint64_t(high)));
}

std::map<std::string, Key> keys() {
  return {
      {"node-rank",
       {"this node's rank (0 is the bootstrap root)",
        [](DaemonConfig& c, const std::string& v) {
          c.node_rank = parse_int(v, "--node-rank", 0, 511);
        }}},
      {"nodes",
       {"number of nodes (daemons) in the cluster",
        [](DaemonConfig& c, const std::string& v) { c.nodes = parse_int(v, "--nodes", 1, 512); }}},
      {"ranks-per-node",
       {"ranks (PEs) hosted by each daemon",
        [](DaemonConfig& c, const std::string& v) {
          c.ranks_per_node = parse_int(v, "--ranks-per-node", 1, 256);
        }}},
      {"bootstrap",
       {"HOST:PORT of the root's bootstrap listener",
        [](DaemonConfig& c, const std::string& v) {
          c.bootstrap = parse_host_port(v, "--bootstrap");
        }}},
      {"listen",
       {"address for the data and control listeners",
        [](DaemonConfig& c, const std::string& v) { c.listen = v; }}},
      {"control-port",
       {"port of the control (CLI) listener",
        [](DaemonConfig& c, const std::string& v) {
          c.control_port = static_cast<uint16_t>(parse_int(v, "--control-port", 0, 65535));
        }}},
      {"status-addr",
       {"HOST:PORT of the HTTP status endpoint (/health, /status, /metrics): loopback by "
        "default, port 0 picks a free one; off disables it",
        [](DaemonConfig& c, const std::string& v) {
          c.status_addr =
              v == "off" ? std::nullopt : std::optional(parse_host_port(v, "--status-addr"));
        }}},
      {"transport",
       {"auto, tcp or verbs: the transport between nodes",
        [](DaemonConfig& c, const std::string& v) {
          c.transport = wire::parse_enum<wire::TransportChoice>(v, "--transport");
        }}},
      {"heap-size",
       {"symmetric heap per node (KiB, MiB, GiB suffixes)",
        [](DaemonConfig& c, const std::string& v) { c.heap_size = parse_size(v, "--heap-size"); }}},
      {"secret-file",
       {"file holding the cluster secret (required)",
        [](DaemonConfig& c, const std::string& v) { c.secret_file = v; }}},
      {"data-dir",
       {"the only directory jobs' --inputs, --output and --routing files may be in (relative "
        "paths are taken from it; default: $STATE_DIRECTORY/data under systemd, "
        "/var/lib/symmesh/data for root, ~/.local/state/symmesh/data otherwise)",
        [](DaemonConfig& c, const std::string& v) { c.data_dir = v; }}},
      {"attach-dir",
       {"directory (made mode 0700) of the socket processes attach through as this node's PEs "
        "(default: <data dir>/attach-node<rank>)",
        [](DaemonConfig& c, const std::string& v) { c.attach_dir = v; }}},
      {"attach-uid",
       {"a uid besides the daemon's own that may attach processes (repeat with commas: 1001,1002)",
        [](DaemonConfig& c, const std::string& v) {
          size_t at = 0;
          while (at <= v.size()) {
            const size_t comma = std::min(v.find(',', at), v.size());
            c.attach_uids.push_back(
                unsigned(parse_count(v.substr(at, comma - at), "--attach-uid", 0, UINT32_MAX - 1)));
            at = comma + 1;
          }
        }}},
      {"job-memory",
       {"host memory a job may take on this node outside the heap (inputs, outputs, reference; "
        "KiB, MiB, GiB suffixes; default: half the machine's memory)",
        [](DaemonConfig& c, const std::string& v) {
          c.job_memory = parse_size(v, "--job-memory");
        }}},
      {"tcp-connections",
       {"TCP data connections per node pair (1..16)",
        [](DaemonConfig& c, const std::string& v) {
          c.tcp_connections = parse_int(v, "--tcp-connections", 1, 16);
        }}},
      {"wait-timeout",
       {"deadline of every wait (for example 60s)",
        [](DaemonConfig& c, const std::string& v) {
          c.wait_timeout = parse_duration(v, "--wait-timeout");
        }}},
      {"bootstrap-timeout",
       {"how long the root waits for every node (for example 60s)",
        [](DaemonConfig& c, const std::string& v) {
          c.bootstrap_timeout = parse_duration(v, "--bootstrap-timeout");
        }}},
      {"heartbeat",
       {"interval of the heartbeats on idle links (for example 1s); a node silent for 2 is "
        "suspect, for 3 down",
        [](DaemonConfig& c, const std::string& v) {
          c.heartbeat = parse_duration(v, "--heartbeat");
          if (c.heartbeat.count() < 10) {
            throw InvalidArgument("--heartbeat " + v + " is below the 10ms allowed");
          }
        }}},
      {"rejoin-timeout",
       {"how long a node retries the root after losing it before it exits (for example 120s)",
        [](DaemonConfig& c, const std::string& v) {
          c.rejoin_timeout = parse_duration(v, "--rejoin-timeout");
        }}},
      {"barrier-algo",
       {"default barrier algorithm: auto (one round among node leaders), dissemination, kary or "
        "pull",
        [](DaemonConfig& c, const std::string& v) {
          c.barrier_algo = wire::parse_enum<wire::BarrierAlgo>(v, "--barrier-algo");
        }}},
      {"barrier-k",
       {"radix of the kary barrier (2..16)",
        [](DaemonConfig& c, const std::string& v) {
          c.barrier_k = parse_int(v, "--barrier-k", 2, 16);
        }}},
      {"rdma-device",
       {"RDMA device for the verbs transport (default: the first with an active port)",
        [](DaemonConfig& c, const std::string& v) { c.rdma_device = v; }}},
      {"rdma-gid-index",
       {"GID index for RoCE (default: a RoCE v2 IPv4-mapped GID, never link-local)",
        [](DaemonConfig& c, const std::string& v) {
          c.rdma_gid_index = parse_int(v, "--rdma-gid-index", 0, 255);
        }}},
      {"verbs-progress",
       {"who drains verbs send completions: pe (the posting PE) or thread (also a node thread)",
        [](DaemonConfig& c, const std::string& v) {
          c.verbs_progress = wire::parse_enum<wire::VerbsProgress>(v, "--verbs-progress");
        }}},
      {"cpu-bind",
       {"none (the default: PE threads run where the scheduler puts them) or core (each PE "
        "thread bound to one of the CPUs the daemon may use, as MPI's --bind-to core; left "
        "unbound when the daemon has more PEs than CPUs)",
        [](DaemonConfig& c, const std::string& v) {
          c.cpu_bind = wire::parse_enum<wire::CpuBind>(v, "--cpu-bind");
        }}},
      {"cpus",
       {"CPUs this daemon's jobs are sized for (default: what the machine gives it: its "
        "affinity mask, capped by its cgroup's CPU quota); the fused operators' default "
        "threads split them over the PEs. Give each daemon its share when several share a host",
        [](DaemonConfig& c, const std::string& v) { c.cpus = parse_int(v, "--cpus", 1, 4096); }}},
      {"log-level",
       {"trace, debug, info, warn or error",
        [](DaemonConfig& c, const std::string& v) {
          if (v != "trace" && v != "debug" && v != "info" && v != "warn" && v != "error") {
            throw InvalidArgument("--log-level '" + v +
                                  "' is not one of: trace, debug, info, warn, error");
          }
          c.log_level = v;
        }}},
  };
}

std::string toml_value_text(const toml::node& node, const std::string& key) {
  if (auto s = node.value<std::string>()) return *s;
  if (auto i = node.value<int64_t>()) return std::to_string(*i);
  throw InvalidArgument("config key '" + key + "' must be a string or an integer");
}

}  // namespace

std::optional<DaemonConfig> parse_daemon_config(int argc, char** argv) {
  const auto all = keys();
  CLI::App app{"symmeshd: the symmesh node daemon"};
  std::string config_file;
  app.add_option("--config", config_file, "TOML file with the same keys as the flags");
  std::map<std::string, std::string> given;
  for (const auto& [name, key] : all) app.add_option("--" + name, given[name], key.help);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw InvalidArgument(std::string(e.what()) + " (see symmeshd --help)");
  }

  DaemonConfig config;
  if (!config_file.empty()) {
    toml::table table;
    try {
      table = toml::parse_file(config_file);
    } catch (const toml::parse_error& e) {
      throw InvalidArgument("config file '" + config_file + "': " + std::string(e.description()));
    }
    for (const auto& [toml_key, node] : table) {
      const std::string key(toml_key.str());
      auto it = all.find(key);
      if (it == all.end()) {
        std::string known;
        for (const auto& [name, unused] : all) known += (known.empty() ? "" : ", ") + name;
        throw InvalidArgument("config file '" + config_file + "': unknown key '" + key +
                              "' (known keys: " + known + ")");
      }
      if (app.count("--" + key) == 0) it->second.apply(config, toml_value_text(node, key));
    }
  }
  for (const auto& [name, key] : all) {
    if (app.count("--" + name) > 0) key.apply(config, given[name]);
  }
  if (config.secret_file.empty()) {
    throw InvalidArgument(
        "--secret-file is required: every node of a cluster proves it knows "
        "the same secret");
  }
  if (config.node_rank >= config.nodes) {
    throw InvalidArgument("--node-rank " + std::to_string(config.node_rank) + " is outside 0.." +
                          std::to_string(config.nodes - 1) + " (--nodes " +
                          std::to_string(config.nodes) + ")");
  }
  return config;
}

}  // namespace symmesh
