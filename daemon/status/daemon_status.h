// What a daemon says about itself: `symmesh status` and the status endpoint's /status, /health
// and /metrics. It reads the daemon's parts (the formation loop, the membership, the node, the
// coordinator, the servers) and holds nothing of its own but the address it is served at.
#pragma once

#include <mutex>
#include <string>

#include "common/cpu_binding.h"
#include "common/cpu_budget.h"
#include "daemon/attach/attach_server.h"
#include "daemon/config.h"
#include "daemon/control_server.h"
#include "daemon/coordinator.h"
#include "daemon/formation_loop.h"
#include "daemon/membership.h"
#include "daemon/status/metrics.h"
#include "daemon/status/status_server.h"
#include "runtime/node.h"
#include "transport/wait.h"
#include "wire/jobs.pb.h"

namespace symmesh {

class DaemonStatus {
 public:
  // What it reads; all outlive it.
  struct Sources {
    const DaemonConfig& config;
    uint64_t incarnation;
    Clock::time_point started;
    double started_unix_s;
    const CpuBudget& cpu_budget;
    const FusedThreads& fused_threads;
    const CpuPlacement& cpus;
    Node& node;
    Membership& membership;
    FormationLoop& loop;
    Metrics& metrics;
    Coordinator* coordinator;  // the root's; null on a member
    ControlServer& control;
    AttachServer& attach;
  };

  explicit DaemonStatus(Sources sources) : sources_(std::move(sources)) {}

  // The status endpoint's URL, once it serves.
  void served_at(std::string url);
  std::string url();

  wire::StatusReply status();
  StatusServer::Health health();
  std::string metrics_text();

 private:
  const Sources sources_;
  std::mutex mutex_;
  std::string url_;
};

}  // namespace symmesh
