// The MoE jobs: dispatch, or combine after an untimed dispatch, through ops/moe/runner.
#include <filesystem>

#include "daemon/jobs/job.h"
#include "ops/moe/runner.h"

namespace symmesh {
namespace {

MoeJob moe_job(const wire::MoeJob& w) {
  MoeJob job;
  if (w.op() != "dispatch" && w.op() != "combine") {
    throw InvalidArgument("MoE op '" + w.op() + "': allowed dispatch, combine");
  }
  job.op = w.op() == "dispatch" ? MoeOp::kDispatch : MoeOp::kCombine;
  MoeOptions& o = job.options;
  o.tokens = int64_t(w.tokens());
  o.hidden = int64_t(w.hidden());
  o.topk = int(w.topk());
  o.experts = int(w.experts());
  o.weighting = parse_moe_weighting(w.weighting().empty() ? "topk" : w.weighting());
  o.biases = int(w.biases());
  o.partial_dtype = parse_dtype(w.partial_dtype().empty() ? "bf16" : w.partial_dtype());
  if (w.channels()) o.channels = int(w.channels());
  o.algo = parse_moe_algo(w.algo().empty() ? "hier" : w.algo());
  if (w.chunk_tokens()) o.chunk_tokens = w.chunk_tokens();
  if (w.nvl_ring_tokens()) o.nvl_ring_tokens = w.nvl_ring_tokens();
  if (w.rdma_ring_tokens()) o.rdma_ring_tokens = w.rdma_ring_tokens();
  job.inputs.seed = w.seed() ? w.seed() : 1;
  job.inputs.dir = w.inputs();
  job.routing = parse_routing(w.routing().empty() ? "uniform" : w.routing(), job.inputs.seed);
  job.iters = int(w.iters());
  job.verify = w.verify();
  job.output_dir = w.output();
  return job;
}

}  // namespace

void check_moe_job(const wire::MoeJob& job, int nodes, int ranks_per_node) {
  validate(moe_job(job).options, nodes, ranks_per_node);
  if (job.iters() < 1 || job.iters() > 1000) {
    throw InvalidArgument("--iters " + std::to_string(job.iters()) + " is outside 1..1000");
  }
}

PeJobOutcome run_moe_job(Pe& pe, const wire::MoeJob& w) {
  const MoeJob job = moe_job(w);
  if (!job.output_dir.empty()) std::filesystem::create_directories(job.output_dir);
  const MoeReport r = run_moe_job(pe, job);
  PeJobOutcome outcome;
  outcome.iteration_s.push_back(r.median_s);
  outcome.verified = r.verified;
  outcome.max_abs_err = r.max_abs_err;
  wire::MoeFigures& f = outcome.moe.emplace();
  f.set_tolerance(r.tolerance);
  f.set_deterministic(r.deterministic);
  f.set_tokens_per_s(r.tokens_per_s);
  f.set_algbw_gbps(r.algbw_gbps);
  f.set_inter_node_bytes(r.inter_node_bytes);
  f.set_intra_node_bytes(r.intra_node_bytes);
  f.set_flat_inter_node_bytes(r.flat_inter_node_bytes);
  f.set_weighting(moe_weighting_name(job.options.weighting));
  f.set_partial_dtype(dtype_name(job.options.partial_dtype));
  return outcome;
}

}  // namespace symmesh
