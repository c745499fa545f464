// Jobs as the control port hands them in: checked here, then queued at the root's
// coordinator (directly on node 0, relayed over the link elsewhere).
#include <spdlog/spdlog.h>

#include "common/errors.h"
#include "daemon/daemon.h"
#include "daemon/jobs/data_paths.h"
#include "daemon/jobs/host_memory.h"
#include "daemon/jobs/job.h"

namespace symmesh {

wire::JobSpec Daemon::with_defaults(wire::JobSpec spec) const {
  job_kind_of(spec).fill_defaults(
      spec, JobDefaults{config_.barrier_algo, uint32_t(config_.barrier_k), fused_threads_});
  return spec;
}

ControlServer::Abandon Daemon::submit(const wire::JobSpec& spec, ControlServer::Sink sink) {
  if (const wire::DaemonState state = loop_->state();
      state != wire::DAEMON_STATE_READY && state != wire::DAEMON_STATE_DEGRADED) {
    throw PeerError(
        std::string("the cluster is not serving (state: ") + wire::enum_text(state) + "); " +
        (membership_.problems().empty() ? "try again once it is ready" : membership_.problems()));
  }
  // Checked here for the client's sake; every node checks its own paths again before it runs.
  const wire::JobSpec confined = confine_job_paths(spec, data_dir_);
  check_job_spec(confined, ClusterShape{config_.nodes, config_.ranks_per_node});
  check_job_memory(confined, config_.nodes, config_.ranks_per_node, job_memory_);
  // A job needs every node: with one not up it would only wait for it, so it fails now.
  if (!membership_.all_up()) {
    throw PeerError("a job needs every node, and " + membership_.problems() +
                    " (a restarted node joins again by itself)");
  }
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
  wire::ClientRequest request;
  *request.mutable_submit() = spec;
  return relay_.to_root(request, std::move(sink));
}

void Daemon::wait(uint64_t job_id, ControlServer::Sink sink) {
  if (!is_root()) {
    throw InvalidArgument("jobs live at the root, node 0 (its control port is in symmesh status)");
  }
  coordinator_->watch(job_id, std::move(sink));
}

wire::JobRecord Daemon::job(uint64_t job_id, bool trace) {
  if (!is_root()) {
    throw InvalidArgument("jobs live at the root, node 0 (its control port is in symmesh status)");
  }
  return coordinator_->job(job_id, trace);
}

wire::JobRecord Daemon::cancel(uint64_t job_id) {
  if (!is_root()) {
    throw InvalidArgument(
        "jobs are cancelled at the root, node 0 (its control port is in symmesh status)");
  }
  return coordinator_->cancel(job_id);
}

}  // namespace symmesh
