// The jobs a daemon runs: every PE of the cluster runs the same body (SPMD); each PE times
// its iterations, a node reports the slowest of its PEs per iteration, and the root the
// slowest node, from which the figures are computed.
//
// A kind of job (barrier, collective, transport, matmul, MoE, session) is one JobKind in one file,
// found through one table by the spec's oneof case (job_kind_of): the daemon, the node agent
// and the coordinator ask it, never the spec's case themselves.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/cpu_budget.h"
#include "daemon/status/metrics.h"
#include "ops/fused/mode_plans.h"
#include "ops/gemm.h"
#include "runtime/cluster_shape.h"
#include "runtime/collectives/dtype.h"
#include "runtime/pe.h"
#include "wire/control.pb.h"
#include "wire/enum_text.h"
#include "wire/jobs.pb.h"

namespace symmesh {

// What the daemons' configuration supplies to jobs that leave it out.
struct JobDefaults {
  wire::BarrierAlgo barrier_algo = wire::BARRIER_ALGO_UNSPECIFIED;
  uint32_t barrier_k = 0;
  // The root's split of its CPUs over its PEs: every node runs a job with the same threads
  // (a fused operator's layout of flags depends on them).
  FusedThreads fused_threads;
};

// What one PE brings back from a job.
struct PeJobOutcome {
  std::vector<double> iteration_s;
  bool verified = true;
  double max_abs_err = 0;
  // The kind's own figures: PE 0's reach the result whole, and the root's summarize adds to
  // them. A kind with figures of its own adds its message to KindFigures (wire/jobs.proto).
  wire::KindFigures figures;
  std::vector<double> wait_by_peer_s;  // the PE's waits for each peer (Pe::peer_waits)
  double blocked_s = 0;                // all its waits
  PeerWaits::CallHistograms calls;     // its calls by the time each blocked, per op
};

// The slowest-PE fold: per iteration the slowest time, the verification of all, the largest
// error, and the waits for each peer summed. The node agent folds its PEs' outcomes, the
// coordinator its nodes' reports.
struct JobTally {
  std::vector<double> iteration_s;
  bool verified = true;
  double max_abs_err = 0;
  std::vector<double> wait_by_peer_s;

  template <class Waits>
  void add_waits(const Waits& seconds) {
    if (wait_by_peer_s.size() < size_t(seconds.size())) {
      wait_by_peer_s.resize(seconds.size(), 0.0);
    }
    for (size_t i = 0; i < size_t(seconds.size()); ++i) wait_by_peer_s[i] += seconds[i];
  }

  template <class Times>
  void add(const Times& times, bool ok, double abs_err) {
    if (iteration_s.size() < size_t(times.size())) iteration_s.resize(times.size(), 0.0);
    for (size_t i = 0; i < size_t(times.size()); ++i) {
      iteration_s[i] = std::max(iteration_s[i], double(times[i]));
    }
    verified = verified && ok;
    max_abs_err = std::max(max_abs_err, abs_err);
  }
};

class JobKind {
 public:
  virtual ~JobKind() = default;
  // What the wire calls a job of this spec (a MoE spec is a dispatch or a combine).
  virtual wire::JobKind wire_kind(const wire::JobSpec& spec) const = 0;
  // Fills what the job left to the cluster's configuration (recorded with the job).
  virtual void fill_defaults(wire::JobSpec&, const JobDefaults&) const {}
  // Refuses a spec the cluster cannot run, naming the field and the allowed values.
  virtual void check(const wire::JobSpec& spec, const ClusterShape& shape) const = 0;
  // The job's file paths with the flags that name them (confined to the data directory).
  virtual std::vector<std::pair<std::string*, std::string>> paths(wire::JobSpec&) const {
    return {};
  }
  // Host memory one PE takes outside the symmetric heap (inputs, outputs, reference).
  virtual uint64_t pe_host_bytes(const wire::JobSpec&, int /*pes*/) const { return 0; }
  virtual bool verify_requested(const wire::JobSpec&) const { return false; }
  virtual PeJobOutcome run_on_pe(Pe& pe, const wire::JobSpec& spec) const = 0;
  // The kind's own metrics from this node's per-iteration times (slowest local PE each).
  virtual void record_metrics(Metrics&, const std::vector<double>& /*iteration_s*/) const {}
  // The kind's fields of `result` given the median: op, algo, dtype, and the figures the
  // cluster's times give (bytes, bandwidths); PE 0's figures are already there.
  virtual void summarize(const wire::JobSpec& spec, const ClusterShape& shape, double median_s,
                         wire::JobResult& result) const = 0;
};

// The kind of `spec`; throws InvalidArgument when it names none.
const JobKind& job_kind_of(const wire::JobSpec& spec);
// Each kind (one file each).
const JobKind& barrier_job_kind();
const JobKind& collective_job_kind();
const JobKind& transport_job_kind();
const JobKind& matmul_job_kind();
const JobKind& moe_job_kind();
const JobKind& session_job_kind();

void check_job_spec(const wire::JobSpec& spec, const ClusterShape& shape);
// Fills the figures of `result` from the per-iteration times of the whole cluster.
void summarize_job(const wire::JobSpec& spec, const ClusterShape& shape,
                   const std::vector<double>& iteration_s, wire::JobResult& result);
// The waits of `result`: each peer's (summed over PEs), each PE's, and the straggler.
void summarize_waits(const std::vector<double>& wait_by_peer_s,
                     const std::vector<double>& blocked_s, wire::JobResult& result);
// Refuses an iteration count outside 1..max, naming --iters.
void check_iterations(uint32_t iters, uint32_t max);
// The runtime's element type for the wire's (`unset` when the field is); throws
// InvalidArgument naming the allowed ones for a number DType does not cover.
DType dtype_of(wire::DataType dtype, DType unset);
// The runtime's reduction for the wire's (unset: sum); throws InvalidArgument as dtype_of.
ReduceOp reduce_of(wire::Reduction op);
// The daemon's GEMM: one oneDNN primitive cache for its whole life, shared by its PEs and jobs.
Gemm& daemon_gemm();
// The daemon's fused-mode plans (`--mode auto`), shared by its PEs, jobs and sessions.
FusedModePlans& daemon_fused_plans();

}  // namespace symmesh
