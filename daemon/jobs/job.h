// The jobs a daemon runs: every PE of the cluster runs the same body (SPMD); each PE times
// its iterations, a node reports the slowest of its PEs per iteration, and the root the
// slowest node, from which the figures are computed.
#pragma once

#include <optional>
#include <vector>

#include "runtime/pe.h"
#include "wire/jobs.pb.h"

namespace symmesh {

struct PeJobOutcome {
  std::vector<double> iteration_s;
  bool verified = true;
  double max_abs_err = 0;
  std::optional<wire::MatmulFigures> matmul;
  std::optional<wire::MoeFigures> moe;
};

// Refuses a spec the cluster cannot run, naming the field and the allowed values.
void check_job_spec(const wire::JobSpec& spec, int nodes, int ranks_per_node);
// barrier, collective, transport, matmul, dispatch or combine.
std::string job_kind(const wire::JobSpec& spec);

PeJobOutcome run_job_on_pe(Pe& pe, const wire::JobSpec& spec);

// Fills the figures of `result` from the per-iteration times of the whole cluster.
void summarize_job(const wire::JobSpec& spec, int nodes, int ranks_per_node,
                   const std::vector<double>& iteration_s, wire::JobResult& result);

// The algorithm a collective job runs ("auto" resolved).
std::string collective_algo(const wire::CollectiveJob& job, int nodes, int ranks_per_node);

PeJobOutcome run_barrier_job(Pe& pe, const wire::BarrierJob& job);
PeJobOutcome run_collective_job(Pe& pe, const wire::CollectiveJob& job);
PeJobOutcome run_transport_job(Pe& pe, const wire::TransportJob& job);
PeJobOutcome run_matmul_job(Pe& pe, const wire::MatmulJob& job);
// Refuses a matmul job the cluster cannot run (the fields, modes, files named).
void check_matmul_job(const wire::MatmulJob& job, int n_pes);
PeJobOutcome run_moe_job(Pe& pe, const wire::MoeJob& job);
void check_moe_job(const wire::MoeJob& job, int nodes, int ranks_per_node);
// The transport PE 0 uses to reach a transport job's partner PE.
std::string transport_between(Pe& pe);

}  // namespace symmesh
